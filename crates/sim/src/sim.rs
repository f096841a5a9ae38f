//! One simulated world: the core (as holdfastd runs it), the fake
//! containerd, users, and faults, on a virtual clock. Every step advances the
//! clock to the earliest pending thing and feeds the core one input; the
//! invariants are checked after every step.

use crate::check::{Checker, UserKind};
use crate::faults::{FaultCounts, FaultKind, Profile};
use crate::model::{Behavior, Containerd, Effect, OnTerm};
use crate::rng::Rng;
use crate::trace::{Trace, TraceItem};
use holdfast_core::{
    Action, Call, Command, ConnectionFact, ContainerConfig, ContainerId, ContainerdEvent, Core,
    CoreConfig, Done, Failure, FailureKind, HealthConfig, Input, Instant, NetworkCall, NetworkMode,
    Now, OpId, Probe, ProbeOutcome, ProbeResult, Record, RelistPart, RequestId, RestartPolicy,
    Signal, TaskInfo, VolumeCall, WaitCondition, WallTime,
};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The wall clock at simulated time zero.
const WALL_ZERO_NANOS: i64 = 1_700_000_000_000_000_000;

/// How long a converged world must stay converged when nothing in it
/// changes: a view that flips back by itself was not the truth.
const QUIET_PERIOD: Duration = Duration::from_secs(20);

/// When a shim retries publishing an exit while containerd is away; after
/// the last attempt (about 21 s) the event is dropped.
const SHIM_RETRY_SECS: [u64; 6] = [0, 1, 3, 6, 10, 15];

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
            core_config: CoreConfig::default(),
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

/// A user command, by target index (taken modulo the containers created so
/// far), as both the random users and the fuzz decoder produce them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserOp {
    Create {
        policy: u8,
        auto_remove: bool,
        stop_timeout_s: Option<u8>,
        stop_signal: u8,
    },
    Start(u8),
    Stop(u8, Option<u8>),
    Kill(u8, u8),
    Restart(u8),
    Remove(u8, bool),
    Wait(u8, u8),
    /// A record edit: a rename (even argument) or a restart policy update.
    Edit(u8, u8),
    /// `docker pause` (true) or `docker unpause` (false).
    Pause(u8, bool),
}

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

/// A call the core issued, by who carries it out in the world.
#[derive(Clone, Debug)]
enum WorldCall {
    Containerd(Call),
    Network(NetworkCall),
    Volume(VolumeCall),
}

impl WorldCall {
    /// Carried out by the daemon's own executors (network, volumes), not
    /// by containerd: they work through containerd's outages.
    fn is_network(&self) -> bool {
        matches!(self, WorldCall::Network(_) | WorldCall::Volume(_))
    }
}

#[derive(Debug)]
struct PendingCall {
    call: WorldCall,
    generation: u32,
    /// The daemon that issued it crashed: its effect may still land, its
    /// result goes nowhere.
    orphan: bool,
    result: Option<Result<Done, Failure>>,
    relist: Option<Vec<TaskInfo>>,
    /// Deliver part of the relist, then fail it.
    relist_breaks: bool,
    /// The reply is already scheduled (a deadline or an early failure).
    reply_fixed: bool,
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
                self.heal();
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
                    .or_else(|| crate::check::network_converged(&self.cd, &self.net));
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
    fn heal(&mut self) {
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
        self.note("healed: faults off, users quiet");
    }

    // ---- holdfastd ----

    fn start_daemon(&mut self) {
        self.daemon += 1;
        let seed = self.seed ^ self.daemon.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let now = Now::new(self.now, wall(self.now));
        self.core = Some(Core::new(self.opts.core_config.clone(), seed, now));
        self.stream = None;
        self.reachable = None;
        self.activity.clear();
        self.in_flight_for.clear();
        self.last_op = 0;
        self.checker.daemon_started();
        let records: Vec<Record> = self.records.values().cloned().collect();
        self.note(format!(
            "holdfastd #{} starts with {} records",
            self.daemon,
            records.len()
        ));
        let stored = holdfast_core::Stored {
            containers: records,
            volumes: self.volume_records.values().cloned().collect(),
            networks: self.network_records.values().cloned().collect(),
        };
        let networks = self.net.found(wall(self.now));
        let found = self
            .vols
            .dirs
            .keys()
            .map(|name| holdfast_core::FoundVolume {
                name: name.clone(),
                labels: BTreeMap::new(),
                created_at: wall(self.now),
            })
            .collect();
        // A failure here is reported by the next step's checks.
        if self.feed(Input::Restore(stored)).is_ok()
            && self.feed(Input::VolumesFound(found)).is_ok()
        {
            let _ = self.feed(Input::NetworksFound(networks));
        }
    }

    fn crash_daemon(&mut self) {
        if self.core.is_none() {
            return;
        }
        self.stats.faults.add(FaultKind::DaemonCrash);
        self.core = None;
        self.stream = None;
        for (key, call) in self.calls.iter_mut() {
            if key.0 == self.daemon {
                call.orphan = true;
            }
        }
        self.checker.daemon_crashed();
        let down = self.rng_fault.ms(50, 5000);
        self.note(format!("FAULT holdfastd crashes; back in {down:?}"));
        self.schedule(self.now + down, Ev::DaemonRestart);
    }

