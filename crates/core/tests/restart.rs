//! `docker restart`: handler tests, one input each, with the exact actions
//! it produces. A restart is a stop, then a start of its own; a stop during
//! it cancels it, answered at once.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn a_restart_of_a_task_whose_start_was_lost_starts_it_after_the_stop() {
    // The user's start created the task and sent StartTask; its answer was
    // lost and a relist shows the task still created. `docker restart`
    // now: its stop kills the created task, and its start is due after
    // that exit. The exit must not consume it as the earlier start's:
    // a new task is created, and the restart is not said done before
    // (found by a property that a start said done was carried out).
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "n-c1".into(),
        config: ContainerConfig::default().into(),
    });
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    d.ok(op);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(op, Ok(Done::TaskCreated { pid: 42 })));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let actions = d.fail(start, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let mut created = running("c1", 42);
    created.status = TaskStatus::Created;
    d.relist(relist, vec![created]);
    let (restart, _) = d.command(Command::Restart {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(1)),
        signal: None,
    });
    // Whatever the retry sends first, the stop's signal goes out.
    let mut actions = Vec::new();
    while !calls(&actions)
        .iter()
        .any(|c| matches!(c, Call::Kill { .. }))
    {
        actions = d.fire_timer().1;
    }
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(kill);
    let actions = d.exit("c1", 42, 137);
    assert!(
        !answers(&actions)
            .iter()
            .any(|(r, a)| *r == restart && *a == Answer::Done),
        "the restart was said done before its start: {actions:?}"
    );
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let actions = d.ok(delete);
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
}

#[test]
fn a_stop_during_a_restarts_stop_answers_the_restart_at_once() {
    // `docker restart` is stopping the container (its SIGTERM sent, the
    // grace running) when `docker stop` comes: the stop drops the
    // restart's start, so the restart will not happen and is told so now,
    // not left waiting for a bound that would say it is still to come
    // (found by the properties: a request never answered once healed).
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.run("c1", ContainerConfig::default(), 42);
    let (restart, actions) = d.command(Command::Restart {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(10)),
        signal: None,
    });
    let term = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(term);
    let (stop, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let told = answers(&actions);
    assert!(
        told.iter().any(|(r, a)| *r == restart
            && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Conflict)),
        "the restart is not answered by the stop that cancelled it: {actions:?}"
    );
    assert!(
        !told.iter().any(|(r, _)| *r == stop),
        "the stop is answered before the run ended: {actions:?}"
    );
    let actions = d.exit("c1", 42, 143);
    assert!(
        answers(&actions).contains(&(stop, Answer::Done)),
        "the stop is done with the exit: {actions:?}"
    );
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::CreateTask { .. })),
        "the cancelled restart still started the container: {actions:?}"
    );
}

#[test]
fn a_restart_asked_while_the_start_is_on_its_way_restarts_after_it() {
    // `docker restart` while the StartTask is in flight: that start is not
    // the restart's. Its answer starts the run (and answers the start);
    // the restart stops that run and starts another, and is answered done
    // only then, as dockerd (which serializes them) does (found by the
    // properties: "a restart said done with no start sent since").
    let (mut d, start_req, start) = start_sent("c1", 10);
    let (restart_req, _) = d.command(Command::Restart {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(1)),
        signal: None,
    });
    let actions = d.ok(start);
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    assert!(!events(&actions).contains(&UserEventKind::Restart));
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(kill);
    let actions = d.exit("c1", 10, 143);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    let actions = d.ok(delete);
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 11 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let actions = d.ok(start);
    assert_eq!(answers(&actions), vec![(restart_req, Answer::Done)]);
    assert!(events(&actions).contains(&UserEventKind::Restart));
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
}

#[test]
fn a_stop_cancels_a_restart_asked_while_the_start_was_on_its_way() {
    // The restart's own start is not sent yet (the one in flight is the
    // earlier start's): a stop now cancels the restart, as one asked of a
    // running container, and leaves the earlier start to its answer.
    let (mut d, start_req, start) = start_sent("c1", 10);
    let (restart_req, _) = d.command(Command::Restart {
        id: cid("c1"),
        timeout: Some(Duration::from_secs(1)),
        signal: None,
    });
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let refused = answers(&actions);
    assert!(
        matches!(refused.as_slice(), [(r, Answer::Error(e))]
            if *r == restart_req && e.kind == ErrorKind::Conflict),
        "{actions:?}"
    );
    let actions = d.ok(start);
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
}
