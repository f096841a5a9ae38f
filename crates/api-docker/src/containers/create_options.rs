//! The create options runc can honour, from a create body's `HostConfig`
//! into [`ContainerConfig`]'s fields, checked as dockerd checks them: each
//! bad value is a 400 naming the option. Pure, so it is unit-tested and
//! fuzzed with the rest of create parsing.

use super::super::ApiError;
use holdfast_core::{
    CgroupnsMode, DeviceCgroupRule, DeviceMapping, LogDriver, MountSpec, NamespaceMode,
    NetworkMode, Privileges, Resources, Ulimit,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The `HostConfig` fields this module reads.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(super) struct OptionsBody {
    pub privileged: Option<bool>,
    pub cap_add: Option<Vec<String>>,
    pub cap_drop: Option<Vec<String>>,
    pub devices: Option<Vec<DeviceBody>>,
    pub device_cgroup_rules: Option<Vec<String>>,
    pub group_add: Option<Vec<String>>,
    pub pids_limit: Option<i64>,
    pub cpu_shares: Option<i64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<i64>,
    pub nano_cpus: Option<i64>,
    pub cpuset_cpus: Option<String>,
    pub cpuset_mems: Option<String>,
    pub cpu_realtime_period: Option<i64>,
    pub cpu_realtime_runtime: Option<i64>,
    pub memory: Option<i64>,
    pub memory_swap: Option<i64>,
    pub memory_reservation: Option<i64>,
    pub memory_swappiness: Option<i64>,
    pub ulimits: Option<Vec<UlimitBody>>,
    pub sysctls: Option<BTreeMap<String, String>>,
    pub shm_size: Option<i64>,
    pub tmpfs: Option<BTreeMap<String, String>>,
    pub mounts: Option<Vec<MountBody>>,
    pub pid_mode: Option<String>,
    #[serde(rename = "UTSMode")]
    pub uts_mode: Option<String>,
    pub ipc_mode: Option<String>,
    pub cgroupns_mode: Option<String>,
    pub cgroup_parent: Option<String>,
    pub init: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(super) struct DeviceBody {
    path_on_host: String,
    path_in_container: String,
    cgroup_permissions: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(super) struct UlimitBody {
    name: String,
    soft: i64,
    hard: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
pub(super) struct MountBody {
    #[serde(rename = "Type")]
    kind: String,
    source: String,
    target: String,
    read_only: bool,
    bind_options: Option<BindOptionsBody>,
    tmpfs_options: Option<TmpfsOptionsBody>,
    volume_options: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct BindOptionsBody {
    propagation: String,
    non_recursive: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct TmpfsOptionsBody {
    size_bytes: i64,
    mode: u32,
}

const ULIMIT_NAMES: [&str; 16] = [
    "as",
    "core",
    "cpu",
    "data",
    "fsize",
    "locks",
    "memlock",
    "msgqueue",
    "nice",
    "nofile",
    "nproc",
    "rss",
    "rtprio",
    "rttime",
    "sigpending",
    "stack",
];

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// `--cap-add`/`--cap-drop` names: `ALL`, or a known name with or without `CAP_`.
fn capabilities(option: &str, names: Option<Vec<String>>) -> Result<Vec<String>, ApiError> {
    let names = names.unwrap_or_default();
    for name in &names {
        if upper_is_all(name) || holdfast_engine::runtime_spec::capability_name(name).is_some() {
            continue;
        }
        return Err(bad(format!(
            "invalid {option}: unknown capability: {name:?}"
        )));
    }
    Ok(names)
}

fn upper_is_all(name: &str) -> bool {
    name.eq_ignore_ascii_case("ALL") || name.eq_ignore_ascii_case("CAP_ALL")
}

fn devices(devices: Option<Vec<DeviceBody>>) -> Result<Vec<DeviceMapping>, ApiError> {
    let mut out = Vec::new();
    for d in devices.unwrap_or_default() {
        let in_container = if d.path_in_container.is_empty() {
            d.path_on_host.clone()
        } else {
            d.path_in_container
        };
        let permissions = if d.cgroup_permissions.is_empty() {
            "rwm".to_owned()
        } else {
            d.cgroup_permissions
        };
        if !d.path_on_host.starts_with('/') || !in_container.starts_with('/') {
            return Err(bad(format!(
                "invalid HostConfig.Devices: {}:{in_container}: device paths must be absolute",
                d.path_on_host
            )));
        }
        if permissions.is_empty() || !permissions.chars().all(|c| "rwm".contains(c)) {
            return Err(bad(format!(
                "invalid HostConfig.Devices: {}: permissions {permissions:?}: want some of r, w, m",
                d.path_on_host
            )));
        }
        out.push(DeviceMapping {
            path_on_host: d.path_on_host,
            path_in_container: in_container,
            cgroup_permissions: permissions,
        });
    }
    Ok(out)
}

pub(super) fn privileges(o: &mut OptionsBody) -> Result<Privileges, ApiError> {
    let group_add = o.group_add.take().unwrap_or_default();
    if let Some(g) = group_add.iter().find(|g| g.is_empty() || g.contains(':')) {
        return Err(bad(format!("invalid HostConfig.GroupAdd: group {g:?}")));
    }
    Ok(Privileges {
        privileged: o.privileged.unwrap_or(false),
        cap_add: capabilities("HostConfig.CapAdd", o.cap_add.take())?,
        cap_drop: capabilities("HostConfig.CapDrop", o.cap_drop.take())?,
        devices: devices(o.devices.take())?,
        group_add,
        device_cgroup_rules: o
            .device_cgroup_rules
            .take()
            .unwrap_or_default()
            .iter()
            .map(|r| device_cgroup_rule(r))
            .collect::<Result<_, _>>()?,
    })
}

/// dockerd's `^([acb]) ([0-9]+|\*):([0-9]+|\*) ([rwm]{1,3})$`.
fn device_cgroup_rule(rule: &str) -> Result<DeviceCgroupRule, ApiError> {
    let refused = || bad(format!("invalid device cgroup rule format: '{rule}'"));
    let mut parts = rule.split(' ');
    let (Some(kind), Some(numbers), Some(access), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(refused());
    };
    let kind = match kind {
        "a" | "b" | "c" => kind.chars().next().ok_or_else(refused)?,
        _ => return Err(refused()),
    };
    let number = |n: &str| -> Result<Option<i64>, ApiError> {
        match n {
            "*" => Ok(None),
            n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                n.parse().map(Some).map_err(|_| refused())
            }
            _ => Err(refused()),
        }
    };
    let (major, minor) = numbers.split_once(':').ok_or_else(refused)?;
    let (major, minor) = (number(major)?, number(minor)?);
    if access.is_empty() || access.len() > 3 || !access.bytes().all(|b| b"rwm".contains(&b)) {
        return Err(refused());
    }
    Ok(DeviceCgroupRule {
        kind,
        major,
        minor,
        access: access.to_owned(),
    })
}

fn positive(option: &str, value: Option<i64>) -> Result<Option<u64>, ApiError> {
    match value.unwrap_or(0) {
        0 => Ok(None),
        v if v < 0 => Err(bad(format!("invalid {option}: {v} cannot be negative"))),
        v => Ok(Some(v.unsigned_abs())),
    }
}

/// dockerd's cpuset syntax: `0-3,5`.
fn cpuset(option: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let ok = v.split(',').all(|part| {
        let mut ends = part.splitn(2, '-');
        let lo = ends.next().and_then(|n| n.parse::<u32>().ok());
        match (lo, ends.next()) {
            (Some(_), None) => true,
            (Some(lo), Some(hi)) => hi.parse::<u32>().is_ok_and(|hi| hi >= lo),
            _ => false,
        }
    });
    if !ok {
        return Err(bad(format!(
            "invalid {option}: {v:?}: want a list such as 0-3,5"
        )));
    }
    Ok(Some(v))
}

fn ulimits(ulimits: Option<Vec<UlimitBody>>) -> Result<Vec<Ulimit>, ApiError> {
    let mut out: Vec<Ulimit> = Vec::new();
    for u in ulimits.unwrap_or_default() {
        if !ULIMIT_NAMES.contains(&u.name.as_str()) {
            return Err(bad(format!(
                "invalid HostConfig.Ulimits: unknown ulimit {:?}",
                u.name
            )));
        }
        if u.soft > u.hard {
            return Err(bad(format!(
                "invalid HostConfig.Ulimits: {}: ulimit soft limit must be less than or equal to hard limit: {} > {}",
                u.name, u.soft, u.hard
            )));
        }
        out.retain(|have| have.name != u.name);
        out.push(Ulimit {
            name: u.name,
            soft: u.soft,
            hard: u.hard,
        });
    }
    Ok(out)
}

/// The memory limit (checked by the caller) with swap, reservation, CPU,
/// pids, ulimits and the size of `/dev/shm`.
pub(super) fn resources(o: &mut OptionsBody, memory: Option<u64>) -> Result<Resources, ApiError> {
    let nano_cpus = positive("HostConfig.NanoCpus (--cpus)", o.nano_cpus)?;
    let cpu_period_us = positive("HostConfig.CpuPeriod", o.cpu_period)?;
    let cpu_quota_us = match o.cpu_quota.unwrap_or(0) {
        0 => None,
        -1 => Some(-1),
        q if q < 1000 => {
            return Err(bad(
                "invalid HostConfig.CpuQuota: CPU cfs quota can not be less than 1ms (i.e. 1000)",
            ));
        }
        q => Some(q),
    };
    if let Some(p) = cpu_period_us
        && !(1000..=1_000_000).contains(&p)
    {
        return Err(bad(
            "invalid HostConfig.CpuPeriod: CPU cfs period can not be less than 1ms (i.e. 1000) or larger than 1s (i.e. 1000000)",
        ));
    }
    if nano_cpus.is_some() && (cpu_period_us.is_some() || cpu_quota_us.is_some()) {
        return Err(bad(
            "Conflicting options: HostConfig.NanoCpus (--cpus) and HostConfig.CpuPeriod or CpuQuota cannot both be set",
        ));
    }
    let realtime_runtime = match o.cpu_realtime_runtime.unwrap_or(0) {
        0 => None,
        r if r < -1 => {
            return Err(bad(
                "invalid HostConfig.CpuRealtimeRuntime: cannot be negative",
            ));
        }
        r => Some(r),
    };
    let realtime_period = positive("HostConfig.CpuRealtimePeriod", o.cpu_realtime_period)?;
    if let (Some(runtime), Some(period)) = (realtime_runtime, realtime_period)
        && runtime > 0
        && runtime.unsigned_abs() > period
    {
        return Err(bad(
            "invalid HostConfig.CpuRealtimeRuntime: cpu real-time runtime cannot be higher than cpu real-time period",
        ));
    }
    let memory_swap_bytes = match o.memory_swap.unwrap_or(0) {
        0 => memory.and_then(|m| i64::try_from(m.checked_mul(2)?).ok()),
        -1 => Some(-1),
        s if s < 0 => return Err(bad(format!("invalid HostConfig.MemorySwap: {s}"))),
        s => {
            let Some(m) = memory else {
                return Err(bad(
                    "invalid HostConfig.MemorySwap: you should always set the Memory limit when using Memoryswap limit, see usage",
                ));
            };
            if s.unsigned_abs() < m {
                return Err(bad(
                    "invalid HostConfig.MemorySwap: minimum memoryswap limit should be larger than memory limit, see usage",
                ));
            }
            Some(s)
        }
    };
    let memory_reservation_bytes = positive("HostConfig.MemoryReservation", o.memory_reservation)?;
    if let (Some(m), Some(r)) = (memory, memory_reservation_bytes)
        && r > m
    {
        return Err(bad(
            "invalid HostConfig.MemoryReservation: minimum memory limit can not be less than memory reservation limit, see usage",
        ));
    }
    let shm_size_bytes = match o.shm_size.unwrap_or(0) {
        s if s < 0 => {
            return Err(bad(
                "invalid HostConfig.ShmSize: SHM size can not be less than 0",
            ));
        }
        s => positive("HostConfig.ShmSize", Some(s))?,
    };
    // dockerd's range; -1 (what the CLI sends unasked) is the default.
    let memory_swappiness = match o.memory_swappiness {
        None | Some(-1) => None,
        Some(s @ 0..=100) => Some(s.unsigned_abs()),
        Some(s) => {
            return Err(bad(format!(
                "invalid value: {s}, valid memory swappiness range is 0-100"
            )));
        }
    };
    let cpu_shares = positive("HostConfig.CpuShares", o.cpu_shares)?;
    Ok(Resources {
        // -1 and 0 are "unlimited", which is no limit at all.
        pids_limit: o.pids_limit.filter(|&l| l > 0),
        cpu_shares,
        cpu_quota_us,
        cpu_period_us,
        nano_cpus,
        cpuset_cpus: cpuset("HostConfig.CpusetCpus", o.cpuset_cpus.take())?,
        cpuset_mems: cpuset("HostConfig.CpusetMems", o.cpuset_mems.take())?,
        cpu_realtime_period_us: realtime_period,
        cpu_realtime_runtime_us: realtime_runtime,
        memory_swap_bytes,
        memory_reservation_bytes,
        memory_swappiness,
        ulimits: ulimits(o.ulimits.take())?,
        shm_size_bytes,
        // Refused by name in the body's decoding (HostConfig.OomScoreAdj);
        // cgroup v2 files are the CRI's.
        oom_score_adj: None,
        unified: Default::default(),
    })
}

/// Namespaced sysctls only, as dockerd allows them; `net.*` needs a
/// network namespace of the container's own, `kernel.shm*` and friends an
/// IPC namespace of its own.
pub(super) fn sysctls(
    sysctls: Option<BTreeMap<String, String>>,
    network: NetworkMode,
    ipc: &NamespaceMode,
    uts: &NamespaceMode,
) -> Result<BTreeMap<String, String>, ApiError> {
    let sysctls = sysctls.unwrap_or_default();
    for key in sysctls.keys() {
        let refuse = |why: &str| {
            Err(bad(format!(
                "invalid HostConfig.Sysctls: sysctl '{key}' is not allowed{why}"
            )))
        };
        let ipc_key = [
            "kernel.msgmax",
            "kernel.msgmnb",
            "kernel.msgmni",
            "kernel.sem",
        ]
        .contains(&key.as_str())
            || key.starts_with("kernel.shm")
            || key.starts_with("fs.mqueue.");
        if ipc_key {
            if !matches!(ipc, NamespaceMode::Private | NamespaceMode::Shareable) {
                return refuse(" when the IPC namespace is shared");
            }
        } else if key.starts_with("net.") && key.len() > 4 {
            if network == NetworkMode::Host {
                return refuse(" in host network mode");
            }
            if network == NetworkMode::Container {
                return refuse(" when the network namespace is shared");
            }
        } else if key == "kernel.domainname" || key == "kernel.hostname" {
            if *uts != NamespaceMode::Private {
                return refuse(" when the UTS namespace is shared");
            }
        } else {
            return refuse(
                ": only namespaced sysctls can be set (kernel.msg*, kernel.sem, kernel.shm*, fs.mqueue.*, net.*)",
            );
        }
        if key.contains("..") || key.contains('/') {
            return refuse("");
        }
    }
    Ok(sysctls)
}

/// Options `--tmpfs` and `--mount type=tmpfs` may carry (dockerd's list).
fn tmpfs_option_ok(option: &str) -> bool {
    const FLAGS: [&str; 22] = [
        "rw",
        "ro",
        "nosuid",
        "suid",
        "nodev",
        "dev",
        "noexec",
        "exec",
        "sync",
        "async",
        "dirsync",
        "mand",
        "nomand",
        "atime",
        "noatime",
        "diratime",
        "nodiratime",
        "relatime",
        "norelatime",
        "strictatime",
        "nostrictatime",
        "tmpcopyup",
    ];
    match option.split_once('=') {
        None => FLAGS.contains(&option),
        Some(("size", v)) => parse_size(v).is_some() || v.ends_with('%'),
        Some(("mode", v)) => u32::from_str_radix(v, 8).is_ok_and(|m| m <= 0o7777),
        Some(("uid" | "gid" | "nr_inodes" | "nr_blocks", v)) => v.parse::<u64>().is_ok(),
        Some(_) => false,
    }
}

fn absolute_target(option: &str, target: &str) -> Result<(), ApiError> {
    if !target.starts_with('/') || target == "/" || target.split('/').any(|p| p == "..") {
        return Err(bad(format!(
            "invalid {option}: {target:?}: the mount point must be an absolute path other than /"
        )));
    }
    Ok(())
}

pub(super) fn tmpfs(
    tmpfs: Option<BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let tmpfs = tmpfs.unwrap_or_default();
    for (path, options) in &tmpfs {
        absolute_target("HostConfig.Tmpfs", path)?;
        if let Some(o) = options
            .split(',')
            .filter(|o| !o.is_empty())
            .find(|o| !tmpfs_option_ok(o))
        {
            return Err(bad(format!(
                "invalid HostConfig.Tmpfs: {path}: unknown tmpfs option {o:?}"
            )));
        }
    }
    Ok(tmpfs)
}

/// Whether a JSON option carries anything (the CLI sends empty ones).
fn given(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null | serde_json::Value::Bool(false) => false,
        serde_json::Value::Object(o) => o.values().any(given),
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::Bool(true) => true,
    }
}

/// `--mount type=volume`: takes them out of `mounts`, as volume mounts
/// like `-v name:/path` (anonymous when no source is given).
pub(super) fn volume_mounts(
    mounts: &mut Option<Vec<MountBody>>,
) -> Result<Vec<holdfast_core::BindMount>, ApiError> {
    let Some(all) = mounts.take() else {
        return Ok(Vec::new());
    };
    let (volumes, others): (Vec<MountBody>, Vec<MountBody>) =
        all.into_iter().partition(|m| m.kind == "volume");
    *mounts = Some(others);
    let mut out = Vec::new();
    for m in volumes {
        absolute_target("HostConfig.Mounts", &m.target)?;
        if !m.source.is_empty() {
            holdfast_engine::volumes::validate_name(&m.source)
                .map_err(|e| bad(format!("invalid HostConfig.Mounts: {e}")))?;
        }
        if m.bind_options.is_some() || m.tmpfs_options.is_some() {
            return Err(bad(
                "invalid HostConfig.Mounts: bind or tmpfs options given for a volume",
            ));
        }
        // What the local driver would have to honour beyond a plain volume.
        if let Some(options) = m.volume_options.as_ref().and_then(|v| v.as_object())
            && let Some((key, _)) = options.iter().find(|(_, v)| given(v))
        {
            return Err(bad(format!(
                "HostConfig.Mounts VolumeOptions.{key} is not supported by holdfast yet"
            )));
        }
        out.push(holdfast_core::BindMount {
            source: String::new(),
            destination: m.target,
            read_only: m.read_only,
            volume: Some(m.source),
            anonymous: false,
        });
    }
    Ok(out)
}

const PROPAGATIONS: [&str; 6] = [
    "rprivate", "private", "rshared", "shared", "rslave", "slave",
];

pub(super) fn mounts(mounts: Option<Vec<MountBody>>) -> Result<Vec<MountSpec>, ApiError> {
    let mut out = Vec::new();
    for m in mounts.unwrap_or_default() {
        absolute_target("HostConfig.Mounts", &m.target)?;
        let spec = match m.kind.as_str() {
            "bind" => {
                if !m.source.starts_with('/') {
                    return Err(bad(format!(
                        "invalid HostConfig.Mounts: invalid mount config for type \"bind\": invalid mount path: '{}' mount path must be absolute",
                        m.source
                    )));
                }
                let options = m.bind_options.unwrap_or_default();
                if options.non_recursive {
                    return Err(bad(
                        "HostConfig.Mounts BindOptions.NonRecursive is not supported by holdfast yet",
                    ));
                }
                let propagation = Some(options.propagation).filter(|p| !p.is_empty());
                if let Some(p) = &propagation
                    && !PROPAGATIONS.contains(&p.as_str())
                {
                    return Err(bad(format!(
                        "invalid HostConfig.Mounts: invalid propagation mode: {p}"
                    )));
                }
                MountSpec::Bind {
                    source: m.source,
                    target: m.target,
                    read_only: m.read_only,
                    propagation,
                }
            }
            "tmpfs" => {
                if !m.source.is_empty() {
                    return Err(bad(
                        "invalid HostConfig.Mounts: invalid mount config for type \"tmpfs\": field Source must not be specified",
                    ));
                }
                let options = m.tmpfs_options.unwrap_or_default();
                if options.size_bytes < 0 || options.mode > 0o7777 {
                    return Err(bad(
                        "invalid HostConfig.Mounts: TmpfsOptions: size must not be negative, mode at most 07777",
                    ));
                }
                MountSpec::Tmpfs {
                    target: m.target,
                    size_bytes: Some(options.size_bytes.unsigned_abs()).filter(|&s| s > 0),
                    mode: Some(options.mode).filter(|&m| m != 0),
                }
            }
            // Taken out before, by `volume_mounts`.
            "volume" => continue,
            other => {
                return Err(bad(format!(
                    "HostConfig.Mounts type {other:?} is not supported by holdfast (bind and tmpfs are)"
                )));
            }
        };
        if m.volume_options.is_some() {
            return Err(bad(
                "invalid HostConfig.Mounts: VolumeOptions given for a mount that is not a volume",
            ));
        }
        out.push(spec);
    }
    Ok(out)
}

/// `--pid`, `--uts` and `--ipc`: `container:<ref>` keeps the reference as
/// given (with pid 0); the create handler resolves it to a running
/// container's full id and init pid.
pub(super) fn namespace_mode(
    option: &str,
    value: Option<&str>,
    allowed: &[&str],
) -> Result<NamespaceMode, ApiError> {
    let value = value.unwrap_or("");
    match value {
        "" | "private" => Ok(NamespaceMode::Private),
        "host" => Ok(NamespaceMode::Host),
        "shareable" if allowed.contains(&"shareable") => Ok(NamespaceMode::Shareable),
        other => match other.strip_prefix("container:") {
            Some(reference) if !reference.is_empty() => Ok(NamespaceMode::Container {
                id: reference.to_owned(),
                pid: 0,
            }),
            _ => Err(bad(format!(
                "invalid {option}: {other:?} is not supported by holdfast (want {}, host or container:<name|id>)",
                allowed.join(", ")
            ))),
        },
    }
}

pub(super) fn cgroupns_mode(value: Option<&str>) -> Result<CgroupnsMode, ApiError> {
    match value.unwrap_or("") {
        "" | "host" => Ok(CgroupnsMode::Host),
        "private" => Ok(CgroupnsMode::Private),
        other => Err(bad(format!(
            "invalid HostConfig.CgroupnsMode: {other:?}: want host or private"
        ))),
    }
}

/// `--cgroup-parent`: a path below the cgroup root; never upwards.
pub(super) fn cgroup_parent(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(v) = value.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v.split('/').any(|p| p == ".." || p == ".") || v.ends_with(".slice") {
        return Err(bad(format!(
            "invalid HostConfig.CgroupParent: {v:?}: want a cgroupfs path (holdfast does not use the systemd cgroup driver)"
        )));
    }
    Ok(Some(v))
}

pub(super) fn log_driver(kind: Option<&str>) -> Result<LogDriver, ApiError> {
    match kind.unwrap_or("") {
        "" | "json-file" => Ok(LogDriver::JsonFile),
        "local" => Ok(LogDriver::Local),
        "none" => Ok(LogDriver::None),
        // dockerd's other drivers: refused by name.
        other @ ("syslog" | "journald" | "gelf" | "fluentd" | "awslogs" | "splunk" | "gcplogs"
        | "logentries" | "etwlogs") => Err(bad(format!(
            "HostConfig.LogConfig.Type {other:?} is not supported by holdfast (json-file, local and none are)"
        ))),
        // A driver no engine has: dockerd's own words.
        other => Err(bad(format!(
            "logger: no log driver named '{other}' is registered"
        ))),
    }
}

/// go-units' `RAMInBytes`: a number with an optional k, m, g, t (binary) suffix.
pub(super) fn parse_size(s: &str) -> Option<u64> {
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
