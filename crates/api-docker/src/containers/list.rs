//! `GET /containers/json` (`docker ps`): the containers with their status
//! as dockerd words it, filtered as dockerd filters them.

use super::{command_line, network_mode_shown};
use crate::params::{Filters, Params};
use crate::{ApiError, ApiState, render};
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_core::{ContainerId, NetworkMode, Status};
use holdfast_engine::backend::containers::Attachment;
use holdfast_engine::backend::containers::Snapshot;
use holdfast_engine::engine::wall_now;
use serde_json::{Value, json};
use std::time::Duration;

/// `docker ps`'s STATUS column, as dockerd words it.
fn status_text(s: &Snapshot, now: holdfast_core::WallTime) -> String {
    let r = &s.record;
    match s.status {
        Status::Running => {
            let up = match r.started_at {
                Some(at) => format!("Up {}", render::human_duration(now.saturating_since(at))),
                None => "Up Less than a second".to_owned(),
            };
            if s.paused {
                format!("{up} (Paused)")
            } else if let Some(h) = s.health.as_ref().filter(|h| !h.ended) {
                format!("{up}{}", crate::health::ps_suffix(h))
            } else {
                up
            }
        }
        Status::Restarting => {
            let code = r.exit.as_ref().map_or(0, |e| e.exit_code);
            let ago = r
                .exit
                .as_ref()
                .map_or(Duration::ZERO, |e| now.saturating_since(e.finished_at));
            format!("Restarting ({code}) {} ago", render::human_duration(ago))
        }
        Status::Removing => "Removal In Progress".to_owned(),
        Status::Exited => match &r.exit {
            Some(e) => format!(
                "Exited ({}) {} ago",
                e.exit_code,
                render::human_duration(now.saturating_since(e.finished_at))
            ),
            None => "Exited".to_owned(),
        },
        Status::Created => "Created".to_owned(),
    }
}

pub(crate) fn list_json(
    s: &Snapshot,
    now: holdfast_core::WallTime,
    att: Option<&Attachment>,
) -> Value {
    let r = &s.record;
    let c = &r.config;
    let network = network_mode_shown(c);
    json!({
        "Id": r.id.to_string(),
        "Names": [format!("/{}", r.name)],
        "Image": c.image,
        "ImageID": c.image_id.clone().unwrap_or_default(),
        "Command": command_line(c).join(" "),
        "Created": r.created_at.as_unix_nanos().div_euclid(1_000_000_000),
        "Ports": att.map_or(&[][..], |a| &a.ports[..]).iter().map(|p| json!({
            "IP": if p.host_ip.is_empty() { "0.0.0.0" } else { &p.host_ip },
            "PrivatePort": p.container_port,
            "PublicPort": p.host_port,
            "Type": p.protocol,
        })).collect::<Vec<_>>(),
        "Labels": c.labels,
        "State": s.state_name(),
        "Status": status_text(s, now),
        "HostConfig": { "NetworkMode": network.clone() },
        // A shared namespace is no network of its own (dockerd shows none).
        "NetworkSettings": { "Networks": if c.network == NetworkMode::Container {
            json!({})
        } else {
            let mut networks = serde_json::Map::new();
            if !r.own_disconnected {
                networks.insert(network.clone(), json!({ "NetworkID": network }));
            }
            for e in r.endpoints.iter().filter(|e| e.wanted) {
                networks.insert(e.network.clone(), json!({ "NetworkID": e.network }));
            }
            Value::Object(networks)
        } },
        "Mounts": super::inspect::mount_points_json(c),
    })
}

