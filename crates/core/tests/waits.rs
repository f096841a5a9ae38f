//! `docker wait`: handler tests, one input each, with the exact actions it
//! produces. A wait is answered when its condition comes true, and never
//! before.

mod support;

use holdfast_core::*;
use support::*;

#[test]
fn a_wait_during_a_restart_backoff_waits_until_the_restart_is_ended() {
    // As dockerd: a container waiting out its restart policy's backoff is
    // restarting, not down; `docker wait` waits. An update of the policy
    // to "no" ends the restart: the wait is met then.
    let mut d = restarting_after_exit("c1", 42);
    let (wait, actions) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    assert_eq!(answers(&actions), vec![], "restarting: it waits");
    let (update, actions) = d.command(Command::UpdateRestartPolicy {
        id: cid("c1"),
        policy: RestartPolicy::No,
    });
    assert_eq!(
        answers(&actions),
        vec![
            (
                wait,
                Answer::Waited {
                    exit_code: 1,
                    error: None
                }
            ),
            (update, Answer::Done)
        ]
    );
}

#[test]
fn wait_answers_at_once_or_at_the_exit() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (w1, actions) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    assert_eq!(actions, vec![]);
    let (w2, _) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::Removed,
    });
    let actions = d.exit("c1", 42, 9);
    assert_eq!(
        answers(&actions),
        vec![(
            w1,
            Answer::Waited {
                exit_code: 9,
                error: None
            }
        )]
    );
    let delete_task = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let (w3, actions) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    assert_eq!(
        actions,
        vec![Action::Answer(
            w3,
            Answer::Waited {
                exit_code: 9,
                error: None
            }
        )]
    );
    d.ok(delete_task);
    let (_, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    let actions = d.ok(delete);
    assert!(answers(&actions).contains(&(
        w2,
        Answer::Waited {
            exit_code: 9,
            error: None
        }
    )));
}

#[test]
fn a_cancelled_wait_is_forgotten_and_other_requests_go_on() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (wait, _) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NextExit,
    });
    let (stop, _) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert_eq!(d.core.requests_pending(), 2);
    let actions = d.feed(Input::Cancel(wait));
    assert!(
        matches!(&actions[..], [Action::Answer(r, Answer::Error(e))] if *r == wait && e.kind == ErrorKind::Cancelled)
    );
    assert_eq!(d.feed(Input::Cancel(stop)), vec![], "the stop goes on");
    assert_eq!(d.core.requests_pending(), 1);
    assert_eq!(
        d.feed(Input::Cancel(wait)),
        vec![],
        "cancelling twice does nothing"
    );
}
