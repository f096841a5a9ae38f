//! Restart policies: handler tests, one input each, with the exact actions
//! it produces. A policy restarts only after an exit it saw, with
//! dockerd's backoff, and never one a user ruled out.

mod support;

use holdfast_core::*;
use support::*;

#[test]
fn restart_policy_restarts_after_an_observed_exit_with_backoff() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::OnFailure { max_retries: 1 },
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let actions = d.exit("c1", 42, 1);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Restarting)
    );
    assert_eq!(d.ok(delete), vec![]);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::RestartBackoff(cid("c1")));
    assert!(matches!(&actions[0], Action::Persist(r) if r.restart_count == 1 && r.intents.start));
    let status = |d: &Driver| d.core.container(&cid("c1")).map(|c| c.status);
    // Until the new run is up, it is the policy's restart in progress, as
    // dockerd shows it: neither "exited" nor "running" without a start.
    assert_eq!(status(&d), Some(Status::Restarting));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let start = only_call(
        &d.feed(Input::ActionResult(
            create,
            Ok(Done::TaskCreated { pid: 43 }),
        )),
        |c| matches!(c, Call::StartTask { .. }),
    );
    assert_eq!(status(&d), Some(Status::Restarting));
    d.ok(start);
    assert_eq!(status(&d), Some(Status::Running));
    // The second failure exceeds max_retries: no more restarts.
    let actions = d.exit("c1", 43, 1);
    assert_eq!(calls(&actions), vec![Call::DeleteTask { id: cid("c1") }]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
    assert_no_restart_pending(&d);
}

#[test]
fn a_user_stop_suppresses_the_restart_policy() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    d.ok(OpId(6));
    d.exit("c1", 42, 143);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
    assert_no_restart_pending(&d);
}

#[test]
fn a_stop_while_a_refused_policy_start_is_cleaned_up_rules_out_the_retry() {
    // The policy's restart created its task, and containerd refused the
    // start: the task is deleted and the restart tried again after its
    // backoff. A user's stop meanwhile (the task, created, still counts as
    // running) must cancel that retry, as it cancels any policy restart
    // (simulator seed 44701: the retry started the container after the stop).
    let (mut d, start) = policy_start_sent("c1", 42, 43);
    let actions = d.fail(start, FailureKind::Other);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert_no_restart_pending(&d);
    let actions = d.ok(delete);
    assert!(
        !calls(&actions)
            .iter()
            .any(|c| matches!(c, Call::CreateTask { .. })),
        "{actions:?}"
    );
    assert_no_restart_pending(&d);
}

#[test]
fn a_sigkill_while_a_policy_start_is_in_flight_rules_out_its_retry() {
    // The policy's restart created its task and sent the start; the user's
    // `docker kill` (SIGKILL: stay down) comes before the start's answer.
    // The start then fails: it must not be tried again after a backoff, as
    // a policy start would be (simulator seed 411794: the kill was followed
    // by a restart the user had ruled out).
    let (mut d, start) = policy_start_sent("c1", 42, 43);
    d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    assert_no_restart_pending(&d);
    d.fail(start, FailureKind::Other);
    assert_no_restart_pending(&d);
    let rec = created_record(&d, "c1");
    assert!(!rec.intents.start && !rec.intents.policy_restart, "{rec:?}");
}

#[test]
fn a_sigkill_after_a_policy_start_was_sent_never_deletes_the_task_it_may_have_started() {
    // The policy's start was sent and its answer lost; the user's SIGKILL
    // comes meanwhile. The start may have taken effect (a relist shows the
    // task running), so the kill is delivered to it, and the task is not
    // deleted as "created, never started" before its exit is seen
    // (simulator seed 36570, against the first form of the fix above).
    let (mut d, start) = policy_start_sent("c1", 42, 43);
    d.command(Command::Kill {
        id: cid("c1"),
        signal: Signal::SIGKILL,
    });
    let mut actions = d.fail(start, FailureKind::Deadline);
    let relist = only_call(&actions, |c| matches!(c, Call::Relist));
    // The kill goes out before the relist has answered.
    while let Some((_, TimerKind::Retry(_))) = d.core.poll_timeout() {
        actions.extend(d.fire_timer().1);
    }
    let kill = only_call(&actions, |c| matches!(c, Call::Kill { .. }));
    actions.extend(d.ok(kill));
    actions.extend(d.relist(relist, vec![running("c1", 43)]));
    for call in calls(&actions) {
        assert!(
            !matches!(call, Call::DeleteTask { .. }),
            "{call:?} while the task may run: {actions:?}"
        );
    }
    d.exit("c1", 43, 137);
    assert_no_restart_pending(&d);
}

