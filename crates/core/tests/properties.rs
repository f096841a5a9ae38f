//! Properties over arbitrary interleavings of commands, events (lost,
//! duplicated, stale), disconnects, relists and failed calls, against a small
//! model of containerd ("the world") that the harness keeps in step.
//!
//! 1. Every kill, delete or (re)start is backed by a user's or policy's intent:
//!    none is caused by a connection fact or a failed call.
//! 2. An exit is recorded at most once per run and never changed.
//! 3. After a reconnect's complete relist, every settled container matches the world.
//! 4. Every stop request is answered within grace + slack.
//! 5. The same inputs give the same actions.
//! 6. No request is lost: all but waits are answered once the world heals.

mod support;

use holdfast_core::*;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use std::collections::BTreeMap;
use std::time::Duration;
use support::cid;

const IDS: [&str; 3] = ["c0", "c1", "c2"];

#[derive(Clone, Debug)]
enum Step {
    Create(usize, u8),
    Start(usize),
    Stop(usize, Option<u8>),
    Kill(usize, bool),
    Restart(usize),
    Remove(usize, bool),
    Wait(usize, u8),
    /// Resolve the n-th outstanding call: 0 = succeed, 7 = succeed with the
    /// world's reaction (an exit) seen before the answer, else a failure kind.
    Resolve(usize, u8),
    /// A running task exits on its own in the world; the event may be lost.
    WorldExit(usize, u8, bool),
    /// Deliver an old exit event again (duplicate or stale).
    ReplayEvent(usize),
    ExecExit(usize),
    Oom(usize),
    ShimDies(usize),
    StreamBreaks,
    ContainerdDown,
    ContainerdUp,
    Advance(u16),
}

fn step() -> impl Strategy<Value = Step> {
    let idx = 0..IDS.len();
    prop_oneof![
        1 => (idx.clone(), 0..4u8).prop_map(|(i, p)| Step::Create(i, p)),
        1 => idx.clone().prop_map(Step::Start),
        1 => (idx.clone(), proptest::option::of(0..4u8)).prop_map(|(i, t)| Step::Stop(i, t)),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, k)| Step::Kill(i, k)),
        1 => idx.clone().prop_map(Step::Restart),
        1 => (idx.clone(), any::<bool>()).prop_map(|(i, f)| Step::Remove(i, f)),
        1 => (idx.clone(), 0..3u8).prop_map(|(i, c)| Step::Wait(i, c)),
        4 => (0..8usize, prop_oneof![3 => Just(0u8), 1 => Just(7u8), 1 => 1..7u8]).prop_map(|(n, k)| Step::Resolve(n, k)),
        1 => (idx.clone(), 0..3u8, any::<bool>()).prop_map(|(i, s, lost)| Step::WorldExit(i, s, lost)),
        1 => (0..8usize).prop_map(Step::ReplayEvent),
        1 => idx.clone().prop_map(Step::ExecExit),
        1 => idx.clone().prop_map(Step::Oom),
        1 => idx.clone().prop_map(Step::ShimDies),
        1 => Just(Step::StreamBreaks),
        1 => Just(Step::ContainerdDown),
        1 => Just(Step::ContainerdUp),
        1 => (1..20_000u16).prop_map(Step::Advance),
    ]
}

#[derive(Clone, Debug, PartialEq)]
enum WorldTask {
    Created(u32),
    Running(u32),
    Stopped(u32, u32, WallTime),
}

/// containerd as far as these properties need it.
#[derive(Default)]
struct World {
    up: bool,
    containers: BTreeMap<ContainerId, ()>,
    tasks: BTreeMap<ContainerId, WorldTask>,
    next_pid: u32,
}

struct Harness {
    core: Core,
    now: Now,
    world: World,
    outstanding: Vec<(OpId, Call)>,
    subscription: Option<OpId>,
    past_events: Vec<ContainerdEvent>,
    next_req: u64,
    trace: Vec<Action>,
    /// Every exit that happened in the world, by (container, pid).
    world_exits: BTreeMap<(ContainerId, u32), u32>,
    /// First exit seen per (container, run).
    exits: BTreeMap<(ContainerId, u64), ExitRecord>,
    /// Stop requests: when they are due at the latest.
    stop_bounds: BTreeMap<RequestId, Instant>,
    answered: BTreeMap<RequestId, Instant>,
    /// Stop signals in flight, and when each container's was delivered.
    stop_signal_ops: BTreeMap<OpId, ContainerId>,
    signal_delivered: BTreeMap<ContainerId, Instant>,
    /// Every request but a wait, which may rightly wait for ever.
    must_answer: Vec<RequestId>,
    slack: Duration,
}

