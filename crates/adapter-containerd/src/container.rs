//! Containers and their init tasks: create from an image (undone on
//! failure), task create/start/kill/delete, and removal with the snapshot.

use crate::client::Adapter;
use crate::error::AdapterError;
use crate::host::{
    grant_realtime_budget, host_facts, mount_shareable_shm, remove_shareable_shm, shareable_shm_dir,
};
use crate::image::ResolvedImage;
use crate::logger::{LogLimits, LoggerArgs};
use crate::spec::{SPEC_TYPE_URL, build_spec, cgroups_path, resolve_user};
use containerd_client::services::v1::container::Runtime;
use containerd_client::services::v1::snapshots::{
    MountsRequest, PrepareSnapshotRequest, RemoveSnapshotRequest, UsageRequest,
};
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateRequest as CreateLeaseRequest, CreateTaskRequest,
    DeleteContainerRequest, DeleteRequest as DeleteLeaseRequest, DeleteTaskRequest,
    GetContainerRequest, KillRequest, PauseTaskRequest, ResumeTaskRequest, StartRequest,
    UpdateContainerRequest, UpdateTaskRequest,
};
use containerd_client::tonic::Code;
use containerd_client::types::Mount;
use holdfast_core::{ContainerConfig, ContainerId, NamespaceMode};
use std::collections::HashMap;
use std::path::PathBuf;

/// A lease that is not deleted (holdfast crashed) expires after this.
const LEASE_EXPIRE: &str = "24h";

/// Container labels that carry `--log-opt max-size/max-file` from create to
/// every task the container runs (the task is created from the id alone).
const LOG_MAX_SIZE_LABEL: &str = "io.holdfast.log.max-size";
const LOG_MAX_FILE_LABEL: &str = "io.holdfast.log.max-file";

fn log_limit_labels(config: &ContainerConfig) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    if let Some(size) = config.log_max_size_bytes {
        labels.push((LOG_MAX_SIZE_LABEL.to_owned(), size.to_string()));
    }
    if let Some(files) = config.log_max_files {
        labels.push((LOG_MAX_FILE_LABEL.to_owned(), files.to_string()));
    }
    labels
}

/// A container label that carries `--log-driver none` to every task: its
/// output is discarded and no log file is made.
const LOG_DRIVER_NONE_LABEL: &str = "io.holdfast.log.none";

fn log_driver_labels(config: &ContainerConfig) -> Vec<(String, String)> {
    if config.log_driver == holdfast_core::LogDriver::None {
        vec![(LOG_DRIVER_NONE_LABEL.to_owned(), "true".to_owned())]
    } else {
        Vec::new()
    }
}

/// A container label naming the containers whose namespaces this one joins
/// and the init pids they had when it was created: `pid=<id>:<pid>,...`.
/// The spec joins `/proc/<pid>/ns/<kind>`; a later task must not join
/// whatever process has that pid by then.
const JOINS_LABEL: &str = "io.holdfast.joins";

fn joins_label(config: &ContainerConfig) -> Vec<(String, String)> {
    let ns = &config.namespaces;
    let joins: Vec<String> = [("pid", &ns.pid), ("uts", &ns.uts), ("ipc", &ns.ipc)]
        .into_iter()
        .filter_map(|(kind, mode)| match mode {
            NamespaceMode::Container { id, pid } => Some(format!("{kind}={id}:{pid}")),
            _ => None,
        })
        .collect();
    if joins.is_empty() {
        Vec::new()
    } else {
        vec![(JOINS_LABEL.to_owned(), joins.join(","))]
    }
}

/// One mount of a container's root filesystem, as `mount(8)` takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootfsMount {
    pub kind: String,
    pub source: String,
    pub options: Vec<String>,
}

/// A container label naming the file kubelet reads a pod's container's
/// output from (the logger writes it in the CRI's format, see
/// [`crate::logger`]).
const CRI_LOG_LABEL: &str = "io.holdfast.cri-log";

fn cri_log_label(config: &ContainerConfig) -> Vec<(String, String)> {
    match &config.pod {
        Some(holdfast_core::PodMember {
            role: holdfast_core::PodRole::Container { .. },
            log_path: Some(path),
            ..
        }) => vec![(CRI_LOG_LABEL.to_owned(), path.clone())],
        _ => Vec::new(),
    }
}