    fn feed(&mut self, input: Input) -> Result<(), SimFailure> {
        let Some(core) = self.core.as_mut() else {
            return Ok(());
        };
        self.stats.steps += 1;
        let now = Now::new(self.now, wall(self.now));
        self.trace.push(self.now, TraceItem::In(input.clone()));
        // (A user command cut short by a crash is a request the client saw
        // fail; the checker would have to unlearn it, so commands are spared.)
        let is_command = matches!(input, Input::Command(..));
        self.checker.input(&input);
        if let Input::ActionResult(op, _) = &input
            && let Some(id) = self.in_flight_for.remove(op)
        {
            self.activity.insert(id, self.last_op);
        }
        core.handle_input(now, input);
        let actions = core.drain_actions();
        // Now and then holdfastd dies halfway through carrying out what one
        // input asked for: some actions done, the rest never. Persisting
        // before calling is what makes that safe; this is how it is tested.
        let crash_after = (self.profile.daemon_crash_every.is_some()
            && !is_command
            && actions.len() > 1
            && self.rng_fault.chance(2))
        .then(|| usize::try_from(self.rng_fault.below(actions.len() as u64)).unwrap_or(0));
        for (n, action) in actions.into_iter().enumerate() {
            if crash_after == Some(n) {
                self.note(format!(
                    "FAULT holdfastd crashes after {n} of this input's actions"
                ));
                self.crash_daemon();
                return self.check();
            }
            self.action(action)?;
        }
        self.check()
    }

    fn check(&mut self) -> Result<(), SimFailure> {
        let pending = self.pending_calls();
        let result = self
            .checker
            .after_step(self.core.as_ref(), &self.cd, pending, self.now)
            .and_then(|()| {
                self.checker
                    .network(self.core.as_ref(), &self.cd, &self.net, &self.records)
            });
        result.map_err(|message| self.failure(message))
    }

    fn action(&mut self, action: Action) -> Result<(), SimFailure> {
        if self.opts.hash_trace {
            self.hash_action(&action);
        }
        self.trace
            .push(self.now, TraceItem::Out(Box::new(action.clone())));
        let core = self.core.as_ref();
        self.checker
            .action(&action, core, &self.cd, self.now)
            .map_err(|m| self.failure(m))?;
        match action {
            Action::Call { op, call } => {
                self.last_op = self.last_op.max(op.0);
                if let Some(id) = call.container_id() {
                    self.activity.insert(id.clone(), op.0);
                    self.in_flight_for.insert(op, id.clone());
                }
                self.issue(op, WorldCall::Containerd(call))
            }
            Action::Network { op, call } => {
                self.last_op = self.last_op.max(op.0);
                if let Some(id) = call.container_id() {
                    self.activity.insert(id.clone(), op.0);
                    self.in_flight_for.insert(op, id.clone());
                }
                self.issue(op, WorldCall::Network(call))
            }
            Action::Volume { op, call } => {
                self.last_op = self.last_op.max(op.0);
                self.issue(op, WorldCall::Volume(call))
            }
            Action::Persist(rec) => {
                self.records.insert(rec.id.clone(), rec);
            }
            Action::Unpersist(id) => {
                self.records.remove(&id);
            }
            Action::PersistNetwork(rec) => {
                self.network_records.insert(rec.name.clone(), rec);
            }
            Action::UnpersistNetwork(name) => {
                self.network_records.remove(&name);
            }
            Action::PersistVolume(rec) => {
                self.volume_records.insert(rec.name.clone(), rec);
            }
            Action::UnpersistVolume(name) => {
                self.volume_records.remove(&name);
            }
            Action::Answer(..) | Action::Publish(_) => {}
            Action::RunProbe(probe) => self.run_probe(probe),
        }
        Ok(())
    }

    /// Runs a health probe in the world: it passes or fails, times out,
    /// cannot run (its container is gone), or its result is lost or comes
    /// twice.
    fn run_probe(&mut self, probe: Probe) {
        let r = &mut self.rng_probe;
        // (An exec cannot run while containerd is down either.)
        let live = self.cd.up && self.cd.live_pid(&probe.container).is_some();
        let timeout_ms = ms_of(probe.timeout);
        let (took, outcome) = if !live {
            (
                r.ms(0, 50),
                ProbeOutcome::Failed {
                    message: "container is not running".into(),
                },
            )
        } else if r.chance(100) {
            (
                probe.timeout,
                ProbeOutcome::TimedOut {
                    output: String::new(),
                },
            )
        } else {
            let exit_code = r.pick(&[0, 0, 0, 1, 2]);
            (
                r.ms(0, timeout_ms),
                ProbeOutcome::Exited {
                    exit_code,
                    output: format!("probe {}", probe.probe),
                },
            )
        };
        if r.chance(30) {
            self.note(format!("FAULT the result of {probe:?} is lost"));
            return;
        }
        let twice = r.chance(30);
        let result = ProbeResult {
            container: probe.container,
            run: probe.run,
            probe: probe.probe,
            outcome,
        };
        let at = self.now + took;
        let daemon = self.daemon;
        if twice {
            let later = at + self.rng_probe.ms(0, 2000);
            self.schedule(
                later,
                Ev::ProbeDone {
                    daemon,
                    result: result.clone(),
                },
            );
        }
        self.schedule(at, Ev::ProbeDone { daemon, result });
    }