impl Harness {
    fn new() -> Harness {
        let now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(support::WALL0));
        let config = CoreConfig::default();
        let slack = config.stop_answer_slack;
        Harness {
            core: Core::new(config, 9, now),
            now,
            world: World {
                up: true,
                next_pid: 100,
                ..World::default()
            },
            outstanding: Vec::new(),
            subscription: None,
            past_events: Vec::new(),
            next_req: 0,
            trace: Vec::new(),
            exits: BTreeMap::new(),
            world_exits: BTreeMap::new(),
            stop_bounds: BTreeMap::new(),
            answered: BTreeMap::new(),
            stop_signal_ops: BTreeMap::new(),
            signal_delivered: BTreeMap::new(),
            must_answer: Vec::new(),
            slack,
        }
    }

    /// Feeds one input and checks the per-step properties.
    fn feed(&mut self, input: Input) -> Result<(), TestCaseError> {
        let was_relisting = self.core.connection() == ConnectionState::Relisting;
        self.core.handle_input(self.now, input.clone());
        let actions = self.core.drain_actions();
        for action in &actions {
            match action {
                Action::Call { op, call } => {
                    self.outstanding.push((*op, call.clone()));
                    self.check_escalation(*op, call)?;
                }
                Action::Answer(req, _) => {
                    prop_assert!(
                        self.answered.insert(*req, self.now.at).is_none(),
                        "{req} answered twice"
                    );
                }
                _ => {}
            }
        }
        // Property 1: every call that can end or start a process is backed
        // by an intent a user (or a policy, after a recorded exit) made, never
        // by the input at hand; a connection fact or a failed call can at
        // most let an already recorded intent proceed.
        for call in support::calls(&actions) {
            let view = call.container_id().and_then(|id| self.core.container(id));
            let justified = match (&call, view) {
                (Call::Kill { .. }, Some(c)) => {
                    let i = &c.record.intents;
                    i.stop.is_some() || !i.kills.is_empty() || i.remove
                }
                (Call::CreateTask { .. } | Call::StartTask { .. }, Some(c)) => {
                    c.record.intents.start
                }
                (Call::DeleteTask { .. }, Some(c)) => {
                    c.current_exit().is_some()
                        || matches!(c.task, TaskState::Created { .. }) && !c.record.intents.start
                }
                (Call::DeleteContainer { .. }, Some(c)) => c.record.intents.remove,
                // Invisible: a discarded create being rolled back.
                (Call::DeleteContainer { .. }, None) => true,
                (Call::Subscribe | Call::Relist | Call::CreateContainer { .. }, _) => true,
                (_, None) => false,
            };
            prop_assert!(
                justified,
                "{input:?} issued {call:?} with no intent behind it"
            );
            if matches!(
                input,
                Input::Connection(
                    ConnectionFact::StreamBroken(..) | ConnectionFact::Unreachable(_)
                )
            ) {
                prop_assert!(false, "{input:?} issued {call:?}");
            }
        }
        // Property 2.
        for c in self.core.containers() {
            if let Some(exit) = &c.record.exit {
                let key = (c.record.id.clone(), exit.run);
                match self.exits.get(&key) {
                    Some(first) => prop_assert_eq!(first, exit, "exit of {:?} changed", key),
                    None => {
                        self.exits.insert(key, exit.clone());
                    }
                }
            }
        }
        // Property 2, against the truth: a recorded exit is the world's.
        for c in self.core.containers() {
            if let (Some(exit), Some(pid)) = (c.current_exit(), c.record.pid) {
                match self.world_exits.get(&(c.record.id.clone(), pid)) {
                    Some(status) if exit.error.is_none() => {
                        prop_assert_eq!(
                            i64::from(*status),
                            i64::from(exit.exit_code),
                            "exit of {} is not the truth",
                            c.record.id
                        )
                    }
                    Some(_) => {}
                    // Only a task that vanished may have an exit the world never had.
                    None => prop_assert!(
                        exit.error.is_some()
                            && !matches!(self.world.tasks.get(&c.record.id), Some(WorldTask::Running(p)) if *p == pid),
                        "{} has an exit that never happened: {:?}",
                        c.record.id,
                        exit
                    ),
                }
            }
        }
        // Property 3: a reconnect's relist just completed.
        if was_relisting && self.core.connection() == ConnectionState::Ready {
            for c in self.core.containers() {
                if !c.confirmed {
                    continue;
                }
                match self.world.tasks.get(&c.record.id) {
                    Some(WorldTask::Running(pid)) | Some(WorldTask::Created(pid))
                        if c.current_exit().is_none() =>
                    {
                        prop_assert!(
                            matches!(c.task, TaskState::Running { pid: p } | TaskState::Created { pid: p } if p == *pid),
                            "{} should run pid {pid}: {:?}",
                            c.record.id,
                            c.task
                        );
                    }
                    Some(WorldTask::Stopped(..)) | None => {
                        prop_assert!(
                            c.status != Status::Running,
                            "{} should not run",
                            c.record.id
                        );
                    }
                    _ => {}
                }
            }
        }
        self.trace.extend(actions);
        Ok(())
    }

    /// Property 4b: SIGKILL for a stop comes no earlier than the grace
    /// period after its signal was delivered.
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
        } else if *signal == Signal::SIGKILL && intents.kills.is_empty() && !intents.remove {
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

    fn req(&mut self) -> RequestId {
        self.next_req += 1;
        RequestId(self.next_req)
    }

    fn command(&mut self, command: Command) -> Result<RequestId, TestCaseError> {
        let req = self.req();
        if !matches!(command, Command::Wait { .. }) {
            self.must_answer.push(req);
        }
        self.feed(Input::Command(req, command))?;
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
        self.set_time(target);
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
        Ok(())
    }

    fn set_time(&mut self, at: Instant) {
        let delta = at.saturating_since(self.now.at);
        let wall = self.now.wall.as_unix_nanos() + i64::try_from(delta.as_nanos()).unwrap_or(0);
        self.now = Now::new(at.max(self.now.at), WallTime::from_unix_nanos(wall));
    }

    fn event(&mut self, event: ContainerdEvent) -> Result<(), TestCaseError> {
        self.past_events.push(event.clone());
        if self.world.up && self.subscription.is_some() {
            self.feed(Input::Event(event))?;
        }
        Ok(())
    }

    /// Carries out (or fails) one outstanding call, as containerd would.
    fn resolve(&mut self, n: usize, failure: u8) -> Result<(), TestCaseError> {
        if self.outstanding.is_empty() {
            return Ok(());
        }
        let (op, call) = self.outstanding.remove(n % self.outstanding.len());
        if let Some(id) = self.stop_signal_ops.remove(&op)
            && self.world.up
            && matches!(failure, 0 | 7)
        {
            self.signal_delivered.insert(id, self.now.at);
        }
        let kind = match failure {
            _ if !self.world.up => Some(FailureKind::Unavailable),
            0 | 7 => None,
            1 => Some(FailureKind::Unavailable),
            2 => Some(FailureKind::Deadline),
            3 => Some(FailureKind::NotFound),
            4 => Some(FailureKind::FailedPrecondition),
            5 => Some(FailureKind::AlreadyExists),
            _ => Some(FailureKind::Other),
        };
        if let Some(kind) = kind {
            if kind == FailureKind::Unavailable && matches!(call, Call::Subscribe) {
                self.subscription = None;
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        let done = match call {
            Call::Subscribe => {
                self.subscription = Some(op);
                return self.feed(Input::Connection(ConnectionFact::StreamLive(op)));
            }
            Call::Relist => {
                self.feed(Input::Relist(op, RelistPart::Begin))?;
                let tasks: Vec<TaskInfo> = self
                    .world
                    .tasks
                    .iter()
                    .map(|(id, t)| {
                        let (pid, status, exit_status, exited_at) = match *t {
                            WorldTask::Created(pid) => (pid, TaskStatus::Created, 0, None),
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
                        }
                    })
                    .collect();
                for task in tasks {
                    self.feed(Input::Relist(op, RelistPart::Task(task)))?;
                }
                return self.feed(Input::Relist(op, RelistPart::End));
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
                self.world.next_pid += 1;
                let pid = self.world.next_pid;
                self.world.tasks.insert(id, WorldTask::Created(pid));
                Done::TaskCreated { pid }
            }
            Call::StartTask { id } => match self.world.tasks.get_mut(&id) {
                Some(t @ WorldTask::Created(_)) => {
                    let WorldTask::Created(pid) = *t else {
                        unreachable!()
                    };
                    *t = WorldTask::Running(pid);
                    Done::Ok
                }
                _ => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "not created")),
                    ));
                }
            },
            Call::Kill { id, signal, .. } => match self.world.tasks.get(&id).cloned() {
                Some(WorldTask::Running(pid)) | Some(WorldTask::Created(pid)) => {
                    // Every other run is PID 1 without a handler: it ignores SIGTERM.
                    let ignores_term = pid % 2 == 1;
                    if signal == Signal::SIGKILL || signal == Signal::SIGTERM && !ignores_term {
                        let status = 128 + signal.number();
                        if failure == 7 {
                            self.world_exit(&id, pid, status, false)?;
                            return self.feed(Input::ActionResult(op, Ok(Done::Ok)));
                        }
                        self.feed(Input::ActionResult(op, Ok(Done::Ok)))?;
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
            },
            Call::DeleteTask { id } => match self.world.tasks.get(&id) {
                Some(WorldTask::Stopped(..)) | Some(WorldTask::Created(_)) => {
                    self.world.tasks.remove(&id);
                    Done::Ok
                }
                Some(WorldTask::Running(_)) => {
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
        self.feed(Input::ActionResult(op, Ok(done)))
    }

    fn world_exit(
        &mut self,
        id: &ContainerId,
        pid: u32,
        status: u32,
        lost: bool,
    ) -> Result<(), TestCaseError> {
        let at = self.now.wall;
        self.world
            .tasks
            .insert(id.clone(), WorldTask::Stopped(pid, status, at));
        self.world_exits.insert((id.clone(), pid), status);
        let event = ContainerdEvent::TaskExit {
            container: id.clone(),
            exec_id: id.to_string(),
            pid,
            exit_status: status,
            exited_at: at,
        };
        if lost {
            self.past_events.push(event);
            Ok(())
        } else {
            self.event(event)
        }
    }

    fn run(&mut self, steps: &[Step]) -> Result<(), TestCaseError> {
        self.feed(Input::Restore(Vec::new()))?;
        self.advance(Duration::ZERO)?;
        for step in steps {
            self.step(step)?;
        }
        // Heal, let every call complete and every timer pass (but the
        // periodic relist, which is always armed while connected).
        self.world.up = true;
        for _ in 0..200 {
            while !self.outstanding.is_empty() {
                self.resolve(0, 0)?;
            }
            match self.core.poll_timeout() {
                None | Some((_, TimerKind::PeriodicRelist)) => break,
                Some(_) => self.advance(Duration::from_secs(30))?,
            }
        }
        prop_assert_eq!(self.core.calls_in_flight(), 0);
        // No request is lost: everything but a wait is answered by now.
        for req in &self.must_answer {
            prop_assert!(
                self.answered.contains_key(req),
                "{} was never answered",
                req
            );
        }
        Ok(())
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let id = |i: &usize| cid(IDS[*i]);
        match step {
            Step::Create(i, policy) => {
                let restart_policy = match policy {
                    0 => RestartPolicy::No,
                    1 => RestartPolicy::Always,
                    2 => RestartPolicy::UnlessStopped,
                    _ => RestartPolicy::OnFailure { max_retries: 2 },
                };
                let config = ContainerConfig {
                    restart_policy,
                    ..Default::default()
                };
                self.command(Command::Create {
                    id: id(i),
                    name: format!("n{i}"),
                    config: config.into(),
                })?;
            }
            Step::Start(i) => {
                self.command(Command::Start { id: id(i) })?;
            }
            Step::Stop(i, timeout) => {
                let timeout = timeout.map(|t| Duration::from_secs(u64::from(t)));
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
                    signal: None,
                })?;
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
                self.command(Command::Kill { id: id(i), signal })?;
            }
            Step::Restart(i) => {
                self.command(Command::Restart {
                    id: id(i),
                    timeout: Some(Duration::from_secs(1)),
                    signal: None,
                })?;
            }
            Step::Remove(i, force) => {
                self.command(Command::Remove {
                    id: id(i),
                    force: *force,
                })?;
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
            Step::WorldExit(i, status, lost) => {
                if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id(i)).cloned() {
                    self.world_exit(&id(i), pid, u32::from(*status), *lost)?;
                }
            }
            Step::ReplayEvent(n) => {
                if !self.past_events.is_empty() {
                    let event = self.past_events[n % self.past_events.len()].clone();
                    self.event(event)?;
                }
            }
            Step::ExecExit(i) => {
                let exited_at = self.now.wall;
                self.event(ContainerdEvent::TaskExit {
                    container: id(i),
                    exec_id: "exec1".into(),
                    pid: 1,
                    exit_status: 1,
                    exited_at,
                })?;
            }
            Step::Oom(i) => self.event(ContainerdEvent::TaskOom { container: id(i) })?,
            Step::ShimDies(i) => {
                self.world.tasks.remove(&id(i));
            }
            Step::StreamBreaks => {
                if let Some(sub) = self.subscription.take() {
                    self.feed(Input::Connection(ConnectionFact::StreamBroken(
                        sub,
                        "eof".into(),
                    )))?;
                }
            }
            Step::ContainerdDown => {
                self.world.up = false;
                if let Some(sub) = self.subscription.take() {
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
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES runs more; CI runs the default.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(512),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/properties.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn properties_hold_over_arbitrary_interleavings(steps in proptest::collection::vec(step(), 1..120)) {
        let mut first = Harness::new();
        first.run(&steps)?;
        // Property 4 at the end: every stop was answered in time.
        for (req, bound) in &first.stop_bounds {
            let at = first.answered.get(req);
            prop_assert!(at.is_some_and(|at| at <= bound), "stop {} answered at {:?}, bound {:?}", req, at, bound);
        }
        // Property 5.
        let mut second = Harness::new();
        second.run(&steps)?;
        prop_assert_eq!(first.trace, second.trace);
    }
}
