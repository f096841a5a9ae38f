//! Health checks (`HEALTHCHECK`, `--health-*`), decided as dockerd decides
//! them.
//!
//! While a run of a container with a health check is up, the core asks for
//! one probe at a time ([`crate::Action::RunProbe`]), an interval after the
//! previous result (the start interval while starting within the start
//! period). The daemon runs it as an exec and feeds back its
//! [`ProbeResult`]. The core keeps the run's [`Health`]: its status, the
//! failing streak and the last [`HEALTH_LOG_MAX`] results. A success makes it
//! healthy; `retries` failures in a row make it unhealthy, except failures
//! while it is still starting within the start period, which do not count.
//! A change of status is published as `health_status`.
//!
//! No probe is asked for while containerd is not connected and relisted
//! (an exec could not run, and its failure would say nothing about the
//! container), and a probe that could not be run while it was not is not
//! counted: the next one is an interval later.
//!
//! Probes never change a container's run state: an unhealthy container is
//! not restarted or stopped (dockerd does not either). A result for another
//! run or another probe than the one in flight is ignored. When the run ends
//! probing stops and the status is shown as unhealthy (as dockerd shows it);
//! a new run starts over at `starting`.
//!
//! Each result is persisted with the record ([`HealthRecord`]: the run, its
//! status, failing streak and log), so a restarted daemon goes on from the
//! last decision, as dockerd's live restore does: a running container
//! restored with the health of its current run shows it at once and is
//! probed again once a relist has confirmed it runs (an interval later); one
//! the relist finds ended shows unhealthy.

mod types;

pub use types::{
    DEFAULT_INTERVAL, DEFAULT_RETRIES, DEFAULT_START_INTERVAL, DEFAULT_TIMEOUT, HEALTH_LOG_MAX,
    Health, HealthConfig, HealthRecord, HealthStatus, PROBE_OUTPUT_MAX_BYTES, Probe, ProbeLog,
    ProbeOutcome, ProbeResult,
};

use crate::action::{Action, UserEventKind};
use crate::container::{Container, Status, TaskState};
use crate::ids::ContainerId;
use crate::time::WallTime;
use crate::timers::TimerKind;
use crate::{Map, Outbox};
use std::collections::VecDeque;
use std::time::Duration;

/// How long after its timeout a probe's result may still come before the
/// core counts the probe as lost (the daemon kills a probe at its timeout;
/// this only bounds a result that never comes).
pub const PROBE_RESULT_SLACK: Duration = Duration::from_secs(10);

/// Health of every container that has a health check and has run.
#[derive(Debug, Default)]
pub(crate) struct Monitors {
    by_container: Map<ContainerId, Health>,
}

/// Whether the run of `c` is up in a way that is probed: started, running
/// (its task confirmed), not being removed.
fn probed_run(c: &Container) -> bool {
    c.visible()
        && c.status() == Status::Running
        && matches!(c.task, TaskState::Running { .. })
        && c.rec.started_at.is_some()
}

impl Monitors {
    pub(crate) fn get(&self, id: &ContainerId) -> Option<&Health> {
        self.by_container.get(id)
    }

    /// Brings the monitors in line with the containers after an input: a
    /// run that came up gets a fresh health and its first probe armed; one
    /// that ended stops probing; a container that went is forgotten.
    pub(crate) fn sync(&mut self, containers: &Map<ContainerId, Container>, out: &mut Outbox) {
        self.by_container.retain(|id, _| {
            let keep = containers.get(id).is_some_and(Container::visible);
            if !keep {
                out.timers.cancel(&TimerKind::Probe(id.clone()));
            }
            keep
        });
        for (id, c) in containers {
            let Some(config) = c.rec.config.healthcheck.as_ref() else {
                continue;
            };
            if config.probe_command().is_none() {
                continue;
            }
            let up = probed_run(c);
            if !self.by_container.contains_key(id)
                && let Some(saved) = c.rec.health.as_ref().filter(|s| s.run == c.rec.run)
            {
                // A restarted core: the record's health of this run.
                self.by_container
                    .insert(id.clone(), Health::restored(saved));
            }
            if let Some(h) = self.by_container.get_mut(id)
                && h.awaiting_relist
            {
                let same_run = h.run == c.rec.run && c.visible();
                if same_run && up {
                    h.awaiting_relist = false;
                    let at = out.now.at + next_interval(config, h, c, out.now.wall);
                    out.timers.set(TimerKind::Probe(id.clone()), at);
                    continue;
                }
                if same_run && c.status() == Status::Running {
                    // Not yet confirmed (or refuted) by a relist.
                    continue;
                }
                h.awaiting_relist = false;
            }
            if let Some(h) = self.by_container.get_mut(id)
                && !h.ended
                && (!up || h.run != c.rec.run)
            {
                h.ended = true;
                h.in_flight = None;
                h.status = HealthStatus::Unhealthy;
                out.timers.cancel(&TimerKind::Probe(id.clone()));
            }
            let current = self
                .by_container
                .get(id)
                .is_some_and(|h| h.run == c.rec.run && !h.ended);
            if up && !current {
                let h = Health {
                    run: c.rec.run,
                    status: HealthStatus::Starting,
                    failing_streak: 0,
                    log: VecDeque::new(),
                    ended: false,
                    in_flight: None,
                    probes: self.by_container.get(id).map_or(0, |h| h.probes),
                    awaiting_relist: false,
                };
                let at = out.now.at + next_interval(config, &h, c, out.now.wall);
                out.timers.set(TimerKind::Probe(id.clone()), at);
                self.by_container.insert(id.clone(), h);
            }
        }
    }

