//! Create from image, start, exit code, stop by signal, SIGKILL escalation,
//! delete, failed creates undone, and nothing left behind.

mod common;

use common::{Env, busybox, cid, until_catches};
use holdfast_core::{Call, ConnectionFact, ContainerdEvent, Done, FailureKind, Input, Signal};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_from_image_to_nothing_left() {
    let mut env = Env::start().await;
    // A new subscription replaces the previous one, which reports itself broken.
    let first = env.subscribe().await;
    let second = env.subscribe().await;
    let first_broken = |i: &Input| matches!(i, Input::Connection(ConnectionFact::StreamBroken(op, _)) if *op == first);
    if !env.seen.iter().any(first_broken) {
        env.wait_for(first_broken).await;
    }
    let second_broken = |i: &Input| matches!(i, Input::Connection(ConnectionFact::StreamBroken(op, _)) if *op == second);
    assert!(
        !env.seen.iter().any(second_broken),
        "the newer stream stays open"
    );
    let late = env
        .wait_for_within(Duration::from_secs(1), second_broken)
        .await;
    assert!(late.is_none(), "the newer stream broke: {late:?}");

    // Exit code observed.
    let exits = cid("exits3");
    let before = std::time::SystemTime::now();
    let pid = env.run(&exits, &["sh", "-c", "exit 3"]).await;
    assert!(pid > 0);
    // Its start event carries when the shim published it (the envelope's
    // stamp): what tells a late start event of an earlier run, whose pid
    // the kernel gave again, from this run's own.
    let is_start = |i: &Input| {
        matches!(i, Input::Event(ContainerdEvent::TaskStart { container, pid: p, .. })
            if *container == exits && *p == pid)
    };
    let start = match env.seen.iter().find(|i| is_start(i)).cloned() {
        Some(start) => start,
        None => env.wait_for(is_start).await,
    };
    let Input::Event(ContainerdEvent::TaskStart { published_at, .. }) = start else {
        unreachable!("matched a TaskStart")
    };
    let published = published_at.expect("a start event stamped by its shim");
    let since_epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    };
    let published = published.as_unix_nanos();
    assert!(
        published >= since_epoch(before) - 1_000_000_000
            && published <= since_epoch(std::time::SystemTime::now()),
        "start published at {published}, outside the run"
    );
    assert_eq!(env.exit_of(&exits).await, 3);
    env.remove(&exits).await;

    // Stop by signal: a process that handles SIGTERM.
    let polite = cid("polite");
    let polite_pid = env
        .run(
            &polite,
            &[
                "sh",
                "-c",
                "trap 'exit 7' TERM; while true; do sleep 0.1; done",
            ],
        )
        .await;
    // Signalled before the shell installs its trap, PID 1 ignores SIGTERM
    // and never exits: wait for the trap itself, not for a fixed pause.
    until_catches(polite_pid, Signal::SIGTERM.number()).await;
    let kill = Call::Kill {
        id: polite.clone(),
        signal: Signal::SIGTERM,
        all: false,
    };
    assert_eq!(env.call(kill).await, Ok(Done::Ok));
    assert_eq!(env.exit_of(&polite).await, 7);
    env.remove(&polite).await;

    // SIGKILL escalation: `sleep` as PID 1 ignores SIGTERM.
    let stubborn = cid("stubborn");
    env.run(&stubborn, &["sleep", "1000"]).await;
    let term = Call::Kill {
        id: stubborn.clone(),
        signal: Signal::SIGTERM,
        all: false,
    };
    assert_eq!(env.call(term).await, Ok(Done::Ok));
    let s2 = stubborn.clone();
    let early = env
        .wait_for_within(Duration::from_secs(2), move |i| {
            matches!(i, Input::Event(ContainerdEvent::TaskExit { container, .. }) if *container == s2)
        })
        .await;
    assert_eq!(early, None, "PID 1 without a handler must survive SIGTERM");
    let kill = Call::Kill {
        id: stubborn.clone(),
        signal: Signal::SIGKILL,
        all: false,
    };
    assert_eq!(env.call(kill).await, Ok(Done::Ok));
    assert_eq!(env.exit_of(&stubborn).await, 137);
    env.remove(&stubborn).await;

    // Deleting what is gone: NotFound (the core counts it as done).
    let gone = env
        .call(Call::DeleteContainer {
            id: stubborn.clone(),
        })
        .await;
    assert_eq!(gone.map_err(|f| f.kind), Err(FailureKind::NotFound));
    let gone = env
        .call(Call::DeleteTask {
            id: stubborn.clone(),
        })
        .await;
    assert_eq!(gone.map_err(|f| f.kind), Err(FailureKind::NotFound));

    let (containers, tasks, active) = env.leftovers().await;
    assert!(
        containers.is_empty() && tasks.is_empty() && active.is_empty(),
        "leftovers: {containers:?} {tasks:?} {active:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_creates_leave_nothing_behind() {
    let mut env = Env::start().await;

    // No such image: not found (the API's 404), nothing made.
    let mut config = busybox(&["true"]);
    config.image = "nosuch:1".into();
    let r = env
        .call(Call::CreateContainer {
            id: cid("noimage"),
            config: config.into(),
        })
        .await;
    assert_eq!(
        r.as_ref().map_err(|f| f.kind),
        Err(FailureKind::NotFound),
        "{r:?}"
    );
    assert!(r.err().is_some_and(|f| f.message.contains("No such image")));

    // Fails after the snapshot was prepared (unknown user): the snapshot is removed.
    let mut config = busybox(&["true"]);
    config.user = Some("nosuchuser".into());
    let r = env
        .call(Call::CreateContainer {
            id: cid("baduser"),
            config: config.into(),
        })
        .await;
    assert_eq!(r.map_err(|f| f.kind), Err(FailureKind::Invalid));

    // A second create of an existing id: AlreadyExists, and the first survives.
    let twice = cid("twice");
    assert_eq!(
        env.call(Call::CreateContainer {
            id: twice.clone(),
            config: busybox(&["true"]).into()
        })
        .await,
        Ok(Done::Ok)
    );
    let again = env
        .call(Call::CreateContainer {
            id: twice.clone(),
            config: busybox(&["true"]).into(),
        })
        .await;
    assert_eq!(again.map_err(|f| f.kind), Err(FailureKind::AlreadyExists));
    let (containers, _, active) = env.leftovers().await;
    assert_eq!(
        (containers, active),
        (vec!["twice".to_owned()], vec!["twice".to_owned()])
    );
    assert_eq!(
        env.call(Call::DeleteContainer { id: twice }).await,
        Ok(Done::Ok)
    );

    let (containers, tasks, active) = env.leftovers().await;
    assert!(
        containers.is_empty() && tasks.is_empty() && active.is_empty(),
        "leftovers: {containers:?} {tasks:?} {active:?}"
    );
}
