//! `/containers/...`: create, list, inspect, the lifecycle commands, wait and
//! remove. Translation only: every decision is the core's.

mod create_options;

use super::params::{Filters, Params};
use super::render;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{
    Answer, BindMount, Command, ContainerConfig, ContainerId, LogDriver, NamespaceMode, Namespaces,
    NetworkMode, PortBinding, Record, RestartPolicy, Signal, Status, TaskState, WaitCondition,
};
use holdfast_engine::engine::wall_now;
use holdfast_engine::network::Attachment;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A container as a read of the core showed it.
#[derive(Clone, Debug)]
pub(super) struct Snapshot {
    pub record: Record,
    pub status: Status,
    pub task: TaskState,
    pub confirmed: bool,
    /// Running with its processes frozen (`docker pause`).
    pub paused: bool,
    /// The health of its current or last run, with a health check.
    pub health: Option<holdfast_core::Health>,
}

impl Snapshot {
    /// dockerd's state name: "paused" for a paused running container.
    pub(super) fn state_name(&self) -> &'static str {
        if self.paused {
            "paused"
        } else {
            self.status.as_str()
        }
    }
}

pub(super) async fn snapshot(state: &ApiState, id: ContainerId) -> Result<Snapshot, ApiError> {
    let wanted = id.clone();
    state
        .engine
        .read(move |v| {
            v.core.container(&wanted).map(|c| Snapshot {
                record: c.record.clone(),
                status: c.status,
                task: c.task,
                confirmed: c.confirmed,
                paused: c.paused,
                health: v.core.health(&wanted).cloned(),
            })
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("No such container: {id}")))
}

pub(super) async fn resolve(state: &ApiState, reference: &str) -> Result<ContainerId, ApiError> {
    Ok(state.engine.resolve(reference).await?)
}

/// A lifecycle command's answer: done 204, nothing to do 304.
fn lifecycle(answer: Answer) -> Result<Response, ApiError> {
    match answer {
        Answer::Done => Ok(StatusCode::NO_CONTENT.into_response()),
        Answer::NotModified => Ok(StatusCode::NOT_MODIFIED.into_response()),
        Answer::Waited { .. } => Ok(StatusCode::NO_CONTENT.into_response()),
        Answer::Error(e) => Err(e.into()),
    }
}

pub async fn start(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let start = |id| Command::Start { id };
    lifecycle(state.engine.container_command(&reference, start).await)
}

/// `POST /containers/{id}/pause`: 204 once containerd froze it.
pub async fn pause(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let pause = |id| Command::Pause { id };
    lifecycle(state.engine.container_command(&reference, pause).await)
}

/// `POST /containers/{id}/unpause`: 204 once containerd thawed it.
pub async fn unpause(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let unpause = |id| Command::Unpause { id };
    lifecycle(state.engine.container_command(&reference, unpause).await)
}

/// `t` (seconds; negative: wait for ever) and `signal`, shared by stop and restart.
fn stop_options(p: &Params) -> Result<(Option<Duration>, Option<Signal>), ApiError> {
    let timeout = p.int::<i64>("t")?.map(|t| {
        u64::try_from(t).map_or(
            Duration::from_secs(u64::from(u32::MAX)),
            Duration::from_secs,
        )
    });
    let signal = p
        .str("signal")
        .filter(|s| !s.is_empty())
        .map(parse_signal)
        .transpose()?;
    Ok((timeout, signal))
}

fn parse_signal(s: &str) -> Result<Signal, ApiError> {
    s.parse::<Signal>()
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

pub async fn stop(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (timeout, signal) = stop_options(&Params::parse(&query))?;
    let stop = move |id| Command::Stop {
        id,
        timeout,
        signal,
    };
    lifecycle(state.engine.container_command(&reference, stop).await)
}

pub async fn restart(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (timeout, signal) = stop_options(&Params::parse(&query))?;
    let restart = move |id| Command::Restart {
        id,
        timeout,
        signal,
    };
    lifecycle(state.engine.container_command(&reference, restart).await)
}

pub async fn kill(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let signal = match p.str("signal").filter(|s| !s.is_empty()) {
        Some(s) => parse_signal(s)?,
        None => Signal::SIGKILL,
    };
    let kill = move |id| Command::Kill { id, signal };
    lifecycle(state.engine.container_command(&reference, kill).await)
}

pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    if p.bool("link") {
        return Err(ApiError::not_implemented(
            "links are not supported by holdfast",
        ));
    }
    let id = resolve(&state, &reference).await?;
    // `-v`: its anonymous volumes go with it, once it is gone.
    let mounts = if p.bool("v") {
        snapshot(&state, id.clone())
            .await?
            .record
            .config
            .mounts
            .clone()
    } else {
        Vec::new()
    };
    let remove = Command::Remove {
        id,
        force: p.bool("force"),
    };
    let response = lifecycle(state.engine.command(remove).await)?;
    super::volumes::remove_anonymous(&state, &mounts).await?;
    Ok(response)
}

pub async fn wait(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let condition = match p.str("condition").unwrap_or("") {
        "" | "not-running" => WaitCondition::NotRunning,
        "next-exit" => WaitCondition::NextExit,
        "removed" => WaitCondition::Removed,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid condition: {other:?}: want not-running, next-exit or removed"
            )));
        }
    };
    // dockerd sends the headers at once and the result when the condition
    // is met: the CLI starts the container only after the headers came.
    // If the client goes away, the body is dropped and the wait cancelled.
    let wait = move |id| Command::Wait { id, condition };
    let waiting = state
        .engine
        .container_command_accepted(&reference, wait)
        .await?;
    let body = futures_util::stream::once(async move {
        let result = match waiting.answer().await {
            Answer::Waited { exit_code, error } => json!({
                "StatusCode": exit_code,
                "Error": error.map(|m| json!({ "Message": m })),
            }),
            Answer::Done | Answer::NotModified => json!({ "StatusCode": 0, "Error": null }),
            Answer::Error(e) => json!({ "StatusCode": -1, "Error": { "Message": e.message } }),
        };
        let mut text = result.to_string();
        text.push('\n');
        Ok::<_, std::convert::Infallible>(Bytes::from(text))
    });
    let mut r = axum::body::Body::from_stream(body).into_response();
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// `POST /containers/{id}/resize?h=..&w=..`: the init's terminal.
pub async fn resize(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (height, width) = super::exec::size(&Params::parse(&query))?;
    let id = resolve(&state, &reference).await?;
    let s = snapshot(&state, id.clone()).await?;
    if s.status != Status::Running {
        return Err(ApiError::conflict(format!("Container {id} is not running")));
    }
    // Without a terminal there is nothing to resize; accepted as dockerd does.
    if s.record.config.tty {
        state
            .adapter
            .resize_terminal(&id, "", width, height)
            .await
            .map_err(ApiError::from)?;
    }
    Ok(StatusCode::OK.into_response())
}

pub async fn unsupported(req: axum::extract::Request) -> ApiError {
    ApiError::not_implemented(format!(
        "{} {} is not supported by holdfast yet",
        req.method(),
        req.uri().path()
    ))
}

// ---- create ----------------------------------------------------------------

/// Docker's `strslice`: a string or a list of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StrOrList {
    One(String),
    Many(Vec<String>),
}

