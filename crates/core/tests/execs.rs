//! `docker exec`: handler tests, one input each, with the exact actions it
//! produces. An exec is the core's: refused unless its container runs,
//! started by a call the core makes, its end recorded from its `exec_die`
//! or, when that may have been lost, from containerd; never a change to its
//! container's run.

mod support;

use holdfast_core::*;
use std::sync::Arc;
use support::*;

const EXEC: &str = "e1";

fn spec() -> Arc<ExecSpec> {
    Arc::new(ExecSpec {
        cmd: vec!["sh".into(), "-c".into(), "exit 3".into()],
        attach_stdout: true,
        ..ExecSpec::default()
    })
}

fn running(id: &str, pid: u32) -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.run(id, ContainerConfig::default(), pid);
    d
}

fn create_exec(d: &mut Driver, id: &str) -> Vec<Action> {
    let (req, actions) = d.command(Command::CreateExec {
        id: cid(id),
        exec_id: EXEC.into(),
        spec: spec(),
    });
    assert!(
        answers(&actions).contains(&(req, Answer::Done)),
        "{actions:?}"
    );
    actions
}

/// A running container `c1` (pid 10) whose exec was started: its start
/// call's op, not answered yet, and the start's request.
fn exec_starting(d: &mut Driver) -> (RequestId, OpId) {
    create_exec(d, "c1");
    let (req, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    let op = only_call(&actions, |c| matches!(c, Call::StartExec { .. }));
    (req, op)
}

fn exec_state(d: &Driver) -> ExecState {
    d.core.exec(EXEC).expect("the exec exists").1.state
}

fn exec_exit(d: &mut Driver, pid: u32, status: u32) -> Vec<Action> {
    let exited_at = d.now.wall;
    d.feed(Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: EXEC.into(),
        pid,
        exit_status: status,
        exited_at,
        oom_kills: None,
    }))
}

fn conflict(actions: &[Action], req: RequestId, needle: &str) {
    assert!(
        matches!(actions, [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains(needle)),
        "want a conflict naming {needle:?}: {actions:?}"
    );
}

#[test]
fn an_exec_is_created_then_started_by_the_core_and_its_exit_recorded_without_touching_its_container()
 {
    let mut d = running("c1", 10);
    let actions = create_exec(&mut d, "c1");
    // Recorded with its container (persisted), nothing asked of containerd.
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert!(matches!(&actions[0], Action::Persist(r) if r.execs.len() == 1));
    assert_eq!(exec_state(&d), ExecState::Created);

    let (req, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    // Owned before it is made: a crash from here on leaves a record that
    // asks how it ended.
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.execs[0].state == ExecState::Starting),
        "{actions:?}"
    );
    assert_eq!(
        calls(&actions),
        vec![Call::StartExec {
            id: cid("c1"),
            exec_id: EXEC.into(),
            spec: spec(),
            stdin: false,
        }]
    );
    assert!(answers(&actions).is_empty(), "answered before it ran");
    let op = only_call(&actions, |c| matches!(c, Call::StartExec { .. }));
    let actions = d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(exec_state(&d), ExecState::Running { pid: 20 });

    let actions = exec_exit(&mut d, 20, 3);
    assert_eq!(
        events(&actions),
        vec![UserEventKind::ExecDie {
            exec_id: EXEC.into(),
            exit_code: 3,
        }]
    );
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(3) });
    // Its process is released in containerd; the container runs on.
    assert_eq!(
        calls(&actions),
        vec![Call::DeleteExec {
            id: cid("c1"),
            exec_id: EXEC.into(),
        }]
    );
    let v = d.core.container(&cid("c1")).expect("exists");
    assert_eq!((v.status, v.record.exit.clone()), (Status::Running, None));
    let op = only_call(&actions, |c| matches!(c, Call::DeleteExec { .. }));
    let actions = d.ok(op);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert!(d.core.exec(EXEC).expect("kept for inspect").1.released);
}

#[test]
fn an_exec_is_refused_in_a_container_that_is_not_running_or_is_paused() {
    let mut d = Driver::new();
    d.connect(vec![]);
    d.create("c1", ContainerConfig::default());
    let (req, actions) = d.command(Command::CreateExec {
        id: cid("c1"),
        exec_id: EXEC.into(),
        spec: spec(),
    });
    conflict(&actions, req, "is not running");

    let mut d = running("c1", 10);
    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.ok(op);
    let (req, actions) = d.command(Command::CreateExec {
        id: cid("c1"),
        exec_id: EXEC.into(),
        spec: spec(),
    });
    conflict(&actions, req, "is paused");
}

