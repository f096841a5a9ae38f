//! The OCI runtime spec of a container, from its image config and the
//! user's create options. Pure: everything it needs comes in as arguments.

use crate::error::AdapterError;
use crate::image::ImageConfig;
use holdfast_core::{CgroupnsMode, MountSpec, NamespaceMode};
use holdfast_core::{ContainerConfig, ContainerId, NetworkMode, PodMember, PodRole};
use oci_spec::runtime::{
    BoxBuilder, Capabilities, Capability, Linux, LinuxCapabilities, LinuxCpu, LinuxDevice,
    LinuxDeviceBuilder, LinuxDeviceCgroup, LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxMemory,
    LinuxNamespace, LinuxNamespaceBuilder, LinuxNamespaceType, LinuxPidsBuilder, LinuxResources,
    Mount, MountBuilder, PosixRlimit, PosixRlimitBuilder, PosixRlimitType, Process, Root,
    RootBuilder, Spec, UserBuilder,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub(crate) const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
pub(crate) const PROCESS_TYPE_URL: &str =
    "types.containerd.io/opencontainers/runtime-spec/1/Process";
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Docker's default capability set.
const DEFAULT_CAPABILITIES: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

const MASKED_PATHS: [&str; 11] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/sys/firmware",
    "/proc/scsi",
    "/sys/devices/virtual/powercap",
];

const READONLY_PATHS: [&str; 6] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
    "/sys/fs/cgroup",
];

/// A resolved user: numeric ids as the kernel wants them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
}

/// The gid of the group `name` in the text of a group file (`/etc/group`:
/// `name:password:gid:members`), if it is listed there.
pub fn group_id(group_file: &str, name: &str) -> Option<u32> {
    group_file.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 3 && f[0] == name)
            .then(|| f[2].parse().ok())
            .flatten()
    })
}

/// Resolves `user` (`uid`, `uid:gid`, `name`, `name:group`) against the
/// image's `/etc/passwd` and `/etc/group` (their contents, if present).
pub fn resolve_user(
    user: &str,
    passwd: Option<&str>,
    group: Option<&str>,
) -> Result<User, AdapterError> {
    if user.is_empty() {
        return Ok(User { uid: 0, gid: 0 });
    }
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    let lookup_passwd = |name: &str| -> Option<(u32, u32)> {
        passwd?.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 4 && f[0] == name)
                .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
                .flatten()
        })
    };
    let (uid, primary_gid) = match u.parse::<u32>() {
        Ok(uid) => {
            // A numeric uid takes its group from passwd when listed there.
            let gid = passwd
                .and_then(|p| {
                    p.lines().find_map(|l| {
                        let f: Vec<&str> = l.split(':').collect();
                        (f.len() >= 4 && f[2].parse() == Ok(uid))
                            .then(|| f[3].parse().ok())
                            .flatten()
                    })
                })
                .unwrap_or(0);
            (uid, gid)
        }
        Err(_) => lookup_passwd(u).ok_or_else(|| {
            AdapterError::Invalid(format!(
                "unable to find user {u}: no matching entries in passwd file"
            ))
        })?,
    };
    let gid = match g {
        None => primary_gid,
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => group.and_then(|gr| group_id(gr, g)).ok_or_else(|| {
                AdapterError::Invalid(format!(
                    "unable to find group {g}: no matching entries in group file"
                ))
            })?,
        },
    };
    Ok(User { uid, gid })
}

/// The process's argv: Docker's rules for entrypoint and cmd. An entrypoint
/// given at create time drops the image's cmd.
pub(crate) fn process_args(
    config: &ContainerConfig,
    image: &ImageConfig,
) -> Result<Vec<String>, AdapterError> {
    let entrypoint = config
        .entrypoint
        .clone()
        .or_else(|| image.entrypoint.clone())
        .unwrap_or_default();
    let cmd = match (&config.cmd, &config.entrypoint) {
        (Some(cmd), _) => cmd.clone(),
        (None, Some(_)) => Vec::new(),
        (None, None) => image.cmd.clone().unwrap_or_default(),
    };
    let args: Vec<String> = entrypoint.into_iter().chain(cmd).collect();
    if args.is_empty() {
        return Err(AdapterError::Invalid("no command specified".into()));
    }
    Ok(args)
}

/// The image's env overlaid with the user's (same key: the user's wins).
pub(crate) fn process_env(
    config: &ContainerConfig,
    image: &ImageConfig,
    hostname: &str,
) -> Vec<String> {
    let mut env: Vec<String> = Vec::new();
    let mut set = |kv: &str| {
        let key = kv.split_once('=').map_or(kv, |(k, _)| k);
        env.retain(|e| e.split_once('=').map_or(e.as_str(), |(k, _)| k) != key);
        env.push(kv.to_owned());
    };
    set(DEFAULT_PATH);
    set(&format!("HOSTNAME={hostname}"));
    if config.tty {
        // As dockerd: programs in a terminal want to know what it is.
        set("TERM=xterm");
    }
    for kv in image.env.iter().flatten() {
        set(kv);
    }
    for kv in &config.env {
        set(kv);
    }
    env
}

pub(crate) fn hostname(id: &ContainerId, config: &ContainerConfig) -> String {
    config
        .hostname
        .clone()
        .unwrap_or_else(|| id.as_str().chars().take(12).collect())
}

