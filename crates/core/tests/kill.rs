//! `docker kill`: handler tests, one input each, with the exact actions it
//! produces. A kill is answered by what the container shows, retried a
//! bounded number of times, and one that means "stay down" ends a restart.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn kill_delivers_the_signal_and_answers() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let hup = Signal::try_from(1).expect("valid");
    let (req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: hup,
    });
    assert!(matches!(&actions[0], Action::Persist(r) if r.intents.kills == vec![hup]));
    assert_eq!(
        calls(&actions),
        vec![Call::Kill {
            id: cid("c1"),
            signal: hup,
            all: false
        }]
    );
    let actions = d.ok(OpId(6));
    assert!(
        matches!(&actions[..], [Action::Persist(r), Action::Answer(q, Answer::Done)] if r.intents.kills.is_empty() && *q == req)
    );
}

/// Answers the relists among `actions` with the task still running, waits
/// out a retry backoff if there is one, and returns the next call.
fn next_call_after(d: &mut Driver, mut actions: Vec<Action>, id: &str, pid: u32) -> (OpId, Call) {
    loop {
        let next = actions.iter().find_map(|a| match a {
            Action::Call { op, call } => Some((*op, call.clone())),
            _ => None,
        });
        actions = match next {
            Some((op, Call::Relist)) => d.relist(op, vec![running(id, pid)]),
            Some(next) => return next,
            None => d.fire_timer().1,
        };
    }
}

#[test]
fn a_kill_is_given_up_after_its_own_attempts_not_those_of_the_step_before() {
    // The stop's signal is refused twice (retried, after a look); then the
    // user's kill is refused again and again: it is given up at its own
    // fifth refusal, not sooner for the stop's failures before it.
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(10)),
        signal: None,
    });
    let mut op = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    for _ in 0..2 {
        let actions = d.fail(op, FailureKind::Other);
        op = next_call_after(&mut d, actions, "c1", 42).0;
    }
    let hup = Signal::try_from(1).expect("valid");
    let (req, _) = d.command(Command::Kill {
        id: cid("c1"),
        signal: hup,
    });
    // The stop's third attempt is out; refused, the user's kill goes next.
    let actions = d.fail(op, FailureKind::Other);
    let (mut op, mut call) = next_call_after(&mut d, actions, "c1", 42);
    let max = CoreConfig::default().retry_attempts_max;
    for attempt in 1..=max {
        assert_eq!(
            call,
            Call::Kill {
                id: cid("c1"),
                signal: hup,
                all: false
            },
            "attempt {attempt}"
        );
        if attempt == max {
            break;
        }
        let actions = d.fail(op, FailureKind::Other);
        let answered = answers(&actions);
        assert!(answered.is_empty(), "attempt {attempt}: {answered:?}");
        (op, call) = next_call_after(&mut d, actions, "c1", 42);
    }
    let answered = answers(&d.fail(op, FailureKind::Other));
    assert!(
        matches!(&answered[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Internal),
        "{answered:?}"
    );
}

#[test]
fn a_kill_that_ends_a_restart_meets_the_waits_for_not_running() {
    // The policy's start is under way (its task create sent), so `docker
    // wait` waits; a kill that means "stay down" ends the restart: the container is down, and the wait is
    // answered then, not never (found by the properties at 20,000 cases).
    let (mut d, _) = policy_restart_due("c1", 42);
    let (wait, actions) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    assert_eq!(answers(&actions), vec![], "restarting: it waits");
    let (kill, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    assert_eq!(
        answers(&actions),
        vec![
            (kill, Answer::Done),
            (
                wait,
                Answer::Waited {
                    exit_code: 1,
                    error: None
                }
            )
        ]
    );
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
}

#[test]
fn a_stay_down_kill_after_a_policy_start_was_refused_keeps_the_container_down() {
    // The policy's StartTask is refused (a relist is asked for, the start
    // to be tried again); the user's SIGHUP (no stop signal: "stay down")
    // is delivered to the created task. The start it came after is not
    // sent again: a relist showing the task still created drops it, and
    // the task is deleted (dockerd does not restart a container the user
    // killed). Found by the properties (commands.rs 682:43).
    let (mut d, start) = policy_start_sent("c1", 42, 43);
    let actions = d.fail(start, FailureKind::FailedPrecondition);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let hup = Signal::try_from(1).expect("valid");
    let (kill_req, _) = d.command(Command::Kill {
        id: cid("c1"),
        signal: hup,
    });
    let mut created = support::running("c1", 43);
    created.status = TaskStatus::Created;
    // The listing (no call in flight) shows the start did not take effect:
    // it is dropped, not sent again.
    let actions = d.relist(relist, vec![created]);
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::StartTask { .. })),
        "{actions:?}"
    );
    assert!(!created_record(&d, "c1").intents.start);
    // The retry's backoff over, the user's kill goes to the created task,
    // which is then deleted: never started.
    let (_, actions) = d.fire_timer();
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    assert!(answers(&actions).contains(&(kill_req, Answer::Done)));
    assert_eq!(calls(&actions), vec![Call::DeleteTask { id: cid("c1") }]);
}

