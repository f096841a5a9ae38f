//! Properties over arbitrary interleavings of commands, events (lost,
//! duplicated, stale), disconnects, relists and failed calls, against a small
//! model of containerd ("the world") that the harness keeps in step.
//!
//! The world reuses a container's pids, OOM-kills processes, honours
//! configured stop signals (request, container, image), and holdfastd itself
//! restarts from its persisted records; any earlier event, of any run, may be
//! delivered again at any time.
//!
//! 1. Every kill, delete or (re)start is backed by a user's or policy's intent:
//!    none is caused by a connection fact or a failed call; a signal is one a
//!    user asked for (a kill, the stop signal by precedence, SIGKILL).
//! 2. An exit is recorded at most once per run, never changed, and is the
//!    world's exit of that run's process (an OOM kill recorded as one when
//!    its evidence came in order, and never a false one).
//! 3. At every quiescent point (connected, no call open) every container
//!    whose changes the core could see (none lost since a relist) matches
//!    the world: no dead process shown running, no live one shown dead.
//! 4. Every stop request is answered within grace + slack. Every start is
//!    answered within the answer bound, or later only while the core is
//!    connected and the start still wanted (containerd still working on
//!    it), and never past the start's final bound.
//! 5. The same inputs give the same actions.
//! 6. No request is lost: all but waits are answered once the world heals,
//!    and nothing is left behind (containerd and holdfast show the same
//!    containers, no stopped task is kept).
//! 7. Network attachments (every other container is on the bridge network):
//!    no allocation without an owner (every attachment in the world has a
//!    persisted record that says it may exist), no owner without its
//!    allocation (every task of a bridge container has its attachment), no
//!    attachment made twice, and none left without a task once healed. The
//!    same for the endpoints of `network connect`: every endpoint in the
//!    world has a record whose endpoint of that slot may exist, every one
//!    recorded attached exists, none is made twice, none outlives its task
//!    once healed, and every wanted one of a running bridge container is
//!    made once healed.

mod chosen;
#[path = "../support/mod.rs"]
mod support;

use holdfast_core::*;
use proptest::prelude::*;
use proptest::test_runner::{FailurePersistence, FileFailurePersistence, PersistedSeed};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use support::cid;

const IDS: [&str; 3] = ["c0", "c1", "c2"];

/// How much later than the first an exit reported again says it was.
const REPORTED_AGAIN_LATER_NANOS: i64 = 1_000_000;

/// Endpoints a container may have beyond its own network (the core's rule).
const ENDPOINTS_MAX: usize = 16;

/// Calls answered one after another in a healed world before the case is
/// taken to loop: far more than three containers' work (and their relists)
/// needs, even after 160 steps.
const CALLS_HEALED_MAX: u32 = 5_000;

/// Every call the core issues, containerd's and the network side's, in
/// one flat list: the harness's world models both, and follows every
/// call the same way (who owns it, what its answer did).
#[derive(Clone, Debug, PartialEq)]
enum Call {
    Subscribe,
    Relist,
    CreateContainer {
        id: ContainerId,
    },
    CreateTask {
        id: ContainerId,
    },
    StartTask {
        id: ContainerId,
    },
    Kill {
        id: ContainerId,
        signal: Signal,
        all: bool,
    },
    Pause {
        id: ContainerId,
    },
    Resume {
        id: ContainerId,
    },
    UpdateResources {
        id: ContainerId,
        running: bool,
    },
    DeleteTask {
        id: ContainerId,
    },
    DeleteContainer {
        id: ContainerId,
    },
    NetworkSetup {
        id: ContainerId,
        own_interface: bool,
    },
    NetworkTeardown {
        id: ContainerId,
    },
    EndpointSetup {
        id: ContainerId,
        endpoint: Endpoint,
    },
    EndpointTeardown {
        id: ContainerId,
        endpoint: Endpoint,
    },
}

impl Call {
    fn container_id(&self) -> Option<&ContainerId> {
        match self {
            Call::Subscribe | Call::Relist => None,
            Call::CreateContainer { id }
            | Call::CreateTask { id }
            | Call::StartTask { id }
            | Call::Kill { id, .. }
            | Call::Pause { id }
            | Call::Resume { id }
            | Call::UpdateResources { id, .. }
            | Call::DeleteTask { id }
            | Call::DeleteContainer { id }
            | Call::NetworkSetup { id, .. }
            | Call::NetworkTeardown { id }
            | Call::EndpointSetup { id, .. }
            | Call::EndpointTeardown { id, .. } => Some(id),
        }
    }

    /// The calls among `actions`, in order.
    fn all(actions: &[Action]) -> Vec<Call> {
        actions
            .iter()
            .filter_map(Call::of)
            .map(|(_, c)| c)
            .collect()
    }

    /// The call an action issues, if it issues one.
    fn of(action: &Action) -> Option<(OpId, Call)> {
        use holdfast_core::Call as C;
        let call = match action {
            Action::Call { op, call } => (
                *op,
                match call.clone() {
                    C::Subscribe => Call::Subscribe,
                    C::Relist => Call::Relist,
                    C::CreateContainer { id, .. } => Call::CreateContainer { id },
                    C::CreateTask { id } => Call::CreateTask { id },
                    C::StartTask { id } => Call::StartTask { id },
                    C::Kill { id, signal, all } => Call::Kill { id, signal, all },
                    C::Pause { id } => Call::Pause { id },
                    C::Resume { id } => Call::Resume { id },
                    C::UpdateResources { id, running, .. } => Call::UpdateResources { id, running },
                    C::DeleteTask { id } => Call::DeleteTask { id },
                    C::DeleteContainer { id } => Call::DeleteContainer { id },
                },
            ),
            Action::Network { op, call } => (
                *op,
                match call.clone() {
                    NetworkCall::Setup {
                        id, own_interface, ..
                    } => Call::NetworkSetup { id, own_interface },
                    NetworkCall::Teardown { id, .. } => Call::NetworkTeardown { id },
                    NetworkCall::EndpointSetup { id, endpoint, .. } => {
                        Call::EndpointSetup { id, endpoint }
                    }
                    NetworkCall::EndpointTeardown { id, endpoint, .. } => {
                        Call::EndpointTeardown { id, endpoint }
                    }
                },
            ),
            _ => return None,
        };
        Some(call)
    }
}

/// One of the earlier ones (events, waits, probes), as a fraction of
/// their number: what proptest's `sample::Index` is, drawn the same way
/// (one `u64`), but one a chosen case can write.
#[derive(Clone, Copy, Debug)]
struct Pick(u64);

impl Pick {
    fn of(self, len: usize) -> usize {
        ((len as u128 * u128::from(self.0)) >> 64) as usize
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// Restart policy (low two bits; bit 2: `c1` on the host's network),
    /// and stop signals: container's (low two bits) and image's (next
    /// two), from [`STOP_SIGNALS`].
    Create(usize, u8, u8),
    Start(usize),
    /// Timeout, and the request's own signal.
    Stop(usize, Option<u8>, Option<u8>),
    Kill(usize, bool),
    Restart(usize),
    Remove(usize, bool),
    Wait(usize, u8),
    /// A record edit: a rename (even argument; often onto another's name)
    /// or a restart policy update.
    Edit(usize, u8),
    /// The client of the n-th pending wait goes away.
    Cancel(Pick),
    /// `docker pause` (true) or `docker unpause` (false).
    Pause(usize, bool),
    /// Someone else freezes (true) or thaws the running task, as `ctr
    /// tasks pause` would: containerd's event tells the core.
    OutsidePause(usize, bool),
    /// `docker update --memory` (MiB).
    Update(usize, u8),
    /// `docker network connect` (even) or `disconnect` (odd) of `side0`,
    /// `side1`, the container's own network or (a disconnect) `host`
    /// (the next two bits).
    Network(usize, u8),
    /// Resolve the n-th outstanding call: 0 = succeed, 7 = succeed with the
    /// world's reaction (an exit) seen before the answer, 8 = succeed and
    /// reuse the container's last deleted pid (a CreateTask; a relist lists
    /// one task as a placeholder), 9 = take
    /// effect with the answer lost (a deadline), else a failure.
    Resolve(usize, u8),
    /// The oldest relist of a connection given up (or a relist the core
    /// no longer waits for) answers late, with the tasks as they were when
    /// it was asked for.
    LateRelist,
    /// A running task exits on its own in the world; the event may be lost.
    WorldExit(usize, u8, bool),
    /// Deliver any earlier event again (duplicate or stale, of any run).
    ReplayEvent(Pick),
    /// An exit already recorded is reported again, differently (another
    /// status and a later time for the same pid, as a second source gives).
    ExitReportedAgain(Pick),
    ExecExit(usize),
    /// A bare OOM event (of no process the world killed).
    Oom(usize),
    /// The OOM killer kills a running task: TaskOom, then its exit (137);
    /// both events may be lost.
    WorldOom(usize, bool),
    /// holdfastd restarts from its records; calls in flight go nowhere.
    DaemonRestart,
    ShimDies(usize),
    StreamBreaks,
    ContainerdDown,
    ContainerdUp,
    Advance(u16),
    /// A health probe reports back: the n-th asked for (again, for an
    /// earlier one), passed (0..=2), failed (3), timed out (4) or could
    /// not run (5).
    ProbeResult(Pick, u8),
}

fn step() -> impl Strategy<Value = Step> {
    let idx = 0..IDS.len();
    prop_oneof![
        1 => (idx.clone(), 0..8u8, any::<u8>()).prop_map(|(i, p, s)| Step::Create(i, p, s)),
        1 => idx.clone().prop_map(Step::Start),
        1 => (idx.clone(), proptest::option::of(0..4u8), proptest::option::of(0..4u8)).prop_map(|(i, t, s)| Step::Stop(i, t, s)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, k)| Step::Kill(i, k)),
        1 => idx.clone().prop_map(Step::Restart),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::Remove(i, f)),
        1 => (idx.clone(), 0..3u8).prop_map(|(i, c)| Step::Wait(i, c)),
        1 => (idx.clone(), any::<u8>()).prop_map(|(i, a)| Step::Edit(i, a)),
        1 => any::<u64>().prop_map(|n| Step::Cancel(Pick(n))),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::Pause(i, f)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::OutsidePause(i, f)),
        1 => (idx.clone(), any::<u8>()).prop_map(|(i, m)| Step::Update(i, m)),
        2 => (idx.clone(), 0..8u8).prop_map(|(i, a)| Step::Network(i, a)),
        10 => (0..8usize, prop_oneof![3 => Just(0u8), 1 => Just(7u8), 1 => Just(8u8), 1 => Just(9u8), 1 => 1..7u8]).prop_map(|(n, k)| Step::Resolve(n, k)),
        1 => (idx.clone(), 0..3u8, any::<bool>()).prop_map(|(i, s, lost)| Step::WorldExit(i, s, lost)),
        1 => any::<u64>().prop_map(|n| Step::ReplayEvent(Pick(n))),
        1 => any::<u64>().prop_map(|n| Step::ExitReportedAgain(Pick(n))),
        1 => idx.clone().prop_map(Step::ExecExit),
        1 => idx.clone().prop_map(Step::Oom),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, lost)| Step::WorldOom(i, lost)),
        1 => Just(Step::LateRelist),
        1 => Just(Step::DaemonRestart),
        1 => idx.clone().prop_map(Step::ShimDies),
        1 => Just(Step::StreamBreaks),
        1 => Just(Step::ContainerdDown),
        1 => Just(Step::ContainerdUp),
        2 => (1..20_000u16).prop_map(Step::Advance),
        2 => (any::<u64>(), 0..6u8).prop_map(|(n, o)| Step::ProbeResult(Pick(n), o)),
    ]
}

/// Steps around relists: what happens between a relist being asked for and
/// its listing arriving (answers, lost answers, events lost, shims dying,
/// pauses, streams breaking), on one container, in short cases, so that
/// the races the relist rules exist for are common rather than rare. The
/// container is `c0` (on the bridge network: its attachment races too) or
/// `c1` (no network).
fn relist_race_step(container: usize) -> impl Strategy<Value = Step> {
    let idx = container..container + 1;
    prop_oneof![
        1 => (idx.clone(), 0..4u8, any::<u8>()).prop_map(|(i, p, s)| Step::Create(i, p, s)),
        2 => idx.clone().prop_map(Step::Start),
        1 => (idx.clone(), proptest::option::of(0..4u8), Just(None)).prop_map(|(i, t, s)| Step::Stop(i, t, s)),
        2 => (idx.clone(), any::<bool>()).prop_map(|(i, k)| Step::Kill(i, k)),
        2 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::Pause(i, f)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::OutsidePause(i, f)),
        8 => (0..4usize, prop_oneof![3 => Just(0u8), 2 => Just(7u8), 1 => Just(8u8), 2 => Just(9u8), 1 => 1..7u8]).prop_map(|(n, k)| Step::Resolve(n, k)),
        1 => (idx.clone(), 0..3u8, Just(true)).prop_map(|(i, s, lost)| Step::WorldExit(i, s, lost)),
        1 => Just(Step::LateRelist),
        1 => idx.clone().prop_map(Step::ShimDies),
        2 => Just(Step::StreamBreaks),
        2 => (1..3_000u16).prop_map(Step::Advance),
    ]
}

/// Swarm testing (as in the simulator): each case switches some kinds of
/// disruption off, so that the others can lead somewhere deep (a restart
/// after a lost answer needs a connection that stays up for a while).
fn enabled(step: &Step, swarm: u8) -> bool {
    let bit = match step {
        Step::DaemonRestart => 0,
        Step::StreamBreaks => 1,
        Step::ContainerdDown | Step::ContainerdUp => 2,
        Step::ShimDies(_) => 3,
        Step::WorldOom(..) | Step::Oom(_) => 4,
        Step::ReplayEvent(_) | Step::ExitReportedAgain(_) | Step::ExecExit(_) => 5,
        _ => return true,
    };
    swarm & (1 << bit) != 0
}

/// What a `network connect` or `disconnect` must come to.
#[derive(Clone, Copy, Debug)]
enum NetExpect {
    Refused(ErrorKind),
    DoneNow,
    Pending,
}

#[derive(Clone, Debug, PartialEq)]
enum WorldTask {
    Created(u32),
    Running(u32),
    Stopped(u32, u32, WallTime),
}

/// A health check for containers whose argument has bit 5 set; its
/// interval, retries and start period spread by the higher bits.
fn health_check(n: u8) -> Option<HealthConfig> {
    (n & 0x20 != 0).then(|| HealthConfig {
        test: vec!["CMD".into(), "true".into()],
        interval: Some(Duration::from_secs(1 + u64::from(n >> 6))),
        timeout: Some(Duration::from_secs(1)),
        start_period: (n & 0x40 != 0).then(|| Duration::from_secs(3)),
        start_interval: Some(Duration::from_millis(500)),
        retries: Some(u32::from(n >> 6)),
    })
}

/// A container's health agrees with its run and with dockerd's rules: a
/// probed run is a running, current one; the log is bounded; the status
/// follows the failing streak.
fn health_consistent(core: &Core, view: &ContainerView<'_>) -> Result<(), TestCaseError> {
    use holdfast_core::health::{HEALTH_LOG_MAX, PROBE_OUTPUT_MAX_BYTES};
    let id = &view.record.id;
    let Some(h) = core.health(id) else {
        return Ok(());
    };
    let config = view.record.config.healthcheck.as_ref();
    prop_assert!(config.is_some(), "{} has a health with no check", id);
    let retries = config.map_or(0, HealthConfig::retries);
    prop_assert!(h.run <= view.record.run, "{}: health of a later run", id);
    prop_assert!(
        h.ended || (view.status == Status::Running && h.run == view.record.run),
        "{} probed in run {} while {:?} in run {}",
        id,
        h.run,
        view.status,
        view.record.run
    );
    prop_assert!(h.log.len() <= HEALTH_LOG_MAX);
    prop_assert!(
        h.log
            .iter()
            .all(|l| l.output.len() <= PROBE_OUTPUT_MAX_BYTES)
    );
    let consistent = match h.status {
        HealthStatus::Healthy => {
            h.failing_streak < retries && h.log.iter().any(|l| l.exit_code == 0)
        }
        HealthStatus::Starting => h.failing_streak < retries,
        HealthStatus::Unhealthy => h.ended || h.failing_streak >= retries,
    };
    let codes: Vec<i32> = h.log.iter().map(|l| l.exit_code).collect();
    prop_assert!(
        consistent,
        "{}: {:?} with a failing streak of {} (retries {}), exit codes {:?}",
        id,
        h.status,
        h.failing_streak,
        retries,
        codes
    );
    Ok(())
}

fn restart_policy(n: u8) -> RestartPolicy {
    match n % 4 {
        0 => RestartPolicy::No,
        1 => RestartPolicy::Always,
        2 => RestartPolicy::UnlessStopped,
        _ => RestartPolicy::OnFailure { max_retries: 2 },
    }
}

/// Stop signals a container or its image may configure.
const STOP_SIGNALS: [Option<u32>; 4] = [None, Some(2), Some(3), Some(9)];

fn stop_signal(n: u8) -> Option<Signal> {
    STOP_SIGNALS[usize::from(n % 4)].and_then(|n| Signal::try_from(n).ok())
}

fn oom_count_unread(pid: u32) -> bool {
    pid.is_multiple_of(5)
}

/// One process the world ran: the truth a recorded exit is checked against.
#[derive(Clone, Debug)]
struct Instance {
    pid: u32,
    exit: Option<u32>,
    /// The OOM killer ended it.
    oom: bool,
    /// Its OOM event reached this holdfastd, and no exit of another pid of
    /// the container came after it (the core takes that as a new run).
    oom_in_order: bool,
    /// We sent SIGKILL to it: a 137 may be ours, not the OOM killer's.
    sigkilled: bool,
    /// When the container's previous process exited, in the world.
    after: Option<WallTime>,
    /// An OOM event published after `after` reached the core while this
    /// was the container's process: without a cgroup count, the core
    /// cannot tell it from this process's own (the event names no pid).
    oom_event_in_run: bool,
    /// A StartTask was sent while this was the container's newest task
    /// (whatever became of it: an attempt whose answer was lost, or one
    /// sent as its shim died, may have worked).
    start_sent: bool,
    /// When the CreateTask that made it was sent: nothing of this process
    /// happened before.
    asked_at: WallTime,
    /// Deleted by the core's own task delete before it ever ran (its
    /// answer may have been lost, but the core knows it sent it).
    deleted_unstarted: bool,
    /// A StartTask set it running.
    ran: bool,
}

/// containerd as far as these properties need it.
#[derive(Default)]
struct World {
    up: bool,
    containers: BTreeMap<ContainerId, ()>,
    /// When each container's latest CreateTask was sent.
    create_asked: BTreeMap<ContainerId, WallTime>,
    tasks: BTreeMap<ContainerId, WorldTask>,
    next_pid: u32,
    instances: Vec<Instance>,
    /// The newest instance of each (container, pid): pids are reused.
    latest: BTreeMap<(ContainerId, u32), usize>,
    /// Pids of each container's deleted tasks, newest last.
    deleted_pids: BTreeMap<ContainerId, Vec<u32>>,
    /// Running tasks that are frozen, by container: their pid.
    paused: BTreeMap<ContainerId, u32>,
    /// Swarm bit 7, a cgroup v1 freezer: a frozen process does not act
    /// even on SIGKILL until it is thawed (under v2 it dies at once).
    frozen_holds_kill: bool,
    /// Frozen tasks SIGKILLed under such a freezer, by container: their
    /// pid, which dies when thawed.
    kill_on_thaw: BTreeMap<ContainerId, u32>,
    /// Frozen tasks a user's "stay down" kill reached (SIGKILL, the stop
    /// signal, or any signal when none is configured): dockerd thaws
    /// them so that the signal lands. Until the core freezes one again.
    stay_down_frozen: std::collections::BTreeSet<ContainerId>,
    /// Tasks (container, pid) a user's "stay down" kill reached: frozen
    /// from outside afterwards, the core thaws them too (it cannot tell
    /// whether the freeze came first and holds the signal).
    stay_down_sent: std::collections::BTreeSet<(ContainerId, u32)>,
    /// When each container's last process exited.
    last_exit: BTreeMap<ContainerId, WallTime>,
    /// Containers attached to the network (the CNI plugins' state).
    attached: std::collections::BTreeSet<ContainerId>,
    /// Endpoints made (`network connect`): container and slot.
    endpoints: std::collections::BTreeSet<(ContainerId, u8)>,
    /// The `eth0` each container's own attachment made, with its
    /// published ports (the portmap plugin's rules): gone with the
    /// attachment, or with the release of slot 0 once disconnected.
    own_eth0: std::collections::BTreeSet<ContainerId>,
}

impl World {
    fn instance(&mut self, id: &ContainerId, pid: u32) -> Option<&mut Instance> {
        let i = *self.latest.get(&(id.clone(), pid))?;
        self.instances.get_mut(i)
    }

    /// What the adapter reads from the cgroup of `pid`'s exited task: its
    /// OOM kills. Not always (a task created before the adapter began, a
    /// cgroup gone): one pid in five comes without the count, so that the
    /// core's fallback rule is exercised too.
    fn oom_kills(&self, id: &ContainerId, pid: u32) -> Option<u64> {
        if oom_count_unread(pid) {
            return None;
        }
        let i = *self.latest.get(&(id.clone(), pid))?;
        self.instances.get(i).map(|inst| u64::from(inst.oom))
    }