/// What the spec needs from the host and from the image's files, found by
/// the caller (the adapter's I/O), so that building the spec stays pure.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// `--group-add`, resolved against the image's `/etc/group`.
    pub additional_gids: Vec<u32>,
    /// `--device` mappings, and with `--privileged` every host device.
    pub devices: Vec<HostDevice>,
    /// The host's init binary, for `--init`.
    pub init_binary: Option<PathBuf>,
    /// The capabilities holdfastd itself may grant (its bounding set, bit
    /// per capability); `ALL` and `--privileged` mean these. `None`: all.
    pub bounding_capabilities: Option<u64>,
    /// With `--ipc shareable` or `container:<id>`: the host's tmpfs that is
    /// the shareable container's `/dev/shm`.
    pub shm_source: Option<PathBuf>,
    /// On a bridge network: the network namespace the network step made
    /// (a bind mount that outlives the task until the attachment is released);
    /// with `container:`, the other container's.
    pub netns_path: Option<PathBuf>,
    /// On a bridge network: the hosts file the network step writes (the
    /// container's address and hostname), bound at `/etc/hosts`.
    pub hosts_path: Option<PathBuf>,
    /// On a bridge network with `--dns`, `--dns-search` or `--dns-option`:
    /// the resolver file the network step writes, bound at `/etc/resolv.conf`.
    pub resolv_path: Option<PathBuf>,
    /// The file naming the container's hostname, bound at `/etc/hostname`
    /// (as dockerd binds one, writable unless the root is read-only).
    pub hostname_path: Option<PathBuf>,
}

/// The files the engine binds into a container's root (which of them
/// depends on its network). runc makes their mount points in the
/// container's own layer where the image has none: those are the engine's,
/// not the container's changes (dockerd makes them in an init layer below
/// the container's), so neither `docker diff` nor a commit shows them.
pub const ENGINE_BOUND_FILES: [&str; 3] = ["/etc/hostname", "/etc/hosts", "/etc/resolv.conf"];

/// Whether `path` (in the container) is one of [`ENGINE_BOUND_FILES`].
pub fn is_engine_mount_point(path: &Path) -> bool {
    ENGINE_BOUND_FILES.iter().any(|f| Path::new(f) == path)
}

/// A host device node as the container will see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostDevice {
    pub path_in_container: String,
    pub block: bool,
    pub major: i64,
    pub minor: i64,
    pub file_mode: u32,
    pub uid: u32,
    pub gid: u32,
    /// Some of `r`, `w`, `m`.
    pub permissions: String,
}

/// Where `--init` puts the init binary in the container (as dockerd).
pub(crate) const INIT_PATH: &str = "/sbin/docker-init";

/// Every capability the kernel knows, as docker names them (`ALL`), in
/// the kernel's order: the index is the capability's bit.
pub const ALL_CAPABILITIES: [&str; 41] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// `net_admin`, `CAP_NET_ADMIN` -> `CAP_NET_ADMIN`; `None` for an unknown name.
pub fn capability_name(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    ALL_CAPABILITIES.into_iter().find(|c| *c == full)
}

fn is_all(name: &str) -> bool {
    name.eq_ignore_ascii_case("ALL") || name.eq_ignore_ascii_case("CAP_ALL")
}

/// The annotation by which containerd's runc shim groups tasks: a task
/// whose spec names a group joins the shim already serving it.
const SHIM_GROUP: &str = "io.containerd.runc.v2.group";

/// The container's labels, the annotations its client gave, and for a
/// pod's container the group of its
/// sandbox: a pod's containers run under their sandbox's one shim, as
/// containerd's CRI plugin runs them (a shim started per container cost
/// a second shim per pod, its memory, and its start in every
/// CreateContainer + StartContainer; see bench/vs-containerd-cri.md). A
/// shim killed is then its whole pod's exit, which containerd reports
/// task by task.
fn annotations(config: &ContainerConfig) -> HashMap<String, String> {
    let mut annotations: HashMap<String, String> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(PodMember {
        role: PodRole::Container { sandbox, .. },
        ..
    }) = &config.pod
    {
        annotations.insert(SHIM_GROUP.to_owned(), sandbox.clone());
    }
    // The client's own annotations (`HostConfig.Annotations`) last: they
    // are what it asked the runtime to see.
    annotations.extend(
        config
            .spec_extras
            .annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone())),
    );
    annotations
}

/// The full runtime spec of container `id` in containerd namespace
/// `namespace`, from what the user asked for, the image, the resolved user
/// and what the host provides. Pure.
pub fn build_spec(
    id: &ContainerId,
    namespace: &str,
    config: &ContainerConfig,
    image: &ImageConfig,
    user: &User,
    host: &HostFacts,
) -> Result<Spec, AdapterError> {
    let hostname = hostname(id, config);
    let mut spec = Spec::default();
    spec.set_version("1.0.2-dev".to_owned())
        .set_process(Some(process(config, image, user, host, &hostname)?))
        .set_root(Some(root(config)?))
        // Only a UTS namespace of its own can be given a name.
        .set_hostname(matches!(config.namespaces.uts, NamespaceMode::Private).then_some(hostname))
        .set_mounts(Some(mounts(config, host)?))
        .set_annotations(Some(annotations(config)))
        .set_linux(Some(linux(id, namespace, config, host)?));
    Ok(spec)
}

fn invalid(e: oci_spec::OciSpecError) -> AdapterError {
    AdapterError::Invalid(format!("OCI runtime spec: {e}"))
}

