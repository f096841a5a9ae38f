//! `docker start`: handler tests, one input each, with the exact actions
//! it produces. A start is answered once its run began (or within its
//! bounds), and a run is told from an earlier one that reused its pid.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn start_creates_then_starts_the_task() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: Default::default(),
    });
    d.ok(OpId(3));
    let (req, actions) = d.command(Command::Start { id: cid("c1") });
    assert!(matches!(&actions[0], Action::Persist(r) if r.intents.start));
    // When the create is sent is recorded first: after a crash, a task
    // found with the last run's (reused) pid is told from it by this.
    assert!(matches!(&actions[1], Action::Persist(r) if r.create_sent_at == Some(d.now.wall)));
    assert_eq!(
        actions[2],
        Action::Call {
            op: OpId(4),
            call: Call::CreateTask { id: cid("c1") }
        }
    );
    let actions = d.feed(Input::ActionResult(
        OpId(4),
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    assert!(matches!(&actions[0], Action::Persist(r) if r.pid == Some(42) && r.run == 1));
    // The start is recorded as sent before it is sent: if its answer is
    // lost, the run may have started.
    assert!(matches!(&actions[1], Action::Persist(r) if r.start_sent));
    assert_eq!(
        actions[2],
        Action::Call {
            op: OpId(5),
            call: Call::StartTask { id: cid("c1") }
        }
    );
    let actions = d.ok(OpId(5));
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.started_at == Some(d.now.wall) && !r.intents.start)
    );
    assert_eq!(events(&actions), vec![UserEventKind::Start]);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(actions.len(), 3);
    let (req2, actions) = d.command(Command::Start { id: cid("c1") });
    assert_eq!(actions, vec![Action::Answer(req2, Answer::NotModified)]);
}

#[test]
fn a_late_start_event_of_an_earlier_run_is_no_start_of_a_task_that_reused_its_pid() {
    // Run 1 (pid 42) started and exited. The user's start creates the next
    // task; its answer is lost and a relist shows it created, with pid 42
    // again (the kernel reused it). Run 1's start event, delivered late,
    // names pid 42: it must not be taken for this run's start, which was
    // never sent (found by the properties once the world published start
    // events).
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let actions = d.exit("c1", 42, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.fail(create, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let mut created = running("c1", 42);
    created.status = TaskStatus::Created;
    d.relist(relist, vec![created]);
    d.feed(Input::Event(ContainerdEvent::TaskStart {
        container: cid("c1"),
        pid: 42,
        published_at: None,
    }));
    let c = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(c.task, TaskState::Created { pid: 42 }, "{:?}", c.status);
}

/// A created container whose start was just asked for: returns the start
/// request and the op of its CreateTask, in flight.
fn start_in_flight(d: &mut Driver) -> (RequestId, OpId) {
    d.connect(vec![]);
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "web".into(),
        config: Default::default(),
    });
    let op = only_call(&actions, |c| matches!(c, Call::CreateContainer { .. }));
    d.ok(op);
    let (req, actions) = d.command(Command::Start { id: cid("c1") });
    (
        req,
        only_call(&actions, |c| matches!(c, Call::CreateTask { .. })),
    )
}

#[test]
fn a_start_still_in_progress_at_its_bound_waits_for_its_outcome() {
    let mut d = Driver::new();
    let (req, create) = start_in_flight(&mut d);
    // containerd, loaded, is still creating the task at the bound: the
    // start is not given up with an error the user cannot act on.
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::AnswerBound(req));
    assert_eq!(answers(&actions), vec![], "{actions:?}");
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    assert_eq!(answers(&d.ok(start)), vec![(req, Answer::Done)]);
    assert!(
        d.core
            .timers()
            .all(|(_, k)| !matches!(k, TimerKind::AnswerBound(_))),
        "the answered start leaves no bound behind"
    );
}

