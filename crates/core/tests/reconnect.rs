//! Connecting and reconnecting: handler tests, one input each, with the
//! exact actions it produces. Every (re)connect subscribes, waits for the
//! stream, relists, and only then acts; reconnects back off with jitter;
//! restored records are confirmed by the first relist.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn connecting_subscribes_then_relists_then_is_ready() {
    let mut d = Driver::new();
    assert_eq!(d.core.connection(), ConnectionState::Down);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Reconnect);
    assert_eq!(
        actions,
        vec![Action::Call {
            op: OpId(1),
            call: Call::Subscribe
        }]
    );
    assert_eq!(d.core.connection(), ConnectionState::Subscribing);
    let actions = d.feed(Input::Connection(ConnectionFact::StreamLive(OpId(1))));
    assert_eq!(
        actions,
        vec![Action::Call {
            op: OpId(2),
            call: Call::Relist
        }]
    );
    assert_eq!(d.core.connection(), ConnectionState::Relisting);
    assert_eq!(d.relist(OpId(2), vec![]), vec![]);
    assert_eq!(d.core.connection(), ConnectionState::Ready);
    assert_eq!(d.core.calls_in_flight(), 0);
}

#[test]
fn a_broken_stream_produces_no_action_and_a_stop_waits_for_the_reconnect() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    assert_eq!(
        d.feed(Input::Connection(ConnectionFact::StreamBroken(
            OpId(1),
            "transport is closing".into()
        ))),
        vec![]
    );
    assert_eq!(
        d.feed(Input::Connection(ConnectionFact::Unreachable(
            "connection refused".into()
        ))),
        vec![]
    );
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
    let (req, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(2)),
        signal: None,
    });
    assert!(
        matches!(&actions[..], [Action::Persist(r)] if r.intents.stop.is_some()),
        "{actions:?}"
    );
    // The reconnect attempt fails; the stop's answer bound passes: an honest 503.
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Reconnect);
    let sub = only_call(&actions, |c| matches!(c, Call::Subscribe));
    assert_eq!(d.fail(sub, FailureKind::Unavailable), vec![]);
    d.advance(Duration::from_secs(12));
    let actions = d.feed(Input::Timeout);
    let sub = only_call(&actions, |c| matches!(c, Call::Subscribe));
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Unavailable)
    );
    // containerd is back: the relist shows it still running, and the stop is carried out.
    let actions = d.feed(Input::Connection(ConnectionFact::StreamLive(sub)));
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![running("c1", 42)]);
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGTERM,
            all: false
        }]
    );
}

#[test]
fn restored_records_are_confirmed_by_the_first_relist() {
    let d = ready_with_running("c1", ContainerConfig::default(), 42);
    let rec = created_record(&d, "c1");
    let mut half_created = rec.clone();
    half_created.id = cid("c2");
    half_created.name = "half".into();
    half_created.presence = Presence::Creating;

    // A new daemon: restore, then relist shows c1's task gone.
    let mut d = Driver::new();
    assert_eq!(
        d.feed(Input::Restore(vec![rec, half_created].into())),
        vec![]
    );
    let c1 = d.core.container(&cid("c1")).expect("restored");
    assert_eq!(
        (c1.status, c1.confirmed, c1.task),
        (Status::Running, false, TaskState::Unknown)
    );
    let actions = d.connect(vec![]);
    let exit = d
        .core
        .container(&cid("c1"))
        .and_then(|c| c.current_exit())
        .cloned()
        .expect("gone is an exit");
    assert_eq!(exit.exit_code, 255);
    // The half-created one is rolled back: hidden and deleted at once,
    // and deleted again once the create the daemon before had under way
    // can no longer land.
    assert!(d.core.container(&cid("c2")).is_none());
    let delete = only_call(&actions, |c| *c == Call::DeleteContainer { id: cid("c2") });
    let actions = d.ok(delete);
    assert!(
        !actions.contains(&Action::Unpersist(cid("c2"))),
        "{actions:?}"
    );
    let actions = d.fire_until(TimerKind::RollbackDue(cid("c2")));
    let delete = only_call(&actions, |c| *c == Call::DeleteContainer { id: cid("c2") });
    let actions = d.ok(delete);
    assert!(
        actions.contains(&Action::Unpersist(cid("c2"))),
        "{actions:?}"
    );
}

#[test]
fn reconnect_backoff_grows_is_capped_and_jittered_by_the_seed() {
    let mut delays = Vec::new();
    let mut d = Driver::new();
    for _ in 0..10 {
        let (_, actions) = d.fire_timer();
        let sub = only_call(&actions, |c| matches!(c, Call::Subscribe));
        let failed_at = d.now.at;
        d.fail(sub, FailureKind::Unavailable);
        let (at, kind) = d.core.poll_timeout().expect("retry armed");
        assert_eq!(kind, TimerKind::Reconnect);
        delays.push(at - failed_at);
    }
    let config = CoreConfig::default();
    assert!(
        delays[0] <= config.reconnect_initial * 6 / 5,
        "fast first retry: {delays:?}"
    );
    assert!(
        delays.iter().all(|d| *d <= config.reconnect_max * 6 / 5),
        "capped: {delays:?}"
    );
    assert!(delays[5] > delays[0] * 4, "grows: {delays:?}");
    let again: Vec<_> = {
        let mut d = Driver::new();
        (0..10)
            .map(|_| {
                let (_, actions) = d.fire_timer();
                let failed_at = d.now.at;
                d.fail(
                    only_call(&actions, |c| matches!(c, Call::Subscribe)),
                    FailureKind::Unavailable,
                );
                d.core.poll_timeout().map(|(at, _)| at - failed_at)
            })
            .collect()
    };
    assert_eq!(
        again,
        delays.into_iter().map(Some).collect::<Vec<_>>(),
        "same seed, same delays"
    );
}

#[test]
fn records_restored_while_connected_are_relisted() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let mut rec = created_record(&d, "c1");
    rec.id = cid("c2");
    rec.name = "late".into();
    let actions = d.feed(Input::Restore(vec![rec].into()));
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(relist, vec![running("c1", 42), running("c2", 42)]);
    let c2 = d.core.container(&cid("c2")).expect("restored");
    assert_eq!(
        (c2.task, c2.confirmed),
        (TaskState::Running { pid: 42 }, true)
    );
}

#[test]
fn reconnect_backoff_resets_after_a_healthy_period() {
    let mut d = Driver::new();
    // Fail five attempts: the backoff grows.
    for _ in 0..5 {
        let (_, actions) = d.fire_timer();
        d.fail(
            only_call(&actions, |c| matches!(c, Call::Subscribe)),
            FailureKind::Unavailable,
        );
    }
    let grown = d
        .core
        .poll_timeout()
        .map(|(at, _)| at - d.now.at)
        .expect("retry armed");
    d.connect(vec![]);
    // Healthy for longer than reconnect_reset_after, then the stream breaks.
    d.advance(CoreConfig::default().reconnect_reset_after + Duration::from_secs(1));
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "connection refused".into(),
    )));
    let (at, kind) = d.core.poll_timeout().expect("retry armed");
    assert_eq!(kind, TimerKind::Reconnect);
    let delay = at - d.now.at;
    assert!(
        delay <= CoreConfig::default().reconnect_initial * 6 / 5,
        "reset: {delay:?} (was {grown:?})"
    );
    assert!(grown > delay * 4, "it had grown: {grown:?}");
}