fn process(
    config: &ContainerConfig,
    image: &ImageConfig,
    user: &User,
    host: &HostFacts,
    hostname: &str,
) -> Result<Process, AdapterError> {
    let cwd = config
        .working_dir
        .clone()
        .or_else(|| image.working_dir.clone())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "/".to_owned());
    if !cwd.starts_with('/') {
        return Err(AdapterError::Invalid(format!(
            "the working directory {cwd:?} is not absolute"
        )));
    }
    let mut args = process_args(config, image)?;
    if config.init {
        args.splice(0..0, [INIT_PATH.to_owned(), "--".to_owned()]);
    }
    let mut oci_user = UserBuilder::default()
        .uid(user.uid)
        .gid(user.gid)
        .build()
        .map_err(invalid)?;
    if !host.additional_gids.is_empty() {
        oci_user.set_additional_gids(Some(host.additional_gids.clone()));
    }
    let mut process = Process::default();
    process
        .set_terminal(Some(config.tty))
        .set_user(oci_user)
        .set_args(Some(args))
        .set_env(Some(process_env(config, image, hostname)))
        .set_cwd(cwd.into())
        .set_capabilities(Some(capabilities(config, host)?))
        .set_rlimits(Some(rlimits(config)?))
        .set_no_new_privileges(Some(config.security.no_new_privileges))
        .set_oom_score_adj(config.resources.oom_score_adj);
    if let (true, Some((rows, columns))) = (config.tty, config.spec_extras.console_size) {
        let size = BoxBuilder::default()
            .height(u64::from(rows))
            .width(u64::from(columns))
            .build()
            .map_err(invalid)?;
        process.set_console_size(Some(size));
    }
    Ok(process)
}

/// dockerd's rules: privileged has all; `--cap-add ALL` all but the
/// dropped; `--cap-drop ALL` only the added; otherwise the defaults less
/// the dropped plus the added. In the bounding, effective and permitted
/// sets; none inherited, none ambient.
fn capabilities(
    config: &ContainerConfig,
    host: &HostFacts,
) -> Result<LinuxCapabilities, AdapterError> {
    let set = capability_names(config, host)?
        .into_iter()
        .map(|n| {
            serde_json::from_value::<Capability>(serde_json::Value::from(n))
                .map_err(|e| AdapterError::Invalid(format!("capability {n}: {e}")))
        })
        .collect::<Result<Capabilities, _>>()?;
    let mut caps = LinuxCapabilities::default();
    caps.set_bounding(Some(set.clone()))
        .set_effective(Some(set.clone()))
        .set_permitted(Some(set))
        .set_inheritable(None)
        .set_ambient(None);
    Ok(caps)
}

/// The capabilities a container holds, by full name (`CAP_...`).
fn capability_names(
    config: &ContainerConfig,
    host: &HostFacts,
) -> Result<Vec<&'static str>, AdapterError> {
    let p = &config.privileges;
    let named = |names: &[String]| -> Result<Vec<&'static str>, AdapterError> {
        names
            .iter()
            .filter(|n| !is_all(n))
            .map(|n| {
                capability_name(n)
                    .ok_or_else(|| AdapterError::Invalid(format!("unknown capability: {n:?}")))
            })
            .collect()
    };
    let add = named(&p.cap_add)?;
    let drop = named(&p.cap_drop)?;
    // A capability outside holdfastd's own bounding set cannot be granted.
    let all = ALL_CAPABILITIES
        .into_iter()
        .enumerate()
        .filter(|(bit, _)| {
            host.bounding_capabilities
                .is_none_or(|mask| mask & (1 << bit) != 0)
        })
        .map(|(_, name)| name);
    Ok(if p.privileged {
        all.collect()
    } else if p.cap_add.iter().any(|n| is_all(n)) {
        all.filter(|c| !drop.contains(c)).collect()
    } else if p.cap_drop.iter().any(|n| is_all(n)) {
        add
    } else {
        DEFAULT_CAPABILITIES
            .into_iter()
            .filter(|c| !drop.contains(c))
            .chain(add)
            .collect()
    })
}

/// `RLIMIT_NOFILE` 1024 unless `--ulimit` says otherwise; -1 is unlimited.
fn rlimits(config: &ContainerConfig) -> Result<Vec<PosixRlimit>, AdapterError> {
    let rlimit = |kind: PosixRlimitType, soft: u64, hard: u64| {
        PosixRlimitBuilder::default()
            .typ(kind)
            .soft(soft)
            .hard(hard)
            .build()
            .map_err(invalid)
    };
    let mut out = vec![rlimit(PosixRlimitType::RlimitNofile, 1024, 1024)?];
    let limit = |v: i64| u64::try_from(v).unwrap_or(u64::MAX);
    for u in &config.resources.ulimits {
        let kind: PosixRlimitType = format!("RLIMIT_{}", u.name.to_ascii_uppercase())
            .parse()
            .map_err(|_| AdapterError::Invalid(format!("unknown ulimit {:?}", u.name)))?;
        out.retain(|r| r.typ() != kind);
        out.push(rlimit(kind, limit(u.soft), limit(u.hard))?);
    }
    Ok(out)
}

fn root(config: &ContainerConfig) -> Result<Root, AdapterError> {
    RootBuilder::default()
        .path("rootfs")
        .readonly(config.read_only_rootfs)
        .build()
        .map_err(invalid)
}

fn mount(
    destination: &str,
    kind: &str,
    source: &str,
    options: &[&str],
) -> Result<Mount, AdapterError> {
    MountBuilder::default()
        .destination(destination)
        .typ(kind)
        .source(source)
        .options(options.iter().map(|o| (*o).to_owned()).collect::<Vec<_>>())
        .build()
        .map_err(invalid)
}

