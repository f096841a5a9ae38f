//! Relists: handler tests, one input each, with the exact actions it
//! produces. A complete relist records the exits missed, never resurrects
//! one, tells a new run from an old one with its pid, and a listing that
//! cannot prove anything (a placeholder, one made stale) is looked at again.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn a_relist_records_exits_missed_while_disconnected() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 41);
    d.run("c2", ContainerConfig::default(), 42);
    d.run("c3", ContainerConfig::default(), 43);
    d.feed(Input::Connection(ConnectionFact::StreamBroken(
        OpId(1),
        "eof".into(),
    )));
    let exited_at = WallTime::from_unix_nanos(WALL0 + 5);
    let relist = d.resubscribe();
    let actions = d.relist(
        relist,
        vec![running("c1", 41), stopped("c2", 42, 7, exited_at)],
    );
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!((c1.status, c1.confirmed), (Status::Running, true));
    let c2 = d.core.container(&cid("c2")).expect("c2");
    assert_eq!(
        c2.current_exit().map(|e| (e.exit_code, e.finished_at)),
        Some((7, exited_at))
    );
    let c3 = d.core.container(&cid("c3")).expect("c3");
    let exit = c3.current_exit().expect("a vanished task is an exit");
    assert_eq!((exit.exit_code, exit.error.is_some()), (255, true));
    let mut deletes = calls(&actions);
    deletes.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    assert_eq!(deletes, vec![Call::DeleteTask { id: cid("c2") }]);
    // A late TaskExit event for c2 (the shim retried it) changes nothing.
    assert_eq!(d.exit("c2", 42, 1), vec![]);
}

/// c1 running (pid 42), containerd unreachable, the stream live again: the
/// driver and the op of the relist that follows.
fn relisting_after_an_outage() -> (Driver, OpId) {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    let relist = d.resubscribe();
    (d, relist)
}

/// c1 running (pid 41), a user's SIGHUP to it in flight, then the stream
/// broken and a relist asked for on the new subscription: the driver,
/// the kill's op and the relist's.
fn kill_in_flight_then_relist_asked() -> (Driver, OpId, OpId) {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.run("c1", ContainerConfig::default(), 41);
    let hup = Signal::try_from(1).expect("valid");
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: hup,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.feed(Input::Connection(ConnectionFact::StreamBroken(
        OpId(1),
        "eof".into(),
    )));
    let relist = d.resubscribe();
    (d, kill, relist)
}

#[test]
fn a_relist_that_a_later_answer_made_stale_is_followed_by_another_at_once() {
    // A relist is asked for while a call is in flight; the call is answered
    // before the listing arrives. The listing cannot settle the container
    // (the call may have changed the task after it was read), and it says
    // the task is gone: another relist must look at once, not the periodic
    // one a minute later (simulator seed 45374: a shim died, the container
    // was shown running long after).
    let (mut d, kill, relist) = kill_in_flight_then_relist_asked();
    assert_eq!(calls(&d.ok(kill)), vec![]);
    let actions = d.relist(relist, vec![]);
    let again = only_call(&actions, |c| matches!(c, Call::Relist));
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(
        c1.status,
        Status::Running,
        "the stale listing settles nothing"
    );
    d.relist(again, vec![]);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    let exit = c1.current_exit().expect("the vanished task is an exit");
    assert_eq!(exit.exit_code, 255);
}

#[test]
fn a_call_answered_not_found_leaves_a_relist_it_overlapped_able_to_settle() {
    // As above, but containerd answers the kill "not found": it found
    // nothing to signal, so it changed nothing, and the listing settles
    // the container. (Simulator seed 31016: a stop's kill, retried on a
    // backoff shorter than a relist took, kept every relist from settling
    // a task whose shim had died with its exit; it was shown running.)
    let (mut d, kill, relist) = kill_in_flight_then_relist_asked();
    d.fail(kill, FailureKind::NotFound);
    d.relist(relist, vec![]);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    let exit = c1
        .current_exit()
        .expect("the listing settles it: the vanished task is an exit");
    assert_eq!(exit.exit_code, 255);
}

