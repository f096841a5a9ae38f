//! `docker pause` and `docker unpause`: handler tests, one input each, with
//! the exact actions it produces.

mod support;

use holdfast_core::*;
use support::*;

fn ready_with_running(id: &str, pid: u32) -> Driver {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.run(id, ContainerConfig::default(), pid);
    d
}

/// A running container `id` (pid 10), paused through the core.
fn paused(id: &str) -> Driver {
    let mut d = ready_with_running(id, 10);
    let (_, actions) = d.command(Command::Pause { id: cid(id) });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.ok(op);
    assert!(view(&d, id).paused);
    d
}

fn view<'a>(d: &'a Driver, id: &str) -> ContainerView<'a> {
    d.core.container(&cid(id)).expect("the container exists")
}

fn conflict(actions: &[Action], req: RequestId, needle: &str) {
    assert!(
        matches!(actions, [Action::Answer(r, Answer::Error(e))]
            if *r == req && e.kind == ErrorKind::Conflict && e.message.contains(needle)),
        "want a conflict naming {needle:?}: {actions:?}"
    );
}

#[test]
fn pause_freezes_the_task_and_unpause_thaws_it_each_answered_when_containerd_did_it() {
    let mut d = ready_with_running("c1", 10);
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    assert_eq!(
        calls(&actions),
        vec![Call::Pause { id: cid("c1") }],
        "{actions:?}"
    );
    assert!(answers(&actions).is_empty(), "answered before it was done");
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.ok(op);
    assert_eq!(events(&actions), vec![UserEventKind::Pause]);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    let v = view(&d, "c1");
    // dockerd shows a paused container as running and paused.
    assert_eq!((v.status, v.paused), (Status::Running, true));

    let (req, actions) = d.command(Command::Unpause { id: cid("c1") });
    assert_eq!(calls(&actions), vec![Call::Resume { id: cid("c1") }]);
    let op = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    let actions = d.ok(op);
    assert_eq!(events(&actions), vec![UserEventKind::Unpause]);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(!view(&d, "c1").paused);
}

#[test]
fn pause_and_unpause_are_refused_as_dockerd_refuses_them() {
    let mut d = paused("c1");
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    conflict(&actions, req, "is already paused");
    let (req, actions) = d.command(Command::Start { id: cid("c1") });
    conflict(&actions, req, "cannot start a paused container");
    let (req, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    conflict(&actions, req, "You cannot remove a paused container");
    assert!(view(&d, "c1").paused, "a refusal changes nothing");

    let mut d = ready_with_running("c2", 20);
    let (req, actions) = d.command(Command::Unpause { id: cid("c2") });
    conflict(&actions, req, "is not paused");
    d.exit("c2", 20, 0);
    let (req, actions) = d.command(Command::Pause { id: cid("c2") });
    conflict(&actions, req, "is not running");

    let (req, actions) = d.command(Command::Pause { id: cid("nope") });
    assert!(matches!(&actions[..], [Action::Answer(r, Answer::Error(e))]
        if *r == req && e.kind == ErrorKind::NotFound));
}

#[test]
fn a_pause_is_refused_while_containerd_is_unreachable_and_nothing_is_recorded() {
    let mut d = ready_with_running("c1", 10);
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "down".into(),
    )));
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    assert!(matches!(&actions[..], [Action::Answer(r, Answer::Error(e))]
        if *r == req && e.kind == ErrorKind::Unavailable));
    assert_eq!(d.core.requests_pending(), 0);
}

#[test]
fn a_stop_of_a_paused_container_signals_then_thaws_it_so_that_it_can_act() {
    let mut d = paused("c1");
    let (req, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let kill = only_call(
        &actions,
        |c| matches!(c, Call::Kill { signal, .. } if *signal == Signal::SIGTERM),
    );
    let actions = d.ok(kill);
    // dockerd's order: the signal first, then the resume that lets it land.
    assert_eq!(calls(&actions), vec![Call::Resume { id: cid("c1") }]);
    let resume = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    let actions = d.ok(resume);
    assert_eq!(events(&actions), vec![UserEventKind::Unpause]);
    assert!(!view(&d, "c1").paused);
    let actions = d.exit("c1", 10, 143);
    assert_eq!(
        events(&actions),
        vec![UserEventKind::Die { exit_code: 143 }, UserEventKind::Stop]
    );
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
}

#[test]
fn a_forced_remove_of_a_paused_container_kills_then_thaws_it() {
    let mut d = paused("c1");
    let (_, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: true,
        volumes: false,
    });
    let kill = only_call(
        &actions,
        |c| matches!(c, Call::Kill { signal, all: true, .. } if *signal == Signal::SIGKILL),
    );
    let actions = d.ok(kill);
    let resume = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    d.ok(resume);
    let actions = d.exit("c1", 10, 137);
    only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
}

