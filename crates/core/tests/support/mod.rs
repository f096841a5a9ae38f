//! A small driver for the core: a clock, helpers that feed one input and
//! return exactly the actions it produced.
#![allow(dead_code)]

use holdfast_core::*;
use std::time::Duration;

pub const WALL0: i64 = 1_700_000_000_000_000_000;

/// The user networks every test world has defined: `app`, `front`,
/// `back`, and `side0` to `side63` (the properties' connects reach them).
pub fn test_networks() -> Vec<String> {
    ["app", "front", "back"]
        .iter()
        .map(|n| (*n).to_owned())
        .chain((0..64).map(|n| format!("side{n}")))
        .collect()
}

/// [`test_networks`], as the network executor reports them at start-up.
pub fn found_networks(at: WallTime) -> Vec<FoundNetwork> {
    test_networks()
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let octet = u8::try_from(i + 1).expect("fewer than 255 networks");
            FoundNetwork {
                id: format!("{i:064x}"),
                labels: Default::default(),
                created_at: at,
                definition: Definition {
                    subnet: format!("10.{octet}.0.0/16"),
                    gateway: std::net::Ipv4Addr::new(10, octet, 0, 1),
                    bridge: format!("hf-{name}"),
                },
                name,
            }
        })
        .collect()
}

pub fn cid(s: &str) -> ContainerId {
    s.parse().expect("test ids are valid")
}

pub struct Driver {
    pub core: Core,
    pub now: Now,
    next_req: u64,
    /// The API the commands come through (the Docker API unless a test
    /// says otherwise).
    pub api: Api,
}

impl Driver {
    pub fn new() -> Driver {
        Driver::with_config(CoreConfig::default())
    }

    pub fn with_config(config: CoreConfig) -> Driver {
        let now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(WALL0));
        let mut d = Driver {
            core: Core::new(config, 1, now),
            now,
            next_req: 0,
            api: Api::Docker,
        };
        // The user networks the tests put containers on are defined.
        d.feed(Input::NetworksFound(found_networks(now.wall)));
        d
    }

    pub fn advance(&mut self, d: Duration) {
        let nanos = i64::try_from(d.as_nanos()).expect("short test durations");
        self.now = Now::new(
            self.now.at + d,
            WallTime::from_unix_nanos(self.now.wall.as_unix_nanos() + nanos),
        );
    }

    pub fn feed(&mut self, input: Input) -> Vec<Action> {
        self.core.handle_input(self.now, input);
        self.core.drain_actions()
    }

    /// Advances to the next core deadline and feeds the timeout.
    pub fn fire_timer(&mut self) -> (TimerKind, Vec<Action>) {
        let (at, kind) = self.core.poll_timeout().expect("a timer is armed");
        if at > self.now.at {
            self.advance(at - self.now.at);
        }
        (kind, self.feed(Input::Timeout))
    }

    /// Fires the timers due until `kind` has fired, and all they did
    /// (what the others do, a periodic relist or a reconnect attempt, is
    /// left unanswered). Timers due together fire in one input.
    pub fn fire_until(&mut self, kind: TimerKind) -> Vec<Action> {
        let mut all = Vec::new();
        loop {
            assert!(
                self.core.timers().any(|(_, k)| *k == kind),
                "{kind:?} is not armed"
            );
            let (_, actions) = self.fire_timer();
            all.extend(actions);
            if !self.core.timers().any(|(_, k)| *k == kind) {
                return all;
            }
        }
    }

    pub fn req(&mut self) -> RequestId {
        self.next_req += 1;
        RequestId(self.next_req)
    }

    pub fn command(&mut self, command: Command) -> (RequestId, Vec<Action>) {
        let req = self.req();
        let actions = self.feed(Input::Command(req, self.api, command));
        (req, actions)
    }

    /// From a fresh core: subscribe, live stream, relist of `tasks`.
    pub fn connect(&mut self, tasks: Vec<TaskInfo>) -> Vec<Action> {
        let (kind, actions) = self.fire_timer();
        assert_eq!(kind, TimerKind::Reconnect);
        let sub = only_call(&actions, |c| matches!(c, Call::Subscribe));
        let actions = self.feed(Input::Connection(ConnectionFact::StreamLive(sub)));
        let relist = only_call(&actions, |c| matches!(c, Call::Relist));
        self.relist(relist, tasks)
    }

    /// After the connection was lost: the reconnect is due, the new stream
    /// goes live; returns the op of the relist that follows.
    pub fn resubscribe(&mut self) -> OpId {
        let (kind, actions) = self.fire_timer();
        assert_eq!(kind, TimerKind::Reconnect);
        let sub = only_call(&actions, |c| matches!(c, Call::Subscribe));
        let actions = self.feed(Input::Connection(ConnectionFact::StreamLive(sub)));
        only_call(&actions, |c| matches!(c, Call::Relist))
    }

    pub fn relist(&mut self, op: OpId, tasks: Vec<TaskInfo>) -> Vec<Action> {
        let mut out = self.feed(Input::Relist(op, RelistPart::Begin));
        for task in tasks {
            out.extend(self.feed(Input::Relist(op, RelistPart::Task(task))));
        }
        out.extend(self.feed(Input::Relist(op, RelistPart::End)));
        out
    }

    pub fn ok(&mut self, op: OpId) -> Vec<Action> {
        self.feed(Input::ActionResult(op, Ok(Done::Ok)))
    }

    pub fn fail(&mut self, op: OpId, kind: FailureKind) -> Vec<Action> {
        self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))
    }

    pub fn exit(&mut self, id: &str, pid: u32, status: u32) -> Vec<Action> {
        self.exit_counting_ooms(id, pid, status, None)
    }

    /// An exit whose evidence carries the cgroup's count of OOM kills.
    pub fn exit_counting_ooms(
        &mut self,
        id: &str,
        pid: u32,
        status: u32,
        oom_kills: Option<u64>,
    ) -> Vec<Action> {
        let exited_at = self.now.wall;
        self.feed(Input::Event(ContainerdEvent::TaskExit {
            container: cid(id),
            exec_id: id.to_owned(),
            pid,
            exit_status: status,
            exited_at,
            oom_kills,
        }))
    }

    /// `docker create` of `id` (named `n-{id}`), done: the actions once
    /// containerd has it (a sandbox's start begins there).
    pub fn create(&mut self, id: &str, config: ContainerConfig) -> Vec<Action> {
        let (_, actions) = self.command(Command::Create {
            id: cid(id),
            name: format!("n-{id}"),
            config: config.into(),
        });
        let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
        self.ok(op)
    }

    /// Creates and starts `id` with `config`, its init at `pid`.
    pub fn run(&mut self, id: &str, config: ContainerConfig, pid: u32) {
        let sandbox = config
            .pod
            .as_ref()
            .is_some_and(|p| p.role == PodRole::Sandbox);
        let created = self.create(id, config);
        let (_, started) = self.command(Command::Start { id: cid(id) });
        // A pod's sandbox was started by its create (the start waits on it).
        let actions = if sandbox { created } else { started };
        let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
        let actions = self.feed(Input::ActionResult(op, Ok(Done::TaskCreated { pid })));
        let op = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
        self.ok(op);
        assert_eq!(
            self.core.container(&cid(id)).map(|c| c.status),
            Some(Status::Running)
        );
    }
}

