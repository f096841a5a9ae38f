//! Local volumes: the core records each, who names it, and whether it is
//! being made or removed; the volume executor makes and removes their
//! directories. Every decision is here, so that the same guarantee holds
//! for volumes as for containers: a volume is recorded (persisted) before
//! its directory is made, and marked for removal (persisted) before it is
//! removed, so a crash at any point leaks no directory and loses no
//! removal; and none is removed while any container's record names it.
//!
//! Who uses a volume is not stored with the volume: the containers'
//! records say it (a mount naming the volume), so the two can never
//! disagree.

use crate::ids::{ContainerId, OpId, RequestId};
use crate::input::{Done, Failure, FailureKind};
use crate::time::WallTime;
use crate::{Answer, Core, ErrorKind, Map, OpOwner, ResourceEventKind, TimerKind, error};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// dockerd's label on volumes made for one container (`-v /path`, an
/// image's `VOLUME`): what `rm -v`, `run --rm` and a plain `volume prune`
/// remove.
pub const ANONYMOUS_LABEL: &str = "com.docker.volume.anonymous";

/// A volume's durable state.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct VolumeRecord {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub created_at: WallTime,
    pub state: ResourceState,
    /// Made for the create of this container (`-v name:/path` of a volume
    /// that did not exist, `-v /path`, an image's `VOLUME`): removed with
    /// it if that create is rolled back, kept once it completes.
    #[serde(default)]
    pub made_for: Option<ContainerId>,
}

impl VolumeRecord {
    pub fn anonymous(&self) -> bool {
        self.labels.contains_key(ANONYMOUS_LABEL)
    }
}

/// Where a volume or a user network is in its life.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ResourceState {
    /// Being made (any part of it may exist); no container uses it yet.
    Creating,
    Ready,
    /// Being removed: removed whatever happens, never used again.
    Removing,
}

/// Calls into the volume executor, one per action. Each is idempotent, so
/// a crash at any point is recovered by issuing it again.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum VolumeCall {
    /// Make the volume's directory (nothing if it exists).
    Create {
        name: String,
        labels: BTreeMap<String, String>,
    },
    /// Copy what the container's image has at `path` into the volume, if
    /// the volume is empty, as dockerd fills a volume at a container's
    /// create. The container's snapshot is mounted (`Call::MountRootfs`).
    /// One cut short by a crash is finished by the next (the executor
    /// keeps its own progress).
    Fill {
        name: String,
        container: ContainerId,
        path: String,
    },
    /// Remove the volume's directory and everything in it (nothing if it
    /// is gone).
    Remove { name: String },
}

/// A volume found on disk by the executor at start-up: the volume side's
/// relist (a volume from a holdfastd that did not record volumes yet, or
/// one made by hand).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct FoundVolume {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub created_at: WallTime,
}

/// A prune (of volumes or of networks) waiting for what it removes to be
/// gone: all it removes, and what of it is not gone yet.
#[derive(Debug)]
pub(crate) struct Prune {
    pub(crate) of_networks: bool,
    pub(crate) removed: Vec<String>,
    pub(crate) waiting: Vec<String>,
}

/// One volume as the core tracks it.
#[derive(Debug)]
pub(crate) struct Volume {
    pub(crate) rec: VolumeRecord,
    /// The call in flight, and whether it is a removal.
    pub(crate) in_flight: Option<(OpId, bool)>,
    pub(crate) retry_waiting: bool,
    pub(crate) attempts: u32,
    /// Its `create` event went out (or it was made before this start-up):
    /// only then is its removal a `destroy` (one whose making failed was
    /// never there for the user).
    pub(crate) announced: bool,
    /// Requests answered once it is made (create) or gone (remove, prune).
    pub(crate) requests: Vec<RequestId>,
}

impl Volume {
    fn new(rec: VolumeRecord) -> Volume {
        Volume {
            announced: rec.state != ResourceState::Creating,
            rec,
            in_flight: None,
            retry_waiting: false,
            attempts: 0,
            requests: Vec::new(),
        }
    }
}

/// dockerd's rule for volume names: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
pub fn validate_volume_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first && rest && name.len() >= 2 && name.len() <= 255 {
        Ok(())
    } else {
        Err(format!(
            "create {name}: \"{name}\" includes invalid characters for a local volume name, only \"[a-zA-Z0-9][a-zA-Z0-9_.-]\" are allowed. If you intended to pass a host directory, use absolute path"
        ))
    }
}