fn matches_filters(
    s: &Snapshot,
    f: &Filters,
    all_ids: &[(ContainerId, holdfast_core::WallTime, String)],
) -> Result<bool, ApiError> {
    let r = &s.record;
    if !f.any("id", |v| r.id.as_str().starts_with(v)) {
        return Ok(false);
    }
    if !f.any("name", |v| r.name.contains(v.trim_start_matches('/'))) {
        return Ok(false);
    }
    if !f.any("status", |v| v == s.state_name()) {
        return Ok(false);
    }
    let health = s.health.as_ref().map_or("none", |h| h.status.as_str());
    if !f.any("health", |v| v == health) {
        return Ok(false);
    }
    if !f.labels_match(&r.config.labels) {
        return Ok(false);
    }
    let exited = f.get("exited");
    if !exited.is_empty() {
        let codes = exited
            .iter()
            .map(|v| {
                v.parse::<i32>()
                    .map_err(|_| ApiError::bad_request(format!("invalid filter 'exited={v}'")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let code = r.exit.as_ref().map(|e| e.exit_code);
        if s.status != Status::Exited || !code.is_some_and(|c| codes.contains(&c)) {
            return Ok(false);
        }
    }
    if !f.any("ancestor", |v| {
        let image = &r.config.image;
        image == v
            || image.strip_suffix(":latest") == Some(v)
            || v.strip_suffix(":latest") == Some(image.as_str())
            || r.config.image_id.as_deref().is_some_and(|id| {
                id == v
                    || id
                        .strip_prefix("sha256:")
                        .is_some_and(|h| h.starts_with(v.trim_start_matches("sha256:")))
            })
    }) {
        return Ok(false);
    }
    // By the network's name (dockerd also takes its id).
    let on = |v: &str| {
        (!r.own_disconnected && network_mode_shown(&r.config) == v)
            || r.endpoints.iter().any(|e| e.wanted && e.network == v)
    };
    if !f.any("network", on) {
        return Ok(false);
    }
    // A volume by its name, or any mount by where it is mounted.
    let mounts = |v: &str| {
        r.config
            .mounts
            .iter()
            .any(|m| m.volume.as_deref() == Some(v) || m.destination == v)
            || r.config.mount_specs.iter().any(|m| match m {
                holdfast_core::MountSpec::Bind { target, .. }
                | holdfast_core::MountSpec::Tmpfs { target, .. } => target == v,
            })
    };
    if !f.any("volume", mounts) {
        return Ok(false);
    }
    // No swarm: no container is a task.
    if !f.any("is-task", |v| v == "false" || v == "0") {
        return Ok(false);
    }
    // Ports as dockerd's NetworkSettings.Ports and Config.ExposedPorts have
    // them: the container's ports, published and exposed (the former only
    // while it runs, as dockerd's).
    let exposed: Vec<(u16, &str)> = r
        .config
        .ports
        .iter()
        .map(|p| (p.container_port, p.protocol.as_str()))
        .chain(r.config.exposed_ports.iter().filter_map(|e| {
            let (port, proto) = e.split_once('/').unwrap_or((e.as_str(), "tcp"));
            Some((port.parse().ok()?, proto))
        }))
        .collect();
    let running = matches!(s.status, Status::Running);
    for (key, live_only) in [("publish", true), ("expose", false)] {
        for v in f.get(key) {
            let (start, end, proto) = port_filter(key, v)?;
            let hit = exposed
                .iter()
                .any(|(p, pr)| (start..=end).contains(p) && *pr == proto);
            if !hit || (live_only && !running) {
                return Ok(false);
            }
        }
    }
    let created_of = |reference: &str| {
        all_ids
            .iter()
            .find(|(id, _, name)| {
                id.as_str().starts_with(reference) || name == reference.trim_start_matches('/')
            })
            .map(|(_, at, _)| *at)
            .ok_or_else(|| ApiError::not_found(format!("No such container: {reference}")))
    };
    for v in f.get("before") {
        if r.created_at >= created_of(v)? {
            return Ok(false);
        }
    }
    for v in f.get("since") {
        if r.created_at <= created_of(v)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A `publish` or `expose` filter value: `80`, `80/udp`, `8000-8080/tcp`.
fn port_filter<'a>(key: &str, v: &'a str) -> Result<(u16, u16, &'a str), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid filter '{key}={v}'"));
    let (range, proto) = v.split_once('/').unwrap_or((v, "tcp"));
    if !matches!(proto, "tcp" | "udp" | "sctp") {
        return Err(bad());
    }
    let (start, end) = range.split_once('-').unwrap_or((range, range));
    let (start, end): (u16, u16) = (
        start.parse().map_err(|_| bad())?,
        end.parse().map_err(|_| bad())?,
    );
    if start > end {
        return Err(bad());
    }
    Ok((start, end, proto))
}

pub async fn list(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let filters = p.filters()?;
    filters.only(&[
        "id", "name", "label", "status", "exited", "ancestor", "before", "since", "network",
        "volume", "health", "is-task", "publish", "expose",
    ])?;
    for v in filters.get("health") {
        if !["starting", "healthy", "unhealthy", "none"].contains(&v.as_str()) {
            return Err(ApiError::bad_request(format!(
                "Unrecognised filter value for health: {v}"
            )));
        }
    }
    for v in filters.get("status") {
        if ![
            "created",
            "restarting",
            "running",
            "removing",
            "paused",
            "exited",
            "dead",
        ]
        .contains(&v.as_str())
        {
            return Err(ApiError::bad_request(format!(
                "invalid filter 'status={v}'"
            )));
        }
    }
    for v in filters.get("is-task") {
        if !matches!(v.as_str(), "true" | "false" | "1" | "0") {
            return Err(ApiError::bad_request(format!(
                "invalid filter 'is-task={v}'"
            )));
        }
    }
    let all = p.bool("all");
    let limit: Option<i64> = p.int("limit")?;
    let backend = state.engine.containers();
    let mut containers = backend.snapshots().await?;
    containers.sort_by(|a, b| {
        b.record
            .created_at
            .cmp(&a.record.created_at)
            .then_with(|| a.record.id.cmp(&b.record.id))
    });
    let all_ids: Vec<_> = containers
        .iter()
        .map(|s| {
            (
                s.record.id.clone(),
                s.record.created_at,
                s.record.name.clone(),
            )
        })
        .collect();
    let now = wall_now();
    let mut out = Vec::new();
    let implicit_all = all || limit.is_some_and(|l| l > 0) || !filters.get("status").is_empty();
    let attachments = backend.attachments(&containers).await?;
    // `size`: what each wrote, and that with its image (a walk of each
    // snapshot, so only when asked).
    let mut meter = if p.bool("size") {
        Some(backend.size_meter().await?)
    } else {
        None
    };
    for (s, attachment) in containers.iter().zip(&attachments) {
        if !implicit_all && !matches!(s.status, Status::Running | Status::Restarting) {
            continue;
        }
        if !matches_filters(s, &filters, &all_ids)? {
            continue;
        }
        let mut shown = list_json(s, now, attachment.as_ref());
        if let Some(meter) = &mut meter
            && let Some(o) = shown.as_object_mut()
        {
            super::insert_sizes(o, &meter.measure(s).await?);
        }
        out.push(shown);
        if let Some(l) = limit
            && l > 0
            && out.len() as i64 >= l
        {
            break;
        }
    }
    Ok(Json(Value::Array(out)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_core::{ContainerConfig, Record, TaskState};
    use std::sync::Arc;

    #[test]
    fn port_filters_read_as_dockers() {
        assert_eq!(port_filter("publish", "80").ok(), Some((80, 80, "tcp")));
        assert_eq!(port_filter("expose", "53/udp").ok(), Some((53, 53, "udp")));
        assert_eq!(
            port_filter("expose", "8000-8080/tcp").ok(),
            Some((8000, 8080, "tcp"))
        );
        for bad in ["eighty", "80/icmp", "90-80", "70000", "80-", ""] {
            let e = port_filter("publish", bad).expect_err(bad);
            assert!(
                e.message.contains("invalid filter 'publish="),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn ps_status_words() {
        let mut s = Snapshot {
            record: Record {
                name: "n".to_owned(),
                config: Arc::new(ContainerConfig::default()),
                presence: holdfast_core::Presence::Created,
                run: 1,
                pid: Some(5),
                started_at: Some(holdfast_core::WallTime::from_unix_nanos(0)),
                ..holdfast_core::Record::new(
                    "abc".parse().expect("id"),
                    holdfast_core::WallTime::from_unix_nanos(0),
                )
            },
            status: Status::Running,
            task: TaskState::Running { pid: 5 },
            confirmed: true,
            paused: false,
            health: None,
        };
        let now = holdfast_core::WallTime::from_unix_nanos(180_000_000_000);
        assert_eq!(status_text(&s, now), "Up 3 minutes");
        s.paused = true;
        assert_eq!(status_text(&s, now), "Up 3 minutes (Paused)");
        assert_eq!(s.state_name(), "paused");
        s.paused = false;
        s.status = Status::Exited;
        s.record.exit = Some(holdfast_core::ExitRecord {
            run: 1,
            exit_code: 7,
            finished_at: holdfast_core::WallTime::from_unix_nanos(178_000_000_000),
            oom_killed: false,
            error: None,
        });
        assert_eq!(status_text(&s, now), "Exited (7) 2 seconds ago");
        s.status = Status::Created;
        assert_eq!(status_text(&s, now), "Created");
    }
}