#[test]
fn an_exec_starts_once_and_an_unknown_one_is_not_found() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    let (req, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    conflict(&actions, req, "has already run or is running");
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    let (req, actions) = d.command(Command::StartExec {
        exec_id: "nope".into(),
        detach: false,
    });
    assert!(
        matches!(actions.as_slice(), [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::NotFound),
        "{actions:?}"
    );
}

#[test]
fn an_exec_whose_process_cannot_start_is_over_with_126_and_the_start_is_refused() {
    let mut d = running("c1", 10);
    let (req, op) = exec_starting(&mut d);
    let actions = d.fail(op, FailureKind::Invalid);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Invalid && e.message.starts_with("exec failed")),
        "{actions:?}"
    );
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(126) });
    assert!(
        calls(&actions).is_empty(),
        "nothing to release: {actions:?}"
    );
}

#[test]
fn a_start_whose_answer_was_lost_is_looked_at_and_a_running_exec_is_kept() {
    let mut d = running("c1", 10);
    let (req, op) = exec_starting(&mut d);
    let actions = d.fail(op, FailureKind::Deadline);
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(_))] if *r == req),
        "the requester is told: {actions:?}"
    );
    // It may run: containerd is asked, never assumed.
    assert_eq!(exec_state(&d), ExecState::Starting);
    let look = only_call(&actions, |c| matches!(c, Call::ExecState { .. }));
    let actions = d.feed(Input::ActionResult(
        look,
        Ok(Done::Process {
            pid: 20,
            exit_code: None,
        }),
    ));
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert_eq!(exec_state(&d), ExecState::Running { pid: 20 });
}

#[test]
fn an_exec_exit_lost_in_an_outage_is_learned_from_containerd_after_the_relist() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    // containerd goes away; the exec's exit event is lost meanwhile.
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "gone".into(),
    )));
    let relist = d.resubscribe();
    let actions = d.relist(relist, vec![running_task("c1", 10)]);
    assert_eq!(exec_state(&d), ExecState::Running { pid: 20 });
    let look = only_call(
        &actions,
        |c| matches!(c, Call::ExecState { exec_id, .. } if exec_id == EXEC),
    );
    let actions = d.feed(Input::ActionResult(
        look,
        Ok(Done::Process {
            pid: 20,
            exit_code: Some(7),
        }),
    ));
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(7) });
    assert_eq!(
        events(&actions),
        vec![UserEventKind::ExecDie {
            exec_id: EXEC.into(),
            exit_code: 7,
        }]
    );
    only_call(&actions, |c| matches!(c, Call::DeleteExec { .. }));
}

#[test]
fn a_restarted_daemon_asks_how_a_running_exec_ended() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    let actions = d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    let rec = persisted(&actions).expect("the running exec is persisted");
    // holdfastd restarts from its records.
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![running_task("c1", 10)]);
    only_call(&actions, |c| matches!(c, Call::ExecState { .. }));
    assert_eq!(exec_state(&d), ExecState::Running { pid: 20 });
}

#[test]
fn an_exec_exit_never_ends_its_container_nor_erases_its_oom_evidence() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    // The OOM killer: an event naming no pid, then (no cgroup count here)
    // an exec's exit in between, then the init's 137.
    d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: None,
    }));
    exec_exit(&mut d, 20, 137);
    let v = d.core.container(&cid("c1")).expect("exists");
    assert_eq!(v.status, Status::Running, "an exec's exit ends nothing");
    d.exit("c1", 10, 137);
    let exit = d
        .core
        .container(&cid("c1"))
        .and_then(|v| v.record.exit.clone())
        .expect("the init's exit is recorded");
    assert!(exit.oom_killed, "the OOM seen in the run stays seen");
}

