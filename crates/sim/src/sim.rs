//! One simulated world: the core (as holdfastd runs it), the fake
//! containerd, users, and faults, on a virtual clock. Every step advances the
//! clock to the earliest pending thing and feeds the core one input; the
//! invariants are checked after every step.
//!
//! Here: the run (a safety phase, then a liveness phase that must
//! converge), the queue of scheduled things and the faults injected. Its
//! rooms, in `sim/`: holdfastd's stand-in (`daemon.rs`), the calls to
//! containerd and their faults (`transport.rs`), the event bus
//! (`events.rs`), the processes in the tasks (`processes.rs`) and the user
//! workload (`users.rs`).

use crate::check::Checker;
use crate::faults::{FaultCounts, FaultKind, Profile};
use crate::model::Containerd;
use crate::rng::Rng;
use crate::trace::{Trace, TraceItem};
use holdfast_core::{
    ConnectionFact, ContainerId, ContainerdEvent, Core, CoreConfig, Failure, FailureKind, Input,
    Instant, OpId, ProbeResult, Record, WallTime,
};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

mod daemon;
mod events;
mod processes;
mod transport;
mod users;

use transport::{PendingCall, WorldCall};
pub use users::UserOp;
pub(crate) use users::user_kind;

/// The wall clock at simulated time zero.
const WALL_ZERO_NANOS: i64 = 1_700_000_000_000_000_000;

/// How long a converged world must stay converged when nothing in it
/// changes: a view that flips back by itself was not the truth.
const QUIET_PERIOD: Duration = Duration::from_secs(20);

pub fn wall(at: Instant) -> WallTime {
    WallTime::from_unix_nanos(
        WALL_ZERO_NANOS.saturating_add(i64::try_from(at.as_nanos()).unwrap_or(i64::MAX)),
    )
}

/// How one run is set up.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub core_config: CoreConfig,
    /// Length of the safety phase (faults on), simulated.
    pub safety: Duration,
    /// Bound on converging once faults are healed, simulated.
    pub liveness_bound: Duration,
    /// Bound on steps, against a livelock.
    pub max_steps: u64,
    /// Hash every action (for the determinism mode).
    pub hash_trace: bool,
    /// How many trace lines a failure shows.
    pub trace_len: usize,
    /// Print the trace kept at the end of a run that passed, too.
    pub print_trace: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            core_config: CoreConfig {
                // A create's call of the fake containerd is answered, and
                // a lost one takes effect if at all, within this.
                create_run_on: crate::check::CREATE_ANSWER_MAX,
                ..CoreConfig::default()
            },
            safety: Duration::from_secs(300),
            // An exit lost on a live stream waits for the periodic relist
            // (300 s), then a policy restart for its backoff (60 s at most).
            liveness_bound: Duration::from_secs(420),
            max_steps: 2_000_000,
            hash_trace: false,
            trace_len: 60,
            print_trace: false,
        }
    }
}

/// What one run did.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    pub seed: u64,
    pub steps: u64,
    pub sim_time: Duration,
    pub faults: FaultCounts,
    pub checks: u64,
    pub requests: u64,
    pub containers: u64,
    pub trace_hash: u64,
    /// Simulated time from healing to convergence, policy restarts done.
    pub converged_after: Duration,
    /// Simulated time from healing to a true view (a restart policy may
    /// still be waiting out its backoff).
    pub truth_after: Option<Duration>,
}

/// A run that broke an invariant (or did not converge).
#[derive(Clone, Debug)]
pub struct SimFailure {
    pub seed: u64,
    pub at: Instant,
    pub message: String,
    pub trace: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "simulation failed at {:?}: {}", self.at, self.message)?;
        writeln!(f, "--- last steps (oldest first) ---")?;
        f.write_str(&self.trace)?;
        write!(f, "reproduce with SIM_SEED={}", self.seed)
    }
}

impl std::error::Error for SimFailure {}

/// One scripted step (from fuzz bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Let this many milliseconds pass before the next transition.
    Advance(u32),
    User(UserOp),
    /// Inject a fault now; per-call and per-event kinds arm the next one.
    Fault(FaultKind, u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Safety,
    Liveness { healed_at: Instant },
}

