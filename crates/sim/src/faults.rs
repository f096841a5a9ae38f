//! What can go wrong, and how often: a fault profile drawn from the seed, so
//! each seed explores its own mix ("swarm testing"). Some seeds have no
//! faults of a kind at all, which is what lets the others show up.

use crate::rng::Rng;
use std::fmt;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// The event stream breaks; containerd stays up.
    StreamBreak,
    /// containerd is killed and restarted later; tasks survive.
    ContainerdCrash,
    /// A call fails with Unavailable without taking effect.
    RpcUnavailable,
    /// A call gets no answer within the deadline; it may have taken effect.
    RpcDeadline,
    /// An event is delivered twice.
    EventDuplicate,
    /// An event is delivered late, after events published after it.
    EventReorder,
    /// An old event is delivered again much later.
    EventStale,
    /// A shim dies: its task vanishes from containerd.
    ShimDeath,
    /// holdfastd itself crashes and restarts from its records.
    DaemonCrash,
    /// containerd refuses a call without doing it, with an answer it can
    /// give for that call (Other, Invalid, NotFound and AlreadyExists on
    /// create, FailedPrecondition).
    RpcRefused,
    /// An event is lost on a live stream: only a relist (the periodic one,
    /// if nothing else happens) learns what it said.
    EventLost,
    /// After an exit was recorded, a second, different report of it comes
    /// (another status and time for the same pid, as a second source gives).
    ExitReportedAgain,
    /// An OOM event comes after the exit of the process it killed.
    OomLate,
    /// A new task gets a pid an earlier, deleted task had.
    PidReuse,
}

