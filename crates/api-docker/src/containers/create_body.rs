//! The body of `POST /containers/create`, decoded and checked: what
//! holdfast cannot honour is refused by name, never ignored. Pure, so it
//! is unit-tested and fuzzed.

use super::create_options::{self, parse_size};
use super::lifecycle::parse_signal;
use super::network_mode_name;
use crate::ApiError;
use holdfast_core::{
    BindMount, ContainerConfig, LogDriver, NamespaceMode, Namespaces, NetworkMode, PortBinding,
    RestartPolicy, SpecExtras,
};
use holdfast_engine::backend::containers::NewContainer;
use holdfast_engine::port_keys::{exposed_port_keys, parse_port_key, publish_exposed};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

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
    domainname: Option<String>,
    // Read by builds only (dockerd keeps them for a commit): refused when
    // set, as holdfast builds nothing.
    shell: Option<Vec<String>>,
    on_build: Option<Vec<String>>,
    // Refused when set (see `refuse_unsupported_config`).
    network_disabled: Option<bool>,
    args_escaped: Option<bool>,
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
    device_requests: Option<Vec<Value>>,
    masked_paths: Option<Vec<String>>,
    readonly_paths: Option<Vec<String>>,
    userns_mode: Option<String>,
    oom_kill_disable: Option<bool>,
    oom_score_adj: Option<i64>,
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
    isolation: Option<String>,
    storage_opt: Option<BTreeMap<String, String>>,
    volume_driver: Option<String>,
    cgroup: Option<String>,
    #[serde(rename = "IOMaximumIOps")]
    io_maximum_iops: Option<u64>,
    #[serde(rename = "IOMaximumBandwidth")]
    io_maximum_bandwidth: Option<u64>,
    #[serde(rename = "KernelMemoryTCP")]
    kernel_memory_tcp: Option<i64>,
    // Applied: given to the runtime's spec as they are.
    annotations: Option<BTreeMap<String, String>>,
    console_size: Option<Vec<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(crate) struct RestartPolicyBody {
    pub(crate) name: Option<String>,
    maximum_retry_count: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct LogConfigBody {
    #[serde(rename = "Type")]
    kind: Option<String>,
    config: Option<BTreeMap<String, String>>,
}

/// Decodes and checks a create body. Pure, so it is unit-tested and fuzzed.
pub fn decode_create(body: &[u8]) -> Result<(ContainerConfig, Vec<String>), ApiError> {
    let req = parse_create(body)?;
    Ok((req.config, req.warnings))
}

/// Decodes and checks a create body into what the engine creates from (the
/// query's name and platform left for the caller).
pub(crate) fn parse_create(body: &[u8]) -> Result<NewContainer, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "config cannot be empty in order to create a container",
        ));
    }
    let mut b: CreateBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?;
    refuse_unsupported_config(&b)?;
    let image = b
        .image
        .take()
        .filter(|i| !i.is_empty())
        .ok_or_else(|| ApiError::bad_request("no image given: config.Image is required"))?;
    let mut hc = b.host_config.take().unwrap_or_default();
    refuse_unsupported(&hc)?;
    let spec_extras = SpecExtras {
        domainname: b.domainname.take().filter(|d| !d.is_empty()),
        annotations: hc.annotations.take().unwrap_or_default(),
        console_size: console_size(hc.console_size.take())?,
    };
    // Both checked by refuse_unsupported: what is left names what runs anyway.
    let as_given = holdfast_core::AsGiven {
        runtime: hc.runtime.take().filter(|r| !r.is_empty()),
        isolation: hc.isolation.take().filter(|i| !i.is_empty()),
    };
    let healthcheck = holdfast_engine::health_config::decode(b.healthcheck.as_ref())?;
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
        security: Default::default(),
        pod: None,
        spec_extras,
        as_given,
    };
    if let Some(w) = &config.working_dir
        && !w.starts_with('/')
    {
        return Err(ApiError::bad_request(format!(
            "the working directory '{w}' is invalid, it needs to be an absolute path"
        )));
    }
    Ok(NewContainer {
        config,
        warnings,
        cgroupns_defaulted,
        publish_all,
        network_defaulted,
        platform: None,
        name: None,
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

pub(crate) fn restart_policy(p: RestartPolicyBody) -> Result<RestartPolicy, ApiError> {
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
        anonymous: false,
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
                anonymous: false,
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

/// `HostConfig.ConsoleSize`: `[rows, columns]`; `[0, 0]` (what the CLI
/// sends without a terminal) is no size.
fn console_size(size: Option<Vec<u64>>) -> Result<Option<(u16, u16)>, ApiError> {
    let Some(size) = size else {
        return Ok(None);
    };
    let bad = || {
        ApiError::bad_request(format!(
            "invalid HostConfig.ConsoleSize {size:?}: [rows, columns] is needed"
        ))
    };
    let [rows, columns] = size.as_slice() else {
        return Err(bad());
    };
    if (*rows, *columns) == (0, 0) {
        return Ok(None);
    }
    let rows = u16::try_from(*rows).map_err(|_| bad())?;
    let columns = u16::try_from(*columns).map_err(|_| bad())?;
    Ok(Some((rows, columns)))
}

/// The body's own fields (beside `HostConfig`) holdfast cannot honour,
/// refused by name when set.
fn refuse_unsupported_config(b: &CreateBody) -> Result<(), ApiError> {
    let set = |v: &Option<Vec<String>>| v.as_ref().is_some_and(|v| !v.is_empty());
    let refused: [(bool, &str); 4] = [
        (
            set(&b.shell),
            "Config.Shell is read only by image builds, which holdfast does not do",
        ),
        (
            set(&b.on_build),
            "Config.OnBuild is read only by image builds, which holdfast does not do",
        ),
        (
            b.network_disabled == Some(true),
            "Config.NetworkDisabled is not supported by holdfast: use the network mode none (--network none)",
        ),
        (
            b.args_escaped == Some(true),
            "Config.ArgsEscaped is for Windows containers only",
        ),
    ];
    match refused.iter().find(|(on, _)| *on) {
        Some((_, why)) => Err(ApiError::bad_request(*why)),
        None => Ok(()),
    }
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
    if hc.io_maximum_iops.unwrap_or(0) != 0 || hc.io_maximum_bandwidth.unwrap_or(0) != 0 {
        // dockerd's words on Linux.
        return Err(ApiError::bad_request(
            "invalid QoS settings: linux does not support Maximum IO Bandwidth or Maximum IO IOps",
        ));
    }
    if let Some(driver) = hc
        .volume_driver
        .as_deref()
        .filter(|d| !d.is_empty() && *d != "local")
    {
        return Err(ApiError::bad_request(format!(
            "HostConfig.VolumeDriver {driver:?} is not supported by holdfast (its volumes are local)"
        )));
    }
    if let Some(isolation) = hc
        .isolation
        .as_deref()
        .filter(|i| !i.is_empty() && *i != "default")
    {
        // dockerd's words on Linux.
        return Err(ApiError::bad_request(format!(
            "Invalid isolation: {isolation:?} - linux only supports 'default'"
        )));
    }
    let nonempty = |v: Option<usize>| v.is_some_and(|n| n > 0);
    let lists: [(&str, bool); 11] = [
        (
            "HostConfig.StorageOpt (--storage-opt)",
            nonempty(hc.storage_opt.as_ref().map(BTreeMap::len)),
        ),
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
    let modes: [(&str, bool); 3] = [
        ("HostConfig.Cgroup", nonempty_str(&hc.cgroup, &[])),
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
        ("HostConfig.KernelMemory", nonzero(&hc.kernel_memory)),
        ("HostConfig.KernelMemoryTCP", nonzero(&hc.kernel_memory_tcp)),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containers::inspect::{host_config_json, port_bindings_json};
    use axum::http::StatusCode;
    use holdfast_core::ContainerId;

    #[test]
    fn device_cgroup_rules_read_as_dockerd_reads_them() {
        let (c, _) = decode_create(
            br#"{"Image":"b","HostConfig":{"DeviceCgroupRules":["c 1:3 mr","a *:* rwm","b 7:* r"]}}"#,
        )
        .expect("decoded");
        let rule = |kind, major, minor, access: &str| holdfast_core::DeviceCgroupRule {
            kind,
            major,
            minor,
            access: access.into(),
        };
        assert_eq!(
            c.privileges.device_cgroup_rules,
            vec![
                rule('c', Some(1), Some(3), "mr"),
                rule('a', None, None, "rwm"),
                rule('b', Some(7), None, "r"),
            ]
        );
        for bad in [
            "c 1:3",
            "x 1:3 r",
            "c 1:3 rwmx",
            "c 1-3 r",
            "c :3 r",
            "c 1:3 r extra",
            "c 1:3 q",
            "c 99999999999999999999:1 r",
        ] {
            let body = format!(r#"{{"Image":"b","HostConfig":{{"DeviceCgroupRules":["{bad}"]}}}}"#);
            let e = decode_create(body.as_bytes()).expect_err(bad);
            assert_eq!(
                e.message,
                format!("invalid device cgroup rule format: '{bad}'")
            );
        }
    }

    #[test]
    fn spec_extras_are_taken_as_given_and_defaults_are_no_choice() {
        let (c, _) = decode_create(
            br#"{"Image":"b","Tty":true,"Domainname":"example.org","HostConfig":{"ConsoleSize":[30,120],"Annotations":{"a":"1"}}}"#,
        )
        .expect("decoded");
        assert_eq!(c.spec_extras.domainname.as_deref(), Some("example.org"));
        assert_eq!(c.spec_extras.console_size, Some((30, 120)));
        assert_eq!(
            c.spec_extras.annotations.get("a").map(String::as_str),
            Some("1")
        );
        // What the CLI and the SDKs send when nothing is asked.
        let (c, _) = decode_create(
            br#"{"Image":"b","Domainname":"","OnBuild":null,"Shell":[],"NetworkDisabled":false,"HostConfig":{"ConsoleSize":[0,0],"VolumeDriver":"","Cgroup":"","IOMaximumIOps":0,"IOMaximumBandwidth":0,"StorageOpt":{}}}"#,
        )
        .expect("decoded");
        assert_eq!(c.spec_extras, holdfast_core::SpecExtras::default());
        assert!(decode_create(br#"{"Image":"b","HostConfig":{"VolumeDriver":"local"}}"#).is_ok());
        assert!(decode_create(br#"{"Image":"b","HostConfig":{"Isolation":"default"}}"#).is_ok());
    }

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
            (br#"{"Image":"b","HostConfig":{"LogConfig":{"Type":"nope"}}}"#, "logger: no log driver named 'nope' is registered"),
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
            (br#"{"Image":"b","HostConfig":{"StorageOpt":{"size":"1G"}}}"#, "HostConfig.StorageOpt"),
            (br#"{"Image":"b","HostConfig":{"Isolation":"hyperv"}}"#, "Invalid isolation: \"hyperv\" - linux only supports 'default'"),
            (br#"{"Image":"b","HostConfig":{"VolumeDriver":"nfs"}}"#, "HostConfig.VolumeDriver \"nfs\""),
            (br#"{"Image":"b","HostConfig":{"Cgroup":"container:web"}}"#, "HostConfig.Cgroup"),
            (br#"{"Image":"b","HostConfig":{"IOMaximumIOps":10}}"#, "Maximum IO IOps"),
            (br#"{"Image":"b","HostConfig":{"IOMaximumBandwidth":10}}"#, "Maximum IO Bandwidth"),
            (br#"{"Image":"b","HostConfig":{"KernelMemoryTCP":1048576}}"#, "HostConfig.KernelMemoryTCP"),
            (br#"{"Image":"b","HostConfig":{"ConsoleSize":[24]}}"#, "HostConfig.ConsoleSize"),
            (br#"{"Image":"b","HostConfig":{"ConsoleSize":[24,70000]}}"#, "HostConfig.ConsoleSize"),
            (br#"{"Image":"b","Shell":["/bin/bash","-c"]}"#, "Config.Shell"),
            (br#"{"Image":"b","OnBuild":["RUN x"]}"#, "Config.OnBuild"),
            (br#"{"Image":"b","NetworkDisabled":true}"#, "Config.NetworkDisabled"),
            (br#"{"Image":"b","ArgsEscaped":true}"#, "Config.ArgsEscaped"),
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
        use holdfast_engine::backend::images::ImageConfig;
        use holdfast_engine::runtime_spec::{HostFacts, User, build_spec};
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
            devices: vec![holdfast_engine::runtime_spec::HostDevice {
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
}