#[derive(Clone, Debug)]
enum Ev {
    CallArrive {
        key: (u64, OpId),
        generation: u32,
    },
    CallReply {
        key: (u64, OpId),
        generation: u32,
    },
    StreamBroken {
        daemon: u64,
        op: OpId,
    },
    /// The adapter asks containerd for its version after a stream broke.
    Probe {
        daemon: u64,
    },
    Deliver {
        target: Option<(u64, OpId)>,
        event: ContainerdEvent,
    },
    ProcessExit {
        pid: u32,
        status: u32,
        oom: bool,
    },
    ShimPublish {
        pid: u32,
        event: ContainerdEvent,
        exited: Instant,
        attempt: usize,
    },
    ExecStart {
        container: ContainerId,
        init_pid: u32,
    },
    ExecExit {
        container: ContainerId,
        pid: u32,
        status: u32,
    },
    /// A user's exec (one the core started) ends.
    UserExecExit {
        container: ContainerId,
        exec_id: String,
        pid: u32,
        status: u32,
    },
    /// The users are done with their copies (healed: they go quiet).
    ReleaseHolds,
    /// A health probe the core asked for reports back.
    ProbeDone {
        daemon: u64,
        result: ProbeResult,
    },
    ContainerdRestart,
    DaemonRestart,
    Fault(FaultKind),
    User,
    Script(usize),
}

#[derive(Debug)]
pub struct Sim {
    seed: u64,
    opts: SimOptions,
    profile: Profile,
    now: Instant,
    seq: u64,
    queue: BTreeMap<(Instant, u64), Ev>,
    rng_world: Rng,
    rng_user: Rng,
    rng_fault: Rng,
    /// Health probes' durations and outcomes: a stream of its own, so that
    /// the rest of a seed's world is the same with or without them.
    rng_probe: Rng,
    cd: Containerd,
    net: crate::model::HostNetwork,
    core: Option<Core>,
    /// Incarnation of holdfastd; op ids restart with each.
    daemon: u64,
    /// The live event stream of the current daemon.
    stream: Option<OpId>,
    calls: BTreeMap<(u64, OpId), PendingCall>,
    records: BTreeMap<ContainerId, Record>,
    volume_records: BTreeMap<String, holdfast_core::VolumeRecord>,
    network_records: BTreeMap<String, holdfast_core::NetworkRecord>,
    vols: crate::model::HostVolumes,
    ids: Vec<ContainerId>,
    /// The users' copies holding a container's mounted snapshot (each
    /// answered a mount), released one at a time, all once healed, and
    /// gone with the connection when holdfastd dies.
    holds: Vec<ContainerId>,
    mounts_asked: BTreeMap<holdfast_core::RequestId, ContainerId>,
    /// The last `docker pause` asked of each container (not undone by an
    /// `unpause` answered after it): a container may be frozen only then.
    pause_asked: BTreeMap<ContainerId, holdfast_core::RequestId>,
    unpauses_asked: BTreeMap<holdfast_core::RequestId, ContainerId>,
    resizes_asked: BTreeMap<holdfast_core::RequestId, (ContainerId, String)>,
    /// Requests answered so far (by this daemon): a start of an exec not
    /// answered at once was accepted.
    answered_now: std::collections::BTreeSet<holdfast_core::RequestId>,
    /// Execs whose start the core accepted.
    exec_starts: BTreeMap<holdfast_core::RequestId, (ContainerId, String)>,
    /// The processes' own execs (not the users') still running, by pid:
    /// an OOM kill of their cgroup ends them with it.
    background_execs: BTreeMap<u32, ContainerId>,
    /// What each prune of volumes must remove, by the core's records
    /// when it was asked (Ready, named by no container).
    prunes_asked: BTreeMap<holdfast_core::RequestId, Vec<String>>,
    /// `rm -v` asked, by request: the container's volume mounts then.
    rm_v_asked: BTreeMap<holdfast_core::RequestId, (ContainerId, Vec<holdfast_core::BindMount>)>,
    /// Containers made through the CRI (a pod's): the users change them
    /// through the CRI, and now and then try the Docker API first.
    pod_containers: std::collections::BTreeSet<ContainerId>,
    /// The last pod sandbox the users made: the next pod container's.
    last_sandbox: Option<ContainerId>,
    /// Commands the core must refuse at once with nothing changed (a
    /// Docker API change of a pod's container, a pod's stop while one of
    /// its containers is being made): the container, as it was.
    refusals_owed: BTreeMap<holdfast_core::RequestId, (ContainerId, Option<holdfast_core::Record>)>,
    /// Volumes a user asked to remove (rm, prune) at some point.
    volume_removals_asked: std::collections::BTreeSet<String>,
    /// Volumes whose removal was recorded (and not made anew since).
    doomed_volumes: std::collections::BTreeSet<String>,
    /// The last exec a user made, for a resize.
    last_exec: Option<(ContainerId, String)>,
    /// The container whose exec's end the input being fed tells (an
    /// exec's state read from containerd).
    exec_news: Option<ContainerId>,
    /// An invariant broken where no step's check returns (a call carried
    /// out in the world): reported by the next check.
    violation: Option<String>,
    next_req: u64,
    next_container: u64,
    phase: Phase,
    script: Vec<(Instant, Transition)>,
    armed: BTreeMap<FaultKind, u32>,
    checker: Checker,
    trace: Trace,
    stats: RunStats,
    hash: u64,
    last_step_at: Instant,
    steps_at_instant: u64,
    /// A relist's parts are being fed: its call is still open for the core.
    mid_relist: bool,
    /// What the adapter last saw of containerd's reachability: `None`
    /// before any answer, then whether the last call reached it. The
    /// adapter reports each change as a connection fact.
    reachable: Option<bool>,
    /// For the relist invariant, as the core counts it: the newest op id
    /// when each container's last call was issued or answered, and the
    /// container of each call not answered yet (this daemon's).
    activity: BTreeMap<ContainerId, u64>,
    in_flight_for: BTreeMap<OpId, ContainerId>,
    last_op: u64,
    /// Since when the liveness phase has been converged, if it is.
    converged_since: Option<Instant>,
    ever_converged: bool,
    /// The last time something happened in the world by itself (a
    /// process exit, containerd or holdfastd coming back).
    world_changed_at: Instant,
}

