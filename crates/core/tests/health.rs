//! Health checks: handler tests, one input each, with the exact actions it
//! produces. The rules are dockerd's (daemon/health.go).

mod support;

use holdfast_core::health::{HEALTH_LOG_MAX, PROBE_OUTPUT_MAX_BYTES, PROBE_RESULT_SLACK};
use holdfast_core::*;
use std::time::Duration;
use support::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// No periodic relist: the only timers are the health check's.
fn driver() -> Driver {
    let mut d = Driver::with_config(CoreConfig {
        relist_interval: None,
        ..CoreConfig::default()
    });
    assert_eq!(d.connect(vec![]), vec![]);
    d
}

fn checked(check: HealthConfig) -> ContainerConfig {
    ContainerConfig {
        healthcheck: Some(check),
        ..ContainerConfig::default()
    }
}

fn shell(cmd: &str, interval: u64, retries: u32) -> HealthConfig {
    HealthConfig {
        test: vec!["CMD-SHELL".into(), cmd.into()],
        interval: Some(secs(interval)),
        timeout: Some(secs(1)),
        retries: Some(retries),
        ..HealthConfig::default()
    }
}

fn health<'a>(d: &'a Driver, id: &str) -> &'a Health {
    d.core.health(&cid(id)).expect("the container has a health")
}

/// Fires the next timer, which must be `id`'s probe, and returns the one
/// probe it asks for.
fn probe_due(d: &mut Driver, id: &str) -> Probe {
    let (kind, actions) = d.fire_timer();
    assert_eq!(kind, TimerKind::Probe(cid(id)));
    match &actions[..] {
        [Action::RunProbe(p)] => p.clone(),
        other => panic!("want one probe: {other:?}"),
    }
}

fn exited(p: &Probe, exit_code: i32, output: &str) -> Input {
    Input::ProbeResult(ProbeResult {
        container: p.container.clone(),
        run: p.run,
        probe: p.probe,
        outcome: ProbeOutcome::Exited {
            exit_code,
            output: output.into(),
        },
    })
}

/// The one action a probe result gives when the status stays: the record,
/// with the health it now keeps, persisted.
fn persisted(d: &Driver, id: &str) -> Vec<Action> {
    let record = d.core.container(&cid(id)).expect("exists").record.clone();
    let h = health(d, id);
    assert_eq!(
        record.health,
        Some(HealthRecord {
            run: h.run,
            status: h.status,
            failing_streak: h.failing_streak,
            log: h.log.iter().cloned().collect(),
        })
    );
    vec![Action::Persist(record)]
}

fn next_timer(d: &Driver) -> (Duration, TimerKind) {
    let (at, kind) = d.core.poll_timeout().expect("a timer is armed");
    (at - d.now.at, kind)
}

#[test]
fn a_run_is_probed_an_interval_after_it_starts_and_each_result_decides_as_dockerd_does() {
    let mut d = driver();
    d.run("c1", checked(shell("test -f /ok", 2, 2)), 10);
    assert_eq!(health(&d, "c1").status, HealthStatus::Starting);
    assert_eq!(next_timer(&d), (secs(2), TimerKind::Probe(cid("c1"))));

    let p = probe_due(&mut d, "c1");
    assert_eq!(
        p,
        Probe {
            container: cid("c1"),
            run: 1,
            probe: 1,
            cmd: vec!["/bin/sh".into(), "-c".into(), "test -f /ok".into()],
            timeout: secs(1),
        }
    );
    let started = d.now.wall;
    d.advance(Duration::from_millis(300));
    // One failure of two allowed: still starting.
    assert_eq!(d.feed(exited(&p, 1, "no\n")), persisted(&d, "c1"));
    let h = health(&d, "c1");
    assert_eq!((h.status, h.failing_streak), (HealthStatus::Starting, 1));
    assert_eq!(
        h.log.back(),
        Some(&ProbeLog {
            start: started,
            end: d.now.wall,
            exit_code: 1,
            output: "no\n".into(),
        })
    );
    // The next probe is an interval after the result.
    assert_eq!(next_timer(&d), (secs(2), TimerKind::Probe(cid("c1"))));

    let p = probe_due(&mut d, "c1");
    assert_eq!(p.probe, 2);
    let actions = d.feed(exited(&p, 2, ""));
    assert_eq!(
        events(&actions),
        vec![UserEventKind::HealthStatus(HealthStatus::Unhealthy)]
    );
    assert_eq!(actions.len(), 2, "unhealthy kills nothing: {actions:?}");
    assert_eq!(actions[0], persisted(&d, "c1")[0], "persisted before told");
    assert_eq!(health(&d, "c1").failing_streak, 2);

    let p = probe_due(&mut d, "c1");
    let actions = d.feed(exited(&p, 0, "ok\n"));
    assert_eq!(
        events(&actions),
        vec![UserEventKind::HealthStatus(HealthStatus::Healthy)]
    );
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.failing_streak, h.log.len()),
        (HealthStatus::Healthy, 0, 3)
    );
    // Healthy again: no event.
    let p = probe_due(&mut d, "c1");
    assert_eq!(d.feed(exited(&p, 0, "")), persisted(&d, "c1"));
    let v = d.core.container(&cid("c1")).expect("exists");
    assert_eq!((v.status, v.record.run), (Status::Running, 1));
}