#[test]
fn a_start_still_wanted_is_never_answered_at_a_bound() {
    // The loaded-containerd case of `docker run`: an error for a start
    // that is then carried out is a lie the user acts on (the CLI reports
    // a failed run); the client is kept waiting for the outcome instead,
    // as dockerd keeps it, however long containerd takes.
    let mut d = Driver::with_config(CoreConfig {
        relist_interval: None,
        ..CoreConfig::default()
    });
    let (req, create) = start_in_flight(&mut d);
    let asked = d.now.at;
    for _ in 0..40 {
        let (kind, actions) = d.fire_timer();
        assert_eq!(kind, TimerKind::AnswerBound(req));
        assert_eq!(answers(&actions), vec![], "{actions:?}");
    }
    assert!(
        d.now.at >= asked + Duration::from_secs(20 * 60),
        "{:?}",
        d.now.at
    );
    // containerd answers the create at last: the start goes on, and is
    // answered by its outcome.
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    assert_eq!(answers(&d.ok(start)), vec![(req, Answer::Done)]);
    assert!(
        d.core
            .timers()
            .all(|(_, k)| !matches!(k, TimerKind::AnswerBound(_))),
        "the answered start leaves no bound behind"
    );
}

#[test]
fn a_start_waits_for_its_outcome_through_a_containerd_outage() {
    let mut d = Driver::new();
    let (req, create) = start_in_flight(&mut d);
    let (kind, _) = d.fire_timer();
    assert_eq!(kind, TimerKind::AnswerBound(req));
    // containerd goes away with the create's answer: the start is not
    // told "unreachable" (it would be carried out after all).
    d.advance(Duration::from_secs(5));
    let actions = d.fail(create, FailureKind::Unavailable);
    assert_eq!(answers(&actions), vec![], "{actions:?}");
    assert!(created_record(&d, "c1").intents.start, "still wanted");
    // It comes back; its relist shows the task the create made: the start
    // is carried out and answered.
    let relist = d.resubscribe();
    let mut created = running("c1", 42);
    created.status = TaskStatus::Created;
    let actions = d.relist(relist, vec![created]);
    assert_eq!(answers(&actions), vec![], "{actions:?}");
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    assert_eq!(answers(&d.ok(start)), vec![(req, Answer::Done)]);
}

#[test]
fn a_start_waiting_past_its_bound_is_answered_when_a_stop_cancels_it() {
    let mut d = Driver::new();
    let (req, create) = start_in_flight(&mut d);
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let _start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::AnswerBound(req));
    assert_eq!(answers(&actions), vec![], "still in progress: {actions:?}");
    // The user stops it: the start is no longer wanted, nothing is left
    // to wait for.
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Internal),
        "{actions:?}"
    );
}

fn started_until_start_call(
    d: &mut Driver,
    id: &str,
    config: ContainerConfig,
    pid: u32,
) -> (RequestId, OpId) {
    let (_, actions) = d.command(Command::Create {
        id: cid(id),
        name: format!("n-{id}"),
        config: config.into(),
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
    let (req, actions) = d.command(Command::Start { id: cid(id) });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(create, Ok(Done::TaskCreated { pid })));
    (
        req,
        only_call(&actions, |c| matches!(c, Call::StartTask { .. })),
    )
}

#[test]
fn an_exit_that_overtakes_the_start_answer_is_one_run_and_honours_auto_remove() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let config = ContainerConfig {
        auto_remove: true,
        ..Default::default()
    };
    let (start_req, start) = started_until_start_call(&mut d, "c1", config, 42);
    // `docker run --rm busybox true`: the exit comes before the start's answer.
    let actions = d.exit("c1", 42, 0);
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Start, UserEventKind::Die { exit_code: 0 }]
    );
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    assert_eq!(
        d.ok(start),
        vec![Action::Call {
            op: OpId(6),
            call: Call::DeleteTask { id: cid("c1") }
        }]
    );
    let actions = d.ok(OpId(6));
    assert_eq!(
        calls(&actions),
        vec![Call::DeleteContainer { id: cid("c1") }],
        "removed, not started again"
    );
}

#[test]
fn a_failed_start_answers_not_running_waits_and_removes_an_auto_remove_container() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let config = ContainerConfig {
        auto_remove: true,
        ..Default::default()
    };
    let (_, actions) = d.command(Command::Create {
        id: cid("c1"),
        name: "x1".into(),
        config: config.into(),
    });
    d.ok(only_call(&actions, |c| {
        matches!(c, Call::CreateContainer { .. })
    }));
    let (removed, _) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::Removed,
    });
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let (not_running, _) = d.command(Command::Wait {
        id: cid("c1"),
        condition: WaitCondition::NotRunning,
    });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.fail(create, FailureKind::Invalid);
    let got = answers(&actions);
    assert!(
        got.iter()
            .any(|(r, a)| *r == start
                && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Invalid))
    );
    assert!(got.contains(&(
        not_running,
        Answer::Waited {
            exit_code: 0,
            error: None
        }
    )));
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteContainer { .. }));
    assert!(answers(&d.ok(delete)).contains(&(
        removed,
        Answer::Waited {
            exit_code: 0,
            error: None
        }
    )));
}