/// Runs one seed: its own fault profile, a safety phase, then a liveness phase.
pub fn run_seed(seed: u64, opts: &SimOptions) -> Result<RunStats, SimFailure> {
    let mut rng = Rng::new(seed);
    let mut profile = Profile::draw(&mut rng);
    // Drawn apart from the seed's stream, so that adding it left every
    // other draw of every seed as it was.
    profile.frozen_holds_kill = Rng::new(seed ^ 0x6672_6565_7a65).chance(500);
    let mut sim = Sim::new(seed, opts.clone(), profile, rng);
    sim.run()
}

/// Runs a scripted sequence of transitions (the fuzz entry), then heals and
/// checks liveness. `seed` drives what the script leaves open (latencies,
/// process behaviour).
pub fn run_script(
    seed: u64,
    transitions: &[Transition],
    opts: &SimOptions,
) -> Result<RunStats, SimFailure> {
    let rng = Rng::new(seed);
    let profile = Profile {
        outage_max: Duration::from_secs(30),
        containers_max: 8,
        ignore_term_permille: 400,
        immortal_permille: 400,
        oom_permille: 100,
        exec_permille: 300,
        ..Profile::default()
    };
    let mut opts = opts.clone();
    // The daemon connects first; the script starts a second in.
    let mut at = Instant::ZERO + Duration::from_secs(1);
    let mut script = Vec::with_capacity(transitions.len());
    for t in transitions {
        if let Transition::Advance(ms) = t {
            at = at + Duration::from_millis(u64::from(*ms));
        } else {
            script.push((at, *t));
        }
    }
    opts.safety = at.saturating_since(Instant::ZERO) + Duration::from_secs(1);
    let mut sim = Sim::new(seed, opts, profile, rng);
    sim.script = script;
    sim.run()
}