/// The op of the single call in `actions` matching `want`.
pub fn only_call(actions: &[Action], want: impl Fn(&Call) -> bool) -> OpId {
    let ops: Vec<OpId> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Call { op, call } if want(call) => Some(*op),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops.len(),
        1,
        "want exactly one matching call in {actions:#?}"
    );
    ops[0]
}

/// The op of the single network call in `actions` matching `want`.
pub fn only_network_call(actions: &[Action], want: impl Fn(&NetworkCall) -> bool) -> OpId {
    let ops: Vec<OpId> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Network { op, call } if want(call) => Some(*op),
            _ => None,
        })
        .collect();
    assert_eq!(
        ops.len(),
        1,
        "want exactly one matching network call in {actions:#?}"
    );
    ops[0]
}

/// A call of either kind, as `issued` lists them.
#[derive(Clone, Debug, PartialEq)]
pub enum Issued {
    Containerd(Call),
    Network(NetworkCall),
}

/// Every call in `actions`, containerd's and the network side's, in order.
pub fn issued(actions: &[Action]) -> Vec<Issued> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Call { call, .. } => Some(Issued::Containerd(call.clone())),
            Action::Network { call, .. } => Some(Issued::Network(call.clone())),
            _ => None,
        })
        .collect()
}

pub fn network_calls(actions: &[Action]) -> Vec<NetworkCall> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Network { call, .. } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

pub fn calls(actions: &[Action]) -> Vec<Call> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Call { call, .. } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

pub fn answers(actions: &[Action]) -> Vec<(RequestId, Answer)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Answer(r, ans) => Some((*r, ans.clone())),
            _ => None,
        })
        .collect()
}

pub fn events(actions: &[Action]) -> Vec<UserEventKind> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Publish(e) => Some(e.kind.clone()),
            _ => None,
        })
        .collect()
}

/// The volumes' and networks' events among `actions`, in order.
pub fn resource_events(actions: &[Action]) -> Vec<ResourceEventKind> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::PublishResource(e) => Some(e.kind.clone()),
            _ => None,
        })
        .collect()
}

pub fn running(id: &str, pid: u32) -> TaskInfo {
    TaskInfo {
        container: cid(id),
        pid,
        status: TaskStatus::Running,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    }
}