    fn hash_action(&mut self, action: &Action) {
        use fmt::Write;
        struct Fnv<'a>(&'a mut u64);
        impl fmt::Write for Fnv<'_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                for b in s.bytes() {
                    *self.0 ^= u64::from(b);
                    *self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
                }
                Ok(())
            }
        }
        let _ = write!(Fnv(&mut self.hash), "{}|{action:?};", self.now.as_nanos());
    }

    // ---- calls into the fake containerd ----

    fn take_fault(&mut self, kind: FaultKind) -> bool {
        if let Some(n) = self.armed.get_mut(&kind)
            && *n > 0
        {
            *n -= 1;
            self.stats.faults.add(kind);
            return true;
        }
        let hit = self.rng_fault.chance(self.profile.permille(kind));
        if hit {
            self.stats.faults.add(kind);
        }
        hit
    }

    fn issue(&mut self, op: OpId, call: WorldCall) {
        let key = (self.daemon, op);
        let mut pending = PendingCall {
            call,
            generation: 0,
            orphan: false,
            result: None,
            relist: None,
            relist_breaks: false,
            reply_fixed: false,
        };
        let network = pending.call.is_network();
        if !self.cd.up && !network {
            pending.result = Some(Err(Failure::new(
                FailureKind::Unavailable,
                "connection refused",
            )));
            pending.reply_fixed = true;
            self.calls.insert(key, pending);
            self.schedule(self.now, Ev::CallReply { key, generation: 0 });
            return;
        }
        let latency = match &pending.call {
            WorldCall::Containerd(Call::CreateContainer { .. }) => self.rng_world.ms(5, 30),
            WorldCall::Containerd(Call::CreateTask { .. }) => self.rng_world.ms(35, 58),
            WorldCall::Containerd(Call::StartTask { .. }) => self.rng_world.ms(6, 9),
            WorldCall::Network(NetworkCall::Setup { .. } | NetworkCall::EndpointSetup { .. }) => {
                self.rng_world.ms(20, 60)
            }
            // A busy containerd lists slowly now and then: calls made and
            // answered meanwhile overtake the listing, and a listing of a
            // connection already given up arrives during the next one's.
            WorldCall::Containerd(Call::Relist) if self.rng_world.chance(150) => {
                self.rng_world.ms(20, 1500)
            }
            _ => self.rng_world.ms(0, 3),
        };
        if !network && self.take_fault(FaultKind::RpcUnavailable) {
            if matches!(pending.call, WorldCall::Containerd(Call::Relist))
                && self.rng_fault.chance(500)
            {
                // Fails midway: part of the list, then the failure.
                pending.relist_breaks = true;
                self.calls.insert(key, pending);
                self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
                return;
            }
            // Half the time the call reached containerd before the
            // connection broke: it takes effect, and the caller only hears
            // that containerd went away.
            let failure = Failure::new(FailureKind::Unavailable, "injected: unavailable");
            self.fail_maybe_after_effect(key, pending, failure, latency);
            let at = self.now + self.rng_world.ms(0, 2);
            self.schedule(at, Ev::CallReply { key, generation: 0 });
            return;
        }
        if self.take_fault(FaultKind::RpcRefused) {
            use FailureKind as K;
            let kinds: &[FailureKind] = match &pending.call {
                WorldCall::Containerd(Call::Subscribe | Call::Relist) => &[K::Other],
                WorldCall::Containerd(Call::CreateContainer { .. }) => &[
                    K::NotFound,
                    K::AlreadyExists,
                    K::Invalid,
                    K::FailedPrecondition,
                    K::Other,
                ],
                WorldCall::Containerd(Call::CreateTask { .. }) => &[
                    K::AlreadyExists,
                    K::Invalid,
                    K::FailedPrecondition,
                    K::Other,
                ],
                // A host port in use; a plugin that fails.
                WorldCall::Network(NetworkCall::Setup { .. }) => &[K::AlreadyExists, K::Other],
                WorldCall::Network(
                    NetworkCall::Teardown { .. } | NetworkCall::EndpointTeardown { .. },
                ) => &[K::Other],
                // An address taken; a network removed meanwhile.
                WorldCall::Network(NetworkCall::EndpointSetup { .. }) => {
                    &[K::AlreadyExists, K::NotFound, K::Other]
                }
                // A subnet that overlaps; a plugin or rule that fails.
                WorldCall::Network(NetworkCall::Define { .. }) => &[K::AlreadyExists, K::Other],
                WorldCall::Network(
                    NetworkCall::Undefine { .. } | NetworkCall::RefreshNames { .. },
                ) => &[K::Other],
                WorldCall::Containerd(_) => &[K::FailedPrecondition, K::Other],
                WorldCall::Volume(_) => &[K::Other],
            };
            let kind = self.rng_fault.pick(kinds);
            pending.result = Some(Err(Failure::new(kind, "injected: refused")));
            pending.reply_fixed = true;
            self.calls.insert(key, pending);
            self.schedule(self.now + latency, Ev::CallReply { key, generation: 0 });
            return;
        }
        if self.take_fault(FaultKind::RpcDeadline) {
            let failure = Failure::new(FailureKind::Deadline, "injected: deadline exceeded");
            self.fail_maybe_after_effect(key, pending, failure, latency);
            let at = self.now + self.rng_fault.ms(2000, 10_000);
            self.schedule(at, Ev::CallReply { key, generation: 0 });
            return;
        }
        self.calls.insert(key, pending);
        self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
    }

    /// An injected failure whose answer is fixed: half the time the call
    /// still takes effect (it reached containerd before the failure), the
    /// caller schedules when the failure is heard.
    fn fail_maybe_after_effect(
        &mut self,
        key: (u64, OpId),
        mut pending: PendingCall,
        failure: Failure,
        latency: Duration,
    ) {
        pending.result = Some(Err(failure));
        pending.reply_fixed = true;
        let takes_effect = self.rng_fault.chance(500);
        self.calls.insert(key, pending);
        if takes_effect {
            self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
        }
    }

    fn call_arrive(&mut self, key: (u64, OpId), generation: u32) {
        let Some(pending) = self.calls.get(&key) else {
            return;
        };
        if pending.generation != generation || (!self.cd.up && !pending.call.is_network()) {
            return;
        }
        let call = pending.call.clone();
        let mut fx = Vec::new();
        let result = match &call {
            WorldCall::Network(net) => self.net.carry_out(net),
            WorldCall::Volume(call) => self.vols.carry_out(call),
            WorldCall::Containerd(call) => match call {
                Call::Subscribe => Ok(Done::Ok),
                Call::Relist => {
                    let list = self.cd.relist();
                    if let Some(p) = self.calls.get_mut(&key) {
                        p.relist = Some(list);
                    }
                    Ok(Done::Ok)
                }
                Call::CreateContainer { id, .. } => self.cd.create_container(id),
                Call::CreateTask { id } => {
                    let reuse = self.pick_reused_pid();
                    self.cd.create_task(id, self.now, reuse, &mut fx)
                }
                Call::StartTask { id } => self.cd.start_task(id, &mut fx),
                Call::Kill { id, signal, .. } => {
                    let kill_delay = self.rng_world.ms(5, 15);
                    self.cd.kill(id, *signal, kill_delay, &mut fx)
                }
                Call::UpdateResources { id, running, .. } => self.cd.update_resources(id, *running),
                Call::Pause { id } => self.cd.pause(id, &mut fx),
                Call::Resume { id } => self.cd.resume(id, &mut fx),
                Call::DeleteTask { id } => self.cd.delete_task(id, &mut fx),
                Call::DeleteContainer { id } => self.cd.delete_container(id),
                Call::StartExec { id, exec_id, .. } => self.cd.start_exec(id, exec_id),
                Call::ExecState { id, exec_id } => self.cd.exec_state(id, exec_id),
                Call::DeleteExec { id, exec_id } => self.cd.delete_exec(id, exec_id),
                Call::ResizePty { id, exec_id, .. } => self.cd.resize(id, exec_id.as_deref()),
                Call::ReadChanges { id, .. }
                | Call::MountRootfs { id }
                | Call::UnmountRootfs { id } => self.cd.snapshot_use(id),
            },
        };
        self.effects(fx);
        let Some(pending) = self.calls.get_mut(&key) else {
            return;
        };
        if pending.reply_fixed {
            return;
        }
        pending.result = Some(result);
        let delay = match call {
            // The first event (our ping) arrives ~23 ms after subscribing.
            WorldCall::Containerd(Call::Subscribe) => self.rng_world.ms(15, 30),
            _ => self.rng_world.ms(0, 2),
        };
        self.schedule(self.now + delay, Ev::CallReply { key, generation });
    }

    /// A pid to hand out again, now and then: one whose exit holdfast has
    /// recorded (or whose container is gone), so the truth the checker
    /// compares with stays reachable.
    ///
    /// The same container's pid too: a new run that reuses it, with the
    /// CreateTask answer lost, must still be told from the old one.
    fn pick_reused_pid(&mut self) -> Option<u32> {
        let candidates: Vec<u32> = self
            .cd
            .reusable_pids()
            .into_iter()
            .filter(|pid| {
                self.cd.truth.get(pid).is_some_and(|t| {
                    self.checker.exit_verified(&t.container, *pid, t.created_at)
                        || !self.cd.containers.contains(&t.container)
                })
            })
            .collect();
        if candidates.is_empty() || !self.take_fault(FaultKind::PidReuse) {
            return None;
        }
        let pid = self.rng_fault.pick(&candidates);
        self.note(format!("FAULT pid {pid} is reused"));
        Some(pid)
    }

    fn call_reply(&mut self, key: (u64, OpId), generation: u32) -> Result<(), SimFailure> {
        match self.calls.get(&key) {
            Some(p) if p.generation == generation => {}
            _ => return Ok(()),
        }
        let Some(pending) = self.calls.remove(&key) else {
            return Ok(());
        };
        if pending.orphan || key.0 != self.daemon || self.core.is_none() {
            return Ok(());
        }
        let op = key.1;
        let Some(result) = pending.result else {
            return Err(self.failure(format!("simulator bug: {op} replied without a result")));
        };
        // The adapter's `settle`: a call that found containerd away says
        // so first; an answer from containerd (even an error) after that,
        // or the first ever, says it is back. A deadline says neither.
        self.mid_relist = true;
        let noted = match &result {
            // The network calls never reach containerd: they say nothing of it.
            _ if pending.call.is_network() => Ok(()),
            Err(f) if f.kind == FailureKind::Unavailable => {
                self.note_unreachable(&f.message.clone())
            }
            Err(f) if f.kind == FailureKind::Deadline => Ok(()),
            _ => self.note_reachable(),
        };
        self.mid_relist = false;
        noted?;
        if self.core.is_none() {
            return Ok(());
        }
        match (pending.call, result) {
            (WorldCall::Containerd(Call::Subscribe), Ok(_)) => {
                self.stream = Some(op);
                self.feed(Input::Connection(ConnectionFact::StreamLive(op)))
            }
            (WorldCall::Containerd(Call::Relist), Ok(_)) => {
                let tasks = pending.relist.unwrap_or_default();
                self.mid_relist = true;
                self.feed(Input::Relist(op, RelistPart::Begin))?;
                let shown = if pending.relist_breaks {
                    tasks.len() / 2
                } else {
                    tasks.len()
                };
                let mut listed = Vec::new();
                for mut task in tasks.into_iter().take(shown) {
                    listed.push(task.container.clone());
                    // A shim that does not answer in time: containerd lists
                    // its task as UNKNOWN with pid 0, a placeholder that
                    // proves nothing.
                    if self.rng_fault.chance(20) {
                        // Status unknown; the pid is 0 or still the real one.
                        if self.rng_fault.chance(500) {
                            task.pid = 0;
                        }
                        task.status = holdfast_core::TaskStatus::Unknown;
                        task.exit_status = 0;
                        task.exited_at = None;
                    }
                    self.feed(Input::Relist(op, RelistPart::Task(task)))?;
                }
                self.mid_relist = false;
                if pending.relist_breaks {
                    let failure =
                        Failure::new(FailureKind::Unavailable, "injected: relist broke midway");
                    self.mid_relist = true;
                    let noted = self.note_unreachable("injected: relist broke midway");
                    self.mid_relist = false;
                    noted?;
                    self.feed(Input::ActionResult(op, Err(failure)))
                } else {
                    let listed: std::collections::BTreeSet<ContainerId> =
                        listed.into_iter().collect();
                    self.feed(Input::Relist(op, RelistPart::End))?;
                    let relist_op = op.0;
                    let activity = &self.activity;
                    let in_flight = &self.in_flight_for;
                    let settled = |id: &ContainerId| {
                        activity.get(id).is_none_or(|a| *a < relist_op)
                            && !in_flight.values().any(|c| c == id)
                    };
                    let result =
                        self.checker
                            .relist_complete(self.core.as_ref(), op, &listed, settled);
                    result.map_err(|m| self.failure(m))
                }
            }
            (_, result) => self.feed(Input::ActionResult(op, result)),
        }
    }

    fn note_reachable(&mut self) -> Result<(), SimFailure> {
        if self.reachable == Some(true) {
            return Ok(());
        }
        self.reachable = Some(true);
        self.feed(Input::Connection(ConnectionFact::Connected))
    }

    fn note_unreachable(&mut self, reason: &str) -> Result<(), SimFailure> {
        self.reachable = Some(false);
        self.feed(Input::Connection(ConnectionFact::Unreachable(
            reason.to_owned(),
        )))
    }

    fn effects(&mut self, fx: Vec<Effect>) {
        for effect in fx {
            match effect {
                Effect::Publish(event) => self.publish(event),
                Effect::Exit {
                    pid,
                    after,
                    status,
                    oom,
                } => {
                    self.schedule(self.now + after, Ev::ProcessExit { pid, status, oom });
                }
                Effect::Started { container, pid } => self.started(container, pid),
            }
        }
    }

    /// A task started: draw how its process behaves.
    fn started(&mut self, container: ContainerId, pid: u32) {
        let p = &self.profile;
        let (ignore, immortal, oom, exec) = (
            p.ignore_term_permille,
            p.immortal_permille,
            p.oom_permille,
            p.exec_permille,
        );
        let r = &mut self.rng_world;
        let lifetime = (!r.chance(immortal)).then(|| {
            let after = match r.below(3) {
                0 => r.ms(50, 2000),
                1 => r.ms(2000, 30_000),
                _ => r.ms(30_000, 600_000),
            };
            (after, r.pick(&[0, 0, 1, 2, 3, 127]))
        });
        let oom_after = r.chance(oom).then(|| r.ms(100, 60_000));
        let on_term = if r.chance(ignore) {
            OnTerm::Ignore
        } else {
            let after = if r.chance(700) {
                r.ms(1, 500)
            } else {
                r.ms(500, 30_000)
            };
            OnTerm::Exit {
                after,
                status: r.pick(&[143, 0, 2]),
            }
        };
        let execs = if r.chance(exec) {
            u32::try_from(1 + r.below(3)).unwrap_or(1)
        } else {
            0
        };
        let behavior = Behavior {
            lifetime,
            oom_after,
            on_term,
            execs,
        };
        if let Some(task) = self.cd.tasks.get_mut(&container) {
            task.behavior = behavior;
        }
        if let Some((after, status)) = lifetime {
            self.schedule(
                self.now + after,
                Ev::ProcessExit {
                    pid,
                    status,
                    oom: false,
                },
            );
        }
        if let Some(after) = oom_after {
            self.schedule(
                self.now + after,
                Ev::ProcessExit {
                    pid,
                    status: 137,
                    oom: true,
                },
            );
        }
        for _ in 0..execs {
            let at = self.now + self.rng_world.ms(0, 20_000);
            self.schedule(
                at,
                Ev::ExecStart {
                    container: container.clone(),
                    init_pid: pid,
                },
            );
        }
    }

    // ---- the event bus ----

    /// containerd publishes an event to its subscribers.
    fn publish(&mut self, mut event: ContainerdEvent) {
        if !self.cd.up {
            return;
        }
        // The shim stamps the envelope when it first publishes.
        if let ContainerdEvent::TaskStart { published_at, .. } = &mut event {
            published_at.get_or_insert(wall(self.now));
        }
        let Some(op) = self.stream else { return };
        let target = Some((self.daemon, op));
        if self.take_fault(FaultKind::EventLost) {
            self.note(format!("FAULT event lost on a live stream: {event:?}"));
            self.checker.event_lost(&event, self.now);
            return;
        }
        let is_oom = matches!(event, ContainerdEvent::TaskOom { .. });
        let mut delay = self.rng_world.ms(0, 1).max(Duration::from_micros(300));
        // An OOM event carries no pid: delayed into a later run it would be
        // taken for that run's (see the report); keep it in order.
        if !is_oom && self.take_fault(FaultKind::EventReorder) {
            delay += self.rng_fault.ms(1, 500);
        }
        self.schedule(
            self.now + delay,
            Ev::Deliver {
                target,
                event: event.clone(),
            },
        );
        if self.take_fault(FaultKind::EventDuplicate) {
            let again = delay + self.rng_fault.ms(0, 50);
            self.schedule(
                self.now + again,
                Ev::Deliver {
                    target,
                    event: event.clone(),
                },
            );
        }
        if !is_oom && self.take_fault(FaultKind::EventStale) {
            let later = self.rng_fault.ms(5000, 60_000);
            self.schedule(
                self.now + later,
                Ev::Deliver {
                    target: None,
                    event,
                },
            );
        }
    }

    fn deliver(
        &mut self,
        target: Option<(u64, OpId)>,
        event: ContainerdEvent,
    ) -> Result<(), SimFailure> {
        let Some(op) = self.stream else { return Ok(()) };
        if target.is_some_and(|t| t != (self.daemon, op)) {
            return Ok(());
        }
        self.checker.delivered(&event, &self.cd, self.now);
        self.feed(Input::Event(event.clone()))?;
        // A second source reports the exit again, differently: another
        // status, a later time. The first recorded must stand.
        if let ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            exit_status,
            exited_at,
            oom_kills,
        } = event
            && exec_id == container.as_str()
            && self.core.as_ref().is_some_and(|core| {
                core.container(&container)
                    .is_some_and(|v| v.record.pid == Some(pid) && v.current_exit().is_some())
            })
            // Only of the exit as it happened: a report again of a report
            // again would drift later each time, past the next task of a
            // reused pid (seeds 25076 and 43804 once did).
            && self
                .cd
                .truth
                .get(&pid)
                .and_then(|t| t.exit)
                .is_some_and(|(_, at)| at == exited_at)
            && self.take_fault(FaultKind::ExitReportedAgain)
        {
            let room_ns = u64::try_from(
                wall(self.now)
                    .as_unix_nanos()
                    .saturating_sub(exited_at.as_unix_nanos())
                    .saturating_sub(1),
            )
            .unwrap_or(0)
            .max(1);
            let later = self.rng_fault.ms(1, 3000);
            let other = if exit_status == 137 { 0 } else { 137 };
            let event = ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                exit_status: other,
                // Seen a little later by the other source, but before this
                // first report arrived: the death happened before it was
                // reported, so before any later task could reuse the pid.
                exited_at: WallTime::from_unix_nanos(exited_at.as_unix_nanos().saturating_add(
                    i64::try_from(self.rng_fault.below(room_ns.min(1_000_000))).unwrap_or(0) + 1,
                )),
                oom_kills,
            };
            self.schedule(
                self.now + later,
                Ev::Deliver {
                    target: None,
                    event,
                },
            );
        }
        Ok(())
    }

    /// The shim publishes through containerd, retrying while it is away.
    fn shim_publish(&mut self, pid: u32, event: ContainerdEvent, exited: Instant, attempt: usize) {
        if self.cd.truth.get(&pid).is_some_and(|t| t.shim_died) {
            return;
        }
        if self.cd.up {
            self.publish(event);
            return;
        }
        match SHIM_RETRY_SECS.get(attempt + 1) {
            Some(secs) => {
                let at = exited + Duration::from_secs(*secs);
                self.schedule(
                    at,
                    Ev::ShimPublish {
                        pid,
                        event,
                        exited,
                        attempt: attempt + 1,
                    },
                );
            }
            None => self.note(format!("shim of pid {pid} drops {event:?}")),
        }
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
                let wall_now = wall(self.now);
                let Some(container) = self.cd.process_exit(pid, status, oom, wall_now) else {
                    return Ok(());
                };
                self.world_changed_at = self.now;
                let oom_late = oom && self.take_fault(FaultKind::OomLate);
                // The cgroup's OOM notice races the reaper and loses, by
                // milliseconds, when the fault says so; the shim stamps the
                // event when it publishes it.
                let oom_at = if oom_late {
                    self.now + self.rng_fault.ms(1, 20)
                } else {
                    self.now
                };
                let oom_event = ContainerdEvent::TaskOom {
                    container: container.clone(),
                    published_at: Some(wall(oom_at)),
                };
                if oom && !oom_late {
                    self.shim_publish(pid, oom_event.clone(), self.now, 0);
                }
                let exec_id = container.as_str().to_owned();
                let event = ContainerdEvent::TaskExit {
                    container,
                    exec_id,
                    pid,
                    exit_status: status,
                    exited_at: wall_now,
                    oom_kills: self.cd.oom_kills(pid),
                };
                self.shim_publish(pid, event, self.now, 0);
                if oom_late {
                    self.schedule(
                        oom_at,
                        Ev::ShimPublish {
                            pid,
                            event: oom_event,
                            exited: oom_at,
                            attempt: 0,
                        },
                    );
                }
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
                if self.cd.live_pid(&container) == Some(init_pid) {
                    let pid = self.cd.new_pid();
                    let at = self.now + self.rng_world.ms(10, 3000);
                    let status = self.rng_world.pick(&[0, 1, 137]);
                    self.schedule(
                        at,
                        Ev::ExecExit {
                            container,
                            pid,
                            status,
                        },
                    );
                }
                Ok(())
            }
            Ev::ExecExit {
                container,
                pid,
                status,
            } => {
                let exec_id = format!("exec-{pid}");
                let exited_at = wall(self.now);
                self.publish(ContainerdEvent::TaskExit {
                    container,
                    exec_id,
                    pid,
                    exit_status: status,
                    exited_at,
                    oom_kills: None,
                });
                Ok(())
            }
            Ev::ProbeDone { daemon, result } => {
                if daemon != self.daemon {
                    return Ok(());
                }
                self.feed(Input::ProbeResult(result))
            }
            Ev::ContainerdRestart => {
                self.world_changed_at = self.now;
                self.cd.up = true;
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

    // ---- users ----

    fn random_user_op(&mut self) -> UserOp {
        let r = &mut self.rng_user;
        let target = u8::try_from(r.below(256)).unwrap_or(0);
        let live = self.core.as_ref().map_or(0, |c| c.containers().count());
        let roll = r.below(100);
        if self.ids.is_empty() || (roll < 15 && live < self.profile.containers_max) {
            let stop_timeout_s = r
                .chance(500)
                .then(|| u8::try_from(r.below(15)).unwrap_or(0));
            return UserOp::Create {
                policy: u8::try_from(r.below(6)).unwrap_or(0),
                auto_remove: r.chance(100),
                stop_timeout_s,
                stop_signal: u8::try_from(r.below(64)).unwrap_or(0),
            };
        }
        let arg = u8::try_from(r.below(256)).unwrap_or(0);
        match roll {
            0..=39 => UserOp::Start(target),
            40..=54 => UserOp::Stop(target, r.chance(500).then_some(arg % 20)),
            55..=64 => UserOp::Kill(target, arg),
            65..=74 => UserOp::Restart(target),
            75..=84 => UserOp::Remove(target, r.chance(500)),
            85..=89 => UserOp::Pause(target, arg % 3 != 0),
            95..=99 => UserOp::Edit(target, arg),
            _ => UserOp::Wait(target, arg),
        }
    }

    fn target(&self, index: u8) -> Option<ContainerId> {
        if self.ids.is_empty() {
            return None;
        }
        // Prefer recent containers: most old ones are gone.
        let recent = self.ids.len().min(8);
        let i = self.ids.len() - recent + usize::from(index) % recent;
        self.ids.get(i).cloned()
    }

    fn user(&mut self, op: UserOp) -> Result<(), SimFailure> {
        if self.core.is_none() {
            // holdfastd is down: the API socket refuses the user.
            return Ok(());
        }
        let command = match op {
            UserOp::Create {
                policy,
                auto_remove,
                stop_timeout_s,
                stop_signal,
            } => {
                self.next_container += 1;
                let n = self.next_container;
                let id: ContainerId = match format!("c{n}").parse() {
                    Ok(id) => id,
                    Err(_) => return Ok(()),
                };
                self.ids.push(id.clone());
                let restart_policy = policy_of(policy);
                // The container's own stop signal (low three bits) and the
                // image's (next three): none, or one of those real images
                // and users pick (SIGINT, SIGQUIT for nginx, SIGKILL, ...).
                const SIGNALS: [Option<u32>; 8] = [
                    None,
                    None,
                    Some(2),
                    Some(3),
                    Some(15),
                    Some(9),
                    Some(10),
                    Some(1),
                ];
                let signal = |n: Option<u32>| n.and_then(|n| Signal::try_from(n).ok());
                // Every other container is on a bridge network (the
                // default or a user-defined one: the same network step);
                // of the others, half share another's namespace (no step
                // of their own, as `none`). Chosen by index, not by the
                // seed's stream: the seeds' runs stay as they were.
                let (network, network_name, network_container) = match n % 4 {
                    0 => (NetworkMode::Bridge, None, None),
                    2 => (NetworkMode::Bridge, Some("app".to_owned()), None),
                    1 => (NetworkMode::None, None, None),
                    _ => (
                        NetworkMode::Container,
                        None,
                        Some(holdfast_core::SharedNetwork {
                            id: "donor".into(),
                            pid: 1,
                        }),
                    ),
                };
                let config = ContainerConfig {
                    image: "busybox".into(),
                    network,
                    network_name,
                    network_container,
                    stop_timeout: stop_timeout_s.map(|s| Duration::from_secs(u64::from(s % 16))),
                    stop_signal: signal(SIGNALS[usize::from(stop_signal % 8)]),
                    image_stop_signal: signal(SIGNALS[usize::from((stop_signal >> 3) % 8)]),
                    restart_policy,
                    auto_remove,
                    healthcheck: health_of(n),
                    ..ContainerConfig::default()
                };
                Command::Create {
                    id,
                    name: format!("name{n}"),
                    config: config.into(),
                }
            }
            UserOp::Start(t) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                Command::Start { id }
            }
            UserOp::Stop(t, secs) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                Command::Stop {
                    id,
                    timeout: secs.map(|s| Duration::from_secs(u64::from(s % 20))),
                    signal: None,
                }
            }
            UserOp::Kill(t, s) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                let number = [9, 9, 15, 10, 1][usize::from(s) % 5];
                let Ok(signal) = Signal::try_from(number) else {
                    return Ok(());
                };
                Command::Kill { id, signal }
            }
            UserOp::Restart(t) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                Command::Restart {
                    id,
                    timeout: Some(Duration::from_secs(2)),
                    signal: None,
                }
            }
            UserOp::Remove(t, force) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                Command::Remove {
                    id,
                    force,
                    volumes: false,
                }
            }
            UserOp::Edit(t, arg) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                if arg % 4 == 3 {
                    Command::UpdateResources {
                        id,
                        update: holdfast_core::ResourceUpdate {
                            memory_limit_bytes: Some(u64::from(arg) << 20),
                            ..Default::default()
                        },
                    }
                } else if arg % 8 == 5 {
                    // One of two more networks, or the one it was created
                    // on, made and released.
                    let own = self
                        .core
                        .as_ref()
                        .and_then(|core| core.container(&id))
                        .and_then(|c| c.record.config.network_name.clone())
                        .unwrap_or_else(|| "bridge".to_owned());
                    let network = match arg / 8 % 3 {
                        2 => own,
                        n => format!("side{n}"),
                    };
                    if arg / 16 % 2 == 0 {
                        Command::Connect {
                            id,
                            network,
                            aliases: Vec::new(),
                            ip: None,
                        }
                    } else {
                        Command::Disconnect { id, network }
                    }
                } else if arg % 2 == 0 {
                    // Often another container's name: a conflict.
                    Command::Rename {
                        id,
                        name: format!("name{}", arg / 2 % 32),
                    }
                } else {
                    Command::UpdateRestartPolicy {
                        id,
                        policy: policy_of(arg / 2),
                    }
                }
            }
            UserOp::Pause(t, freeze) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                if freeze {
                    Command::Pause { id }
                } else {
                    Command::Unpause { id }
                }
            }
            UserOp::Wait(t, c) => {
                let Some(id) = self.target(t) else {
                    return Ok(());
                };
                let condition = [
                    WaitCondition::NotRunning,
                    WaitCondition::NextExit,
                    WaitCondition::Removed,
                ][usize::from(c) % 3];
                Command::Wait { id, condition }
            }
        };
        self.next_req += 1;
        let req = RequestId(self.next_req);
        let is_wait = matches!(command, Command::Wait { .. });
        self.checker.command(req, &command, self.now);
        self.feed(Input::Command(req, command))?;
        // `docker run -d` drops its wait once the container started.
        if is_wait && self.rng_world.chance(300) {
            self.feed(Input::Cancel(req))?;
        }
        Ok(())
    }
}