impl Sim {
    fn new(seed: u64, opts: SimOptions, profile: Profile, mut rng: Rng) -> Sim {
        let trace = Trace::new(opts.trace_len);
        let frozen_holds_kill = profile.frozen_holds_kill;
        Sim {
            seed,
            profile,
            now: Instant::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            rng_world: rng.fork(),
            rng_user: rng.fork(),
            rng_fault: rng.fork(),
            rng_probe: Rng::new(seed ^ 0x6865_616c_7468),
            cd: {
                let mut cd = Containerd::new();
                cd.frozen_holds_kill = frozen_holds_kill;
                cd
            },
            net: crate::model::HostNetwork::with_networks(&["app", "side0", "side1"]),
            core: None,
            daemon: 0,
            stream: None,
            calls: BTreeMap::new(),
            records: BTreeMap::new(),
            volume_records: BTreeMap::new(),
            network_records: BTreeMap::new(),
            vols: crate::model::HostVolumes::default(),
            ids: Vec::new(),
            holds: Vec::new(),
            mounts_asked: BTreeMap::new(),
            pause_asked: BTreeMap::new(),
            unpauses_asked: BTreeMap::new(),
            resizes_asked: BTreeMap::new(),
            answered_now: std::collections::BTreeSet::new(),
            exec_starts: BTreeMap::new(),
            background_execs: BTreeMap::new(),
            doomed_volumes: std::collections::BTreeSet::new(),
            prunes_asked: BTreeMap::new(),
            rm_v_asked: BTreeMap::new(),
            pod_containers: std::collections::BTreeSet::new(),
            last_sandbox: None,
            refusals_owed: BTreeMap::new(),
            volume_removals_asked: std::collections::BTreeSet::new(),
            last_exec: None,
            exec_news: None,
            violation: None,
            next_req: 0,
            next_container: 0,
            phase: Phase::Safety,
            script: Vec::new(),
            armed: BTreeMap::new(),
            checker: Checker::new(opts.core_config.clone()),
            trace,
            stats: RunStats {
                seed,
                ..RunStats::default()
            },
            hash: 0xcbf2_9ce4_8422_2325,
            last_step_at: Instant::ZERO,
            steps_at_instant: 0,
            mid_relist: false,
            reachable: None,
            activity: BTreeMap::new(),
            in_flight_for: BTreeMap::new(),
            last_op: 0,
            converged_since: None,
            ever_converged: false,
            world_changed_at: Instant::ZERO,
            opts,
        }
    }