#[test]
fn a_signal_that_is_not_a_stop_leaves_a_paused_container_paused() {
    // With no stop signal configured any signal means "stay down" (dockerd's
    // rule); with one, SIGUSR1 is just a signal.
    let mut d = Driver::new();
    d.connect(vec![]);
    let config = ContainerConfig {
        stop_signal: Some(Signal::SIGTERM),
        ..ContainerConfig::default()
    };
    d.run("c2", config, 20);
    let (_, actions) = d.command(Command::Pause { id: cid("c2") });
    d.ok(only_call(&actions, |c| matches!(c, Call::Pause { .. })));
    let (req, actions) = d.command(Command::Kill {
        id: cid("c2"),
        signal: Signal::try_from(10).expect("SIGUSR1"),
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    assert_eq!(calls(&actions), vec![], "no resume for a plain signal");
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(view(&d, "c2").paused);
}

#[test]
fn an_exit_while_a_pause_is_in_flight_answers_it_not_running_and_its_late_answer_changes_nothing() {
    let mut d = ready_with_running("c1", 10);
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.exit("c1", 10, 0);
    assert!(
        answers(&actions)
            .iter()
            .any(|(r, a)| *r == req
                && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Conflict))
    );
    let actions = d.ok(op);
    assert!(
        !events(&actions).contains(&UserEventKind::Pause),
        "{actions:?}"
    );
    assert!(answers(&actions).is_empty());
    let v = view(&d, "c1");
    assert_eq!((v.status, v.paused), (Status::Exited, false));
}

#[test]
fn a_refused_pause_is_answered_with_containerds_reason_and_the_truth_is_looked_up() {
    let mut d = ready_with_running("c1", 10);
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(op, FailureKind::FailedPrecondition);
    assert!(
        answers(&actions).iter().any(|(r, a)| *r == req
            && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Internal && e.message.contains("Cannot pause"))),
        "{actions:?}"
    );
    only_call(&actions, |c| matches!(c, Call::Relist));
    assert!(!view(&d, "c1").paused);
    assert_eq!(d.core.requests_pending(), 0);
}

#[test]
fn a_pause_whose_answer_was_lost_is_settled_by_the_relist_that_follows() {
    let mut d = ready_with_running("c1", 10);
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(op, FailureKind::Unavailable);
    assert!(answers(&actions).iter().any(
        |(r, a)| *r == req && matches!(a, Answer::Error(e) if e.kind == ErrorKind::Unavailable)
    ));
    // It took effect: the reconnect's relist shows the task paused.
    let relist = d.resubscribe();
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    d.relist(relist, vec![task]);
    let v = view(&d, "c1");
    assert_eq!(
        (v.status, v.paused, v.confirmed),
        (Status::Running, true, true)
    );
}

#[test]
fn a_restarted_daemon_learns_that_a_container_is_paused_from_its_relist() {
    let d = paused("c1");
    let rec = view(&d, "c1").record.clone();
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    assert_eq!(d.connect(vec![task]), vec![]);
    assert!(view(&d, "c1").paused);
    // And an unpause works from there.
    let (_, actions) = d.command(Command::Unpause { id: cid("c1") });
    only_call(&actions, |c| matches!(c, Call::Resume { .. }));
}

#[test]
fn a_pause_event_that_disagrees_with_what_the_core_knows_makes_it_look() {
    let mut d = ready_with_running("c1", 10);
    let actions = d.feed(Input::Event(ContainerdEvent::TaskPaused {
        container: cid("c1"),
    }));
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    assert!(!view(&d, "c1").paused, "an event is no fact to record");
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    d.relist(relist, vec![task]);
    assert!(view(&d, "c1").paused);
    // The echo of what it knows already: nothing to do.
    let actions = d.feed(Input::Event(ContainerdEvent::TaskPaused {
        container: cid("c1"),
    }));
    assert_eq!(actions, vec![]);
}

