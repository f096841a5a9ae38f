//! `/_ping`, `/version`, `/info` and `/events`.

use super::params::Params;
use super::render;
use super::{API_VERSION, ApiError, ApiState, MIN_API_VERSION};
use axum::Json;
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use holdfast_core::{ConnectionState, WallTime};
use holdfast_engine::backend::system::Component;
use holdfast_engine::engine::wall_now;
use holdfast_engine::events::EventMessage;
use serde_json::{Value, json};
use std::sync::Arc;

pub async fn ping() -> Response {
    let mut r = "OK".into_response();
    let h = r.headers_mut();
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-store, must-revalidate"),
    );
    h.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert("Builder-Version", HeaderValue::from_static("1"));
    r
}

/// `GET /version`: the engine as built (its commit and build time stamped
/// by build.rs) and the components it runs on, as dockerd lists its own
/// (those that cannot be asked now are left out).
pub async fn version(State(state): State<ApiState>) -> Json<Value> {
    let version = env!("CARGO_PKG_VERSION");
    let (git_commit, build_time) = (env!("HOLDFAST_GIT_COMMIT"), env!("HOLDFAST_BUILD_TIME"));
    let system = state.engine.system();
    let host = system.host();
    let (kernel_version, arch) = (host.kernel_version, host.oci_architecture);
    let mut components = vec![json!({
        "Name": "Engine",
        "Version": version,
        "Details": {
            "ApiVersion": API_VERSION,
            "MinAPIVersion": MIN_API_VERSION,
            "GitCommit": git_commit,
            "Os": "linux",
            "Arch": arch,
            "KernelVersion": kernel_version,
            "BuildTime": build_time,
            "Experimental": "false",
        },
    })];
    let found = system.components().await;
    let component = |name: &str, c: &Component| json!({ "Name": name, "Version": c.version, "Details": { "GitCommit": c.commit } });
    components.extend(
        found
            .containerd
            .as_ref()
            .map(|c| component("containerd", c)),
    );
    components.extend(found.runc.as_ref().map(|c| component("runc", c)));
    components.extend(
        found
            .init
            .as_ref()
            .map(|(_, c)| component("docker-init", c)),
    );
    Json(json!({
        "Platform": { "Name": "holdfast" },
        "Components": components,
        "Version": version,
        "ApiVersion": API_VERSION,
        "MinAPIVersion": MIN_API_VERSION,
        "GitCommit": git_commit,
        // Built with Rust, not Go: there is no Go version to give.
        "GoVersion": "",
        "Os": "linux",
        "Arch": arch,
        "KernelVersion": kernel_version,
        "BuildTime": build_time,
    }))
}

pub async fn info(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let info = state.engine.system().info().await?;
    let (connection, facts) = (info.connection, &info.facts);
    let since = |t: Option<WallTime>| t.map_or_else(|| "never".to_owned(), render::time);
    let containerd_state = match (connection, facts.unready_since) {
        (ConnectionState::Ready, _) => "connected, relisted".to_owned(),
        (other, Some(at)) => format!("{other:?} since {}", render::time(at)),
        (other, None) => format!("{other:?}"),
    };
    let mut warnings = Vec::new();
    if connection != ConnectionState::Ready {
        warnings.push(format!(
            "WARNING: containerd is unreachable or not yet relisted ({containerd_state}): states shown may be stale; stop, kill and rm are recorded and carried out when it returns"
        ));
    }
    let system_status = json!([
        ["containerd", containerd_state],
        ["Last relist", since(facts.last_relist_at)],
        ["Relists", facts.relists.to_string()],
        [
            "Exits learned from relists",
            facts.exits_from_relists.to_string()
        ],
        [
            "Exits learned from events",
            facts.exits_from_events.to_string()
        ],
        ["Store write failures", facts.store_failures.to_string()],
    ]);
    let host = &info.host;
    Ok(Json(json!({
        "ID": info.engine_id,
        "Containers": info.running + info.paused + info.stopped,
        "ContainersRunning": info.running,
        "ContainersPaused": info.paused,
        "ContainersStopped": info.stopped,
        "Images": info.images,
        "Driver": "overlayfs",
        "DriverStatus": [["Backing Filesystem", "containerd snapshotter"]],
        "SystemStatus": system_status,
        "Plugins": { "Volume": ["local"], "Network": ["bridge", "host", "null"], "Log": ["json-file", "local"] },
        "MemoryLimit": host.cgroup.memory_limit,
        "SwapLimit": host.cgroup.swap_limit,
        "CpuCfsPeriod": host.cgroup.cpu_cfs_period,
        "CpuCfsQuota": host.cgroup.cpu_cfs_quota,
        // holdfast refuses --oom-kill-disable, whatever the kernel has.
        "OomKillDisable": false,
        "IPv4Forwarding": host.ipv4_forwarding,
        "Debug": false,
        "NFd": host.open_fds,
        // Its tasks, the counterpart of dockerd's goroutines.
        "NGoroutines": info.tasks,
        "SystemTime": render::time(wall_now()),
        "LoggingDriver": "json-file",
        "CgroupDriver": "cgroupfs",
        "CgroupVersion": host.cgroup_version,
        "NEventsListener": info.event_listeners,
        "KernelVersion": host.kernel_version,
        "OperatingSystem": "holdfast on Linux",
        "OSType": "linux",
        "Architecture": host.architecture,
        "IndexServerAddress": "https://index.docker.io/v1/",
        "NCPU": host.cpus,
        "MemTotal": host.mem_total_bytes,
        "DockerRootDir": info.data_root.to_string_lossy(),
        "Name": host.name,
        "Labels": [
            format!("holdfast.containerd={containerd_state}"),
            format!("holdfast.last-relist={}", since(facts.last_relist_at)),
            format!("holdfast.exits-from-relists={}", facts.exits_from_relists),
        ],
        "ExperimentalBuild": false,
        "ServerVersion": env!("CARGO_PKG_VERSION"),
        "Runtimes": { "runc": { "path": "runc" }, "io.containerd.runc.v2": { "path": "runc" } },
        "DefaultRuntime": "runc",
        "Swarm": { "LocalNodeState": "inactive", "NodeID": "", "NodeAddr": "", "ControlAvailable": false, "Error": "", "RemoteManagers": null },
        "LiveRestoreEnabled": true,
        "Isolation": "",
        "InitBinary": info.components.init.as_ref().map(|(path, _)| path.to_string_lossy().into_owned()).unwrap_or_default(),
        "ContainerdCommit": commit(info.components.containerd.as_ref()),
        "RuncCommit": commit(info.components.runc.as_ref()),
        "InitCommit": commit(info.components.init.as_ref().map(|(_, c)| c)),
        "SecurityOptions": ["name=seccomp,profile=holdfast-default"],
        "Warnings": warnings,
    })))
}