    fn run(&mut self) -> Result<RunStats, SimFailure> {
        self.start_daemon();
        for kind in FaultKind::ALL {
            self.schedule_fault(kind);
        }
        if let Some(every) = self.profile.user_every {
            let at = self.now + self.rng_user.ms(0, ms_of(every));
            self.schedule(at, Ev::User);
        }
        for i in 0..self.script.len() {
            let at = self.script[i].0;
            self.schedule(at, Ev::Script(i));
        }
        let safety_end = Instant::ZERO + self.opts.safety;
        let hard_end = safety_end + self.opts.liveness_bound;
        loop {
            if self.stats.steps > self.opts.max_steps {
                return Err(self.failure(format!(
                    "more than {} steps: livelock?",
                    self.opts.max_steps
                )));
            }
            let core_next = self
                .core
                .as_ref()
                .and_then(Core::poll_timeout)
                .map(|(at, _)| at);
            let queue_next = self.queue.first_key_value().map(|((at, _), _)| *at);
            let next = match (core_next, queue_next) {
                (Some(c), Some(q)) => c.min(q),
                (Some(c), None) => c,
                (None, Some(q)) => q,
                (None, None) => hard_end,
            };
            if self.phase == Phase::Safety && next >= safety_end {
                self.now = self.now.max(safety_end);
                self.heal()?;
                continue;
            }
            if let Phase::Liveness { healed_at } = self.phase {
                let pending = self.pending_calls();
                let core = self.core.as_ref();
                if self.stats.truth_after.is_none()
                    && self
                        .checker
                        .converged(core, &self.cd, pending, true)
                        .is_none()
                {
                    self.stats.truth_after = Some(self.now.saturating_since(healed_at));
                }
                let why = self
                    .checker
                    .converged(core, &self.cd, pending, false)
                    .or_else(|| crate::check::network_converged(&self.cd, &self.net))
                    .or_else(|| {
                        crate::check::resources::resources_converged(
                            &self.cd,
                            &self.vols,
                            &self.stored(),
                            &self.pause_asked,
                        )
                    })
                    .or_else(|| crate::check::resources::exec_starts_done(core, &self.exec_starts))
                    .or_else(|| {
                        crate::check::resources::removals_done(&self.vols, &self.doomed_volumes)
                    });
                // A call the core still makes (a periodic relist, the retry
                // of a delete whose answer was lost) is no change of view.
                let busy = why.as_ref().is_some_and(|w| w.contains("calls in flight"));
                match (why, self.converged_since) {
                    (None, None) => {
                        if !self.ever_converged {
                            self.ever_converged = true;
                            self.stats.converged_after = self.now.saturating_since(healed_at);
                        }
                        self.converged_since = Some(self.now);
                        if next >= self.now + QUIET_PERIOD || next >= hard_end {
                            break;
                        }
                    }
                    // Converged, and it stayed so for the quiet period (or
                    // the run's time is up): done.
                    (None, Some(since)) => {
                        if next >= since + QUIET_PERIOD || next >= hard_end {
                            break;
                        }
                    }
                    (Some(_), Some(_)) if busy => {
                        if next >= hard_end {
                            break;
                        }
                    }
                    (Some(why), Some(since)) => {
                        if self.world_changed_at < since {
                            return Err(self.failure(format!(
                                "converged at {since:?}, then no more although nothing changed in the world: {why}"
                            )));
                        }
                        // The world moved on (a process exited): converge again.
                        self.converged_since = None;
                        if next >= hard_end {
                            break;
                        }
                    }
                    (Some(why), None) => {
                        if next >= hard_end && !self.ever_converged {
                            self.now = self.now.max(hard_end);
                            return Err(self.failure(format!(
                                "no convergence within {:?} of healing: {why}",
                                self.opts.liveness_bound
                            )));
                        }
                        if next >= hard_end {
                            break;
                        }
                    }
                }
            }
            self.now = self.now.max(next);
            self.livelock_guard()?;
            if core_next.is_some_and(|c| Some(c) <= queue_next || queue_next.is_none()) {
                self.feed(Input::Timeout)?;
                continue;
            }
            let Some(((_, _), ev)) = self.queue.pop_first() else {
                continue;
            };
            self.handle(ev)?;
        }
        if self.opts.print_trace {
            eprint!("{}", self.trace.render());
        }
        self.stats.sim_time = self.now.saturating_since(Instant::ZERO);
        self.stats.trace_hash = self.hash;
        self.stats.checks = self.checker.checks;
        self.stats.requests = self.next_req;
        self.stats.containers = self.next_container;
        Ok(self.stats.clone())
    }

    fn livelock_guard(&mut self) -> Result<(), SimFailure> {
        if self.now == self.last_step_at {
            self.steps_at_instant += 1;
            if self.steps_at_instant > 100_000 {
                return Err(
                    self.failure("more than 100000 steps at one instant: livelock".to_owned())
                );
            }
        } else {
            self.last_step_at = self.now;
            self.steps_at_instant = 0;
        }
        Ok(())
    }

    fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    fn schedule_fault(&mut self, kind: FaultKind) {
        if self.phase != Phase::Safety {
            return;
        }
        if let Some(every) = self.profile.every(kind) {
            let at = self.now + self.rng_fault.ms(0, 2 * ms_of(every));
            self.schedule(at, Ev::Fault(kind));
        }
    }

    fn failure(&self, message: String) -> SimFailure {
        SimFailure {
            seed: self.seed,
            at: self.now,
            message,
            trace: self.trace.render(),
        }
    }

    fn note(&mut self, text: impl Into<String>) {
        self.trace.push(self.now, TraceItem::Note(text.into()));
    }