    /// The probe timer of `id` fired: ask for a probe, or count one that
    /// never reported back as failed.
    pub(crate) fn probe_due(
        &mut self,
        id: &ContainerId,
        ready: bool,
        containers: &mut Map<ContainerId, Container>,
        out: &mut Outbox,
    ) {
        let (Some(h), Some(c)) = (self.by_container.get_mut(id), containers.get_mut(id)) else {
            return;
        };
        // Shared, so the container can be written while the check is read.
        let shared = std::sync::Arc::clone(&c.rec.config);
        let Some(config) = shared.healthcheck.as_ref() else {
            return;
        };
        let Some(cmd) = config.probe_command() else {
            return;
        };
        if h.ended || h.awaiting_relist || h.run != c.rec.run {
            return;
        }
        if h.in_flight.is_some() && !ready {
            // Its result was lost while containerd was away: not counted.
            h.in_flight = None;
        }
        if let Some((_, start)) = h.in_flight {
            let message = format!(
                "the health check did not report back within {}",
                go_duration(config.timeout() + PROBE_RESULT_SLACK)
            );
            apply(h, c, config, start, -1, message, out);
            let at = out.now.at + next_interval(config, h, c, out.now.wall);
            out.timers.set(TimerKind::Probe(id.clone()), at);
            return;
        }
        if c.is_paused() || !ready {
            // A frozen container cannot run a probe, nor can one run while
            // containerd is away; look again later.
            let at = out.now.at + next_interval(config, h, c, out.now.wall);
            out.timers.set(TimerKind::Probe(id.clone()), at);
            return;
        }
        h.probes += 1;
        h.in_flight = Some((h.probes, out.now.wall));
        out.actions.push_back(Action::RunProbe(Probe {
            container: id.clone(),
            run: h.run,
            probe: h.probes,
            cmd,
            timeout: config.timeout(),
        }));
        out.timers.set(
            TimerKind::Probe(id.clone()),
            out.now.at + config.timeout() + PROBE_RESULT_SLACK,
        );
    }

    /// A probe reported back.
    pub(crate) fn result(
        &mut self,
        result: ProbeResult,
        ready: bool,
        containers: &mut Map<ContainerId, Container>,
        out: &mut Outbox,
    ) {
        let (Some(h), Some(c)) = (
            self.by_container.get_mut(&result.container),
            containers.get_mut(&result.container),
        ) else {
            return;
        };
        let shared = std::sync::Arc::clone(&c.rec.config);
        let Some(config) = shared.healthcheck.as_ref() else {
            return;
        };
        let Some((probe, start)) = h.in_flight else {
            return;
        };
        if h.ended || h.run != result.run || probe != result.probe {
            return;
        }
        if !ready && matches!(result.outcome, ProbeOutcome::Failed { .. }) {
            // It could not run because containerd is away: not counted.
            h.in_flight = None;
            let at = out.now.at + next_interval(config, h, c, out.now.wall);
            out.timers
                .set(TimerKind::Probe(result.container.clone()), at);
            return;
        }
        let (exit_code, output) = match result.outcome {
            ProbeOutcome::Exited { exit_code, output } => (exit_code, output),
            ProbeOutcome::TimedOut { output } => {
                let limit = go_duration(config.timeout());
                let message = if output.is_empty() {
                    format!("Health check exceeded timeout ({limit})")
                } else {
                    format!("Health check exceeded timeout ({limit}): {output}")
                };
                (-1, message)
            }
            ProbeOutcome::Failed { message } => (-1, message),
        };
        apply(h, c, config, start, exit_code, output, out);
        let at = out.now.at + next_interval(config, h, c, out.now.wall);
        out.timers
            .set(TimerKind::Probe(result.container.clone()), at);
    }
}