impl FaultKind {
    pub const ALL: [FaultKind; 14] = [
        FaultKind::StreamBreak,
        FaultKind::ContainerdCrash,
        FaultKind::RpcUnavailable,
        FaultKind::RpcDeadline,
        FaultKind::EventDuplicate,
        FaultKind::EventReorder,
        FaultKind::EventStale,
        FaultKind::ShimDeath,
        FaultKind::DaemonCrash,
        FaultKind::RpcRefused,
        FaultKind::EventLost,
        FaultKind::ExitReportedAgain,
        FaultKind::OomLate,
        FaultKind::PidReuse,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::StreamBreak => "stream_break",
            FaultKind::ContainerdCrash => "containerd_crash",
            FaultKind::RpcUnavailable => "rpc_unavailable",
            FaultKind::RpcDeadline => "rpc_deadline",
            FaultKind::EventDuplicate => "event_duplicate",
            FaultKind::EventReorder => "event_reorder",
            FaultKind::EventStale => "event_stale",
            FaultKind::ShimDeath => "shim_death",
            FaultKind::DaemonCrash => "daemon_crash",
            FaultKind::RpcRefused => "rpc_refused",
            FaultKind::EventLost => "event_lost",
            FaultKind::ExitReportedAgain => "exit_reported_again",
            FaultKind::OomLate => "oom_late",
            FaultKind::PidReuse => "pid_reuse",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many faults of each kind were injected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts(pub [u64; 14]);

impl FaultCounts {
    pub fn add(&mut self, kind: FaultKind) {
        self.0[kind.index()] += 1;
    }

    pub fn merge(&mut self, other: &FaultCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a += b;
        }
    }

    pub fn get(&self, kind: FaultKind) -> u64 {
        self.0[kind.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

/// The seed's fault and workload profile.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Mean time between faults of the periodic kinds; `None`: never.
    pub stream_break_every: Option<Duration>,
    pub containerd_crash_every: Option<Duration>,
    pub outage_max: Duration,
    pub shim_death_every: Option<Duration>,
    pub daemon_crash_every: Option<Duration>,
    /// Per call or per event, in per mille.
    pub rpc_unavailable_permille: u32,
    pub rpc_deadline_permille: u32,
    pub event_duplicate_permille: u32,
    pub event_reorder_permille: u32,
    pub event_stale_permille: u32,
    pub rpc_refused_permille: u32,
    pub event_lost_permille: u32,
    pub exit_reported_again_permille: u32,
    pub oom_late_permille: u32,
    pub pid_reuse_permille: u32,
    /// Mean time between user commands; `None`: no random users.
    pub user_every: Option<Duration>,
    pub containers_max: usize,
    /// Share of processes that ignore SIGTERM (PID 1 without a handler).
    pub ignore_term_permille: u32,
    /// Share of processes that never exit by themselves.
    pub immortal_permille: u32,
    pub oom_permille: u32,
    pub exec_permille: u32,
    /// A cgroup v1 freezer: a frozen process acts on no signal, SIGKILL
    /// included, until thawed (under v2 SIGKILL ends it at once).
    pub frozen_holds_kill: bool,
}

impl Profile {
    /// Draws a profile: each fault kind is on or off, and when on, at a rate.
    pub fn draw(rng: &mut Rng) -> Profile {
        let every = |rng: &mut Rng, lo_s: u64, hi_s: u64| {
            rng.chance(500).then(|| rng.ms(lo_s * 1000, hi_s * 1000))
        };
        let stream_break_every = every(rng, 5, 120);
        let containerd_crash_every = every(rng, 15, 200);
        let shim_death_every = every(rng, 20, 300);
        let daemon_crash_every = every(rng, 20, 300);
        let permille = |rng: &mut Rng, hi: u64| {
            if rng.chance(500) {
                u32::try_from(5 + rng.below(hi)).unwrap_or(0)
            } else {
                0
            }
        };
        Profile {
            stream_break_every,
            containerd_crash_every,
            outage_max: rng.pick(&[
                Duration::from_secs(2),
                Duration::from_secs(15),
                Duration::from_secs(40),
            ]),
            shim_death_every,
            daemon_crash_every,
            rpc_unavailable_permille: permille(rng, 100),
            rpc_deadline_permille: permille(rng, 60),
            event_duplicate_permille: permille(rng, 200),
            event_reorder_permille: permille(rng, 200),
            event_stale_permille: permille(rng, 60),
            user_every: Some(rng.ms(200, 5000)),
            containers_max: usize::try_from(1 + rng.below(6)).unwrap_or(1),
            ignore_term_permille: u32::try_from(rng.below(1001)).unwrap_or(0),
            immortal_permille: u32::try_from(rng.below(1001)).unwrap_or(0),
            oom_permille: if rng.chance(300) {
                u32::try_from(rng.below(300)).unwrap_or(0)
            } else {
                0
            },
            exec_permille: u32::try_from(rng.below(1001)).unwrap_or(0),
            rpc_refused_permille: permille(rng, 60),
            event_lost_permille: permille(rng, 30),
            exit_reported_again_permille: permille(rng, 500),
            oom_late_permille: permille(rng, 500),
            pid_reuse_permille: permille(rng, 500),
            // Drawn by `run_seed` apart from this stream.
            frozen_holds_kill: false,
        }
    }

    /// The mean interval of a periodic fault kind.
    pub fn every(&self, kind: FaultKind) -> Option<Duration> {
        match kind {
            FaultKind::StreamBreak => self.stream_break_every,
            FaultKind::ContainerdCrash => self.containerd_crash_every,
            FaultKind::ShimDeath => self.shim_death_every,
            FaultKind::DaemonCrash => self.daemon_crash_every,
            _ => None,
        }
    }

    pub fn permille(&self, kind: FaultKind) -> u32 {
        match kind {
            FaultKind::RpcUnavailable => self.rpc_unavailable_permille,
            FaultKind::RpcDeadline => self.rpc_deadline_permille,
            FaultKind::EventDuplicate => self.event_duplicate_permille,
            FaultKind::EventReorder => self.event_reorder_permille,
            FaultKind::EventStale => self.event_stale_permille,
            FaultKind::RpcRefused => self.rpc_refused_permille,
            FaultKind::EventLost => self.event_lost_permille,
            FaultKind::ExitReportedAgain => self.exit_reported_again_permille,
            FaultKind::OomLate => self.oom_late_permille,
            FaultKind::PidReuse => self.pid_reuse_permille,
            _ => 0,
        }
    }
}
