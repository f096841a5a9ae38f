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

use crate::action::{Action, UserEventKind};
use crate::container::{Container, Status, TaskState};
use crate::ids::ContainerId;
use crate::time::WallTime;
use crate::timers::TimerKind;
use crate::{Map, Outbox};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// Results kept per run, oldest dropped first (dockerd keeps 5).
pub const HEALTH_LOG_MAX: usize = 5;
/// A probe's output kept, in bytes (dockerd keeps 4 KiB).
pub const PROBE_OUTPUT_MAX_BYTES: usize = 4096;
/// dockerd's defaults for what the health check leaves unset (or zero).
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_START_INTERVAL: Duration = Duration::from_secs(5);
pub const DEFAULT_RETRIES: u32 = 3;
/// How long after its timeout a probe's result may still come before the
/// core counts the probe as lost (the daemon kills a probe at its timeout;
/// this only bounds a result that never comes).
pub const PROBE_RESULT_SLACK: Duration = Duration::from_secs(10);

/// A container's health check as the user and the image gave it, merged at
/// create time. Unset durations and retries take dockerd's defaults.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct HealthConfig {
    /// `["CMD", arg...]`, `["CMD-SHELL", command]` or `["NONE"]`.
    pub test: Vec<String>,
    pub interval: Option<Duration>,
    pub timeout: Option<Duration>,
    pub start_period: Option<Duration>,
    pub start_interval: Option<Duration>,
    pub retries: Option<u32>,
}

impl HealthConfig {
    /// The command a probe runs; `None` when the check is disabled (`NONE`,
    /// an empty test) or of a kind no probe can run.
    pub fn probe_command(&self) -> Option<Vec<String>> {
        let (kind, args) = self.test.split_first()?;
        match kind.as_str() {
            "CMD" if !args.is_empty() => Some(args.to_vec()),
            "CMD-SHELL" if !args.is_empty() => {
                let mut cmd = vec!["/bin/sh".to_owned(), "-c".to_owned()];
                cmd.extend(args.iter().cloned());
                Some(cmd)
            }
            _ => None,
        }
    }

    pub fn interval(&self) -> Duration {
        self.interval.unwrap_or(DEFAULT_INTERVAL)
    }

    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    pub fn start_period(&self) -> Duration {
        self.start_period.unwrap_or(Duration::ZERO)
    }

    pub fn start_interval(&self) -> Duration {
        self.start_interval.unwrap_or(DEFAULT_START_INTERVAL)
    }

    pub fn retries(&self) -> u32 {
        self.retries.filter(|r| *r > 0).unwrap_or(DEFAULT_RETRIES)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum HealthStatus {
    Starting,
    Healthy,
    Unhealthy,
}

impl HealthStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthStatus::Starting => "starting",
            HealthStatus::Healthy => "healthy",
            HealthStatus::Unhealthy => "unhealthy",
        }
    }
}

/// One probe's result, as `inspect` shows it in `State.Health.Log`.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ProbeLog {
    pub start: WallTime,
    pub end: WallTime,
    /// 0 healthy, anything else a failure; -1 when it timed out or could
    /// not run.
    pub exit_code: i32,
    pub output: String,
}

/// What the record keeps of a run's health: the last decision and the log
/// it was made from.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct HealthRecord {
    pub run: u64,
    pub status: HealthStatus,
    pub failing_streak: u32,
    /// The last [`HEALTH_LOG_MAX`] results, oldest first.
    pub log: Vec<ProbeLog>,
}

/// The health of a container's current (or, once ended, last) run.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Health {
    /// The run this is the health of.
    pub run: u64,
    pub status: HealthStatus,
    pub failing_streak: u32,
    pub log: VecDeque<ProbeLog>,
    /// The run ended: no more probes.
    pub ended: bool,
    /// The probe asked for and not yet answered: its number and start.
    in_flight: Option<(u64, WallTime)>,
    /// Probes asked for in this core's life, numbering them.
    probes: u64,
    /// Restored from the record for a run that no relist has confirmed
    /// yet: shown as it was, not probed, not ended.
    awaiting_relist: bool,
}

impl Health {
    fn restored(saved: &HealthRecord) -> Health {
        Health {
            run: saved.run,
            status: saved.status,
            failing_streak: saved.failing_streak,
            log: saved.log.iter().cloned().collect(),
            ended: false,
            in_flight: None,
            probes: 0,
            awaiting_relist: true,
        }
    }

    fn to_record(&self) -> HealthRecord {
        HealthRecord {
            run: self.run,
            status: self.status,
            failing_streak: self.failing_streak,
            log: self.log.iter().cloned().collect(),
        }
    }
}

/// Run this health check in the container now, as an exec, and report its
/// result as [`crate::Input::ProbeResult`] (exactly once). The daemon kills
/// it once `timeout` has passed and reports it as timed out.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Probe {
    pub container: ContainerId,
    pub run: u64,
    /// Names the probe; echoed in its result.
    pub probe: u64,
    pub cmd: Vec<String>,
    pub timeout: Duration,
}

/// What became of a [`Probe`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ProbeResult {
    pub container: ContainerId,
    pub run: u64,
    pub probe: u64,
    pub outcome: ProbeOutcome,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ProbeOutcome {
    /// It ran and exited; `output` is its stdout and stderr, at most
    /// [`PROBE_OUTPUT_MAX_BYTES`].
    Exited { exit_code: i32, output: String },
    /// It was killed at its timeout; what it wrote until then.
    TimedOut { output: String },
    /// It could not be run (no such command, the container went away).
    Failed { message: String },
}

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