/// The volumes a container's config names, in mount order.
pub(crate) fn named_volumes(config: &crate::ContainerConfig) -> impl Iterator<Item = &str> {
    config.mounts.iter().filter_map(|m| m.volume.as_deref())
}

impl Core {
    /// Every container record that names `name` (in any state, being made
    /// or removed included: none may lose its data under it).
    pub fn volume_users(&self, name: &str) -> Vec<ContainerId> {
        let mut users: Vec<ContainerId> = self
            .containers
            .values()
            .filter(|c| named_volumes(&c.rec.config).any(|v| v == name))
            .map(|c| c.rec.id.clone())
            .collect();
        users.sort();
        users
    }

    /// One volume by name (being removed included, until it is gone).
    pub fn volume(&self, name: &str) -> Option<&VolumeRecord> {
        self.volumes.get(name).map(|v| &v.rec)
    }

    /// Every volume, by name.
    pub fn volumes(&self) -> impl Iterator<Item = &VolumeRecord> {
        let mut all: Vec<&VolumeRecord> = self.volumes.values().map(|v| &v.rec).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all.into_iter()
    }

    /// `docker volume create`: made, or the one that exists (as dockerd:
    /// its labels stay those it was made with).
    pub(crate) fn create_volume(
        &mut self,
        req: RequestId,
        name: String,
        labels: BTreeMap<String, String>,
    ) {
        if let Err(message) = validate_volume_name(&name) {
            return self.out.answer_now(req, error(ErrorKind::Invalid, message));
        }
        match self.volumes.get_mut(&name).map(|v| v.rec.state) {
            Some(ResourceState::Ready) => return self.out.answer_now(req, Answer::Done),
            Some(ResourceState::Removing) => {
                return self.out.answer_now(req, being_removed(&name));
            }
            Some(ResourceState::Creating) => {}
            None => self.add_volume(name.clone(), labels, None),
        }
        if let Some(v) = self.volumes.get_mut(&name) {
            v.requests.push(req);
            self.out.request_volume.insert(req, name.clone());
        }
        self.reconcile_volume(&name);
    }

    /// `docker volume rm`: refused while any container names it.
    pub(crate) fn remove_volume(&mut self, req: RequestId, name: &str, force: bool) {
        let Some(v) = self.volumes.get(name) else {
            // `-f`: a volume that is not there is what was wanted.
            let answer = if force {
                Answer::Done
            } else {
                error(ErrorKind::NotFound, format!("get {name}: no such volume"))
            };
            return self.out.answer_now(req, answer);
        };
        if v.rec.state != ResourceState::Removing {
            let users = self.volume_users(name);
            if !users.is_empty() {
                return self.out.answer_now(req, in_use(name, &users));
            }
        }
        self.mark_volume_removing(name);
        if let Some(v) = self.volumes.get_mut(name) {
            v.requests.push(req);
            self.out.request_volume.insert(req, name.to_owned());
        }
        self.reconcile_volume(name);
    }

    /// `docker volume prune`: of the volumes named (the API chose them by
    /// their labels), those no container names are removed, at once and
    /// as one decision; the answer lists them once they are gone.
    pub(crate) fn prune_volumes(&mut self, req: RequestId, names: Vec<String>) {
        let mut removed: Vec<String> = names
            .into_iter()
            .filter(|n| {
                self.volumes
                    .get(n)
                    .is_some_and(|v| v.rec.state == ResourceState::Ready)
                    && (bug!(self.config, PruneIgnoresUsers) || self.volume_users(n).is_empty())
            })
            .collect();
        removed.sort();
        removed.dedup();
        for name in &removed {
            self.mark_volume_removing(name);
            self.reconcile_volume(name);
        }
        let waiting = removed
            .iter()
            .filter(|n| self.volumes.contains_key(*n))
            .cloned()
            .collect();
        self.await_prune(req, false, removed, waiting);
    }

    /// A prune's answer lists what it removed once all of it is gone (at
    /// once when nothing of it, `waiting`, is left to wait for).
    pub(crate) fn await_prune(
        &mut self,
        req: RequestId,
        of_networks: bool,
        removed: Vec<String>,
        waiting: Vec<String>,
    ) {
        if waiting.is_empty() {
            return self.out.answer_now(req, Answer::Pruned(removed));
        }
        let prune = Prune {
            of_networks,
            removed,
            waiting,
        };
        self.out.prunes.insert(req, prune);
    }

