//! One container as the core tracks it: its durable [`Record`], what the core
//! last learned about its task, and the requests waiting on it.

use crate::ids::{OpId, RequestId};
use crate::input::WaitCondition;
use crate::record::{ExitRecord, Presence, Record};
use crate::signal::Signal;
use crate::time::{Instant, WallTime};
use serde::Serialize;
use std::time::Duration;

/// What the core believes containerd has for the container's init task.
/// Changed only by our own successful calls, exit evidence and relists.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub enum TaskState {
    /// Not known since the daemon started: wait for a complete relist.
    Unknown,
    Absent,
    /// Created, not started: the process exists but runs nothing yet.
    Created {
        pid: u32,
    },
    Running {
        pid: u32,
    },
    /// Exited (its exit is recorded); containerd keeps it until deleted.
    Stopped,
}

/// The containerd call a container is waiting on. One at a time per
/// container, so results never race each other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Step {
    CreateContainer,
    /// Of the volume mount with this index (among the config's mounts).
    FillVolume(u8),
    CreateTask,
    StartTask,
    Kill {
        signal: Signal,
        purpose: KillPurpose,
    },
    Pause,
    Resume,
    UpdateResources,
    DeleteTask,
    DeleteContainer,
    NetworkSetup,
    NetworkTeardown,
    /// Of the endpoint with this slot.
    EndpointSetup(u8),
    EndpointTeardown(u8),
    /// Of the exec with this serial.
    StartExec(u32),
    KillExec(u32),
    ExecState(u32),
    DeleteExec(u32),
    /// A commit's freeze and thaw (`Call::Pause`, `Call::Resume`).
    CommitFreeze,
    CommitThaw,
    /// Of the commit with this serial.
    ReadChanges(u32),
    MountRootfs,
    UnmountRootfs,
    RefreshNames,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum KillPurpose {
    /// A signal from `docker kill`, the first of `intents.kills`.
    User,
    /// The stop signal that starts the grace period.
    Stop,
    /// SIGKILL when the grace period is over.
    Escalate,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pending {
    Create,
    Start,
    Stop,
    Kill(Signal),
    /// A restart. Asked while a start was on its way (a run up, its
    /// answer not yet in), it holds the count of starts sent then: that
    /// start is not the restart's, whose own is due after that run.
    Restart {
        after_start: Option<u64>,
    },
    Remove,
    Wait(WaitCondition),
    Pause,
    Unpause,
    Update,
    /// A hot connect of the endpoint with this slot.
    Connect(u8),
    /// A disconnect of the endpoint with this slot.
    Disconnect(u8),
    /// A start of the exec with this serial.
    ExecStart(u32),
    /// A kill of the exec with this serial.
    ExecKill(u32),
    /// The commit with this serial.
    Commit(u32),
    /// A copy waiting for the snapshot to be mounted.
    Mount,
}

impl Pending {
    /// A restart whose own start is not sent yet, `starts_sent` starts
    /// having been sent: a start sent before it was asked is not its own.
    pub(crate) fn restart_unsent(self, starts_sent: u64) -> bool {
        matches!(self, Pending::Restart { after_start: Some(n) } if n >= starts_sent)
    }
}

#[derive(Debug)]
pub(crate) struct Container {
    pub(crate) rec: Record,
    pub(crate) task: TaskState,
    pub(crate) in_flight: Option<(OpId, Step)>,
    /// The newest op id at the last call issued for this container or the
    /// last result received for it. A relist issued before then may predate
    /// that call's effect, so it proves nothing about this container.
    pub(crate) last_activity: OpId,
    /// `last_activity` before the call in flight was issued: what it goes
    /// back to when containerd answers that call "not found" (a call that
    /// found nothing to act on changed nothing, so a relist it overlapped
    /// still tells the truth; otherwise a retried kill of a task gone
    /// could keep every relist from settling).
    pub(crate) activity_before_call: OpId,
    /// Consecutive failed attempts of `retried_step`, each retried. A
    /// failure of another step starts the count over: a kill refused twice
    /// is not given up sooner because a thaw before it failed.
    pub(crate) attempts: u32,
    pub(crate) retried_step: Option<Step>,
    /// The CreateTask or StartTask of the pending start that failed in a way
    /// that may have taken effect (its answer lost), when no call succeeded
    /// since. Only a later refusal of that same step is in doubt: once the
    /// start has moved on (a relist showed the created task), a refusal of
    /// the next step is a plain refusal.
    pub(crate) uncertain_step: Option<Step>,
    /// A call on the task failed in a way that may have taken effect (its
    /// answer lost), so the view may be wrong until a relist has looked: a
    /// CreateTask may have made a task the view says absent (its network
    /// attachment is not released), a DeleteTask of a created task may have
    /// removed it (it is not started).
    pub(crate) task_in_doubt: bool,
    /// When a CreateTask of ours last went unanswered (its answer lost,
    /// or sent by a daemon before a restart): containerd may still be
    /// carrying it out until `create_run_on` after, and refuses another
    /// create of the container as existing meanwhile.
    pub(crate) lost_create_at: Option<Instant>,
    /// A create rolled back at a restart that cut it: the create call of
    /// the daemon before may still land in containerd until then (it runs
    /// on, `create_run_on`), so the container, deleted at once, is
    /// deleted again then before its record goes.
    pub(crate) delete_not_before: Option<Instant>,
    /// The first of those two deletes is done.
    pub(crate) deleted_early: bool,
    /// Since when its task creates have been refused as existing (reset
    /// once a task is created, or the start given up).
    pub(crate) exists_refused_since: Option<Instant>,
    /// A retry timer is armed; do not issue until it fires (or we reconnect).
    pub(crate) retry_waiting: bool,
    pub(crate) restart_delay: Duration,
    /// When the stop signal was delivered plus the grace period.
    pub(crate) stop_deadline: Option<Instant>,
    /// SIGKILL was delivered for the current stop.
    pub(crate) stop_escalated: bool,
    /// An OOM event was seen during the current run.
    pub(crate) oom: bool,
    /// The newest OOM event that came while no run was known (its task's
    /// create sent, not answered): when it was published. It is the run's
    /// whose exit is recorded next, if published between that run's
    /// create and its exit.
    pub(crate) unplaced_oom: Option<WallTime>,
    /// The cgroup's count of OOM kills in the current run, carried by the
    /// evidence of its exit (`None`: not known).
    pub(crate) oom_kills: Option<u64>,
    /// The kill being delivered was announced as a `kill` event.
    pub(crate) kill_announced: Option<Signal>,
    /// We delivered SIGKILL to the current run.
    pub(crate) sigkill_sent: bool,
    /// The view was confirmed by a relist since the last (re)connect.
    pub(crate) confirmed: bool,
    /// containerd froze the current run's task: learned from our own Pause
    /// and Resume answers and from settled relists (events only make us
    /// look). Not persisted: a restarted daemon learns it from its relist.
    pub(crate) paused: bool,
    /// A user's pause (`true`) or unpause (`false`) not carried out yet.
    /// Not persisted: it is refused while containerd is unreachable, and
    /// its requester waits for it.
    pub(crate) pause_wanted: Option<bool>,
    /// A kill that means "stay down" reached the frozen task: thaw it once,
    /// so that it takes effect (dockerd resumes right after such a kill).
    pub(crate) thaw_due: bool,
    /// What `intents.froze_since_kill` was before the freeze of ours in
    /// flight: what it is again if containerd refuses that freeze.
    pub(crate) froze_since_kill_before: bool,
    /// StartTasks sent for this container since this daemon began: tells
    /// a restart's own start from one sent before it was asked.
    pub(crate) starts_sent: u64,
    /// A relist could not settle this container (a call was in flight) and
    /// listed its task otherwise than the core believes (gone, stopped,
    /// frozen or thawed): look again once the call is answered.
    pub(crate) look_again: bool,
    /// A user's resource update not carried out yet: the whole new config.
    /// Not persisted, like a pause.
    pub(crate) update_wanted: Option<std::sync::Arc<crate::config::ContainerConfig>>,
    /// Execs (by serial) whose end may have been missed: asked about
    /// (`Call::ExecState`) while their run's task is up.
    pub(crate) exec_looks: std::collections::BTreeSet<u32>,
    /// During its create: containerd has the container, and this many of
    /// its volume mounts were filled from the image. Not persisted: a
    /// create cut short by a crash is rolled back.
    pub(crate) made_in_containerd: bool,
    pub(crate) mounts_filled: usize,
    /// Commits waiting for its changes to be read, oldest first.
    pub(crate) commits: Vec<crate::snapshot::CommitWanted>,
    pub(crate) next_commit: u32,
    /// Copies working on its mounted snapshot.
    pub(crate) rootfs_leases: u32,
    pub(crate) requests: Vec<(RequestId, Pending)>,
}

impl Container {
    pub(crate) fn new(rec: Record, task: TaskState, restart_delay: Duration) -> Container {
        Container {
            rec,
            task,
            in_flight: None,
            last_activity: OpId(0),
            activity_before_call: OpId(0),
            attempts: 0,
            retried_step: None,
            uncertain_step: None,
            task_in_doubt: false,
            lost_create_at: None,
            delete_not_before: None,
            deleted_early: false,
            exists_refused_since: None,
            retry_waiting: false,
            restart_delay,
            stop_deadline: None,
            stop_escalated: false,
            oom: false,
            unplaced_oom: None,
            oom_kills: None,
            sigkill_sent: false,
            kill_announced: None,
            confirmed: false,
            paused: false,
            pause_wanted: None,
            thaw_due: false,
            froze_since_kill_before: false,
            starts_sent: 0,
            look_again: false,
            update_wanted: None,
            exec_looks: std::collections::BTreeSet::new(),
            made_in_containerd: false,
            mounts_filled: 0,
            commits: Vec::new(),
            next_commit: 0,
            rootfs_leases: 0,
            requests: Vec::new(),
        }
    }

    /// A new run begins: its task was created with `pid`.
    pub(crate) fn begin_run(&mut self, pid: u32) {
        self.rec.run += 1;
        self.rec.pid = Some(pid);
        self.rec.started_at = None;
        self.rec.start_sent = false;
        self.oom = false;
        self.oom_kills = None;
        self.rec.began_at = None;
        self.sigkill_sent = false;
        self.stop_deadline = None;
        self.stop_escalated = false;
        self.kill_announced = None;
        self.paused = false;
        self.thaw_due = false;
        self.rec.intents.froze_since_kill = false;
    }

    /// A freeze of ours (a user's pause, a commit's) goes out: noted, with
    /// what was known before it (restored if containerd refuses it).
    /// One after a SIGKILL of this run is no wish that stands: the process
    /// is dead once thawed, and is thawed (after a daemon restart too, when
    /// this freeze may not have happened). Whether the record changed.
    pub(crate) fn freeze_of_ours_goes_out(&mut self) -> bool {
        let before = self.rec.intents.froze_since_kill;
        self.froze_since_kill_before = before;
        self.rec.intents.froze_since_kill |= !self.sigkill_sent;
        self.rec.intents.froze_since_kill != before
    }

    /// Whether the OOM killer ended this run (or killed one of its
    /// processes), as dockerd's `OOMKilled` means it. The cgroup's count of
    /// OOM kills during the run decides when the exit's evidence carried
    /// it. Without it: `TaskOOM` carries no pid, and after an outage the
    /// shim retries events out of order, so an OOM event may belong to an
    /// earlier run; the OOM killer's SIGKILL is the corroboration: the exit
    /// must be 137, and not one our own SIGKILL explains. (That misses an
    /// OOM-killed child whose init exited otherwise; a wrong OOMKilled
    /// would be worse.)
    pub(crate) fn oom_killed(&self, exit_code: i32, finished_at: WallTime) -> bool {
        let unplaced = self.unplaced_oom.is_some_and(|at| {
            at <= finished_at && self.rec.create_sent_at.is_some_and(|sent| at >= sent)
        });
        match self.oom_kills {
            Some(kills) => kills > 0,
            None => (self.oom || unplaced) && exit_code == 137 && !self.sigkill_sent,
        }
    }

    /// Whether something containerd stamped `at` (an exit, an OOM event's
    /// publication) is older than the current run, so cannot be about it,
    /// even with its pid (the kernel reused it): from before the run began,
    /// or no later than the previous run's recorded exit.
    pub(crate) fn predates_run(&self, at: WallTime) -> bool {
        let earlier_exit = self.rec.exit.as_ref().filter(|e| e.run < self.rec.run);
        self.rec.began_at.is_some_and(|began| at < began)
            || earlier_exit.is_some_and(|e| at <= e.finished_at)
    }

    /// Down: no process, and nothing (a start, a restart the policy owes)
    /// about to run one. What a wait for "not running" waits for.
    pub(crate) fn is_down(&self) -> bool {
        !self.is_running() && !self.rec.intents.start && !self.rec.intents.policy_restart
    }

    /// A start that a user's "stay down" kill came after, while it was
    /// already sent (so it was kept: it may have taken effect). It stands
    /// only if it did; it is not sent again (dockerd does not restart a
    /// container the user killed).
    pub(crate) fn start_only_if_taken(&self) -> bool {
        let i = &self.rec.intents;
        i.start && i.user_stopped && i.exit_on_next && i.stop.is_none()
    }

    /// Consecutive failed attempts of `step`, each retried.
    pub(crate) fn attempts_of(&self, step: Step) -> u32 {
        if self.retried_step == Some(step) {
            self.attempts
        } else {
            0
        }
    }

    /// The exit of the current run, if recorded.
    pub(crate) fn current_exit(&self) -> Option<&ExitRecord> {
        self.rec.exit.as_ref().filter(|e| e.run == self.rec.run)
    }

    /// Whether a process of this container may be running: what stop and
    /// kill act on. An unconfirmed container counts by its record.
    pub(crate) fn is_running(&self) -> bool {
        if self.current_exit().is_some() {
            return false;
        }
        match self.task {
            TaskState::Created { .. } | TaskState::Running { .. } => true,
            TaskState::Absent | TaskState::Stopped => false,
            TaskState::Unknown => self.rec.pid.is_some(),
        }
    }

    /// Whether the current run is frozen (only a running one can be).
    pub(crate) fn is_paused(&self) -> bool {
        self.paused && self.is_running() && self.status() == Status::Running
    }

    pub(crate) fn status(&self) -> Status {
        if self.rec.intents.remove {
            Status::Removing
        } else if self.rec.intents.policy_start
            && self.rec.intents.start
            && !matches!(self.task, TaskState::Running { .. })
        {
            Status::Restarting
        } else if self.is_running() && !self.created_never_started() {
            Status::Running
        } else if self.rec.intents.policy_restart {
            Status::Restarting
        } else if self.rec.exit.is_some() {
            Status::Exited
        } else {
            Status::Created
        }
    }

    /// A task was created but its start was cancelled before it was sent
    /// (a stop during a restart): it runs nothing of the user's and is about
    /// to be deleted, so it is not shown as running.
    fn created_never_started(&self) -> bool {
        matches!(self.task, TaskState::Created { .. })
            && !self.rec.intents.start
            && !self.rec.start_sent
            && self.rec.started_at.is_none()
    }

    /// A user's command overrides the restart policy: no restart is owed,
    /// and a policy start in flight is no longer the policy's (its failure
    /// must not bring the restart back).
    pub(crate) fn cancel_policy_restart(&mut self, timers: &mut crate::timers::Timers) {
        self.rec.intents.policy_restart = false;
        self.rec.intents.policy_start = false;
        timers.cancel(&crate::TimerKind::RestartBackoff(self.rec.id.clone()));
    }

    /// The volume mounts (index among the config's mounts) a create fills
    /// from the image, in order.
    pub(crate) fn mounts_to_fill(&self) -> impl Iterator<Item = usize> + '_ {
        self.rec
            .config
            .mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| m.volume.is_some())
            .map(|(i, _)| i)
    }

    /// A call of its create is with containerd (the container's record
    /// and snapshot, or a volume filled from the image).
    pub(crate) fn create_under_way(&self) -> bool {
        self.rec.presence == Presence::Creating
            && matches!(
                self.in_flight,
                Some((_, Step::CreateContainer | Step::FillVolume(_)))
            )
    }

    pub(crate) fn visible(&self) -> bool {
        self.rec.presence != Presence::Discarding
    }

    pub(crate) fn last_exit_code(&self) -> i32 {
        self.rec.exit.as_ref().map_or(0, |e| e.exit_code)
    }
}