#[test]
fn failures_within_the_start_period_do_not_count_and_come_at_the_start_interval() {
    let mut d = driver();
    let check = HealthConfig {
        start_period: Some(secs(5)),
        start_interval: Some(secs(1)),
        ..shell("false", 10, 1)
    };
    d.run("c1", checked(check), 10);
    assert_eq!(next_timer(&d).0, secs(1));
    for _ in 0..4 {
        let p = probe_due(&mut d, "c1");
        assert_eq!(d.feed(exited(&p, 1, "")), persisted(&d, "c1"));
        let h = health(&d, "c1");
        assert_eq!((h.status, h.failing_streak), (HealthStatus::Starting, 0));
    }
    // Past the start period a failure counts, and one is enough here.
    d.advance(secs(2));
    let p = probe_due(&mut d, "c1");
    let actions = d.feed(exited(&p, 1, ""));
    assert_eq!(
        events(&actions),
        vec![UserEventKind::HealthStatus(HealthStatus::Unhealthy)]
    );
    assert_eq!(
        next_timer(&d).0,
        secs(10),
        "the interval once past the start period"
    );
    // The log keeps the last five.
    assert_eq!(health(&d, "c1").log.len(), HEALTH_LOG_MAX);
}

#[test]
fn stale_and_repeated_results_are_ignored_and_one_that_never_comes_is_a_failure() {
    let mut d = driver();
    d.run("c1", checked(shell("true", 3, 1)), 10);
    let p = probe_due(&mut d, "c1");
    let other_probe = Probe {
        probe: p.probe + 1,
        ..p.clone()
    };
    let other_run = Probe {
        run: p.run + 1,
        ..p.clone()
    };
    assert_eq!(d.feed(exited(&other_probe, 0, "")), vec![]);
    assert_eq!(d.feed(exited(&other_run, 0, "")), vec![]);
    assert!(health(&d, "c1").log.is_empty(), "neither was recorded");
    d.feed(exited(&p, 0, ""));
    assert_eq!(d.feed(exited(&p, 1, "")), vec![], "a repeat is ignored");
    assert_eq!(health(&d, "c1").status, HealthStatus::Healthy);

    // A probe whose result never comes counts as failed once its timeout
    // and the slack have passed; the next one follows an interval later.
    let p = probe_due(&mut d, "c1");
    assert_eq!(
        next_timer(&d),
        (secs(1) + PROBE_RESULT_SLACK, TimerKind::Probe(cid("c1")))
    );
    let (_, actions) = d.fire_timer();
    assert_eq!(
        events(&actions),
        vec![UserEventKind::HealthStatus(HealthStatus::Unhealthy)]
    );
    let last = health(&d, "c1").log.back().expect("logged").clone();
    assert_eq!(last.exit_code, -1);
    assert!(last.output.contains("did not report back"), "{last:?}");
    assert_eq!(next_timer(&d).0, secs(3));
    // Its late result is ignored.
    assert_eq!(d.feed(exited(&p, 0, "")), vec![]);
}