    fn current(&mut self, id: &ContainerId) -> Option<&mut Instance> {
        let pid = match self.tasks.get(id)? {
            WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..) => *p,
        };
        self.instance(id, pid)
    }

    /// The core's task delete: a created task's process never ran.
    fn delete_by_call(&mut self, id: &ContainerId) {
        if let Some(WorldTask::Created(pid)) = self.tasks.get(id).cloned()
            && let Some(inst) = self.instance(id, pid)
        {
            inst.deleted_unstarted = true;
        }
        self.delete_task(id);
    }

    fn delete_task(&mut self, id: &ContainerId) {
        self.paused.remove(id);
        self.kill_on_thaw.remove(id);
        if let Some(task) = self.tasks.remove(id) {
            let (WorldTask::Created(pid) | WorldTask::Running(pid) | WorldTask::Stopped(pid, ..)) =
                task;
            self.deleted_pids.entry(id.clone()).or_default().push(pid);
        }
    }
}

/// What a kill, pause or unpause asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ask {
    Kill(Signal),
    Pause,
    Unpause,
}

/// A wait not answered yet: container, condition, and the exit recorded
/// (run, time) when it began.
type PendingWait = (ContainerId, WaitCondition, Option<(u64, WallTime)>);

struct Harness {
    /// Runs whose OOM was announced (a user event), per daemon.
    oom_announced: std::collections::BTreeSet<(ContainerId, u64)>,
    /// The furthest each run's task got in the core's view (1 created,
    /// 2 running, 3 stopped), per daemon.
    task_progress: BTreeMap<(ContainerId, u64, Option<u32>), u8>,
    core: Core,
    /// The core's tuning, the same across daemon restarts.
    config: CoreConfig,
    now: Now,
    world: World,
    outstanding: Vec<(OpId, Call)>,
    /// Event streams the world holds open (an abandoned subscription may
    /// go live late, beside the current one).
    subscriptions: std::collections::BTreeSet<OpId>,
    past_events: Vec<ContainerdEvent>,
    next_req: u64,
    trace: Vec<Action>,
    /// First exit seen per (container, run).
    exits: BTreeMap<(ContainerId, u64), ExitRecord>,
    /// What holdfastd has on disk, as its Persist and Unpersist actions say.
    records: BTreeMap<ContainerId, Record>,
    /// Configs as created, for the expected stop signal.
    configs: BTreeMap<ContainerId, ContainerConfig>,
    /// Containers whose change the core could not see (an event lost, a
    /// shim that died), with the newest op id at the time: a relist asked
    /// for after it must come before the view can be expected to match.
    unseen: BTreeMap<ContainerId, u64>,
    last_op: u64,
    daemons: u64,
    /// The call being resolved takes effect, but its answer is lost.
    answer_lost: bool,
    relisting: bool,
    /// Consecutive failed calls per container, of any call and any kind
    /// (containerd going away too): zero means nothing failed since the
    /// last success. (`streaks` counts as the core counts retries.)
    failures: BTreeMap<ContainerId, u32>,
    /// Per container: the call refused in a row (a key), how many times,
    /// and whether one of those attempts may have taken effect.
    streaks: BTreeMap<ContainerId, (String, u32, bool)>,
    /// The world's tasks when each relist was asked for.
    relist_snapshots: BTreeMap<OpId, BTreeMap<ContainerId, WorldTask>>,
    /// The container whose call is being answered.
    answering: Option<ContainerId>,
    /// The call being answered.
    answering_call: Option<Call>,
    newest_relist: u64,
    /// When each stop's SIGKILL is due at the latest.
    kill_deadline: BTreeMap<ContainerId, Instant>,
    /// Start and restart requests, by container.
    starts: BTreeMap<RequestId, ContainerId>,
    /// The newest op id when each start or restart was asked.
    start_asked_at_op: BTreeMap<RequestId, u64>,
    /// Start requests (not restarts): when each was asked.
    starts_asked: BTreeMap<RequestId, Instant>,
    /// A relist listed a placeholder: another must be asked for by then.
    look_again_by: Option<Instant>,
    /// A call that can end, freeze or remove a task was refused or lost
    /// its answer while connected, or a task was deleted with no exit the
    /// core saw: what containerd has may differ from the view, so a relist
    /// asked for after it must come by then (once a relist already in
    /// flight ends).
    refresh_owed_by: Option<Instant>,
    /// Containers whose task a lost answer left in doubt: a create, or a
    /// created task's delete, may or may not have taken effect.
    doubts: BTreeSet<ContainerId>,
    /// A doubt with nothing of its container in flight and no relist
    /// under way: a relist that can settle it is owed by then.
    doubt_owed_by: BTreeMap<ContainerId, Instant>,
    /// The newest op when a call of each container was last sent or
    /// answered: only a relist asked for after it can settle a doubt.
    activity: BTreeMap<ContainerId, u64>,
    /// Stop requests: when they are due at the latest.
    stop_bounds: BTreeMap<RequestId, Instant>,
    answered: BTreeMap<RequestId, Instant>,
    /// Stop signals in flight, and when each container's was delivered.
    stop_signal_ops: BTreeMap<OpId, ContainerId>,
    signal_delivered: BTreeMap<ContainerId, Instant>,
    /// Every request but a wait, which may rightly wait for ever.
    must_answer: Vec<RequestId>,
    /// Waits not answered yet: container, condition, and its recorded exit
    /// (run, time) when the wait began.
    waits: BTreeMap<RequestId, PendingWait>,
    /// Kills, pauses and unpauses not answered yet: the end of their
    /// container's run answers them at once.
    asks: BTreeMap<RequestId, (ContainerId, Ask)>,
    /// Per container: starts asked for (the core's start intent turning
    /// on: a user's start or restart, a policy's restart) and tasks the
    /// world started. Each run needs a start of its own: one asked for
    /// once is not a promise to start again. (A start whose created task
    /// vanished before it began is tried again: no run.)
    start_ledger: BTreeMap<ContainerId, (u64, u64)>,
    /// Kill calls carrying a user's kill (not a stop's signal) whose
    /// results the core has not been given yet, by op.
    user_kill_ops: BTreeMap<OpId, (ContainerId, Signal)>,
    slack: Duration,
    /// Containers a user asked to pause (true) or unpause (false).
    pauses_asked: std::collections::BTreeSet<(ContainerId, bool)>,
    /// Containers a user asked to update.
    updates_asked: std::collections::BTreeSet<ContainerId>,
    /// Containers whose unpause was answered at its bound (it will be
    /// carried out when possible), until a pause is asked again.
    unpause_standing: std::collections::BTreeSet<ContainerId>,
    /// Updates not answered yet, by request.
    updates: BTreeMap<RequestId, ContainerId>,
    /// Connects asked for: container and network.
    connects: BTreeMap<RequestId, (ContainerId, String)>,
    /// Connects said done: container and network.
    connected: BTreeMap<RequestId, (ContainerId, String)>,
    /// Disconnects asked for: container and network.
    disconnects: Vec<(RequestId, ContainerId, String)>,
    /// Restart requests (a subset of `starts`).
    restarts: std::collections::BTreeSet<RequestId>,
    /// The runs whose `start` event was announced.
    starts_announced: BTreeSet<(ContainerId, u64)>,
    /// The newest StartTask sent to each container.
    last_start_op: BTreeMap<ContainerId, u64>,
    /// Removes of a container shown when asked, not answered yet.
    removes: std::collections::BTreeSet<RequestId>,
    /// Signals announced (a `kill` event) and not delivered since, by
    /// container; and the kill calls in flight, by op.
    kills_announced: std::collections::BTreeSet<(ContainerId, Signal)>,
    kill_calls: BTreeMap<OpId, (ContainerId, Signal)>,
    /// Every health probe asked for, in order.
    probes: Vec<Probe>,
    /// Whether `Step::ProbeResult` feeds results (off: every result lost).
    probe_results: bool,
    /// The restart policy's next backoff per container, by dockerd's rule:
    /// `restart_initial`, doubling to `restart_max` with each restart,
    /// back to `restart_initial` after a run of `restart_reset_after`.
    restart_backoff: BTreeMap<ContainerId, Duration>,
    /// Start and restart requests whose start took effect in the world
    /// (a task started while they waited).
    starts_reached: std::collections::BTreeSet<RequestId>,
    /// Containers a "stay down" kill reached while they were shown
    /// restarting, before any start of the new run was sent: no new task
    /// is made for them until a user's start.
    kept_down: std::collections::BTreeSet<ContainerId>,
    /// Containers a "stay down" kill reached while shown restarting: no
    /// start is sent to them (again) until a user's start.
    start_not_again: std::collections::BTreeSet<ContainerId>,
    /// Containers connected back to their own network while stopped
    /// (`connects_back`), with no disconnect asked since: every run from
    /// then on has its own `eth0`, its ports published.
    connected_back: std::collections::BTreeSet<ContainerId>,
}