/// The restart policies users pick, `no` the most often.
/// Every third container has a health check, with its settings spread by
/// its number (drawing nothing from the seed's streams).
fn health_of(n: u64) -> Option<HealthConfig> {
    n.is_multiple_of(3).then(|| HealthConfig {
        test: vec!["CMD".into(), "true".into()],
        interval: Some(Duration::from_secs(5 + n % 7)),
        timeout: Some(Duration::from_secs(1 + n % 3)),
        start_period: n.is_multiple_of(2).then(|| Duration::from_secs(8)),
        start_interval: Some(Duration::from_secs(2)),
        retries: Some(u32::try_from(n % 4).unwrap_or(0)),
    })
}

fn policy_of(n: u8) -> RestartPolicy {
    match n % 6 {
        0 | 1 => RestartPolicy::No,
        2 => RestartPolicy::Always,
        3 => RestartPolicy::UnlessStopped,
        4 => RestartPolicy::OnFailure { max_retries: 3 },
        _ => RestartPolicy::OnFailure { max_retries: 0 },
    }
}

pub(crate) fn ms_of(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn user_kind(command: &Command) -> UserKind {
    match command {
        Command::Create { .. } => UserKind::Create,
        Command::Start { .. } => UserKind::Start,
        Command::Stop { .. } => UserKind::Stop,
        Command::Kill { .. } => UserKind::Kill,
        Command::Restart { .. } => UserKind::Restart,
        Command::Remove { .. } => UserKind::Remove,
        Command::Wait { condition, .. } => UserKind::Wait(*condition),
        Command::Rename { .. }
        | Command::UpdateRestartPolicy { .. }
        | Command::UpdateResources { .. }
        | Command::Connect { .. }
        | Command::Disconnect { .. } => UserKind::Edit,
        Command::Pause { .. } => UserKind::Pause,
        Command::Unpause { .. } => UserKind::Unpause,
        Command::CreateExec { .. } | Command::StartExec { .. } | Command::Resize { .. } => {
            UserKind::Exec
        }
        Command::ReadChanges { .. }
        | Command::MountRootfs { .. }
        | Command::UnmountRootfs { .. } => UserKind::Snapshot,
        Command::CreateNetwork { .. }
        | Command::RemoveNetwork { .. }
        | Command::PruneNetworks { .. } => UserKind::Edit,
        Command::CreateVolume { .. }
        | Command::RemoveVolume { .. }
        | Command::PruneVolumes { .. } => UserKind::Volume,
    }
}