/// Container labels that carry `-t` and `-i` to every task.
const TTY_LABEL: &str = "io.holdfast.tty";
const STDIN_LABEL: &str = "io.holdfast.stdin";

fn io_labels(config: &ContainerConfig) -> Vec<(String, String)> {
    let mut labels = Vec::new();
    if config.tty {
        labels.push((TTY_LABEL.to_owned(), "true".to_owned()));
    }
    if config.open_stdin {
        labels.push((STDIN_LABEL.to_owned(), "true".to_owned()));
    }
    labels
}

/// Creates the FIFO at `path` unless it is there already (from an earlier
/// run of the same container, or created by a concurrent attach).
pub fn ensure_fifo(path: &std::path::Path) -> Result<(), AdapterError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => Ok(()),
        Err(e) => Err(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("stdin fifo {}: {e}", path.display()),
        )
        .into()),
    }
}

/// The logger's limits for a container: its labels, else the defaults.
fn log_limits_of(labels: &HashMap<String, String>) -> LogLimits {
    let default = LogLimits::default();
    let value = |key: &str| labels.get(key).map(String::as_str);
    LogLimits {
        max_size: value(LOG_MAX_SIZE_LABEL)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default.max_size),
        max_files: value(LOG_MAX_FILE_LABEL)
            .and_then(|v| v.parse::<u32>().ok())
            .map_or(default.max_files, |n| n.max(1)),
    }
}

pub(crate) fn is_code(e: &AdapterError, code: Code) -> bool {
    matches!(e, AdapterError::Rpc { status, .. } if status.code() == code)
}

impl Adapter {
    /// Resolves the image, prepares the rootfs snapshot under a lease and
    /// creates the containerd container. On failure everything this call
    /// made is removed again before it answers.
    pub(crate) async fn create_container(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
    ) -> Result<(), AdapterError> {
        let image = match &config.image_id {
            Some(image_id) => self.resolve_image_id(&config.image, image_id).await?,
            None => self.resolve_image(&config.image).await?,
        };
        let lease = format!("holdfast-create-{id}");
        self.create_lease(&lease).await?;
        let result = self
            .create_container_leased(id, config, &image, &lease)
            .await;
        if let Err(e) = &result
            && !is_code(e, Code::AlreadyExists)
        {
            self.undo_create(id).await;
        }
        if let Err(e) = self.delete_lease(&lease).await {
            tracing::warn!(error = %e, %lease, "lease not deleted; it expires by itself");
        }
        result
    }