/// A component's commit as dockerd shows it (`Expected` is the same since
/// dockerd 23); empty when it could not be read.
fn commit(c: Option<&Component>) -> Value {
    let id = c.map_or("", |c| c.commit.as_str());
    json!({ "ID": id, "Expected": id })
}

/// Which events a subscriber wants, as dockerd's filter chooses them.
#[derive(Debug, Default)]
struct EventFilter {
    events: Vec<String>,
    types: Vec<String>,
    scopes: Vec<String>,
    /// By the actor's id or `name` attribute, by prefix: dockerd's
    /// `container`, `volume`, `network` and `daemon` filters (each one
    /// given narrows every event, whatever its type, as dockerd's does).
    by_actor: Vec<Vec<String>>,
    labels: Vec<String>,
    images: Vec<String>,
}

impl EventFilter {
    fn matches(&self, e: &EventMessage) -> bool {
        let any = |values: &[String], f: &dyn Fn(&str) -> bool| {
            values.is_empty() || values.iter().any(|v| f(v))
        };
        let name = e.attributes.get("name").map(String::as_str).unwrap_or("");
        // What `image` names: an image event's own name, else the image of
        // the container it is about.
        let image_attribute = if e.kind == "image" { "name" } else { "image" };
        let image = e.attributes.get(image_attribute).map(String::as_str);
        any(&self.events, &|v| event_matches(&e.action, v))
            && any(&self.types, &|v| e.kind == v)
            && any(&self.scopes, &|v| v == "local")
            && self.by_actor.iter().all(|values| {
                any(values, &|v| {
                    e.actor_id.starts_with(v) || name.starts_with(v)
                })
            })
            && any(&self.images, &|v| {
                e.from.as_deref() == Some(v)
                    || image == Some(v)
                    || e.actor_id == v
                    || image.map(without_tag) == Some(v)
                    || without_tag(&e.actor_id) == v
            })
            && self.labels.iter().all(|l| match l.split_once('=') {
                Some((k, v)) => e.attributes.get(k).is_some_and(|have| have == v),
                None => e.attributes.contains_key(l.as_str()),
            })
    }
}

/// `busybox:latest` -> `busybox` (a digest or a registry's port stays).
fn without_tag(name: &str) -> &str {
    match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') && !name.contains('@') => repo,
        _ => name,
    }
}

/// dockerd's event filter: exact, except that `health_status`,
/// `exec_create` and `exec_start` also match the actions that carry a
/// detail after a colon (`health_status: healthy`).
fn event_matches(action: &str, wanted: &str) -> bool {
    action == wanted
        || (["health_status", "exec_create", "exec_start"].contains(&wanted)
            && action
                .strip_prefix(wanted)
                .is_some_and(|rest| rest.starts_with(':')))
}