/// The file systems every container gets, then the user's mounts; a user
/// mount on the same path replaces the default one (as with dockerd).
fn mounts(config: &ContainerConfig, host: &HostFacts) -> Result<Vec<Mount>, AdapterError> {
    let privileged = config.privileges.privileged;
    let sys_mode = if privileged { "rw" } else { "ro" };
    let mut mounts = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        )?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        )?,
        shm_mount(config, host)?,
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
        // A fresh sysfs in both network modes, read-only unless privileged,
        // as dockerd does. (A bind of the host's /sys would leave its
        // submounts, such as /sys/fs/bpf, writable: `ro` does not recurse.)
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", sys_mode],
        )?,
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", sys_mode],
        )?,
    ];
    // The host's resolver for both; its hosts file only where the host's
    // names are the container's own.
    let own_resolver =
        !(config.dns.is_empty() && config.dns_search.is_empty() && config.dns_options.is_empty());
    let host_files: &[&str] = match config.network {
        NetworkMode::Host => &["/etc/hosts", "/etc/resolv.conf"],
        NetworkMode::Bridge if own_resolver && host.resolv_path.is_some() => &[],
        NetworkMode::Bridge => &["/etc/resolv.conf"],
        // The other container's files, as it has them.
        NetworkMode::Container if host.hosts_path.is_some() && host.resolv_path.is_none() => {
            &["/etc/resolv.conf"]
        }
        NetworkMode::Container | NetworkMode::None => &[],
    };
    for &file in host_files {
        mounts.push(mount(file, "bind", file, &["rbind", "rprivate", "ro"])?);
    }
    let attached = matches!(config.network, NetworkMode::Bridge | NetworkMode::Container);
    if let (true, Some(hosts)) = (attached, &host.hosts_path) {
        let source = hosts.to_string_lossy();
        mounts.push(mount(
            "/etc/hosts",
            "bind",
            &source,
            &["rbind", "rprivate"],
        )?);
    }
    if let Some(file) = &host.hostname_path {
        let source = file.to_string_lossy();
        let mut options = vec!["rbind", "rprivate"];
        if config.read_only_rootfs {
            options.push("ro");
        }
        mounts.push(mount("/etc/hostname", "bind", &source, &options)?);
    }
    let resolver = match config.network {
        NetworkMode::Bridge => own_resolver,
        NetworkMode::Container => true,
        NetworkMode::Host | NetworkMode::None => false,
    };
    if let (true, Some(resolv)) = (resolver, &host.resolv_path) {
        let source = resolv.to_string_lossy();
        mounts.push(mount(
            "/etc/resolv.conf",
            "bind",
            &source,
            &["rbind", "rprivate"],
        )?);
    }
    let mut user_mounts = Vec::new();
    for m in &config.mounts {
        if !m.source.starts_with('/') || !m.destination.starts_with('/') {
            return Err(AdapterError::Invalid(format!(
                "bind mount {}:{}: both paths must be absolute",
                m.source, m.destination
            )));
        }
        let mode = if m.read_only { "ro" } else { "rw" };
        user_mounts.push(mount(
            &m.destination,
            "bind",
            &m.source,
            &["rbind", "rprivate", mode],
        )?);
    }
    for (path, options) in &config.tmpfs {
        let mut all = vec!["noexec", "nosuid", "nodev"];
        all.extend(options.split(',').filter(|o| !o.is_empty()));
        user_mounts.push(mount(path, "tmpfs", "tmpfs", &all)?);
    }
    for m in &config.mount_specs {
        user_mounts.push(mount_spec(m)?);
    }
    if config.init {
        let Some(init) = &host.init_binary else {
            return Err(AdapterError::Invalid(
                "--init: no init binary is installed on the host (install tini)".into(),
            ));
        };
        let source = init.to_string_lossy();
        user_mounts.push(mount(
            INIT_PATH,
            "bind",
            &source,
            &["rbind", "rprivate", "ro"],
        )?);
    }
    mounts.retain(|m| {
        !user_mounts
            .iter()
            .any(|u| u.destination() == m.destination())
    });
    mounts.extend(user_mounts);
    Ok(mounts)
}

/// `/dev/shm`: the host's with `--ipc host`; with `--ipc shareable` a
/// tmpfs on the host that `--ipc container:<id>` binds too; else a tmpfs of
/// `--shm-size` (64 MiB by default) of the container's own.
fn shm_mount(config: &ContainerConfig, host: &HostFacts) -> Result<Mount, AdapterError> {
    let bind = |source: &str| mount("/dev/shm", "bind", source, &["rbind", "rprivate", "rw"]);
    match (&config.namespaces.ipc, &host.shm_source) {
        (NamespaceMode::Host, _) => bind("/dev/shm"),
        (NamespaceMode::Container { .. } | NamespaceMode::Shareable, Some(source)) => {
            bind(&source.to_string_lossy())
        }
        (NamespaceMode::Container { id, .. }, None) => Err(AdapterError::Invalid(format!(
            "the /dev/shm of container {id} is not known"
        ))),
        (NamespaceMode::Private, _) | (NamespaceMode::Shareable, None) => {
            let size = match config.resources.shm_size_bytes {
                Some(bytes) => format!("size={bytes}"),
                None => "size=65536k".to_owned(),
            };
            mount(
                "/dev/shm",
                "tmpfs",
                "shm",
                &["nosuid", "noexec", "nodev", "mode=1777", &size],
            )
        }
    }
}

fn mount_spec(m: &MountSpec) -> Result<Mount, AdapterError> {
    match m {
        MountSpec::Bind {
            source,
            target,
            read_only,
            propagation,
        } => {
            let propagation = propagation.as_deref().unwrap_or("rprivate");
            let mode = if *read_only { "ro" } else { "rw" };
            mount(target, "bind", source, &["rbind", propagation, mode])
        }
        MountSpec::Tmpfs {
            target,
            size_bytes,
            mode,
        } => {
            let mut options = vec!["noexec".to_owned(), "nosuid".to_owned(), "nodev".to_owned()];
            if let Some(size) = size_bytes {
                options.push(format!("size={size}"));
            }
            if let Some(mode) = mode {
                options.push(format!("mode={mode:o}"));
            }
            let options: Vec<&str> = options.iter().map(String::as_str).collect();
            mount(target, "tmpfs", "tmpfs", &options)
        }
    }
}

fn namespace(
    kind: LinuxNamespaceType,
    path: Option<String>,
) -> Result<LinuxNamespace, AdapterError> {
    let mut ns = LinuxNamespaceBuilder::default().typ(kind);
    if let Some(path) = path {
        ns = ns.path(path);
    }
    ns.build().map_err(invalid)
}

