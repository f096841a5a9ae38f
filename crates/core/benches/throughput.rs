//! Input throughput of the core with 10,000 containers, and the time of a
//! relist of all of them. Results are recorded in bench/core.md.

use criterion::{BatchSize, Criterion, Throughput, criterion_group};
use holdfast_core::*;
use std::hint::black_box;
use std::time::Duration;

const CONTAINERS: usize = 10_000;

fn id(i: usize) -> ContainerId {
    format!("{i:064x}").parse().expect("hex ids are valid")
}

fn record(i: usize, pid: u32) -> Record {
    Record {
        id: id(i),
        name: format!("c{i}"),
        config: ContainerConfig {
            image: "busybox".into(),
            ..Default::default()
        }
        .into(),
        created_at: WallTime::from_unix_nanos(1),
        presence: Presence::Created,
        run: 1,
        pid: Some(pid),
        started_at: Some(WallTime::from_unix_nanos(2)),
        began_at: None,
        start_sent: true,
        exit: None,
        restart_count: 0,
        intents: Intents::default(),
        network: holdfast_core::NetworkState::Detached,
        endpoints: Vec::new(),
        own_disconnected: false,
        allocation: None,
        health: None,
        create_sent_at: None,
        execs: Vec::new(),
        rootfs_mounted: false,
    }
}

fn running(i: usize, pid: u32) -> TaskInfo {
    TaskInfo {
        container: id(i),
        pid,
        status: TaskStatus::Running,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    }
}

fn now(t: u64) -> Now {
    Now::new(
        Instant::from_nanos(t),
        WallTime::from_unix_nanos(1_700_000_000_000_000_000 + t as i64),
    )
}

/// A core with 10,000 running containers, restored and about to relist.
/// Returns the core and the relist op.
fn relisting_core() -> (Core, OpId) {
    let mut core = Core::new(CoreConfig::default(), 1, now(0));
    core.handle_input(
        now(0),
        Input::Restore(
            (0..CONTAINERS)
                .map(|i| record(i, 1000 + i as u32))
                .collect::<Vec<_>>()
                .into(),
        ),
    );
    core.handle_input(now(1), Input::Timeout);
    let sub = match core.drain_actions().as_slice() {
        [
            Action::Call {
                op,
                call: Call::Subscribe,
            },
        ] => *op,
        other => panic!("expected a subscribe, got {other:?}"),
    };
    core.handle_input(now(2), Input::Connection(ConnectionFact::StreamLive(sub)));
    let relist = match core.drain_actions().as_slice() {
        [
            Action::Call {
                op,
                call: Call::Relist,
            },
        ] => *op,
        other => panic!("expected a relist, got {other:?}"),
    };
    (core, relist)
}

/// What the adapter would have decoded from `Tasks.List`.
fn listed_tasks() -> Vec<TaskInfo> {
    (0..CONTAINERS)
        .map(|i| running(i, 1000 + i as u32))
        .collect()
}

fn relist_all(core: &mut Core, op: OpId, t: u64, tasks: Vec<TaskInfo>) -> usize {
    core.handle_input(now(t), Input::Relist(op, RelistPart::Begin));
    for task in tasks {
        core.handle_input(now(t), Input::Relist(op, RelistPart::Task(task)));
    }
    core.handle_input(now(t), Input::Relist(op, RelistPart::End));
    core.drain_actions().len()
}

/// Where each container is in its cycle: run, exit, delete, start again.
#[derive(Clone, Copy)]
enum Phase {
    Running(u32),
    Deleting(OpId),
    Creating(OpId),
    Starting(OpId),
}

struct Mix {
    core: Core,
    /// Made once: the adapter hands the core ids it already has.
    ids: Vec<ContainerId>,
    phases: Vec<Phase>,
    next: usize,
    t: u64,
    next_pid: u32,
    next_req: u64,
    pending_op: Option<OpId>,
}

impl Mix {
    fn new() -> Mix {
        let (mut core, relist) = relisting_core();
        relist_all(&mut core, relist, 3, listed_tasks());
        let phases = (0..CONTAINERS)
            .map(|i| Phase::Running(1000 + i as u32))
            .collect();
        Mix {
            core,
            ids: (0..CONTAINERS).map(id).collect(),
            phases,
            next: 0,
            t: 10,
            next_pid: 100_000,
            next_req: 0,
            pending_op: None,
        }
    }

