//! OOM kills: handler tests, one input each, with the exact actions it
//! produces. An exit is recorded as an OOM kill from the cgroup's count, or
//! without it from an OOM event of its run, never from our own SIGKILL.

mod support;

use holdfast_core::*;
use std::time::Duration;
use support::*;

#[test]
fn oom_marks_the_exit() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let actions = d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(d.now.wall),
    }));
    assert_eq!(events(&actions), vec![UserEventKind::Oom]);
    d.exit("c1", 42, 137);
    assert_eq!(
        d.core
            .container(&cid("c1"))
            .and_then(|c| c.current_exit())
            .map(|e| e.oom_killed),
        Some(true)
    );
}

fn oom_killed(d: &Driver, id: &str) -> Option<bool> {
    d.core
        .container(&cid(id))
        .and_then(|c| c.current_exit())
        .map(|e| e.oom_killed)
}

#[test]
fn the_cgroup_count_marks_an_oom_killed_child_whose_init_exited_otherwise() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(d.now.wall),
    }));
    d.exit_counting_ooms("c1", 42, 1, Some(1));
    assert_eq!(oom_killed(&d, "c1"), Some(true));
}

#[test]
fn a_stale_oom_event_is_outweighed_by_a_cgroup_that_counted_none() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    // An OOM event of an earlier run, retried late by its shim, names no
    // pid (and here no stamp); the current run is then SIGKILLed from
    // outside.
    d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: None,
    }));
    d.exit_counting_ooms("c1", 42, 137, Some(0));
    assert_eq!(oom_killed(&d, "c1"), Some(false));
}

#[test]
fn a_late_oom_event_stamped_before_the_run_began_is_an_earlier_runs() {
    // Seeds 33621 and 403372 of the simulator: an earlier run's OOM event,
    // retried by its shim through an outage, arrives while the next run
    // runs; that run's shim then dies (a 137, its cgroup gone, no count).
    // The stamp the shim put on the event tells it from this run's own.
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let began = d
        .core
        .container(&cid("c1"))
        .and_then(|c| c.record.began_at)
        .map(|at| at.as_unix_nanos());
    let Some(began) = began else {
        panic!("the run has no beginning");
    };
    let actions = d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(WallTime::from_unix_nanos(began - 1)),
    }));
    assert_eq!(events(&actions), vec![], "an earlier run's OOM announced");
    d.exit_counting_ooms("c1", 42, 137, None);
    assert_eq!(oom_killed(&d, "c1"), Some(false));
}

#[test]
fn the_cgroup_count_marks_an_oom_kill_whose_event_never_came() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.exit_counting_ooms("c1", 42, 137, Some(1));
    assert_eq!(oom_killed(&d, "c1"), Some(true));
}

#[test]
fn a_relisted_exit_carries_its_cgroup_count() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::PeriodicRelist);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    let at = d.now.wall;
    let mut task = stopped("c1", 42, 137, at);
    task.oom_kills = Some(2);
    d.relist(relist, vec![task]);
    assert_eq!(oom_killed(&d, "c1"), Some(true));
}

#[test]
fn the_count_of_an_earlier_run_does_not_carry_over() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    let actions = d.exit_counting_ooms("c1", 42, 137, Some(1));
    assert_eq!(oom_killed(&d, "c1"), Some(true));
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 43 }),
    ));
    let start = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.ok(start);
    // No count this time (unreadable), no OOM event: no OOM kill.
    d.advance(Duration::from_secs(1));
    d.exit("c1", 43, 137);
    assert_eq!(oom_killed(&d, "c1"), Some(false));
}

#[test]
fn a_137_that_overtakes_our_sigkill_answer_is_ours_not_the_oom_killers() {
    let mut d = ready_with_running("c1", ContainerConfig::default(), 42);
    d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(d.now.wall),
    }));
    let (_, actions) = d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    // The exit comes before the kill's answer.
    d.exit("c1", 42, 137);
    assert_eq!(
        d.core
            .container(&cid("c1"))
            .and_then(|c| c.current_exit())
            .map(|e| e.oom_killed),
        Some(false)
    );
}

/// Simulator seed 111415: the task being created is OOM-killed before its
/// create is answered. Its OOM event and its exit come while no run is
/// known (the exit names a pid the core has not learned), the create's
/// answer is lost, and a relist finds the task stopped with 137 and no
/// cgroup count: the OOM, published after the create was sent and no
/// later than the exit, is that run's.
#[test]
fn an_oom_before_the_create_was_answered_marks_the_exit_a_relist_finds() {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.create("c1", ContainerConfig::default());
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    d.advance(Duration::from_secs(1));
    let killed_at = d.now.wall;
    let actions = d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(killed_at),
    }));
    assert_eq!(events(&actions), vec![UserEventKind::Oom]);
    d.feed(Input::Event(ContainerdEvent::TaskExit {
        container: cid("c1"),
        exec_id: "c1".to_owned(),
        pid: 140,
        exit_status: 137,
        exited_at: killed_at,
        oom_kills: None,
    }));
    let actions = d.fail(create, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(
        relist,
        vec![TaskInfo {
            container: cid("c1"),
            pid: 140,
            status: TaskStatus::Stopped,
            exit_status: 137,
            exited_at: Some(killed_at),
            oom_kills: None,
        }],
    );
    assert_eq!(oom_killed(&d, "c1"), Some(true));
}

/// An OOM event published before this run's create was sent (an earlier
/// run's, late) is not this run's, even while no run is known.
#[test]
fn an_oom_from_before_the_create_is_not_the_new_runs() {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.create("c1", ContainerConfig::default());
    let stale = d.now.wall;
    d.advance(Duration::from_secs(1));
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    d.advance(Duration::from_secs(1));
    d.feed(Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(stale),
    }));
    let killed_at = d.now.wall;
    let actions = d.fail(create, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    d.relist(
        relist,
        vec![TaskInfo {
            container: cid("c1"),
            pid: 140,
            status: TaskStatus::Stopped,
            exit_status: 137,
            exited_at: Some(killed_at),
            oom_kills: None,
        }],
    );
    assert_eq!(oom_killed(&d, "c1"), Some(false));
}

/// The OOM event of a task being created, delivered twice (containerd
/// replays what a broken stream lost), is one OOM: announced once
/// (properties, minimal case: start, OOM, the same OOM again).
#[test]
fn a_replayed_oom_before_the_create_was_answered_is_announced_once() {
    let mut d = Driver::new();
    assert_eq!(d.connect(vec![]), vec![]);
    d.create("c1", ContainerConfig::default());
    d.command(Command::Start { id: cid("c1") });
    d.advance(Duration::from_secs(1));
    let oom = Input::Event(ContainerdEvent::TaskOom {
        container: cid("c1"),
        published_at: Some(d.now.wall),
    });
    assert_eq!(events(&d.feed(oom.clone())), vec![UserEventKind::Oom]);
    assert_eq!(events(&d.feed(oom)), vec![]);
}
