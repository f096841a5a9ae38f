//! Health checks, as dockerd decides them: only a running, current run is
//! probed, and probes only observe (with every result lost, the core does
//! what it did with them).

use crate::harness::Harness;
use crate::steps::{Pick, Step};
use holdfast_core::*;
use proptest::prelude::*;

/// A container's health agrees with its run and with dockerd's rules: a
/// probed run is a running, current one; the log is bounded; the status
/// follows the failing streak.
pub(crate) fn health_consistent(
    core: &Core,
    view: &ContainerView<'_>,
) -> Result<(), TestCaseError> {
    use holdfast_core::health::{HEALTH_LOG_MAX, PROBE_OUTPUT_MAX_BYTES};
    let id = &view.record.id;
    let Some(h) = core.health(id) else {
        return Ok(());
    };
    let config = view.record.config.healthcheck.as_ref();
    prop_assert!(config.is_some(), "{} has a health with no check", id);
    let retries = config.map_or(0, HealthConfig::retries);
    prop_assert!(h.run <= view.record.run, "{}: health of a later run", id);
    prop_assert!(
        h.ended || (view.status == Status::Running && h.run == view.record.run),
        "{} probed in run {} while {:?} in run {}",
        id,
        h.run,
        view.status,
        view.record.run
    );
    prop_assert!(h.log.len() <= HEALTH_LOG_MAX);
    prop_assert!(
        h.log
            .iter()
            .all(|l| l.output.len() <= PROBE_OUTPUT_MAX_BYTES)
    );
    let consistent = match h.status {
        HealthStatus::Healthy => {
            h.failing_streak < retries && h.log.iter().any(|l| l.exit_code == 0)
        }
        HealthStatus::Starting => h.failing_streak < retries,
        HealthStatus::Unhealthy => h.ended || h.failing_streak >= retries,
    };
    let codes: Vec<i32> = h.log.iter().map(|l| l.exit_code).collect();
    prop_assert!(
        consistent,
        "{}: {:?} with a failing streak of {} (retries {}), exit codes {:?}",
        id,
        h.status,
        h.failing_streak,
        retries,
        codes
    );
    Ok(())
}

/// Health checks only observe: with every probe result lost, the core
/// does exactly what it did with them, but for probes and health events.
pub(crate) fn probe_results_change_nothing_else(
    steps: &[Step],
    swarm: u8,
) -> Result<(), TestCaseError> {
    let mut with = Harness::new(swarm);
    with.run(steps, swarm)?;
    let mut without = Harness::new(swarm);
    without.probe_results = false;
    without.run(steps, swarm)?;
    // A record is persisted with each probe result (its health): what
    // is persisted but for the health must be the same, in the same order.
    let not_health = |trace: &[Action]| -> Vec<Action> {
        let mut last: std::collections::HashMap<ContainerId, Record> = Default::default();
        trace
            .iter()
            .filter_map(|a| match a {
                Action::RunProbe(_) => None,
                Action::Publish(e) if matches!(e.kind, UserEventKind::HealthStatus(_)) => None,
                Action::Persist(rec) => {
                    let mut rec = rec.clone();
                    rec.health = None;
                    if last.get(&rec.id) == Some(&rec) {
                        return None;
                    }
                    last.insert(rec.id.clone(), rec.clone());
                    Some(Action::Persist(rec))
                }
                Action::Unpersist(id) => {
                    last.remove(id);
                    Some(a.clone())
                }
                a => Some(a.clone()),
            })
            .collect()
    };
    prop_assert_eq!(not_health(&with.trace), not_health(&without.trace));
    Ok(())
}

impl Harness {
    /// Only a running, current run is probed, and only while connected.
    pub(crate) fn check_probe_asked(
        &mut self,
        input: &Input,
        probe: &Probe,
    ) -> Result<(), TestCaseError> {
        let view = self.core.container(&probe.container);
        let health = self.core.health(&probe.container);
        prop_assert!(
            view.is_some_and(|v| v.status == Status::Running
                && !v.paused
                && v.record.run == probe.run)
                && health.is_some_and(|h| h.run == probe.run && !h.ended),
            "{input:?} asked for {probe:?} of a run that is not probed"
        );
        prop_assert!(
            self.core.connection() == ConnectionState::Ready,
            "{input:?} asked for {probe:?} while containerd is not ready"
        );
        self.probes.push(probe.clone());
        Ok(())
    }

    /// A health probe reports back: the n-th asked for (again, for an
    /// earlier one), passed, failed, timed out or could not run.
    pub(crate) fn probe_result(&mut self, index: &Pick, outcome: &u8) -> Result<(), TestCaseError> {
        if !self.probe_results || self.probes.is_empty() {
            return Ok(());
        }
        let probe = self.probes[index.of(self.probes.len())].clone();
        let outcome = match outcome {
            0..=2 => ProbeOutcome::Exited {
                exit_code: 0,
                output: "ok".into(),
            },
            3 => ProbeOutcome::Exited {
                exit_code: 1,
                output: "x".repeat(5000),
            },
            4 => ProbeOutcome::TimedOut {
                output: String::new(),
            },
            _ => ProbeOutcome::Failed {
                message: "cannot exec".into(),
            },
        };
        self.feed(Input::ProbeResult(ProbeResult {
            container: probe.container,
            run: probe.run,
            probe: probe.probe,
            outcome,
        }))?;
        Ok(())
    }
}
