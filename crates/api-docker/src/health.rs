//! Health at the API: `State.Health` as dockerd shows it, and what
//! `docker ps` adds to a running container's status. A health check's own
//! JSON (create body, image config, inspect's `Config.Healthcheck`) is the
//! engine's [`holdfast_engine::health_config`].

use super::render;
use holdfast_core::{Health, HealthStatus};
use serde_json::{Value, json};

/// `State.Health`: status, failing streak and the last results.
pub(crate) fn state_json(health: &Health) -> Value {
    let log: Vec<Value> = health
        .log
        .iter()
        .map(|l| {
            json!({
                "Start": render::time(l.start),
                "End": render::time(l.end),
                "ExitCode": l.exit_code,
                "Output": l.output,
            })
        })
        .collect();
    json!({
        "Status": health.status.as_str(),
        "FailingStreak": health.failing_streak,
        "Log": log,
    })
}

/// What `docker ps` adds to "Up ...": `(healthy)`, `(health: starting)`.
pub(crate) fn ps_suffix(health: &Health) -> String {
    match health.status {
        HealthStatus::Starting => " (health: starting)".to_owned(),
        status => format!(" ({})", status.as_str()),
    }
}