#[test]
fn a_start_event_is_evidence_when_the_start_answer_is_lost() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let (start_req, start) = started_until_start_call(&mut d, "c1", ContainerConfig::default(), 42);
    let actions = d.feed(Input::Event(ContainerdEvent::TaskStart {
        container: cid("c1"),
        pid: 42,
        published_at: None,
    }));
    assert_eq!(events(&actions), vec![UserEventKind::Start]);
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.task),
        Some(TaskState::Running { pid: 42 })
    );
    // The answer is lost; the task later vanishes with its shim: an exit, unknown.
    d.fail(start, FailureKind::Unavailable);
    let relist = d.resubscribe();
    d.relist(relist, vec![]);
    let exit = d
        .core
        .container(&cid("c1"))
        .and_then(|c| c.current_exit().cloned())
        .expect("an exit");
    assert_eq!((exit.exit_code, exit.error.is_some()), (255, true));
}

#[test]
fn a_late_start_event_of_an_earlier_run_whose_pid_came_back_is_no_start() {
    // Run 1 (pid 42) started and exited. `docker start` again: the new
    // task gets pid 42 again, its StartTask goes out and its answer is
    // lost. Run 1's TaskStart, delivered again after an outage, names pid
    // 42 too: published before this run began, it says nothing of this
    // run's start, which is not said done (found by the properties: the
    // task "went back" to created at the next relist). This run's own
    // start event still is evidence.
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 42);
    let run1_started = d.now.wall;
    d.advance(Duration::from_secs(1));
    let actions = d.exit("c1", 42, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    d.advance(Duration::from_secs(1));
    let (start_req, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.fail(start, FailureKind::Deadline);
    let actions = d.feed(Input::Event(ContainerdEvent::TaskStart {
        container: cid("c1"),
        pid: 42,
        published_at: Some(run1_started),
    }));
    assert!(
        !answers(&actions).contains(&(start_req, Answer::Done)),
        "an earlier run's start event said this start done: {actions:?}"
    );
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.task),
        Some(TaskState::Created { pid: 42 })
    );
    let actions = d.feed(Input::Event(ContainerdEvent::TaskStart {
        container: cid("c1"),
        pid: 42,
        published_at: Some(d.now.wall),
    }));
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.task),
        Some(TaskState::Running { pid: 42 })
    );
}

#[test]
fn a_start_carried_out_on_a_run_that_then_dies_is_not_repeated() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let (start_req, start) = started_until_start_call(&mut d, "c1", ContainerConfig::default(), 42);
    // The start's answer is lost; the process is killed from outside.
    d.fail(start, FailureKind::Unavailable);
    let relist = d.resubscribe();
    let at = d.now.wall;
    let actions = d.relist(relist, vec![stopped("c1", 42, 137, at)]);
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Start, UserEventKind::Die { exit_code: 137 }]
    );
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    assert_eq!(d.ok(delete), vec![], "not started a second time");
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
}

#[test]
fn a_start_refused_after_one_whose_answer_was_lost_looks_before_giving_up() {
    let mut d = Driver::new();
    d.connect(vec![]);
    let (start_req, start) = started_until_start_call(&mut d, "c1", ContainerConfig::default(), 42);
    // The first start took effect; its answer is lost.
    let actions = d.fail(start, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let (_, actions) = d.fire_timer();
    let retry = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    // The retry is refused: no delete of a task that may run, a look instead.
    let actions = d.fail(retry, FailureKind::Other);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    // The relist asked before the retry proves nothing of it; the next does.
    let actions = d.relist(relist, vec![running("c1", 42)]);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![running("c1", 42)]);
    assert_eq!(answers(&actions), vec![(start_req, Answer::Done)]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Running)
    );
}