    /// Whether a container's create may name these volumes: not while one
    /// is being removed.
    pub(crate) fn check_volumes_for_create(
        &self,
        config: &crate::ContainerConfig,
    ) -> Result<(), String> {
        for name in named_volumes(config) {
            validate_volume_name(name)?;
            if self
                .volumes
                .get(name)
                .is_some_and(|v| v.rec.state == ResourceState::Removing)
            {
                return Err(format!(
                    "volume {name} is being removed: the container was not created; try again"
                ));
            }
        }
        Ok(())
    }

    /// The volumes a container's create names that do not exist are made
    /// for it (after its record, which owns them until its create is done).
    pub(crate) fn make_volumes_for_create(
        &mut self,
        id: &ContainerId,
        config: &crate::ContainerConfig,
    ) {
        for m in &config.mounts {
            let Some(name) = m.volume.as_deref() else {
                continue;
            };
            if self.volumes.contains_key(name) {
                continue;
            }
            let mut labels = BTreeMap::new();
            if m.anonymous {
                labels.insert(ANONYMOUS_LABEL.to_owned(), String::new());
            }
            self.add_volume(name.to_owned(), labels, Some(id.clone()));
            self.reconcile_volume(name);
        }
    }

    /// Whether every volume `config` names is made (a container is made
    /// only on volumes that exist).
    pub(crate) fn volumes_ready(&self, config: &crate::ContainerConfig) -> bool {
        named_volumes(config).all(|n| {
            self.volumes
                .get(n)
                .is_some_and(|v| v.rec.state == ResourceState::Ready)
        })
    }

    /// A container's create completed: the volumes made for it are kept
    /// from now on, as any other.
    pub(crate) fn create_done_for_volumes(&mut self, id: &ContainerId) {
        for v in self.volumes.values_mut() {
            if v.rec.made_for.as_ref() == Some(id) {
                v.rec.made_for = None;
                self.out.persist_volume(&v.rec);
            }
        }
    }

    /// At start-up: a create that completed just before a crash has its
    /// record saying so, while the volumes made for it may not yet say
    /// they are kept. They are kept now, never removed with the container
    /// as a rolled-back create's would be (found by the simulator).
    pub(crate) fn keep_volumes_of_created(&mut self) {
        let created: Vec<ContainerId> = self
            .volumes
            .values()
            .filter_map(|v| v.rec.made_for.clone())
            .filter(|id| {
                self.containers
                    .get(id)
                    .is_some_and(|c| c.rec.presence == crate::Presence::Created)
            })
            .collect();
        for id in created {
            self.create_done_for_volumes(&id);
        }
    }

    /// A container is being forgotten (its record about to be deleted).
    /// The volumes made for a create that was rolled back go with it; so
    /// do its anonymous volumes, when asked (`rm -v`, `run --rm`); in
    /// either case only those no other container names. Marked before the
    /// container's record goes, so a crash between the two loses no
    /// removal, and never while its record names them.
    pub(crate) fn volumes_of_removed(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        let anonymous_too = (c.rec.intents.remove_volumes || c.rec.config.auto_remove)
            && !bug!(self.config, AnonymousVolumesLeft);
        let names: Vec<String> = named_volumes(&c.rec.config).map(str::to_owned).collect();
        for name in names {
            let goes = self.volumes.get(&name).is_some_and(|v| {
                v.rec.made_for.as_ref() == Some(id) || anonymous_too && v.rec.anonymous()
            });
            if !goes {
                continue;
            }
            if self.volume_users_except(&name, id).is_empty() {
                self.mark_volume_removing(&name);
            } else if let Some(v) = self.volumes.get_mut(&name)
                && v.rec.made_for.as_ref() == Some(id)
            {
                // Named by another container meanwhile (a rollback can
                // wait long: see `delete_not_before`), it is that one's
                // now, kept as any other (found by the simulator).
                v.rec.made_for = None;
                self.out.persist_volume(&v.rec);
            }
        }
    }

    /// Issues the removals `volumes_of_removed` marked, once the container's
    /// record is gone.
    pub(crate) fn reconcile_volumes(&mut self) {
        let names: Vec<String> = self.volumes.keys().cloned().collect();
        for name in names {
            self.reconcile_volume(&name);
        }
    }

    fn volume_users_except(&self, name: &str, except: &ContainerId) -> Vec<ContainerId> {
        let mut users = self.volume_users(name);
        users.retain(|u| u != except);
        users
    }

