//! `GET /containers/{id}/json`: a container as dockerd shows it, from the
//! core's record and what its network attachments gave.

use super::{command_line, network_mode_shown};
use crate::params::Params;
use crate::{ApiError, ApiState, render};
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_core::{ContainerConfig, LogDriver, NetworkMode, RestartPolicy, Status};
use holdfast_engine::backend::containers::Attachment;
use holdfast_engine::backend::containers::{EndpointDetails, Snapshot};
use serde_json::{Value, json};

fn restart_policy_json(p: RestartPolicy) -> Value {
    let (name, retries) = match p {
        RestartPolicy::No => ("no", 0),
        RestartPolicy::Always => ("always", 0),
        RestartPolicy::UnlessStopped => ("unless-stopped", 0),
        RestartPolicy::OnFailure { max_retries } => ("on-failure", max_retries),
    };
    json!({ "Name": name, "MaximumRetryCount": retries })
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
pub(super) fn host_config_json(c: &ContainerConfig) -> Value {
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
        // What holdfast runs every container with, and Linux's only
        // isolation (dockerd shows "" for it).
        "Runtime": c.as_given.runtime.as_deref().unwrap_or("runc"),
        "Isolation": c.as_given.isolation.as_deref().unwrap_or_default(),
        "ConsoleSize": c.spec_extras.console_size.map_or([0, 0], |(r, w)| [r, w]),
        "Annotations": (!c.spec_extras.annotations.is_empty()).then_some(&c.spec_extras.annotations),
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
        "DeviceCgroupRules": (!p.device_cgroup_rules.is_empty()).then(|| {
            p.device_cgroup_rules.iter().map(|r| {
                let number = |n: Option<i64>| n.map_or_else(|| "*".to_owned(), |n| n.to_string());
                format!("{} {}:{} {}", r.kind, number(r.major), number(r.minor), r.access)
            }).collect::<Vec<_>>()
        }),
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
        "MemorySwappiness": r.memory_swappiness,
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
pub(super) fn mount_points_json(c: &ContainerConfig) -> Vec<Value> {
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
pub(super) fn port_bindings_json(c: &ContainerConfig) -> Value {
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
    let network_id = att.map_or_else(|| network.clone(), |a| a.network_id.clone());
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
            "Pid": s.running_pid(),
            "ExitCode": exit_code,
            "Error": error,
            "StartedAt": render::time_or_zero(r.started_at),
            "FinishedAt": render::time_or_zero(last_exit.map(|e| e.finished_at)),
            "Health": s.health.as_ref().map(crate::health::state_json),
        },
        "Image": c.image_id.clone().unwrap_or_default(),
        // Set by `inspect` from what is bound there.
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
        "ExecIDs": exec_ids(r),
        "HostConfig": host_config_json(c),
        "GraphDriver": { "Name": "overlayfs", "Data": null },
        "Mounts": mount_points_json(c),
        "Config": {
            "Hostname": c.hostname.clone().unwrap_or_else(|| r.id.as_str().chars().take(12).collect()),
            "Domainname": c.spec_extras.domainname.clone().unwrap_or_default(),
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
            "Healthcheck": holdfast_engine::health_config::config_json(c.healthcheck.as_ref()),
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

/// `GET /containers/{id}/json?size=..`: `SizeRw` and `SizeRootFs` only
/// when `size` asks for them (measuring takes a walk of the snapshot).
pub async fn inspect(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let backend = state.engine.containers();
    let details = backend.inspect(&reference).await?;
    let sizes = if Params::parse(&query).bool("size") {
        Some(
            backend
                .size_meter()
                .await?
                .measure(&details.snapshot)
                .await?,
        )
    } else {
        None
    };
    let mut out = inspect_json(
        &details.snapshot,
        &details.log_path,
        &details.default_bridge,
        details.attachment.as_ref(),
    );
    let shown = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map_or_else(String::new, |p| p.to_string_lossy().into_owned())
    };
    out["HostsPath"] = json!(shown(&details.hosts_path));
    out["ResolvConfPath"] = json!(shown(&details.resolv_conf_path));
    out["HostnamePath"] = json!(shown(&details.hostname_path));
    if let (Some(sizes), Some(o)) = (sizes, out.as_object_mut()) {
        super::insert_sizes(o, &sizes);
    }
    if let Some(networks) = out["NetworkSettings"]["Networks"].as_object_mut() {
        for (name, endpoint) in endpoints_json(&details.endpoints) {
            networks.insert(name, endpoint);
        }
    }
    Ok(Json(out).into_response())
}

/// `NetworkSettings.Networks` of the networks it was connected to after
/// its create (`docker network connect`): what their attachments gave, if
/// made.
fn endpoints_json(endpoints: &[EndpointDetails]) -> Vec<(String, Value)> {
    endpoints
        .iter()
        .map(|d| {
            let (e, att, network_id) = (&d.endpoint, d.attachment.as_ref(), &d.network_id);
            let user = e.network != holdfast_engine::network::DEFAULT_NAME;
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

/// The execs of its run that may still run, as dockerd lists them (`null`
/// when none).
fn exec_ids(r: &holdfast_core::Record) -> Value {
    let ids: Vec<&str> = r
        .execs
        .iter()
        .filter(|e| e.run == r.run && e.state.may_run())
        .map(|e| e.id.as_str())
        .collect();
    if ids.is_empty() {
        Value::Null
    } else {
        json!(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_show_in_the_unit_they_were_given_in() {
        assert_eq!(size_as_given(1 << 20), "1m");
        assert_eq!(size_as_given(10 << 20), "10m");
        assert_eq!(size_as_given(100 << 10), "100k");
        assert_eq!(size_as_given(2 << 30), "2g");
        assert_eq!(size_as_given(1000), "1000");
    }
}