    async fn create_container_leased(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        image: &ResolvedImage,
        lease: &str,
    ) -> Result<(), AdapterError> {
        let mut snapshots = self.snapshots();
        let prepare = PrepareSnapshotRequest {
            snapshotter: self.snapshotter().to_owned(),
            key: id.to_string(),
            parent: image.chain_id.clone(),
            labels: HashMap::new(),
        };
        let timeout = self.call_timeout();
        let prepared = self
            .rpc(
                "Snapshots.Prepare",
                snapshots.prepare(self.leased(prepare, lease, timeout)?),
            )
            .await;
        let mounts = match prepared {
            Ok(p) => p.mounts,
            // An earlier attempt prepared it: reuse it.
            Err(e) if is_code(&e, Code::AlreadyExists) => {
                self.snapshot_mounts(&id.to_string()).await?
            }
            Err(e) if is_code(&e, Code::NotFound) => {
                return Err(AdapterError::Image(format!(
                    "image {} is not unpacked: {e}",
                    image.name
                )));
            }
            Err(e) => return Err(e),
        };
        let user_spec = config
            .user
            .clone()
            .or_else(|| image.config.user.clone())
            .unwrap_or_default();
        let user = if user_spec.is_empty() || user_spec.split(':').all(|p| p.parse::<u32>().is_ok())
        {
            resolve_user(&user_spec, None, None)?
        } else {
            let passwd = read_rootfs_file(&mounts, "etc/passwd");
            let group = read_rootfs_file(&mounts, "etc/group");
            resolve_user(&user_spec, passwd.as_deref(), group.as_deref())?
        };
        let shm_source = match &config.namespaces.ipc {
            NamespaceMode::Shareable => {
                let dir = shareable_shm_dir(&self.config().fifo_dir, id.as_str());
                mount_shareable_shm(&dir, config.resources.shm_size_bytes)?;
                Some(dir)
            }
            NamespaceMode::Container { id: donor, .. } => {
                Some(shareable_shm_dir(&self.config().fifo_dir, donor))
            }
            _ => None,
        };
        let mut host = host_facts(config, &mounts, shm_source)?;
        host.hostname_path = Some(self.write_hostname_file(id, config)?);
        if config.network == holdfast_core::NetworkMode::Bridge {
            let netns_dir = &self.config().netns_dir;
            host.netns_path = Some(netns_dir.join(id.as_str()));
            // Beside the namespaces: see the daemon's network module.
            host.hosts_path = netns_dir
                .parent()
                .map(|net| net.join("hosts").join(id.as_str()));
            host.resolv_path = netns_dir
                .parent()
                .map(|net| net.join("hosts").join(format!("{id}.resolv.conf")));
        }
        if let (holdfast_core::NetworkMode::Container, Some(donor)) =
            (config.network, &config.network_container)
        {
            host_join_network(&mut host, &self.config().netns_dir, donor);
        }
        if let Some(runtime_us) = config.resources.cpu_realtime_runtime_us.filter(|&r| r > 0) {
            grant_realtime_budget(&cgroups_path(id, self.namespace(), config), runtime_us);
        }
        let spec = build_spec(id, self.namespace(), config, &image.config, &user, &host)?;
        let spec =
            serde_json::to_vec(&spec).map_err(|e| AdapterError::Invalid(format!("spec: {e}")))?;
        let container = Container {
            id: id.to_string(),
            labels: config
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .chain(log_limit_labels(config))
                .chain(io_labels(config))
                .chain(log_driver_labels(config))
                .chain(joins_label(config))
                .chain(cri_log_label(config))
                .collect(),
            image: image.name.clone(),
            runtime: Some(Runtime {
                name: self.config().runtime.clone(),
                options: None,
            }),
            spec: Some(prost_types::Any {
                type_url: SPEC_TYPE_URL.to_owned(),
                value: spec,
            }),
            snapshotter: self.snapshotter().to_owned(),
            snapshot_key: id.to_string(),
            ..Default::default()
        };
        let mut containers = self.containers();
        let req = self.req(CreateContainerRequest {
            container: Some(container),
        });
        self.rpc("Containers.Create", containers.create(req))
            .await?;
        Ok(())
    }

    /// Writes the hostname the container has (its own; the host's, or
    /// the other container's, when it shares that UTS namespace) where
    /// `/etc/hostname` is bound from. Idempotent: a create retried writes it again.
    fn write_hostname_file(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
    ) -> Result<std::path::PathBuf, AdapterError> {
        use holdfast_core::NamespaceMode;
        let read = |p: &std::path::Path| std::fs::read_to_string(p).map(|h| h.trim().to_owned());
        let own = || crate::spec::hostname(id, config);
        let name = match &config.namespaces.uts {
            NamespaceMode::Host => {
                read(std::path::Path::new("/proc/sys/kernel/hostname")).unwrap_or_default()
            }
            // A pod's container: its sandbox's hostname.
            NamespaceMode::Container { id: donor, .. } => donor
                .parse::<ContainerId>()
                .ok()
                .and_then(|donor| read(&self.hostname_path(&donor)).ok())
                .unwrap_or_else(own),
            NamespaceMode::Private | NamespaceMode::Shareable => own(),
        };
        let path = self.hostname_path(id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, format!("{name}\n"))?;
        Ok(path)
    }