    /// One input of a realistic mix: every other input is noise (an exec's
    /// exit, a stale duplicate exit); the rest walk each container through
    /// exit, task delete, start, task create and task start.
    fn step(&mut self) {
        self.t += 1_000;
        let i = self.next % CONTAINERS;
        self.next += 1;
        let at = now(self.t);
        let id = |i: usize| self.ids[i].clone();
        let input = if self.next.is_multiple_of(2) {
            let exec = self.next.is_multiple_of(4);
            Input::Event(ContainerdEvent::TaskExit {
                container: id(i),
                exec_id: if exec {
                    "exec-1".to_owned()
                } else {
                    id(i).to_string()
                },
                pid: 7,
                exit_status: 1,
                exited_at: at.wall,
                oom_kills: None,
            })
        } else {
            match self.phases[i] {
                Phase::Running(pid) => Input::Event(ContainerdEvent::TaskExit {
                    container: id(i),
                    exec_id: self.ids[i].as_str().to_owned(),
                    pid,
                    exit_status: 0,
                    exited_at: at.wall,
                    oom_kills: None,
                }),
                Phase::Deleting(op) => Input::ActionResult(op, Ok(Done::Ok)),
                Phase::Creating(op) => {
                    self.next_pid += 1;
                    Input::ActionResult(op, Ok(Done::TaskCreated { pid: self.next_pid }))
                }
                Phase::Starting(op) => Input::ActionResult(op, Ok(Done::Ok)),
            }
        };
        self.core.handle_input(at, input);
        self.pending_op = None;
        while let Some(action) = self.core.poll_action() {
            if let Action::Call { op, call } = &action {
                self.phases[i] = match call {
                    Call::DeleteTask { .. } => Phase::Deleting(*op),
                    Call::CreateTask { .. } => Phase::Creating(*op),
                    Call::StartTask { .. } => Phase::Starting(*op),
                    _ => self.phases[i],
                };
            }
            if let Action::Persist(rec) = &action
                && rec.started_at == Some(at.wall)
                && let Some(pid) = rec.pid
            {
                self.phases[i] = Phase::Running(pid);
            }
            black_box(action);
        }
        if let Phase::Deleting(_) = self.phases[i]
            && self
                .core
                .container(&id(i))
                .is_some_and(|c| c.task == TaskState::Absent)
        {
            // Deleted: the user starts it again.
            let id = self.ids[i].clone();
            self.next_req += 1;
            self.core.handle_input(
                at,
                Input::Command(RequestId(self.next_req), Api::Docker, Command::Start { id }),
            );
            while let Some(action) = self.core.poll_action() {
                if let Action::Call {
                    op,
                    call: Call::CreateTask { .. },
                } = action
                {
                    self.phases[i] = Phase::Creating(op);
                }
            }
        }
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("core_10k_containers");
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Elements(1));
    let mut mix = Mix::new();
    group.bench_function("mixed_input", |b| b.iter(|| mix.step()));
    assert!(
        mix.core.requests_pending() < CONTAINERS,
        "starts are answered as the cycle goes"
    );

    group.throughput(Throughput::Elements(CONTAINERS as u64));
    group.sample_size(20);
    group.bench_function("relist_all", |b| {
        b.iter_batched(
            || (relisting_core(), listed_tasks()),
            // The core is returned so its drop is not timed.
            |((mut core, op), tasks)| {
                let actions = relist_all(&mut core, op, 3, tasks);
                (core, actions)
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(core_benches, benches);

/// criterion's main, unless `CORE_STEPS=N` asks for a single pass of the
/// mixed input (N inputs after the 10,000-container set-up) or
/// `CORE_RELIST=1` for one complete relist after the same set-up (`0`: the
/// set-up alone): runs for callgrind, whose instruction counts, unlike
/// times, do not depend on the machine's load (bench/core-callgrind.sh).
fn main() {
    if let Some(steps) = std::env::var("CORE_STEPS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut mix = Mix::new();
        for _ in 0..steps {
            mix.step();
        }
        black_box(&mix.core);
        return;
    }
    if let Ok(relist) = std::env::var("CORE_RELIST") {
        let (mut core, op) = relisting_core();
        let tasks = listed_tasks();
        if relist == "1" {
            black_box(relist_all(&mut core, op, 3, tasks));
        } else {
            black_box(tasks);
        }
        black_box(&core);
        return;
    }
    core_benches();
    Criterion::default().configure_from_args().final_summary();
}