#[test]
fn kill_of_a_stopped_container_is_a_conflict() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.exit("c1", 42, 0);
    let (req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    assert!(
        matches!(&actions[..], [Action::Answer(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Conflict)
    );
}

#[test]
fn a_failed_kill_during_an_outage_is_kept_not_retried_blindly() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    assert_eq!(d.fail(kill, FailureKind::Unavailable), vec![]);
    assert_eq!(d.core.connection(), ConnectionState::Down);
    let rec = created_record(&d, "c1");
    assert_eq!(
        rec.intents.kills,
        vec![Signal::SIGKILL],
        "the intent is kept"
    );
}

#[test]
fn a_kill_whose_exit_wins_the_race_is_answered_done() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.exit("c1", 42, 137);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    d.ok(kill);
    assert_eq!(d.core.requests_pending(), 0);
}

#[test]
fn docker_kill_with_sigkill_or_the_stop_signal_keeps_an_always_container_down() {
    let always = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", always.clone(), 42);
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    d.ok(only_call(&actions, |c| matches!(c, Call::Kill { .. })));
    d.exit("c1", 42, 137);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );

    // A signal other than the configured stop signal: the policy restarts it.
    let config = ContainerConfig {
        stop_signal: Some(Signal::SIGTERM),
        ..always
    };
    let mut d = ready_with_running("c2", config, 43);
    let hup = Signal::try_from(1).expect("valid");
    let (_, actions) = d.command(Command::Kill {
        id: cid("c2"),
        signal: hup,
    });
    d.ok(only_call(&actions, |c| matches!(c, Call::Kill { .. })));
    d.exit("c2", 43, 129);
    assert_eq!(
        d.core.container(&cid("c2")).map(|c| c.status),
        Some(Status::Restarting)
    );
}

#[test]
fn kills_repeated_during_an_outage_are_one_delivery() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    let hup = Signal::try_from(1).expect("valid");
    let reqs: Vec<RequestId> = (0..5)
        .map(|_| {
            d.command(Command::Kill {
                id: cid("c1"),
                signal: hup,
            })
            .0
        })
        .collect();
    assert_eq!(created_record(&d, "c1").intents.kills, vec![hup]);
    let relist = d.resubscribe();
    let actions = d.relist(relist, vec![running("c1", 42)]);
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let answered: Vec<RequestId> = answers(&d.ok(kill)).into_iter().map(|(r, _)| r).collect();
    assert_eq!(answered, reqs);
}

#[test]
fn killing_a_restarting_container_cancels_the_restart() {
    let mut d = restarting_after_exit("c1", 42);
    let (req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(calls(&actions), vec![], "no process to signal between runs");
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
    assert_no_restart_pending(&d);
}

/// A start refused as "not in created state" (its answer may have been
/// lost) is looked into; a "stay down" kill comes meanwhile. SIGTERM does
/// nothing to a created task, and the listing after the kill still shows
/// it created: the start is ruled out, and the created task, nobody's to
/// start now, is deleted, not left in containerd for ever (seed 30464).
#[test]
fn a_created_task_whose_start_a_kill_ruled_out_is_deleted() {
    let (mut d, start_req, start) = start_sent("c1", 116);
    let actions = d.fail(start, FailureKind::FailedPrecondition);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let created = TaskInfo {
        status: TaskStatus::Created,
        ..running("c1", 116)
    };
    d.relist(relist, vec![created.clone()]);
    let (kill_req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGTERM,
    });
    assert_eq!(calls(&actions), vec![], "the start's retry is due first");
    // Its retry's backoff over, the kill goes first: the start is not
    // sent again after a kill that means "stay down".
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Retry(cid("c1")));
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    assert!(
        answers(&actions).contains(&(kill_req, Answer::Done)),
        "{actions:?}"
    );
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![created]);
    assert!(
        answers(&actions)
            .iter()
            .any(|(req, a)| *req == start_req && matches!(a, Answer::Error(_))),
        "the start is answered as not carried out: {actions:?}"
    );
    assert_eq!(calls(&actions), vec![Call::DeleteTask { id: cid("c1") }]);
}