/// dockerd's `handleProbeResult`: log it, then decide the status.
fn apply(
    h: &mut Health,
    c: &mut Container,
    config: &HealthConfig,
    start: WallTime,
    exit_code: i32,
    mut output: String,
    out: &mut Outbox,
) {
    h.in_flight = None;
    truncate(&mut output, PROBE_OUTPUT_MAX_BYTES);
    if h.log.len() >= HEALTH_LOG_MAX {
        h.log.pop_front();
    }
    h.log.push_back(ProbeLog {
        start,
        end: out.now.wall,
        exit_code,
        output,
    });
    let before = h.status;
    if exit_code == 0 {
        h.failing_streak = 0;
        h.status = HealthStatus::Healthy;
    } else {
        let started = c.rec.started_at.unwrap_or(start);
        let in_start_period = h.status == HealthStatus::Starting
            && start.saturating_since(started) < config.start_period();
        if !in_start_period {
            h.failing_streak = h.failing_streak.saturating_add(1);
            if h.failing_streak >= config.retries() {
                h.status = HealthStatus::Unhealthy;
            }
        }
    }
    // Written before it is told: a restarted daemon goes on from here.
    c.rec.health = Some(h.to_record());
    out.persist(&c.rec);
    if h.status != before {
        out.publish(&c.rec.id, UserEventKind::HealthStatus(h.status));
    }
}

/// The wait before the next probe: the start interval while starting within
/// the start period, else the interval.
fn next_interval(config: &HealthConfig, h: &Health, c: &Container, now: WallTime) -> Duration {
    let started = c.rec.started_at.unwrap_or(now);
    if h.status == HealthStatus::Starting && now.saturating_since(started) < config.start_period() {
        config.start_interval()
    } else {
        config.interval()
    }
}

/// Cuts `s` to at most `max` bytes, on a character boundary.
fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// A duration as Go prints one (`1s`, `1m30s`, `500ms`, `1.5s`), as in
/// dockerd's timeout message.
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".to_owned();
    }
    if d < Duration::from_secs(1) {
        let ms = d.as_secs_f64() * 1000.0;
        return format!("{}ms", trim_float(ms));
    }
    let total = d.as_secs();
    let (h, m) = (total / 3600, (total / 60) % 60);
    let s = d.as_secs_f64() - (h * 3600 + m * 60) as f64;
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&format!("{}s", trim_float(s)));
    out
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.9}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(Duration::from_secs(1)), "1s");
        assert_eq!(go_duration(Duration::from_secs(30)), "30s");
        assert_eq!(go_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    }

    #[test]
    fn commands_follow_the_test_kind() {
        let of = |t: &[&str]| HealthConfig {
            test: t.iter().map(|s| (*s).to_owned()).collect(),
            ..HealthConfig::default()
        };
        assert_eq!(
            of(&["CMD", "true"]).probe_command(),
            Some(vec!["true".to_owned()])
        );
        assert_eq!(
            of(&["CMD-SHELL", "test -f /x"]).probe_command(),
            Some(vec!["/bin/sh".into(), "-c".into(), "test -f /x".into()])
        );
        assert_eq!(of(&["NONE"]).probe_command(), None);
        assert_eq!(of(&[]).probe_command(), None);
        assert_eq!(of(&["CMD"]).probe_command(), None);
    }

    #[test]
    fn output_is_cut_on_a_character_boundary() {
        let mut s = "é".repeat(3000);
        truncate(&mut s, PROBE_OUTPUT_MAX_BYTES);
        assert_eq!(s.len(), PROBE_OUTPUT_MAX_BYTES);
        let mut s = format!("a{}", "é".repeat(3000));
        truncate(&mut s, PROBE_OUTPUT_MAX_BYTES);
        assert_eq!(s.len(), PROBE_OUTPUT_MAX_BYTES - 1);
    }
}