#[test]
fn a_run_a_stop_came_after_keeps_its_start_when_only_a_relist_tells_it_began() {
    // The StartTask's answer is lost (it took effect) and its event with
    // it; `docker stop` came meanwhile. The relist that shows the task
    // running is the only word that the run began: its start time and
    // `start` event are recorded, and the start is answered done (found
    // by the properties: "ran and exited with no start recorded").
    let (mut d, start_req, start) = start_sent("c1", 10);
    let (stop_req, _) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let actions = d.fail(start, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![running("c1", 10)]);
    assert!(
        events(&actions).contains(&UserEventKind::Start),
        "{actions:?}"
    );
    assert!(
        answers(&actions).contains(&(start_req, Answer::Done)),
        "{actions:?}"
    );
    assert!(created_record(&d, "c1").started_at.is_some());
    assert!(!answers(&actions).iter().any(|(r, _)| *r == stop_req));
    // And the stop goes on to end that run (once the failed call's
    // retry backoff has passed).
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Retry(cid("c1")));
    only_call(&actions, |c| matches!(c, Call::Kill { .. }));
}

#[test]
fn a_run_a_stop_came_after_keeps_its_start_when_only_its_exit_tells_it_began() {
    // As above, with no relist in between: the run's exit is the word.
    let (mut d, _, start) = start_sent("c1", 10);
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    d.fail(start, FailureKind::Deadline);
    d.exit("c1", 10, 143);
    let rec = created_record(&d, "c1");
    assert!(rec.exit.is_some(), "{rec:?}");
    assert!(rec.started_at.is_some(), "{rec:?}");
}

/// Drives a start whose every CreateTask containerd refuses as existing
/// (`refusal`), answering each relist with no task, until the start is
/// answered or `rounds` creates were refused; the answer, if any, and the
/// creates refused.
fn refused_as_existing(d: &mut Driver, start: RequestId, rounds: usize) -> (Option<Answer>, usize) {
    let mut actions = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        if let Some((_, answer)) = answers(&actions).into_iter().find(|(r, _)| *r == start) {
            return (Some(answer), refused);
        }
        let op_of = |want: fn(&Call) -> bool| {
            actions.iter().find_map(|a| match a {
                Action::Call { op, call } if want(call) => Some(*op),
                _ => None,
            })
        };
        let create = op_of(|c| matches!(c, Call::CreateTask { .. }));
        let relist = op_of(|c| matches!(c, Call::Relist));
        if let Some(op) = create.filter(|_| refused < rounds) {
            refused += 1;
            actions = d.fail(op, FailureKind::AlreadyExists);
        } else if let Some(op) = relist {
            actions = d.relist(op, vec![]);
        } else {
            actions = d.fire_timer().1;
        }
    }
    (None, refused)
}

/// A leftover in containerd (a bundle a create cut halfway left behind)
/// refuses every create of the container as existing, and relists find no
/// task: past the retry bound, and refused for half a request's bound,
/// the start fails, saying so, rather than being retried for ever
/// with its answer never coming.
#[test]
fn creates_refused_as_existing_with_no_task_found_fail_the_start() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.create("c1", ContainerConfig::default());
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let mut actions = d.fail(op, FailureKind::AlreadyExists);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    actions.extend(d.relist(relist, vec![]));
    let _ = actions;
    let (answer, refused) = refused_as_existing(&mut d, start, 100);
    match answer {
        Some(Answer::Error(e)) => assert!(e.message.contains("leftover"), "{e:?}"),
        other => panic!("the start was not failed after {refused} refusals: {other:?}"),
    }
    // Past the retry bound and half a request's bound (a passing refusal
    // is retried), not for ever.
    assert!(
        (5..30).contains(&refused),
        "{refused} creates refused before the start failed"
    );
    assert!(!created_record(&d, "c1").intents.start);
}

/// A create whose answer was lost may still be under way in containerd,
/// which refuses another create of the container as existing meanwhile:
/// within that time the refusals are looked into and retried, never a
/// reason to fail the start.
#[test]
fn creates_refused_as_existing_while_a_lost_create_may_run_on_are_retried() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.create("c1", ContainerConfig::default());
    let (start, actions) = d.command(Command::Start { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.fail(op, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(relist, vec![]);
    let (answer, refused) = refused_as_existing(&mut d, start, 12);
    assert!(refused > 5, "{refused} refusals: past the retry bound");
    // At most told, at its bound, that the start is still to come.
    if let Some(Answer::Error(e)) = &answer {
        assert!(e.message.contains("will be carried out"), "{e:?}");
    }
    assert!(created_record(&d, "c1").intents.start, "{answer:?}");
}