    fn add_volume(
        &mut self,
        name: String,
        labels: BTreeMap<String, String>,
        made_for: Option<ContainerId>,
    ) {
        let rec = VolumeRecord {
            name: name.clone(),
            labels,
            created_at: self.out.now.wall,
            state: ResourceState::Creating,
            made_for,
        };
        // Owned before it is made.
        self.out.persist_volume(&rec);
        self.volumes.insert(name, Volume::new(rec));
    }

    fn mark_volume_removing(&mut self, name: &str) {
        let Some(v) = self.volumes.get_mut(name) else {
            return;
        };
        if v.rec.state != ResourceState::Removing {
            v.rec.state = ResourceState::Removing;
            self.out.persist_volume(&v.rec);
        }
    }

    /// Issues the volume's next call, if it owes one and none is in flight.
    pub(crate) fn reconcile_volume(&mut self, name: &str) {
        let Some(v) = self.volumes.get_mut(name) else {
            return;
        };
        if v.in_flight.is_some() || v.retry_waiting {
            return;
        }
        let call = match v.rec.state {
            ResourceState::Creating => VolumeCall::Create {
                name: name.to_owned(),
                labels: v.rec.labels.clone(),
            },
            // Marked with its container's removal, it goes once that
            // record is gone, also when a crash came in between (found by
            // the simulator): never while a record names it.
            ResourceState::Removing
                if !bug!(self.config, PruneIgnoresUsers)
                    && self
                        .containers
                        .values()
                        .any(|c| named_volumes(&c.rec.config).any(|n| n == name)) =>
            {
                return;
            }
            ResourceState::Removing => VolumeCall::Remove {
                name: name.to_owned(),
            },
            ResourceState::Ready => return,
        };
        let removal = matches!(call, VolumeCall::Remove { .. });
        let op = self.out.volume_call(OpOwner::Volume(name.to_owned()), call);
        v.in_flight = Some((op, removal));
    }

    pub(crate) fn volume_result(&mut self, op: OpId, name: &str, result: Result<Done, Failure>) {
        let Some(v) = self.volumes.get_mut(name) else {
            return;
        };
        let Some((in_flight, removal)) = v.in_flight else {
            return;
        };
        if in_flight != op {
            return;
        }
        v.in_flight = None;
        // A make overtaken by a removal (its create rolled back meanwhile):
        // whatever it made goes now.
        if !removal && v.rec.state == ResourceState::Removing {
            return self.reconcile_volume(name);
        }
        match (v.rec.state, result) {
            (ResourceState::Creating, Ok(_)) => {
                v.attempts = 0;
                v.rec.state = ResourceState::Ready;
                self.out.persist_volume(&v.rec);
                if !std::mem::replace(&mut v.announced, true) {
                    self.out.publish_resource(ResourceEventKind::VolumeCreated {
                        name: name.to_owned(),
                    });
                }
                let waiting = std::mem::take(&mut v.requests);
                for req in waiting {
                    self.out.request_volume.remove(&req);
                    self.out.answer_now(req, Answer::Done);
                }
                // Containers whose create waited for it go on.
                for id in self.creates_naming(name) {
                    self.reconcile(&id);
                }
            }
            (ResourceState::Removing, Ok(_))
            | (
                ResourceState::Removing,
                Err(Failure {
                    kind: FailureKind::NotFound,
                    ..
                }),
            ) => {
                let Some(v) = self.volumes.remove(name) else {
                    return;
                };
                self.out.unpersist_volume(name);
                self.out
                    .timers
                    .cancel(&TimerKind::VolumeRetry(name.to_owned()));
                if v.announced {
                    self.out
                        .publish_resource(ResourceEventKind::VolumeDestroyed {
                            name: name.to_owned(),
                        });
                }
                for req in v.requests {
                    self.out.request_volume.remove(&req);
                    self.out.answer_now(req, Answer::Done);
                }
                self.prune_progress(false, name);
            }
            // A make refused (a bad name the host rejects, no space): the
            // creates waiting on it fail, and whatever was made goes.
            (ResourceState::Creating, Err(f))
                if !matches!(f.kind, FailureKind::Unavailable | FailureKind::Deadline) =>
            {
                let message = format!("create {name}: {}", f.message);
                let waiting = std::mem::take(&mut v.requests);
                for req in waiting {
                    self.out.request_volume.remove(&req);
                    self.out
                        .answer_now(req, error(ErrorKind::Internal, message.clone()));
                }
                // Rolled back now: their records go (and with them the
                // last names of this volume, which goes after them).
                for id in self.creates_naming(name) {
                    self.create_failed(&id, error(ErrorKind::Internal, message.clone()));
                    self.reconcile(&id);
                }
                self.mark_volume_removing(name);
                self.schedule_volume_retry(name);
            }
            // Never given up: a volume half made or half removed is
            // finished after a backoff. Whoever waits is told now.
            (_, Err(f)) => {
                let what = if removal { "remove" } else { "create" };
                let message = format!(
                    "{what} {name}: {}: it is tried again until it is done",
                    f.message
                );
                let waiting = std::mem::take(&mut v.requests);
                for req in waiting {
                    self.out.request_volume.remove(&req);
                    self.out
                        .answer_now(req, error(ErrorKind::Internal, message.clone()));
                }
                self.schedule_volume_retry(name);
            }
            (ResourceState::Ready, Ok(_)) => {}
        }
    }