impl Harness {
    /// A fresh core and world. Swarm bit 6: relist every 40 s while
    /// connected (instead of every 300 s), so that periodic relists are
    /// often in flight when a late answer of an abandoned one arrives.
    /// Swarm bit 7: a cgroup v1 freezer, where even SIGKILL waits for a
    /// thaw, so a kill of a paused container takes effect only if the
    /// core thaws it.
    fn new(swarm: u8) -> Harness {
        let now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(support::WALL0));
        let mut config = CoreConfig::default();
        if swarm & (1 << 6) != 0 {
            config.relist_interval = Some(Duration::from_secs(40));
        }
        let frozen_holds_kill = swarm & (1 << 7) != 0;
        let slack = config.stop_answer_slack;
        Harness {
            task_progress: BTreeMap::new(),
            oom_announced: Default::default(),
            core: Core::new(config.clone(), 9, now),
            config,
            now,
            world: World {
                up: true,
                next_pid: 100,
                frozen_holds_kill,
                ..World::default()
            },
            outstanding: Vec::new(),
            subscriptions: Default::default(),
            past_events: Vec::new(),
            next_req: 0,
            trace: Vec::new(),
            exits: BTreeMap::new(),
            records: BTreeMap::new(),
            configs: BTreeMap::new(),
            unseen: BTreeMap::new(),
            last_op: 0,
            daemons: 1,
            answer_lost: false,
            relisting: false,
            failures: BTreeMap::new(),
            streaks: BTreeMap::new(),
            answering: None,
            answering_call: None,
            relist_snapshots: BTreeMap::new(),
            newest_relist: 0,
            kill_deadline: BTreeMap::new(),
            starts: BTreeMap::new(),
            start_asked_at_op: BTreeMap::new(),
            starts_asked: BTreeMap::new(),
            look_again_by: None,
            refresh_owed_by: None,
            doubts: BTreeSet::new(),
            doubt_owed_by: BTreeMap::new(),
            activity: BTreeMap::new(),
            stop_bounds: BTreeMap::new(),
            answered: BTreeMap::new(),
            stop_signal_ops: BTreeMap::new(),
            signal_delivered: BTreeMap::new(),
            must_answer: Vec::new(),
            asks: BTreeMap::new(),
            start_ledger: BTreeMap::new(),
            user_kill_ops: BTreeMap::new(),
            waits: BTreeMap::new(),
            slack,
            pauses_asked: Default::default(),
            updates_asked: Default::default(),
            updates: BTreeMap::new(),
            unpause_standing: Default::default(),
            connects: BTreeMap::new(),
            connected: BTreeMap::new(),
            disconnects: Vec::new(),
            restarts: Default::default(),
            last_start_op: BTreeMap::new(),
            starts_announced: BTreeSet::new(),
            removes: Default::default(),
            kills_announced: Default::default(),
            kill_calls: BTreeMap::new(),
            probes: Vec::new(),
            probe_results: true,
            restart_backoff: BTreeMap::new(),
            starts_reached: Default::default(),
            kept_down: Default::default(),
            start_not_again: Default::default(),
            connected_back: Default::default(),
        }
    }

    /// Feeds one input and checks the per-step properties.
    fn feed(&mut self, input: Input) -> Result<(), TestCaseError> {
        self.event_fed(&input);
        // A kill, a freeze or thaw, or a delete that containerd refused or
        // whose answer was lost, or an update that found no task, while
        // connected: the core asks for a relist (what it took for the task
        // may be wrong).
        let answered_call = self.answering_call.take();
        if let Input::ActionResult(_, result) = &input
            && let Some(call) = &answered_call
        {
            self.note_doubt(call, result);
        }
        if let Input::ActionResult(_, Err(failure)) = &input
            && let Some(call) = answered_call.clone()
            && self.core.connection() == ConnectionState::Ready
            && failure.kind != FailureKind::Unavailable
        {
            let looks = match call {
                Call::Kill { .. } | Call::Pause { .. } | Call::Resume { .. } => true,
                Call::DeleteTask { .. } | Call::DeleteContainer { .. } => {
                    failure.kind != FailureKind::NotFound
                }
                // An update of a running task that finds none: the
                // task is gone, whatever the view says.
                Call::UpdateResources { running: true, .. } => {
                    failure.kind == FailureKind::NotFound
                }
                _ => false,
            };
            if looks && self.refresh_owed_by.is_none() {
                self.refresh_owed_by = Some(self.now.at + Duration::from_secs(2));
            }
        }
        // (Whose signal an answered kill carried: a user's, or a stop's.)
        let user_kill = match &input {
            Input::ActionResult(op, _) => self.user_kill_ops.get(op).cloned(),
            _ => None,
        };
        if let Input::ActionResult(op, _) = &input {
            self.user_kill_ops.remove(op);
        }
        // A signal delivered: its next delivery is announced anew.
        if let Input::ActionResult(op, result) = &input
            && let Some(kill) = self.kill_calls.remove(op)
            && result.is_ok()
        {
            self.kills_announced.remove(&kill);
        }
        if let Input::ActionResult(_, result) = &input
            && let Some(id) = self.answering.take()
        {
            // Any failed answer counts, the world's own refusals too (a
            // start refused because a lost one took effect); a lost answer
            // is a failure to the core: a deadline.
            let failures = self.failures.entry(id).or_default();
            *failures = if result.is_err() { *failures + 1 } else { 0 };
        }
        let before: BTreeMap<ContainerId, bool> = self
            .core
            .containers()
            .map(|c| (c.record.id.clone(), c.record.intents.start))
            .collect();
        // Restart counts, and whether a user's start or restart waits.
        let counts_before: BTreeMap<ContainerId, (u32, bool)> = self
            .core
            .containers()
            .map(|c| {
                let id = &c.record.id;
                let user_start = self
                    .starts
                    .iter()
                    .any(|(r, s)| s == id && !self.answered.contains_key(r));
                (id.clone(), (c.record.restart_count, user_start))
            })
            .collect();
        // Each run's known pid, and whether its exit is recorded.
        let pids_before: BTreeMap<ContainerId, (u64, Option<u32>, bool)> = self
            .core
            .containers()
            .map(|c| {
                let r = c.record;
                (r.id.clone(), (r.run, r.pid, c.current_exit().is_some()))
            })
            .collect();
        let owed_before: BTreeMap<ContainerId, (bool, bool)> = self
            .core
            .containers()
            .map(|c| {
                let owed = c.record.intents.policy_restart;
                (c.record.id.clone(), (owed, c.current_exit().is_some()))
            })
            .collect();
        // A shim sends TaskOOM just before its TaskExit: an OOM followed
        // by an earlier run's exit was that run's (late, after an outage),
        // so the current run's next OOM is its first.
        if let Input::Event(ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            ..
        }) = &input
            && exec_id == container.as_str()
            && let Some(c) = self.core.container(container)
            && c.record.pid != Some(*pid)
            && c.current_exit().is_none()
        {
            self.oom_announced
                .remove(&(container.clone(), c.record.run));
        }
        let ready_before = self.core.connection() == ConnectionState::Ready;
        let retry_timers_before = self.retry_timers();
        self.core.handle_input(self.now, input.clone());
        let actions = self.core.drain_actions();
        // containerd's refusal of a call on a container is an answer: the
        // connection it came over is fine, and is kept.
        if let (Input::ActionResult(_, Err(failure)), Some(call)) = (&input, &answered_call)
            && failure.kind != FailureKind::Unavailable
            && call.container_id().is_some()
            && ready_before
        {
            prop_assert!(
                self.core.connection() == ConnectionState::Ready,
                "{:?} refused ({:?}) dropped the connection",
                call,
                failure.kind
            );
        }
        // A policy restart newly owed waits out dockerd's backoff.
        if !matches!(input, Input::Restore(_)) {
            self.check_restart_backoff(&owed_before)?;
        }
        self.forget_removed();
        // An exit recorded for a run whose pid was known is that process's:
        // a listing of another pid (an earlier run's, read before this run's
        // create) neither ends the run nor takes its pid.
        for c in self.core.containers() {
            let r = c.record;
            if let Some((run, Some(pid), false)) = pids_before.get(&r.id)
                && *run == r.run
                && c.current_exit().is_some()
            {
                prop_assert_eq!(
                    r.pid,
                    Some(*pid),
                    "{} run {} ended by {:?} with another pid",
                    &r.id,
                    r.run,
                    input
                );
            }
        }
        // `RestartCount` counts the policy's restarts only: none comes
        // while a user's start or restart is still being carried out.
        for c in self.core.containers() {
            if let Some(&(count, user_start)) = counts_before.get(&c.record.id) {
                prop_assert!(
                    !(user_start && c.record.restart_count > count),
                    "{:?}: {}'s restart count rose while a user's start was under way",
                    input,
                    c.record.id
                );
            }
        }
        for c in self.core.containers() {
            let was_wanted = before.get(&c.record.id).copied().unwrap_or(false);
            // A restart asks for a start of its own, even while an
            // earlier start is still wanted.
            let restart = matches!(&input, Input::Command(_, Command::Restart { id, .. })
                if *id == c.record.id && c.record.intents.start);
            let ledger = self.start_ledger.entry(c.record.id.clone()).or_default();
            ledger.0 += u64::from(c.record.intents.start && (!was_wanted || restart));
        }
        let mut waited = Vec::new();
        let mut asked_then = Vec::new();
        let mut updated_then = Vec::new();
        let asks_before = self.asks.clone();
        // HF_TRACE=1: every input and what it produced, to read a failure.
        if std::env::var_os("HF_TRACE").is_some() {
            eprintln!("IN  {:?} @{:?}\n    -> {:?}", input, self.now.at, actions);
        }
        for action in &actions {
            if let Some((op, call)) = Call::of(action) {
                let (op, call) = (&op, &call);
                {
                    self.last_op = self.last_op.max(op.0);
                    // Once our SIGKILL is on its way a 137 may be ours.
                    if let Call::Kill {
                        id,
                        signal: Signal::SIGKILL,
                        ..
                    } = call
                    {
                        self.kill_deadline.remove(id);
                        if let Some(inst) = self.world.current(id) {
                            inst.sigkilled = true;
                        }
                    }
                    // (To the container's newest task, even one gone
                    // meanwhile: the core cannot know it was.)
                    if let Call::StartTask { id } = call {
                        self.last_start_op.insert(id.clone(), op.0);
                    }
                    if let Call::StartTask { id } = call
                        && let Some(i) = self
                            .world
                            .latest
                            .iter()
                            .filter(|((c, _), _)| c == id)
                            .map(|(_, i)| *i)
                            .max()
                    {
                        self.world.instances[i].start_sent = true;
                    }
                    self.check_kept_down(&input, call)?;
                    if let Call::CreateTask { id } = call {
                        self.world.create_asked.insert(id.clone(), self.now.wall);
                    }
                    // Every signal sent was announced (a `kill` event, as
                    // dockerd's), once per delivery, retries included.
                    if let Call::Kill { id, signal, .. } = call {
                        prop_assert!(
                            self.kills_announced.contains(&(id.clone(), *signal)),
                            "{:?} sent {:?} to {} with no kill event",
                            input,
                            signal,
                            id
                        );
                        self.kill_calls.insert(*op, (id.clone(), *signal));
                    }
                    if matches!(call, Call::Relist) {
                        self.look_again_by = None;
                        self.refresh_owed_by = None;
                        self.newest_relist = op.0;
                        self.relist_snapshots.insert(*op, self.world.tasks.clone());
                    }
                    // The core sends a user's kill before any stop signal.
                    if let Call::Kill { id, signal, .. } = call
                        && self
                            .core
                            .container(id)
                            .is_some_and(|c| c.record.intents.kills.first() == Some(signal))
                    {
                        self.user_kill_ops.insert(*op, (id.clone(), *signal));
                    }
                    self.outstanding.push((*op, call.clone()));
                    self.check_escalation(*op, call)?;
                }
                continue;
            }
            match action {
                Action::Call { .. } | Action::Network { .. } => {}
                Action::RunProbe(probe) => {
                    // Only a running, current run is probed.
                    let view = self.core.container(&probe.container);
                    let health = self.core.health(&probe.container);
                    prop_assert!(
                        view.is_some_and(|v| v.status == Status::Running
                            && !v.paused
                            && v.record.run == probe.run)
                            && health.is_some_and(|h| h.run == probe.run && !h.ended),
                        "{input:?} asked for {probe:?} of a run that is not probed"
                    );
                    prop_assert!(
                        self.core.connection() == ConnectionState::Ready,
                        "{input:?} asked for {probe:?} while containerd is not ready"
                    );
                    self.probes.push(probe.clone());
                }
                // An OOM is announced once per run, and only for a run
                // that has not ended.
                Action::Publish(event) if event.kind == UserEventKind::Oom => {
                    let view = self.core.container(&event.container);
                    let run = view.map_or(0, |v| v.record.run);
                    let ended =
                        view.is_some_and(|v| v.record.exit.as_ref().is_some_and(|e| e.run == run));
                    prop_assert!(
                        !ended,
                        "{input:?} announced an OOM of {} run {run}, which had ended",
                        event.container
                    );
                    prop_assert!(
                        self.oom_announced.insert((event.container.clone(), run)),
                        "{input:?} announced the OOM of {} run {run} twice",
                        event.container
                    );
                }
                Action::Publish(event) => {
                    match event.kind {
                        UserEventKind::Kill { signal } => {
                            self.kills_announced
                                .insert((event.container.clone(), signal));
                        }
                        // A `start` event is announced once per run.
                        UserEventKind::Start => {
                            let run = self
                                .core
                                .container(&event.container)
                                .map_or(0, |v| v.record.run);
                            prop_assert!(
                                self.starts_announced.insert((event.container.clone(), run)),
                                "{input:?} announced the start of {} run {run} twice",
                                event.container
                            );
                        }
                        // A `restart` event is a user's restart taking
                        // effect, never a plain start.
                        UserEventKind::Restart => {
                            let restarting = self.restarts.iter().any(|r| {
                                self.starts.get(r) == Some(&event.container)
                                    && !self.answered.contains_key(r)
                            });
                            prop_assert!(
                                restarting,
                                "{:?} published a restart of {} with no restart asked",
                                input,
                                event.container
                            );
                        }
                        _ => {}
                    }
                }
                Action::Persist(rec) => {
                    self.records.insert(rec.id.clone(), rec.clone());
                }
                Action::Unpersist(id) => {
                    self.records.remove(id);
                }
                Action::Answer(req, answer) => {
                    // A wait ends with what it waited for (the removal, an
                    // exit: its code), never an error, but for a client that
                    // went away or a container unknown when asked.
                    if self.waits.contains_key(req)
                        && let Answer::Error(e) = answer
                    {
                        let asked_now = matches!(&input, Input::Command(r, _) if r == req);
                        prop_assert!(
                            e.kind == ErrorKind::Cancelled
                                || e.kind == ErrorKind::NotFound && asked_now,
                            "{} (a wait) answered {:?}",
                            req,
                            answer
                        );
                    }
                    if *answer == Answer::Done
                        && let Some(connect) = self.connects.get(req)
                    {
                        self.connected.insert(*req, connect.clone());
                    }
                    // A connect taken is refused later (a conflict) only
                    // for a disconnect of that network asked after it.
                    if let Some((cid, net)) = self.connects.get(req)
                        && let Answer::Error(e) = answer
                        && e.kind == ErrorKind::Conflict
                        && !matches!(&input, Input::Command(r, _) if r == req)
                        && !matches!(answered_call, Some(Call::EndpointSetup { .. }))
                    {
                        prop_assert!(
                            self.disconnects
                                .iter()
                                .any(|(r, i, n)| r > req && i == cid && n == net),
                            "{} (a connect of {} to {}) refused with no disconnect: {}",
                            req,
                            cid,
                            net,
                            e.message
                        );
                    }
                    // A remove taken is done when the container is gone.
                    if self.removes.remove(req) {
                        prop_assert!(
                            !matches!(answer, Answer::Error(e) if e.kind == ErrorKind::NotFound),
                            "{} (a remove taken) answered {:?}",
                            req,
                            answer
                        );
                    }
                    if let Some(wait) = self.waits.remove(req)
                        && matches!(answer, Answer::Waited { .. })
                    {
                        waited.push((*req, wait));
                    }
                    if let Some(ask) = self.asks.remove(req) {
                        // Past its bound, an unpause is still carried out.
                        if let (Ask::Unpause, Answer::Error(e)) = (&ask.1, answer)
                            && e.message.contains("carried out when possible")
                        {
                            self.unpause_standing.insert(ask.0.clone());
                        }
                        asked_then.push((*req, ask, answer.clone()));
                    }
                    if let Some(of) = self.updates.remove(req) {
                        updated_then.push((*req, of, answer.clone()));
                    }
                    prop_assert!(
                        self.answered.insert(*req, self.now.at).is_none(),
                        "{req} answered twice"
                    );
                    // A start or restart said done was sent to the task
                    // its run ended or runs on (an attempt whose answer was
                    // lost counts: the core cannot know it failed), never
                    // one that no start reached.
                    if *answer == Answer::Done
                        && let Some(id) = self.starts.get(req)
                        && let Some(pid) = self.core.container(id).and_then(|c| c.record.pid)
                        && let Some(inst) = self.world.instance(id, pid)
                    {
                        prop_assert!(
                            inst.start_sent,
                            "{} (a start of {}) said done, but no start was sent to pid {}",
                            req,
                            id,
                            pid
                        );
                    }
                    // A restart said done sent a start of its own: one
                    // on its way when it was asked was an earlier start's.
                    if *answer == Answer::Done
                        && self.restarts.contains(req)
                        && let Some(id) = self.starts.get(req)
                    {
                        let asked = self.start_asked_at_op.get(req).copied().unwrap_or(0);
                        let sent = self.last_start_op.get(id).copied();
                        prop_assert!(
                            sent.is_some_and(|op| op > asked),
                            "{} (a restart of {}) said done with no start sent since it was asked (op {}; newest start {:?})",
                            req,
                            id,
                            asked,
                            sent
                        );
                    }
                    self.check_start_refusal(*req, answer)?;
                    // "containerd is unreachable" is never said while connected.
                    prop_assert!(
                        !matches!(answer, Answer::Error(e) if e.kind == ErrorKind::Unavailable)
                            || self.core.connection() != ConnectionState::Ready,
                        "{req} answered {answer:?} while connected"
                    );
                }
            }
        }
        // A user's pause or unpause whose call failed is answered then: it
        // is not retried (it may have taken effect; a relist finds out).
        if let (Input::ActionResult(_, Err(_)), Some(Call::Pause { id } | Call::Resume { id })) =
            (&input, &answered_call)
        {
            let ask = if matches!(answered_call, Some(Call::Pause { .. })) {
                Ask::Pause
            } else {
                Ask::Unpause
            };
            prop_assert!(
                !self.asks.values().any(|(i, a)| i == id && *a == ask),
                "{:?} of {} failed, and the user's {:?} still waits",
                answered_call,
                id,
                ask
            );
            // Told why: containerd gone (503, it may have taken effect),
            // or refused (500), in words that name what was asked.
            if let Input::ActionResult(_, Err(failure)) = &input {
                let (verb, not) = match ask {
                    Ask::Pause => ("pause", Some("unpause")),
                    _ => ("unpause", None),
                };
                for (req, _, answer) in asked_then
                    .iter()
                    .filter(|(_, (of, a), _)| of == id && *a == ask)
                {
                    let Answer::Error(e) = answer else {
                        continue;
                    };
                    prop_assert!(
                        (e.kind == ErrorKind::Unavailable)
                            == (failure.kind == FailureKind::Unavailable)
                            && e.message.contains(verb)
                            && not.is_none_or(|n| !e.message.contains(n)),
                        "{} ({:?} of {}) failed with {:?}, told {:?}",
                        req,
                        ask,
                        id,
                        failure.kind,
                        e
                    );
                }
            }
        }
        // An update whose call failed is answered then (the user's to
        // retry): 503 if containerd went away, 400 for resources the
        // runtime rejects, 500 for any other refusal.
        if let (Input::ActionResult(_, Err(failure)), Some(Call::UpdateResources { id, .. })) =
            (&input, &answered_call)
        {
            prop_assert!(
                !self.updates.values().any(|of| of == id),
                "an update of {} failed ({:?}), and the user's update still waits",
                id,
                failure.kind
            );
            let status = match failure.kind {
                FailureKind::Unavailable => ErrorKind::Unavailable,
                FailureKind::Invalid => ErrorKind::Invalid,
                _ => ErrorKind::Internal,
            };
            for (req, answer) in updated_then
                .iter()
                .filter(|(_, of, _)| of == id)
                .map(|(r, _, a)| (r, a))
            {
                prop_assert!(
                    matches!(answer, Answer::Error(e) if e.kind == status),
                    "{} (an update of {}) failed with {:?}, told {:?}",
                    req,
                    id,
                    failure.kind,
                    answer
                );
            }
        }
        if let (Input::ActionResult(_, result), Some(call)) = (&input, &answered_call) {
            let start_wanted = call
                .container_id()
                .is_some_and(|id| before.get(id).copied().unwrap_or(false));
            self.check_retries(call, result, user_kill.is_some(), start_wanted, &asked_then)?;
        }
        self.check_retry_backoff(&retry_timers_before)?;
        // Property 1: every call that can end or start a process is backed
        // by an intent a user (or a policy, after a recorded exit) made, never
        // by the input at hand; a connection fact or a failed call can at
        // most let an already recorded intent proceed.
        for call in Call::all(&actions) {
            let view = call.container_id().and_then(|id| self.core.container(id));
            let justified = match (&call, view) {
                // The signal, too, is one asked for: a kill's, the stop's
                // own, or SIGKILL for a stop or a forced remove.
                (Call::Kill { signal, .. }, Some(c)) => {
                    let i = &c.record.intents;
                    i.kills.contains(signal)
                        || i.stop.is_some_and(|s| s.signal == *signal)
                        || *signal == Signal::SIGKILL && (i.stop.is_some() || i.remove)
                }
                (Call::CreateTask { .. } | Call::StartTask { .. }, Some(c)) => {
                    c.record.intents.start
                }
                (Call::DeleteTask { .. }, Some(c)) => {
                    c.current_exit().is_some()
                        || matches!(c.task, TaskState::Created { .. }) && !c.record.intents.start
                }
                (Call::DeleteContainer { .. }, Some(c)) => c.record.intents.remove,
                // A freeze only for a user's pause; a thaw for an unpause,
                // or so that a stop, a "stay down" kill or a remove lands.
                (Call::Pause { id }, Some(_)) => self.pauses_asked.contains(&(id.clone(), true)),
                (Call::UpdateResources { id, running, .. }, Some(c)) => {
                    self.updates_asked.contains(id)
                        && *running == matches!(c.task, TaskState::Running { .. })
                }
                (Call::Resume { id }, Some(c)) => {
                    let i = &c.record.intents;
                    let unpause_waits = asks_before
                        .values()
                        .chain(self.asks.values())
                        .any(|(of, a)| of == id && *a == Ask::Unpause);
                    unpause_waits
                        || self.unpause_standing.contains(id)
                        || i.stop.is_some()
                        || i.remove
                        || self.world.stay_down_frozen.contains(id)
                }
                (Call::NetworkSetup { own_interface, .. }, Some(c)) => {
                    c.record.intents.start
                        && c.task == TaskState::Absent
                        && *own_interface != c.record.own_disconnected
                }
                // A release: only with no task that could be using it.
                (Call::NetworkTeardown { .. }, Some(c)) => c.task == TaskState::Absent,
                // An endpoint the user wants: before a start, or while
                // the task is up (a hot connect).
                (Call::EndpointSetup { endpoint, .. }, Some(c)) => {
                    let wanted = c
                        .record
                        .endpoints
                        .iter()
                        .any(|e| e.slot == endpoint.slot && e.wanted);
                    wanted
                        && c.record.network == NetworkState::Attached
                        && (c.record.intents.start || c.task != TaskState::Absent)
                }
                // Released: disconnected, in doubt, or its task gone.
                (Call::EndpointTeardown { endpoint, .. }, Some(c)) => {
                    let e = c.record.endpoints.iter().find(|e| e.slot == endpoint.slot);
                    c.task == TaskState::Absent
                        || e.is_some_and(|e| !e.wanted || e.state == NetworkState::Attaching)
                }
                // Invisible: a discarded create being rolled back.
                (Call::DeleteContainer { .. }, None) => true,
                (Call::Subscribe | Call::Relist | Call::CreateContainer { .. }, _) => true,
                (_, None) => false,
            };
            prop_assert!(
                justified,
                "{input:?} issued {call:?} with no intent behind it"
            );
            // SIGKILL goes to every process of the container (one outside
            // its init's pid namespace, as with a shared one, would outlive
            // it); any other signal to its init process only, as `docker
            // kill -s` and `docker stop` deliver it (an exec'd process is
            // not sent the stop signal).
            if let Call::Kill { signal, all, .. } = &call {
                prop_assert_eq!(
                    *all,
                    *signal == Signal::SIGKILL,
                    "{:?} issued {:?}: the wrong processes signalled",
                    input,
                    call
                );
            }
            // A thaw goes only to a container shown paused (or being
            // removed, which shows as removing whatever its task is): one
            // of a task that is not frozen is refused, and retried, and
            // holds up what should follow (a stop's SIGKILL).
            if let (Call::Resume { .. }, Some(c)) = (&call, view) {
                prop_assert!(
                    c.paused || c.status == Status::Removing,
                    "{:?} issued {:?} to a container not paused ({:?})",
                    input,
                    call,
                    c.status
                );
            }
            // No second task: a task create goes out only when containerd
            // has none for the container (one a lost create may have made
            // is looked for first), and a container delete only when its
            // task is gone (containerd would refuse it, and the core would
            // have mistaken what it has).
            if let Call::CreateTask { id } | Call::DeleteContainer { id } = &call {
                prop_assert!(
                    !self.world.tasks.contains_key(id),
                    "{:?} issued {:?} while containerd has {:?}",
                    input,
                    call,
                    self.world.tasks.get(id)
                );
            }
            // A task is created with every network its container was
            // connected to while stopped already made: dockerd connects
            // them before it starts, so that a refusal refuses the start
            // (and the process finds its interfaces from the first).
            if let (Call::CreateTask { id }, Some(c)) = (&call, view) {
                for e in c.record.endpoints.iter().filter(|e| e.wanted) {
                    prop_assert!(
                        self.world.endpoints.contains(&(id.clone(), e.slot)),
                        "{:?} issued {:?} before {} endpoint eth{} ({}) was made",
                        input,
                        call,
                        id,
                        e.slot,
                        e.network
                    );
                }
            }
            // dockerd's baseline: a run after a connect back to its own
            // network has its own `eth0` there, its ports published, as a
            // run of the container as created (not one more endpoint).
            if let Call::CreateTask { id } = &call {
                prop_assert!(
                    !self.connected_back.contains(id) || self.world.own_eth0.contains(id),
                    "{:?} issued {:?}: {} was connected back to its own network, and its run has no eth0 of its own (no published ports)",
                    input,
                    call,
                    id
                );
            }
            if matches!(
                input,
                Input::Connection(
                    ConnectionFact::StreamBroken(..) | ConnectionFact::Unreachable(_)
                )
            ) {
                prop_assert!(false, "{input:?} issued {call:?}");
            }
        }
        // A start or restart still waiting for its answer is one the core
        // still means to make, or one sent that may yet take effect: a
        // start dropped (by a stop, a removal, a give-up) is answered then,
        // not left to a bound that would say it is still to come.
        for (req, id) in &self.starts {
            if self.answered.contains_key(req) {
                continue;
            }
            if let Some(c) = self.core.container(id) {
                prop_assert!(
                    c.record.intents.start || c.record.start_sent,
                    "{} (a start of {}) waits for a start nobody means to make, after {:?}",
                    req,
                    id,
                    input
                );
                // Nor one whose run the view shows running: that start
                // took effect, and is answered done then.
                prop_assert!(
                    !(c.record.start_sent && matches!(c.task, TaskState::Running { .. })),
                    "{} (a start of {}) waits, its run shown running, after {:?}",
                    req,
                    id,
                    input
                );
            }
        }
        // A run's task only moves forward (created, running, stopped): a
        // listing older than what the core has learned since must not take
        // it back.
        for c in self.core.containers() {
            let rank = match c.task {
                TaskState::Created { .. } => 1,
                TaskState::Running { .. } => 2,
                TaskState::Stopped => 3,
                TaskState::Absent | TaskState::Unknown => continue,
            };
            let run = (c.record.id.clone(), c.record.run, c.record.pid);
            let seen = self.task_progress.entry(run).or_insert(rank);
            prop_assert!(
                rank >= *seen,
                "{} went back to {:?} in run {} after {:?}",
                c.record.id,
                c.task,
                c.record.run,
                input
            );
            *seen = rank;
        }
        // Property 2.
        let mut new_exits = Vec::new();
        for c in self.core.containers() {
            if let Some(exit) = &c.record.exit {
                let key = (c.record.id.clone(), exit.run);
                match self.exits.get(&key) {
                    Some(first) => prop_assert_eq!(first, exit, "exit of {:?} changed", key),
                    None => {
                        self.exits.insert(key, exit.clone());
                        if c.current_exit().is_some() {
                            new_exits.push((c.record.id.clone(), c.record.pid, exit.clone()));
                        }
                    }
                }
            }
        }
        for (id, pid, exit) in &new_exits {
            self.check_exit_is_the_truth(id, *pid, exit)?;
        }
        self.check_run_end_answers(&new_exits, &asks_before, &asked_then)?;
        self.check_quiescent()?;
        // A wait is answered only when what it waits for is true.
        for (req, (id, condition, exit_then)) in waited {
            let view = self.core.container(&id);
            let exit_now = view
                .as_ref()
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            let met = match condition {
                WaitCondition::Removed => view.is_none(),
                WaitCondition::NextExit => view.is_none() || exit_now != exit_then,
                // (At a run's end also while restarting, as dockerd; at
                // any other moment, only once the container is down.)
                WaitCondition::NotRunning => view.is_none_or(|c| {
                    c.status != Status::Running
                        && (c.status != Status::Restarting || !matches!(&input, Input::Command(..)))
                }),
            };
            prop_assert!(
                met,
                "{} (a wait {:?} of {}) answered, but it is not so: {:?}",
                req,
                condition,
                id,
                view.map(|c| c.status)
            );
        }
        // A name leads to a container shown, never to one being rolled
        // back (its create failed: the name is free at once).
        for r in self.records.values() {
            if let Ok(owner) = self.core.resolve(&r.name) {
                prop_assert!(
                    self.core.container(&owner).is_some(),
                    "the name {} leads to {}, which is not shown",
                    &r.name,
                    owner
                );
            }
        }
        // Every container shown answers to its own name, and to no other's.
        for c in self.core.containers() {
            prop_assert_eq!(
                self.core.resolve(&c.record.name).ok(),
                Some(c.record.id.clone()),
                "the name {} does not lead to its container",
                &c.record.name
            );
        }
        self.check_network()?;
        self.check_taken_requests_stand()?;
        for c in self.core.containers() {
            health_consistent(&self.core, &c)?;
        }
        self.trace.extend(actions);
        self.note_doubts_owed();
        Ok(())
    }

    /// A create, or a created task's delete, whose answer was lost leaves
    /// the task in doubt (the core waits for a relist before it deletes
    /// or starts it); an answer that says what happened ends the doubt.
    fn note_doubt(&mut self, call: &Call, result: &Result<Done, Failure>) {
        let Some(id) = call.container_id() else {
            return;
        };
        self.activity.insert(id.clone(), self.last_op);
        let created = self
            .core
            .container(id)
            .is_some_and(|c| matches!(c.task, TaskState::Created { .. }));
        use FailureKind as K;
        match (call, result) {
            (Call::CreateTask { .. }, Err(f))
                if matches!(f.kind, K::Unavailable | K::Deadline | K::AlreadyExists) =>
            {
                self.doubts.insert(id.clone());
            }
            (Call::DeleteTask { .. }, Err(f))
                if matches!(f.kind, K::Unavailable | K::Deadline) && created =>
            {
                self.doubts.insert(id.clone());
            }
            (Call::CreateTask { .. } | Call::DeleteTask { .. }, Ok(_)) => {
                self.doubts.remove(id);
            }
            (Call::DeleteTask { .. }, Err(f)) if f.kind == K::NotFound => {
                self.doubts.remove(id);
            }
            _ => {}
        }
    }

    /// A relist ends: a doubt it can settle (nothing of the container in
    /// flight, nothing answered since it was asked for, and its task not
    /// a placeholder) is settled.
    fn settle_doubts(&mut self, relist: OpId, placeholder: Option<&ContainerId>) {
        let outstanding = &self.outstanding;
        let activity = &self.activity;
        self.doubts.retain(|id| {
            let busy = outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            busy || activity.get(id).is_some_and(|a| *a >= relist.0) || placeholder == Some(id)
        });
    }

    /// A doubt is looked at by a relist as soon as one can settle it:
    /// once its container's calls are answered, it is not left for the
    /// periodic relist (minutes away).
    fn note_doubts_owed(&mut self) {
        let core = &self.core;
        self.doubts.retain(|id| core.container(id).is_some());
        let ready = self.core.connection() == ConnectionState::Ready && self.world.up;
        let newest = self.newest_relist;
        let relisting = self
            .outstanding
            .iter()
            .any(|(o, c)| matches!(c, Call::Relist) && o.0 >= newest);
        let now = self.now.at;
        let mut owed = BTreeMap::new();
        for id in &self.doubts {
            let busy = self
                .outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            if ready && !relisting && !busy {
                let by = self.doubt_owed_by.get(id).copied();
                owed.insert(id.clone(), by.unwrap_or(now + Duration::from_secs(2)));
            }
        }
        self.doubt_owed_by = owed;
    }

    /// No doubt waits past its bound for the relist that settles it.
    fn check_doubts_looked_at(&self) -> Result<(), TestCaseError> {
        for (id, by) in &self.doubt_owed_by {
            prop_assert!(
                self.now.at <= *by,
                "{} was left in doubt (a create or delete whose answer was lost) with no relist asked for by {:?}",
                id,
                by
            );
        }
        Ok(())
    }

    /// A policy restart newly owed is armed after the backoff dockerd's
    /// rule gives: `restart_initial` after a run of `restart_reset_after`
    /// or more, else the last backoff doubled (to `restart_max`); a start
    /// the policy gave up on waits the next one (however long the run
    /// before it was: no run ended now).
    fn check_restart_backoff(
        &mut self,
        owed_before: &BTreeMap<ContainerId, (bool, bool)>,
    ) -> Result<(), TestCaseError> {
        let initial = self.config.restart_initial;
        for c in self.core.containers() {
            let id = &c.record.id;
            let Some(&(false, exited_before)) = owed_before.get(id) else {
                continue;
            };
            if !c.record.intents.policy_restart {
                continue;
            }
            let ended_now = !exited_before && c.current_exit().is_some();
            let timer = self.core.timers().find_map(|(at, kind)| {
                (*kind == TimerKind::RestartBackoff(id.clone())).then_some(at)
            });
            let long_run = ended_now
                && c.current_exit().is_some_and(|e| {
                    let began = c.record.started_at.unwrap_or(e.finished_at);
                    e.finished_at.saturating_since(began) >= self.config.restart_reset_after
                });
            let next = self.restart_backoff.entry(id.clone()).or_insert(initial);
            let delay = if long_run { initial } else { *next };
            *next = delay.saturating_mul(2).min(self.config.restart_max);
            prop_assert_eq!(
                timer,
                Some(self.now.at + delay),
                "{}'s policy restart is not armed after its backoff",
                id
            );
        }
        Ok(())
    }

    /// A container made again under the same id starts afresh: its runs
    /// count from the first again.
    fn forget_removed(&mut self) {
        let core = &self.core;
        self.restart_backoff
            .retain(|id, _| core.container(id).is_some());
        self.task_progress
            .retain(|(id, ..), _| core.container(id).is_some());
        self.oom_announced
            .retain(|(id, _)| core.container(id).is_some());
        self.starts_announced
            .retain(|(id, _)| core.container(id).is_some());
    }

    /// Property 2, against the truth: a newly recorded exit is the world's
    /// exit of the newest process with that pid (pids are reused: an earlier
    /// run's exit taken for the current run's is caught here).
    fn check_exit_is_the_truth(
        &mut self,
        id: &ContainerId,
        pid: Option<u32>,
        exit: &ExitRecord,
    ) -> Result<(), TestCaseError> {
        let Some(pid) = pid else {
            prop_assert!(false, "{} has an exit with no pid: {:?}", id, exit);
            return Ok(());
        };
        let live = matches!(self.world.tasks.get(id), Some(WorldTask::Running(p) | WorldTask::Created(p)) if *p == pid);
        let Some(inst) = self.world.instance(id, pid).cloned() else {
            prop_assert!(false, "{} has an exit for pid {}, never its", id, pid);
            return Ok(());
        };
        match inst.exit {
            Some(status) if exit.error.is_none() => prop_assert_eq!(
                i64::from(status),
                i64::from(exit.exit_code),
                "exit of {} pid {} is not the truth",
                id,
                pid
            ),
            Some(_) => {}
            // Only a task that vanished may have an exit the world never
            // had; not one the core deleted itself before it ran (its
            // delete's answer lost, it may be gone: a start sent to it
            // could only end in such an exit, of a run that never began).
            None => prop_assert!(
                exit.error.is_some() && !live && !inst.deleted_unstarted,
                "{} has an exit that never happened: {:?}",
                id,
                exit
            ),
        }
        // A run that ran has a start time (`docker inspect`'s StartedAt,
        // and its `start` event), however its start's answer went.
        if inst.ran && exit.error.is_none() {
            let started = self.core.container(id).and_then(|c| c.record.started_at);
            prop_assert!(
                started.is_some(),
                "{} pid {} ran and exited with no start recorded: {:?}",
                id,
                pid,
                exit
            );
        }
        // (Excused only where the core cannot know better: no cgroup count,
        // and an OOM event that may have been this process's.)
        prop_assert!(
            !exit.oom_killed || inst.oom || oom_count_unread(pid) && inst.oom_event_in_run,
            "{} recorded an OOM kill that never happened: {:?}",
            id,
            exit
        );
        // An OOM kill whose cgroup count came with the exit is recorded as
        // one, whatever the order of the events and whoever sent SIGKILL.
        if inst.oom && !oom_count_unread(pid) && exit.error.is_none() {
            prop_assert!(
                exit.oom_killed,
                "{} pid {} was OOM-killed, the count of its cgroup said so, and the exit says otherwise: {:?}",
                id,
                pid,
                exit
            );
        }
        // Without the count: an OOM kill whose event came in order.
        if inst.oom && inst.oom_in_order && !inst.sigkilled && exit.error.is_none() {
            prop_assert!(
                exit.oom_killed,
                "{} pid {} was OOM-killed, its OOM event came in order, and the exit says otherwise: {:?}",
                id,
                pid,
                exit
            );
        }
        Ok(())
    }

    /// Property 3, at every quiescent point: connected, no call open.
    /// A container whose change could not be seen (see `unseen`) waits for
    /// the relist that learns it.
    fn check_quiescent(&self) -> Result<(), TestCaseError> {
        if self.core.connection() != ConnectionState::Ready
            || !self.outstanding.is_empty()
            || self.relisting
        {
            return Ok(());
        }
        // Nothing stays unknown while connected: a task the core cannot
        // know (a lost create, a placeholder, a listing older than a call's
        // answer) has a relist coming at once, not the periodic one.
        let relist_soon = self.core.timers().any(|(at, kind)| {
            *kind == TimerKind::PeriodicRelist && at <= self.now.at + Duration::from_secs(2)
        });
        for c in self.core.containers() {
            prop_assert!(
                c.task != TaskState::Unknown || relist_soon,
                "{} unknown while connected and idle, no relist coming",
                c.record.id
            );
        }
        // A hot connect whose run is over before it was made is answered
        // done (made at the next start); one disconnected meanwhile,
        // refused. Neither waits for a run that will not come.
        for (req, (id, network)) in &self.connects {
            let Some(c) = self.core.container(id) else {
                continue;
            };
            if self.answered.contains_key(req) || self.unseen.contains_key(id) {
                continue;
            }
            let e = c.record.endpoints.iter().find(|e| &e.network == network);
            let ended = matches!(c.task, TaskState::Absent | TaskState::Stopped);
            let settled = match e {
                None => true,
                Some(e) => !e.wanted || e.state == NetworkState::Detached && ended,
            };
            prop_assert!(
                !settled,
                "{} (a connect of {} to {}) still waits: {:?}, task {:?}",
                req,
                id,
                network,
                e,
                c.task
            );
        }
        for c in self.core.containers() {
            let id = &c.record.id;
            if self.unseen.contains_key(id) {
                continue;
            }
            match self.world.tasks.get(id) {
                Some(WorldTask::Running(pid) | WorldTask::Created(pid)) => {
                    // (A container being removed shows as removing, not
                    // paused, whatever its task is.)
                    let frozen = self.world.paused.get(id) == Some(pid);
                    if c.status != Status::Removing {
                        prop_assert_eq!(c.paused, frozen, "{} paused as containerd says", id);
                    }
                    // Created or started, as containerd has it.
                    let want = match self.world.tasks.get(id) {
                        Some(WorldTask::Created(_)) => TaskState::Created { pid: *pid },
                        _ => TaskState::Running { pid: *pid },
                    };
                    prop_assert!(
                        c.current_exit().is_none() && c.task == want,
                        "{} should run pid {}: {:?}, exit {:?}",
                        id,
                        pid,
                        c.task,
                        c.current_exit()
                    );
                }
                Some(WorldTask::Stopped(..)) => {
                    prop_assert!(c.status != Status::Running, "{} should not run", id);
                }
                // No task: none is shown, not even a created one (a view in
                // doubt, a delete's answer lost, is settled by a relist at
                // once, not the periodic one).
                None => {
                    prop_assert!(
                        !matches!(
                            c.task,
                            TaskState::Created { .. } | TaskState::Running { .. }
                        ),
                        "{} has no task, shown {:?} ({:?})",
                        id,
                        c.task,
                        c.status
                    );
                }
            }
        }
        Ok(())
    }

    /// Follows what an input tells the core, for the OOM expectation.
    fn event_fed(&mut self, input: &Input) {
        match input {
            // Only an OOM event after the OOM killer struck is its event: a
            // bare one before (while the core rightly saw nothing running)
            // proves nothing about a later kill.
            Input::Event(ContainerdEvent::TaskOom {
                container,
                published_at,
            }) => {
                if let Some(inst) = self.world.current(container) {
                    if inst.oom {
                        inst.oom_in_order = true;
                    }
                    // Published before the previous process ended: an
                    // earlier run's for certain.
                    let earlier =
                        published_at.is_some_and(|at| inst.after.is_some_and(|e| at <= e));
                    inst.oom_event_in_run |= !earlier;
                }
            }
            Input::Event(ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                ..
            }) if exec_id == container.as_str() => {
                if let Some(inst) = self.world.current(container)
                    && inst.pid != *pid
                {
                    inst.oom_in_order = false;
                }
            }
            _ => {}
        }
    }

    /// Property 4b: SIGKILL for a stop comes no earlier than the grace
    /// period after its signal was delivered.
    /// Each container's retry timer, if armed: when it is due.
    fn retry_timers(&self) -> BTreeMap<ContainerId, Instant> {
        self.core
            .timers()
            .filter_map(|(at, kind)| match kind {
                TimerKind::Retry(id) => Some((id.clone(), at)),
                _ => None,
            })
            .collect()
    }

    /// A failed call is retried after a backoff: never at once (a call
    /// refused again and again would hammer containerd), never later than
    /// `retry_max`.
    fn check_retry_backoff(
        &self,
        before: &BTreeMap<ContainerId, Instant>,
    ) -> Result<(), TestCaseError> {
        for (id, at) in self.retry_timers() {
            if before.get(&id) == Some(&at) {
                continue;
            }
            let delay = at.saturating_since(self.now.at);
            prop_assert!(
                delay >= self.config.retry_initial && delay <= self.config.retry_max,
                "a retry of {}'s call armed {:?} ahead (backoff {:?} to {:?})",
                id,
                delay,
                self.config.retry_initial,
                self.config.retry_max
            );
        }
        Ok(())
    }

    /// How many times a call was tried before it is given up. Refusals of
    /// one call in a row (a success of any call on the container, or a
    /// refusal of another, starts the count over; containerd going away
    /// counts for nothing) are counted as `streaks`, with whether one of
    /// them may have taken effect (its answer lost):
    /// - a user's kill is given up, with an error, at its
    ///   `retry_attempts_max`-th refusal in a row, not sooner, not later;
    /// - a start's task create or start refused after an attempt that may
    ///   have taken effect is looked for (a relist) and tried again, until
    ///   that call was refused `retry_attempts_max` times in a row before;
    ///   then the start is given up.
    fn check_retries(
        &mut self,
        call: &Call,
        result: &Result<Done, Failure>,
        user_kill: bool,
        start_wanted: bool,
        asked_then: &[(RequestId, (ContainerId, Ask), Answer)],
    ) -> Result<(), TestCaseError> {
        let Some(id) = call.container_id().cloned() else {
            return Ok(());
        };
        let kind = match result {
            Ok(_) => {
                self.streaks.remove(&id);
                return Ok(());
            }
            Err(failure) => failure.kind,
        };
        let key = match call {
            Call::Kill { signal, .. } => format!("kill {signal:?} user {user_kill}"),
            Call::EndpointSetup { endpoint, .. } | Call::EndpointTeardown { endpoint, .. } => {
                format!("{:?} {}", std::mem::discriminant(call), endpoint.slot)
            }
            _ => format!("{:?}", std::mem::discriminant(call)),
        };
        let (before, uncertain) = match self.streaks.get(&id) {
            Some((k, n, u)) if *k == key => (*n, *u),
            _ => (0, false),
        };
        let lost = matches!(
            kind,
            FailureKind::Unavailable | FailureKind::Deadline | FailureKind::AlreadyExists
        );
        let max = self.config.retry_attempts_max;
        if kind == FailureKind::Unavailable {
            if let Some(streak) = self.streaks.get_mut(&id).filter(|s| s.0 == key) {
                streak.2 = true;
            }
            return Ok(());
        }
        self.streaks
            .insert(id.clone(), (key, before + 1, uncertain || lost));
        if let (Call::Kill { signal, .. }, true, false) = (call, user_kill, lost) {
            let given_up = asked_then.iter().any(|(_, (of, ask), answer)| {
                *of == id && *ask == Ask::Kill(*signal) && matches!(answer, Answer::Error(_))
            });
            prop_assert_eq!(
                given_up,
                before + 1 >= max,
                "{}'s kill ({:?}) refused ({:?}) after {} refusals in a row: given up {}",
                id,
                signal,
                kind,
                before,
                given_up
            );
            if given_up {
                self.streaks.remove(&id);
            }
        }
        let start_call = matches!(call, Call::CreateTask { .. } | Call::StartTask { .. });
        let not_created =
            matches!(call, Call::StartTask { .. }) && kind == FailureKind::FailedPrecondition;
        // (A start a stop cancelled meanwhile is not given up.)
        if start_call && start_wanted && uncertain && !lost && !not_created {
            let looks = self
                .core
                .container(&id)
                .is_some_and(|c| c.record.intents.start);
            prop_assert_eq!(
                looks,
                before < max,
                "{}'s {:?} refused ({:?}) after {} attempts in a row, one of which may have taken effect: looked again {}",
                id,
                call,
                kind,
                before,
                looks
            );
            if !looks {
                self.streaks.remove(&id);
            }
        }
        Ok(())
    }

    /// dockerd's rule: SIGKILL, the configured stop signal, or any signal
    /// when none is configured, means the user wants the container down.
    fn stays_down(&self, id: &ContainerId, signal: Signal) -> bool {
        let config = self.configs.get(id);
        let stop_signal = config.and_then(|c| c.stop_signal.or(c.image_stop_signal));
        signal == Signal::SIGKILL || stop_signal.is_none_or(|s| s == signal)
    }

    fn check_escalation(&mut self, op: OpId, call: &Call) -> Result<(), TestCaseError> {
        let Call::Kill { id, signal, .. } = call else {
            return Ok(());
        };
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let intents = &c.record.intents;
        let Some(stop) = intents.stop else {
            self.signal_delivered.remove(id);
            return Ok(());
        };
        if *signal == stop.signal && stop.signal != Signal::SIGKILL {
            self.stop_signal_ops.insert(op, id.clone());
        } else if *signal == Signal::SIGKILL
            && stop.signal != Signal::SIGKILL
            && intents.kills.is_empty()
            && !intents.remove
        {
            // A later stop may have shortened the grace: the one in force counts.
            let grace_end = self.signal_delivered.get(id).map(|at| *at + stop.grace);
            prop_assert!(
                grace_end.is_some_and(|end| end <= self.now.at),
                "SIGKILL of {} at {:?} before its grace period ended ({:?})",
                id,
                self.now.at,
                grace_end
            );
        }
        Ok(())
    }

    /// When a run ends, what waited on it is answered at once, with the
    /// answer the end calls for: a kill whose delivery was under way is
    /// done (as dockerd answers it), any other kill, pause or unpause finds
    /// the container not running, and a wait for the exit has it. None is
    /// left to be answered by its bound.
    fn check_run_end_answers(
        &self,
        new_exits: &[(ContainerId, Option<u32>, ExitRecord)],
        asks_before: &BTreeMap<RequestId, (ContainerId, Ask)>,
        asked_then: &[(RequestId, (ContainerId, Ask), Answer)],
    ) -> Result<(), TestCaseError> {
        for (id, _, exit) in new_exits {
            for (req, (of, _)) in asks_before {
                prop_assert!(
                    of != id || !self.asks.contains_key(req),
                    "{} (of {}) still waits after the run {} ended",
                    req,
                    id,
                    exit.run
                );
            }
            for (req, (of, condition, _)) in &self.waits {
                prop_assert!(
                    of != id || *condition == WaitCondition::Removed,
                    "{} (a wait {:?} of {}) still waits after the run {} ended",
                    req,
                    condition,
                    id,
                    exit.run
                );
            }
            for (req, (of, ask), answer) in asked_then {
                if of != id {
                    continue;
                }
                let delivering = match ask {
                    Ask::Kill(signal) => self
                        .user_kill_ops
                        .values()
                        .any(|k| *k == (id.clone(), *signal)),
                    Ask::Pause | Ask::Unpause => false,
                };
                let not_running =
                    matches!(answer, Answer::Error(e) if e.kind == ErrorKind::Conflict);
                prop_assert!(
                    if delivering {
                        *answer == Answer::Done
                    } else {
                        not_running
                    },
                    "{} ({:?} of {}) answered {:?} when the run {} ended (its signal under way: {})",
                    req,
                    ask,
                    id,
                    answer,
                    exit.run,
                    delivering
                );
            }
        }
        Ok(())
    }

    fn req(&mut self) -> RequestId {
        self.next_req += 1;
        RequestId(self.next_req)
    }

    fn command(&mut self, command: Command) -> Result<RequestId, TestCaseError> {
        let req = self.req();
        if !matches!(command, Command::Wait { .. }) {
            self.must_answer.push(req);
        }
        let name_free = match &command {
            Command::Create { name, .. } => !self.core.containers().any(|c| &c.record.name == name),
            _ => false,
        };
        if let Command::Start { id } | Command::Restart { id, .. } = &command {
            self.starts.insert(req, id.clone());
            self.start_asked_at_op.insert(req, self.last_op);
        }
        // A user's start (or a container made anew) may start it again.
        if let Command::Start { id } | Command::Restart { id, .. } | Command::Create { id, .. } =
            &command
        {
            self.kept_down.remove(id);
            self.start_not_again.remove(id);
        }
        if let Command::Restart { .. } = &command {
            self.restarts.insert(req);
        }
        let ask = match &command {
            Command::Kill { id, signal } => Some((id.clone(), Ask::Kill(*signal))),
            Command::Pause { id } => {
                self.unpause_standing.remove(id);
                Some((id.clone(), Ask::Pause))
            }
            Command::Unpause { id } => Some((id.clone(), Ask::Unpause)),
            _ => None,
        };
        if let Some(ask) = ask {
            self.asks.insert(req, ask);
        }
        if let Command::Start { .. } = &command {
            self.starts_asked.insert(req, self.now.at);
        }
        let creating = !matches!(command, Command::Create { .. })
            && self
                .core
                .container(command.container_id())
                .is_some_and(|c| c.record.presence == Presence::Creating);
        let is_wait = matches!(command, Command::Wait { .. });
        if let Command::Wait { id, condition } = &command {
            let exit = self
                .core
                .container(id)
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            self.waits.insert(req, (id.clone(), *condition, exit));
        }
        self.feed(Input::Command(req, command))?;
        // A name no container shows is free: a removed container's too.
        let answer = self.trace.iter().rev().find_map(|a| match a {
            Action::Answer(r, answer) if *r == req => Some(answer),
            _ => None,
        });
        // While its create is on its way a container takes only waits.
        let conflict = matches!(answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict);
        prop_assert!(
            !creating || conflict != is_wait,
            "{} to a container being created: {:?}",
            req,
            answer
        );
        if name_free && let Some(Answer::Error(e)) = answer {
            prop_assert!(
                !(e.kind == ErrorKind::Conflict && e.message.contains("name")),
                "{} refused a free name: {}",
                req,
                e.message
            );
        }
        Ok(req)
    }

    fn advance(&mut self, d: Duration) -> Result<(), TestCaseError> {
        let target = self.now.at + d;
        while let Some((at, _)) = self.core.poll_timeout() {
            if at > target {
                break;
            }
            self.set_time(at);
            self.feed(Input::Timeout)?;
        }
        // SIGKILL comes when the grace period ends: no later than the
        // shortest grace a stop asked for (counted as the core counts it).
        let ready = self.core.connection() == ConnectionState::Ready;
        for (id, deadline) in &self.kill_deadline {
            let view = self.core.container(id);
            let stopping = view.is_some_and(|c| {
                c.record.intents.stop.is_some()
                    && c.record.intents.kills.is_empty()
                    && c.current_exit().is_none()
            });
            let busy = self
                .outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            prop_assert!(
                *deadline > target || !ready || !stopping || busy,
                "{} not killed at the end of its grace period ({:?}), now {:?}",
                id,
                deadline,
                target
            );
        }
        self.set_time(target);
        self.check_doubts_looked_at()?;
        if let Some(by) = self.look_again_by
            && self.now.at > by
            && self.core.connection() == ConnectionState::Ready
        {
            prop_assert!(
                false,
                "a relist with a placeholder was not followed by another by {by:?}"
            );
        }
        let relist_in_flight = self
            .outstanding
            .iter()
            .any(|(_, c)| matches!(c, Call::Relist));
        if let Some(by) = self.refresh_owed_by
            && self.now.at > by
            && !relist_in_flight
            && self.core.connection() == ConnectionState::Ready
        {
            prop_assert!(
                false,
                "a relist owed (a call refused or unanswered, a task deleted unseen) did not come by {by:?}"
            );
        }
        // Property 4, checked as time passes.
        for (req, bound) in &self.stop_bounds {
            if *bound < self.now.at {
                let at = self.answered.get(req);
                prop_assert!(
                    at.is_some_and(|at| at <= bound),
                    "stop {req} not answered by {bound:?}"
                );
            }
        }
        let ready = self.core.connection() == ConnectionState::Ready;
        for (req, asked) in &self.starts_asked {
            let waited = self.now.at.saturating_since(*asked);
            if self.answered.contains_key(req) || waited <= self.config.request_answer_bound {
                continue;
            }
            let wanted = self.starts.get(req).is_some_and(|id| {
                self.core
                    .container(id)
                    .is_some_and(|c| c.record.intents.start)
            });
            prop_assert!(
                ready && wanted && waited <= self.config.start_answer_bound,
                "start {} unanswered after {:?} (connected: {}, still wanted: {})",
                req,
                waited,
                ready,
                wanted
            );
        }
        Ok(())
    }

    fn set_time(&mut self, at: Instant) {
        let delta = at.saturating_since(self.now.at);
        let wall = self.now.wall.as_unix_nanos() + i64::try_from(delta.as_nanos()).unwrap_or(0);
        self.now = Now::new(at.max(self.now.at), WallTime::from_unix_nanos(wall));
    }

    fn event(&mut self, event: ContainerdEvent) -> Result<(), TestCaseError> {
        self.past_events.push(event.clone());
        if self.world.up && !self.subscriptions.is_empty() {
            self.feed(Input::Event(event))?;
        } else {
            self.lost(&event);
        }
        Ok(())
    }

    /// `event` never reached the core: until a relist asked for after now
    /// ends, the core cannot know what it said.
    fn lost(&mut self, event: &ContainerdEvent) {
        let id = match event {
            ContainerdEvent::TaskCreate { container, .. }
            | ContainerdEvent::TaskStart { container, .. }
            | ContainerdEvent::TaskExit { container, .. }
            | ContainerdEvent::TaskOom { container, .. }
            | ContainerdEvent::TaskDelete { container, .. }
            | ContainerdEvent::TaskPaused { container }
            | ContainerdEvent::TaskResumed { container } => container,
        };
        self.unseen.insert(id.clone(), self.last_op);
    }

    /// Carries out (or fails) one outstanding call, as containerd would.
    fn resolve(&mut self, n: usize, failure: u8) -> Result<(), TestCaseError> {
        if self.outstanding.is_empty() {
            return Ok(());
        }
        let (op, call) = self.outstanding.remove(n % self.outstanding.len());
        self.answering_call = Some(call.clone());
        if let Some(id) = self.stop_signal_ops.remove(&op)
            && self.world.up
            && matches!(failure, 0 | 7 | 8)
        {
            let grace = self
                .core
                .container(&id)
                .and_then(|c| c.record.intents.stop)
                .filter(|s| s.signal != Signal::SIGKILL)
                .map(|s| s.grace);
            if let Some(grace) = grace {
                self.kill_deadline.insert(id.clone(), self.now.at + grace);
            }
            self.signal_delivered.insert(id, self.now.at);
        }
        if let Call::NetworkSetup { id, .. }
        | Call::NetworkTeardown { id, .. }
        | Call::EndpointSetup { id, .. }
        | Call::EndpointTeardown { id, .. } = &call
        {
            return self.resolve_network(op, &call, id.clone(), failure);
        }
        let connection_call = matches!(call, Call::Subscribe | Call::Relist);
        self.answer_lost = failure == 9 && !connection_call;
        let kind = match failure {
            _ if !self.world.up => Some(FailureKind::Unavailable),
            0 | 7 | 8 => None,
            9 if !connection_call => None,
            1 => Some(FailureKind::Unavailable),
            2 => Some(FailureKind::Deadline),
            3 => Some(FailureKind::NotFound),
            4 => Some(FailureKind::FailedPrecondition),
            5 => Some(FailureKind::AlreadyExists),
            // The runtime rejects the spec (a missing binary, a bad
            // working directory), or the resources (a memory limit below
            // what the container uses).
            6 if matches!(call, Call::CreateTask { .. } | Call::UpdateResources { .. }) => {
                Some(FailureKind::Invalid)
            }
            _ => Some(FailureKind::Other),
        };
        self.answering = call.container_id().cloned();
        if let Some(kind) = kind {
            if kind == FailureKind::Unavailable {
                self.subscriptions.remove(&op);
            }
            // A start containerd refuses outright, with no attempt before it
            // that may have taken effect, is answered at once: it is not
            // retried as if it might have worked.
            if let Call::CreateTask { id } | Call::StartTask { id } = &call
                && matches!(
                    kind,
                    FailureKind::Other | FailureKind::NotFound | FailureKind::Invalid
                )
                && self.failures.get(id).is_none_or(|n| *n == 0)
            {
                let id = id.clone();
                let from = self.trace.len();
                self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))?;
                for (req, c) in &self.starts {
                    prop_assert!(
                        *c != id || self.answered.contains_key(req),
                        "{} (a start of {}) waits although containerd refused it outright",
                        req,
                        id
                    );
                }
                // With dockerd's status: a spec the runtime rejects is the
                // user's to fix (400), anything else a server error (500).
                let status = if kind == FailureKind::Invalid {
                    ErrorKind::Invalid
                } else {
                    ErrorKind::Internal
                };
                for action in &self.trace[from..] {
                    if let Action::Answer(req, Answer::Error(e)) = action
                        && self.starts.get(req) == Some(&id)
                    {
                        prop_assert!(
                            e.kind == status,
                            "{} (a start of {}) refused ({:?}) told {:?}, not {:?}",
                            req,
                            id,
                            kind,
                            e.kind,
                            status
                        );
                    }
                }
                return Ok(());
            }
            // containerd says "not found" of what a delete wanted gone only
            // when it is gone (deleted by an attempt whose answer was lost).
            if kind == FailureKind::NotFound {
                match &call {
                    Call::DeleteContainer { id } if !self.world.tasks.contains_key(id) => {
                        self.world.containers.remove(id);
                    }
                    Call::DeleteTask { id }
                        if !matches!(self.world.tasks.get(id), Some(WorldTask::Running(_))) =>
                    {
                        self.world.delete_by_call(id);
                    }
                    _ => {}
                }
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        let freeze = matches!(call, Call::Pause { .. });
        let done = match call {
            Call::Subscribe => {
                self.subscriptions.insert(op);
                return self.feed(Input::Connection(ConnectionFact::StreamLive(op)));
            }
            Call::Relist => {
                // The relist's call is open until its end.
                self.relisting = true;
                self.feed(Input::Relist(op, RelistPart::Begin))?;
                // containerd reads its tasks at some moment after the call:
                // now, or (7) as early as when it was asked for, so that
                // what happened since (an exit the core has seen, a call
                // it made) is not in it.
                let snapshot = self.relist_snapshots.remove(&op);
                let read = match snapshot {
                    Some(tasks) if failure == 7 => tasks,
                    _ => self.world.tasks.clone(),
                };
                let tasks: Vec<TaskInfo> = read
                    .iter()
                    .map(|(id, t)| {
                        let (pid, status, exit_status, exited_at) = match *t {
                            WorldTask::Created(pid) => (pid, TaskStatus::Created, 0, None),
                            WorldTask::Running(pid) if self.world.paused.get(id) == Some(&pid) => {
                                (pid, TaskStatus::Paused, 0, None)
                            }
                            WorldTask::Running(pid) => (pid, TaskStatus::Running, 0, None),
                            WorldTask::Stopped(pid, s, at) => {
                                (pid, TaskStatus::Stopped, s, Some(at))
                            }
                        };
                        TaskInfo {
                            container: id.clone(),
                            pid,
                            status,
                            exit_status,
                            exited_at,
                            oom_kills: (status == TaskStatus::Stopped)
                                .then(|| self.world.oom_kills(id, pid))
                                .flatten(),
                        }
                    })
                    .collect();
                // A shim that does not answer: its task is listed as a
                // placeholder (status unknown, pid 0), which proves nothing.
                let placeholder = (failure == 8 && !tasks.is_empty())
                    .then(|| tasks[n % tasks.len()].container.clone());
                for mut task in tasks {
                    if placeholder.as_ref() == Some(&task.container) {
                        // Status unknown; the pid is 0 or still the real one.
                        if n.is_multiple_of(2) {
                            task.pid = 0;
                        }
                        task.status = TaskStatus::Unknown;
                        task.exit_status = 0;
                        task.exited_at = None;
                    }
                    self.feed(Input::Relist(op, RelistPart::Task(task)))?;
                }
                // What was unseen before this relist was asked for is seen
                // now (checked after the end, with the relist applied).
                self.unseen
                    .retain(|id, mark| *mark >= op.0 || placeholder.as_ref() == Some(id));
                if let Some(id) = &placeholder {
                    self.unseen.insert(id.clone(), op.0);
                }
                self.relisting = false;
                self.settle_doubts(op, placeholder.as_ref());
                self.feed(Input::Relist(op, RelistPart::End))?;
                // What a relist could not see is looked at again soon, not
                // only at the next periodic relist.
                let asked_again = self
                    .outstanding
                    .iter()
                    .any(|(o, c)| matches!(c, Call::Relist) && *o > op);
                // (Only of the core's newest relist: an older one's end is
                // of a connection given up, and proves nothing to it.)
                if placeholder.is_some()
                    && !asked_again
                    && op.0 >= self.newest_relist
                    && self.core.connection() == ConnectionState::Ready
                {
                    self.look_again_by = Some(self.now.at + Duration::from_secs(2));
                }
                return Ok(());
            }
            Call::CreateContainer { id, .. } => {
                if self.world.containers.insert(id, ()).is_some() {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::AlreadyExists, "exists")),
                    ));
                }
                Done::Ok
            }
            Call::CreateTask { id } => {
                if self.world.tasks.contains_key(&id) {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::AlreadyExists, "exists")),
                    ));
                }
                // The kernel may hand the new task a pid this container's
                // earlier, deleted task had.
                let reused = self
                    .world
                    .deleted_pids
                    .get(&id)
                    .and_then(|p| p.last().copied())
                    .filter(|pid| matches!(failure, 8 | 9) && !self.world.tasks.values().any(|t| matches!(t, WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..) if p == pid)));
                let pid = reused.unwrap_or_else(|| {
                    self.world.next_pid += 1;
                    self.world.next_pid
                });
                self.world
                    .latest
                    .insert((id.clone(), pid), self.world.instances.len());
                let after = self.world.last_exit.get(&id).copied();
                let asked_at = self
                    .world
                    .create_asked
                    .get(&id)
                    .copied()
                    .unwrap_or(self.now.wall);
                self.world.tasks.insert(id, WorldTask::Created(pid));
                self.world.instances.push(Instance {
                    pid,
                    exit: None,
                    oom: false,
                    oom_in_order: false,
                    sigkilled: false,
                    after,
                    oom_event_in_run: false,
                    start_sent: false,
                    asked_at,
                    deleted_unstarted: false,
                    ran: false,
                });
                Done::TaskCreated { pid }
            }
            Call::StartTask { id } => match self.world.tasks.get_mut(&id) {
                Some(t @ WorldTask::Created(_)) => {
                    let WorldTask::Created(pid) = *t else {
                        unreachable!()
                    };
                    *t = WorldTask::Running(pid);
                    if let Some(inst) = self.world.instance(&id, pid) {
                        inst.ran = true;
                    }
                    let ledger = self.start_ledger.entry(id.clone()).or_default();
                    ledger.1 += 1;
                    prop_assert!(
                        ledger.1 <= ledger.0,
                        "{} started (pid {}) with no start asked for it ({} asked, {} started)",
                        id,
                        pid,
                        ledger.0,
                        ledger.1
                    );
                    self.start_reached(&id, op);
                    // The shim publishes the start: before the answer (7),
                    // or after it (also when the answer is lost).
                    let event = ContainerdEvent::TaskStart {
                        container: id.clone(),
                        pid,
                        published_at: Some(self.now.wall),
                    };
                    if failure == 7 {
                        self.event(event)?;
                        return self.reply(op, Done::Ok);
                    }
                    // With its answer lost, the event is lost too for every
                    // other pid (a stream that broke, or an event dropped on
                    // a live one): only a relist tells the start apart.
                    let event_lost = self.answer_lost && pid % 2 == 0;
                    self.reply(op, Done::Ok)?;
                    if event_lost {
                        self.lost(&event);
                        self.past_events.push(event);
                        return Ok(());
                    }
                    return self.event(event);
                }
                _ => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "not created")),
                    ));
                }
            },
            Call::Kill { id, signal, .. } => {
                // A user's "stay down" kill that reaches a frozen task: the
                // core may thaw it now, whether or not the task dies frozen
                // (it cannot know).
                if let Some(WorldTask::Running(pid) | WorldTask::Created(pid)) =
                    self.world.tasks.get(&id)
                    && self.user_kill_ops.contains_key(&op)
                    && self.stays_down(&id, signal)
                {
                    self.world.stay_down_sent.insert((id.clone(), *pid));
                    // (Frozen, or shown so: a thaw by someone else that the
                    // core has not yet seen makes its thaw a harmless one.)
                    let shown_paused = self.core.container(&id).is_some_and(|c| c.paused);
                    if self.world.paused.get(&id) == Some(pid) || shown_paused {
                        self.world.stay_down_frozen.insert(id.clone());
                    }
                }
                match self.world.tasks.get(&id).cloned() {
                    // A frozen process dies of SIGKILL only, and under a v1
                    // freezer only once thawed; other signals wait for a thaw
                    // (and this world's processes forget them).
                    Some(WorldTask::Running(pid))
                        if self.world.paused.get(&id) == Some(&pid)
                            && (signal != Signal::SIGKILL || self.world.frozen_holds_kill) =>
                    {
                        if signal == Signal::SIGKILL {
                            if let Some(inst) = self.world.instance(&id, pid) {
                                inst.sigkilled = true;
                            }
                            self.world.kill_on_thaw.insert(id, pid);
                        }
                        Done::Ok
                    }
                    Some(WorldTask::Running(pid)) | Some(WorldTask::Created(pid)) => {
                        // Every other run is PID 1 without a handler: it ignores
                        // SIGTERM, SIGINT and SIGQUIT (what stop signals are).
                        let ignores_term = pid % 2 == 1;
                        let stops = matches!(signal.number(), 2 | 3 | 15) && !ignores_term;
                        if signal == Signal::SIGKILL || stops {
                            if signal == Signal::SIGKILL
                                && let Some(inst) = self.world.instance(&id, pid)
                            {
                                inst.sigkilled = true;
                            }
                            let status = 128 + signal.number();
                            if failure == 7 {
                                self.world_exit(&id, pid, status, false)?;
                                return self.reply(op, Done::Ok);
                            }
                            self.reply(op, Done::Ok)?;
                            return self.world_exit(&id, pid, status, false);
                        }
                        Done::Ok
                    }
                    _ => {
                        return self.feed(Input::ActionResult(
                            op,
                            Err(Failure::new(FailureKind::NotFound, "no task")),
                        ));
                    }
                }
            }
            Call::DeleteTask { id } => match self.world.tasks.get(&id) {
                Some(WorldTask::Stopped(..)) | Some(WorldTask::Created(_)) => {
                    self.world.delete_by_call(&id);
                    Done::Ok
                }
                Some(WorldTask::Running(pid)) => {
                    // The core deletes a task only once it knows its run
                    // ended or it never started: one a start may have
                    // started waits for the evidence (a relist, the start's
                    // event), never guessed away.
                    prop_assert!(false, "{} deleted while running (pid {})", id, pid);
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "running")),
                    ));
                }
                None => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "no task")),
                    ));
                }
            },
            Call::UpdateResources { id, running, .. } => {
                let task_runs = matches!(
                    self.world.tasks.get(&id),
                    Some(WorldTask::Running(_) | WorldTask::Created(_))
                );
                if !self.world.containers.contains_key(&id) || running && !task_runs {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "not found")),
                    ));
                }
                Done::Ok
            }
            Call::Pause { id } | Call::Resume { id } => match self.world.tasks.get(&id) {
                Some(WorldTask::Running(pid)) => {
                    let pid = *pid;
                    let frozen = self.world.paused.get(&id) == Some(&pid);
                    if frozen == freeze {
                        return self.feed(Input::ActionResult(
                            op,
                            Err(Failure::new(FailureKind::FailedPrecondition, "already so")),
                        ));
                    }
                    if freeze {
                        self.world.stay_down_frozen.remove(&id);
                        self.world.paused.insert(id, pid);
                    } else {
                        self.world.paused.remove(&id);
                        if self.world.kill_on_thaw.remove(&id) == Some(pid) {
                            self.reply(op, Done::Ok)?;
                            return self.world_exit(&id, pid, 137, false);
                        }
                    }
                    Done::Ok
                }
                Some(_) => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "not running")),
                    ));
                }
                None => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "no task")),
                    ));
                }
            },
            Call::NetworkSetup { .. }
            | Call::NetworkTeardown { .. }
            | Call::EndpointSetup { .. }
            | Call::EndpointTeardown { .. } => Done::Ok,
            Call::DeleteContainer { id } => {
                if self.world.tasks.contains_key(&id) {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "has task")),
                    ));
                }
                if self.world.containers.remove(&id).is_none() {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "none")),
                    ));
                }
                Done::Ok
            }
        };
        self.reply(op, done)
    }

    /// A network call, carried out by the daemon's CNI side (up whatever
    /// containerd does): refused (a host port in use, a plugin failing), or
    /// done with its answer lost, or done.
    fn resolve_network(
        &mut self,
        op: OpId,
        call: &Call,
        id: ContainerId,
        failure: u8,
    ) -> Result<(), TestCaseError> {
        // A host port in use or an address taken, a configuration the
        // plugin rejects (a bad address), a plugin failing.
        let kind = match failure {
            3 | 5 => Some(FailureKind::AlreadyExists),
            4 => Some(FailureKind::Invalid),
            6 => Some(FailureKind::Other),
            _ => None,
        };
        if let Call::EndpointSetup { endpoint, .. } | Call::EndpointTeardown { endpoint, .. } = call
        {
            let key = (id.clone(), endpoint.slot);
            let setup = matches!(call, Call::EndpointSetup { .. });
            // An address taken, a network gone, a bad address, a plugin
            // failing.
            let kind = match failure {
                3 => Some(FailureKind::AlreadyExists),
                5 => Some(FailureKind::NotFound),
                4 => Some(FailureKind::Invalid),
                6 => Some(FailureKind::Other),
                _ => None,
            };
            if let Some(kind) = kind {
                // A refused setup may still have made part of it.
                if failure >= 5 && setup {
                    self.world.endpoints.insert(key);
                }
                if setup {
                    let network = Some(endpoint.network.clone());
                    return self.feed_refusal(op, &id, network, kind);
                }
                return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
            }
            if setup {
                prop_assert!(
                    self.world.attached.contains(&id),
                    "{} endpoint eth{} set up with no namespace of its own attachment",
                    id,
                    endpoint.slot
                );
                prop_assert!(
                    self.world.endpoints.insert(key),
                    "{} endpoint eth{} made twice: a leaked address",
                    id,
                    endpoint.slot
                );
            } else {
                self.world.endpoints.remove(&key);
                // Slot 0 takes the `eth0` its own attachment made with it.
                if endpoint.slot == 0 {
                    self.world.own_eth0.remove(&id);
                }
            }
            self.answer_lost = matches!(failure, 2 | 9);
            return self.reply(op, Done::Ok);
        }
        // The `eth0` a setup makes with the namespace, unless the container
        // was disconnected from its own network: an endpoint of slot 0 in
        // the world, so that one made on top of it shows as doubled.
        let eth0 = matches!(
            call,
            Call::NetworkSetup {
                own_interface: true,
                ..
            }
        );
        if let Some(kind) = kind {
            // A refused setup may still have made part of the attachment.
            let setup = matches!(call, Call::NetworkSetup { .. });
            if failure >= 5 && setup {
                self.world.attached.insert(id.clone());
                if eth0 {
                    self.world.endpoints.insert((id.clone(), 0));
                    self.world.own_eth0.insert(id.clone());
                }
            }
            if setup {
                return self.feed_refusal(op, &id, None, kind);
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        if matches!(call, Call::NetworkSetup { .. }) {
            prop_assert!(
                self.world.attached.insert(id.clone()),
                "{} attached twice: a leaked address",
                id
            );
            if eth0 {
                prop_assert!(
                    self.world.endpoints.insert((id.clone(), 0)),
                    "{} eth0 made twice: a leaked address",
                    id
                );
                self.world.own_eth0.insert(id.clone());
            }
        } else {
            self.world.attached.remove(&id);
            self.world.endpoints.remove(&(id.clone(), 0));
            self.world.own_eth0.remove(&id);
        }
        self.answer_lost = matches!(failure, 2 | 9);
        self.reply(op, Done::Ok)
    }

    /// A network setup refused: the start it was for (or, for an
    /// endpoint's, the connect of `network` waiting for it) is told why
    /// with the status dockerd gives: a host port in use or an address
    /// taken is a conflict (409), a network gone not found (404), a bad
    /// address invalid (400), a plugin's failure an internal error (500).
    fn feed_refusal(
        &mut self,
        op: OpId,
        id: &ContainerId,
        network: Option<String>,
        kind: FailureKind,
    ) -> Result<(), TestCaseError> {
        // A connect waiting for this setup while the task is up (a hot
        // connect) is answered with the refusal at once.
        let hot = self
            .core
            .container(id)
            .is_some_and(|c| c.task != TaskState::Absent);
        let waiting: Vec<RequestId> = self
            .connects
            .iter()
            .filter(|(r, (i, n))| {
                hot && i == id && Some(n) == network.as_ref() && !self.answered.contains_key(r)
            })
            .map(|(r, _)| *r)
            .collect();
        // Before a start (no task), the start waiting for it is given up
        // and told why at once.
        let starting: Vec<RequestId> = self
            .starts
            .iter()
            .filter(|(r, i)| !hot && *i == id && !self.answered.contains_key(r))
            .map(|(r, _)| *r)
            .collect();
        let from = self.trace.len();
        self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))?;
        for req in starting {
            prop_assert!(
                self.answered.contains_key(&req),
                "{} (a start of {}) still waits, its network refused ({:?})",
                req,
                id,
                kind
            );
        }
        for req in waiting {
            prop_assert!(
                self.answered.contains_key(&req),
                "{} (a connect of {}) refused by the network ({:?}) still waits",
                req,
                id,
                kind
            );
        }
        let status = match kind {
            FailureKind::AlreadyExists => ErrorKind::Conflict,
            FailureKind::NotFound => ErrorKind::NotFound,
            FailureKind::Invalid => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        };
        for action in &self.trace[from..] {
            let Action::Answer(req, Answer::Error(e)) = action else {
                continue;
            };
            let told = self.starts.get(req) == Some(id)
                || network
                    .as_ref()
                    .is_some_and(|n| self.connects.get(req) == Some(&(id.clone(), n.clone())));
            prop_assert!(
                !told || e.kind == status,
                "{} refused by the network ({:?}): {} told {:?}, not {:?}",
                id,
                kind,
                req,
                e.kind,
                status
            );
        }
        Ok(())
    }

    /// Property 7, after every input: the attachments and their owners.
    fn check_network(&self) -> Result<(), TestCaseError> {
        for id in &self.world.attached {
            prop_assert!(
                self.records
                    .get(id)
                    .is_some_and(|r| r.network != NetworkState::Detached),
                "{} attached with no record owning it: {:?}",
                id,
                self.records.get(id).map(|r| r.network)
            );
        }
        for id in self.world.tasks.keys() {
            let bridged = self
                .records
                .get(id)
                .is_some_and(|r| r.config.network.needs_attachment());
            prop_assert!(
                !bridged || self.world.attached.contains(id),
                "{} has a task on the bridge network without its attachment",
                id
            );
        }
        for (id, slot) in &self.world.endpoints {
            // An `eth0` is its own attachment's too: one in doubt is
            // released whole; one made is the container's until it is
            // disconnected from its own network, then the endpoint of
            // slot 0 owns it until released.
            let owned = self.records.get(id).is_some_and(|r| {
                r.endpoints
                    .iter()
                    .any(|e| e.slot == *slot && e.state != NetworkState::Detached)
                    || *slot == 0
                        && (r.network == NetworkState::Attaching
                            || r.network == NetworkState::Attached && !r.own_disconnected)
            });
            prop_assert!(
                owned,
                "{} endpoint eth{} exists with no record owning it: {:?}",
                id,
                slot,
                self.records.get(id).map(|r| &r.endpoints)
            );
        }
        for (id, r) in &self.records {
            for e in &r.endpoints {
                prop_assert!(
                    e.state != NetworkState::Attached
                        || self.world.endpoints.contains(&(id.clone(), e.slot)),
                    "{} endpoint eth{} recorded attached and not made",
                    id,
                    e.slot
                );
            }
        }
        Ok(())
    }

    /// What a request was taken for stands until the user changes it:
    /// - a kill still waiting is still meant: its signal is queued, one
    ///   delivery per signal (another signal's refusal does not drop it);
    /// - a network connect said done leaves the container on that network
    ///   until a disconnect of it is asked (another endpoint's refusal does
    ///   not release it).
    fn check_taken_requests_stand(&mut self) -> Result<(), TestCaseError> {
        for (req, (id, ask)) in &self.asks {
            if let (Ask::Kill(signal), Some(c)) = (ask, self.core.container(id)) {
                prop_assert!(
                    c.record.intents.kills.contains(signal),
                    "{} (a kill of {} with {:?}) waits, and its signal is no longer queued: {:?}",
                    req,
                    id,
                    signal,
                    c.record.intents.kills
                );
            }
        }
        let core = &self.core;
        self.connected
            .retain(|_, (id, _)| core.container(id).is_some());
        for (req, (id, network)) in &self.connected {
            let disconnected = self
                .disconnects
                .iter()
                .any(|(r, i, n)| r > req && i == id && n == network);
            let Some(c) = self.core.container(id) else {
                continue;
            };
            if disconnected || c.record.intents.remove {
                continue;
            }
            let own = c
                .record
                .config
                .network_name
                .clone()
                .unwrap_or_else(|| "bridge".to_owned());
            let on = c
                .record
                .endpoints
                .iter()
                .any(|e| &e.network == network && e.wanted)
                || *network == own && !c.record.own_disconnected;
            prop_assert!(
                on,
                "{} (a connect of {} to {}, done) no longer holds: {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        }
        Ok(())
    }

    /// The answer to a call that took effect; lost (a deadline) when the
    /// step said so.
    fn reply(&mut self, op: OpId, done: Done) -> Result<(), TestCaseError> {
        let result = if std::mem::take(&mut self.answer_lost) {
            Err(Failure::new(FailureKind::Deadline, "injected: answer lost"))
        } else {
            Ok(done)
        };
        self.feed(Input::ActionResult(op, result))
    }

    fn world_exit(
        &mut self,
        id: &ContainerId,
        pid: u32,
        status: u32,
        lost: bool,
    ) -> Result<(), TestCaseError> {
        let at = self.now.wall;
        self.world.paused.remove(id);
        self.world.kill_on_thaw.remove(id);
        self.world.last_exit.insert(id.clone(), at);
        self.world
            .tasks
            .insert(id.clone(), WorldTask::Stopped(pid, status, at));
        if let Some(inst) = self.world.instance(id, pid) {
            inst.exit = Some(status);
        }
        let event = ContainerdEvent::TaskExit {
            container: id.clone(),
            exec_id: id.to_string(),
            pid,
            exit_status: status,
            exited_at: at,
            oom_kills: self.world.oom_kills(id, pid),
        };
        if lost {
            self.lost(&event);
            self.past_events.push(event);
            Ok(())
        } else {
            self.event(event)
        }
    }

    /// Liveness once healed: `docker run` of a new container succeeds, and
    /// its pauses, update, stop and a kill while frozen are carried out.
    fn probe_healed(&mut self) -> Result<(), TestCaseError> {
        let id = cid("probe");
        let config = ContainerConfig::default();
        self.configs.insert(id.clone(), config.clone());
        let create = self.command(Command::Create {
            id: id.clone(),
            name: "probe".into(),
            config: config.into(),
        })?;
        self.settle()?;
        let start = self.command(Command::Start { id: id.clone() })?;
        self.settle()?;
        let running = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(running, Some(Status::Running), "the probe does not run");
        // A signal it ignores is delivered, and the kill answered done.
        let kill = self.command(Command::Kill {
            id: id.clone(),
            signal: Signal::try_from(1).map_err(|e| TestCaseError::fail(e.to_string()))?,
        })?;
        self.settle()?;
        // A pause, an unpause and an update are carried out, and containerd
        // agrees; then paused again for the stop.
        self.pauses_asked.insert((id.clone(), true));
        self.pauses_asked.insert((id.clone(), false));
        self.updates_asked.insert(id.clone());
        let pause = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        prop_assert!(
            self.world.paused.contains_key(&id),
            "the probe is not frozen"
        );
        let unpause = self.command(Command::Unpause { id: id.clone() })?;
        self.settle()?;
        prop_assert!(
            !self.world.paused.contains_key(&id),
            "the probe is still frozen"
        );
        let update = self.update_memory_settled(&id, 64 << 20)?;
        // Carried to the running task's cgroup now, not left for its next run.
        prop_assert_eq!(
            self.answer_of(update),
            Some(Answer::Done),
            "the running probe's update"
        );
        let pause_again = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        let stop = self.command(Command::Stop {
            id: id.clone(),
            timeout: Some(Duration::from_secs(1)),
            signal: Some(Signal::SIGKILL),
        })?;
        self.settle()?;
        let stopped = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(stopped, Some(Status::Exited), "the probe did not stop");
        // Started again, frozen, and killed: the SIGKILL takes effect
        // (under a v1 freezer only because the core thaws the task). The
        // clock moves, so that the new run begins after the last one ended.
        self.set_time(self.now.at + Duration::from_millis(1));
        let start_again = self.command(Command::Start { id: id.clone() })?;
        self.settle()?;
        let pause_to_kill = self.command(Command::Pause { id: id.clone() })?;
        self.settle()?;
        let kill_frozen = self.command(Command::Kill {
            id: id.clone(),
            signal: Signal::SIGKILL,
        })?;
        self.settle()?;
        for req in [
            create,
            start,
            kill,
            pause,
            unpause,
            update,
            pause_again,
            stop,
            start_again,
            pause_to_kill,
            kill_frozen,
        ] {
            prop_assert_eq!(
                self.trace.iter().rev().find_map(|a| match a {
                    Action::Answer(r, answer) if *r == req => Some(answer.clone()),
                    _ => None,
                }),
                Some(Answer::Done),
                "probe request {} of a healed world",
                req
            );
        }
        let killed = self.core.container(&id).map(|c| c.status);
        prop_assert_eq!(
            killed,
            Some(Status::Exited),
            "the frozen probe was not killed"
        );
        // Updated while stopped: carried to the spec of its next run now.
        let update_stopped = self.update_memory_settled(&id, 32 << 20)?;
        prop_assert_eq!(
            self.answer_of(update_stopped),
            Some(Answer::Done),
            "the stopped probe's update"
        );
        Ok(())
    }

    /// `docker update --memory` of `id`, carried as far as it goes.
    fn update_memory_settled(
        &mut self,
        id: &ContainerId,
        bytes: u64,
    ) -> Result<RequestId, TestCaseError> {
        let req = self.command(Command::UpdateResources {
            id: id.clone(),
            update: ResourceUpdate {
                memory_limit_bytes: Some(bytes),
                ..Default::default()
            },
        })?;
        self.settle()?;
        Ok(req)
    }

    /// A rename or a policy update, and what its answer must mean: a name
    /// goes to one container only, recorded on disk before it is said done.
    fn edit(&mut self, id: &ContainerId, arg: u8) -> Result<(), TestCaseError> {
        let before = self.core.container(id).map(|c| c.record.name.clone());
        if arg % 2 == 1 {
            let policy = restart_policy(arg / 2);
            let before = self.core.container(id).map(|c| {
                let r = c.record;
                let last_exit = r.exit.as_ref().map_or(0, |e| e.exit_code);
                let wanted =
                    policy.wants_restart(last_exit, r.restart_count, r.intents.user_stopped);
                (r.config.auto_remove, r.intents.policy_restart && wanted)
            });
            let req = self.command(Command::UpdateRestartPolicy {
                id: id.clone(),
                policy,
            })?;
            match self.answer_of(req) {
                Some(Answer::Done) => {
                    let recorded = self.records.get(id).map(|r| r.config.restart_policy);
                    prop_assert_eq!(recorded, Some(policy), "{} updated, not recorded", req);
                    // A restart waiting out its backoff goes on only if the
                    // new policy would have asked for it too.
                    let waiting = self
                        .core
                        .container(id)
                        .map(|c| c.record.intents.policy_restart);
                    prop_assert_eq!(
                        waiting,
                        before.map(|b| b.1),
                        "{} to {:?}: the waiting policy restart",
                        req,
                        policy
                    );
                    prop_assert!(
                        !before.is_some_and(|b| b.0) || policy == RestartPolicy::No,
                        "{} gave an auto-remove container a restart policy",
                        req
                    );
                }
                Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict => {
                    let creating = self
                        .core
                        .container(id)
                        .is_some_and(|c| c.record.presence == Presence::Creating);
                    prop_assert!(
                        creating || before.is_some_and(|b| b.0) && policy != RestartPolicy::No,
                        "{} refused: {}",
                        req,
                        e.message
                    );
                }
                _ => {}
            }
            return Ok(());
        }
        // Mostly names of the model (n0 to n3), some that Docker's rule
        // refuses: too short, a bad first or later character, too long.
        let name = match arg / 2 % 12 {
            8 => "n".to_owned(),
            9 => "-n1".to_owned(),
            10 => "n/1".to_owned(),
            11 => "n".repeat(256),
            k => format!("n{}", k % 4),
        };
        let valid = {
            let mut chars = name.chars();
            chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
                && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
                && (2..=255).contains(&name.len())
        };
        let owner = self.core.resolve(&name).ok();
        let req = self.command(Command::Rename {
            id: id.clone(),
            name: name.clone(),
        })?;
        let answer = self.answer_of(req);
        let refused_name = matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Invalid && !e.message.contains("same name"));
        let created = self
            .core
            .container(id)
            .is_some_and(|c| c.record.presence != Presence::Creating);
        prop_assert!(
            refused_name != valid || !created && !refused_name,
            "{} renamed to {:?}: {:?}",
            req,
            name,
            answer
        );
        match answer {
            Some(Answer::Done) => {
                prop_assert!(
                    owner.is_none(),
                    "{} renamed {} onto the name of {:?}",
                    req,
                    id,
                    owner
                );
                prop_assert_eq!(self.core.resolve(&name).ok(), Some(id.clone()));
                let recorded = self.records.get(id).map(|r| r.name.clone());
                prop_assert_eq!(
                    recorded,
                    Some(name.clone()),
                    "{} renamed, not recorded",
                    req
                );
                if let Some(old) = before.filter(|old| *old != name) {
                    prop_assert!(
                        self.core.resolve(&old).ok().as_ref() != Some(id),
                        "{} still answers to its old name {}",
                        id,
                        old
                    );
                }
            }
            Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict => {
                let creating = self
                    .core
                    .container(id)
                    .is_some_and(|c| c.record.presence == Presence::Creating);
                prop_assert!(
                    creating || owner.as_ref().is_some_and(|o| o != id),
                    "{} refused a free name {}: {}",
                    req,
                    name,
                    e.message
                );
            }
            _ => {}
        }
        Ok(())
    }

    /// What dockerd's rules make of a `network connect` or `disconnect`
    /// of `id`, by the core's view before it.
    fn network_expected(&self, id: &ContainerId, network: &str, connect: bool) -> NetExpect {
        let Some(c) = self.core.container(id) else {
            return NetExpect::Refused(ErrorKind::NotFound);
        };
        let r = c.record;
        if r.presence == Presence::Creating || r.intents.remove {
            return NetExpect::Refused(ErrorKind::Conflict);
        }
        let up = matches!(
            c.task,
            TaskState::Created { .. } | TaskState::Running { .. }
        );
        let own = r.config.network_name.as_deref().unwrap_or("bridge");
        let bridge = r.config.network == NetworkMode::Bridge;
        // Its own network, unless disconnected from it.
        let on_own = own == network && !r.own_disconnected;
        if connect {
            let existing = r.endpoints.iter().find(|e| e.network == network);
            if !bridge {
                NetExpect::Refused(ErrorKind::Invalid)
            } else if existing.is_some_and(|e| !e.wanted) {
                NetExpect::Refused(ErrorKind::Conflict)
            } else if up && (on_own || existing.is_some()) {
                NetExpect::Refused(ErrorKind::Forbidden)
            } else if r.endpoints.len() >= ENDPOINTS_MAX {
                NetExpect::Refused(ErrorKind::Invalid)
            } else if on_own || existing.is_some() || !up {
                NetExpect::DoneNow
            } else {
                NetExpect::Pending
            }
        } else {
            let wanted = r
                .endpoints
                .iter()
                .find(|e| e.network == network && e.wanted);
            match wanted {
                _ if r.config.network == NetworkMode::Host && network == "host" => {
                    NetExpect::Refused(ErrorKind::Invalid)
                }
                // Its own `eth0` is released (an endpoint of slot 0 then);
                // with none made or being made, it is done at once.
                None if bridge && on_own => {
                    let setting_up = self.outstanding.iter().any(
                        |(_, call)| matches!(call, Call::NetworkSetup { id: x, .. } if x == id),
                    );
                    match r.network {
                        NetworkState::Attached => NetExpect::Pending,
                        NetworkState::Attaching if setting_up => NetExpect::Pending,
                        _ => NetExpect::DoneNow,
                    }
                }
                None => NetExpect::Refused(ErrorKind::Conflict),
                Some(e) if e.state == NetworkState::Detached => NetExpect::DoneNow,
                Some(_) => NetExpect::Pending,
            }
        }
    }

    /// A connect or disconnect is answered as dockerd's rules say, and a
    /// connect taken (or done at once) leaves the container on the network,
    /// a disconnect taken leaves it wanted there no more.
    fn check_network_answer(
        &self,
        req: RequestId,
        id: &ContainerId,
        network: &str,
        connect: bool,
        expected: NetExpect,
    ) -> Result<(), TestCaseError> {
        let answer = self.answer_of(req);
        let what = if connect { "connect" } else { "disconnect" };
        match expected {
            // (A conflict says which container it is about.)
            NetExpect::Refused(kind) => prop_assert!(
                matches!(&answer, Some(Answer::Error(e)) if e.kind == kind
                    && (kind != ErrorKind::Conflict || e.message.contains(id.as_str()))),
                "{} {} of {} to {}: {:?}, expected {:?}",
                req,
                what,
                id,
                network,
                answer,
                kind
            ),
            NetExpect::DoneNow => prop_assert!(
                answer == Some(Answer::Done),
                "{} {} of {} to {}: {:?}, expected done at once",
                req,
                what,
                id,
                network,
                answer
            ),
            NetExpect::Pending => prop_assert!(
                answer.is_none(),
                "{} {} of {} to {}: {:?}, expected to wait",
                req,
                what,
                id,
                network,
                answer
            ),
        }
        if matches!(expected, NetExpect::Refused(_)) {
            return Ok(());
        }
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let own = c.record.config.network_name.as_deref().unwrap_or("bridge");
        let mut ours = c.record.endpoints.iter().filter(|e| e.network == network);
        let wanted = ours.clone().filter(|e| e.wanted).count();
        if connect {
            prop_assert!(
                own == network || wanted == 1,
                "{} connect of {} to {} taken, endpoints {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        } else {
            prop_assert!(
                wanted == 0 && ours.all(|e| e.state != NetworkState::Detached),
                "{} disconnect of {} from {} taken, endpoints {:?}",
                req,
                id,
                network,
                c.record.endpoints
            );
        }
        Ok(())
    }

    /// Whether a `network connect` of `id` to `network` is one connecting
    /// a stopped container back to the network it was created on, with
    /// nothing in the way: no other network took its `eth0` meanwhile, and
    /// no attachment without it is kept (for a restart's next run, or its
    /// release not issued yet) or being made. One still being released, or
    /// owed a release, is no obstacle: its next run is made anew. (The
    /// connect carries no alias and no address: the generator's never do.)
    fn connects_back(&self, id: &ContainerId, network: &str) -> bool {
        let Some(c) = self.core.container(id) else {
            return false;
        };
        let r = c.record;
        let own = r.config.network_name.as_deref().unwrap_or("bridge");
        r.config.network == NetworkMode::Bridge
            && own == network
            && r.own_disconnected
            && r.presence != Presence::Creating
            && !r.intents.remove
            && matches!(c.task, TaskState::Absent | TaskState::Stopped)
            && match r.network {
                NetworkState::Detached => true,
                NetworkState::Attaching => !self
                    .outstanding
                    .iter()
                    .any(|(_, call)| matches!(call, Call::NetworkSetup { id: x, .. } if x == id)),
                NetworkState::Attached => false,
            }
            && r.endpoints
                .iter()
                .all(|e| e.slot != 0 && e.network != network)
            && r.endpoints.len() < ENDPOINTS_MAX
    }

    /// dockerd's baseline, as the README puts it: connecting a stopped
    /// container back to the network it was created on gives it its own
    /// `eth0` again, published ports included (inspect shows them), at its
    /// next start: it is as it was created on that network, not one more
    /// endpoint on it (whose ports are not published).
    fn check_connected_back(
        &self,
        req: RequestId,
        id: &ContainerId,
        network: &str,
    ) -> Result<(), TestCaseError> {
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let r = c.record;
        prop_assert!(
            self.answer_of(req) == Some(Answer::Done)
                && !r.own_disconnected
                && r.endpoints.iter().all(|e| e.network != network),
            "{} connected {} back to its own network {} while stopped: {:?}, own disconnected {}, endpoints {:?}",
            req,
            id,
            network,
            self.answer_of(req),
            r.own_disconnected,
            r.endpoints
        );
        Ok(())
    }

    /// A start or restart told "stopped before it started" (409) had no
    /// start of its own under way that may yet take effect, nor one that
    /// took effect and still runs: the container did not run for it.
    fn check_start_refusal(&self, req: RequestId, answer: &Answer) -> Result<(), TestCaseError> {
        let Answer::Error(e) = answer else {
            return Ok(());
        };
        let Some(id) = self.starts.get(&req) else {
            return Ok(());
        };
        if e.kind != ErrorKind::Conflict || !e.message.contains("stopped before it started") {
            return Ok(());
        }
        // (A StartTask sent before it was asked is an earlier start's.)
        let asked_at_op = self.start_asked_at_op.get(&req).copied().unwrap_or(0);
        let start_under_way = self.outstanding.iter().any(|(op, call)| {
            matches!(call, Call::StartTask { id: x } if x == id) && op.0 > asked_at_op
        });
        // (Once its task is gone unseen, its answer and events lost, the
        // core cannot know it ever ran.)
        let runs = matches!(self.world.tasks.get(id), Some(WorldTask::Running(_)));
        prop_assert!(
            !(start_under_way || runs && self.starts_reached.contains(&req)),
            "{} (a start of {}) told {:?}, but its start {}",
            req,
            id,
            e.message,
            if start_under_way {
                "was sent and is still under way"
            } else {
                "took effect"
            }
        );
        Ok(())
    }

    /// The world started a task of `id`: every start or restart of it still
    /// waiting is carried out, but a restart asked after this start was
    /// sent (it wants a run after this one).
    fn start_reached(&mut self, id: &ContainerId, op: OpId) {
        for (req, of) in &self.starts {
            let later_restart = self.restarts.contains(req)
                && self
                    .start_asked_at_op
                    .get(req)
                    .is_some_and(|asked| *asked >= op.0);
            if of == id && !self.answered.contains_key(req) && !later_restart {
                self.starts_reached.insert(*req);
            }
        }
    }

    /// A container a "stay down" kill reached while restarting (no start of
    /// its new run sent yet) gets no new task until a user's start or
    /// restart (or a new daemon) says so.
    fn check_kept_down(&self, input: &Input, call: &Call) -> Result<(), TestCaseError> {
        if let Call::StartTask { id } = call {
            prop_assert!(
                !self.start_not_again.contains(id),
                "{:?} sent a start to {} again after a kill that means stay down ended its restart",
                input,
                id
            );
        }
        if let Call::CreateTask { id } = call {
            prop_assert!(
                !self.kept_down.contains(id),
                "{:?} created a task of {} after a kill that means stay down ended its restart",
                input,
                id
            );
        }
        Ok(())
    }

    /// `docker kill`, answered as dockerd answers it by what the container
    /// shows: a container neither running nor restarting is refused (409,
    /// not running); one restarting with no process (between runs) is
    /// answered done at once, no signal sent. A kill that means "stay
    /// down" (SIGKILL, the stop signal, any signal when none is configured)
    /// ends a restart: the container shows restarting no more, and no new
    /// task is made for it; any other kill leaves the restart as it was.
    fn kill_checked(&mut self, id: &ContainerId, signal: Signal) -> Result<(), TestCaseError> {
        let before = self.core.container(id).map(|c| {
            let process = matches!(
                c.task,
                TaskState::Created { .. } | TaskState::Running { .. } | TaskState::Unknown
            ) && c.current_exit().is_none();
            (c.status, process, c.record.presence == Presence::Creating)
        });
        // (A start already sent to a task of the new run may have taken
        // effect: it stays, and the kill follows it.)
        let start_sent = self.core.container(id).is_some_and(|c| c.record.start_sent);
        let stay_down = self.stays_down(id, signal);
        if stay_down && !start_sent && before.is_some_and(|(s, _, _)| s == Status::Restarting) {
            // (Known before it is fed: the kill's own effects follow it.)
            self.kept_down.insert(id.clone());
        }
        // A start already sent may take effect, but it is not sent again.
        if stay_down && before.is_some_and(|(s, _, _)| s == Status::Restarting) {
            self.start_not_again.insert(id.clone());
        }
        let calls_before = self.trace.len();
        let req = self.command(Command::Kill {
            id: id.clone(),
            signal,
        })?;
        let Some((status, process, creating)) = before else {
            return Ok(());
        };
        if creating {
            return Ok(());
        }
        let answer = self.answer_of(req);
        let after = self.core.container(id).map(|c| c.status);
        match status {
            Status::Exited | Status::Created if !process => prop_assert!(
                matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict
                    && e.message.contains("is not running")),
                "{} kill of {} ({:?}): {:?}, expected not running",
                req,
                id,
                status,
                answer
            ),
            Status::Restarting if !process => {
                let signalled = self.trace[calls_before..].iter().any(
                    |a| matches!(Call::of(a), Some((_, Call::Kill { id: x, .. })) if &x == id),
                );
                prop_assert!(
                    answer == Some(Answer::Done) && !signalled,
                    "{} kill of {} between runs: {:?} (signalled: {})",
                    req,
                    id,
                    answer,
                    signalled
                );
            }
            _ => {}
        }
        if status == Status::Restarting {
            prop_assert!(
                (after == Some(Status::Restarting)) != stay_down,
                "{} kill of {} with {:?} (stay down: {}) while restarting: now {:?}",
                req,
                id,
                signal,
                stay_down,
                after
            );
        }
        Ok(())
    }

    /// Once healed: a running container on the network it was created on
    /// has its own `eth0` there (with its published ports); one a "stay
    /// down" kill ended the restart of does not run.
    fn check_healed_own_eth0_and_kept_down(&self) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let id = &c.record.id;
            let running = matches!(c.task, TaskState::Running { .. });
            if running
                && c.record.config.network == NetworkMode::Bridge
                && !c.record.own_disconnected
            {
                prop_assert!(
                    self.world.endpoints.contains(&(id.clone(), 0)),
                    "{} runs on its own network without its eth0",
                    id
                );
            }
            if self.kept_down.contains(id) {
                prop_assert!(
                    !matches!(c.status, Status::Running | Status::Restarting),
                    "{} is {:?} once healed after a kill that means stay down ended its restart",
                    id,
                    c.status
                );
            }
        }
        Ok(())
    }

    fn answer_of(&self, req: RequestId) -> Option<Answer> {
        self.trace.iter().rev().find_map(|a| match a {
            Action::Answer(r, answer) if *r == req => Some(answer.clone()),
            _ => None,
        })
    }

    /// Property 4 at the end: every stop was answered in time.
    fn check_stops_answered_in_time(&self) -> Result<(), TestCaseError> {
        for (req, bound) in &self.stop_bounds {
            let at = self.answered.get(req);
            prop_assert!(
                at.is_some_and(|at| at <= bound),
                "stop {} answered at {:?}, bound {:?}",
                req,
                at,
                bound
            );
        }
        Ok(())
    }

    /// Resolves every call and lets due timers pass.
    /// The next timer but a health check's: a probed run's probe timer is
    /// always armed, so waiting for "no timer" looks past it.
    fn next_timer_but_probes(&self) -> Option<(Instant, TimerKind)> {
        self.core
            .timers()
            .find(|(_, k)| !matches!(k, TimerKind::Probe(_)))
            .map(|(at, k)| (at, k.clone()))
    }

    /// Answers every call, each as it comes, in a healed world: the calls
    /// come to an end (a core that answers each result with another call
    /// of the same kind, for ever, would hang the case instead).
    fn resolve_all(&mut self) -> Result<(), TestCaseError> {
        let mut answered = 0u32;
        while let Some((_, call)) = self.outstanding.first() {
            answered += 1;
            prop_assert!(
                answered <= CALLS_HEALED_MAX,
                "the calls never end in a healed world: {:?} after {} answered",
                call,
                CALLS_HEALED_MAX
            );
            self.resolve(0, 0)?;
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..50 {
            self.resolve_all()?;
            // (A relist due this soon is one asked for after a placeholder,
            // not the periodic one, and may hide later timers behind it.)
            match self.next_timer_but_probes() {
                Some((at, _)) if at <= self.now.at + Duration::from_secs(2) => {
                    self.advance(Duration::from_secs(2))?
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// holdfastd restarts from the records it persisted. Calls in flight
    /// never land; requests waiting die with it (their clients see the
    /// connection reset), so they are owed no answer.
    fn daemon_restart(&mut self) -> Result<(), TestCaseError> {
        self.oom_announced.clear();
        let answered = &self.answered;
        self.must_answer.retain(|r| answered.contains_key(r));
        self.stop_bounds.retain(|r, _| answered.contains_key(r));
        self.starts.retain(|r, _| answered.contains_key(r));
        self.starts_asked.retain(|r, _| answered.contains_key(r));
        self.connects.retain(|r, _| answered.contains_key(r));
        self.failures.clear();
        self.streaks.clear();
        self.waits.clear();
        self.asks.clear();
        self.updates.clear();
        self.user_kill_ops.clear();
        self.removes.clear();
        self.kills_announced.clear();
        self.kill_calls.clear();
        self.relist_snapshots.clear();
        self.newest_relist = 0;
        self.look_again_by = None;
        self.refresh_owed_by = None;
        self.doubts.clear();
        self.doubt_owed_by.clear();
        self.restart_backoff.clear();
        self.kept_down.clear();
        self.start_not_again.clear();
        self.task_progress.clear();
        self.outstanding.clear();
        self.subscriptions.clear();
        self.stop_signal_ops.clear();
        self.signal_delivered.clear();
        self.kill_deadline.clear();
        self.daemons += 1;
        self.core = Core::new(self.config.clone(), 9 + self.daemons, self.now);
        self.last_op = 0;
        // Op ids start again: the new daemon's first relist sees it all.
        for mark in self.unseen.values_mut() {
            *mark = 0;
        }
        // What the core knew of OOM events was in memory only.
        for inst in &mut self.world.instances {
            inst.oom_in_order = false;
        }
        let records = self.records.values().cloned().collect();
        self.feed(Input::Restore(records))
    }

    fn run(&mut self, steps: &[Step], swarm: u8) -> Result<(), TestCaseError> {
        self.feed(Input::Restore(Vec::new()))?;
        self.advance(Duration::ZERO)?;
        for step in steps.iter().filter(|s| enabled(s, swarm)) {
            self.step(step)?;
        }
        // Heal, let every call complete and every timer pass (but the
        // periodic relist, which is always armed while connected).
        self.world.up = true;
        self.feed(Input::Connection(ConnectionFact::Connected))?;
        for _ in 0..200 {
            self.resolve_all()?;
            // What could not be seen waits for the periodic relist. (A
            // relist due soon, after a placeholder, may hide later timers
            // behind it, such as a stop's deadline; and a far one may hide
            // a request's answer bound: let them pass.)
            let behind = self
                .core
                .timers()
                .any(|(_, k)| !matches!(k, TimerKind::Probe(_) | TimerKind::PeriodicRelist));
            match self.next_timer_but_probes() {
                None => break,
                Some((at, TimerKind::PeriodicRelist))
                    if !behind
                        && self.unseen.is_empty()
                        && at > self.now.at + Duration::from_secs(30) =>
                {
                    break;
                }
                Some(_) => self.advance(Duration::from_secs(30))?,
            }
        }
        prop_assert_eq!(self.core.calls_in_flight(), 0);
        prop_assert!(self.unseen.is_empty(), "never relisted: {:?}", self.unseen);
        self.check_quiescent()?;
        // Nothing is left behind: the same containers on both sides, and no
        // stopped task kept in containerd.
        let shown: Vec<&ContainerId> = self.core.containers().map(|c| &c.record.id).collect();
        let mut shown = shown.into_iter().cloned().collect::<Vec<_>>();
        shown.sort();
        let kept: Vec<ContainerId> = self.world.containers.keys().cloned().collect();
        prop_assert_eq!(&shown, &kept, "holdfast shows, containerd has");
        // A removal asked for is carried out once the world heals, in any
        // state the container was in: none is left being removed. So is a
        // start (a user's, a restart's, a policy's): none is left wanted.
        for c in self.core.containers() {
            prop_assert!(
                !c.record.intents.remove,
                "{} is still being removed in a healed world ({:?})",
                c.record.id,
                c.task
            );
            prop_assert!(
                !c.record.intents.start && !c.record.intents.policy_restart,
                "{} still waits to be started in a healed world ({:?}, {:?})",
                c.record.id,
                c.task,
                c.record.intents
            );
        }
        // Every SIGKILL that went out has taken effect: none waits on a
        // frozen task that the core left frozen (a v1 freezer holds it).
        prop_assert!(
            self.world.kill_on_thaw.is_empty(),
            "SIGKILLed tasks left frozen, never thawed: {:?}",
            self.world.kill_on_thaw
        );
        for id in &self.world.attached {
            prop_assert!(
                self.world.tasks.contains_key(id),
                "{} is still attached with no task: an allocation left behind",
                id
            );
        }
        for (id, slot) in &self.world.endpoints {
            prop_assert!(
                self.world.tasks.contains_key(id),
                "{} endpoint eth{} is left with no task: an allocation left behind",
                id,
                slot
            );
        }
        self.check_healed_own_eth0_and_kept_down()?;
        // A connect asked for is carried out: every wanted endpoint of a
        // running container is made, every unwanted one released.
        for c in self.core.containers() {
            let running = matches!(c.task, TaskState::Running { .. });
            for e in &c.record.endpoints {
                let made = self
                    .world
                    .endpoints
                    .contains(&(c.record.id.clone(), e.slot));
                prop_assert!(
                    e.wanted && (made || !running),
                    "{} endpoint {:?} in a healed world (running: {})",
                    c.record.id,
                    e,
                    running
                );
            }
        }
        for (id, task) in &self.world.tasks {
            prop_assert!(
                !matches!(task, WorldTask::Stopped(..)),
                "a stopped task of {} is left: {:?}",
                id,
                task
            );
        }
        // No request is lost: everything but a wait is answered by now.
        for req in &self.must_answer {
            prop_assert!(
                self.answered.contains_key(req),
                "{} was never answered",
                req
            );
        }
        // A wait whose condition has come true is answered: the container
        // is gone, it exited since, or nothing runs nor is about to.
        for (req, (id, condition, exit_then)) in &self.waits {
            let view = self.core.container(id);
            let exit_now = view
                .as_ref()
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            let met = match condition {
                WaitCondition::Removed => view.is_none(),
                WaitCondition::NextExit => view.is_none() || exit_now != *exit_then,
                WaitCondition::NotRunning => view.is_none_or(|c| {
                    matches!(c.status, Status::Exited | Status::Created)
                        && !c.record.intents.start
                        && !c.record.intents.policy_restart
                }),
            };
            prop_assert!(
                !met,
                "{} (a wait {:?} of {}) never answered, although it is so: {:?}",
                req,
                condition,
                id,
                view.map(|c| c.status)
            );
        }
        // Healed, the engine works: a new container is created and started.
        self.probe_healed()
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        // Clocks move: no two things happen in the same nanosecond (an
        // exit is later than the exit of the run before it).
        self.set_time(self.now.at + Duration::from_micros(1));
        let id = |i: &usize| cid(IDS[*i]);
        match step {
            Step::Create(i, policy, signals) => {
                let config = ContainerConfig {
                    restart_policy: restart_policy(*policy),
                    // `--rm` (the API takes it with no restart policy only).
                    auto_remove: *policy == 0 && signals & 0x10 != 0,
                    // The default bridge, a user network (the same
                    // step), none or the host's (the policy's bit 2),
                    // another's namespace (no step).
                    network: match i % 4 {
                        0 | 2 => NetworkMode::Bridge,
                        1 if policy & 4 != 0 => NetworkMode::Host,
                        1 => NetworkMode::None,
                        _ => NetworkMode::Container,
                    },
                    network_name: (i % 4 == 2).then(|| "app".to_owned()),
                    network_container: (i % 4 == 3).then(|| holdfast_core::SharedNetwork {
                        id: "donor".into(),
                        pid: 1,
                    }),
                    stop_signal: stop_signal(*signals),
                    image_stop_signal: stop_signal(*signals >> 2),
                    healthcheck: health_check(*signals),
                    ..Default::default()
                };
                if self.core.container(&id(i)).is_none() {
                    self.configs.insert(id(i), config.clone());
                    // The model reuses ids (the daemon never does): a new
                    // container of a removed one's id starts its runs anew.
                    self.exits.retain(|(cid, _), _| *cid != id(i));
                    self.connected_back.remove(&id(i));
                }
                self.command(Command::Create {
                    id: id(i),
                    name: format!("n{i}"),
                    config: config.into(),
                })?;
            }
            Step::Start(i) => {
                self.command(Command::Start { id: id(i) })?;
            }
            Step::Cancel(n) => {
                let Some(req) = (!self.waits.is_empty())
                    .then(|| self.waits.keys().nth(n.of(self.waits.len())).copied())
                    .flatten()
                else {
                    return Ok(());
                };
                self.feed(Input::Cancel(req))?;
                let answer = self.answer_of(req);
                prop_assert!(
                    matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Cancelled),
                    "{} cancelled, answered {:?}",
                    req,
                    answer
                );
            }
            Step::Edit(i, arg) => {
                // Half the edits go to a container waiting out a restart
                // backoff, if there is one: a window too short to hit by
                // chance, where an update must keep or drop that restart.
                let waiting = self
                    .core
                    .containers()
                    .find(|c| c.record.intents.policy_restart)
                    .map(|c| c.record.id.clone());
                let target = waiting.filter(|_| arg & 0x80 != 0).unwrap_or(id(i));
                self.edit(&target, arg & 0x7f)?
            }
            Step::Update(i, mib) => {
                self.updates_asked.insert(id(i));
                let before = self.core.container(&id(i)).map(|c| c.record.config.clone());
                // (Known before it is fed: a refusal answers it at once.)
                let req = RequestId(self.next_req + 1);
                self.updates.insert(req, id(i));
                let req2 = self.command(Command::UpdateResources {
                    id: id(i),
                    update: ResourceUpdate {
                        memory_limit_bytes: Some(u64::from(*mib) << 20),
                        ..Default::default()
                    },
                })?;
                prop_assert_eq!(req, req2);
                // Refused at once, it records nothing.
                let refused = self
                    .trace
                    .iter()
                    .rev()
                    .any(|a| matches!(a, Action::Answer(r, Answer::Error(_)) if *r == req));
                if refused {
                    let after = self.core.container(&id(i)).map(|c| c.record.config.clone());
                    prop_assert_eq!(before, after, "a refused update changed the record");
                }
            }
            Step::Network(i, arg) => {
                let connect = arg % 2 == 0;
                // (The daemon refuses a connect to `host` before the core.)
                let network = match arg / 2 % 4 {
                    2 => self
                        .configs
                        .get(&id(i))
                        .and_then(|c| c.network_name.clone())
                        .unwrap_or_else(|| "bridge".to_owned()),
                    3 if !connect => "host".to_owned(),
                    // (Chosen cases reach more networks with higher bits.)
                    n => format!("side{}", u16::from(n % 2) + 2 * u16::from(arg / 8)),
                };
                let expected = self.network_expected(&id(i), &network, connect);
                let back = connect && self.connects_back(&id(i), &network);
                let command = if connect {
                    Command::Connect {
                        id: id(i),
                        network: network.clone(),
                        aliases: Vec::new(),
                        ip: None,
                    }
                } else {
                    Command::Disconnect {
                        id: id(i),
                        network: network.clone(),
                    }
                };
                if !connect {
                    // (Known before it is fed: it may settle a connect.)
                    let req = RequestId(self.next_req + 1);
                    self.disconnects.push((req, id(i), network.clone()));
                    self.connected_back.remove(&id(i));
                }
                let req = self.command(command)?;
                if connect {
                    self.connects.insert(req, (id(i), network.clone()));
                }
                self.check_network_answer(req, &id(i), &network, connect, expected)?;
                if back {
                    self.check_connected_back(req, &id(i), &network)?;
                    self.connected_back.insert(id(i));
                }
            }
            Step::Pause(i, freeze) => {
                self.pauses_asked.insert((id(i), *freeze));
                // dockerd's refusals (each a conflict): not running (or on
                // its way down, or a start pending), restarting, already in
                // that state, a pause while a stop is under way.
                let refused = self.core.container(&id(i)).map(|c| {
                    let running = matches!(c.task, TaskState::Running { .. })
                        && c.current_exit().is_none()
                        && c.status == Status::Running;
                    let i = &c.record.intents;
                    !running
                        || i.remove
                        || i.start
                        || *freeze == c.paused
                        || *freeze && i.stop.is_some()
                });
                let command = if *freeze {
                    Command::Pause { id: id(i) }
                } else {
                    Command::Unpause { id: id(i) }
                };
                let req = self.command(command)?;
                let answer = self.answer_of(req);
                let conflict =
                    matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict);
                // Else only one already in progress is refused, and only
                // an outage keeps it from being taken.
                let in_progress = matches!(&answer, Some(Answer::Error(e))
                    if e.kind == ErrorKind::Conflict && e.message.contains("in progress"));
                let ready = self.core.connection() == ConnectionState::Ready;
                let unavailable =
                    matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Unavailable);
                prop_assert!(
                    match refused {
                        Some(true) => conflict,
                        Some(false) =>
                            in_progress || if ready { answer.is_none() } else { unavailable },
                        None => true,
                    },
                    "{} pause {} of {}: {:?} (refusal due: {:?})",
                    req,
                    freeze,
                    id(i),
                    answer,
                    refused
                );
            }
            Step::OutsidePause(i, freeze) => {
                let id = id(i);
                if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id) {
                    let pid = *pid;
                    let frozen = self.world.paused.get(&id) == Some(&pid);
                    if frozen != *freeze {
                        if *freeze {
                            if self.world.stay_down_sent.contains(&(id.clone(), pid)) {
                                self.world.stay_down_frozen.insert(id.clone());
                            }
                            self.world.paused.insert(id.clone(), pid);
                            self.event(ContainerdEvent::TaskPaused { container: id })?;
                        } else {
                            self.world.paused.remove(&id);
                            self.event(ContainerdEvent::TaskResumed {
                                container: id.clone(),
                            })?;
                            // A SIGKILL held by a v1 freezer lands now.
                            if self.world.kill_on_thaw.remove(&id) == Some(pid) {
                                self.world_exit(&id, pid, 137, false)?;
                            }
                        }
                    }
                }
            }
            Step::Stop(i, timeout, signal) => {
                let timeout = timeout.map(|t| Duration::from_secs(u64::from(t)));
                let signal = signal.and_then(stop_signal);
                let stopping = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.intents.stop.is_some());
                let start_pending = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.intents.start || c.record.intents.policy_restart);
                let grace = self.core.container(&id(i)).map(|c| {
                    c.record
                        .intents
                        .stop
                        .map(|s| s.grace)
                        .unwrap_or(Duration::MAX)
                });
                let req = self.command(Command::Stop {
                    id: id(i),
                    timeout,
                    signal,
                })?;
                if let Some(deadline) = self.kill_deadline.get_mut(&id(i)) {
                    let own = self.configs.get(&id(i)).and_then(|c| c.stop_timeout);
                    let grace = timeout.or(own).unwrap_or(Duration::from_secs(10));
                    *deadline = (*deadline).min(self.now.at + grace);
                }
                // Answered at once, a stop says whether it changed anything:
                // done when it cancelled a start to come, else not modified.
                let answer = self.trace.iter().rev().find_map(|a| match a {
                    Action::Answer(r, answer) if *r == req => Some(answer.clone()),
                    _ => None,
                });
                if let Some(answer @ (Answer::Done | Answer::NotModified)) = &answer
                    && !stopping
                {
                    let cancelled = *answer == Answer::Done;
                    prop_assert_eq!(cancelled, start_pending, "stop answered {:?}", answer);
                }
                // The signal by precedence: request > container > image > SIGTERM.
                if !stopping
                    && let Some(stop) = self
                        .core
                        .container(&id(i))
                        .and_then(|c| c.record.intents.stop)
                {
                    let config = self.configs.get(&id(i));
                    let expected = signal
                        .or(config.and_then(|c| c.stop_signal))
                        .or(config.and_then(|c| c.image_stop_signal))
                        .unwrap_or(Signal::SIGTERM);
                    prop_assert_eq!(stop.signal, expected, "stop signal of {}", id(i));
                }
                if !self.answered.contains_key(&req) {
                    let grace = timeout
                        .unwrap_or(Duration::from_secs(10))
                        .min(grace.unwrap_or(Duration::MAX));
                    self.stop_bounds
                        .insert(req, self.now.at + grace + self.slack);
                }
            }
            Step::Kill(i, sigkill) => {
                let signal = if *sigkill {
                    Signal::SIGKILL
                } else {
                    Signal::try_from(1).map_err(|e| TestCaseError::fail(e.to_string()))?
                };
                self.kill_checked(&id(i), signal)?;
            }
            Step::Restart(i) => {
                self.command(Command::Restart {
                    id: id(i),
                    timeout: Some(Duration::from_secs(1)),
                    signal: None,
                })?;
            }
            Step::Remove(i, force) => {
                let running = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.status == Status::Running && !c.record.intents.remove);
                let creating = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.presence == Presence::Creating);
                // Waiting out a restart backoff: refused without force, as
                // dockerd refuses to remove a restarting container.
                let restarting = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.intents.policy_restart);
                // A removal under way takes any `rm` (answered when done).
                let removing = self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.intents.remove);
                // Nothing runs, nothing is about to: `rm` goes ahead.
                let idle = self.core.container(&id(i)).is_some_and(|c| {
                    matches!(c.status, Status::Exited | Status::Created)
                        && matches!(c.task, TaskState::Absent | TaskState::Stopped)
                        && !c.record.intents.policy_restart
                        && c.record.presence != Presence::Creating
                });
                let paused = self.core.container(&id(i)).is_some_and(|c| c.paused);
                let shown = self.core.container(&id(i)).is_some();
                let req = self.command(Command::Remove {
                    id: id(i),
                    force: *force,
                })?;
                if shown && self.answer_of(req).is_none() {
                    self.removes.insert(req);
                }
                // dockerd's refusal of a plain `rm` of a paused container
                // says so (unpause it first).
                if paused
                    && !*force
                    && let Some(Answer::Error(e)) = self.answer_of(req)
                {
                    prop_assert!(e.message.contains("paused"), "{}: {}", req, e.message);
                }
                // `rm` of a running container is refused; `rm -f` never is
                // (but while the create is still on its way).
                let conflict = self.trace.iter().rev().any(|a| {
                    matches!(a, Action::Answer(r, Answer::Error(e)) if *r == req && e.kind == ErrorKind::Conflict)
                });
                prop_assert!(
                    if *force {
                        !conflict || creating
                    } else {
                        (conflict || !running && !restarting) && !(conflict && (idle || removing))
                    },
                    "remove (force {}) of {} (running {}, restarting {}, idle {}): conflict {}",
                    force,
                    id(i),
                    running,
                    restarting,
                    idle,
                    conflict
                );
            }
            Step::Wait(i, condition) => {
                let condition = [
                    WaitCondition::NotRunning,
                    WaitCondition::NextExit,
                    WaitCondition::Removed,
                ][usize::from(*condition) % 3];
                self.command(Command::Wait {
                    id: id(i),
                    condition,
                })?;
            }
            Step::Resolve(n, failure) => self.resolve(*n, *failure)?,
            Step::LateRelist => {
                let newest = self.newest_relist;
                let late = self
                    .outstanding
                    .iter()
                    .position(|(op, call)| matches!(call, Call::Relist) && op.0 < newest);
                if let Some(n) = late {
                    self.resolve(n, 7)?;
                }
            }
            Step::WorldExit(i, status, lost) => {
                if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id(i)).cloned() {
                    // 2: SIGKILLed from outside (an administrator's kill -9).
                    let status = if *status == 2 {
                        137
                    } else {
                        u32::from(*status)
                    };
                    self.world_exit(&id(i), pid, status, *lost)?;
                }
            }
            Step::ExitReportedAgain(n) => {
                // Only of an exit the core has recorded for that pid (or of
                // an earlier run): a first report that lies is no fault the
                // core could see through. Or one timed before the newest
                // process with that pid was asked for (its pid reused): the
                // core tells it from that process's by when its run began.
                // Never timed in the future, nor in the life of a later
                // process with that pid (no second source would say so).
                let now = self.now.wall.as_unix_nanos();
                let again_at = |exited_at: &WallTime| {
                    (exited_at.as_unix_nanos() + REPORTED_AGAIN_LATER_NANOS).min(now)
                };
                let exits: Vec<ContainerdEvent> = self
                    .past_events
                    .iter()
                    .filter(|e| match e {
                        ContainerdEvent::TaskExit {
                            container,
                            exec_id,
                            pid,
                            exited_at,
                            ..
                        } if exec_id == container.as_str() => {
                            let again = again_at(exited_at);
                            let newest_asked = self
                                .world
                                .latest
                                .get(&(container.clone(), *pid))
                                .and_then(|i| self.world.instances.get(*i))
                                .map(|inst| inst.asked_at.as_unix_nanos());
                            let exited = exited_at.as_unix_nanos();
                            let later_process = newest_asked.filter(|asked| *asked > exited);
                            // (Nor after a later create was asked for: the
                            // process it makes may reuse the pid.)
                            let create_asked = self
                                .world
                                .create_asked
                                .get(container)
                                .map(|at| at.as_unix_nanos())
                                .filter(|asked| *asked > exited);
                            let honest = again > exited
                                && later_process.is_none_or(|asked| again < asked)
                                && create_asked.is_none_or(|asked| again < asked);
                            let before_newest = later_process.is_some();
                            honest
                                && self.core.container(container).is_some_and(|v| {
                                    v.record.pid != Some(*pid)
                                        || before_newest
                                        || v.record
                                            .exit
                                            .as_ref()
                                            .is_some_and(|x| x.run == v.record.run)
                                })
                        }
                        _ => false,
                    })
                    .cloned()
                    .collect();
                if !exits.is_empty()
                    && let ContainerdEvent::TaskExit {
                        container,
                        exec_id,
                        pid,
                        exit_status,
                        exited_at,
                        oom_kills,
                    } = exits[n.of(exits.len())].clone()
                {
                    self.event(ContainerdEvent::TaskExit {
                        container,
                        exec_id,
                        pid,
                        exit_status: exit_status + 1,
                        exited_at: WallTime::from_unix_nanos(again_at(&exited_at)),
                        oom_kills,
                    })?;
                }
            }
            Step::ReplayEvent(n) => {
                if !self.past_events.is_empty() {
                    let event = self.past_events[n.of(self.past_events.len())].clone();
                    self.event(event)?;
                }
            }
            Step::WorldOom(i, lost) => {
                if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id(i)).cloned() {
                    if let Some(inst) = self.world.instance(&id(i), pid) {
                        inst.oom = true;
                    }
                    let oom = ContainerdEvent::TaskOom {
                        container: id(i),
                        published_at: Some(self.now.wall),
                    };
                    if *lost {
                        self.lost(&oom);
                        self.past_events.push(oom);
                    } else {
                        self.event(oom)?;
                    }
                    self.world_exit(&id(i), pid, 137, *lost)?;
                }
            }
            Step::DaemonRestart => self.daemon_restart()?,
            Step::ExecExit(i) => {
                let exited_at = self.now.wall;
                self.event(ContainerdEvent::TaskExit {
                    container: id(i),
                    exec_id: "exec1".into(),
                    pid: 1,
                    exit_status: 1,
                    exited_at,
                    oom_kills: None,
                })?;
            }
            Step::Oom(i) => self.event(ContainerdEvent::TaskOom {
                container: id(i),
                published_at: Some(self.now.wall),
            })?,
            Step::ShimDies(i) => {
                let pid = match self.world.tasks.get(&id(i)) {
                    Some(
                        WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..),
                    ) => *p,
                    None => return Ok(()),
                };
                self.world.delete_task(&id(i));
                self.unseen.insert(id(i), self.last_op);
                // Every other pid: containerd cleans the dead shim's task
                // up and says so (TaskDelete); its exit died with the shim.
                // The core, with no exit of that task and no call of its
                // own to learn from, owes a relist at once.
                if pid.is_multiple_of(2) {
                    let owed = self.core.connection() == ConnectionState::Ready
                        && self.world.up
                        && !self.subscriptions.is_empty()
                        && self.core.container(&id(i)).is_some_and(|c| {
                            c.record.pid == Some(pid) && c.current_exit().is_none()
                        })
                        && !self
                            .outstanding
                            .iter()
                            .any(|(_, c)| c.container_id() == Some(&id(i)));
                    if owed && self.refresh_owed_by.is_none() {
                        self.refresh_owed_by = Some(self.now.at + Duration::from_secs(2));
                    }
                    self.event(ContainerdEvent::TaskDelete {
                        container: id(i),
                        pid,
                    })?;
                }
            }
            Step::StreamBreaks => {
                for sub in std::mem::take(&mut self.subscriptions) {
                    self.feed(Input::Connection(ConnectionFact::StreamBroken(
                        sub,
                        "eof".into(),
                    )))?;
                }
            }
            Step::ContainerdDown => {
                self.world.up = false;
                for sub in std::mem::take(&mut self.subscriptions) {
                    self.feed(Input::Connection(ConnectionFact::StreamBroken(
                        sub,
                        "transport is closing".into(),
                    )))?;
                }
                self.feed(Input::Connection(ConnectionFact::Unreachable(
                    "connection refused".into(),
                )))?;
            }
            Step::ContainerdUp => {
                self.world.up = true;
                self.feed(Input::Connection(ConnectionFact::Connected))?;
            }
            Step::Advance(ms) => self.advance(Duration::from_millis(u64::from(*ms)))?,
            Step::ProbeResult(index, outcome) => {
                if !self.probe_results || self.probes.is_empty() {
                    return Ok(());
                }
                let probe = self.probes[index.of(self.probes.len())].clone();
                let outcome = match outcome {
                    0..=2 => ProbeOutcome::Exited {
                        exit_code: 0,
                        output: "ok".into(),
                    },
                    3 => ProbeOutcome::Exited {
                        exit_code: 1,
                        output: "x".repeat(5000),
                    },
                    4 => ProbeOutcome::TimedOut {
                        output: String::new(),
                    },
                    _ => ProbeOutcome::Failed {
                        message: "cannot exec".into(),
                    },
                };
                self.feed(Input::ProbeResult(ProbeResult {
                    container: probe.container,
                    run: probe.run,
                    probe: probe.probe,
                    outcome,
                }))?;
            }
        }
        Ok(())
    }
}