#[test]
fn the_end_of_the_run_is_asked_for_execs_not_heard_before_the_task_is_deleted() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    // The init exits; the exec's own exit event never comes.
    let actions = d.exit("c1", 10, 0);
    let look = only_call(&actions, |c| matches!(c, Call::ExecState { .. }));
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::DeleteTask { .. })),
        "the task (and the exec's status) is kept until asked: {actions:?}"
    );
    let actions = d.feed(Input::ActionResult(
        look,
        Ok(Done::Process {
            pid: 20,
            exit_code: Some(137),
        }),
    ));
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(137) });
    only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
}

#[test]
fn an_exec_asked_to_start_as_its_run_ends_is_refused() {
    let mut d = running("c1", 10);
    create_exec(&mut d, "c1");
    // A kill is in flight: the exec's start waits behind it.
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let (req, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    assert!(calls(&actions).is_empty(), "{actions:?}");
    let actions = d.exit("c1", 10, 137);
    assert!(
        answers(&actions)
            .iter()
            .any(|(r, a)| *r == req
                && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Conflict)),
        "{actions:?}"
    );
    d.ok(kill);
    assert_eq!(exec_state(&d), ExecState::Created);
}

#[test]
fn a_terminal_is_resized_only_while_its_process_runs() {
    let mut d = running("c1", 10);
    let (req, actions) = d.command(Command::Resize {
        id: cid("c1"),
        exec_id: None,
        width: 80,
        height: 24,
    });
    let op = only_call(&actions, |c| {
        matches!(
            c,
            Call::ResizePty {
                exec_id: None,
                width: 80,
                height: 24,
                ..
            }
        )
    });
    assert_eq!(answers(&d.ok(op)), vec![(req, Answer::Done)]);
    create_exec(&mut d, "c1");
    let (req, actions) = d.command(Command::Resize {
        id: cid("c1"),
        exec_id: Some(EXEC.into()),
        width: 80,
        height: 24,
    });
    conflict(&actions, req, "is not running");
}

fn running_task(id: &str, pid: u32) -> TaskInfo {
    TaskInfo {
        container: cid(id),
        pid,
        status: TaskStatus::Running,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    }
}

fn persisted(actions: &[Action]) -> Option<Record> {
    actions.iter().rev().find_map(|a| match a {
        Action::Persist(r) => Some(r.clone()),
        _ => None,
    })
}

/// A start that waited behind another call of its container (a commit's
/// read) until its answer bound did not begin, and is told so: it is not
/// begun later (nobody would read what it says), and the exec, still as
/// made, starts when asked again. (Found by the properties: it was told
/// "carried out when possible", and then never was.)
#[test]
fn an_exec_start_not_begun_by_its_bound_is_told_so_and_can_be_started_again() {
    let mut d = running("c1", 10);
    let (_, actions) = d.command(Command::ReadChanges {
        id: cid("c1"),
        pause: false,
        layer: "l1".into(),
    });
    let read = only_call(&actions, |c| matches!(c, Call::ReadChanges { .. }));
    create_exec(&mut d, "c1");
    let (req, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: true,
    });
    assert_eq!(calls(&actions), vec![], "waits behind the read");
    d.advance(CoreConfig::default().request_answer_bound);
    let actions = d.feed(Input::Timeout);
    match &answers(&actions)[..] {
        [(r, Answer::Error(e))] if *r == req => {
            assert!(e.message.contains("did not start"), "{}", e.message)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(exec_state(&d), ExecState::Created);
    let actions = d.ok(read);
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::StartExec { .. })),
        "{actions:#?}"
    );
    let (_, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: true,
    });
    only_call(&actions, |c| matches!(c, Call::StartExec { .. }));
}

fn kill_exec(d: &mut Driver) -> (RequestId, Vec<Action>) {
    d.command(Command::KillExec {
        exec_id: EXEC.into(),
        signal: Signal::SIGKILL,
    })
}

#[test]
fn a_kill_of_a_running_exec_is_sent_and_answered_once_delivered_its_container_untouched() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    let (req, actions) = kill_exec(&mut d);
    // Owned before it is sent: a crash from here on still delivers it.
    assert!(
        matches!(&actions[0], Action::Persist(r) if r.execs[0].kill == Some(Signal::SIGKILL)),
        "{actions:?}"
    );
    assert_eq!(
        calls(&actions),
        vec![Call::KillExec {
            id: cid("c1"),
            exec_id: EXEC.into(),
            signal: Signal::SIGKILL,
        }]
    );
    assert!(answers(&actions).is_empty(), "answered before delivered");
    let op = only_call(&actions, |c| matches!(c, Call::KillExec { .. }));
    let actions = d.ok(op);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(calls(&actions).is_empty(), "sent once: {actions:?}");
    let actions = exec_exit(&mut d, 20, 137);
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(137) });
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::Kill { .. })),
        "the container's run goes on: {actions:?}"
    );
}

