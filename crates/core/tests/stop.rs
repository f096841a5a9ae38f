//! `docker stop`: handler tests, one input each, with the exact actions it
//! produces. The stop signal and grace period by precedence, then SIGKILL;
//! answered when the exit is seen.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn stop_signals_then_kills_at_the_deadline_and_answers_on_exit() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (req, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(5)),
        signal: None,
    });
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.intents.stop == Some(StopIntent { signal: Signal::SIGTERM, grace: Duration::from_secs(5) }))
    );
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Kill {
            signal: Signal::SIGTERM
        }]
    );
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGTERM,
            all: false
        }]
    );
    assert_eq!(actions.len(), 3);
    let kill_at = d.now.at;
    assert_eq!(d.ok(OpId(6)), vec![]);
    // The deadline is the grace period after delivery, and nothing earlier
    // than it sends SIGKILL.
    let (deadline, kind) = d.core.poll_timeout().expect("deadline armed");
    assert_eq!(kind, TimerKind::StopDeadline(cid("c1")));
    assert_eq!(deadline, kill_at + Duration::from_secs(5));
    d.advance(Duration::from_millis(4_999));
    assert_eq!(d.feed(Input::Timeout), vec![]);
    let (_, actions) = d.fire_timer();
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Kill {
            signal: Signal::SIGKILL
        }]
    );
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGKILL,
            all: true
        }]
    );
    d.ok(OpId(7));
    let actions = d.exit("c1", 42, 137);
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Die { exit_code: 137 }, UserEventKind::Stop]
    );
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(calls(&actions), vec![Call::DeleteTask { id: cid("c1") }]);
}

#[test]
fn stop_signal_and_grace_follow_request_then_container_then_image() {
    let config = ContainerConfig {
        stop_signal: Some(Signal::try_from(3).expect("valid")),
        image_stop_signal: Some(Signal::try_from(2).expect("valid")),
        stop_timeout: Some(Duration::from_secs(7)),
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config.clone(), 42);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.intents.stop == Some(StopIntent { signal: Signal::try_from(3).expect("valid"), grace: Duration::from_secs(7) }))
    );

    let image_only = ContainerConfig {
        image_stop_signal: Some(Signal::try_from(2).expect("valid")),
        ..Default::default()
    };
    let mut d = ready_with_running("c2", image_only, 43);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c2"),
        timeout: None,
        signal: None,
    });
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.intents.stop == Some(StopIntent { signal: Signal::try_from(2).expect("valid"), grace: Duration::from_secs(10) }))
    );

    let mut d = ready_with_running("c3", config, 44);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c3"),
        timeout: Some(Duration::from_secs(1)),
        signal: Some(Signal::SIGKILL),
    });
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.intents.stop == Some(StopIntent { signal: Signal::SIGKILL, grace: Duration::from_secs(1) }))
    );
}

#[test]
fn stopping_a_container_that_is_not_running_does_nothing() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.exit("c1", 42, 0);
    let (req, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert!(
        matches!(&actions[..], [Action::Persist(_), Action::Answer(r, Answer::NotModified)] if *r == req)
    );
}

#[test]
fn a_stop_signal_answered_after_the_exit_leaves_no_deadline_behind() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(8)),
        signal: None,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    // The exit is seen before the kill's answer.
    d.exit("c1", 42, 143);
    assert_eq!(
        d.ok(kill),
        vec![Action::Call {
            op: OpId(7),
            call: Call::DeleteTask { id: cid("c1") }
        }]
    );
    d.ok(OpId(7));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let start = only_call(
        &d.feed(Input::ActionResult(
            create,
            Ok(Done::TaskCreated { pid: 43 }),
        )),
        |c| matches!(c, Call::StartTask { .. }),
    );
    d.ok(start);
    // A new stop starts with its signal and a full grace period, not SIGKILL.
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(8)),
        signal: None,
    });
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
fn huge_stop_timeouts_do_not_overflow() {
    let config = ContainerConfig {
        stop_timeout: Some(Duration::MAX),
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let (_, actions) = d.command(Command::Restart {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGTERM,
            all: false
        }]
    );
    let (stop, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::MAX),
        signal: None,
    });
    // (The restart it cancels is answered; the stop waits for the exit.)
    assert!(!answers(&actions).iter().any(|(r, _)| *r == stop));
}
