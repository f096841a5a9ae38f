//! `docker container ...`: what the container family of an API asks of the
//! engine beyond a plain command for the core (which goes through
//! [`EngineHandle::container_command`]): a create, reads of containers as
//! `inspect` and `ps` show them, and the commands that need more than the
//! core (a removal with its volumes, a rename with its peers' hosts files).
//! Their logs and attach are in `streams.rs`, their files in `files.rs`,
//! their processes in `processes.rs`, what they take on disk in
//! `sizes.rs`.

mod changes;
mod create;
mod files;
mod processes;
mod sizes;
mod streams;

pub use create::{Created, NewContainer};
pub use files::Archive;
pub use processes::StatsSource;
pub use sizes::{SizeMeter, Sizes};
pub use streams::{AttachOptions, Attached, LogStream};

use crate::engine::{EngineHandle, View};
use crate::refusal::conflict;
use holdfast_core::{
    Answer, Command, ContainerId, ContainerView, Endpoint, ErrorKind, Health, NetworkState, Record,
    RequestError, ResourceUpdate, RestartPolicy, Status, TaskState,
};
use std::path::PathBuf;

/// The containers backend: see the module docs.
#[derive(Debug)]
pub struct Containers<'a> {
    engine: &'a EngineHandle,
}

/// A container as a read of the core showed it.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub record: Record,
    pub status: Status,
    pub task: TaskState,
    pub confirmed: bool,
    /// Running with its processes frozen (`docker pause`).
    pub paused: bool,
    /// The health of its current or last run, with a health check.
    pub health: Option<Health>,
}

impl Snapshot {
    fn of(view: &View<'_>, c: ContainerView<'_>) -> Snapshot {
        Snapshot {
            record: c.record.clone(),
            status: c.status,
            task: c.task,
            confirmed: c.confirmed,
            paused: c.paused,
            health: view.core.health(&c.record.id).cloned(),
        }
    }

    /// dockerd's state name: "paused" for a paused running container.
    pub fn state_name(&self) -> &'static str {
        if self.paused {
            "paused"
        } else {
            self.status.as_str()
        }
    }

    /// The pid of its init while it runs; 0 otherwise.
    pub fn running_pid(&self) -> u32 {
        match (self.status, self.task) {
            (Status::Running, TaskState::Running { pid } | TaskState::Created { pid }) => pid,
            (Status::Running, TaskState::Unknown) => self.record.pid.unwrap_or(0),
            _ => 0,
        }
    }
}

/// What a network attachment gave a container, as the core's record of it
/// says (never the executor's own files).
#[derive(Clone, Debug)]
pub struct Attachment {
    pub ip: Option<std::net::Ipv4Addr>,
    pub prefix_len: u8,
    pub gateway: Option<std::net::Ipv4Addr>,
    pub mac: Option<String>,
    pub endpoint_id: String,
    /// Published ports, with the host port each got.
    pub ports: Vec<holdfast_core::PortBinding>,
    /// The names peers on a user network find it by: its name, its
    /// aliases there and its short id (none on the default network).
    pub names: Vec<String>,
    /// The network's id.
    pub network_id: String,
}

impl Attachment {
    fn of(
        a: &holdfast_core::Allocation,
        user_network: bool,
        record: &holdfast_core::Record,
        aliases: &[String],
        network_id: String,
    ) -> Attachment {
        let mut names = Vec::new();
        if user_network {
            names.push(record.name.clone());
            names.extend(aliases.iter().cloned());
            names.push(record.id.as_str().chars().take(12).collect());
            names.dedup();
        }
        Attachment {
            ip: a.ip,
            prefix_len: a.prefix_len,
            gateway: a.gateway,
            mac: a.mac.clone(),
            endpoint_id: a.endpoint_id.clone(),
            ports: a.ports.clone(),
            names,
            network_id,
        }
    }
}

/// A container as `inspect` shows it: its snapshot, and what its network
/// attachments gave.
#[derive(Clone, Debug)]
pub struct ContainerDetails {
    pub snapshot: Snapshot,
    /// Its json-file log.
    pub log_path: PathBuf,
    /// Its attachment to the network it was created on, if it has one now.
    pub attachment: Option<Attachment>,
    /// The default bridge network's bridge.
    pub default_bridge: String,
    /// The networks it was connected to after its create.
    pub endpoints: Vec<EndpointDetails>,
    /// What is bound at its `/etc/hosts` and `/etc/resolv.conf` (the
    /// host's own for `--network host`; none known for `none` and a
    /// shared namespace).
    pub hosts_path: Option<PathBuf>,
    pub resolv_conf_path: Option<PathBuf>,
    /// What is bound at its `/etc/hostname`, once its create wrote it.
    pub hostname_path: Option<PathBuf>,
}

/// A network a container was connected to (`docker network connect`).
#[derive(Clone, Debug)]
pub struct EndpointDetails {
    pub endpoint: Endpoint,
    /// What its attachment gave, once made.
    pub attachment: Option<Attachment>,
    /// The network's id (empty when the network is gone).
    pub network_id: String,
}

