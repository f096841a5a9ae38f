//! A container's snapshot, held by the core for the length of a user's
//! request: a commit reads what the container changed (frozen meanwhile,
//! as dockerd freezes it, and thawed whatever happens), and a copy into or
//! out of a stopped container works on its mounted snapshot (unmounted
//! whatever happens). What is held is persisted before it is made (a
//! commit's freeze, a mount), so a restarted daemon undoes what a crash
//! left: it never leaves a container frozen or a snapshot mounted.

use crate::container::{Container, Pending, Step, TaskState};
use crate::ids::{ContainerId, RequestId};
use crate::input::{Failure, FailureKind};
use crate::{Answer, Call, Core, ErrorKind, error};

/// A commit waiting for the container's changes to be read.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct CommitWanted {
    pub(crate) serial: u32,
    /// Where the layer of its changes is written.
    pub(crate) layer: String,
    /// Read them frozen (`docker commit --pause`, the default).
    pub(crate) freeze: bool,
}

impl Container {
    /// The next call a commit or a copy owes on this container, if any.
    /// `None` while its task is not known (a relist says first).
    pub(crate) fn snapshot_step(&self) -> Option<(Call, Step)> {
        let id = self.rec.id.clone();
        let running = matches!(self.task, TaskState::Running { .. }) && self.is_running();
        if let Some(commit) = self.commits.first() {
            if commit.freeze && running && !self.paused && !self.rec.intents.commit_thaw {
                return Some((Call::Pause { id }, Step::CommitFreeze));
            }
            let call = Call::ReadChanges {
                id,
                layer: commit.layer.clone(),
            };
            return Some((call, Step::ReadChanges(commit.serial)));
        }
        if self.rec.intents.commit_thaw && running && self.paused {
            return Some((Call::Resume { id }, Step::CommitThaw));
        }
        let task_up = matches!(
            self.task,
            TaskState::Created { .. } | TaskState::Running { .. }
        );
        if self.rootfs_leases > 0 && !self.rec.rootfs_mounted && !task_up {
            return Some((Call::MountRootfs { id }, Step::MountRootfs));
        }
        if self.rootfs_leases == 0 && self.rec.rootfs_mounted {
            return Some((Call::UnmountRootfs { id }, Step::UnmountRootfs));
        }
        None
    }

    /// Whether the commit `serial` is being carried out (its freeze or
    /// its read in flight): it ends by its call's answer, however long a
    /// big container's read takes.
    pub(crate) fn commit_under_way(&self, serial: u32) -> bool {
        match self.in_flight {
            Some((_, Step::ReadChanges(s))) => s == serial,
            Some((_, Step::CommitFreeze)) => {
                self.commits.first().is_some_and(|w| w.serial == serial)
            }
            _ => false,
        }
    }

    /// A freeze of ours for a commit may or may not have taken effect (its
    /// answer was lost), and no relist has said since.
    pub(crate) fn commit_thaw_in_doubt(&self) -> bool {
        self.rec.intents.commit_thaw && !self.confirmed
    }

    /// A freeze of ours for a commit is over (the commit read, the run
    /// ended, a relist showed the task thawed): nothing is left to thaw.
    ///
    /// A task that no longer runs holds no freeze; a running one is known
    /// thawed only once a relist confirmed the view (found by the
    /// properties: a run that ended while unconfirmed kept its thaw owed).
    pub(crate) fn commit_thaw_moot(&self) -> bool {
        let thawed = match self.task {
            TaskState::Running { .. } => self.confirmed && !self.paused,
            TaskState::Unknown => false,
            TaskState::Absent | TaskState::Created { .. } | TaskState::Stopped => true,
        };
        self.rec.intents.commit_thaw && self.commits.is_empty() && thawed
    }
}