#[test]
fn a_timeout_and_a_failure_to_run_are_logged_as_dockerd_words_them() {
    let mut d = driver();
    d.run("c1", checked(shell("sleep 9", 3, 5)), 10);
    let p = probe_due(&mut d, "c1");
    d.feed(Input::ProbeResult(ProbeResult {
        container: cid("c1"),
        run: p.run,
        probe: p.probe,
        outcome: ProbeOutcome::TimedOut {
            output: "partial".into(),
        },
    }));
    let p = probe_due(&mut d, "c1");
    d.feed(Input::ProbeResult(ProbeResult {
        container: cid("c1"),
        run: p.run,
        probe: p.probe,
        outcome: ProbeOutcome::Failed {
            message: "exec failed".into(),
        },
    }));
    let p = probe_due(&mut d, "c1");
    d.feed(exited(&p, 1, &"x".repeat(PROBE_OUTPUT_MAX_BYTES + 100)));
    let log: Vec<(i32, usize, String)> = health(&d, "c1")
        .log
        .iter()
        .map(|l| {
            (
                l.exit_code,
                l.output.len(),
                l.output.chars().take(40).collect(),
            )
        })
        .collect();
    assert_eq!(
        log,
        vec![
            (-1, 43, "Health check exceeded timeout (1s): part".into()),
            (-1, 11, "exec failed".into()),
            (1, PROBE_OUTPUT_MAX_BYTES, "x".repeat(40)),
        ]
    );
    assert_eq!(health(&d, "c1").failing_streak, 3);
}

#[test]
fn probing_ends_with_the_run_and_a_new_run_starts_over() {
    let mut d = driver();
    d.run("c1", checked(shell("true", 2, 3)), 10);
    let p = probe_due(&mut d, "c1");
    d.feed(exited(&p, 0, ""));
    let p = probe_due(&mut d, "c1");
    let actions = d.exit("c1", 10, 0);
    let delete = only_call(&actions, |c| matches!(c, Call::DeleteTask { .. }));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::RunProbe(_))),
        "{actions:?}"
    );
    let h = health(&d, "c1");
    // As dockerd shows a stopped container's health.
    assert_eq!(
        (h.status, h.ended, h.run),
        (HealthStatus::Unhealthy, true, 1)
    );
    assert!(
        d.core
            .poll_timeout()
            .is_none_or(|(_, k)| k != TimerKind::Probe(cid("c1"))),
        "no more probes"
    );
    assert_eq!(
        d.feed(exited(&p, 0, "")),
        vec![],
        "its late result is ignored"
    );

    // The stopped task is deleted, then a new run starts.
    d.ok(delete);
    let (_, actions) = d.command(Command::Start { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::CreateTask { .. }));
    let actions = d.feed(Input::ActionResult(op, Ok(Done::TaskCreated { pid: 20 })));
    let op = only_call(&actions, |c| matches!(c, Call::StartTask { .. }));
    d.ok(op);
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.run, h.log.len(), h.ended),
        (HealthStatus::Starting, 2, 0, false)
    );
    let p = probe_due(&mut d, "c1");
    assert_eq!(p.run, 2);
}

#[test]
fn no_probe_without_a_check_or_while_paused() {
    let mut d = driver();
    let none = HealthConfig {
        test: vec!["NONE".into()],
        ..HealthConfig::default()
    };
    d.run("off", checked(none), 10);
    assert!(d.core.health(&cid("off")).is_none());
    d.run("plain", ContainerConfig::default(), 11);
    assert!(d.core.health(&cid("plain")).is_none());
    assert!(d.core.poll_timeout().is_none(), "no timer for either");

    d.run("c1", checked(shell("true", 2, 3)), 12);
    let (_, actions) = d.command(Command::Pause { id: cid("c1") });
    let op = only_call(&actions, |c| matches!(c, Call::Pause { .. }));
    d.ok(op);
    let (kind, actions) = d.fire_timer();
    assert_eq!((kind, actions), (TimerKind::Probe(cid("c1")), vec![]));
    assert_eq!(next_timer(&d), (secs(2), TimerKind::Probe(cid("c1"))));
    assert_eq!(health(&d, "c1").status, HealthStatus::Starting);
}

#[test]
fn a_restored_running_container_is_probed_once_a_relist_confirms_it() {
    let mut before = driver();
    before.run("c1", checked(shell("true", 2, 3)), 10);
    let rec = before
        .core
        .container(&cid("c1"))
        .expect("exists")
        .record
        .clone();
    let mut d = Driver::with_config(CoreConfig {
        relist_interval: None,
        ..CoreConfig::default()
    });
    assert_eq!(d.feed(Input::Restore(vec![rec].into())), vec![]);
    assert!(d.core.health(&cid("c1")).is_none(), "not before a relist");
    d.connect(vec![running("c1", 10)]);
    assert_eq!(health(&d, "c1").status, HealthStatus::Starting);
    let p = probe_due(&mut d, "c1");
    assert_eq!((p.run, p.probe), (1, 1));
}