/// A namespace of its own, the host's (none in the spec) or another
/// container's (its init's `/proc/<pid>/ns/<kind>`).
fn shared_namespace(
    kind: LinuxNamespaceType,
    file: &str,
    mode: &NamespaceMode,
) -> Result<Option<LinuxNamespace>, AdapterError> {
    match mode {
        NamespaceMode::Private | NamespaceMode::Shareable => namespace(kind, None).map(Some),
        NamespaceMode::Host => Ok(None),
        NamespaceMode::Container { id, pid } => {
            if *pid == 0 {
                return Err(AdapterError::Invalid(format!(
                    "the {file} namespace of container {id} was not resolved to a process"
                )));
            }
            namespace(kind, Some(format!("/proc/{pid}/ns/{file}"))).map(Some)
        }
    }
}

fn namespaces(
    config: &ContainerConfig,
    host: &HostFacts,
) -> Result<Vec<LinuxNamespace>, AdapterError> {
    let ns = &config.namespaces;
    let mut out: Vec<LinuxNamespace> = [
        shared_namespace(LinuxNamespaceType::Pid, "pid", &ns.pid)?,
        shared_namespace(LinuxNamespaceType::Ipc, "ipc", &ns.ipc)?,
        shared_namespace(LinuxNamespaceType::Uts, "uts", &ns.uts)?,
    ]
    .into_iter()
    .flatten()
    .collect();
    out.push(namespace(LinuxNamespaceType::Mount, None)?);
    match config.network {
        NetworkMode::None => out.push(namespace(LinuxNamespaceType::Network, None)?),
        NetworkMode::Host => {}
        NetworkMode::Bridge | NetworkMode::Container => {
            let Some(path) = &host.netns_path else {
                return Err(AdapterError::Invalid(
                    "a bridge network needs the network namespace of its attachment".into(),
                ));
            };
            let path = path.to_string_lossy().into_owned();
            out.push(namespace(LinuxNamespaceType::Network, Some(path))?);
        }
    }
    if ns.cgroup == CgroupnsMode::Private {
        out.push(namespace(LinuxNamespaceType::Cgroup, None)?);
    }
    Ok(out)
}

fn device_rule(
    allow: bool,
    kind: Option<LinuxDeviceType>,
    major: Option<i64>,
    minor: Option<i64>,
    access: &str,
) -> Result<LinuxDeviceCgroup, AdapterError> {
    let mut rule = LinuxDeviceCgroupBuilder::default()
        .allow(allow)
        .access(access);
    if let Some(kind) = kind {
        rule = rule.typ(kind);
    }
    if let Some(major) = major {
        rule = rule.major(major);
    }
    if let Some(minor) = minor {
        rule = rule.minor(minor);
    }
    rule.build().map_err(invalid)
}

fn device_kind(device: &HostDevice) -> LinuxDeviceType {
    if device.block {
        LinuxDeviceType::B
    } else {
        LinuxDeviceType::C
    }
}

/// The devices cgroup: privileged may use all; otherwise deny all, then the
/// character devices every container has (null, zero, full, random,
/// urandom, tty, console, ptmx, pts), then the `--device` ones and the
/// `--device-cgroup-rule`s.
fn device_rules(
    config: &ContainerConfig,
    host: &HostFacts,
) -> Result<Vec<LinuxDeviceCgroup>, AdapterError> {
    if config.privileges.privileged {
        return Ok(vec![device_rule(true, None, None, None, "rwm")?]);
    }
    let c = Some(LinuxDeviceType::C);
    let mut rules = vec![device_rule(false, None, None, None, "rwm")?];
    for (major, minor) in [
        (1, 3),
        (1, 5),
        (1, 7),
        (1, 8),
        (1, 9),
        (5, 0),
        (5, 1),
        (5, 2),
    ] {
        rules.push(device_rule(true, c, Some(major), Some(minor), "rwm")?);
    }
    rules.push(device_rule(true, c, Some(136), None, "rwm")?);
    for d in &host.devices {
        rules.push(device_rule(
            true,
            Some(device_kind(d)),
            Some(d.major),
            Some(d.minor),
            &d.permissions,
        )?);
    }
    for r in &config.privileges.device_cgroup_rules {
        let kind = match r.kind {
            'b' => LinuxDeviceType::B,
            'c' => LinuxDeviceType::C,
            _ => LinuxDeviceType::A,
        };
        rules.push(device_rule(true, Some(kind), r.major, r.minor, &r.access)?);
    }
    Ok(rules)
}

fn to_i64(what: &str, v: u64) -> Result<i64, AdapterError> {
    i64::try_from(v).map_err(|_| AdapterError::Invalid(format!("{what} too large")))
}

fn memory(config: &ContainerConfig) -> Result<Option<LinuxMemory>, AdapterError> {
    let r = &config.resources;
    if config.memory_limit_bytes.is_none()
        && r.memory_reservation_bytes.is_none()
        && r.memory_swap_bytes.is_none()
        && r.memory_swappiness.is_none()
    {
        return Ok(None);
    }
    let mut memory = LinuxMemory::default();
    if let Some(limit) = config.memory_limit_bytes {
        memory.set_limit(Some(to_i64("memory limit", limit)?));
    }
    if let Some(reservation) = r.memory_reservation_bytes {
        memory.set_reservation(Some(to_i64("memory reservation", reservation)?));
    }
    // -1 (unlimited) is what a new cgroup has anyway; not writing it keeps
    // a host without swap accounting able to run the container.
    memory.set_swap(r.memory_swap_bytes.filter(|&s| s != -1));
    memory.set_swappiness(r.memory_swappiness);
    Ok(Some(memory))
}

/// The CFS period `--cpus` is spread over, as dockerd (100 ms).
const NANO_CPUS_PERIOD_US: u64 = 100_000;