const REGRESSIONS: &str = "proptest-regressions/properties.txt";

/// The regressions file, replayed first. `PROPTEST_REGRESSIONS=read-only`
/// replays it without adding to it: for measurement runs (cargo-mutants),
/// where a case saved under one mutant would otherwise be replayed under
/// every later one, and a false alarm saved once would "catch" them all.
fn regressions() -> Box<dyn FailurePersistence> {
    let file = FileFailurePersistence::Direct(REGRESSIONS);
    if std::env::var("PROPTEST_REGRESSIONS").is_ok_and(|v| v == "read-only") {
        Box::new(ReadOnly(file))
    } else {
        Box::new(file)
    }
}

#[derive(Debug, Clone, PartialEq)]
struct ReadOnly(FileFailurePersistence);

impl FailurePersistence for ReadOnly {
    fn load_persisted_failures2(&self, source_file: Option<&'static str>) -> Vec<PersistedSeed> {
        self.0.load_persisted_failures2(source_file)
    }

    fn save_persisted_failure2(
        &mut self,
        _source_file: Option<&'static str>,
        _seed: PersistedSeed,
        _shrunken_value: &dyn std::fmt::Debug,
    ) {
    }

    fn box_clone(&self) -> Box<dyn FailurePersistence> {
        Box::new(self.clone())
    }