impl<'a> Containers<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Containers<'a> {
        Containers { engine }
    }

    /// The container a reference names (name, full id or unique id prefix),
    /// resolved and read in one step of the loop.
    pub async fn snapshot(&self, reference: &str) -> Result<Snapshot, RequestError> {
        let reference = reference.to_owned();
        self.engine
            .read(move |v| {
                let id = v.core.resolve(&reference)?;
                v.core
                    .container(&id)
                    .map(|c| Snapshot::of(v, c))
                    .ok_or_else(|| {
                        RequestError::new(ErrorKind::NotFound, format!("No such container: {id}"))
                    })
            })
            .await?
    }

    /// The container `id` is, as a read showed it.
    pub(crate) async fn snapshot_of(&self, id: &ContainerId) -> Result<Snapshot, RequestError> {
        let wanted = id.clone();
        self.engine
            .read(move |v| v.core.container(&wanted).map(|c| Snapshot::of(v, c)))
            .await?
            .ok_or_else(|| {
                RequestError::new(ErrorKind::NotFound, format!("No such container: {id}"))
            })
    }

    /// Every container, as one read showed them.
    pub async fn snapshots(&self) -> Result<Vec<Snapshot>, RequestError> {
        let all = self
            .engine
            .read(|v| {
                v.core
                    .containers()
                    .map(|c| Snapshot::of(v, c))
                    .collect::<Vec<_>>()
            })
            .await?;
        Ok(all)
    }

    /// `docker inspect`: the container a reference names, with what its
    /// network attachments gave (from the core's records).
    pub async fn inspect(&self, reference: &str) -> Result<ContainerDetails, RequestError> {
        let snapshot = self.snapshot(reference).await?;
        let ids = self.network_ids().await?;
        let network = &self.engine.services.network;
        let r = &snapshot.record;
        let id_of = |name: &str| ids.get(name).cloned().unwrap_or_default();
        let endpoints = r
            .endpoints
            .iter()
            .filter(|e| e.wanted)
            .map(|e| {
                let user = e.network != network.name();
                let attachment = (e.state == NetworkState::Attached)
                    .then_some(e.allocation.as_ref())
                    .flatten()
                    .map(|a| Attachment::of(a, user, r, &e.aliases, id_of(&e.network)));
                EndpointDetails {
                    endpoint: e.clone(),
                    attachment,
                    network_id: id_of(&e.network),
                }
            })
            .collect();
        let (hosts_path, resolv_conf_path) = match r.config.network {
            holdfast_core::NetworkMode::Bridge => {
                let (hosts, own_resolver) = network.container_files(&r.id);
                let resolver = own_resolver.unwrap_or_else(|| PathBuf::from("/etc/resolv.conf"));
                (hosts, Some(resolver))
            }
            holdfast_core::NetworkMode::Host => (
                Some(PathBuf::from("/etc/hosts")),
                Some(PathBuf::from("/etc/resolv.conf")),
            ),
            holdfast_core::NetworkMode::None | holdfast_core::NetworkMode::Container => {
                (None, None)
            }
        };
        let hostname_path =
            Some(self.engine.services.adapter.hostname_path(&r.id)).filter(|p| p.exists());
        Ok(ContainerDetails {
            hosts_path,
            resolv_conf_path,
            hostname_path,
            log_path: self.engine.services.adapter.log_path(&r.id),
            attachment: attachment_of(&snapshot, &ids, network.name()),
            default_bridge: network.name().to_owned(),
            endpoints,
            snapshot,
        })
    }

    /// Every bridge network's id, by name: the default's and those the
    /// core has recorded.
    pub(crate) async fn network_ids(
        &self,
    ) -> Result<std::collections::BTreeMap<String, String>, RequestError> {
        let mut ids = self
            .engine
            .read(|v| {
                v.core
                    .networks()
                    .map(|n| (n.name.clone(), n.id.clone()))
                    .collect::<std::collections::BTreeMap<_, _>>()
            })
            .await?;
        if let Some(d) = self.engine.services.network.default_network() {
            ids.insert(d.name, d.id);
        }
        Ok(ids)
    }

    /// The container's attachment to the bridge network it was created on,
    /// if it has one now (once disconnected from it, its `eth0` is an
    /// endpoint's).
    pub async fn attachment(&self, s: &Snapshot) -> Result<Option<Attachment>, RequestError> {
        Ok(self.attachments(std::slice::from_ref(s)).await?.remove(0))
    }

    /// [`Containers::attachment`] of each, with one read of the core.
    pub async fn attachments(
        &self,
        snapshots: &[Snapshot],
    ) -> Result<Vec<Option<Attachment>>, RequestError> {
        let ids = self.network_ids().await?;
        let default = self.engine.services.network.name();
        Ok(snapshots
            .iter()
            .map(|s| attachment_of(s, &ids, default))
            .collect())
    }

    /// `docker rm [-f] [-v]`: the core's removal; with `volumes`, its
    /// anonymous volumes that no other container names go too (the core
    /// marks them before it forgets the container).
    pub async fn remove(&self, reference: &str, force: bool, volumes: bool) -> Answer {
        let remove = move |id| Command::Remove { id, force, volumes };
        self.engine.container_command(reference, remove).await
    }

    /// `docker container prune`: every container that is not running
    /// (created or exited) that `wanted` picks, through the core's ordinary
    /// remove, so each removal is recorded and carried out like `docker
    /// rm`. The ids of those removed.
    pub async fn prune(
        &self,
        wanted: impl Fn(&Snapshot) -> bool,
    ) -> Result<(Vec<String>, i64), RequestError> {
        let candidates: Vec<ContainerId> = self
            .snapshots()
            .await?
            .into_iter()
            .filter(|s| matches!(s.status, Status::Created | Status::Exited) && wanted(s))
            .map(|s| s.record.id)
            .collect();
        let mut deleted = Vec::new();
        let mut reclaimed = 0i64;
        let adapter = &self.engine.services.adapter;
        for id in candidates {
            // What it wrote, measured before it goes (one without a
            // snapshot wrote nothing; one that cannot be measured counts
            // nothing rather than a guess).
            let written = adapter.container_rw_size(&id).await.unwrap_or_else(|e| {
                tracing::debug!(container = %id, error = %e, "size before prune");
                0
            });
            // A container started since the read, or a pod's (kubelet's,
            // through the CRI), is refused by the core: skipped.
            match self
                .engine
                .command(Command::Remove {
                    id: id.clone(),
                    force: false,
                    volumes: false,
                })
                .await
            {
                Answer::Done => {
                    deleted.push(id.to_string());
                    reclaimed = reclaimed.saturating_add(written);
                }
                other => tracing::debug!(container = %id, answer = ?other, "not pruned"),
            }
        }
        Ok((deleted, reclaimed))
    }

    /// `docker rename`: the core's rename (which also has its peers on
    /// user networks learn the new name, owed until done).
    pub async fn rename(&self, reference: &str, name: String) -> Answer {
        let rename = move |id| Command::Rename { id, name };
        self.engine.container_command(reference, rename).await
    }

    /// `docker update`: the resources of its task, then its restart policy,
    /// each a command for the core. The warnings for the client.
    pub async fn update(
        &self,
        reference: &str,
        resources: Option<ResourceUpdate>,
        policy: Option<RestartPolicy>,
    ) -> Result<Vec<String>, RequestError> {
        let mut id = None;
        let mut warnings = Vec::new();
        if let Some(mut update) = resources {
            // As at create: without swap accounting, memory is limited without swap.
            if update.memory_swap_bytes.is_some_and(|s| s > 0) && !create::swap_accounting() {
                update.memory_swap_bytes = Some(-1);
                warnings.push(
                    "Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap."
                        .to_owned(),
                );
            }
            let command = move |id| Command::UpdateResources { id, update };
            let pending = self
                .engine
                .container_command_accepted(reference, command)
                .await?;
            id = Some(pending.id().clone());
            if let Answer::Error(e) = pending.answer().await {
                return Err(e);
            }
        }
        if let Some(policy) = policy {
            let answer = match id {
                Some(id) => {
                    self.engine
                        .command(Command::UpdateRestartPolicy { id, policy })
                        .await
                }
                None => {
                    let command = move |id| Command::UpdateRestartPolicy { id, policy };
                    self.engine.container_command(reference, command).await
                }
            };
            if let Answer::Error(e) = answer {
                return Err(e);
            }
        } else if id.is_none() {
            // Nothing to change: still a 404 for a container that is not.
            self.engine.resolve(reference).await?;
        }
        Ok(warnings)
    }

    /// `POST /containers/{id}/resize`: the init's terminal, while it runs
    /// (without a terminal there is nothing to resize: accepted as dockerd
    /// does).
    pub async fn resize(
        &self,
        reference: &str,
        height: u32,
        width: u32,
    ) -> Result<(), RequestError> {
        let s = self.snapshot(reference).await?;
        let id = s.record.id.clone();
        // Without a terminal there is nothing to resize (the core is not
        // asked to have containerd refuse it).
        if !s.record.config.tty {
            if s.status != Status::Running {
                return Err(conflict(format!("Container {id} is not running")));
            }
            return Ok(());
        }
        let resize = Command::Resize {
            id,
            exec_id: None,
            width,
            height,
        };
        super::volumes::done(self.engine.command(resize).await)
    }
}

/// `s`'s attachment to the network it was created on, as its record says.
pub(crate) fn attachment_of(
    s: &Snapshot,
    ids: &std::collections::BTreeMap<String, String>,
    default_network: &str,
) -> Option<Attachment> {
    let r = &s.record;
    if r.network != NetworkState::Attached || r.own_disconnected {
        return None;
    }
    let a = r.allocation.as_ref()?;
    let network = r.config.network_name.as_deref().unwrap_or(default_network);
    let id = ids.get(network).cloned().unwrap_or_default();
    let user_network = r.config.network_name.is_some();
    Some(Attachment::of(
        a,
        user_network,
        r,
        &r.config.network_aliases,
        id,
    ))
}