pub fn stopped(id: &str, pid: u32, status: u32, at: WallTime) -> TaskInfo {
    TaskInfo {
        container: cid(id),
        pid,
        status: TaskStatus::Stopped,
        exit_status: status,
        exited_at: Some(at),
        oom_kills: None,
    }
}

/// What containerd lists for a task whose shim did not answer in time.
pub fn placeholder(id: &str) -> TaskInfo {
    TaskInfo {
        container: cid(id),
        pid: 0,
        status: TaskStatus::Unknown,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    }
}

/// A memory update of `id` left in flight: what is asked of it next
/// waits behind it. Its op.
pub fn update_in_flight(d: &mut Driver, id: &str) -> OpId {
    let (_, actions) = d.command(Command::UpdateResources {
        id: cid(id),
        update: ResourceUpdate {
            memory_limit_bytes: Some(64 << 20),
            ..ResourceUpdate::default()
        },
    });
    only_call(&actions, |c| matches!(c, Call::UpdateResources { .. }))
}

/// The last record `actions` persist.
pub fn persisted(actions: &[Action]) -> Record {
    actions
        .iter()
        .rev()
        .find_map(|a| match a {
            Action::Persist(r) => Some(r.clone()),
            _ => None,
        })
        .expect("a persisted record")
}

pub fn created_record(d: &Driver, id: &str) -> Record {
    d.core
        .container(&cid(id))
        .expect("container exists")
        .record
        .clone()
}

pub fn assert_no_restart_pending(d: &Driver) {
    let next = d.core.poll_timeout();
    assert!(
        next.as_ref()
            .is_none_or(|(_, k)| !matches!(k, TimerKind::RestartBackoff(_))),
        "{next:?}"
    );
}

/// A `--restart always` container whose process exited: restarting.
pub fn restarting_after_exit(id: &str, pid: u32) -> Driver {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running(id, config, pid);
    d.exit(id, pid, 1);
    assert_eq!(
        d.core.container(&cid(id)).map(|c| c.status),
        Some(Status::Restarting)
    );
    d
}

/// A `--restart always` container whose process exited and whose task was
/// deleted: its backoff has just passed. Returns the actions of that.
pub fn policy_restart_due(id: &str, pid: u32) -> (Driver, Vec<Action>) {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running(id, config, pid);
    let actions = d.exit(id, pid, 1);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::RestartBackoff(cid(id)));
    (d, actions)
}

/// [`policy_restart_due`], then its task created (pid `new_pid`) and its
/// StartTask sent: returns that call's op.
pub fn policy_start_sent(id: &str, pid: u32, new_pid: u32) -> (Driver, OpId) {
    let (mut d, actions) = policy_restart_due(id, pid);
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: new_pid }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    (d, start)
}

pub fn ready_with_running(id: &str, config: ContainerConfig, pid: u32) -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.run(id, config, pid);
    d
}

/// A `--restart always` container whose first run (pid 42) exited and was
/// deleted; the policy's CreateTask is in flight. Returns its op.
pub fn policy_create_in_flight(d: &mut Driver) -> OpId {
    let delete = only_call(&d.exit("c1", 42, 1), |c| {
        matches!(c, Call::DeleteTask { .. })
    });
    d.ok(delete);
    let (_, actions) = d.fire_timer();
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }))
}

pub fn bridge_config() -> std::sync::Arc<ContainerConfig> {
    ContainerConfig {
        network: NetworkMode::Bridge,
        ..Default::default()
    }
    .into()
}

/// A bridge container created and connected; returns the start request and
/// the op of its network setup.
pub fn bridge_start_until_setup(d: &mut Driver) -> (RequestId, OpId) {
    d.connect(vec![]);
    let config = bridge_config();
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: config.clone(),
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
    let (req, actions) = d.command(Command::Start { id: cid("c1") });
    // The attachment is owned by the record before it is made.
    let setup = only_network_call(&actions, |c| matches!(c, NetworkCall::Setup { .. }));
    let persisted_first = actions
        .iter()
        .position(|a| matches!(a, Action::Persist(r) if r.network == NetworkState::Attaching));
    let call_at = actions
        .iter()
        .position(|a| matches!(a, Action::Network { op, .. } if *op == setup));
    assert!(
        persisted_first < call_at && persisted_first.is_some(),
        "{actions:?}"
    );
    assert_eq!(
        issued(&actions),
        vec![Issued::Network(NetworkCall::Setup {
            id: cid("c1"),
            config,
            own_interface: true,
        })]
    );
    (req, setup)
}

/// A created container `id` whose start was asked for: its task created
/// (pid `pid`) and its StartTask sent. Returns the start's request and op.
pub fn start_sent(id: &str, pid: u32) -> (Driver, RequestId, OpId) {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.create(id, ContainerConfig::default());
    let (req, actions) = d.command(Command::Start { id: cid(id) });
    let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(op, Ok(Done::TaskCreated { pid })));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    (d, req, start)
}