fn cpu(config: &ContainerConfig) -> Result<Option<LinuxCpu>, AdapterError> {
    let r = &config.resources;
    let mut cpu = LinuxCpu::default();
    cpu.set_shares(r.cpu_shares)
        .set_quota(r.cpu_quota_us)
        .set_period(r.cpu_period_us)
        .set_cpus(r.cpuset_cpus.clone())
        .set_mems(r.cpuset_mems.clone())
        .set_realtime_period(r.cpu_realtime_period_us)
        .set_realtime_runtime(r.cpu_realtime_runtime_us);
    if let Some(nano) = r.nano_cpus {
        let quota = u128::from(nano) * u128::from(NANO_CPUS_PERIOD_US) / 1_000_000_000;
        let quota =
            i64::try_from(quota).map_err(|_| AdapterError::Invalid("--cpus too large".into()))?;
        cpu.set_period(Some(NANO_CPUS_PERIOD_US))
            .set_quota(Some(quota.max(1000)));
    }
    Ok((cpu != LinuxCpu::default()).then_some(cpu))
}

/// The type url containerd's `Tasks.Update` reads its resources with.
pub(crate) const RESOURCES_TYPE_URL: &str =
    "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources";

/// What `docker update` may change of a task's resources (memory and CPU),
/// from the updated config; other resources are left as they are.
pub(crate) fn updatable_resources(
    config: &ContainerConfig,
) -> Result<LinuxResources, AdapterError> {
    let mut resources = LinuxResources::default();
    resources.set_memory(memory(config)?).set_cpu(cpu(config)?);
    Ok(resources)
}

/// `spec` with its memory and CPU resources replaced by `update`'s.
pub(crate) fn patch_resources(mut spec: Spec, update: &LinuxResources) -> Spec {
    let mut linux = spec.linux().clone().unwrap_or_default();
    let mut resources = linux.resources().clone().unwrap_or_default();
    resources
        .set_memory(*update.memory())
        .set_cpu(update.cpu().clone());
    linux.set_resources(Some(resources));
    spec.set_linux(Some(linux));
    spec
}

fn resources(config: &ContainerConfig, host: &HostFacts) -> Result<LinuxResources, AdapterError> {
    let mut resources = LinuxResources::default();
    resources
        .set_devices(Some(device_rules(config, host)?))
        .set_memory(memory(config)?)
        .set_cpu(cpu(config)?);
    if !config.resources.unified.is_empty() {
        resources.set_unified(Some(
            config
                .resources
                .unified
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ));
    }
    if let Some(limit) = config.resources.pids_limit {
        resources.set_pids(Some(
            LinuxPidsBuilder::default()
                .limit(limit)
                .build()
                .map_err(invalid)?,
        ));
    }
    Ok(resources)
}

fn linux_devices(host: &HostFacts) -> Result<Vec<LinuxDevice>, AdapterError> {
    host.devices
        .iter()
        .map(|d| {
            LinuxDeviceBuilder::default()
                .path(d.path_in_container.clone())
                .typ(device_kind(d))
                .major(d.major)
                .minor(d.minor)
                .file_mode(d.file_mode)
                .uid(d.uid)
                .gid(d.gid)
                .build()
                .map_err(invalid)
        })
        .collect()
}

/// `/{namespace}/{id}`, or `{cgroup parent}/{id}` below the cgroup root.
pub(crate) fn cgroups_path(id: &ContainerId, namespace: &str, config: &ContainerConfig) -> String {
    match &config.cgroup_parent {
        Some(parent) => format!("/{}/{id}", parent.trim_matches('/')),
        None => format!("/{namespace}/{id}"),
    }
}

/// The sysctls asked for, and the NIS domain name as the one sysctl that
/// sets it (`kernel.domainname`, as dockerd sets it: runc before 1.2
/// ignores the spec's `domainname`), only in a UTS namespace of its own;
/// a `kernel.domainname` asked for outright wins.
fn sysctls(config: &ContainerConfig) -> HashMap<String, String> {
    let mut sysctls: HashMap<String, String> = HashMap::new();
    if let Some(domainname) = &config.spec_extras.domainname
        && matches!(config.namespaces.uts, NamespaceMode::Private)
    {
        sysctls.insert("kernel.domainname".to_owned(), domainname.clone());
    }
    sysctls.extend(config.sysctls.iter().map(|(k, v)| (k.clone(), v.clone())));
    sysctls
}