    /// What the store holds now.
    fn stored(&self) -> crate::check::resources::Stored<'_> {
        crate::check::resources::Stored {
            containers: &self.records,
            volumes: &self.volume_records,
        }
    }

    /// A volume call carried out in the world; a removal only when no
    /// container's record names the volume.
    fn carry_out_volume(
        &mut self,
        call: &holdfast_core::VolumeCall,
    ) -> Result<holdfast_core::Done, Failure> {
        if let holdfast_core::VolumeCall::Remove { name } = call
            && let Err(message) = crate::check::resources::volume_removal(name, &self.stored())
        {
            self.violation.get_or_insert(message);
        }
        self.vols.carry_out(call)
    }

    fn pending_calls(&self) -> usize {
        let open = self
            .calls
            .iter()
            .filter(|((d, _), c)| *d == self.daemon && !c.orphan)
            .count();
        open + usize::from(self.mid_relist)
    }

    /// Faults off, users quiet; containerd and holdfastd come back (their
    /// restarts are already scheduled).
    fn heal(&mut self) -> Result<(), SimFailure> {
        self.phase = Phase::Liveness {
            healed_at: self.now,
        };
        self.profile = Profile {
            outage_max: self.profile.outage_max,
            ..Profile::default()
        };
        self.armed.clear();
        self.queue
            .retain(|_, ev| !matches!(ev, Ev::Fault(_) | Ev::User | Ev::Script(_)));
        self.schedule(self.now, Ev::ReleaseHolds);
        self.note("healed: faults off, users quiet");
        // What only containerd's restart clears (a bundle a cut create
        // left behind) is cleared as its user would: the start's error
        // says so, and the operator restarts containerd.
        if !self.cd.leftovers.is_empty() {
            self.note("containerd restarted by its operator: it holds leftovers");
            self.fault(FaultKind::ContainerdCrash, 0)?;
        }
        Ok(())
    }

    // ---- scheduled things ----

    fn handle(&mut self, ev: Ev) -> Result<(), SimFailure> {
        match ev {
            Ev::CallArrive { key, generation } => {
                self.call_arrive(key, generation);
                Ok(())
            }
            Ev::CallReply { key, generation } => self.call_reply(key, generation),
            Ev::StreamBroken { daemon, op } => {
                if daemon != self.daemon {
                    return Ok(());
                }
                self.feed(Input::Connection(ConnectionFact::StreamBroken(
                    op,
                    "error reading from server: EOF".into(),
                )))?;
                let at = self.now + self.rng_world.ms(0, 3);
                self.schedule(at, Ev::Probe { daemon });
                Ok(())
            }
            Ev::Probe { daemon } => {
                if daemon != self.daemon {
                    return Ok(());
                }
                if self.cd.up {
                    self.note_reachable()
                } else {
                    self.note_unreachable("connection refused")
                }
            }
            Ev::Deliver { target, event } => self.deliver(target, event),
            Ev::ProcessExit { pid, status, oom } => {
                self.process_exit(pid, status, oom);
                Ok(())
            }
            Ev::ShimPublish {
                pid,
                event,
                exited,
                attempt,
            } => {
                self.shim_publish(pid, event, exited, attempt);
                Ok(())
            }
            Ev::ExecStart {
                container,
                init_pid,
            } => {
                self.exec_start(container, init_pid);
                Ok(())
            }
            Ev::ExecExit {
                container,
                pid,
                status,
            } => {
                self.exec_exit(container, pid, status);
                Ok(())
            }
            Ev::UserExecExit {
                container,
                exec_id,
                pid,
                status,
            } => {
                self.user_exec_exit(container, exec_id, pid, status);
                Ok(())
            }
            Ev::ReleaseHolds => self.release_holds(),
            Ev::ProbeDone { daemon, result } => {
                if daemon != self.daemon {
                    return Ok(());
                }
                self.feed(Input::ProbeResult(result))
            }
            Ev::ContainerdRestart => {
                self.world_changed_at = self.now;
                self.cd.up = true;
                self.cd.leftovers.clear();
                self.note("containerd is back");
                Ok(())
            }
            Ev::DaemonRestart => {
                self.world_changed_at = self.now;
                if self.core.is_none() {
                    self.start_daemon();
                }
                self.check()
            }
            Ev::Fault(kind) => {
                let arg = u8::try_from(self.rng_fault.below(256)).unwrap_or(0);
                self.fault(kind, arg)?;
                self.schedule_fault(kind);
                Ok(())
            }
            Ev::User => {
                let op = self.random_user_op();
                self.user(op)?;
                if let Some(every) = self.profile.user_every {
                    let at = self.now + self.rng_user.ms(0, 2 * ms_of(every));
                    self.schedule(at, Ev::User);
                }
                Ok(())
            }
            Ev::Script(i) => {
                let Some((_, t)) = self.script.get(i).copied() else {
                    return Ok(());
                };
                match t {
                    Transition::Advance(_) => Ok(()),
                    Transition::User(op) => self.user(op),
                    Transition::Fault(kind, arg) => self.fault(kind, arg),
                }
            }
        }
    }

    fn fault(&mut self, kind: FaultKind, arg: u8) -> Result<(), SimFailure> {
        match kind {
            FaultKind::StreamBreak => {
                let Some(op) = self.stream.take() else {
                    return Ok(());
                };
                self.stats.faults.add(kind);
                self.note(format!("FAULT stream {op} breaks"));
                let daemon = self.daemon;
                self.schedule(self.now, Ev::StreamBroken { daemon, op });
            }
            FaultKind::ContainerdCrash => {
                if !self.cd.up {
                    return Ok(());
                }
                self.stats.faults.add(kind);
                self.cd.up = false;
                let outage_ms = ms_of(self.profile.outage_max).max(100);
                let outage = Duration::from_millis(50 + u64::from(arg) * outage_ms / 255);
                self.note(format!("FAULT containerd killed; back in {outage:?}"));
                let daemon = self.daemon;
                if let Some(op) = self.stream.take() {
                    let at = self.now + self.rng_world.ms(0, 2);
                    self.schedule(at, Ev::StreamBroken { daemon, op });
                }
                let keys: Vec<(u64, OpId)> = self.calls.keys().copied().collect();
                for key in keys {
                    let Some(p) = self.calls.get_mut(&key) else {
                        continue;
                    };
                    if p.orphan {
                        self.calls.remove(&key);
                        continue;
                    }
                    if p.call.is_network() {
                        continue;
                    }
                    p.generation += 1;
                    p.result = Some(Err(Failure::new(
                        FailureKind::Unavailable,
                        "transport is closing",
                    )));
                    p.relist = None;
                    p.relist_breaks = false;
                    p.reply_fixed = true;
                    let generation = p.generation;
                    let at = self.now + self.rng_world.ms(0, 2);
                    self.schedule(at, Ev::CallReply { key, generation });
                }
                self.schedule(self.now + outage, Ev::ContainerdRestart);
            }
            FaultKind::ShimDeath => {
                let n = u64::try_from(self.cd.tasks.len()).unwrap_or(0);
                if n == 0 {
                    return Ok(());
                }
                let i = usize::try_from(u64::from(arg) % n).unwrap_or(0);
                let Some(id) = self.cd.tasks.keys().nth(i).cloned() else {
                    return Ok(());
                };
                if let Some((pid, events)) = self.cd.shim_dies(&id, wall(self.now)) {
                    self.stats.faults.add(kind);
                    self.note(format!("FAULT shim of {id} (pid {pid}) dies"));
                    // containerd cleans up after the dead shim (when it is up).
                    for event in events {
                        self.publish(event);
                    }
                }
            }
            FaultKind::DaemonCrash => self.crash_daemon(),
            FaultKind::RpcUnavailable
            | FaultKind::RpcDeadline
            | FaultKind::EventDuplicate
            | FaultKind::EventReorder
            | FaultKind::EventStale
            | FaultKind::RpcRefused
            | FaultKind::EventLost
            | FaultKind::ExitReportedAgain
            | FaultKind::OomLate
            | FaultKind::PidReuse => {
                *self.armed.entry(kind).or_insert(0) += 1;
            }
        }
        Ok(())
    }
}

pub(crate) fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