#[test]
fn a_listing_of_the_last_run_stopped_is_no_exit_of_the_next_with_its_pid() {
    // Run 1 exited and was deleted; the start of run 2 is in flight when
    // the stream breaks, and the relist is read before run 2 exists: it
    // lists run 1's task, stopped. Run 2 got the same pid (the kernel
    // reused it). That stopped task is not run 2's exit (found by the
    // properties: an exit that never happened).
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let exited_at = d.now.wall;
    let actions = d.exit("c1", 42, 143);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    d.advance(Duration::from_secs(1));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    d.feed(Input::Connection(ConnectionFact::StreamBroken(
        OpId(1),
        "eof".into(),
    )));
    let relist = d.resubscribe();
    d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 42 }),
    ));
    d.relist(relist, vec![stopped("c1", 42, 143, exited_at)]);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(c1.record.run, 2);
    assert_eq!(c1.current_exit(), None, "run 1's exit taken for run 2's");
}

#[test]
fn after_a_crash_a_reused_pid_is_told_from_the_last_run_by_when_its_create_was_sent() {
    // Simulator seed 43804: run 1 exited, its exit reported again a moment
    // later by a second source; run 2's create was sent and holdfastd
    // crashed before its answer. Run 2 got run 1's pid. After the restart
    // the relist shows it running; the late second report of run 1's exit
    // must not end run 2 (and have its running task deleted).
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let exited_at = d.now.wall;
    let actions = d.exit("c1", 42, 137);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    d.advance(Duration::from_secs(1));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let Some(rec) = actions.iter().rev().find_map(|a| match a {
        Action::Persist(r) => Some(r.clone()),
        _ => None,
    }) else {
        panic!("nothing persisted before the create");
    };
    let mut d = Driver::new();
    d.advance(Duration::from_secs(5));
    d.feed(Input::Restore(vec![rec].into()));
    d.connect(vec![running("c1", 42)]);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!((c1.record.run, c1.status), (2, Status::Running));
    let actions = d.feed(Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: "c1".into(),
        pid: 42,
        exit_status: 0,
        exited_at: WallTime::from_unix_nanos(exited_at.as_unix_nanos() + 1_000_000),
        oom_kills: None,
    }));
    assert_eq!(calls(&actions), vec![], "run 2's task touched");
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!((c1.current_exit(), c1.status), (None, Status::Running));
}

#[test]
fn a_relist_never_resurrects_a_recorded_exit() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::StreamBroken(
        OpId(1),
        "eof".into(),
    )));
    let relist = d.resubscribe();
    d.feed(Input::Relist(relist, RelistPart::Begin));
    d.feed(Input::Relist(relist, RelistPart::Task(running("c1", 42))));
    // The exit arrives on the new stream between the listing and its end.
    d.exit("c1", 42, 0);
    d.feed(Input::Relist(relist, RelistPart::End));
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(c1.status, Status::Exited);
}

#[test]
fn a_periodic_relist_catches_an_exit_lost_on_a_live_stream() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::PeriodicRelist);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let at = d.now.wall;
    let actions = d.relist(relist, vec![stopped("c1", 42, 3, at)]);
    assert_eq!(events(&actions), vec![UserEventKind::Die { exit_code: 3 }]);
    assert_eq!(
        d.core.poll_timeout().map(|(_, k)| k),
        Some(TimerKind::PeriodicRelist),
        "re-armed"
    );
}

#[test]
fn a_placeholder_for_a_task_whose_shim_did_not_answer_proves_nothing() {
    let (mut d, relist) = relisting_after_an_outage();
    let placeholder = placeholder("c1");
    assert_eq!(d.relist(relist, vec![placeholder]), vec![]);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(
        (c1.task, c1.confirmed, c1.record.pid),
        (TaskState::Running { pid: 42 }, false, Some(42))
    );
    // The real exit still counts.
    assert_eq!(
        events(&d.exit("c1", 42, 0)),
        vec![UserEventKind::Die { exit_code: 0 }]
    );
}

#[test]
fn a_relist_with_a_placeholder_is_followed_by_another_soon() {
    let (mut d, relist) = relisting_after_an_outage();
    let placeholder = placeholder("c1");
    d.relist(relist, vec![placeholder]);
    let (at, kind) = d.core.poll_timeout().expect("armed");
    assert_eq!(kind, TimerKind::PeriodicRelist);
    assert!(
        at - d.now.at <= Duration::from_secs(1),
        "soon, not in minutes"
    );
    let (_, actions) = d.fire_timer();
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let at = d.now.wall;
    let actions = d.relist(relist, vec![stopped("c1", 42, 2, at)]);
    assert_eq!(events(&actions), vec![UserEventKind::Die { exit_code: 2 }]);
}