#[test]
fn a_stay_down_kill_thaws_the_frozen_task_once_and_a_later_pause_holds() {
    let mut d = paused("c1");
    // No stop signal configured: SIGHUP means "stay down" (dockerd's rule).
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::try_from(1).expect("SIGHUP"),
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    let resume = only_call(&actions, |c| matches!(c, Call::Resume { .. }));
    d.ok(resume);
    assert!(!view(&d, "c1").paused);
    // The process survived its SIGHUP; a pause now is a pause.
    let (req, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.ok(op);
    assert_eq!(calls(&actions), vec![], "no thaw after a later pause");
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert!(view(&d, "c1").paused);
}

#[test]
fn a_frozen_task_a_relist_could_not_settle_is_looked_at_again_after_the_call() {
    // The pause's answer is lost (it took effect) and a stop's signal goes
    // out meanwhile: the relist asked for lists the task frozen while the
    // signal is in flight, so it cannot settle the container. Once the
    // signal's answer is in, the core looks again and learns the freeze
    // (found by the properties: "paused as containerd says").
    let mut d = ready_with_running("c1", 10);
    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let pause = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    let actions = d.fail(pause, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let frozen = TaskInfo {
        container: cid("c1"),
        pid: 10,
        status: TaskStatus::Paused,
        exit_status: 0,
        exited_at: None,
        oom_kills: None,
    };
    d.relist(relist, vec![frozen.clone()]);
    assert!(!view(&d, "c1").paused, "settled while a call was in flight");
    let actions = d.ok(kill);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(relist, vec![frozen]);
    assert!(view(&d, "c1").paused, "the freeze is learned");
}

/// Someone freezes `c1` (pid 10): its event makes the core look, the
/// relist shows it frozen, and the core thaws it.
fn frozen_by_someone_else_is_thawed(d: &mut Driver) {
    let actions = d.feed(Input::Event(ContainerdEvent::TaskPaused {
        container: cid("c1"),
    }));
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    let actions = d.relist(relist, vec![task]);
    assert_eq!(
        calls(&actions),
        vec![Call::Resume { id: cid("c1") }],
        "{actions:?}"
    );
}

#[test]
fn a_task_frozen_by_someone_else_after_a_sigkill_went_out_is_thawed_so_that_it_dies() {
    // `docker kill` (SIGKILL) reaches containerd while, unknown to the
    // core, someone froze the task (`ctr tasks pause`): under a v1 freezer
    // the kill waits for a thaw. The freeze's event makes the core look;
    // the relist shows the task frozen, and the core thaws it, as it does
    // when it knew of the freeze before the kill.
    let mut d = ready_with_running("c1", 10);
    let (req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    frozen_by_someone_else_is_thawed(&mut d);
}

#[test]
fn a_sigkill_that_a_start_came_after_is_thawed_too_when_someone_froze_the_task() {
    // `docker start`, then `docker kill` (SIGKILL) and `docker start`
    // while the first start is on its way: the second start joins the
    // first and the kill follows it. Someone freezes the task before the
    // SIGKILL lands (a v1 freezer holds it); the relist shows the freeze.
    // The SIGKILL went out all the same: the task is thawed so that it
    // dies (found by the properties: "SIGKILLed tasks left frozen, never
    // thawed", the later start having cleared "stay down").
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.create("c1", ContainerConfig::default());
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 10 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    let (kill_req, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    assert_eq!(calls(&actions), vec![], "the kill follows the start");
    d.command(Command::Start { id: cid("c1") });
    let actions = d.ok(start);
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    let actions = d.ok(kill);
    assert_eq!(answers(&actions), vec![(kill_req, Answer::Done)]);
    frozen_by_someone_else_is_thawed(&mut d);
}

/// A running container `id` (pid 10) that survived `docker kill -s HUP`
/// (no stop signal: "stay down"), then `docker pause`: its call's op.
fn pause_sent_after_a_stay_down_hup(id: &str) -> (Driver, OpId) {
    let mut d = ready_with_running(id, 10);
    let (_, actions) = d.command(Command::Kill {
        id: cid(id),
        signal: Signal::try_from(1).expect("SIGHUP"),
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(kill);
    let (_, actions) = d.command(Command::Pause { id: cid(id) });
    let pause = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    (d, pause)
}

#[test]
fn a_pause_after_a_stay_down_kill_holds_when_a_relist_shows_it() {
    // `docker kill -s HUP` (no stop signal: it means "stay down") reaches a
    // process that ignores it; then `docker pause`, answered. A relist
    // that shows the freeze the core knows of is no freeze by someone
    // else: nothing thaws the user's pause (found by the helper's survey
    // of relist.rs 281:41; the properties: "Resume with no intent").
    let (mut d, pause) = pause_sent_after_a_stay_down_hup("c1");
    d.ok(pause);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::PeriodicRelist);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    let actions = d.relist(relist, vec![task]);
    assert_eq!(calls(&actions), vec![], "{actions:?}");
    let (_, actions) = d.command(Command::UpdateResources {
        id: cid("c1"),
        update: ResourceUpdate {
            memory_limit_bytes: Some(64 << 20),
            ..Default::default()
        },
    });
    assert!(
        !calls(&actions).contains(&Call::Resume { id: cid("c1") }),
        "{actions:?}"
    );
    assert!(view(&d, "c1").paused);
}

#[test]
fn a_pause_after_a_stay_down_kill_whose_answer_was_lost_holds_too() {
    // As above, but the pause's answer is lost: the relist that follows
    // shows a freeze the view did not know of, and it is the core's own.
    let (mut d, pause) = pause_sent_after_a_stay_down_hup("c1");
    let actions = d.fail(pause, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    let actions = d.relist(relist, vec![task]);
    assert_eq!(calls(&actions), vec![], "{actions:?}");
    assert!(view(&d, "c1").paused);
}

#[test]
fn a_stay_down_kill_after_a_pause_whose_answer_was_lost_thaws_the_freeze_a_relist_shows() {
    // The pause took effect, its answer lost; the user's SIGKILL came
    // after it (a v1 freezer holds it). The freeze the relist shows came
    // before the kill: the task is thawed, so that the kill lands.
    let mut d = ready_with_running("c1", 10);
    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let pause = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    let actions = d.fail(pause, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    d.ok(kill);
    let mut task = running("c1", 10);
    task.status = TaskStatus::Paused;
    // Listed while the kill was in flight: looked at again after it.
    let actions = d.relist(relist, vec![task.clone()]);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let actions = d.relist(relist, vec![task]);
    assert_eq!(
        calls(&actions),
        vec![Call::Resume { id: cid("c1") }],
        "{actions:?}"
    );
}
