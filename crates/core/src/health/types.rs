//! What a health check is and what it decides, as `inspect` and the
//! record show it: the check as configured, the status, a probe and its
//! result, the log. The monitor that decides it is the parent module.

use crate::ids::ContainerId;
use crate::time::WallTime;
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
    pub(super) in_flight: Option<(u64, WallTime)>,
    /// Probes asked for in this core's life, numbering them.
    pub(super) probes: u64,
    /// Restored from the record for a run that no relist has confirmed
    /// yet: shown as it was, not probed, not ended.
    pub(super) awaiting_relist: bool,
}

impl Health {
    pub(super) fn restored(saved: &HealthRecord) -> Health {
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

    pub(super) fn to_record(&self) -> HealthRecord {
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
