//! Health checks, as dockerd decides them.

use holdfast_core::{Core, Status};

/// A container's health agrees with its run and with dockerd's rules: only
/// a running run is probed, the log is bounded, and the status follows the
/// streak (healthy: no failure since the last success; unhealthy: at least
/// `retries` failures in a row).
pub(super) fn health_consistent(
    core: &Core,
    view: &holdfast_core::ContainerView<'_>,
) -> Result<(), String> {
    use holdfast_core::HealthStatus;
    use holdfast_core::health::{HEALTH_LOG_MAX, PROBE_OUTPUT_MAX_BYTES};
    let id = &view.record.id;
    let Some(h) = core.health(id) else {
        return Ok(());
    };
    let Some(config) = view.record.config.healthcheck.as_ref() else {
        return Err(format!("{id} has a health but no health check"));
    };
    if h.run > view.record.run {
        return Err(format!(
            "{id}'s health is of run {}, after its run {}",
            h.run, view.record.run
        ));
    }
    if !h.ended && (view.status != Status::Running || h.run != view.record.run) {
        return Err(format!(
            "{id} is probed (run {}) while {:?} in run {}",
            h.run, view.status, view.record.run
        ));
    }
    if h.log.len() > HEALTH_LOG_MAX
        || h.log
            .iter()
            .any(|l| l.output.len() > PROBE_OUTPUT_MAX_BYTES)
    {
        return Err(format!("{id}'s health log is beyond its bounds"));
    }
    let consistent = match h.status {
        HealthStatus::Healthy => {
            h.failing_streak < config.retries() && h.log.iter().any(|l| l.exit_code == 0)
        }
        HealthStatus::Starting => h.failing_streak < config.retries(),
        HealthStatus::Unhealthy => h.ended || h.failing_streak >= config.retries(),
    };
    if !consistent {
        return Err(format!(
            "{id}'s health is {:?} with a failing streak of {} (retries {}) and log {:?}",
            h.status,
            h.failing_streak,
            config.retries(),
            h.log
        ));
    }
    Ok(())
}