impl Core {
    /// `docker commit`: the container's changes are written to `layer`,
    /// read frozen when `pause` asks it and the container runs (as dockerd),
    /// then it is thawed.
    pub(crate) fn read_changes(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        pause: bool,
        layer: String,
    ) {
        let ready = self.conn.is_ready();
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.rec.intents.remove {
            let message = format!("container {id} is marked for removal and cannot be committed");
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        if !ready {
            let message = "containerd is unreachable: the container was not committed; try again";
            return self
                .out
                .answer_now(req, error(ErrorKind::Unavailable, message));
        }
        let serial = c.next_commit;
        c.next_commit += 1;
        // A container the user paused stays as it is: neither frozen nor
        // thawed by the commit.
        let freeze = pause && !c.is_paused();
        c.commits.push(crate::snapshot::CommitWanted {
            serial,
            layer,
            freeze,
        });
        self.add_pending(
            id,
            req,
            Pending::Commit(serial),
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    /// A copy (`docker cp`, `export`) wants the container's files: the
    /// root of its running process, or its snapshot mounted (held until
    /// `UnmountRootfs`). Answered `Answer::Rootfs`.
    pub(crate) fn mount_rootfs(&mut self, req: RequestId, id: &ContainerId) {
        let ready = self.conn.is_ready();
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.rec.intents.remove {
            let message = format!("container {id} is marked for removal");
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        if let TaskState::Created { pid } | TaskState::Running { pid } = c.task
            && c.is_running()
            && c.rootfs_leases == 0
        {
            return self.out.answer_now(req, Answer::Rootfs { pid: Some(pid) });
        }
        c.rootfs_leases += 1;
        let mounted = c.rec.rootfs_mounted
            && !matches!(
                c.in_flight,
                Some((_, Step::MountRootfs | Step::UnmountRootfs))
            );
        if mounted {
            return self.out.answer_now(req, Answer::Rootfs { pid: None });
        }
        if !ready {
            c.rootfs_leases -= 1;
            let message =
                "containerd is unreachable: the container's files cannot be reached; try again";
            return self
                .out
                .answer_now(req, error(ErrorKind::Unavailable, message));
        }
        self.add_pending(
            id,
            req,
            Pending::Mount,
            Some(self.config.request_answer_bound),
        );
        self.reconcile(id);
    }

    /// A copy is done with the container's files: the last one out
    /// unmounts its snapshot.
    pub(crate) fn unmount_rootfs(&mut self, req: RequestId, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rootfs_leases = c.rootfs_leases.saturating_sub(1);
        self.out.answer_now(req, Answer::Done);
        self.reconcile(id);
    }

    pub(crate) fn snapshot_step_done(&mut self, id: &ContainerId, step: Step) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        match step {
            Step::CommitFreeze | Step::CommitThaw => {
                let frozen = step == Step::CommitFreeze;
                // An exit may have overtaken this answer: the run is over.
                if c.current_exit().is_none() {
                    c.paused = frozen;
                    let kind = if frozen {
                        crate::UserEventKind::Pause
                    } else {
                        crate::UserEventKind::Unpause
                    };
                    self.out.publish(id, kind);
                }
                if !frozen {
                    c.rec.intents.commit_thaw = false;
                    self.out.persist(&c.rec);
                }
            }
            Step::ReadChanges(serial) => {
                c.commits.retain(|w| w.serial != serial);
                self.answer_pending_where(id, |p| p == Pending::Commit(serial), || Answer::Done);
            }
            Step::MountRootfs => {
                self.answer_pending_where(
                    id,
                    |p| p == Pending::Mount,
                    || Answer::Rootfs { pid: None },
                );
            }
            Step::UnmountRootfs => {
                c.rec.rootfs_mounted = false;
                self.out.persist(&c.rec);
            }
            _ => {}
        }
    }

    /// A failed snapshot call. A commit whose freeze or read failed is
    /// answered with why; a thaw or an unmount is never given up.
    pub(crate) fn snapshot_step_failed(&mut self, id: &ContainerId, step: Step, failure: Failure) {
        use FailureKind as K;
        if failure.kind == K::Unavailable {
            self.lose_connection();
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let kind = match failure.kind {
            K::Unavailable => ErrorKind::Unavailable,
            K::NotFound => ErrorKind::NotFound,
            K::Invalid => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        };
        match step {
            Step::CommitFreeze | Step::ReadChanges(_) => {
                let serial = match step {
                    Step::ReadChanges(serial) => Some(serial),
                    _ => c.commits.first().map(|w| w.serial),
                };
                let Some(serial) = serial else {
                    return;
                };
                c.commits.retain(|w| w.serial != serial);
                // A freeze whose answer was lost may have taken effect: the
                // thaw owed stays, and a relist says whether it is needed
                // (until then nothing known of the task is sure: found by
                // the simulator, the thaw was dropped as moot before).
                if step == Step::CommitFreeze {
                    if matches!(failure.kind, K::Deadline | K::Unavailable) {
                        c.confirmed = false;
                    }
                    self.request_refresh();
                }
                let message = format!("Cannot commit container {id}: {}", failure.message);
                self.answer_pending_where(
                    id,
                    |p| p == Pending::Commit(serial),
                    || error(kind, message.clone()),
                );
            }
            Step::MountRootfs => {
                // Its lease goes with its requester's answer; one in doubt
                // (a mount whose answer was lost) is unmounted.
                let waiting = c
                    .requests
                    .iter()
                    .filter(|(_, p)| *p == Pending::Mount)
                    .count();
                c.rootfs_leases = c
                    .rootfs_leases
                    .saturating_sub(u32::try_from(waiting).unwrap_or(u32::MAX));
                let message = format!(
                    "cannot reach the files of container {id}: {}",
                    failure.message
                );
                self.answer_pending_where(
                    id,
                    |p| p == Pending::Mount,
                    || error(kind, message.clone()),
                );
            }
            _ if failure.kind == K::Unavailable => {}
            _ => {
                self.request_refresh();
                self.schedule_retry(id, step);
            }
        }
    }
}