#[test]
fn no_probe_runs_or_counts_while_containerd_is_away() {
    let mut d = driver();
    d.run("c1", checked(shell("true", 2, 1)), 10);
    let p = probe_due(&mut d, "c1");
    // The connection goes: a probe that could not run says nothing.
    d.feed(Input::Connection(ConnectionFact::Unreachable(
        "connection refused".into(),
    )));
    let actions = d.feed(Input::ProbeResult(ProbeResult {
        container: cid("c1"),
        run: p.run,
        probe: p.probe,
        outcome: ProbeOutcome::Failed {
            message: "containerd is unreachable".into(),
        },
    }));
    assert_eq!(actions, vec![]);
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.failing_streak, h.log.len()),
        (HealthStatus::Starting, 0, 0)
    );
    // Nor is one asked for until it is back.
    let at = d.now.at + secs(2);
    while let Some((due, kind)) = d.core.poll_timeout() {
        if due > at + secs(30) {
            break;
        }
        let (_, actions) = d.fire_timer();
        assert!(
            !actions.iter().any(|a| matches!(a, Action::RunProbe(_))),
            "{kind:?}: {actions:?}"
        );
    }
    assert_eq!(health(&d, "c1").status, HealthStatus::Starting);
}

/// A core that ran `c1` until its check decided `healthy`, and the record
/// it persisted then.
fn healthy_record() -> Record {
    let mut before = driver();
    before.run("c1", checked(shell("true", 2, 3)), 10);
    let p = probe_due(&mut before, "c1");
    let actions = before.feed(exited(&p, 0, "ok\n"));
    let Some(Action::Persist(rec)) = actions.first() else {
        panic!("a result is persisted first: {actions:?}");
    };
    assert_eq!(
        rec.health.as_ref().map(|h| (h.run, h.status, h.log.len())),
        Some((1, HealthStatus::Healthy, 1))
    );
    rec.clone()
}

#[test]
fn a_restored_running_container_goes_on_from_its_persisted_health() {
    let rec = healthy_record();
    let mut d = Driver::with_config(CoreConfig {
        relist_interval: None,
        ..CoreConfig::default()
    });
    assert_eq!(d.feed(Input::Restore(vec![rec].into())), vec![]);
    // Shown at once, as it was, but not probed before a relist.
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.failing_streak, h.log.len(), h.ended),
        (HealthStatus::Healthy, 0, 1, false)
    );
    assert_eq!(h.log[0].output, "ok\n");
    assert!(
        !d.core
            .timers()
            .any(|(_, k)| *k == TimerKind::Probe(cid("c1"))),
        "no probe before a relist"
    );
    // The relist confirms the run: no event (nothing changed), and the
    // next probe an interval later.
    let actions = d.connect(vec![running("c1", 10)]);
    assert_eq!(events(&actions), vec![]);
    assert_eq!(health(&d, "c1").status, HealthStatus::Healthy);
    assert_eq!(next_timer(&d), (secs(2), TimerKind::Probe(cid("c1"))));
    let p = probe_due(&mut d, "c1");
    assert_eq!(p.run, 1);
    // It goes on counting from the persisted streak and log.
    assert_eq!(d.feed(exited(&p, 1, "")), persisted(&d, "c1"));
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.failing_streak, h.log.len()),
        (HealthStatus::Healthy, 1, 2)
    );
}

#[test]
fn a_restored_container_whose_run_ended_meanwhile_shows_unhealthy() {
    let rec = healthy_record();
    let mut d = Driver::with_config(CoreConfig {
        relist_interval: None,
        ..CoreConfig::default()
    });
    d.feed(Input::Restore(vec![rec].into()));
    let at = d.now.wall;
    d.connect(vec![stopped("c1", 10, 0, at)]);
    let h = health(&d, "c1");
    assert_eq!(
        (h.status, h.ended, h.log.len()),
        (HealthStatus::Unhealthy, true, 1)
    );
    assert!(
        !d.core
            .timers()
            .any(|(_, k)| *k == TimerKind::Probe(cid("c1"))),
        "no probe for an ended run"
    );
}