    fn eq(&self, other: &dyn FailurePersistence) -> bool {
        other.as_any().downcast_ref::<ReadOnly>() == Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES runs more; CI runs the default.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024),
        failure_persistence: Some(regressions()),
        ..ProptestConfig::default()
    })]

    #[test]
    fn properties_hold_over_arbitrary_interleavings(swarm in any::<u8>(), steps in proptest::collection::vec(step(), 1..160)) {
        let mut first = Harness::new(swarm);
        first.run(&steps, swarm)?;
        first.check_stops_answered_in_time()?;
        // Property 5.
        let mut second = Harness::new(swarm);
        second.run(&steps, swarm)?;
        prop_assert_eq!(first.trace, second.trace);
    }

    /// The same properties, over short cases crowded around relists, with
    /// streams that break, shims that die and relists every 40 s, under
    /// either freezer.
    #[test]
    fn properties_hold_around_relists(v1_freezer in any::<bool>(), steps in (0..2usize).prop_flat_map(|c| proptest::collection::vec(relist_race_step(c), 1..60))) {
        let swarm = 1 << 1 | 1 << 3 | 1 << 6 | u8::from(v1_freezer) << 7;
        let mut harness = Harness::new(swarm);
        harness.run(&steps, swarm)?;
        harness.check_stops_answered_in_time()?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Two runs per case: a quarter of the cases (PROPTEST_CASES scales it).
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse::<u32>().ok()).map_or(256, |n| (n / 4).max(1)),
        failure_persistence: Some(regressions()),
        ..ProptestConfig::default()
    })]

    /// Health checks only observe: with every probe result lost, the core
    /// does exactly what it did with them, but for probes and health events.
    #[test]
    fn health_checks_never_change_what_the_core_does(swarm in any::<u8>(), steps in proptest::collection::vec(step(), 1..160)) {
        probe_results_change_nothing_else(&steps, swarm)?;
    }
}