#[test]
fn a_policy_restart_in_progress_survives_a_daemon_restart_and_a_refused_create() {
    // The restart policy's backoff passed and its start began; holdfastd
    // dies before the new run is up. The restored start is still the
    // policy's: shown restarting, and when containerd refuses its create the
    // restart is tried again after a backoff, not dropped (simulator seed
    // 421896: the container stayed exited although its policy wanted it).
    let (d, _) = policy_restart_due("c1", 42);
    let rec = created_record(&d, "c1");
    assert!(rec.intents.start);
    let mut d = Driver::new();
    d.feed(Input::Restore(vec![rec].into()));
    let actions = d.connect(vec![]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Restarting)
    );
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    d.fail(create, FailureKind::Invalid);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Restarting)
    );
    let backoff = TimerKind::RestartBackoff(cid("c1"));
    let armed = d.core.timers().any(|(_, kind)| *kind == backoff);
    assert!(armed, "the policy's restart is dropped");
}

#[test]
fn a_restarting_container_needs_force_to_remove_and_stop_cancels_the_restart() {
    let mut d = restarting_after_exit("c1", 42);
    let (req, actions) = d.command(Command::Remove {
        id: cid("c1"),
        force: false,
        volumes: false,
    });
    assert!(
        matches!(&answers(&actions)[..], [(r, Answer::Error(e))] if *r == req && e.kind == ErrorKind::Conflict)
    );
    let (req, actions) = d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert_eq!(answers(&actions), vec![(req, Answer::Done)]);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
}

#[test]
fn a_refused_policy_restart_is_tried_again_not_dropped() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let delete = only_call(&d.exit("c1", 42, 1), |c| {
        matches!(c, Call::DeleteTask { .. })
    });
    d.ok(delete);
    let (_, actions) = d.fire_timer();
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    // containerd refuses the create (a transient error): nobody waits to
    // be told, so the policy tries again after its backoff.
    let actions = d.fail(create, FailureKind::Other);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Restarting)
    );
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::RestartBackoff(cid("c1")));
    only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
}

#[test]
fn a_stop_during_a_policy_restart_never_shows_the_created_task_as_running() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let actions = d.exit("c1", 42, 1);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    d.ok(delete);
    let status = |d: &Driver| d.core.container(&cid("c1")).map(|c| c.status);
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::RestartBackoff(cid("c1")));
    let create = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    assert_eq!(status(&d), Some(Status::Exited));
    // The task the restart created is not started, and is deleted.
    let actions = d.feed(Input::ActionResult(
        create,
        Ok(Done::TaskCreated { pid: 43 }),
    ));
    assert!(
        calls(&actions)
            .iter()
            .all(|c| !matches!(c, Call::StartTask { .. })),
        "{actions:?}"
    );
    assert_eq!(status(&d), Some(Status::Exited));
}

#[test]
fn a_policy_restart_stopped_by_the_user_is_not_revived_by_its_failure() {
    let config = ContainerConfig {
        restart_policy: RestartPolicy::Always,
        ..Default::default()
    };
    let mut d = ready_with_running("c1", config, 42);
    let create = policy_create_in_flight(&mut d);
    d.command(Command::Stop {
        id: cid("c1"),
        timeout: None,
        signal: None,
    });
    // containerd refuses the create: the user's stop stands.
    let actions = d.fail(create, FailureKind::Other);
    assert!(calls(&actions).is_empty(), "{actions:?}");
    assert_no_restart_pending(&d);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );
}

#[test]
fn a_policy_update_counts_from_the_next_exit_and_drops_a_restart_it_would_not_make() {
    // Restarting under `always`: updated to `no`, the waiting restart goes.
    let mut d = restarting_after_exit("c1", 10);
    let (req, actions) = d.command(Command::UpdateRestartPolicy {
        id: cid("c1"),
        policy: RestartPolicy::No,
    });
    assert!(matches!(&actions[0], Action::Persist(r)
        if r.config.restart_policy == RestartPolicy::No && !r.intents.policy_restart));
    assert!(matches!(actions.last(), Some(Action::Answer(r, Answer::Done)) if *r == req));
    assert_no_restart_pending(&d);
    assert_eq!(
        d.core.container(&cid("c1")).map(|c| c.status),
        Some(Status::Exited)
    );

    // Running under `no`: updated to `always`, the next exit restarts it.
    let mut d = ready_with_running("c2", ContainerConfig::default(), 20);
    d.command(Command::UpdateRestartPolicy {
        id: cid("c2"),
        policy: RestartPolicy::Always,
    });
    d.exit("c2", 20, 0);
    assert_eq!(
        d.core.container(&cid("c2")).map(|c| c.status),
        Some(Status::Restarting)
    );

    // An auto-remove container keeps no policy.
    let config = ContainerConfig {
        auto_remove: true,
        ..Default::default()
    };
    let mut d = ready_with_running("c3", config, 30);
    let (_, actions) = d.command(Command::UpdateRestartPolicy {
        id: cid("c3"),
        policy: RestartPolicy::Always,
    });
    assert!(
        matches!(&actions[..], [Action::Answer(_, Answer::Error(e))] if e.kind == ErrorKind::Conflict)
    );
}