    /// The containers being created that name volume `name`.
    fn creates_naming(&self, name: &str) -> Vec<ContainerId> {
        self.containers
            .values()
            .filter(|c| {
                c.rec.presence == crate::Presence::Creating
                    && named_volumes(&c.rec.config).any(|n| n == name)
            })
            .map(|c| c.rec.id.clone())
            .collect()
    }

    fn schedule_volume_retry(&mut self, name: &str) {
        let Some(v) = self.volumes.get_mut(name) else {
            return;
        };
        let attempts = v.attempts;
        v.attempts = v.attempts.saturating_add(1);
        v.retry_waiting = true;
        let delay = self.backoff(attempts);
        self.out.timers.set(
            TimerKind::VolumeRetry(name.to_owned()),
            self.out.now.at + delay,
        );
    }

    pub(crate) fn volume_retry_due(&mut self, name: &str) {
        if let Some(v) = self.volumes.get_mut(name) {
            v.retry_waiting = false;
        }
        self.reconcile_volume(name);
    }

    /// A prune waits for each volume (or network) it removes to be gone.
    pub(crate) fn prune_progress(&mut self, of_networks: bool, gone: &str) {
        let mut done = Vec::new();
        for (req, prune) in self.out.prunes.iter_mut() {
            if prune.of_networks != of_networks {
                continue;
            }
            prune.waiting.retain(|n| n != gone);
            if prune.waiting.is_empty() {
                done.push(*req);
            }
        }
        for req in done {
            if let Some(prune) = self.out.prunes.remove(&req) {
                self.out.answer_now(req, Answer::Pruned(prune.removed));
            }
        }
    }

    /// Volumes from the store, at start-up: what was being made or removed
    /// is made or removed now.
    pub(crate) fn restore_volumes(&mut self, records: Vec<VolumeRecord>) {
        for rec in records {
            let name = rec.name.clone();
            if self.volumes.contains_key(&name) {
                continue;
            }
            self.volumes.insert(name.clone(), Volume::new(rec));
        }
    }

    /// Volumes the executor found on disk: one no record owns is adopted
    /// as made (a volume is the user's data: never removed unasked); one
    /// recorded as made whose directory is gone is made again (empty).
    pub(crate) fn volumes_found(&mut self, found: Vec<FoundVolume>) {
        let on_disk: Map<String, FoundVolume> =
            found.into_iter().map(|f| (f.name.clone(), f)).collect();
        for (name, f) in &on_disk {
            if self.volumes.contains_key(name) || validate_volume_name(name).is_err() {
                continue;
            }
            let rec = VolumeRecord {
                name: name.clone(),
                labels: f.labels.clone(),
                created_at: f.created_at,
                state: ResourceState::Ready,
                made_for: None,
            };
            self.out.persist_volume(&rec);
            self.volumes.insert(name.clone(), Volume::new(rec));
        }
        let lost: Vec<String> = self
            .volumes
            .values()
            .filter(|v| v.rec.state == ResourceState::Ready && !on_disk.contains_key(&v.rec.name))
            .map(|v| v.rec.name.clone())
            .collect();
        for name in lost {
            if let Some(v) = self.volumes.get_mut(&name) {
                v.rec.state = ResourceState::Creating;
                self.out.persist_volume(&v.rec);
            }
        }
        self.reconcile_volumes();
    }
}

fn being_removed(name: &str) -> Answer {
    error(
        ErrorKind::Conflict,
        format!("volume {name} is being removed; try again"),
    )
}

fn in_use(name: &str, users: &[ContainerId]) -> Answer {
    let ids: Vec<String> = users.iter().map(ToString::to_string).collect();
    error(
        ErrorKind::Conflict,
        format!("remove {name}: volume is in use - [{}]", ids.join(", ")),
    )
}