/// Health checks only observe: with every probe result lost, the core
/// does exactly what it did with them, but for probes and health events.
fn probe_results_change_nothing_else(steps: &[Step], swarm: u8) -> Result<(), TestCaseError> {
    let mut with = Harness::new(swarm);
    with.run(steps, swarm)?;
    let mut without = Harness::new(swarm);
    without.probe_results = false;
    without.run(steps, swarm)?;
    // A record is persisted with each probe result (its health): what
    // is persisted but for the health must be the same, in the same order.
    let not_health = |trace: &[Action]| -> Vec<Action> {
        let mut last: std::collections::HashMap<ContainerId, Record> = Default::default();
        trace
            .iter()
            .filter_map(|a| match a {
                Action::RunProbe(_) => None,
                Action::Publish(e) if matches!(e.kind, UserEventKind::HealthStatus(_)) => None,
                Action::Persist(rec) => {
                    let mut rec = rec.clone();
                    rec.health = None;
                    if last.get(&rec.id) == Some(&rec) {
                        return None;
                    }
                    last.insert(rec.id.clone(), rec.clone());
                    Some(Action::Persist(rec))
                }
                Action::Unpersist(id) => {
                    last.remove(id);
                    Some(a.clone())
                }
                a => Some(a.clone()),
            })
            .collect()
    };
    prop_assert_eq!(not_health(&with.trace), not_health(&without.trace));
    Ok(())
}

