//! The real core driving the real adapter against a real containerd, through
//! a containerd crash: the loop the daemon will run, in test form.
//!
//! Three containers: one that must survive the outage untouched, one whose
//! process exits on its own while containerd is down, and one the user stops
//! while containerd is down (its process ignores SIGTERM, as `sleep` as PID 1
//! does). After containerd returns, the core must show the truth for all
//! three, carry out the stop, and never have signalled the survivor.

mod common;

use common::{Env, busybox, cid};
use holdfast_adapter_containerd::Adapter;
use holdfast_core::{
    Action, Answer, Api, Call, Command, ConnectionState, ContainerId, Core, CoreConfig, Input,
    Instant, Now, Record, RequestId, Status, TaskState, UserEvent, UserEventKind, WallTime,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The daemon's loop in miniature: the only place that reads the clock; it
/// feeds one input, carries out every action, and sleeps until the next
/// input or the core's next deadline.
struct Loop {
    core: Core,
    adapter: Adapter,
    sink: UnboundedSender<Input>,
    inputs: UnboundedReceiver<Input>,
    start: std::time::Instant,
    calls: Vec<Call>,
    answers: BTreeMap<RequestId, Answer>,
    events: Vec<UserEvent>,
    /// What the daemon's store would hold.
    store: BTreeMap<ContainerId, Record>,
    next_req: u64,
}

impl Loop {
    fn new(adapter: Adapter, config: CoreConfig) -> Loop {
        let (sink, inputs) = unbounded_channel();
        let start = std::time::Instant::now();
        let core = Core::new(config, 7, Self::clock(start));
        Loop {
            core,
            adapter,
            sink,
            inputs,
            start,
            calls: Vec::new(),
            answers: BTreeMap::new(),
            events: Vec::new(),
            store: BTreeMap::new(),
            next_req: 0,
        }
    }

    fn clock(start: std::time::Instant) -> Now {
        let mono = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Now::new(Instant::from_nanos(mono), WallTime::from_unix_nanos(wall))
    }

    fn feed(&mut self, input: Input) {
        self.core.handle_input(Self::clock(self.start), input);
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Call { op, call } => {
                    self.calls.push(call.clone());
                    tokio::spawn(self.adapter.execute(op, call, self.sink.clone()));
                }
                Action::Persist(record) => {
                    self.store.insert(record.id.clone(), record);
                }
                Action::Unpersist(id) => {
                    self.store.remove(&id);
                }
                Action::Answer(req, answer) => {
                    assert!(
                        self.answers.insert(req, answer).is_none(),
                        "{req} answered twice"
                    );
                }
                Action::Publish(event) => self.events.push(event),
                // No health checks here.
                Action::RunProbe(_) => {}
                // Its containers are on no network and name no volume.
                Action::Network { call, .. } => panic!("a network call: {call:?}"),
                Action::Volume { call, .. } => panic!("a volume call: {call:?}"),
                Action::PublishResource(_)
                | Action::PersistVolume(_)
                | Action::UnpersistVolume(_)
                | Action::PersistNetwork(_)
                | Action::UnpersistNetwork(_) => {}
            }
        }
    }

    fn command(&mut self, command: Command) -> RequestId {
        self.next_req += 1;
        let req = RequestId(self.next_req);
        self.feed(Input::Command(req, Api::Docker, command));
        req
    }

    /// Runs the loop until `done` holds.
    async fn until(&mut self, what: &str, done: impl Fn(&Loop) -> bool) {
        let give_up = tokio::time::Instant::now() + common::WAIT * 2;
        while !done(self) {
            let wake = self.core.poll_timeout().map_or(give_up, |(at, _)| {
                let at = self.start + Duration::from_nanos(at.as_nanos());
                tokio::time::Instant::from_std(at).min(give_up)
            });
            tokio::select! {
                input = self.inputs.recv() => {
                    let Some(input) = input else { panic!("the input channel closed") };
                    self.feed(input);
                }
                () = tokio::time::sleep_until(wake) => {
                    assert!(tokio::time::Instant::now() < give_up, "{what}: not within {:?}", common::WAIT * 2);
                    self.feed(Input::Timeout);
                }
            }
        }
    }

    /// Runs the loop for `how_long`, whatever happens.
    async fn run_for(&mut self, how_long: Duration) {
        let until = tokio::time::Instant::now() + how_long;
        self.until("run_for", |_| tokio::time::Instant::now() >= until)
            .await;
    }

    fn status(&self, id: &ContainerId) -> Option<Status> {
        self.core.container(id).map(|c| c.status)
    }

    fn done(&self, req: RequestId) -> bool {
        self.answers.get(&req) == Some(&Answer::Done)
    }

    fn signalled(&self, id: &ContainerId) -> bool {
        self.calls
            .iter()
            .any(|c| matches!(c, Call::Kill { id: k, .. } if k == id))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_core_and_the_adapter_keep_the_truth_through_a_containerd_crash() {
    let mut env = Env::start().await;
    let config = CoreConfig {
        // So that the stop asked for during the outage is answered by its
        // outcome, not by its bound, however slow this machine is.
        stop_answer_slack: Duration::from_secs(120),
        ..CoreConfig::default()
    };
    let mut lp = Loop::new(env.adapter.clone(), config);
    lp.feed(Input::Restore(Vec::new().into()));
    lp.until("connected", |l| {
        l.core.connection() == ConnectionState::Ready
    })
    .await;

    let survivor = cid("survivor");
    let exits_alone = cid("exits-alone");
    let stopped = cid("stopped");
    // Started last and killed right after, so that it exits during the outage.
    let programs: [(&ContainerId, &[&str]); 3] = [
        (&survivor, &["sleep", "1000"]),
        (&stopped, &["sleep", "1000"]),
        (&exits_alone, &["sh", "-c", "sleep 3; exit 7"]),
    ];
    for (id, cmd) in programs {
        let create = lp.command(Command::Create {
            id: id.clone(),
            name: format!("n-{id}"),
            config: busybox(cmd).into(),
        });
        lp.until("created", |l| l.done(create)).await;
        let start = lp.command(Command::Start { id: id.clone() });
        lp.until("started", |l| l.done(start)).await;
    }
    let pid_before = lp.core.container(&survivor).and_then(|c| c.record.pid);
    assert!(pid_before.is_some());

    // containerd dies. The core sees the connection go, nothing else.
    env.ctrd.kill();
    lp.until("disconnected", |l| {
        l.core.connection() != ConnectionState::Ready
    })
    .await;
    let stop = lp.command(Command::Stop {
        id: stopped.clone(),
        timeout: Some(Duration::from_secs(1)),
        signal: None,
    });
    lp.run_for(Duration::from_secs(8)).await;
    for id in [&survivor, &exits_alone, &stopped] {
        assert_eq!(
            lp.status(id),
            Some(Status::Running),
            "{id} during the outage"
        );
        assert_eq!(
            lp.core
                .container(id)
                .and_then(|c| c.current_exit().cloned()),
            None
        );
    }
    assert!(
        !lp.answers.contains_key(&stop),
        "the stop waits for containerd"
    );

    // containerd returns: the relist and the recorded stop do the rest.
    env.ctrd.restart();
    lp.until("converged", |l| {
        l.core.connection() == ConnectionState::Ready
            && l.status(&exits_alone) == Some(Status::Exited)
            && l.done(stop)
    })
    .await;

    let survivor_now = lp.core.container(&survivor).expect("survivor");
    assert_eq!(survivor_now.status, Status::Running);
    assert_eq!(survivor_now.record.pid, pid_before, "the same process");
    assert!(matches!(survivor_now.task, TaskState::Running { .. }));
    assert!(!lp.signalled(&survivor), "the survivor was never signalled");

    let alone = lp
        .core
        .container(&exits_alone)
        .and_then(|c| c.current_exit().cloned());
    assert_eq!(
        alone.map(|e| (e.exit_code, e.error)),
        Some((7, None)),
        "its real exit status"
    );
    assert!(!lp.signalled(&exits_alone));

    let stop_exit = lp
        .core
        .container(&stopped)
        .and_then(|c| c.current_exit().cloned());
    assert_eq!(
        stop_exit.map(|e| e.exit_code),
        Some(137),
        "SIGTERM ignored, then SIGKILL"
    );
    let stop_events: Vec<&UserEventKind> = lp
        .events
        .iter()
        .filter(|e| e.container == stopped)
        .map(|e| &e.kind)
        .skip_while(|k| !matches!(k, UserEventKind::Kill { .. }))
        .collect();
    assert!(
        matches!(
            stop_events.as_slice(),
            [
                UserEventKind::Kill { .. },
                UserEventKind::Kill { .. },
                UserEventKind::Die { exit_code: 137 },
                UserEventKind::Stop
            ]
        ),
        "{stop_events:?}"
    );

    // Everything goes; nothing is left, in containerd or in the store.
    for id in [&survivor, &exits_alone, &stopped] {
        let remove = lp.command(Command::Remove {
            id: id.clone(),
            force: true,
            volumes: false,
        });
        lp.until("removed", |l| l.done(remove)).await;
    }
    assert!(
        lp.store.is_empty(),
        "{:?}",
        lp.store.keys().collect::<Vec<_>>()
    );
    let (containers, tasks, snapshots) = env.leftovers().await;
    assert!(
        containers.is_empty() && tasks.is_empty() && snapshots.is_empty(),
        "{containers:?} {tasks:?} {snapshots:?}"
    );
}