/// Docker's container states, as `ps` and `inspect` show them.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize)]
pub enum Status {
    Created,
    Running,
    Restarting,
    Removing,
    Exited,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Running => "running",
            Status::Restarting => "restarting",
            Status::Removing => "removing",
            Status::Exited => "exited",
        }
    }
}

/// A read-only view of one container for the API layer and for tests.
#[derive(Clone, Copy, Debug)]
pub struct ContainerView<'a> {
    pub record: &'a Record,
    pub status: Status,
    pub task: TaskState,
    /// Confirmed by a complete relist since the last reconnect.
    pub confirmed: bool,
    /// Running, with its processes frozen (`docker pause`): dockerd shows
    /// such a container as running and paused, with status "paused".
    pub paused: bool,
}

impl<'a> ContainerView<'a> {
    pub(crate) fn of(c: &'a Container) -> ContainerView<'a> {
        ContainerView {
            record: &c.rec,
            status: c.status(),
            task: c.task,
            confirmed: c.confirmed,
            paused: c.is_paused(),
        }
    }

    /// The recorded exit of the run that is current now, if any.
    pub fn current_exit(&self) -> Option<&'a ExitRecord> {
        self.record
            .exit
            .as_ref()
            .filter(|e| e.run == self.record.run)
    }
}
