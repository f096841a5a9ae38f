//! The invariants, checked against the fake containerd's ground truth after
//! every step, and the convergence that the liveness phase must reach.
//!
//! Here: what the checker follows (the user's requests per container, the
//! events delivered and lost, whether the core can see). Its rooms, in
//! `check/`: requests and their answers (`requests.rs`), every call backed
//! by an intent (`calls.rs`), the view against the truth after every step
//! (`view.rs`), the network's books (`network.rs`), the books of volumes,
//! addresses, execs, freezes and mounts (`resources.rs`), convergence once
//! healed (`convergence.rs`) and health (`health.rs`).

use crate::model::Containerd;
use holdfast_core::{
    ContainerConfig, ContainerId, CoreConfig, ExitRecord, Instant, RequestId, WaitCondition,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod calls;
mod convergence;
mod health;
mod network;
mod requests;
pub mod resources;
mod view;

use health::health_consistent;
pub use network::network_converged;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserKind {
    Create,
    Start,
    Stop,
    Kill,
    Restart,
    Remove,
    Wait(WaitCondition),
    /// A record edit: rename, restart policy update.
    Edit,
    Pause,
    Unpause,
    /// `docker exec` create, start, or a terminal's resize.
    Exec,
    /// `docker volume` create, rm, prune.
    Volume,
    /// `docker commit`, `cp`: a hold on the container's snapshot.
    Snapshot,
}

/// The container a request addressed to none is counted against.
/// The longest a commit's read of the changes takes in the simulated
/// world: a commit under way at its answer bound is answered when its
/// read ends.
pub(crate) const COMMIT_READ_MAX: Duration = Duration::from_secs(4);

/// The longest any call waits for its answer in the simulated world (a
/// lost answer's deadline): what a commit under way at its bound may
/// still wait.
pub(crate) const CALL_ANSWER_MAX: Duration = Duration::from_secs(10);

/// The longest a create's call waits for its answer (a loaded containerd
/// is slow to create, and the adapter lets a create's calls run on past
/// the ordinary deadline): the core's `create_run_on` in the simulation,
/// longer than a request's answer bound, as in holdfastd.
pub(crate) const CREATE_ANSWER_MAX: Duration = Duration::from_secs(45);

/// By when a start against a leftover in containerd (every create refused
/// as existing) must have been given up: past the time a lost create may
/// run on (`CREATE_ANSWER_MAX`), the retries' bound and their backoff,
/// with room to spare.
pub(crate) const LEFTOVER_GIVEN_UP: Duration = Duration::from_secs(90);

pub(crate) const UNKNOWN_CONTAINER: &str = "no-such-container";

#[derive(Debug)]
struct Request {
    kind: UserKind,
    container: ContainerId,
    issued: Instant,
    /// When it must have been answered by (none for a wait).
    bound: Option<Duration>,
    /// A start waits past `bound` for its outcome for as long as it is
    /// still wanted (its client is kept waiting, never told it failed while
    /// it may still be carried out).
    waits_for_outcome: bool,
}

/// What the user asked of a container, which is what may cause a kill,
/// delete or start.
#[derive(Debug, Default)]
struct Asked {
    /// Last stop, kill, restart or remove.
    kill_at: Option<Instant>,
    start: bool,
    remove: bool,
    create_done: bool,
    config: Option<ContainerConfig>,
    /// Last user SIGKILL or remove: a SIGKILL without a grace period.
    sigkill_at: Option<Instant>,
    /// The shortest grace period of the stops asked for since the last exit.
    stop_grace: Option<Duration>,
    /// When the first signal other than SIGKILL went out after that stop.
    stop_signal_sent: Option<Instant>,
    /// A stop (or a kill that means "stay down", by dockerd's rule) came
    /// after the last user start: no restart policy may start it again.
    stayed_down: bool,
    /// A user start or restart not yet carried out (no start sent since).
    start_wanted: bool,
    /// A start of it was ever attempted (its network's setup or a
    /// `CreateTask` went out), whatever came of it.
    start_attempted: bool,
    /// The kill or stop that set `stayed_down`: refused, it did not.
    stayed_down_by: Option<RequestId>,
    /// `start_wanted` before that stop (a refused stop cancelled no start).
    start_wanted_before: bool,
    /// Signals the user asked for and the current run has not ended: each
    /// with the request that asked (a refused request takes its permit
    /// back). A stop permits its resolved signal and SIGKILL after the grace
    /// period; a forced remove, SIGKILL.
    permits: Vec<(RequestId, holdfast_core::Signal, Instant)>,
    /// The user stopped, killed, removed or restarted it at some point
    /// (`unless-stopped` and dockerd's stay-down rule may then rule out a
    /// policy restart; only untouched containers are demanded one).
    meddled: bool,
    /// A forced remove that was not refused: the container must be gone
    /// from both sides once the world heals.
    force_removed: bool,
    /// When a SIGKILL was last sent: a 137 after it is ours, not the OOM
    /// killer's.
    sigkill_sent_at: Option<Instant>,
    /// The last user pause and unpause: what may freeze or thaw a task
    /// (a stop, kill or remove may thaw one too).
    pause_at: Option<Instant>,
    unpause_at: Option<Instant>,
    /// When a user's pause was last answered done: it stands until an
    /// unpause after it.
    pause_done_at: Option<Instant>,
    /// The last commit asked to read the changes frozen: it may freeze
    /// the task, and thaw it unless a user's pause stands.
    commit_at: Option<Instant>,
    /// A user asked for a resource update.
    update_asked: bool,
}

#[derive(Debug)]
pub struct Checker {
    config: CoreConfig,
    pub checks: u64,
    outstanding: BTreeMap<RequestId, Request>,
    asked: BTreeMap<ContainerId, Asked>,
    /// The container of each exec a user created.
    exec_containers: BTreeMap<String, ContainerId>,
    /// The execs a user asked to kill: only these may be signalled, and
    /// none of them may still run once the world has healed.
    exec_kills_asked: BTreeSet<String>,
    /// The exec each kill request is of, until it is answered.
    exec_kill_requests: BTreeMap<RequestId, String>,
    /// Recorded exits by container, pid and run (pids are reused).
    exits: BTreeMap<(ContainerId, u32, u64), ExitRecord>,
    /// Processes (container, pid, created) whose exit was recorded.
    verified: BTreeSet<(ContainerId, u32, Instant)>,
    dies: BTreeMap<(ContainerId, u32, u64), u32>,
    /// Since when the core has been connected without a break.
    ready_since: Option<Instant>,
    /// Exits whose event was lost on a live stream, by container and pid:
    /// only a relist (the periodic one at the latest) can tell them.
    lost_exits: std::collections::BTreeSet<(ContainerId, u32)>,
    /// Tasks whose TaskDelete reached the core: the core has a reason to
    /// look (a relist) even if the exit before it was lost.
    deletes_seen: BTreeMap<(ContainerId, u32), Instant>,
    /// The last OOM event delivered to this daemon, per container: when
    /// its shim published it (an event delivered late is still about the
    /// run it was published in), and whether an exit of another pid came
    /// after it (which the core takes as the OOM's run ending).
    oom_delivered: BTreeMap<ContainerId, (holdfast_core::WallTime, bool)>,
    /// Runs whose recorded exit their restart policy calls for: a start
    /// must follow once the world heals.
    restart_owed: std::collections::BTreeSet<(ContainerId, u64)>,
    /// Since when each container's start has been wanted without a break
    /// (see `start_not_stuck_on_a_leftover`).
    start_wanted_since: BTreeMap<ContainerId, Instant>,
    /// The core may not act on containers: since it (re)started, or lost
    /// its connection, no complete relist ended that was asked for after a
    /// subscription went live. `blind_mark` is the last op issued when it
    /// went blind; `live_after` the subscription that went live since.
    blind: bool,
    blind_mark: u64,
    live_after: Option<u64>,
    last_op: u64,
    /// The latest Subscribe and Relist calls issued.
    latest_sub: u64,
    latest_relist: u64,
    /// The last event of each volume, network, mount and connection in
    /// this life of holdfastd: whether it said made (or gone).
    resource_events: BTreeMap<String, bool>,
}

impl Checker {
    pub fn new(config: CoreConfig) -> Checker {
        Checker {
            config,
            checks: 0,
            outstanding: BTreeMap::new(),
            asked: BTreeMap::new(),
            exec_containers: BTreeMap::new(),
            exec_kills_asked: BTreeSet::new(),
            exec_kill_requests: BTreeMap::new(),
            exits: BTreeMap::new(),
            dies: BTreeMap::new(),
            ready_since: None,
            verified: std::collections::BTreeSet::new(),
            lost_exits: std::collections::BTreeSet::new(),
            deletes_seen: BTreeMap::new(),
            oom_delivered: BTreeMap::new(),
            restart_owed: std::collections::BTreeSet::new(),
            start_wanted_since: BTreeMap::new(),
            blind: true,
            blind_mark: 0,
            live_after: None,
            last_op: 0,
            latest_sub: 0,
            latest_relist: 0,
            resource_events: BTreeMap::new(),
        }
    }

    pub fn daemon_started(&mut self) {
        self.blind = true;
        self.blind_mark = 0;
        self.live_after = None;
        self.last_op = 0;
        self.latest_sub = 0;
        self.latest_relist = 0;
    }

    /// Requests waiting on a crashed daemon die with it (the client sees
    /// its connection reset): by design, not a lost request.
    pub fn daemon_crashed(&mut self) {
        self.ready_since = None;
        self.outstanding.clear();
        // What the core knew of OOM events is not persisted.
        self.oom_delivered.clear();
        // A restarted daemon may not know whether a create its
        // predecessor sent still runs on: its starts are timed anew.
        self.start_wanted_since.clear();
        self.resource_events.clear();
    }

    /// Whether the exit of `pid`, as `container`'s current process, was
    /// recorded (and checked against the truth).
    pub fn exit_verified(&self, container: &ContainerId, pid: u32, created: Instant) -> bool {
        self.verified.contains(&(container.clone(), pid, created))
    }

    /// containerd published `event` and it never reached the subscriber.
    pub fn event_lost(&mut self, event: &holdfast_core::ContainerdEvent, _now: Instant) {
        if let holdfast_core::ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            ..
        } = event
            && exec_id == container.as_str()
        {
            self.lost_exits.insert((container.clone(), *pid));
        }
    }

    /// `event` is about to be fed to the core.
    pub fn delivered(
        &mut self,
        event: &holdfast_core::ContainerdEvent,
        cd: &Containerd,
        now: Instant,
    ) {
        use holdfast_core::ContainerdEvent as E;
        match event {
            E::TaskDelete { container, pid } => {
                self.deletes_seen.insert((container.clone(), *pid), now);
            }
            E::TaskOom {
                container,
                published_at,
            } => {
                let at = published_at.unwrap_or_else(|| crate::sim::wall(now));
                self.oom_delivered.insert(container.clone(), (at, false));
            }
            E::TaskExit {
                container,
                exec_id,
                pid,
                ..
            } if exec_id == container.as_str() => {
                let current = cd.tasks.get(container).map(|t| t.pid);
                if current != Some(*pid)
                    && let Some(seen) = self.oom_delivered.get_mut(container)
                {
                    seen.1 = true;
                }
            }
            _ => {}
        }
    }

    /// An input is about to be fed to the core: follow whether it may act.
    pub fn input(&mut self, input: &holdfast_core::Input) {
        use holdfast_core::{ConnectionFact as F, FailureKind, Input, RelistPart};
        let go_blind = |me: &mut Checker| {
            me.blind = true;
            me.blind_mark = me.last_op;
            me.live_after = None;
        };
        match input {
            Input::Connection(F::Unreachable(_)) => go_blind(self),
            Input::Connection(F::StreamBroken(op, _)) if op.0 == self.latest_sub => go_blind(self),
            Input::Connection(F::StreamLive(op))
                if op.0 > self.blind_mark && op.0 == self.latest_sub =>
            {
                self.live_after = Some(op.0);
            }
            Input::ActionResult(_, Err(f)) if f.kind == FailureKind::Unavailable => go_blind(self),
            // A relist of a connection already given up (a subscription
            // came after it) failing changes nothing; nor does one that
            // found no answer in time: it is asked again on the same
            // stream (blind until one ends, if it was).
            Input::ActionResult(op, Err(f))
                if op.0 == self.latest_sub
                    || op.0 == self.latest_relist
                        && op.0 > self.latest_sub
                        && f.kind != FailureKind::Deadline =>
            {
                go_blind(self)
            }
            Input::Relist(op, RelistPart::End)
                if self.live_after.is_some_and(|live| op.0 > live) =>
            {
                self.blind = false;
            }
            _ => {}
        }
    }
}