    /// Removes the snapshot of a create that failed, unless a container with
    /// this id exists (then the snapshot is that container's).
    async fn undo_create(&self, id: &ContainerId) {
        let mut containers = self.containers();
        let got = self
            .rpc(
                "Containers.Get",
                containers.get(self.req(GetContainerRequest { id: id.to_string() })),
            )
            .await;
        match got {
            Err(e) if is_code(&e, Code::NotFound) => {}
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot tell whether the container exists; snapshot left for removal");
                return;
            }
        }
        remove_shareable_shm(&shareable_shm_dir(&self.config().fifo_dir, id.as_str()));
        match self.remove_snapshot(&id.to_string()).await {
            Ok(()) => tracing::debug!("failed create undone"),
            Err(e) if is_code(&e, Code::NotFound) => {}
            Err(e) => tracing::warn!(error = %e, "snapshot of a failed create not removed"),
        }
    }

    pub(crate) async fn create_lease(&self, lease: &str) -> Result<(), AdapterError> {
        let mut leases = self.leases();
        let labels = HashMap::from([(
            "containerd.io/gc.expire".to_owned(),
            expire_at(LEASE_EXPIRE),
        )]);
        let req = self.req(CreateLeaseRequest {
            id: lease.to_owned(),
            labels,
        });
        match self.rpc("Leases.Create", leases.create(req)).await {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, Code::AlreadyExists) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn delete_lease(&self, lease: &str) -> Result<(), AdapterError> {
        let mut leases = self.leases();
        let req = self.req(DeleteLeaseRequest {
            id: lease.to_owned(),
            sync: false,
        });
        match self.rpc("Leases.Delete", leases.delete(req)).await {
            Ok(_) => Ok(()),
            Err(e) if is_code(&e, Code::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// How to mount the container's root filesystem (its snapshot), for
    /// reading and writing it while no task runs (`docker cp`).
    pub async fn rootfs_mounts(&self, id: &ContainerId) -> Result<Vec<RootfsMount>, AdapterError> {
        let container = self.get_container(id).await?;
        Ok(self
            .snapshot_mounts(&container.snapshot_key)
            .await?
            .into_iter()
            .map(|m| RootfsMount {
                kind: m.r#type,
                source: m.source,
                options: m.options,
            })
            .collect())
    }

    pub(crate) async fn snapshot_mounts(&self, key: &str) -> Result<Vec<Mount>, AdapterError> {
        let mut snapshots = self.snapshots();
        let req = self.req(MountsRequest {
            snapshotter: self.snapshotter().to_owned(),
            key: key.to_owned(),
        });
        Ok(self
            .rpc("Snapshots.Mounts", snapshots.mounts(req))
            .await?
            .mounts)
    }

    /// Bytes the snapshot `key` itself holds (its own layer, or what a
    /// container wrote), as the snapshotter counts them.
    pub(crate) async fn snapshot_size(&self, key: &str) -> Result<i64, AdapterError> {
        let mut snapshots = self.snapshots();
        let req = self.req(UsageRequest {
            snapshotter: self.snapshotter().to_owned(),
            key: key.to_owned(),
        });
        Ok(self
            .rpc("Snapshots.Usage", snapshots.usage(req))
            .await?
            .size)
    }

    /// What container `id` wrote to its root filesystem, in bytes.
    pub async fn container_rw_size(&self, id: &ContainerId) -> Result<i64, AdapterError> {
        self.snapshot_size(id.as_str()).await
    }

    /// The unpacked size of an image: its layers' snapshots, each counted once.
    pub async fn image_unpacked_size(&self, diff_ids: &[String]) -> Result<i64, AdapterError> {
        Ok(self
            .layer_sizes(diff_ids)
            .await?
            .into_iter()
            .fold(0i64, i64::saturating_add))
    }

    /// Bytes each unpacked layer holds, bottom first (`docker history`'s
    /// sizes): the snapshot of each chain id, as the snapshotter counts it.
    pub async fn layer_sizes(&self, diff_ids: &[String]) -> Result<Vec<i64>, AdapterError> {
        let mut sizes = Vec::with_capacity(diff_ids.len());
        for n in 1..=diff_ids.len() {
            let Some(chain) = crate::image::chain_id(&diff_ids[..n]) else {
                continue;
            };
            sizes.push(self.snapshot_size(&chain).await?);
        }
        Ok(sizes)
    }

    pub(crate) async fn remove_snapshot(&self, key: &str) -> Result<(), AdapterError> {
        let mut snapshots = self.snapshots();
        let req = self.req(RemoveSnapshotRequest {
            snapshotter: self.snapshotter().to_owned(),
            key: key.to_owned(),
        });
        self.rpc("Snapshots.Remove", snapshots.remove(req))
            .await
            .map(|_| ())
    }

    pub(crate) async fn get_container(&self, id: &ContainerId) -> Result<Container, AdapterError> {
        let mut containers = self.containers();
        let got = self
            .rpc(
                "Containers.Get",
                containers.get(self.req(GetContainerRequest { id: id.to_string() })),
            )
            .await?;
        got.container
            .ok_or_else(|| AdapterError::Invalid(format!("containerd returned no container {id}")))
    }

    /// Creates the init task on the container's snapshot, with stdout and
    /// stderr going to the logger. Returns the init pid.
    pub(crate) async fn create_task(&self, id: &ContainerId) -> Result<u32, AdapterError> {
        let container = self.get_container(id).await?;
        if let Some(joins) = container.labels.get(JOINS_LABEL) {
            self.check_joined_containers(joins).await?;
        }
        let mounts = self.snapshot_mounts(&container.snapshot_key).await?;
        if container
            .labels
            .get(LOG_DRIVER_NONE_LABEL)
            .is_some_and(|v| v == "true")
        {
            // No stdio at all: the shim gives the task /dev/null.
            let mut tasks = self.tasks();
            let req = self.req_within(
                CreateTaskRequest {
                    container_id: id.to_string(),
                    rootfs: mounts,
                    ..Default::default()
                },
                self.create_run_on(),
            );
            let create = async move { tasks.create(req).await };
            return Ok(self.rpc_run_on("Tasks.Create", create).await?.pid);
        }
        // The logger opens this file after the shim starts it; if it cannot,
        // containerd still starts the task, with nobody reading its output.
        // Find out here, while the start can still fail with the reason.
        let log_path = self.log_path(id);
        let with_path = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("log {}: {e}", log_path.display()))
        };
        if let Some(dir) = log_path.parent() {
            std::fs::create_dir_all(dir).map_err(with_path)?;
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(with_path)?;
        let terminal = container.labels.get(TTY_LABEL).is_some_and(|v| v == "true");
        // The shim holds the stdin FIFO open itself until it is told to
        // close it (`close_stdin`): attaches come and go, holdfastd restarts.
        let stdin = match container.labels.get(STDIN_LABEL) {
            Some(v) if v == "true" => {
                let path = self.stdin_path(id);
                ensure_fifo(&path)?;
                Some(path)
            }
            _ => None,
        };
        let io = self.task_io(
            id,
            id.as_str(),
            LoggerArgs {
                limits: log_limits_of(&container.labels),
                tty: terminal,
                cri_log: container.labels.get(CRI_LOG_LABEL).map(PathBuf::from),
                ..LoggerArgs::new(&log_path)
            },
            stdin,
        )?;
        let mut tasks = self.tasks();
        let req = self.req_within(
            CreateTaskRequest {
                container_id: id.to_string(),
                rootfs: mounts,
                stdin: io.stdin.clone(),
                stdout: io.stdout.clone(),
                stderr: io.stderr.clone(),
                terminal,
                ..Default::default()
            },
            self.create_run_on(),
        );
        // The logger learns whether its FIFOs have a writer once the call
        // has ended in containerd, also when that is after our wait.
        let create = async move {
            let created = tasks.create(req).await;
            io.settle();
            created
        };
        Ok(self.rpc_run_on("Tasks.Create", create).await?.pid)
    }

    /// The containers whose namespaces this one joins still run the init
    /// they ran at create time (`pid=<id>:<pid>,...`, see [`JOINS_LABEL`]).
    async fn check_joined_containers(&self, joins: &str) -> Result<(), AdapterError> {
        for join in joins.split(',') {
            let Some((kind, target)) = join.split_once('=') else {
                continue;
            };
            let Some((donor, pid)) = target.rsplit_once(':') else {
                continue;
            };
            let Ok(donor_id) = donor.parse::<ContainerId>() else {
                continue;
            };
            let kind = kind.to_ascii_uppercase();
            match self.init_pid(&donor_id).await {
                Ok(now) if now.to_string() == pid => {}
                Ok(now) => {
                    return Err(AdapterError::Invalid(format!(
                        "cannot join {kind} of container {donor}: it was restarted (pid {pid} is now {now}) since this container was created; re-create this container"
                    )));
                }
                // Gone, or there but not running; any other failure (such
                // as containerd away) is no answer and is passed on.
                Err(e) if is_code(&e, Code::NotFound) || matches!(e, AdapterError::Invalid(_)) => {
                    return Err(AdapterError::Invalid(format!(
                        "cannot join {kind} of a non running container: {donor}"
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    pub(crate) async fn start_task(&self, id: &ContainerId) -> Result<u32, AdapterError> {
        self.start_process(id, "").await
    }

    pub(crate) async fn start_process(
        &self,
        id: &ContainerId,
        exec_id: &str,
    ) -> Result<u32, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(StartRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
        });
        Ok(self.rpc("Tasks.Start", tasks.start(req)).await?.pid)
    }

    pub(crate) async fn kill(
        &self,
        id: &ContainerId,
        exec_id: &str,
        signal: u32,
        all: bool,
    ) -> Result<(), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(KillRequest {
            container_id: id.to_string(),
            exec_id: exec_id.to_owned(),
            signal,
            all,
        });
        self.rpc("Tasks.Kill", tasks.kill(req)).await.map(|_| ())
    }

    /// `docker update`: the running task's cgroup first (what runc refuses
    /// leaves the stored spec as it was), then the stored spec, which the
    /// next run is created from.
    pub(crate) async fn update_resources(
        &self,
        id: &ContainerId,
        config: &ContainerConfig,
        running: bool,
    ) -> Result<(), AdapterError> {
        let resources = crate::spec::updatable_resources(config)?;
        if running {
            let value = serde_json::to_vec(&resources)
                .map_err(|e| AdapterError::Invalid(format!("resources: {e}")))?;
            let mut tasks = self.tasks();
            let req = self.req(UpdateTaskRequest {
                container_id: id.to_string(),
                resources: Some(prost_types::Any {
                    type_url: crate::spec::RESOURCES_TYPE_URL.to_owned(),
                    value,
                }),
                ..Default::default()
            });
            self.rpc("Tasks.Update", tasks.update(req)).await?;
        }
        let mut container = self.get_container(id).await?;
        let stored = container
            .spec
            .take()
            .ok_or_else(|| AdapterError::Invalid(format!("container {id} has no spec")))?;
        let spec: oci_spec::runtime::Spec = serde_json::from_slice(&stored.value)
            .map_err(|e| AdapterError::Invalid(format!("the stored spec of {id}: {e}")))?;
        let spec = crate::spec::patch_resources(spec, &resources);
        let value =
            serde_json::to_vec(&spec).map_err(|e| AdapterError::Invalid(format!("spec: {e}")))?;
        container.spec = Some(prost_types::Any {
            type_url: SPEC_TYPE_URL.to_owned(),
            value,
        });
        let mut containers = self.containers();
        let req = self.req(UpdateContainerRequest {
            container: Some(container),
            update_mask: Some(prost_types::FieldMask {
                paths: vec!["spec".to_owned()],
            }),
        });
        self.rpc("Containers.Update", containers.update(req))
            .await
            .map(|_| ())
    }

    /// Freezes every process of the task (the cgroup freezer, through runc).
    pub(crate) async fn pause_task(&self, id: &ContainerId) -> Result<(), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(PauseTaskRequest {
            container_id: id.to_string(),
        });
        self.rpc("Tasks.Pause", tasks.pause(req)).await.map(|_| ())
    }

    /// Thaws the task's processes.
    pub(crate) async fn resume_task(&self, id: &ContainerId) -> Result<(), AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(ResumeTaskRequest {
            container_id: id.to_string(),
        });
        self.rpc("Tasks.Resume", tasks.resume(req))
            .await
            .map(|_| ())
    }

    /// Deletes the stopped init task; returns its exit status.
    pub(crate) async fn delete_task(&self, id: &ContainerId) -> Result<u32, AdapterError> {
        let mut tasks = self.tasks();
        let req = self.req(DeleteTaskRequest {
            container_id: id.to_string(),
        });
        Ok(self
            .rpc("Tasks.Delete", tasks.delete(req))
            .await?
            .exit_status)
    }

    /// Deletes the container and its snapshot. NotFound only when neither existed.
    pub(crate) async fn delete_container(&self, id: &ContainerId) -> Result<(), AdapterError> {
        // A mount of its snapshot a crash left (a volume's fill cut short)
        // would keep the snapshot busy: gone first.
        self.unmount_rootfs(id)?;
        let (snapshot_key, container_found) = match self.get_container(id).await {
            Ok(c) => (
                if c.snapshot_key.is_empty() {
                    id.to_string()
                } else {
                    c.snapshot_key
                },
                true,
            ),
            Err(e) if is_code(&e, Code::NotFound) => (id.to_string(), false),
            Err(e) => return Err(e),
        };
        if container_found {
            let mut containers = self.containers();
            let req = self.req(DeleteContainerRequest { id: id.to_string() });
            match self.rpc("Containers.Delete", containers.delete(req)).await {
                Ok(_) => {}
                Err(e) if is_code(&e, Code::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        remove_shareable_shm(&shareable_shm_dir(&self.config().fifo_dir, id.as_str()));
        match std::fs::remove_file(self.hostname_path(id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        match self.remove_snapshot(&snapshot_key).await {
            Ok(()) => Ok(()),
            Err(e) if is_code(&e, Code::NotFound) && container_found => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// RFC 3339 time `duration` (like `24h`) from now, for `containerd.io/gc.expire`.
fn expire_at(duration: &str) -> String {
    let hours: u64 = duration.trim_end_matches('h').parse().unwrap_or(24);
    let at = std::time::SystemTime::now() + std::time::Duration::from_secs(hours * 3600);
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    holdfast_rfc3339::format(secs as i64, 0)
}

/// Reads a file of the rootfs described by snapshot mounts without mounting
/// them: the overlay's upper dir first, then its lower dirs in order, or the
/// bind source.
pub(crate) fn read_rootfs_file(mounts: &[Mount], relative: &str) -> Option<String> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for m in mounts {
        if m.r#type == "bind" {
            dirs.push(PathBuf::from(&m.source));
        }
        for opt in &m.options {
            if let Some(upper) = opt.strip_prefix("upperdir=") {
                dirs.insert(0, PathBuf::from(upper));
            } else if let Some(lower) = opt.strip_prefix("lowerdir=") {
                dirs.extend(lower.split(':').map(PathBuf::from));
            }
        }
    }
    for dir in &dirs {
        match read_layer_file(dir, relative) {
            LayerFile::Found(text) => return Some(text),
            LayerFile::Absent => continue,
            LayerFile::Refused => return None,
        }
    }
    None
}

/// What one layer directory holds at a path.
enum LayerFile {
    Found(String),
    /// Not in this layer: look in the one below.
    Absent,
    /// Deleted here (a whiteout), or not something we read: a symlink (it
    /// would resolve on the host, not in the container), a device or a FIFO
    /// (which could block or never end), or a file over 1 MiB.
    Refused,
}

fn read_layer_file(dir: &std::path::Path, relative: &str) -> LayerFile {
    use std::io::Read as _;
    use std::os::unix::fs::FileTypeExt as _;
    const LIMIT_BYTES: u64 = 1 << 20;
    let mut path = dir.to_path_buf();
    for part in relative.split('/').filter(|p| !p.is_empty()) {
        path.push(part);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return LayerFile::Absent;
        };
        let kind = meta.file_type();
        // overlayfs marks a deleted entry with a 0/0 character device.
        if kind.is_char_device() || kind.is_symlink() || kind.is_fifo() || kind.is_socket() {
            return LayerFile::Refused;
        }
    }
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return LayerFile::Absent;
    };
    if !meta.file_type().is_file() || meta.len() > LIMIT_BYTES {
        return LayerFile::Refused;
    }
    let mut text = String::new();
    match std::fs::File::open(&path).and_then(|f| f.take(LIMIT_BYTES).read_to_string(&mut text)) {
        Ok(_) => LayerFile::Found(text),
        Err(_) => LayerFile::Refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overlay(upper: &std::path::Path, lowers: &[&std::path::Path]) -> Vec<Mount> {
        let lower = lowers
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        vec![Mount {
            r#type: "overlay".into(),
            source: "overlay".into(),
            options: vec![
                format!("upperdir={}", upper.display()),
                format!("lowerdir={lower}"),
            ],
            ..Default::default()
        }]
    }

    #[test]
    fn rootfs_files_are_read_from_the_top_layer_that_has_them() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (upper, top, bottom) = (
            tmp.path().join("u"),
            tmp.path().join("l1"),
            tmp.path().join("l2"),
        );
        for dir in [&upper, &top, &bottom] {
            std::fs::create_dir_all(dir.join("etc")).expect("mkdir");
        }
        std::fs::write(bottom.join("etc/passwd"), "old:x:1:1::/:/bin/sh\n").expect("write");
        std::fs::write(top.join("etc/passwd"), "app:x:1000:1000::/:/bin/sh\n").expect("write");
        let mounts = overlay(&upper, &[&top, &bottom]);
        assert_eq!(
            read_rootfs_file(&mounts, "etc/passwd").as_deref(),
            Some("app:x:1000:1000::/:/bin/sh\n")
        );
    }

    #[test]
    fn rootfs_files_never_follow_symlinks_or_open_fifos() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let (upper, layer) = (tmp.path().join("u"), tmp.path().join("l1"));
        std::fs::create_dir_all(upper.join("etc")).expect("mkdir");
        std::fs::create_dir_all(&layer).expect("mkdir");
        // `etc -> /etc` would read the host's passwd.
        std::os::unix::fs::symlink("/etc", layer.join("etc")).expect("symlink");
        assert_eq!(
            read_rootfs_file(&overlay(&upper, &[&layer]), "etc/passwd"),
            None
        );
        // A FIFO would block the call for ever.
        let status = std::process::Command::new("mkfifo")
            .arg(upper.join("etc/passwd"))
            .status()
            .expect("mkfifo runs");
        assert!(status.success());
        assert_eq!(
            read_rootfs_file(&overlay(&upper, &[&layer]), "etc/passwd"),
            None
        );
    }
}

#[cfg(test)]
mod log_limit_tests {
    use super::*;

    #[test]
    fn log_limits_travel_as_labels() {
        let config = ContainerConfig {
            log_max_size_bytes: Some(4096),
            log_max_files: Some(2),
            ..ContainerConfig::default()
        };
        let labels: HashMap<String, String> = log_limit_labels(&config).into_iter().collect();
        let limits = log_limits_of(&labels);
        assert_eq!((limits.max_size, limits.max_files), (4096, 2));
        let none = log_limits_of(&HashMap::new());
        let default = LogLimits::default();
        assert_eq!(
            (none.max_size, none.max_files),
            (default.max_size, default.max_files)
        );
        let zero = HashMap::from([(LOG_MAX_FILE_LABEL.to_owned(), "0".to_owned())]);
        assert_eq!(log_limits_of(&zero).max_files, 1);
    }
}

/// `--network container:<ref>`: the other container's attachment namespace
/// and files when it has them (a bridge network; the bind mount is stable
/// across its restarts), else its init's namespace (`none`).
fn host_join_network(
    host: &mut crate::spec::HostFacts,
    netns_dir: &std::path::Path,
    donor: &holdfast_core::SharedNetwork,
) {
    let attached = netns_dir.join(&donor.id);
    let files = netns_dir.parent().map(|net| net.join("hosts"));
    if attached.exists() {
        host.netns_path = Some(attached);
        host.hosts_path = files
            .as_ref()
            .map(|d| d.join(&donor.id))
            .filter(|p| p.exists());
        host.resolv_path = files
            .map(|d| d.join(format!("{}.resolv.conf", donor.id)))
            .filter(|p| p.exists());
    } else {
        host.netns_path = Some(std::path::PathBuf::from(format!(
            "/proc/{}/ns/net",
            donor.pid
        )));
        host.hosts_path = None;
        host.resolv_path = None;
    }
}