fn linux(
    id: &ContainerId,
    namespace: &str,
    config: &ContainerConfig,
    host: &HostFacts,
) -> Result<Linux, AdapterError> {
    let privileged = config.privileges.privileged;
    let mut linux = Linux::default();
    linux
        .set_resources(Some(resources(config, host)?))
        .set_cgroups_path(Some(cgroups_path(id, namespace, config).into()))
        .set_namespaces(Some(namespaces(config, host)?))
        .set_devices(Some(linux_devices(host)?).filter(|d| !d.is_empty()))
        .set_sysctl(Some(sysctls(config)).filter(|s| !s.is_empty()));
    // Privileged containers see everything, unfiltered, as with dockerd.
    if privileged {
        linux
            .set_masked_paths(None)
            .set_readonly_paths(None)
            .set_seccomp(None);
    } else {
        let security = &config.security;
        let seccomp = if security.seccomp_unconfined {
            None
        } else {
            Some(crate::seccomp::profile(&capability_names(config, host)?)?)
        };
        linux
            .set_masked_paths(Some(
                security
                    .masked_paths
                    .clone()
                    .unwrap_or_else(|| MASKED_PATHS.map(str::to_owned).to_vec()),
            ))
            .set_readonly_paths(Some(
                security
                    .readonly_paths
                    .clone()
                    .unwrap_or_else(|| READONLY_PATHS.map(str::to_owned).to_vec()),
            ))
            .set_seccomp(seccomp);
    }
    Ok(linux)
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_core::BindMount;
    use serde_json::{Value, json};

    /// The spec as runc reads it.
    fn json_spec(config: &ContainerConfig, user: &User) -> Result<Value, AdapterError> {
        let spec = build_spec(&id(), "ns", config, &busybox(), user, &HostFacts::default())?;
        serde_json::to_value(spec).map_err(|e| AdapterError::Invalid(e.to_string()))
    }

    fn id() -> ContainerId {
        "abcdef0123456789".parse().expect("valid")
    }

    fn busybox() -> ImageConfig {
        ImageConfig {
            env: Some(vec![DEFAULT_PATH.into(), "A=image".into()]),
            cmd: Some(vec!["sh".into()]),
            ..Default::default()
        }
    }

    #[test]
    fn entrypoint_and_cmd_follow_docker() {
        let image = ImageConfig {
            entrypoint: Some(vec!["/ep".into()]),
            cmd: Some(vec!["x".into()]),
            ..Default::default()
        };
        let mut c = ContainerConfig::default();
        assert_eq!(
            process_args(&c, &image).ok(),
            Some(vec!["/ep".to_owned(), "x".to_owned()])
        );
        c.cmd = Some(vec!["y".into()]);
        assert_eq!(
            process_args(&c, &image).ok(),
            Some(vec!["/ep".to_owned(), "y".to_owned()])
        );
        c.cmd = None;
        c.entrypoint = Some(vec!["/other".into()]);
        assert_eq!(
            process_args(&c, &image).ok(),
            Some(vec!["/other".to_owned()])
        );
        let empty = ContainerConfig {
            entrypoint: Some(vec![]),
            ..Default::default()
        };
        assert!(process_args(&empty, &ImageConfig::default()).is_err());
    }

    #[test]
    fn a_pods_containers_share_their_sandboxs_shim() {
        let member = |role| PodMember {
            role,
            pod_name: "p".into(),
            pod_uid: "u".into(),
            pod_namespace: "n".into(),
            attempt: 0,
            annotations: Default::default(),
            log_path: None,
            image_ref: None,
        };
        let user = User { uid: 0, gid: 0 };
        let group = |pod: Option<PodMember>| {
            let c = ContainerConfig {
                pod,
                ..Default::default()
            };
            json_spec(&c, &user).expect("spec")["annotations"][SHIM_GROUP].clone()
        };
        let container = PodRole::Container {
            sandbox: "sandbox0123".into(),
            name: "c".into(),
        };
        assert_eq!(group(Some(member(container))), json!("sandbox0123"));
        // the sandbox's shim is its own (named by its id, the default);
        // a Docker container's too
        assert_eq!(group(Some(member(PodRole::Sandbox))), Value::Null);
        assert_eq!(group(None), Value::Null);
    }

    #[test]
    fn env_is_overlaid() {
        let c = ContainerConfig {
            env: vec!["A=user".into(), "B=2".into()],
            ..Default::default()
        };
        let env = process_env(&c, &busybox(), "h");
        assert!(env.contains(&"A=user".to_owned()) && !env.contains(&"A=image".to_owned()));
        assert!(env.contains(&"B=2".to_owned()) && env.contains(&"HOSTNAME=h".to_owned()));
        assert_eq!(env.iter().filter(|e| e.starts_with("PATH=")).count(), 1);
    }

    #[test]
    fn users_resolve_from_passwd() {
        let passwd = "root:x:0:0::/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n";
        let group = "root:x:0:\nstaff:x:50:\n";
        let r = |u| resolve_user(u, Some(passwd), Some(group)).ok();
        assert_eq!(r(""), Some(User { uid: 0, gid: 0 }));
        assert_eq!(
            r("app"),
            Some(User {
                uid: 1000,
                gid: 1001
            })
        );
        assert_eq!(
            r("1000"),
            Some(User {
                uid: 1000,
                gid: 1001
            })
        );
        assert_eq!(r("1234:5"), Some(User { uid: 1234, gid: 5 }));
        assert_eq!(r("app:staff"), Some(User { uid: 1000, gid: 50 }));
        assert_eq!(r("nobody"), None);
        assert_eq!(r("app:nogroup"), None);
    }

    #[test]
    fn spec_carries_what_the_client_gave_as_it_is() {
        let mut c = ContainerConfig {
            tty: true,
            ..Default::default()
        };
        c.labels.insert("k".into(), "label".into());
        c.spec_extras.domainname = Some("example.org".into());
        c.spec_extras.console_size = Some((30, 120));
        c.spec_extras
            .annotations
            .insert("k".into(), "annotation".into());
        let user = User { uid: 0, gid: 0 };
        let spec = json_spec(&c, &user).expect("spec");
        assert_eq!(spec["linux"]["sysctl"]["kernel.domainname"], "example.org");
        assert_eq!(
            spec["process"]["consoleSize"],
            json!({"height": 30, "width": 120})
        );
        assert_eq!(spec["annotations"]["k"], "annotation");
        // Without a terminal there is no console to size; sharing a UTS
        // namespace, no domain name of its own.
        c.tty = false;
        c.namespaces.uts = NamespaceMode::Host;
        let spec = json_spec(&c, &user).expect("spec");
        assert_eq!(spec["process"]["consoleSize"], Value::Null);
        assert_eq!(spec["linux"]["sysctl"], Value::Null);
    }

    #[test]
    fn spec_carries_the_create_options() {
        let mut c = ContainerConfig {
            cmd: Some(vec!["sleep".into(), "1".into()]),
            working_dir: Some("/tmp".into()),
            hostname: Some("web".into()),
            read_only_rootfs: true,
            memory_limit_bytes: Some(64 << 20),
            mounts: vec![BindMount {
                volume: None,
                source: "/src".into(),
                destination: "/dst".into(),
                read_only: true,
                anonymous: false,
            }],
            ..Default::default()
        };
        c.labels.insert("k".into(), "v".into());
        let user = User { uid: 1, gid: 2 };
        let spec = json_spec(&c, &user).expect("spec");
        assert_eq!(spec["process"]["args"], json!(["sleep", "1"]));
        assert_eq!(spec["process"]["cwd"], "/tmp");
        assert_eq!(spec["process"]["user"], json!({"uid": 1, "gid": 2}));
        assert_eq!(spec["hostname"], "web");
        assert_eq!(spec["root"]["readonly"], true);
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 64 << 20);
        assert_eq!(spec["linux"]["cgroupsPath"], "/ns/abcdef0123456789");
        assert_eq!(spec["annotations"]["k"], "v");
        let binds: Vec<&Value> = spec["mounts"]
            .as_array()
            .expect("mounts")
            .iter()
            .filter(|m| m["destination"] == "/dst")
            .collect();
        assert_eq!(binds.len(), 1);
        assert_eq!(binds[0]["options"], json!(["rbind", "rprivate", "ro"]));
        let has_netns = |s: &Value| {
            s["linux"]["namespaces"]
                .as_array()
                .is_some_and(|n| n.iter().any(|n| n["type"] == "network"))
        };
        assert!(has_netns(&spec));
        c.network = NetworkMode::Host;
        let host = json_spec(&c, &user).expect("spec");
        assert!(!has_netns(&host));
        assert_eq!(
            json_spec(&ContainerConfig::default(), &user).expect("spec")["hostname"],
            "abcdef012345"
        );
    }

    #[test]
    fn bad_options_are_invalid() {
        let user = User { uid: 0, gid: 0 };
        let rel = ContainerConfig {
            working_dir: Some("rel".into()),
            ..Default::default()
        };
        assert!(json_spec(&rel, &user).is_err());
    }

    #[test]
    fn a_tty_container_gets_a_terminal_and_term() {
        let user = User { uid: 0, gid: 0 };
        let tty = ContainerConfig {
            tty: true,
            ..Default::default()
        };
        let spec = json_spec(&tty, &user).expect("spec");
        assert_eq!(spec["process"]["terminal"], json!(true));
        let env = spec["process"]["env"].as_array().expect("env");
        assert!(env.contains(&json!("TERM=xterm")), "{env:?}");
        let plain = json_spec(&ContainerConfig::default(), &user).expect("spec");
        assert_eq!(plain["process"]["terminal"], json!(false));
    }

    fn effective(config: &ContainerConfig, host: &HostFacts) -> Vec<String> {
        let caps = capabilities(config, host).expect("caps");
        let mut names: Vec<String> = caps
            .effective()
            .iter()
            .flatten()
            .map(|c| {
                serde_json::to_value(c)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn capabilities_follow_dockerd() {
        let with = |add: &[&str], drop: &[&str], privileged: bool| ContainerConfig {
            privileges: holdfast_core::Privileges {
                privileged,
                cap_add: add.iter().map(|s| (*s).to_owned()).collect(),
                cap_drop: drop.iter().map(|s| (*s).to_owned()).collect(),
                ..Default::default()
            },
            ..Default::default()
        };
        let all = HostFacts::default();
        let defaults = effective(&ContainerConfig::default(), &all);
        assert_eq!(defaults.len(), 14);
        assert_eq!(
            effective(&with(&["ALL"], &[], false), &all).len(),
            ALL_CAPABILITIES.len()
        );
        assert_eq!(
            effective(&with(&["ALL"], &["CAP_CHOWN"], false), &all).len(),
            ALL_CAPABILITIES.len() - 1
        );
        assert_eq!(
            effective(&with(&["net_admin"], &["ALL"], false), &all),
            vec!["CAP_NET_ADMIN".to_owned()]
        );
        let tweaked = effective(&with(&["SYS_ADMIN"], &["CAP_MKNOD"], false), &all);
        assert!(tweaked.contains(&"CAP_SYS_ADMIN".to_owned()));
        assert!(!tweaked.contains(&"CAP_MKNOD".to_owned()));
        assert_eq!(tweaked.len(), 14);
        // Privileged and ALL get only what holdfastd itself may grant.
        let no_sys_resource = HostFacts {
            bounding_capabilities: Some(!(1u64 << 24)),
            ..Default::default()
        };
        let privileged = effective(&with(&[], &[], true), &no_sys_resource);
        assert_eq!(privileged.len(), ALL_CAPABILITIES.len() - 1);
        assert!(!privileged.contains(&"CAP_SYS_RESOURCE".to_owned()));
        assert!(capabilities(&with(&["FLY"], &[], false), &all).is_err());
    }

    #[test]
    fn ulimits_replace_the_default_and_minus_one_is_unlimited() {
        let c = ContainerConfig {
            resources: holdfast_core::Resources {
                ulimits: vec![
                    holdfast_core::Ulimit {
                        name: "nofile".into(),
                        soft: 10,
                        hard: 20,
                    },
                    holdfast_core::Ulimit {
                        name: "core".into(),
                        soft: -1,
                        hard: -1,
                    },
                ],
                ..Default::default()
            },
            ..Default::default()
        };
        let limits = rlimits(&c).expect("rlimits");
        assert_eq!(limits.len(), 2);
        let of = |kind| {
            limits
                .iter()
                .find(|r| r.typ() == kind)
                .map(|r| (r.soft(), r.hard()))
        };
        assert_eq!(of(PosixRlimitType::RlimitNofile), Some((10, 20)));
        assert_eq!(of(PosixRlimitType::RlimitCore), Some((u64::MAX, u64::MAX)));
    }
}