#[test]
fn a_relisted_task_with_the_pid_of_a_deleted_run_is_a_new_run() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let first_exit_at = d.now.wall;
    let create = policy_create_in_flight(&mut d);
    // The create took effect, the kernel reused pid 42, the answer is lost.
    let actions = d.fail(create, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let created = TaskInfo {
        status: TaskStatus::Created,
        ..running("c1", 42)
    };
    d.relist(relist, vec![created]);
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!(
        (view.record.run, view.task),
        (2, TaskState::Created { pid: 42 })
    );
    // The retry starts the task that exists rather than creating another.
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Retry(cid("c1")));
    assert_eq!(calls(&actions), vec![Call::StartTask { id: cid("c1") }]);
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.ok(start);
    // The first run's exit, replayed late, is not the new run's.
    let stale = Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: "c1".into(),
        pid: 42,
        exit_status: 1,
        exited_at: first_exit_at,
        oom_kills: None,
    });
    assert_eq!(d.feed(stale), vec![]);
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!((view.status, view.current_exit()), (Status::Running, None));
}

#[test]
fn a_task_listed_before_its_exit_was_recorded_is_still_not_a_new_run() {
    // The converse of the rule above: the exit is recorded while the task
    // is still known (stopped), so a listing of the same pid predates it.
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::StreamBroken(
        OpId(1),
        "eof".into(),
    )));
    let relist = d.resubscribe();
    d.feed(Input::Relist(relist, RelistPart::Begin));
    d.feed(Input::Relist(relist, RelistPart::Task(running("c1", 42))));
    d.exit("c1", 42, 0);
    d.feed(Input::Relist(relist, RelistPart::End));
    let view = d.core.container(&cid("c1")).expect("exists");
    assert_eq!((view.record.run, view.status), (1, Status::Exited));
}

#[test]
fn a_relist_with_no_answer_in_time_is_asked_again_on_the_live_subscription() {
    let (mut d, relist) = relisting_after_an_outage();
    // containerd is there, slow: the listing read nothing. Asked again at
    // once, on the same stream, not after a reconnect's backoff.
    let actions = d.fail(relist, FailureKind::Deadline);
    let again = only_call(&actions, |c| matches!(c, Call::Relist));
    assert_ne!(again, relist);
    assert_eq!(d.core.connection(), ConnectionState::Relisting);
    let at = d.now.wall;
    let actions = d.relist(again, vec![stopped("c1", 42, 4, at)]);
    assert_eq!(events(&actions), vec![UserEventKind::Die { exit_code: 4 }]);
    assert_eq!(d.core.connection(), ConnectionState::Ready);
}

#[test]
fn a_refresh_with_no_answer_in_time_is_asked_again_and_the_core_stays_ready() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::PeriodicRelist);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.fail(relist, FailureKind::Deadline);
    let again = only_call(&actions, |c| matches!(c, Call::Relist));
    assert_ne!(again, relist);
    assert_eq!(d.core.connection(), ConnectionState::Ready);
    // The first listing's late end proves nothing now; the second's does.
    let at = d.now.wall;
    assert_eq!(d.relist(relist, vec![stopped("c1", 42, 9, at)]), vec![]);
    let actions = d.relist(again, vec![stopped("c1", 42, 5, at)]);
    assert_eq!(events(&actions), vec![UserEventKind::Die { exit_code: 5 }]);
}

#[test]
fn a_relist_refused_otherwise_still_drops_the_connection() {
    let (mut d, relist) = relisting_after_an_outage();
    let actions = d.fail(relist, FailureKind::Other);
    assert_eq!(calls(&actions), vec![]);
    assert_eq!(d.core.connection(), ConnectionState::Down);
}

/// What one shim that does not answer must not do: keep every other
/// container from being seen. Its placeholder is no fact, the rest of the
/// listing counts, and the core acts again.
#[test]
fn a_wedged_shim_leaves_the_rest_of_a_relist_counted_and_the_core_ready() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 41);
    d.run("c2", ContainerConfig::default(), 42);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    let relist = d.resubscribe();
    let at = d.now.wall;
    let actions = d.relist(relist, vec![placeholder("c1"), stopped("c2", 42, 3, at)]);
    assert_eq!(events(&actions), vec![UserEventKind::Die { exit_code: 3 }]);
    assert_eq!(d.core.connection(), ConnectionState::Ready);
    let c1 = d.core.container(&cid("c1")).expect("c1");
    assert_eq!(
        (c1.task, c1.confirmed),
        (TaskState::Running { pid: 41 }, false)
    );
    // The core acts: a stop of the wedged one is sent (it may be stuck,
    // the signal waits in containerd, never a guessed exit).
    let (_, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert!(
        calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::Kill { id, .. } if *id == cid("c1"))),
        "{actions:?}"
    );
}