#[test]
fn a_kill_asked_while_containerd_is_away_is_kept_and_delivered_once_it_is_back() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "gone".into(),
    )));
    let (_, actions) = kill_exec(&mut d);
    assert!(
        calls(&actions).is_empty(),
        "nothing sent to nobody: {actions:?}"
    );
    let relist = d.resubscribe();
    let actions = d.relist(relist, vec![running_task("c1", 10)]);
    only_call(
        &actions,
        |c| matches!(c, Call::KillExec { exec_id, signal: Signal::SIGKILL, .. } if exec_id == EXEC),
    );
}

#[test]
fn a_kill_survives_a_restart_of_the_daemon() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    let (_, actions) = kill_exec(&mut d);
    let rec = persisted(&actions).expect("the kill is persisted");
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![running_task("c1", 10)]);
    let sent: Vec<Call> = calls(&actions);
    assert!(
        sent.iter().any(|c| matches!(c, Call::KillExec { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_kill_of_an_exec_that_ended_or_never_started_is_answered_at_once() {
    let mut d = running("c1", 10);
    create_exec(&mut d, "c1");
    let (req, actions) = kill_exec(&mut d);
    conflict(&actions, req, "is not running");
    let (start, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    let op = only_call(&actions, |c| matches!(c, Call::StartExec { .. }));
    d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    exec_exit(&mut d, 20, 0);
    let (req, actions) = kill_exec(&mut d);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    let _ = start;
    let (req, actions) = d.command(Command::KillExec {
        exec_id: "nope".into(),
        signal: Signal::SIGKILL,
    });
    assert!(
        matches!(answers(&actions).as_slice(), [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::NotFound),
        "{actions:?}"
    );
}

#[test]
fn a_kill_waits_for_a_start_not_yet_answered_and_one_whose_process_ended_first_is_answered() {
    let mut d = running("c1", 10);
    let (_, op) = exec_starting(&mut d);
    let (req, actions) = kill_exec(&mut d);
    assert!(calls(&actions).is_empty(), "no pid yet: {actions:?}");
    let actions = d.feed(Input::ActionResult(op, Ok(Done::ExecStarted { pid: 20 })));
    let kill = only_call(&actions, |c| matches!(c, Call::KillExec { .. }));
    // The process ends before the kill's answer, which then finds nothing.
    let actions = exec_exit(&mut d, 20, 0);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let actions = d.fail(kill, FailureKind::NotFound);
    assert!(answers(&actions).is_empty(), "answered once: {actions:?}");
    assert_eq!(exec_state(&d), ExecState::Exited { code: Some(0) });
    assert_eq!(d.core.exec(EXEC).expect("kept").1.kill, None);
}

/// A kill asked while the exec's start is accepted and not yet sent (a
/// call of its container is in flight) follows the start; it is not
/// refused as "not running" with the process then left to run.
#[test]
fn a_kill_of_an_exec_whose_start_waits_to_be_sent_follows_the_start() {
    let mut d = running("c1", 10);
    create_exec(&mut d, "c1");
    let update = update_in_flight(&mut d, "c1");
    let (_, actions) = d.command(Command::StartExec {
        exec_id: EXEC.into(),
        detach: false,
    });
    assert!(
        calls(&actions).is_empty(),
        "one call at a time: {actions:?}"
    );
    let (kill, actions) = kill_exec(&mut d);
    assert!(answers(&actions).is_empty(), "refused: {actions:?}");
    let actions = d.ok(update);
    let start = only_call(&actions, |c| matches!(c, Call::StartExec { .. }));
    let actions = d.feed(Input::ActionResult(
        start,
        Ok(Done::ExecStarted { pid: 20 }),
    ));
    let op = only_call(&actions, |c| matches!(c, Call::KillExec { .. }));
    let actions = d.ok(op);
    assert!(
        answers(&actions).contains(&(kill, Answer::Done)),
        "{actions:?}"
    );
}
