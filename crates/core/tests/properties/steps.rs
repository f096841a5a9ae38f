//! What a case is made of: the steps a strategy draws (commands, the
//! world's answers and faults, time), and the configurations they create.

use crate::support::cid;
use holdfast_core::*;
use proptest::prelude::*;
use std::time::Duration;

pub(crate) const IDS: [&str; 3] = ["c0", "c1", "c2"];

/// The id of the container a step's index names.
pub(crate) fn id(i: &usize) -> ContainerId {
    cid(IDS[*i])
}

/// One of the earlier ones (events, waits, probes), as a fraction of
/// their number: what proptest's `sample::Index` is, drawn the same way
/// (one `u64`), but one a chosen case can write.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pick(pub(crate) u64);

impl Pick {
    pub(crate) fn of(self, len: usize) -> usize {
        ((len as u128 * u128::from(self.0)) >> 64) as usize
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Step {
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
    /// `docker exec -d` (bit 0 clear: attached) of a new exec, or (bit 1)
    /// a resize of the container's newest exec.
    Exec(usize, u8),
    /// The container's oldest running exec ends in the world (0, 1 or
    /// 137); its event may be lost.
    ExecEnds(usize, u8, bool),
    /// `docker commit`, frozen meanwhile (`--pause`, the default) or not.
    Commit(usize, bool),
    /// `docker cp` takes hold of a stopped container's snapshot (true) or
    /// lets go of its oldest hold (false).
    Copy(usize, bool),
    /// `docker volume create` (0), `rm` (1), `rm -f` (2) of `v0` or `v1`
    /// (bit 2), or `prune` (3).
    Volume(u8),
    /// `docker rm -v` (forced or not).
    RemoveVolumes(usize, bool),
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
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

/// The steps of the new decisions (execs, commits, copies, volumes), or
/// any other: for cases whose containers mount volumes.
pub(crate) fn resource_step() -> impl Strategy<Value = Step> {
    let idx = 0..IDS.len();
    prop_oneof![
        12 => step(),
        1 => (idx.clone(), 0..4u8).prop_map(|(i, a)| Step::Exec(i, a)),
        1 => (idx.clone(), 0..3u8, any::<bool>()).prop_map(|(i, s, lost)| Step::ExecEnds(i, s, lost)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, p)| Step::Commit(i, p)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, h)| Step::Copy(i, h)),
        1 => (0..8u8).prop_map(Step::Volume),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::RemoveVolumes(i, f)),
    ]
}

/// Steps around relists: what happens between a relist being asked for and
/// its listing arriving (answers, lost answers, events lost, shims dying,
/// pauses, streams breaking), on one container, in short cases, so that
/// the races the relist rules exist for are common rather than rare. The
/// container is `c0` (on the bridge network: its attachment races too) or
/// `c1` (no network).
pub(crate) fn relist_race_step(container: usize) -> impl Strategy<Value = Step> {
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
pub(crate) fn enabled(step: &Step, swarm: u8) -> bool {
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

/// A health check for containers whose argument has bit 5 set; its
/// interval, retries and start period spread by the higher bits.
pub(crate) fn health_check(n: u8) -> Option<HealthConfig> {
    (n & 0x20 != 0).then(|| HealthConfig {
        test: vec!["CMD".into(), "true".into()],
        interval: Some(Duration::from_secs(1 + u64::from(n >> 6))),
        timeout: Some(Duration::from_secs(1)),
        start_period: (n & 0x40 != 0).then(|| Duration::from_secs(3)),
        start_interval: Some(Duration::from_millis(500)),
        retries: Some(u32::from(n >> 6)),
    })
}

pub(crate) fn restart_policy(n: u8) -> RestartPolicy {
    match n % 4 {
        0 => RestartPolicy::No,
        1 => RestartPolicy::Always,
        2 => RestartPolicy::UnlessStopped,
        _ => RestartPolicy::OnFailure { max_retries: 2 },
    }
}

/// Stop signals a container or its image may configure.
pub(crate) const STOP_SIGNALS: [Option<u32>; 4] = [None, Some(2), Some(3), Some(9)];

pub(crate) fn stop_signal(n: u8) -> Option<Signal> {
    STOP_SIGNALS[usize::from(n % 4)].and_then(|n| Signal::try_from(n).ok())
}
