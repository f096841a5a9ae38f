//! containerd SIGKILLed under running tasks and an open stream: the adapter
//! reports a broken stream and unreachability, never an exit; after the
//! restart the stream is live again and a relist shows the truth, including
//! a task that died while containerd was down for longer than the shim keeps
//! retrying its exit event.

mod common;

use common::{Env, cid};
use holdfast_core::{
    Call, ConnectionFact, ContainerdEvent, Done, Input, RelistPart, Signal, TaskInfo, TaskStatus,
};
use std::time::Duration;

/// Longer than the shim's ~21 s of exit event retries.
const OUTAGE: Duration = Duration::from_secs(26);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_crash_is_never_an_exit() {
    let mut env = Env::start().await;
    let stream = env.subscribe().await;
    let survivor = cid("survivor");
    let victim = cid("victim");
    let survivor_pid = env.run(&survivor, &["sleep", "1000"]).await;
    let victim_pid = env.run(&victim, &["sleep", "1000"]).await;

    env.ctrd.kill();
    env.wait_for(
        |i| matches!(i, Input::Connection(ConnectionFact::StreamBroken(op, _)) if *op == stream),
    )
    .await;
    env.wait_for(|i| matches!(i, Input::Connection(ConnectionFact::Unreachable(_))))
        .await;

    // While down: calls fail as Unavailable and report unreachability.
    let r = env
        .call(Call::Kill {
            id: survivor.clone(),
            signal: Signal::SIGTERM,
            all: false,
        })
        .await;
    assert_eq!(
        r.map_err(|f| f.kind),
        Err(holdfast_core::FailureKind::Unavailable)
    );

    // A subscription asked for while down gets one result, a failure, and is
    // never reported live.
    let op = env.op();
    tokio::spawn(env.adapter.execute(op, Call::Subscribe, env.sink.clone()));
    let this_op = move |i: &Input| match i {
        Input::ActionResult(o, _) | Input::Connection(ConnectionFact::StreamLive(o)) => *o == op,
        _ => false,
    };
    let first = env.wait_for(this_op).await;
    assert!(
        matches!(&first, Input::ActionResult(_, Err(f)) if f.kind == holdfast_core::FailureKind::Unavailable),
        "{first:?}"
    );
    let second = env.wait_for_within(Duration::from_secs(1), this_op).await;
    assert!(second.is_none(), "a second result for one call: {second:?}");

    // A task dies from the host while containerd is down.
    holdfast_testkit::sigkill(victim_pid);
    tokio::time::sleep(OUTAGE).await;
    env.ctrd.restart();

    let stream2 = env.subscribe().await;
    assert_ne!(stream, stream2);
    assert!(
        env.seen
            .iter()
            .any(|i| matches!(i, Input::Connection(ConnectionFact::Connected))),
        "a successful call after the outage reports Connected"
    );
    let relist = env.op();
    tokio::spawn(env.adapter.execute(relist, Call::Relist, env.sink.clone()));
    env.wait_for(|i| matches!(i, Input::Relist(op, RelistPart::End) if *op == relist))
        .await;
    let tasks: Vec<_> = env
        .seen
        .iter()
        .filter_map(|i| match i {
            Input::Relist(op, RelistPart::Task(t)) if *op == relist => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert!(
        env.seen
            .iter()
            .any(|i| matches!(i, Input::Relist(op, RelistPart::Begin) if *op == relist))
    );
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    let s = tasks
        .iter()
        .find(|t| t.container == survivor)
        .expect("survivor listed");
    assert_eq!(
        (s.status, s.pid, s.exited_at),
        (TaskStatus::Running, survivor_pid, None)
    );
    let v = tasks
        .iter()
        .find(|t| t.container == victim)
        .expect("victim listed");
    assert_eq!(
        (v.status, v.pid, v.exit_status),
        (TaskStatus::Stopped, victim_pid, 137)
    );
    assert!(v.exited_at.is_some(), "a stopped task has its exit time");

    // Nothing about the outage was ever reported as the survivor's exit.
    assert!(
        !env.seen.iter().any(|i| matches!(i, Input::Event(ContainerdEvent::TaskExit { container, .. }) if *container == survivor)),
        "no exit for the survivor: {:#?}",
        env.seen
    );

    // The new stream delivers events.
    let kill = Call::Kill {
        id: survivor.clone(),
        signal: Signal::SIGKILL,
        all: false,
    };
    assert_eq!(env.call(kill).await, Ok(Done::Ok));
    assert_eq!(env.exit_of(&survivor).await, 137);
    env.remove(&survivor).await;
    env.remove(&victim).await;
}

/// The shim of a task: the parent of its init process.
fn parent_of(pid: u32) -> u32 {
    let stat =
        std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("the task's /proc entry");
    let after_name = stat.rsplit(')').next().expect("a stat line");
    after_name
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("a parent pid")
}

fn signal(pid: u32, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {pid}");
}

/// Runs one relist and reads it to its end: every task it listed, or the
/// failure it answered.
async fn relist_tasks(env: &mut Env) -> Result<Vec<TaskInfo>, Input> {
    let op = env.op();
    tokio::spawn(env.adapter.execute(op, Call::Relist, env.sink.clone()));
    let mut tasks = Vec::new();
    loop {
        let got = env
            .wait_for(|i| match i {
                Input::ActionResult(o, _) | Input::Relist(o, _) => *o == op,
                _ => false,
            })
            .await;
        match got {
            Input::Relist(_, RelistPart::Task(t)) => tasks.push(t),
            Input::Relist(_, RelistPart::End) => return Ok(tasks),
            Input::Relist(_, RelistPart::Begin) => {}
            other => return Err(other),
        }
    }
}

/// A shim that does not answer: containerd lists its task as UNKNOWN with
/// pid 0. That placeholder is passed on (the core takes it as no fact about
/// that container) and the listing completes with every other task as it
/// is: one stuck shim must not keep the engine from seeing the rest (under
/// load, failing such listings kept holdfastd relisting for ever, every
/// container unseen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shim_that_does_not_answer_is_a_placeholder_in_a_listing_that_completes() {
    let mut env = Env::start().await;
    env.subscribe().await;
    let id = cid("frozen");
    let pid = env.run(&id, &["sleep", "1000"]).await;
    let other = cid("alive");
    let other_pid = env.run(&other, &["sleep", "1000"]).await;
    let shim = parent_of(pid);

    signal(shim, "STOP");
    // On a loaded machine the stop may take hold only after a listing
    // already in the shim's hands was answered (seen twice in CI): asked
    // again, a few times, while the shim stays stopped.
    let mut listed = None;
    for _ in 0..3 {
        let tasks = relist_tasks(&mut env).await;
        let placeholder = tasks.as_ref().is_ok_and(|tasks| {
            tasks
                .iter()
                .any(|t| t.container == id && (t.pid == 0 || t.status == TaskStatus::Unknown))
        });
        listed = Some(tasks);
        if placeholder {
            break;
        }
        eprintln!("the stopped shim's task was listed as it was; asking again");
    }
    signal(shim, "CONT");
    let tasks = match listed {
        Some(Ok(tasks)) => tasks,
        other => panic!("the listing did not complete: {other:?}"),
    };
    let frozen = tasks.iter().find(|t| t.container == id);
    assert!(
        frozen.is_some_and(|t| t.pid == 0 || t.status == TaskStatus::Unknown),
        "the stopped shim's task is a placeholder: {tasks:?}"
    );
    let alive = tasks.iter().find(|t| t.container == other);
    assert!(
        alive.is_some_and(|t| t.pid == other_pid && t.status == TaskStatus::Running),
        "the other task is listed as it is: {tasks:?}"
    );

    // Answering again, it is listed as it is.
    let tasks = relist_tasks(&mut env).await.expect("a listing");
    assert!(
        tasks
            .iter()
            .any(|t| t.container == id && t.pid == pid && t.status == TaskStatus::Running),
        "{tasks:?}"
    );
    for (id, pid) in [(id, pid), (other, other_pid)] {
        holdfast_testkit::sigkill(pid);
        env.exit_of(&id).await;
        env.remove(&id).await;
    }
}