impl StrOrList {
    fn into_vec(self) -> Vec<String> {
        match self {
            StrOrList::One(s) => vec![s],
            StrOrList::Many(v) => v,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct CreateBody {
    image: Option<String>,
    cmd: Option<StrOrList>,
    entrypoint: Option<StrOrList>,
    env: Option<Vec<String>>,
    working_dir: Option<String>,
    user: Option<String>,
    hostname: Option<String>,
    labels: Option<BTreeMap<String, String>>,
    stop_signal: Option<String>,
    stop_timeout: Option<i64>,
    tty: Option<bool>,
    open_stdin: Option<bool>,
    stdin_once: Option<bool>,
    volumes: Option<BTreeMap<String, Value>>,
    exposed_ports: Option<BTreeMap<String, Value>>,
    healthcheck: Option<Value>,
    host_config: Option<HostConfigBody>,
    mac_address: Option<String>,
    networking_config: Option<NetworkingConfigBody>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct NetworkingConfigBody {
    endpoints_config: Option<BTreeMap<String, EndpointBody>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct EndpointBody {
    #[serde(rename = "IPAMConfig")]
    ipam_config: Option<EndpointIpamBody>,
    aliases: Option<Vec<String>>,
    mac_address: Option<String>,
    links: Option<Vec<String>>,
    driver_opts: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct EndpointIpamBody {
    #[serde(rename = "IPv4Address")]
    ipv4_address: Option<String>,
    #[serde(rename = "IPv6Address")]
    ipv6_address: Option<String>,
    #[serde(rename = "LinkLocalIPs")]
    link_local_ips: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct HostConfigBody {
    binds: Option<Vec<String>>,
    network_mode: Option<String>,
    restart_policy: Option<RestartPolicyBody>,
    auto_remove: Option<bool>,
    readonly_rootfs: Option<bool>,
    log_config: Option<LogConfigBody>,
    /// The options runc honours (create_options.rs).
    #[serde(flatten)]
    options: create_options::OptionsBody,
    // Options that change behaviour and that holdfast cannot honour yet:
    // refused by name when set, never ignored.
    publish_all_ports: Option<bool>,
    port_bindings: Option<BTreeMap<String, Value>>,
    dns: Option<Vec<String>>,
    dns_search: Option<Vec<String>>,
    dns_options: Option<Vec<String>>,
    extra_hosts: Option<Vec<String>>,
    // Options that change behaviour and that holdfast cannot honour yet:
    // refused by name when set, never ignored.
    volumes_from: Option<Vec<String>>,
    links: Option<Vec<String>>,
    security_opt: Option<Vec<String>>,
    device_cgroup_rules: Option<Vec<String>>,
    device_requests: Option<Vec<Value>>,
    masked_paths: Option<Vec<String>>,
    readonly_paths: Option<Vec<String>>,
    userns_mode: Option<String>,
    oom_kill_disable: Option<bool>,
    oom_score_adj: Option<i64>,
    memory_swappiness: Option<i64>,
    kernel_memory: Option<i64>,
    blkio_weight: Option<i64>,
    blkio_weight_device: Option<Vec<Value>>,
    blkio_device_read_bps: Option<Vec<Value>>,
    blkio_device_write_bps: Option<Vec<Value>>,
    blkio_device_read_i_ops: Option<Vec<Value>>,
    blkio_device_write_i_ops: Option<Vec<Value>>,
    cpu_count: Option<i64>,
    cpu_percent: Option<i64>,
    runtime: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(super) struct RestartPolicyBody {
    pub(super) name: Option<String>,
    maximum_retry_count: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct LogConfigBody {
    #[serde(rename = "Type")]
    kind: Option<String>,
    config: Option<BTreeMap<String, String>>,
}

/// A create body as the core will record it, plus the warnings for the client.
#[derive(Debug)]
pub(crate) struct CreateRequest {
    pub config: ContainerConfig,
    pub warnings: Vec<String>,
    /// No `CgroupnsMode` was given: the host decides the default.
    pub cgroupns_defaulted: bool,
    /// `-P`: the image's exposed ports are published too, once it is resolved.
    pub publish_all: bool,
    /// No network was named: the daemon's default (bridge, unless disabled).
    pub network_defaulted: bool,
}

/// Decodes and checks a create body. Pure, so it is unit-tested and fuzzed.
pub fn decode_create(body: &[u8]) -> Result<(ContainerConfig, Vec<String>), ApiError> {
    let req = parse_create(body)?;
    Ok((req.config, req.warnings))
}

pub(crate) fn parse_create(body: &[u8]) -> Result<CreateRequest, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "config cannot be empty in order to create a container",
        ));
    }
    let b: CreateBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?;
    let image = b
        .image
        .filter(|i| !i.is_empty())
        .ok_or_else(|| ApiError::bad_request("no image given: config.Image is required"))?;
    let mut hc = b.host_config.unwrap_or_default();
    refuse_unsupported(&hc)?;
    let healthcheck = super::health::decode(b.healthcheck.as_ref())?;
    let mut warnings = Vec::new();

    let network_defaulted = matches!(hc.network_mode.as_deref(), None | Some("" | "default"));
    let mut network_name = None;
    let mut network_container = None;
    let network = match hc.network_mode.as_deref().unwrap_or("") {
        "" | "default" | "bridge" => NetworkMode::Bridge,
        "none" => NetworkMode::None,
        "host" => NetworkMode::Host,
        other => match other.strip_prefix("container:") {
            Some("") => {
                return Err(ApiError::bad_request(
                    "invalid network mode container: a container name or id is needed",
                ));
            }
            // Resolved to the running container at create.
            Some(reference) => {
                network_container = Some(holdfast_core::SharedNetwork {
                    id: reference.to_owned(),
                    pid: 0,
                });
                NetworkMode::Container
            }
            // A user-defined network, looked up at create.
            None => {
                network_name = Some(other.to_owned());
                NetworkMode::Bridge
            }
        },
    };
    let endpoint = endpoint_settings(
        b.networking_config.unwrap_or_default(),
        hc.network_mode.as_deref().unwrap_or(""),
    )?;
    let user_network = network_name.is_some();
    let network_aliases = endpoint.aliases.unwrap_or_default();
    if let Some(bad) = network_aliases
        .iter()
        .find(|a| a.is_empty() || a.contains(char::is_whitespace))
    {
        return Err(ApiError::bad_request(format!(
            "invalid --network-alias {bad:?}"
        )));
    }
    if !network_aliases.is_empty() && !user_network {
        return Err(ApiError::bad_request(
            "network-scoped alias is supported only for containers in user defined networks",
        ));
    }
    let ipam = endpoint.ipam_config.unwrap_or_default();
    if ipam.ipv6_address.as_deref().is_some_and(|a| !a.is_empty())
        || ipam.link_local_ips.as_ref().is_some_and(|l| !l.is_empty())
    {
        return Err(ApiError::bad_request(
            "--ip6 and --link-local-ip are not supported by holdfast yet",
        ));
    }
    if endpoint.links.as_ref().is_some_and(|l| !l.is_empty())
        || endpoint.driver_opts.as_ref().is_some_and(|o| !o.is_empty())
    {
        return Err(ApiError::bad_request(
            "--link and endpoint driver options are not supported by holdfast yet",
        ));
    }
    let ip_address = ipam.ipv4_address.filter(|a| !a.is_empty());
    if let Some(ip) = &ip_address {
        if ip.parse::<std::net::Ipv4Addr>().is_err() {
            return Err(ApiError::bad_request(format!(
                "invalid --ip {ip:?}: an IPv4 address"
            )));
        }
        if !user_network {
            return Err(ApiError::bad_request(
                "user specified IP address is supported on user defined networks only",
            ));
        }
    }
    let mac_address = endpoint
        .mac_address
        .filter(|m| !m.is_empty())
        .or(b.mac_address.filter(|m| !m.is_empty()));
    if let Some(mac) = &mac_address {
        let octets: Vec<&str> = mac.split(':').collect();
        let valid = octets.len() == 6
            && octets
                .iter()
                .all(|o| o.len() == 2 && o.chars().all(|c| c.is_ascii_hexdigit()));
        if !valid {
            return Err(ApiError::bad_request(format!(
                "invalid --mac-address {mac:?}: six hex pairs, e.g. 02:42:ac:11:00:02"
            )));
        }
        if network != NetworkMode::Bridge {
            return Err(ApiError::bad_request(
                "--mac-address needs a bridge network (the default bridge or a user-defined one)",
            ));
        }
    }
    let publish_all = hc.publish_all_ports.unwrap_or(false);
    let mut ports = port_bindings(hc.port_bindings.take().unwrap_or_default())?;
    if publish_all {
        publish_exposed(&mut ports, b.exposed_ports.iter().flat_map(|e| e.keys()))?;
    }
    let extra_hosts = hc.extra_hosts.take().unwrap_or_default();
    for h in &extra_hosts {
        let valid = h.split_once(':').is_some_and(|(name, ip)| {
            !name.is_empty()
                && !name.contains(char::is_whitespace)
                && ip.parse::<std::net::IpAddr>().is_ok()
        });
        if !valid {
            return Err(ApiError::bad_request(format!(
                "invalid --add-host {h:?}: want name:ip"
            )));
        }
    }
    let dns = hc.dns.take().unwrap_or_default();
    if let Some(bad) = dns.iter().find(|d| d.parse::<std::net::IpAddr>().is_err()) {
        return Err(ApiError::bad_request(format!(
            "invalid --dns {bad:?}: an IP address"
        )));
    }
    let dns_search = hc.dns_search.take().unwrap_or_default();
    let dns_options = hc.dns_options.take().unwrap_or_default();
    if let Some(bad) = dns_search
        .iter()
        .chain(&dns_options)
        .find(|s| s.is_empty() || s.contains(char::is_whitespace))
    {
        return Err(ApiError::bad_request(format!(
            "invalid --dns-search or --dns-option {bad:?}"
        )));
    }
    let names_files = !extra_hosts.is_empty()
        || !dns.is_empty()
        || !dns_search.is_empty()
        || !dns_options.is_empty();
    if network != NetworkMode::Bridge && names_files {
        return Err(ApiError::bad_request(format!(
            "--add-host, --dns, --dns-search and --dns-option need the bridge network in holdfast: not with network mode {}",
            network_mode_name(network)
        )));
    }
    if network != NetworkMode::Bridge && !ports.is_empty() {
        return Err(ApiError::bad_request(format!(
            "published ports need the bridge network: not with network mode {}",
            network_mode_name(network)
        )));
    }
    let restart_policy = restart_policy(hc.restart_policy.unwrap_or_default())?;
    let auto_remove = hc.auto_remove.unwrap_or(false);
    if auto_remove && restart_policy != RestartPolicy::No {
        return Err(ApiError::bad_request(
            "Conflicting options: AutoRemove and restart policy",
        ));
    }
    let stop_signal = b
        .stop_signal
        .filter(|s| !s.is_empty())
        .map(|s| parse_signal(&s))
        .transpose()?;
    let stop_timeout = match b.stop_timeout {
        None => None,
        Some(t) if t < 0 => Some(Duration::from_secs(u64::from(u32::MAX))),
        Some(t) => Some(Duration::from_secs(t.unsigned_abs())),
    };
    let memory_limit_bytes = match hc.options.memory.unwrap_or(0) {
        0 => None,
        m if m < 6 * 1024 * 1024 => {
            // Negative included: dockerd's words for both.
            return Err(ApiError::bad_request("Minimum memory limit allowed is 6MB"));
        }
        m => Some(m.unsigned_abs()),
    };
    let mut mounts = hc
        .binds
        .take()
        .unwrap_or_default()
        .iter()
        .map(|b| parse_bind(b))
        .collect::<Result<Vec<_>, _>>()?;
    mounts.extend(create_options::volume_mounts(&mut hc.options.mounts)?);
    for anonymous in anonymous_volumes(b.volumes)? {
        // A bind or named volume at the same path wins, as with dockerd.
        if !mounts
            .iter()
            .any(|m| m.destination == anonymous.destination)
        {
            mounts.push(anonymous);
        }
    }
    if let Some(dup) = mounts
        .iter()
        .enumerate()
        .find(|(i, m)| mounts[..*i].iter().any(|o| o.destination == m.destination))
        .map(|(_, m)| m.destination.clone())
    {
        return Err(ApiError::bad_request(format!(
            "Duplicate mount point: {dup}"
        )));
    }
    if let Some(env) = &b.env
        && let Some(bad) = env.iter().find(|e| e.is_empty() || e.starts_with('='))
    {
        return Err(ApiError::bad_request(format!(
            "invalid environment variable: {bad:?}"
        )));
    }
    let (log_max_size_bytes, log_max_files) = log_limits(hc.log_config.as_ref())?;
    let log_driver =
        create_options::log_driver(hc.log_config.as_ref().and_then(|l| l.kind.as_deref()))?;
    let tty = b.tty.unwrap_or(false);
    let open_stdin = b.open_stdin.unwrap_or(false);
    if log_driver == LogDriver::None && (tty || open_stdin) {
        return Err(ApiError::bad_request(
            "HostConfig.LogConfig.Type none with -t or -i is not supported by holdfast yet (attach reads the container's log)",
        ));
    }
    if log_driver == LogDriver::None {
        // dockerd still streams an attached run's output; holdfast's attach
        // reads the log, and there is none.
        warnings.push(
            "--log-driver none: nothing is kept, and attach reads the log: an attached run shows no output"
                .to_owned(),
        );
    }
    let o = &mut hc.options;
    let cgroupns_defaulted = o.cgroupns_mode.as_deref().unwrap_or("").is_empty();
    let namespaces = Namespaces {
        pid: create_options::namespace_mode(
            "HostConfig.PidMode",
            o.pid_mode.as_deref(),
            &["private"],
        )?,
        uts: create_options::namespace_mode(
            "HostConfig.UTSMode",
            o.uts_mode.as_deref(),
            &["private"],
        )?,
        ipc: create_options::namespace_mode(
            "HostConfig.IpcMode",
            o.ipc_mode.as_deref(),
            &["private", "shareable"],
        )?,
        cgroup: create_options::cgroupns_mode(o.cgroupns_mode.as_deref())?,
    };
    if network == NetworkMode::Container && b.hostname.as_deref().is_some_and(|h| !h.is_empty()) {
        return Err(ApiError::bad_request(
            "Conflicting options: hostname and the network mode",
        ));
    }
    if namespaces.uts != NamespaceMode::Private
        && b.hostname.as_deref().is_some_and(|h| !h.is_empty())
    {
        return Err(ApiError::bad_request(
            "Conflicting options: hostname and the UTS mode (HostConfig.UTSMode)",
        ));
    }
    let resources = create_options::resources(o, memory_limit_bytes)?;
    let exposed_ports = exposed_port_keys(b.exposed_ports.iter().flat_map(|e| e.keys()))?;
    let config = ContainerConfig {
        ports,
        publish_all,
        extra_hosts,
        dns,
        dns_search,
        dns_options,
        log_max_size_bytes,
        log_max_files,
        log_driver,
        exposed_ports,
        privileges: create_options::privileges(o)?,
        resources,
        sysctls: create_options::sysctls(
            o.sysctls.take(),
            network,
            &namespaces.ipc,
            &namespaces.uts,
        )?,
        tmpfs: create_options::tmpfs(o.tmpfs.take())?,
        mount_specs: create_options::mounts(o.mounts.take())?,
        namespaces,
        cgroup_parent: create_options::cgroup_parent(o.cgroup_parent.take())?,
        init: o.init.unwrap_or(false),
        image,
        image_id: None,
        entrypoint: b.entrypoint.map(StrOrList::into_vec),
        cmd: b.cmd.map(StrOrList::into_vec),
        env: b.env.unwrap_or_default(),
        working_dir: b.working_dir.filter(|w| !w.is_empty()),
        user: b.user.filter(|u| !u.is_empty()),
        hostname: b.hostname.filter(|h| !h.is_empty()),
        labels: b.labels.unwrap_or_default(),
        mounts,
        read_only_rootfs: hc.readonly_rootfs.unwrap_or(false),
        memory_limit_bytes,
        network,
        network_name,
        network_aliases,
        ip_address,
        mac_address,
        network_container,
        tty,
        open_stdin,
        stdin_once: open_stdin && b.stdin_once.unwrap_or(false),
        stop_signal,
        stop_timeout,
        image_stop_signal: None,
        restart_policy,
        auto_remove,
        healthcheck,
    };
    if let Some(w) = &config.working_dir
        && !w.starts_with('/')
    {
        return Err(ApiError::bad_request(format!(
            "the working directory '{w}' is invalid, it needs to be an absolute path"
        )));
    }
    Ok(CreateRequest {
        config,
        warnings,
        cgroupns_defaulted,
        publish_all,
        network_defaulted,
    })
}

/// The one endpoint a create may name: the network of its network mode
/// (the CLI sends the `--network-alias`, `--ip` and `--mac-address` there).
fn endpoint_settings(nc: NetworkingConfigBody, mode: &str) -> Result<EndpointBody, ApiError> {
    let mut endpoints = nc.endpoints_config.unwrap_or_default();
    if endpoints.len() > 1 {
        return Err(ApiError::bad_request(
            "more than one network at create (NetworkingConfig.EndpointsConfig) is not supported by holdfast yet: create on one, then docker network connect the others",
        ));
    }
    let Some((name, endpoint)) = endpoints.pop_first() else {
        return Ok(EndpointBody::default());
    };
    // The CLI names the default network `default`, as the mode may.
    let canonical = |n: &str| {
        if n.is_empty() || n == "default" {
            "bridge".to_owned()
        } else {
            n.to_owned()
        }
    };
    if canonical(&name) != canonical(mode) {
        return Err(ApiError::bad_request(format!(
            "NetworkingConfig.EndpointsConfig names network {name:?}, not the container's network {mode:?}"
        )));
    }
    Ok(endpoint)
}

/// `--log-opt max-size=10m` (docker's units: k, m, g, binary) and `max-file=N`.
fn log_limits(log: Option<&LogConfigBody>) -> Result<(Option<u64>, Option<u32>), ApiError> {
    let Some(opts) = log.and_then(|l| l.config.as_ref()) else {
        return Ok((None, None));
    };
    let size = match opts.get("max-size").map(|s| s.trim()) {
        None | Some("") | Some("-1") => None,
        Some(s) => Some(parse_size(s).ok_or_else(|| {
            ApiError::bad_request(format!("invalid --log-opt max-size={s:?}: want e.g. 10m"))
        })?),
    };
    let files = match opts.get("max-file").map(|s| s.trim()) {
        None | Some("") => None,
        Some(f) => match f.parse::<u32>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "invalid --log-opt max-file={f:?}: want a number of 1 or more"
                )));
            }
        },
    };
    Ok((size, files))
}

