//! `docker rm`: handler tests, one input each, with the exact actions it
//! produces. A running container needs force, and a forced remove is a
//! SIGKILL stop.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn remove_of_a_running_container_needs_force() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (req, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    assert!(
        matches!(&actions[..], [Action::Answer(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Conflict)
    );
    let (req, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: true,
        volumes: false,
    });
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGKILL,
            all: true
        }]
    );
    d.ok(OpId(6));
    let actions = d.exit("c1", 42, 137);
    let delete_task = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let actions = d.ok(delete_task);
    let delete_container = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(delete_container);
    assert_eq!(
        actions,
        vec![
            Action::Unpersist(cid("c1")),
            Action::Publish(UserEvent {
                container: cid("c1"),
                kind: UserEventKind::Destroy,
                at: d.now.wall
            }),
            Action::Answer(req, Answer::Done),
        ]
    );
    assert!(d.core.container(&cid("c1")).is_none());
    assert_eq!(d.core.requests_pending(), 0);
}

#[test]
fn a_forced_remove_sends_sigkill_even_over_a_pending_stop() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(30)),
        signal: None,
    });
    d.command(Command::Remove {
        id: cid("c1"),
        force: true,
        volumes: false,
    });
    let relist = d.resubscribe();
    let actions = d.relist(relist, vec![running("c1", 42)]);
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: Signal::SIGKILL,
            all: true
        }]
    );
}