pub async fn events(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let time = |key: &str| -> Result<Option<WallTime>, ApiError> {
        match p.str(key).filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(t) => render::parse_client_time(t, wall_now())
                .map(Some)
                .ok_or_else(|| ApiError::bad_request(format!("invalid value for {key}: {t:?}"))),
        }
    };
    let since = time("since")?;
    let until = time("until")?;
    let f = p.filters()?;
    const BY_ACTOR: [&str; 4] = ["container", "volume", "network", "daemon"];
    f.only(&[
        "container",
        "volume",
        "network",
        "daemon",
        "event",
        "type",
        "scope",
        "label",
        "image",
    ])?;
    let filter = Arc::new(EventFilter {
        events: f.get("event").to_vec(),
        types: f.get("type").to_vec(),
        scopes: f.get("scope").to_vec(),
        by_actor: BY_ACTOR
            .iter()
            .map(|key| f.get(key).to_vec())
            .filter(|values| !values.is_empty())
            .collect(),
        labels: f.get("label").to_vec(),
        images: f.get("image").to_vec(),
    });
    let (past, mut live) = state.engine.system().events();
    let in_window = move |e: &EventMessage| {
        since.is_none_or(|s| e.time_nanos >= s.as_unix_nanos())
            && until.is_none_or(|u| e.time_nanos <= u.as_unix_nanos())
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let line = |e: &EventMessage| {
        let mut text = e.to_json().to_string();
        text.push('\n');
        Ok(Bytes::from(text))
    };
    tokio::spawn(async move {
        // Without `since`, only what happens from now on (as dockerd).
        if since.is_some() {
            for e in past.iter().filter(|e| in_window(e) && filter.matches(e)) {
                if tx.send(line(e)).await.is_err() {
                    return;
                }
            }
        }
        let until_at = until.map(|u| {
            let wait = u.saturating_since(wall_now());
            tokio::time::Instant::now() + wait
        });
        loop {
            let next = async {
                match until_at {
                    Some(at) => tokio::time::timeout_at(at, live.recv()).await.ok(),
                    None => Some(live.recv().await),
                }
            };
            tokio::select! {
                got = next => match got {
                    None => return, // until reached
                    Some(Ok(e)) => {
                        if in_window(&e) && filter.matches(&e) && tx.send(line(&e)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(tokio::sync::broadcast::error::RecvError::Lagged(n))) => {
                        tracing::warn!(missed = n, "an events subscriber fell behind; closing it");
                        return;
                    }
                    Some(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return,
                },
                () = tx.closed() => return,
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    let mut r = body.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(
        kind: &'static str,
        action: &str,
        actor: &str,
        attrs: &[(&str, &str)],
    ) -> EventMessage {
        EventMessage {
            kind,
            action: action.to_owned(),
            actor_id: actor.to_owned(),
            from: None,
            attributes: attrs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            time_nanos: 0,
        }
    }

    fn by_actor(key: &str, values: &[&str]) -> EventFilter {
        let values: Vec<String> = values.iter().map(|v| (*v).to_owned()).collect();
        let mut f = EventFilter::default();
        match key {
            "scope" => f.scopes = values,
            "image" => f.images = values,
            _ => f.by_actor.push(values),
        }
        f
    }

    #[test]
    fn volume_and_network_filters_match_by_id_or_name_prefix_and_narrow_every_type() {
        let volume = event("volume", "create", "data", &[("driver", "local")]);
        let network = event(
            "network",
            "connect",
            "4f1e",
            &[("name", "back"), ("container", "c1")],
        );
        let container = event("container", "start", "c1ab", &[("name", "web")]);
        let f = by_actor("volume", &["dat"]);
        assert!(f.matches(&volume));
        assert!(!f.matches(&network));
        assert!(!f.matches(&container));
        let f = by_actor("network", &["back"]);
        assert!(f.matches(&network));
        assert!(by_actor("network", &["4f"]).matches(&network));
        assert!(!f.matches(&volume));
        // As dockerd: `container=` is the actor's, so a network event about
        // the container is not among them.
        let f = by_actor("container", &["web"]);
        assert!(f.matches(&container));
        assert!(!f.matches(&network));
        // Two kinds given: an event must pass both.
        let mut both = by_actor("volume", &["data"]);
        both.by_actor.push(vec!["web".to_owned()]);
        assert!(!both.matches(&volume));
        // holdfast's daemon publishes nothing of its own: a daemon filter
        // leaves out whatever is not named by it.
        assert!(!by_actor("daemon", &["holdfast"]).matches(&container));
    }

    #[test]
    fn scope_is_local_and_image_matches_with_or_without_its_tag() {
        let pull = event("image", "pull", "busybox:latest", &[("name", "busybox")]);
        assert!(by_actor("scope", &["local"]).matches(&pull));
        assert!(!by_actor("scope", &["swarm"]).matches(&pull));
        assert!(by_actor("image", &["busybox"]).matches(&pull));
        let start = event("container", "start", "c1", &[("image", "busybox:1.36")]);
        assert!(by_actor("image", &["busybox"]).matches(&start));
        assert!(by_actor("image", &["busybox:1.36"]).matches(&start));
        assert!(!by_actor("image", &["alpine"]).matches(&start));
        assert_eq!(without_tag("localhost:5000/a"), "localhost:5000/a");
        assert_eq!(without_tag("localhost:5000/a:v1"), "localhost:5000/a");
    }
}