/// go-units' `RAMInBytes`: a number with an optional k, m, g, t (binary) suffix.
fn parse_size(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let trimmed = lower.strip_suffix('b').unwrap_or(&lower);
    let (digits, shift) = match trimmed.chars().last()? {
        'k' => (&trimmed[..trimmed.len() - 1], 10),
        'm' => (&trimmed[..trimmed.len() - 1], 20),
        'g' => (&trimmed[..trimmed.len() - 1], 30),
        't' => (&trimmed[..trimmed.len() - 1], 40),
        _ => (trimmed, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    let size = n.checked_mul(1u64 << shift)?;
    (size > 0).then_some(size)
}

pub(super) fn restart_policy(p: RestartPolicyBody) -> Result<RestartPolicy, ApiError> {
    let retries = p.maximum_retry_count.unwrap_or(0);
    if retries < 0 {
        return Err(ApiError::bad_request(
            "maximum retry count cannot be negative",
        ));
    }
    let policy = match p.name.as_deref().unwrap_or("") {
        "" | "no" => RestartPolicy::No,
        "always" => RestartPolicy::Always,
        "unless-stopped" => RestartPolicy::UnlessStopped,
        "on-failure" => RestartPolicy::OnFailure {
            max_retries: u32::try_from(retries).unwrap_or(u32::MAX),
        },
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid restart policy '{other}'"
            )));
        }
    };
    if retries > 0 && !matches!(policy, RestartPolicy::OnFailure { .. }) {
        return Err(ApiError::bad_request(
            "invalid restart policy: maximum retry count can only be used with 'on-failure'",
        ));
    }
    Ok(policy)
}

/// `/host/path:/container/path[:ro|rw]` or `volume:/container/path[:ro|rw]`.
fn parse_bind(bind: &str) -> Result<BindMount, ApiError> {
    let parts: Vec<&str> = bind.split(':').collect();
    let (source, destination, mode) = match parts.as_slice() {
        [s, d] => (*s, *d, ""),
        [s, d, m] => (*s, *d, *m),
        _ => {
            return Err(ApiError::bad_request(format!(
                "invalid volume specification: '{bind}'"
            )));
        }
    };
    // Not a host path: a named volume, created on first use.
    let volume = holdfast_engine::volumes::volume_of_source(source);
    if let Some(name) = volume {
        holdfast_engine::volumes::validate_name(name)
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
    } else if !source.starts_with('/') {
        return Err(ApiError::bad_request(format!(
            "invalid volume specification: '{bind}'"
        )));
    }
    if !destination.starts_with('/') || destination == "/" {
        return Err(ApiError::bad_request(format!(
            "invalid volume specification: '{bind}': the destination must be an absolute path other than /"
        )));
    }
    let read_only = match mode {
        "" | "rw" => false,
        "ro" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid volume specification: '{bind}': mode {other:?} is not supported (ro or rw)"
            )));
        }
    };
    Ok(BindMount {
        source: if volume.is_some() {
            String::new()
        } else {
            source.to_owned()
        },
        destination: destination.to_owned(),
        read_only,
        volume: volume.map(str::to_owned),
    })
}

/// `-v /path` (the body's `Volumes`): an anonymous volume at each path.
fn anonymous_volumes(volumes: Option<BTreeMap<String, Value>>) -> Result<Vec<BindMount>, ApiError> {
    volumes
        .unwrap_or_default()
        .into_keys()
        .map(|destination| {
            if !destination.starts_with('/') || destination == "/" {
                return Err(ApiError::bad_request(format!(
                    "invalid volume specification: '{destination}': the destination must be an absolute path other than /"
                )));
            }
            Ok(BindMount {
                source: String::new(),
                destination,
                read_only: false,
                volume: Some(String::new()),
            })
        })
        .collect()
}

/// `HostConfig.PortBindings`: `"80/tcp": [{"HostIp": "", "HostPort": "8080"}]`.
/// An empty host port is chosen at start.
fn port_bindings(raw: BTreeMap<String, Value>) -> Result<Vec<PortBinding>, ApiError> {
    let mut out = Vec::new();
    for (key, bindings) in raw {
        let (container_port, protocol) = parse_port_key(&key)?;
        let list = match bindings {
            Value::Null => Vec::new(),
            Value::Array(list) => list,
            other => {
                return Err(ApiError::bad_request(format!(
                    "invalid port binding for {key}: expected a list, got {other}"
                )));
            }
        };
        let list = if list.is_empty() {
            vec![json!({})]
        } else {
            list
        };
        for b in list {
            let host_ip = b["HostIp"].as_str().unwrap_or_default().to_owned();
            if !host_ip.is_empty() && host_ip.parse::<std::net::Ipv4Addr>().is_err() {
                return Err(ApiError::bad_request(format!(
                    "invalid host IP {host_ip:?} for port {key}: holdfast publishes on IPv4 addresses"
                )));
            }
            let host_port = match b["HostPort"].as_str().unwrap_or_default() {
                "" => 0,
                p => p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "invalid host port {p:?} for {key}: a port number 1-65535 (ranges are not supported)"
                    ))
                })?,
            };
            out.push(PortBinding {
                container_port,
                protocol: protocol.clone(),
                host_ip,
                host_port,
                by_publish_all: false,
            });
        }
    }
    Ok(out)
}

/// `80`, `80/tcp`, `53/udp`.
fn parse_port_key(key: &str) -> Result<(u16, String), ApiError> {
    let (port, proto) = key.split_once('/').unwrap_or((key, "tcp"));
    let proto = proto.to_ascii_lowercase();
    if proto != "tcp" && proto != "udp" {
        return Err(ApiError::bad_request(format!(
            "invalid port {key:?}: the protocol must be tcp or udp"
        )));
    }
    let port = port.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| {
        ApiError::bad_request(format!(
            "invalid port {key:?}: a container port 1-65535 (ranges are not supported)"
        ))
    })?;
    Ok((port, proto))
}

/// `-P`: every exposed port not yet published gets a chosen host port.
fn publish_exposed<'a>(
    ports: &mut Vec<PortBinding>,
    exposed: impl Iterator<Item = &'a String>,
) -> Result<(), ApiError> {
    for key in exposed {
        let (container_port, protocol) = parse_port_key(key)?;
        if ports
            .iter()
            .any(|p| p.container_port == container_port && p.protocol == protocol)
        {
            continue;
        }
        ports.push(PortBinding {
            container_port,
            protocol,
            host_ip: String::new(),
            host_port: 0,
            by_publish_all: true,
        });
    }
    Ok(())
}