/// Drives a fresh core (seed `seed`) through `failures` failed connects,
/// then a good one, `healthy` of connected time and a broken stream;
/// returns the delay before its next connect attempt.
fn reconnect_delay_after(seed: u64, failures: u32, healthy: Duration) -> Duration {
    let mut now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(support::WALL0));
    let mut core = Core::new(CoreConfig::default(), seed, now);
    core.handle_input(now, Input::Restore(Vec::new()));
    let subscribe = |core: &mut Core, now: &mut Now| -> Option<OpId> {
        let (at, _) = core.poll_timeout()?;
        *now = Now::new(at.max(now.at), now.wall);
        core.handle_input(*now, Input::Timeout);
        core.drain_actions().into_iter().find_map(|a| match a {
            Action::Call {
                op,
                call: holdfast_core::Call::Subscribe,
            } => Some(op),
            _ => None,
        })
    };
    for _ in 0..failures {
        let Some(op) = subscribe(&mut core, &mut now) else {
            return Duration::MAX;
        };
        let failure = Failure::new(FailureKind::Unavailable, "refused");
        core.handle_input(now, Input::ActionResult(op, Err(failure)));
    }
    let Some(op) = subscribe(&mut core, &mut now) else {
        return Duration::MAX;
    };
    core.handle_input(now, Input::Connection(ConnectionFact::StreamLive(op)));
    let relist = core.drain_actions().into_iter().find_map(|a| match a {
        Action::Call {
            op,
            call: holdfast_core::Call::Relist,
        } => Some(op),
        _ => None,
    });
    let Some(relist) = relist else {
        return Duration::MAX;
    };
    core.handle_input(now, Input::Relist(relist, RelistPart::Begin));
    core.handle_input(now, Input::Relist(relist, RelistPart::End));
    now = Now::new(now.at + healthy, now.wall);
    core.handle_input(
        now,
        Input::Connection(ConnectionFact::StreamBroken(op, "eof".into())),
    );
    core.poll_timeout()
        .filter(|(_, kind)| *kind == TimerKind::Reconnect)
        .map_or(Duration::MAX, |(at, _)| at.saturating_since(now.at))
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1024) / 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Reconnecting backs off from `reconnect_initial` doubling per failure,
    /// starts over after a healthy period, and is spread by ±20% across
    /// daemons (their seeds), so a containerd restart is not stormed.
    #[test]
    fn reconnects_back_off_start_over_when_healthy_and_are_spread(seed in any::<u64>()) {
        let config = CoreConfig::default();
        let initial = config.reconnect_initial;
        let within = |d: Duration, base: Duration| d >= base * 8 / 10 && d <= base * 12 / 10;
        let mut fresh = Vec::new();
        for k in 0..32 {
            let seed = seed.wrapping_add(k);
            let healthy = reconnect_delay_after(seed, 3, config.reconnect_reset_after + Duration::from_secs(1));
            prop_assert!(within(healthy, initial), "after a healthy period: {:?}", healthy);
            let soon = reconnect_delay_after(seed, 3, Duration::from_secs(1));
            prop_assert!(within(soon, initial * 8), "after 3 failures and a short connection: {:?}", soon);
            fresh.push(healthy);
        }
        let (min, max) = (fresh.iter().min().copied(), fresh.iter().max().copied());
        let spread = max.zip(min).map(|(max, min)| max - min).unwrap_or_default();
        prop_assert!(spread >= initial / 5, "32 daemons reconnect within {:?} of each other", spread);
    }
}