fn refuse_unsupported(hc: &HostConfigBody) -> Result<(), ApiError> {
    let refuse = |option: &str| {
        Err(ApiError::bad_request(format!(
            "{option} is not supported by holdfast yet"
        )))
    };
    let set = |b: &Option<bool>| b.unwrap_or(false);
    let nonzero = |n: &Option<i64>| n.unwrap_or(0) != 0;
    let nonempty_str = |s: &Option<String>, allowed: &[&str]| {
        s.as_deref()
            .is_some_and(|v| !v.is_empty() && !allowed.contains(&v))
    };
    if set(&hc.oom_kill_disable) {
        return refuse("HostConfig.OomKillDisable");
    }
    let nonempty = |v: Option<usize>| v.is_some_and(|n| n > 0);
    let lists: [(&str, bool); 11] = [
        (
            "HostConfig.VolumesFrom",
            nonempty(hc.volumes_from.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.Links",
            nonempty(hc.links.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.SecurityOpt",
            nonempty(hc.security_opt.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.DeviceCgroupRules",
            nonempty(hc.device_cgroup_rules.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.DeviceRequests (--gpus)",
            nonempty(hc.device_requests.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.MaskedPaths",
            nonempty(hc.masked_paths.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.ReadonlyPaths",
            nonempty(hc.readonly_paths.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.BlkioWeightDevice",
            nonempty(hc.blkio_weight_device.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.BlkioDeviceReadBps",
            nonempty(hc.blkio_device_read_bps.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.BlkioDeviceWriteBps",
            nonempty(hc.blkio_device_write_bps.as_ref().map(Vec::len)),
        ),
        (
            "HostConfig.BlkioDeviceReadIOps/WriteIOps",
            nonempty(hc.blkio_device_read_i_ops.as_ref().map(Vec::len))
                || nonempty(hc.blkio_device_write_i_ops.as_ref().map(Vec::len)),
        ),
    ];
    if let Some((name, _)) = lists.iter().find(|(_, on)| *on) {
        return refuse(name);
    }
    let modes: [(&str, bool); 2] = [
        (
            "HostConfig.UsernsMode",
            nonempty_str(&hc.userns_mode, &["private"]),
        ),
        (
            "HostConfig.Runtime",
            nonempty_str(&hc.runtime, &["runc", "io.containerd.runc.v2"]),
        ),
    ];
    if let Some((name, _)) = modes.iter().find(|(_, on)| *on) {
        return refuse(name);
    }
    let numbers: [(&str, bool); 6] = [
        ("HostConfig.OomScoreAdj", nonzero(&hc.oom_score_adj)),
        (
            "HostConfig.MemorySwappiness",
            hc.memory_swappiness.is_some_and(|s| s != -1),
        ),
        ("HostConfig.KernelMemory", nonzero(&hc.kernel_memory)),
        ("HostConfig.BlkioWeight", nonzero(&hc.blkio_weight)),
        ("HostConfig.CpuCount", nonzero(&hc.cpu_count)),
        ("HostConfig.CpuPercent", nonzero(&hc.cpu_percent)),
    ];
    if let Some((name, _)) = numbers.iter().find(|(_, on)| *on) {
        return refuse(name);
    }
    if let Some(log) = &hc.log_config {
        if log.kind.as_deref() == Some("none") && log.config.as_ref().is_some_and(|c| !c.is_empty())
        {
            return Err(ApiError::bad_request(
                "--log-opt cannot be used with HostConfig.LogConfig.Type none",
            ));
        }
        if let Some(key) = log.config.as_ref().and_then(|c| {
            c.keys()
                .find(|k| !matches!(k.as_str(), "max-size" | "max-file"))
        }) {
            return Err(ApiError::bad_request(format!(
                "--log-opt {key} is not supported by holdfast yet (max-size and max-file are)"
            )));
        }
    }
    Ok(())
}

/// How long a create waits, at holdfastd's start, for the first connection
/// to containerd (which the supervisor may still be starting).
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How often that wait looks at the engine.
const FIRST_CONNECT_POLL: Duration = Duration::from_millis(20);

/// Whether the core is connected and relisted. Before its first relist
/// since holdfastd started, containerd is being reached, not known to be
/// away: that is waited for (bounded) instead of refusing the create (the
/// API serves before the first connection, and under load a `docker run`
/// right after start-up was refused with "containerd is unreachable").
async fn containerd_ready(state: &ApiState) -> Result<bool, ApiError> {
    let deadline = tokio::time::Instant::now() + FIRST_CONNECT_WAIT;
    loop {
        let (ready, never_relisted) = state
            .engine
            .read(|v| {
                (
                    v.core.connection() == holdfast_core::ConnectionState::Ready,
                    v.facts.relists == 0,
                )
            })
            .await?;
        if ready || !never_relisted || tokio::time::Instant::now() >= deadline {
            return Ok(ready);
        }
        tokio::time::sleep(FIRST_CONNECT_POLL).await;
    }
}

pub async fn create(
    State(state): State<ApiState>,
    query: RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let CreateRequest {
        mut config,
        mut warnings,
        cgroupns_defaulted,
        publish_all,
        network_defaulted,
    } = parse_create(&body)?;
    if config.network == NetworkMode::Bridge && !state.network.enabled() {
        if !network_defaulted || !config.ports.is_empty() || publish_all {
            return Err(ApiError::bad_request(
                "the bridge network is disabled on this daemon (holdfastd --bridge none): use --network none or host",
            ));
        }
        warnings.push(
            "the bridge network is disabled (holdfastd --bridge none): the container gets only loopback".to_owned(),
        );
        config.network = NetworkMode::None;
    }
    // As dockerd: without swap accounting, memory is limited without swap.
    if config.resources.memory_swap_bytes.is_some_and(|s| s > 0) && !swap_accounting() {
        config.resources.memory_swap_bytes = Some(-1);
        warnings.push(
            "Your kernel does not support swap limit capabilities or the cgroup is not mounted. Memory limited without swap."
                .to_owned(),
        );
    }
    // dockerd's default: a cgroup namespace of its own on cgroup v2, the
    // host's on v1.
    if cgroupns_defaulted && std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        config.namespaces.cgroup = holdfast_core::CgroupnsMode::Private;
    }
    if let Some(platform) = p.str("platform").filter(|s| !s.is_empty())
        && platform != "linux"
        && platform != "linux/amd64"
    {
        return Err(ApiError::bad_request(format!(
            "platform {platform:?} is not supported: holdfast runs linux/amd64"
        )));
    }
    // Fail fast while containerd is away: nothing is done, nothing is left.
    if !containerd_ready(&state).await? {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "containerd is unreachable: the container was not created; try again when it is back",
        ));
    }
    check_host_options(&config)?;
    resolve_shared_namespaces(&state, &mut config).await?;
    // Held until the container is recorded: a network rm waits for it, so
    // it sees this container (and refuses), or this create sees the
    // network gone (and refuses).
    let _networks = state.network.registry().read().await;
    resolve_network(&state, &mut config).await?;
    let image = state
        .adapter
        .resolve_image(&config.image)
        .await
        .map_err(|e| super::images::image_error(&config.image, e))?;
    config.image_id = Some(image.config_digest.clone());
    merge_image_defaults(&mut config, &image.config);
    config.env = merged_env(
        std::mem::take(&mut config.env),
        image.config.env.as_deref().unwrap_or_default(),
    );
    // The image's EXPOSE joins the given ones, as dockerd merges them
    // (a malformed one in the image is left out, never fatal).
    let mut exposed: std::collections::BTreeSet<String> = std::mem::take(&mut config.exposed_ports)
        .into_iter()
        .collect();
    for key in image.config.exposed_ports.iter().flatten() {
        if let Ok(k) = exposed_port_keys(std::iter::once(key)) {
            exposed.extend(k);
        }
    }
    config.exposed_ports = exposed.into_iter().collect();
    if publish_all {
        publish_exposed(
            &mut config.ports,
            image.config.exposed_ports.iter().flatten(),
        )?;
    }
    config.image_stop_signal = image
        .config
        .stop_signal
        .as_deref()
        .filter(|s| !s.is_empty())
        .and_then(|s| s.parse().ok());
    config.healthcheck = super::health::merge(
        config.healthcheck.take(),
        super::health::from_image(image.config.healthcheck.as_ref()),
    );
    let mut to_fill = Some(super::volumes::resolve_mounts(
        &state,
        &mut config,
        &image.config,
    )?);
    let config = Arc::new(config);
    let given_name = p.str("name").filter(|n| !n.is_empty());
    // A generated name that happens to be taken is drawn again.
    for attempt in 0..8 {
        let id = new_container_id()?;
        let name = match given_name {
            Some(n) => n.strip_prefix('/').unwrap_or(n).to_owned(),
            None => generated_name(attempt)?,
        };
        let answer = state
            .engine
            .command(Command::Create {
                id: id.clone(),
                name,
                config: Arc::clone(&config),
            })
            .await;
        match answer {
            Answer::Done => {
                let fill = to_fill.take().unwrap_or_default();
                if let Err(e) = super::volumes::fill_from_image(&state, &id, fill).await {
                    // Not half-created: the container goes again.
                    let _ = state
                        .engine
                        .command(Command::Remove {
                            id: id.clone(),
                            force: true,
                        })
                        .await;
                    return Err(e);
                }
                return Ok((
                    StatusCode::CREATED,
                    Json(json!({ "Id": id.to_string(), "Warnings": warnings })),
                )
                    .into_response());
            }
            Answer::Error(e)
                if given_name.is_none() && e.kind == holdfast_core::ErrorKind::Conflict =>
            {
                continue;
            }
            Answer::Error(e) => return Err(e.into()),
            other => {
                return Err(ApiError::internal(format!(
                    "unexpected answer to create: {other:?}"
                )));
            }
        }
    }
    Err(ApiError::conflict(
        "could not find a free container name; pass --name",
    ))
}

/// Whether the host's memory cgroup can limit swap (cgroup v1's
/// `memory.memsw.*`, v2's `memory.swap.max` in the cgroups below the root).
pub(super) fn swap_accounting() -> bool {
    let cgroup = std::path::Path::new("/sys/fs/cgroup");
    if cgroup.join("memory/memory.memsw.limit_in_bytes").exists() {
        return true;
    }
    if !cgroup.join("cgroup.controllers").exists() {
        return false;
    }
    std::fs::read_dir(cgroup).is_ok_and(|dirs| {
        dirs.flatten()
            .any(|d| d.path().join("memory.swap.max").exists())
    })
}

/// What create options need of this host, checked before anything is made:
/// the init binary, device nodes, bind sources.
fn check_host_options(config: &ContainerConfig) -> Result<(), ApiError> {
    if config.init && holdfast_adapter_containerd::find_init_binary().is_none() {
        return Err(ApiError::bad_request(
            "HostConfig.Init (--init): no init binary is installed on this host: install Debian's tini package (it provides tini-static), or docker-init",
        ));
    }
    let r = &config.resources;
    if (r.cpu_realtime_runtime_us.is_some() || r.cpu_realtime_period_us.is_some())
        && std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
    {
        return Err(ApiError::bad_request(
            "HostConfig.CpuRealtimeRuntime/CpuRealtimePeriod: cgroup v2 has no real-time CPU controller; not supported on this host",
        ));
    }
    for d in &config.privileges.devices {
        use std::os::unix::fs::FileTypeExt as _;
        let is_device = std::fs::metadata(&d.path_on_host)
            .map(|m| m.file_type().is_char_device() || m.file_type().is_block_device());
        match is_device {
            Ok(true) => {}
            Ok(false) => {
                return Err(ApiError::bad_request(format!(
                    "HostConfig.Devices: error gathering device information while adding custom device {:?}: not a device node",
                    d.path_on_host
                )));
            }
            Err(e) => {
                return Err(ApiError::bad_request(format!(
                    "HostConfig.Devices: error gathering device information while adding custom device {:?}: {e}",
                    d.path_on_host
                )));
            }
        }
    }
    for m in &config.mount_specs {
        if let holdfast_core::MountSpec::Bind { source, .. } = m
            && std::fs::symlink_metadata(source).is_err()
        {
            return Err(ApiError::bad_request(format!(
                "HostConfig.Mounts: invalid mount config for type \"bind\": bind source path does not exist: {source}"
            )));
        }
    }
    Ok(())
}

/// `--pid`, `--uts`, `--ipc container:<ref>`: the other container, by name
/// or id, must be running; the spec joins its init's namespaces by pid.
///
/// Glue, not a core decision: the core never acts on it (no lifecycle
/// changes, nothing to recover after a crash); it is a read of the core's
/// view, as resize's "is it running" check. The other container may stop
/// between this read and the create; runc then fails to join and the
/// create fails whole, leaving nothing behind.
async fn resolve_shared_namespaces(
    state: &ApiState,
    config: &mut ContainerConfig,
) -> Result<(), ApiError> {
    let ns = &mut config.namespaces;
    for (kind, option, mode) in [
        ("PID", "HostConfig.PidMode", &mut ns.pid),
        ("UTS", "HostConfig.UTSMode", &mut ns.uts),
        ("IPC", "HostConfig.IpcMode", &mut ns.ipc),
    ] {
        let NamespaceMode::Container { id: reference, .. } = mode else {
            continue;
        };
        let reference = reference.clone();
        // Not a 404: the CLI takes a 404 from create for a missing image.
        let id = resolve(state, &reference).await.map_err(|e| {
            if e.status == StatusCode::NOT_FOUND {
                ApiError::bad_request(format!("invalid {option}: no such container: {reference}"))
            } else {
                e
            }
        })?;
        let s = snapshot(state, id.clone()).await?;
        let pid = running_pid(&s);
        if s.status != Status::Running || pid == 0 {
            return Err(ApiError::conflict(format!(
                "cannot join {kind} of a non running container: {reference}"
            )));
        }
        let target = &s.record.config.namespaces;
        if kind == "IPC" {
            match target.ipc {
                NamespaceMode::Shareable => {}
                NamespaceMode::Host => {
                    *mode = NamespaceMode::Host;
                    continue;
                }
                _ => {
                    return Err(ApiError::conflict(format!(
                        "cannot join IPC of container {reference}: non-shareable IPC (hint: use IpcMode:shareable for the donor container)"
                    )));
                }
            }
        }
        *mode = NamespaceMode::Container {
            id: id.to_string(),
            pid,
        };
    }
    Ok(())
}

/// `--network NAME` names a user network (by name, id or id prefix; stored
/// by name); `--network container:<ref>` a running container, whose
/// namespace it joins (its attachment's, or its init's). Glue like
/// `resolve_shared_namespaces`: a read of the view, nothing decided.
async fn resolve_network(state: &ApiState, config: &mut ContainerConfig) -> Result<(), ApiError> {
    if let Some(name) = config.network_name.clone() {
        // Not a 404: the CLI takes a 404 from create for a missing image.
        let def = state
            .network
            .find(&name)
            .ok_or_else(|| ApiError::bad_request(format!("network {name} not found")))?;
        if let Some(ip) = &config.ip_address
            && !ip.parse().is_ok_and(|ip| def.may_give(ip))
        {
            return Err(ApiError::bad_request(format!(
                "Invalid address {ip}: It does not belong to any of this network's subnets ({} on {}, gateway {})",
                def.subnet, def.name, def.gateway
            )));
        }
        config.network_name = def.user_defined().then_some(def.name);
    }
    if config.network != NetworkMode::Container {
        return Ok(());
    }
    let Some(reference) = config.network_container.as_ref().map(|n| n.id.clone()) else {
        return Err(ApiError::bad_request(
            "network mode container: names no container",
        ));
    };
    let id = resolve(state, &reference).await.map_err(|e| {
        if e.status == StatusCode::NOT_FOUND {
            ApiError::bad_request(format!(
                "invalid HostConfig.NetworkMode: no such container: {reference}"
            ))
        } else {
            e
        }
    })?;
    let s = snapshot(state, id.clone()).await?;
    let pid = running_pid(&s);
    if s.status != Status::Running || pid == 0 {
        return Err(ApiError::conflict(format!(
            "cannot join network of a non running container: {reference}"
        )));
    }
    let donor = &s.record.config;
    match donor.network {
        NetworkMode::Host => {
            config.network = NetworkMode::Host;
            config.network_container = None;
        }
        // Its donor's, as it shares that one.
        NetworkMode::Container => config.network_container = donor.network_container.clone(),
        NetworkMode::Bridge | NetworkMode::None => {
            config.network_container = Some(holdfast_core::SharedNetwork {
                id: id.to_string(),
                pid,
            });
        }
    }
    Ok(())
}

/// 64 hex digits from 32 random bytes, as dockerd makes ids.
fn new_container_id() -> Result<ContainerId, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for a container id: {e}")))?;
    hex::encode(bytes)
        .parse()
        .map_err(|e| ApiError::internal(format!("{e}")))
}

/// dockerd-style `adjective_name` names.
fn generated_name(attempt: usize) -> Result<String, ApiError> {
    const LEFT: &[&str] = &[
        "brave", "calm", "eager", "fervent", "gallant", "happy", "keen", "lucid", "merry",
        "nimble", "patient", "quiet", "steady", "tender", "upbeat", "vigilant", "wise", "zen",
    ];
    const RIGHT: &[&str] = &[
        "archimedes",
        "babbage",
        "curie",
        "darwin",
        "euler",
        "faraday",
        "gauss",
        "hopper",
        "kepler",
        "lovelace",
        "noether",
        "pascal",
        "ritchie",
        "shannon",
        "turing",
        "wozniak",
    ];
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for a name: {e}")))?;
    let n = u32::from_le_bytes(bytes) as usize;
    let base = format!(
        "{}_{}",
        LEFT[n % LEFT.len()],
        RIGHT[(n / LEFT.len()) % RIGHT.len()]
    );
    Ok(if attempt == 0 {
        base
    } else {
        format!("{base}{}", n % 100)
    })
}

// ---- inspect and list ------------------------------------------------------

fn running_pid(s: &Snapshot) -> u32 {
    match (s.status, s.task) {
        (Status::Running, TaskState::Running { pid } | TaskState::Created { pid }) => pid,
        (Status::Running, TaskState::Unknown) => s.record.pid.unwrap_or(0),
        _ => 0,
    }
}

fn network_mode_name(m: NetworkMode) -> &'static str {
    match m {
        NetworkMode::None => "none",
        NetworkMode::Host => "host",
        NetworkMode::Bridge => "bridge",
        NetworkMode::Container => "container",
    }
}

/// The network mode as docker shows it: `bridge`, a user network's name,
/// `host`, `none` or `container:<id>`.
fn network_mode_shown(c: &ContainerConfig) -> String {
    match (c.network, &c.network_name, &c.network_container) {
        (NetworkMode::Bridge, Some(name), _) => name.clone(),
        (NetworkMode::Container, _, Some(donor)) => format!("container:{}", donor.id),
        (m, ..) => network_mode_name(m).to_owned(),
    }
}

fn restart_policy_json(p: RestartPolicy) -> Value {
    let (name, retries) = match p {
        RestartPolicy::No => ("no", 0),
        RestartPolicy::Always => ("always", 0),
        RestartPolicy::UnlessStopped => ("unless-stopped", 0),
        RestartPolicy::OnFailure { max_retries } => ("on-failure", max_retries),
    };
    json!({ "Name": name, "MaximumRetryCount": retries })
}

/// The command line `ps` shows and inspect's Path/Args (what was given;
/// the image's defaults fill in what was not).
fn command_line(c: &ContainerConfig) -> Vec<String> {
    let mut v = c.entrypoint.clone().unwrap_or_default();
    v.extend(c.cmd.clone().unwrap_or_default());
    v
}

/// `ExposedPorts` keys as dockerd keeps them: `port/proto`, the protocol
/// `tcp` when not given, sorted, each once.
fn exposed_port_keys<'a>(keys: impl Iterator<Item = &'a String>) -> Result<Vec<String>, ApiError> {
    let mut out = std::collections::BTreeSet::new();
    for key in keys {
        let (port, proto) = key.split_once('/').unwrap_or((key.as_str(), "tcp"));
        let proto = proto.to_ascii_lowercase();
        if port.parse::<u16>().is_err() || !matches!(proto.as_str(), "tcp" | "udp" | "sctp") {
            return Err(ApiError::bad_request(format!(
                "invalid exposed port {key:?}: want PORT[/tcp|udp|sctp]"
            )));
        }
        out.insert(format!("{port}/{proto}"));
    }
    Ok(out.into_iter().collect())
}

/// The container's environment as dockerd stores it at create (and shows
/// it in inspect's `Config.Env`): the given variables, then each of the
/// image's that none of them names. The process gets the same set (the
/// spec overlays the given ones on the image's).
fn merged_env(given: Vec<String>, image: &[String]) -> Vec<String> {
    let key = |kv: &str| kv.split_once('=').map_or(kv, |(k, _)| k).to_owned();
    let named: std::collections::BTreeSet<String> = given.iter().map(|kv| key(kv)).collect();
    let mut env = given;
    env.extend(image.iter().filter(|kv| !named.contains(&key(kv))).cloned());
    env
}

/// dockerd's merge of the image's config under the given one at create
/// (moby's `merge`, daemon/commit.go), for what it keeps whole: the user,
/// the working dir, labels (the given win), and the command: with no
/// entrypoint given, an empty command takes the image's, and an absent
/// entrypoint the image's (an entrypoint given drops the image's command).
/// Env, exposed ports, the health check and the stop signal are merged
/// beside it. The record keeps the result, as dockerd's container config
/// does: inspect, `ps` and commit read it without the image (which may be
/// gone), and the runtime spec, whose own fallbacks to the image give the
/// same process for merged values, is built from it as before.
fn merge_image_defaults(
    config: &mut ContainerConfig,
    image: &holdfast_adapter_containerd::ImageConfig,
) {
    if config.user.is_none() {
        config.user = image.user.clone().filter(|u| !u.is_empty());
    }
    if config.working_dir.is_none() {
        config.working_dir = image.working_dir.clone().filter(|w| !w.is_empty());
    }
    for (k, v) in image.labels.iter().flatten() {
        config.labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    if config.entrypoint.as_ref().is_none_or(Vec::is_empty) {
        if config.cmd.as_ref().is_none_or(Vec::is_empty) {
            config.cmd = image.cmd.clone();
        }
        if config.entrypoint.is_none() {
            config.entrypoint = image.entrypoint.clone();
        }
    }
}

/// `Config.Volumes` as dockerd shows it: the anonymous volumes' paths (the
/// given `-v /path` ones and the image's `VOLUME`s), `null` when none.
fn config_volumes_json(c: &ContainerConfig) -> Value {
    let paths: serde_json::Map<String, Value> = c
        .mounts
        .iter()
        .filter(|m| {
            m.volume
                .as_deref()
                .is_some_and(holdfast_engine::volumes::is_anonymous_name)
        })
        .map(|m| (m.destination.clone(), json!({})))
        .collect();
    if paths.is_empty() {
        Value::Null
    } else {
        Value::Object(paths)
    }
}

/// A `max-size` in bytes as it was most likely given: in the largest of
/// docker's binary units that divides it (`1m` for 1048576).
fn size_as_given(bytes: u64) -> String {
    for (unit, shift) in [("g", 30), ("m", 20), ("k", 10)] {
        if bytes > 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

fn log_config_json(c: &ContainerConfig) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(size) = c.log_max_size_bytes {
        m.insert("max-size".to_owned(), json!(size_as_given(size)));
    }
    if let Some(files) = c.log_max_files {
        m.insert("max-file".to_owned(), json!(files.to_string()));
    }
    Value::Object(m)
}

/// `HostConfig` as dockerd shows it: every option with its default when
/// not given (`Tmpfs`, `Mounts` and `Sysctls` only when given).
fn host_config_json(c: &ContainerConfig) -> Value {
    let r = &c.resources;
    let p = &c.privileges;
    let list_or_null = |v: &[String]| (!v.is_empty()).then(|| v.to_vec());
    let log_config = match c.log_driver {
        LogDriver::None => json!({ "Type": "none", "Config": {} }),
        other => json!({ "Type": other.as_str(), "Config": log_config_json(c) }),
    };
    let mut hc = json!({
        // As given: anonymous volumes (from `-v /path` or the image) are not binds.
        "Binds": c.mounts.iter().filter_map(|m| {
            let mode = if m.read_only { ":ro" } else { "" };
            match &m.volume {
                None => Some(format!("{}:{}{mode}", m.source, m.destination)),
                Some(v) if holdfast_engine::volumes::is_anonymous_name(v) => None,
                Some(v) => Some(format!("{v}:{}{mode}", m.destination)),
            }
        }).collect::<Vec<_>>(),
        "NetworkMode": network_mode_shown(c),
        "RestartPolicy": restart_policy_json(c.restart_policy),
        "AutoRemove": c.auto_remove,
        "ReadonlyRootfs": c.read_only_rootfs,
        "LogConfig": log_config,
        "PortBindings": port_bindings_json(c),
        "PublishAllPorts": c.publish_all,
        "ExtraHosts": c.extra_hosts,
        "Dns": c.dns,
        "DnsSearch": c.dns_search,
        "DnsOptions": c.dns_options,
        "Privileged": p.privileged,
        "CapAdd": list_or_null(&p.cap_add),
        "CapDrop": list_or_null(&p.cap_drop),
        "GroupAdd": list_or_null(&p.group_add),
        "Devices": p.devices.iter().map(|d| json!({
            "PathOnHost": d.path_on_host,
            "PathInContainer": d.path_in_container,
            "CgroupPermissions": d.cgroup_permissions,
        })).collect::<Vec<_>>(),
        "PidMode": c.namespaces.pid.docker_name(""),
        "UTSMode": c.namespaces.uts.docker_name(""),
        "IpcMode": c.namespaces.ipc.docker_name("private"),
        "CgroupnsMode": match c.namespaces.cgroup {
            holdfast_core::CgroupnsMode::Host => "host",
            holdfast_core::CgroupnsMode::Private => "private",
        },
        "CgroupParent": c.cgroup_parent.clone().unwrap_or_default(),
        "Init": c.init.then_some(true),
        "Memory": c.memory_limit_bytes.unwrap_or(0),
        "MemorySwap": r.memory_swap_bytes.unwrap_or(0),
        "MemoryReservation": r.memory_reservation_bytes.unwrap_or(0),
        "PidsLimit": r.pids_limit,
        "CpuShares": r.cpu_shares.unwrap_or(0),
        "CpuQuota": r.cpu_quota_us.unwrap_or(0),
        "CpuPeriod": r.cpu_period_us.unwrap_or(0),
        "NanoCpus": r.nano_cpus.unwrap_or(0),
        "CpusetCpus": r.cpuset_cpus.clone().unwrap_or_default(),
        "CpusetMems": r.cpuset_mems.clone().unwrap_or_default(),
        "CpuRealtimePeriod": r.cpu_realtime_period_us.unwrap_or(0),
        "CpuRealtimeRuntime": r.cpu_realtime_runtime_us.unwrap_or(0),
        "Ulimits": r.ulimits.iter().map(|u| json!({ "Name": u.name, "Soft": u.soft, "Hard": u.hard })).collect::<Vec<_>>(),
        "ShmSize": r.shm_size_bytes.unwrap_or(64 << 20),
    });
    if !c.tmpfs.is_empty() {
        hc["Tmpfs"] = json!(c.tmpfs);
    }
    if !c.sysctls.is_empty() {
        hc["Sysctls"] = json!(c.sysctls);
    }
    if !c.mount_specs.is_empty() {
        hc["Mounts"] = Value::Array(c.mount_specs.iter().map(mount_spec_json).collect());
    }
    hc
}

fn mount_spec_json(m: &holdfast_core::MountSpec) -> Value {
    match m {
        holdfast_core::MountSpec::Bind {
            source,
            target,
            read_only,
            propagation,
        } => {
            let mut v = json!({ "Type": "bind", "Source": source, "Target": target });
            if *read_only {
                v["ReadOnly"] = json!(true);
            }
            if let Some(p) = propagation {
                v["BindOptions"] = json!({ "Propagation": p });
            }
            v
        }
        holdfast_core::MountSpec::Tmpfs {
            target,
            size_bytes,
            mode,
        } => {
            let mut v = json!({ "Type": "tmpfs", "Target": target });
            let mut options = serde_json::Map::new();
            if let Some(size) = size_bytes {
                options.insert("SizeBytes".to_owned(), json!(size));
            }
            if let Some(mode) = mode {
                options.insert("Mode".to_owned(), json!(mode));
            }
            if !options.is_empty() {
                v["TmpfsOptions"] = Value::Object(options);
            }
            v
        }
    }
}

/// Inspect's top-level `Mounts`: the binds and `--mount`s as mounted.
fn mount_points_json(c: &ContainerConfig) -> Vec<Value> {
    let mut out: Vec<Value> = c
        .mounts
        .iter()
        .map(|m| match &m.volume {
            Some(name) => json!({
                "Type": "volume", "Name": name, "Source": m.source, "Destination": m.destination,
                "Driver": "local", "Mode": if m.read_only { "ro" } else { "z" }, "RW": !m.read_only, "Propagation": "",
            }),
            None => json!({
                "Type": "bind", "Source": m.source, "Destination": m.destination,
                "Mode": if m.read_only { "ro" } else { "" }, "RW": !m.read_only, "Propagation": "rprivate",
            }),
        })
        .collect();
    for m in &c.mount_specs {
        out.push(match m {
            holdfast_core::MountSpec::Bind {
                source,
                target,
                read_only,
                propagation,
            } => json!({
                "Type": "bind", "Source": source, "Destination": target, "Mode": "",
                "RW": !read_only, "Propagation": propagation.as_deref().unwrap_or("rprivate"),
            }),
            holdfast_core::MountSpec::Tmpfs { target, .. } => json!({
                "Type": "tmpfs", "Source": "", "Destination": target, "Mode": "",
                "RW": true, "Propagation": "",
            }),
        });
    }
    out
}

/// The container's attachment to the bridge network it was created on, if
/// it has one now (once disconnected from it, its `eth0` is an endpoint's).
pub(super) fn attachment(state: &ApiState, s: &Snapshot) -> Option<Attachment> {
    let attached =
        s.record.network != holdfast_core::NetworkState::Detached && !s.record.own_disconnected;
    attached
        .then(|| state.network.attachment(&s.record.id))
        .flatten()
}

/// `NetworkSettings.Ports` as dockerd shows it: `"80/tcp": [{HostIp, HostPort}]`.
fn ports_json(att: Option<&Attachment>) -> Value {
    let mut ports = serde_json::Map::new();
    for p in att.map_or(&[][..], |a| &a.ports[..]) {
        let key = format!("{}/{}", p.container_port, p.protocol);
        let ip = if p.host_ip.is_empty() {
            "0.0.0.0"
        } else {
            &p.host_ip
        };
        let entry = ports.entry(key).or_insert_with(|| json!([]));
        if let Some(list) = entry.as_array_mut() {
            list.push(json!({"HostIp": ip, "HostPort": p.host_port.to_string()}));
        }
    }
    Value::Object(ports)
}

/// `HostConfig.PortBindings`: the bindings the user gave; those `-P` added
/// show in `NetworkSettings.Ports` only.
fn port_bindings_json(c: &ContainerConfig) -> Value {
    let mut ports = serde_json::Map::new();
    for p in c.ports.iter().filter(|p| !p.by_publish_all) {
        let key = format!("{}/{}", p.container_port, p.protocol);
        let port = if p.host_port == 0 {
            String::new()
        } else {
            p.host_port.to_string()
        };
        let entry = ports.entry(key).or_insert_with(|| json!([]));
        if let Some(list) = entry.as_array_mut() {
            list.push(json!({"HostIp": p.host_ip, "HostPort": port}));
        }
    }
    Value::Object(ports)
}

/// `NetworkSettings`: the address, gateway and MAC the bridge plugin gave;
/// with `on_own`, it is still on the network it was created on.
fn network_settings_json(
    c: &ContainerConfig,
    net_name: &str,
    att: Option<&Attachment>,
    on_own: bool,
) -> Value {
    let network = network_mode_shown(c);
    let ip = att
        .and_then(|a| a.ip)
        .map(|i| i.to_string())
        .unwrap_or_default();
    let gateway = att
        .and_then(|a| a.gateway)
        .map(|i| i.to_string())
        .unwrap_or_default();
    let mac = att.and_then(|a| a.mac.clone()).unwrap_or_default();
    let prefix = att.filter(|a| a.ip.is_some()).map_or(0, |a| a.prefix_len);
    let network_id = att
        .and_then(|a| a.network.as_ref())
        .map_or_else(|| network.clone(), |n| n.id.clone());
    let user_network = c.network_name.is_some();
    let mut networks = serde_json::Map::new();
    if c.network != NetworkMode::Container && on_own {
        networks.insert(
            network.clone(),
            json!({
                "IPAMConfig": c.ip_address.as_ref().map(|ip| json!({"IPv4Address": ip})),
                "Links": null,
                "Aliases": if user_network { json!(c.network_aliases) } else { Value::Null },
                "NetworkID": network_id,
                "EndpointID": att.map(|a| a.endpoint_id.clone()).unwrap_or_default(),
                "IPAddress": ip,
                "IPPrefixLen": prefix,
                "Gateway": gateway,
                "MacAddress": mac,
                "DNSNames": if user_network { json!(att.map(|a| a.names.clone()).unwrap_or_default()) } else { Value::Null },
            }),
        );
    }
    json!({
        "Bridge": if c.network == NetworkMode::Bridge && !user_network { net_name } else { "" },
        "SandboxID": "",
        "Ports": ports_json(att),
        "IPAddress": if user_network { "" } else { &ip },
        "IPPrefixLen": if user_network { 0 } else { prefix },
        "Gateway": if user_network { "" } else { &gateway },
        "MacAddress": if user_network { "" } else { &mac },
        "Networks": networks,
    })
}

fn inspect_json(
    s: &Snapshot,
    log_path: &std::path::Path,
    net_name: &str,
    att: Option<&Attachment>,
) -> Value {
    let r = &s.record;
    let c = &r.config;
    let running = s.status == Status::Running;
    let last_exit = r.exit.as_ref();
    let (exit_code, oom, error) = if running {
        (0, false, String::new())
    } else {
        last_exit.map_or((0, false, String::new()), |e| {
            (
                e.exit_code,
                e.oom_killed,
                e.error.clone().unwrap_or_default(),
            )
        })
    };
    let cmdline = command_line(c);
    let mut v = json!({
        "Id": r.id.to_string(),
        "Created": render::time(r.created_at),
        "Path": cmdline.first().cloned().unwrap_or_default(),
        "Args": cmdline.iter().skip(1).collect::<Vec<_>>(),
        "State": {
            "Status": s.state_name(),
            "Running": running,
            "Paused": s.paused,
            "Restarting": s.status == Status::Restarting,
            "OOMKilled": oom,
            "Dead": false,
            "Pid": running_pid(s),
            "ExitCode": exit_code,
            "Error": error,
            "StartedAt": render::time_or_zero(r.started_at),
            "FinishedAt": render::time_or_zero(last_exit.map(|e| e.finished_at)),
            "Health": s.health.as_ref().map(super::health::state_json),
        },
        "Image": c.image_id.clone().unwrap_or_default(),
        "ResolvConfPath": "",
        "HostnamePath": "",
        "HostsPath": "",
        "LogPath": if c.log_driver == LogDriver::None { String::new() } else { log_path.to_string_lossy().into_owned() },
        "Name": format!("/{}", r.name),
        "RestartCount": r.restart_count,
        "Driver": "overlayfs",
        "Platform": "linux",
        "MountLabel": "",
        "ProcessLabel": "",
        "AppArmorProfile": "",
        "ExecIDs": null,
        "HostConfig": host_config_json(c),
        "GraphDriver": { "Name": "overlayfs", "Data": null },
        "SizeRw": 0,
        "SizeRootFs": 0,
        "Mounts": mount_points_json(c),
        "Config": {
            "Hostname": c.hostname.clone().unwrap_or_else(|| r.id.as_str().chars().take(12).collect()),
            "Domainname": "",
            "User": c.user.clone().unwrap_or_default(),
            "AttachStdin": false,
            "AttachStdout": false,
            "AttachStderr": false,
            "Tty": c.tty,
            "OpenStdin": c.open_stdin,
            "StdinOnce": c.stdin_once,
            "Env": c.env,
            "Cmd": c.cmd,
            "Image": c.image,
            "Volumes": config_volumes_json(c),
            "WorkingDir": c.working_dir.clone().unwrap_or_default(),
            "Entrypoint": c.entrypoint,
            "Labels": c.labels,
            "StopSignal": c.stop_signal.or(c.image_stop_signal).map(|s| s.to_string()),
            "StopTimeout": c.stop_timeout.map(|t| t.as_secs()),
            "Healthcheck": super::health::config_json(c.healthcheck.as_ref()),
        },
        "NetworkSettings": network_settings_json(c, net_name, att, !s.record.own_disconnected),
        // holdfast's own truth: whether this view was confirmed by a relist
        // since containerd was last (re)connected.
        "Holdfast": {
            "Confirmed": s.confirmed,
            "Task": format!("{:?}", s.task),
            "Run": r.run,
        },
    });
    // dockerd leaves both out when there is none (`omitempty`).
    if s.health.is_none()
        && let Some(state) = v["State"].as_object_mut()
    {
        state.remove("Health");
    }
    if c.healthcheck.is_none()
        && let Some(config) = v["Config"].as_object_mut()
    {
        config.remove("Healthcheck");
    }
    if !c.exposed_ports.is_empty()
        && let Some(config) = v["Config"].as_object_mut()
    {
        let ports: serde_json::Map<String, Value> = c
            .exposed_ports
            .iter()
            .map(|k| (k.clone(), json!({})))
            .collect();
        config.insert("ExposedPorts".to_owned(), Value::Object(ports));
    }
    v
}

pub async fn inspect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let id = resolve(&state, &reference).await?;
    let s = snapshot(&state, id).await?;
    let log_path = state.adapter.log_path(&s.record.id);
    let att = attachment(&state, &s);
    let net_name = state.network.name();
    let mut out = inspect_json(&s, &log_path, net_name, att.as_ref());
    if let Some(networks) = out["NetworkSettings"]["Networks"].as_object_mut() {
        for (name, endpoint) in endpoints_json(&state, &s.record) {
            networks.insert(name, endpoint);
        }
    }
    Ok(Json(out).into_response())
}

/// `NetworkSettings.Networks` of the networks it was connected to after
/// its create (`docker network connect`): what their attachments gave, if
/// made.
fn endpoints_json(state: &ApiState, r: &Record) -> Vec<(String, Value)> {
    r.endpoints
        .iter()
        .filter(|e| e.wanted)
        .map(|e| {
            let att = (e.state == holdfast_core::NetworkState::Attached)
                .then(|| state.network.attachment_of(&r.id, e.slot))
                .flatten();
            let att = att.as_ref();
            let user = e.network != holdfast_engine::network::DEFAULT_NAME;
            let network_id = att
                .and_then(|a| a.network.as_ref())
                .map(|n| n.id.clone())
                .or_else(|| state.network.find(&e.network).map(|d| d.id))
                .unwrap_or_default();
            let shown = json!({
                "IPAMConfig": e.ip.as_ref().map(|ip| json!({"IPv4Address": ip})),
                "Links": null,
                "Aliases": if user { json!(e.aliases) } else { Value::Null },
                "NetworkID": network_id,
                "EndpointID": att.map(|a| a.endpoint_id.clone()).unwrap_or_default(),
                "IPAddress": att.and_then(|a| a.ip).map(|i| i.to_string()).unwrap_or_default(),
                "IPPrefixLen": att.filter(|a| a.ip.is_some()).map_or(0, |a| a.prefix_len),
                "Gateway": att.and_then(|a| a.gateway).map(|i| i.to_string()).unwrap_or_default(),
                "MacAddress": att.and_then(|a| a.mac.clone()).unwrap_or_default(),
                "DNSNames": if user { json!(att.map(|a| a.names.clone()).unwrap_or_default()) } else { Value::Null },
            });
            (e.network.clone(), shown)
        })
        .collect()
}

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
                format!("{up}{}", super::health::ps_suffix(h))
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

pub(super) fn list_json(
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
        "Mounts": [],
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
    for label in f.get("label") {
        let ok = match label.split_once('=') {
            Some((k, v)) => r.config.labels.get(k).is_some_and(|have| have == v),
            None => r.config.labels.contains_key(label),
        };
        if !ok {
            return Ok(false);
        }
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
    let all = p.bool("all");
    let limit: Option<i64> = p.int("limit")?;
    let mut containers = state
        .engine
        .read(|v| {
            v.core
                .containers()
                .map(|c| Snapshot {
                    record: c.record.clone(),
                    status: c.status,
                    task: c.task,
                    confirmed: c.confirmed,
                    paused: c.paused,
                    health: v.core.health(&c.record.id).cloned(),
                })
                .collect::<Vec<_>>()
        })
        .await?;
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
    for s in &containers {
        if !implicit_all && !matches!(s.status, Status::Running | Status::Restarting) {
            continue;
        }
        if !matches_filters(s, &filters, &all_ids)? {
            continue;
        }
        out.push(list_json(s, now, attachment(&state, s).as_ref()));
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

    #[test]
    fn the_clis_create_body_decodes() {
        let body = include_bytes!("../../tests/data/create-run-d.json");
        let (config, warnings) = decode_create(body).expect("decodes");
        assert_eq!(config.image, "busybox");
        assert_eq!(
            config.cmd,
            Some(vec!["sleep".to_owned(), "1000".to_owned()])
        );
        assert_eq!(config.network, NetworkMode::Bridge);
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn bad_bodies_are_400_naming_the_problem() {
        for (body, needle) in [
            (&b"{"[..], "invalid JSON"),
            (b"", "cannot be empty"),
            (br#"{"Image": 5}"#, "invalid JSON"),
            (br#"{"Cmd": ["x"]}"#, "Image"),
            (br#"{"Image":"b","HostConfig":{"OomScoreAdj":100}}"#, "OomScoreAdj"),
            (br#"{"Image":"b","HostConfig":{"CapAdd":["FLY"]}}"#, "CapAdd"),
            (br#"{"Image":"b","HostConfig":{"Sysctls":{"vm.swappiness":"1"}}}"#, "Sysctls"),
            (br#"{"Image":"b","HostConfig":{"Ulimits":[{"Name":"nofile","Soft":2,"Hard":1}]}}"#, "Ulimits"),
            (br#"{"Image":"b","HostConfig":{"Mounts":[{"Type":"volume","Target":"/v","VolumeOptions":{"NoCopy":true}}]}}"#, "NoCopy"),
            (br#"{"Image":"b","HostConfig":{"Mounts":[{"Type":"volume","Source":"a/b","Target":"/v"}]}}"#, "invalid HostConfig.Mounts"),
            (br#"{"Image":"b","HostConfig":{"NanoCpus":1000000000,"CpuQuota":5000}}"#, "NanoCpus"),
            (br#"{"Image":"b","HostConfig":{"LogConfig":{"Type":"syslog"}}}"#, "syslog"),
            (br#"{"Image":"b","HostConfig":{"PidMode":"sideways"}}"#, "PidMode"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"container:"}}"#, "container name or id"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"container:web"},"Hostname":"h"}"#, "hostname and the network mode"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"container:web","Sysctls":{"net.ipv4.ip_forward":"1"}}}"#, "shared"),
            (br#"{"Image":"b","NetworkingConfig":{"EndpointsConfig":{"bridge":{"IPAMConfig":{"IPv4Address":"10.1.2.3"}}}}}"#, "user defined networks only"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"app"},"NetworkingConfig":{"EndpointsConfig":{"app":{"IPAMConfig":{"IPv4Address":"10.1.2"}}}}}"#, "invalid --ip"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"app"},"NetworkingConfig":{"EndpointsConfig":{"other":{}}}}"#, "names network"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"app"},"NetworkingConfig":{"EndpointsConfig":{"app":{},"b2":{}}}}"#, "more than one network at create"),
            (br#"{"Image":"b","MacAddress":"02:42"}"#, "invalid --mac-address"),
            (br#"{"Image":"b","MacAddress":"02:42:0a:00:00:99","HostConfig":{"NetworkMode":"host"}}"#, "needs a bridge network"),
            (br#"{"Image":"b","HostConfig":{"NetworkMode":"host","PortBindings":{"80/tcp":[{"HostPort":"8080"}]}}}"#, "need the bridge network"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"80/sctp":[{"HostPort":"8080"}]}}}"#, "tcp or udp"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"0/tcp":[{"HostPort":"8080"}]}}}"#, "container port"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"8000-8010"}]}}}"#, "ranges are not supported"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"80/tcp":[{"HostPort":"70000"}]}}}"#, "70000"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"80/tcp":[{"HostIp":"::1","HostPort":"80"}]}}}"#, "IPv4"),
            (br#"{"Image":"b","HostConfig":{"PortBindings":{"80/tcp":"8080"}}}"#, "expected a list"),
            (br#"{"Image":"b","HostConfig":{"RestartPolicy":{"Name":"sometimes"}}}"#, "sometimes"),
            (br#"{"Image":"b","HostConfig":{"Binds":["-vol:/data"]}}"#, "invalid characters"),
            (br#"{"Image":"b","HostConfig":{"Binds":["rel/dir:/data"]}}"#, "use absolute path"),
            (br#"{"Image":"b","HostConfig":{"Binds":["/a:/data","v1:/data"]}}"#, "Duplicate mount point"),
            (br#"{"Image":"b","StopSignal":"SIGNOPE"}"#, "SIGNOPE"),
            (br#"{"Image":"b","HostConfig":{"AutoRemove":true,"RestartPolicy":{"Name":"always"}}}"#, "Conflicting"),
        ] {
            let err = decode_create(body).expect_err("refused");
            assert_eq!(err.status, StatusCode::BAD_REQUEST);
            assert!(err.message.contains(needle), "{needle}: {}", err.message);
        }
    }

    #[test]
    fn published_ports_decode_as_the_cli_sends_them() {
        // -p 8080:80 -p 127.0.0.1:9090:90/udp -p 70 -P with --expose 7000
        let body = br#"{"Image":"busybox","ExposedPorts":{"80/tcp":{},"90/udp":{},"70/tcp":{},"7000/tcp":{}},
            "HostConfig":{"PortBindings":{"80/tcp":[{"HostIp":"","HostPort":"8080"}],
            "90/udp":[{"HostIp":"127.0.0.1","HostPort":"9090"}],"70/tcp":[{"HostIp":"","HostPort":""}]},
            "PublishAllPorts":true}}"#;
        let req = parse_create(body).expect("decodes");
        assert!(req.publish_all && req.network_defaulted);
        let got: Vec<(u16, &str, &str, u16)> = req
            .config
            .ports
            .iter()
            .map(|p| {
                (
                    p.container_port,
                    p.protocol.as_str(),
                    p.host_ip.as_str(),
                    p.host_port,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (70, "tcp", "", 0),
                (80, "tcp", "", 8080),
                (90, "udp", "127.0.0.1", 9090),
                (7000, "tcp", "", 0),
            ]
        );
        // Inspect shows what was given, and -P beside it, as dockerd does.
        assert!(req.config.publish_all);
        let added: Vec<u16> = req
            .config
            .ports
            .iter()
            .filter(|p| p.by_publish_all)
            .map(|p| p.container_port)
            .collect();
        assert_eq!(added, vec![7000]);
        assert_eq!(
            port_bindings_json(&req.config),
            json!({"70/tcp": [{"HostIp": "", "HostPort": ""}],
                   "80/tcp": [{"HostIp": "", "HostPort": "8080"}],
                   "90/udp": [{"HostIp": "127.0.0.1", "HostPort": "9090"}]})
        );
    }

    #[test]
    fn options_reach_the_config() {
        let body = br#"{"Image":"busybox","Entrypoint":"sh","Cmd":["-c","x"],"Env":["A=1"],
            "Tty":true,"OpenStdin":true,"StdinOnce":true,"StopSignal":"SIGUSR1","StopTimeout":3,"Labels":{"k":"v"},
            "HostConfig":{"NetworkMode":"host","Binds":["/tmp:/t:ro"],"Memory":67108864,
            "RestartPolicy":{"Name":"on-failure","MaximumRetryCount":2},"ReadonlyRootfs":true}}"#;
        let (c, warnings) = decode_create(body).expect("decodes");
        assert!(warnings.is_empty());
        assert_eq!(c.entrypoint, Some(vec!["sh".to_owned()]));
        assert!(c.tty && c.open_stdin && c.stdin_once);
        assert_eq!(c.network, NetworkMode::Host);
        assert_eq!(c.stop_signal, "SIGUSR1".parse().ok());
        assert_eq!(c.stop_timeout, Some(Duration::from_secs(3)));
        assert_eq!(
            c.restart_policy,
            RestartPolicy::OnFailure { max_retries: 2 }
        );
        assert_eq!(c.memory_limit_bytes, Some(64 << 20));
        assert!(c.read_only_rootfs);
        assert_eq!(c.mounts.len(), 1);
        assert!(c.mounts[0].read_only);
    }

    /// The image's defaults merged into the record as dockerd merges them,
    /// and the process the spec gives is the same from the merged record as
    /// from what was given (merging twice changes nothing).
    #[test]
    fn image_defaults_merge_without_changing_the_process() {
        use holdfast_adapter_containerd::{HostFacts, ImageConfig, User, build_spec};
        let image = ImageConfig {
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into()]),
            cmd: Some(vec!["echo hi".into()]),
            working_dir: Some("/srv".into()),
            user: Some("nobody".into()),
            labels: Some([("from".to_owned(), "image".to_owned())].into()),
            ..Default::default()
        };
        let list = |v: &[&str]| Some(v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let cases: Vec<ContainerConfig> = vec![
            ContainerConfig::default(),
            ContainerConfig {
                cmd: list(&["echo bye"]),
                ..Default::default()
            },
            ContainerConfig {
                entrypoint: list(&["/bin/echo"]),
                ..Default::default()
            },
            ContainerConfig {
                entrypoint: list(&["/bin/echo"]),
                cmd: list(&["x"]),
                user: Some("0".into()),
                working_dir: Some("/tmp".into()),
                labels: [("from".to_owned(), "me".to_owned())].into(),
                ..Default::default()
            },
        ];
        let id: ContainerId = "abcdef0123456789".parse().expect("id");
        let process = |c: &ContainerConfig| {
            let spec = build_spec(
                &id,
                "ns",
                c,
                &image,
                &User { uid: 0, gid: 0 },
                &HostFacts::default(),
            )
            .expect("spec");
            let p = spec.process().clone().expect("process");
            (p.args().clone(), p.cwd().clone())
        };
        for given in cases {
            let mut merged = given.clone();
            merge_image_defaults(&mut merged, &image);
            assert_eq!(process(&merged), process(&given), "{given:?}");
            let mut twice = merged.clone();
            merge_image_defaults(&mut twice, &image);
            assert_eq!(twice, merged);
        }
        // Two bodies no CLI sends now run as dockerd runs them: an empty
        // command under the image's entrypoint takes the image's command,
        // and an empty entrypoint with no command runs the image's command
        // (refused as "no command" before).
        let empty_cmd = ContainerConfig {
            cmd: Some(Vec::new()),
            ..Default::default()
        };
        let mut merged = empty_cmd.clone();
        merge_image_defaults(&mut merged, &image);
        assert_eq!(process(&merged).0, list(&["/bin/sh", "-c", "echo hi"]));
        assert_eq!(process(&empty_cmd).0, list(&["/bin/sh", "-c"]));
        let empty_entrypoint = ContainerConfig {
            entrypoint: Some(Vec::new()),
            ..Default::default()
        };
        let mut merged = empty_entrypoint.clone();
        merge_image_defaults(&mut merged, &image);
        assert_eq!(process(&merged).0, list(&["echo hi"]));
        let user = User { uid: 0, gid: 0 };
        let host = HostFacts::default();
        assert!(build_spec(&id, "ns", &empty_entrypoint, &image, &user, &host).is_err());

        let mut shown = ContainerConfig::default();
        merge_image_defaults(&mut shown, &image);
        assert_eq!(shown.entrypoint, list(&["/bin/sh", "-c"]));
        assert_eq!(shown.cmd, list(&["echo hi"]));
        assert_eq!(shown.working_dir.as_deref(), Some("/srv"));
        assert_eq!(shown.user.as_deref(), Some("nobody"));
        assert_eq!(shown.labels.get("from").map(String::as_str), Some("image"));
        // An entrypoint given drops the image's command, as dockerd.
        let mut own = ContainerConfig {
            entrypoint: list(&["/bin/echo"]),
            labels: [("from".to_owned(), "me".to_owned())].into(),
            ..Default::default()
        };
        merge_image_defaults(&mut own, &image);
        assert_eq!(own.cmd, None);
        assert_eq!(own.labels.get("from").map(String::as_str), Some("me"));
    }

    /// The spec as runc reads it: written as JSON and parsed back with
    /// oci-spec, so a field is checked in a valid document, not only in the
    /// struct that built it.
    fn round_trip(spec: &oci_spec::runtime::Spec) -> oci_spec::runtime::Spec {
        let bytes = serde_json::to_vec(spec).expect("the spec serialises");
        let back = serde_json::from_slice::<oci_spec::runtime::Spec>(&bytes).expect("and parses");
        assert_eq!(&back, spec, "the spec survives JSON unchanged");
        back
    }

    /// Every create option, from the body the CLI sends through the config
    /// the core records to the typed spec runc gets (through its JSON).
    #[test]
    fn every_create_option_reaches_the_spec() {
        use holdfast_adapter_containerd::{HostFacts, ImageConfig, User, build_spec};
        use oci_spec::runtime::{LinuxNamespaceType, PosixRlimitType};
        let body = br#"{"Image":"busybox","Cmd":["sh"],"HostConfig":{
            "CapAdd":["CAP_NET_ADMIN"],"CapDrop":["CAP_MKNOD"],
            "Devices":[{"PathOnHost":"/dev/loop-control","PathInContainer":"/dev/lc","CgroupPermissions":"r"}],
            "GroupAdd":["50"],"PidsLimit":64,"CpuShares":512,"CpuPeriod":50000,"CpuQuota":25000,
            "CpusetCpus":"0-1","CpusetMems":"0","CpuRealtimePeriod":1000000,"CpuRealtimeRuntime":10000,
            "Memory":67108864,"MemorySwap":134217728,"MemoryReservation":33554432,
            "Ulimits":[{"Name":"nofile","Soft":512,"Hard":1024}],
            "Sysctls":{"net.ipv4.ip_forward":"1","kernel.shmmni":"1000"},
            "ShmSize":16777216,"Tmpfs":{"/scratch":"size=1m"},
            "Mounts":[{"Type":"bind","Source":"/srv","Target":"/b","ReadOnly":true,"BindOptions":{"Propagation":"rslave"}},
                      {"Type":"tmpfs","Target":"/t","TmpfsOptions":{"SizeBytes":2097152,"Mode":448}}],
            "PidMode":"host","UTSMode":"host","IpcMode":"shareable","CgroupnsMode":"private",
            "CgroupParent":"/parent","Init":true,"ReadonlyRootfs":true,
            "LogConfig":{"Type":"local","Config":{"max-size":"1m"}}}}"#;
        let (c, _) = decode_create(body).expect("decodes");
        assert_eq!(c.log_driver, LogDriver::Local);
        assert!(c.init && c.read_only_rootfs);
        // Back out in inspect, where dockerd shows each.
        let hc = host_config_json(&c);
        for (field, want) in [
            ("CapAdd", json!(["CAP_NET_ADMIN"])),
            ("CapDrop", json!(["CAP_MKNOD"])),
            ("Privileged", json!(false)),
            (
                "Devices",
                json!([{"PathOnHost": "/dev/loop-control", "PathInContainer": "/dev/lc", "CgroupPermissions": "r"}]),
            ),
            ("GroupAdd", json!(["50"])),
            ("PidsLimit", json!(64)),
            ("CpuShares", json!(512)),
            ("CpuPeriod", json!(50000)),
            ("CpuQuota", json!(25000)),
            ("NanoCpus", json!(0)),
            ("CpusetCpus", json!("0-1")),
            ("CpusetMems", json!("0")),
            ("CpuRealtimePeriod", json!(1_000_000)),
            ("CpuRealtimeRuntime", json!(10000)),
            ("Memory", json!(64 << 20)),
            ("MemorySwap", json!(128 << 20)),
            ("MemoryReservation", json!(32 << 20)),
            (
                "Ulimits",
                json!([{"Name": "nofile", "Soft": 512, "Hard": 1024}]),
            ),
            (
                "Sysctls",
                json!({"kernel.shmmni": "1000", "net.ipv4.ip_forward": "1"}),
            ),
            ("ShmSize", json!(16 << 20)),
            ("Tmpfs", json!({"/scratch": "size=1m"})),
            (
                "Mounts",
                json!([
                    {"Type": "bind", "Source": "/srv", "Target": "/b", "ReadOnly": true, "BindOptions": {"Propagation": "rslave"}},
                    {"Type": "tmpfs", "Target": "/t", "TmpfsOptions": {"SizeBytes": 2097152, "Mode": 448}},
                ]),
            ),
            ("PidMode", json!("host")),
            ("UTSMode", json!("host")),
            ("IpcMode", json!("shareable")),
            ("CgroupnsMode", json!("private")),
            ("CgroupParent", json!("/parent")),
            ("Init", json!(true)),
            ("ReadonlyRootfs", json!(true)),
            (
                "LogConfig",
                json!({"Type": "local", "Config": {"max-size": "1m"}}),
            ),
        ] {
            assert_eq!(hc[field], want, "{field}: {hc:#}");
        }
        let id: ContainerId = "abcdef0123456789".parse().expect("id");
        let image = ImageConfig {
            cmd: Some(vec!["sh".into()]),
            ..Default::default()
        };
        let host = HostFacts {
            additional_gids: vec![50],
            devices: vec![holdfast_adapter_containerd::HostDevice {
                path_in_container: "/dev/lc".into(),
                block: false,
                major: 10,
                minor: 237,
                file_mode: 0o600,
                uid: 0,
                gid: 0,
                permissions: "r".into(),
            }],
            init_binary: Some("/usr/bin/tini-static".into()),
            shm_source: Some("/run/shm/abc".into()),
            netns_path: Some("/run/holdfast/net/netns/abcdef0123456789".into()),
            ..Default::default()
        };
        let user = User {
            uid: 1000,
            gid: 1001,
        };
        let spec = round_trip(&build_spec(&id, "ns", &c, &image, &user, &host).expect("spec"));
        let process = spec.process().as_ref().expect("process");
        assert_eq!(
            process.args().as_ref().expect("args")[..3],
            ["/sbin/docker-init".to_owned(), "--".into(), "sh".into()]
        );
        assert_eq!((process.user().uid(), process.user().gid()), (1000, 1001));
        assert_eq!(process.user().additional_gids(), &Some(vec![50]));
        let caps = process.capabilities().as_ref().expect("caps");
        let effective = caps.effective().as_ref().expect("effective");
        assert!(effective.contains(&oci_spec::runtime::Capability::NetAdmin));
        assert!(!effective.contains(&oci_spec::runtime::Capability::Mknod));
        let nofile = process
            .rlimits()
            .as_ref()
            .and_then(|r| r.iter().find(|r| r.typ() == PosixRlimitType::RlimitNofile))
            .expect("nofile");
        assert_eq!((nofile.soft(), nofile.hard()), (512, 1024));
        assert_eq!(spec.root().as_ref().and_then(|r| r.readonly()), Some(true));
        assert_eq!(
            spec.hostname(),
            &None,
            "a shared UTS namespace is not renamed"
        );
        let mounts = spec.mounts().as_ref().expect("mounts");
        let at = |dest: &str| {
            mounts
                .iter()
                .find(|m| m.destination() == std::path::Path::new(dest))
                .unwrap_or_else(|| panic!("no mount at {dest}: {mounts:?}"))
        };
        assert_eq!(
            at("/dev/shm").source().as_deref(),
            Some(std::path::Path::new("/run/shm/abc"))
        );
        assert!(
            at("/scratch")
                .options()
                .as_ref()
                .expect("o")
                .contains(&"size=1m".to_owned())
        );
        assert_eq!(
            at("/b").options().as_deref(),
            Some(&["rbind".to_owned(), "rslave".into(), "ro".into()][..])
        );
        let t = at("/t").options().clone().unwrap_or_default();
        assert!(
            t.contains(&"size=2097152".to_owned()) && t.contains(&"mode=700".to_owned()),
            "{t:?}"
        );
        assert_eq!(
            at("/sbin/docker-init").source().as_deref(),
            Some(std::path::Path::new("/usr/bin/tini-static"))
        );
        let linux = spec.linux().as_ref().expect("linux");
        assert_eq!(
            linux.cgroups_path().as_deref(),
            Some(std::path::Path::new("/parent/abcdef0123456789"))
        );
        let kinds: Vec<LinuxNamespaceType> = linux
            .namespaces()
            .as_ref()
            .expect("namespaces")
            .iter()
            .map(|n| n.typ())
            .collect();
        assert!(!kinds.contains(&LinuxNamespaceType::Pid), "{kinds:?}");
        assert!(!kinds.contains(&LinuxNamespaceType::Uts), "{kinds:?}");
        assert!(kinds.contains(&LinuxNamespaceType::Ipc), "{kinds:?}");
        assert!(kinds.contains(&LinuxNamespaceType::Cgroup), "{kinds:?}");
        let sysctl = linux.sysctl().as_ref().expect("sysctl");
        assert_eq!(
            sysctl.get("kernel.shmmni").map(String::as_str),
            Some("1000")
        );
        let r = linux.resources().as_ref().expect("resources");
        assert_eq!(r.pids().map(|p| p.limit()), Some(64));
        let memory = r.memory().expect("memory");
        assert_eq!(
            (memory.limit(), memory.swap(), memory.reservation()),
            (Some(64 << 20), Some(128 << 20), Some(32 << 20))
        );
        let cpu = r.cpu().as_ref().expect("cpu");
        assert_eq!(
            (cpu.shares(), cpu.quota(), cpu.period()),
            (Some(512), Some(25000), Some(50000))
        );
        assert_eq!(cpu.cpus().as_deref(), Some("0-1"));
        assert_eq!(cpu.mems().as_deref(), Some("0"));
        assert_eq!(
            (cpu.realtime_period(), cpu.realtime_runtime()),
            (Some(1_000_000), Some(10000))
        );
        assert_eq!(
            sysctl.get("net.ipv4.ip_forward").map(String::as_str),
            Some("1")
        );
        let device = linux
            .devices()
            .iter()
            .flatten()
            .find(|d| d.path() == std::path::Path::new("/dev/lc"))
            .expect("the device node");
        assert_eq!((device.major(), device.minor()), (10, 237));
        let rule = r
            .devices()
            .iter()
            .flatten()
            .find(|d| d.allow() && d.major() == Some(10) && d.minor() == Some(237))
            .expect("the device's cgroup rule");
        assert_eq!(rule.access().as_deref(), Some("r"));
        assert!(linux.seccomp().is_some() && linux.masked_paths().is_some());

        // Another container's pid and ipc namespaces, the host's cgroup
        // namespace.
        let (mut c, _) = decode_create(
            br#"{"Image":"b","HostConfig":{"PidMode":"container:other","IpcMode":"container:other","CgroupnsMode":"host"}}"#,
        )
        .expect("decodes");
        let other = NamespaceMode::Container {
            id: "other".into(),
            pid: 4242,
        };
        assert!(matches!(c.namespaces.pid, NamespaceMode::Container { .. }));
        assert!(matches!(c.namespaces.ipc, NamespaceMode::Container { .. }));
        c.namespaces.pid = other.clone();
        c.namespaces.ipc = other;
        let joined = round_trip(&build_spec(&id, "ns", &c, &image, &user, &host).expect("spec"));
        let namespaces = joined
            .linux()
            .as_ref()
            .and_then(|l| l.namespaces().clone())
            .expect("namespaces");
        let path_of = |kind: LinuxNamespaceType| {
            namespaces
                .iter()
                .find(|n| n.typ() == kind)
                .map(|n| n.path().clone())
        };
        assert_eq!(
            path_of(LinuxNamespaceType::Pid),
            Some(Some("/proc/4242/ns/pid".into()))
        );
        assert_eq!(
            path_of(LinuxNamespaceType::Ipc),
            Some(Some("/proc/4242/ns/ipc".into()))
        );
        assert_eq!(path_of(LinuxNamespaceType::Cgroup), None);

        // --cpus is a quota over dockerd's 100 ms period; privileged drops
        // the filters and may use every device.
        let (c, _) = decode_create(
            br#"{"Image":"b","HostConfig":{"NanoCpus":1500000000,"Privileged":true}}"#,
        )
        .expect("decodes");
        let spec = round_trip(
            &build_spec(&id, "ns", &c, &image, &User { uid: 0, gid: 0 }, &host).expect("spec"),
        );
        let linux = spec.linux().as_ref().expect("linux");
        let r = linux.resources().as_ref().expect("resources");
        let cpu = r.cpu().as_ref().expect("cpu");
        assert_eq!((cpu.quota(), cpu.period()), (Some(150_000), Some(100_000)));
        assert!(linux.seccomp().is_none() && linux.masked_paths().is_none());
        let devices = r.devices().as_ref().expect("device rules");
        assert_eq!(devices.len(), 1);
        assert!(devices[0].allow() && devices[0].typ().is_none());
    }

    #[test]
    fn log_options_follow_docker_units() {
        assert_eq!(parse_size("10m"), Some(10 << 20));
        assert_eq!(parse_size("1k"), Some(1024));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("10x"), None);
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("99999999999999t"), None);
        let body = br#"{"Image":"b","HostConfig":{"LogConfig":{"Type":"json-file","Config":{"max-size":"1m","max-file":"3"}}}}"#;
        let (c, _) = decode_create(body).expect("decodes");
        assert_eq!(c.log_max_size_bytes, Some(1 << 20));
        assert_eq!(c.log_max_files, Some(3));
        let bad = br#"{"Image":"b","HostConfig":{"LogConfig":{"Config":{"compress":"true"}}}}"#;
        assert!(decode_create(bad).is_err());
        let bad = br#"{"Image":"b","HostConfig":{"LogConfig":{"Config":{"max-file":"0"}}}}"#;
        assert!(decode_create(bad).is_err());
    }

    #[test]
    fn ps_status_words() {
        let mut s = Snapshot {
            record: Record {
                id: "abc".parse().expect("id"),
                name: "n".to_owned(),
                config: Arc::new(ContainerConfig::default()),
                created_at: holdfast_core::WallTime::from_unix_nanos(0),
                presence: holdfast_core::Presence::Created,
                run: 1,
                pid: Some(5),
                started_at: Some(holdfast_core::WallTime::from_unix_nanos(0)),
                began_at: None,
                start_sent: false,
                exit: None,
                restart_count: 0,
                intents: holdfast_core::Intents::default(),
                network: holdfast_core::NetworkState::Detached,
                endpoints: Vec::new(),
                own_disconnected: false,
                health: None,
                create_sent_at: None,
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

#[cfg(test)]
mod merge_tests {
    use super::*;

    #[test]
    fn env_is_merged_as_dockerd_stores_it() {
        let image = ["PATH=/bin".to_owned(), "A=image".to_owned()];
        assert_eq!(
            merged_env(vec!["A=1".into(), "B".into()], &image),
            vec!["A=1".to_owned(), "B".into(), "PATH=/bin".into()]
        );
        assert_eq!(merged_env(vec![], &image), image.to_vec());
    }

    #[test]
    fn exposed_ports_read_as_dockerd_keeps_them() {
        let keys = ["80".to_owned(), "53/UDP".into(), "80/tcp".into()];
        assert_eq!(
            exposed_port_keys(keys.iter()).expect("valid"),
            vec!["53/udp".to_owned(), "80/tcp".into()]
        );
        for bad in ["x/tcp", "80/icmp", "70000"] {
            let key = bad.to_owned();
            assert!(exposed_port_keys(std::iter::once(&key)).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_show_in_the_unit_they_were_given_in() {
        assert_eq!(size_as_given(1 << 20), "1m");
        assert_eq!(size_as_given(10 << 20), "10m");
        assert_eq!(size_as_given(100 << 10), "100k");
        assert_eq!(size_as_given(2 << 30), "2g");
        assert_eq!(size_as_given(1000), "1000");
    }
}
