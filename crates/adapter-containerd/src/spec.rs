//! The OCI runtime spec of a container, from its image config and the
//! user's create options. Pure: everything it needs comes in as arguments.

use crate::error::AdapterError;
use crate::image::ImageConfig;
use holdfast_core::{ContainerConfig, ContainerId, NetworkMode};
use oci_spec::runtime::{
    Arch, Capabilities, Capability, Linux, LinuxCapabilities, LinuxDeviceCgroup,
    LinuxDeviceCgroupBuilder, LinuxDeviceType, LinuxMemoryBuilder, LinuxNamespace,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxResources, LinuxSeccomp, LinuxSeccompAction,
    LinuxSeccompBuilder, LinuxSyscallBuilder, Mount, MountBuilder, PosixRlimitBuilder,
    PosixRlimitType, Process, Root, RootBuilder, Spec, UserBuilder,
};

pub(crate) const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
pub(crate) const PROCESS_TYPE_URL: &str =
    "types.containerd.io/opencontainers/runtime-spec/1/Process";
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Docker's default capability set.
const DEFAULT_CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
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
pub(crate) struct User {
    pub uid: u32,
    pub gid: u32,
}

/// Resolves `user` (`uid`, `uid:gid`, `name`, `name:group`) against the
/// image's `/etc/passwd` and `/etc/group` (their contents, if present).
pub(crate) fn resolve_user(
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
            Err(_) => group
                .and_then(|gr| {
                    gr.lines().find_map(|l| {
                        let f: Vec<&str> = l.split(':').collect();
                        (f.len() >= 3 && f[0] == g)
                            .then(|| f[2].parse().ok())
                            .flatten()
                    })
                })
                .ok_or_else(|| {
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

/// The full runtime spec.
pub(crate) fn build_spec(
    id: &ContainerId,
    namespace: &str,
    config: &ContainerConfig,
    image: &ImageConfig,
    user: &User,
) -> Result<Spec, AdapterError> {
    let hostname = hostname(id, config);
    let mut spec = Spec::default();
    spec.set_version("1.0.2-dev".to_owned())
        .set_process(Some(process(config, image, user, &hostname)?))
        .set_root(Some(root(config)?))
        .set_hostname(Some(hostname))
        .set_mounts(Some(mounts(config)?))
        .set_annotations(Some(
            config
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ))
        .set_linux(Some(linux(id, namespace, config)?));
    Ok(spec)
}

fn invalid(e: oci_spec::OciSpecError) -> AdapterError {
    AdapterError::Invalid(format!("OCI runtime spec: {e}"))
}

fn process(
    config: &ContainerConfig,
    image: &ImageConfig,
    user: &User,
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
    let mut process = Process::default();
    process
        .set_terminal(Some(config.tty))
        .set_user(
            UserBuilder::default()
                .uid(user.uid)
                .gid(user.gid)
                .build()
                .map_err(invalid)?,
        )
        .set_args(Some(process_args(config, image)?))
        .set_env(Some(process_env(config, image, hostname)))
        .set_cwd(cwd.into())
        .set_capabilities(Some(capabilities()))
        .set_rlimits(Some(vec![
            PosixRlimitBuilder::default()
                .typ(PosixRlimitType::RlimitNofile)
                .hard(1024u64)
                .soft(1024u64)
                .build()
                .map_err(invalid)?,
        ]))
        .set_no_new_privileges(Some(false));
    Ok(process)
}

/// Docker's default set in the bounding, effective and permitted sets;
/// none inherited, none ambient.
fn capabilities() -> LinuxCapabilities {
    let set: Capabilities = DEFAULT_CAPABILITIES.into_iter().collect();
    let mut caps = LinuxCapabilities::default();
    caps.set_bounding(Some(set.clone()))
        .set_effective(Some(set.clone()))
        .set_permitted(Some(set))
        .set_inheritable(None)
        .set_ambient(None);
    caps
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

/// The file systems every container gets, then the user's binds.
fn mounts(config: &ContainerConfig) -> Result<Vec<Mount>, AdapterError> {
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
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        )?,
        // A fresh, read-only sysfs in both network modes, as dockerd does. (A
        // bind of the host's /sys would leave its submounts, such as
        // /sys/fs/bpf or /sys/kernel/debug, writable: `ro` does not recurse.)
        mount(
            "/sys",
            "sysfs",
            "sysfs",
            &["nosuid", "noexec", "nodev", "ro"],
        )?,
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            "cgroup",
            &["nosuid", "noexec", "nodev", "relatime", "ro"],
        )?,
    ];
    if config.network == NetworkMode::Host {
        for file in ["/etc/hosts", "/etc/resolv.conf"] {
            mounts.push(mount(file, "bind", file, &["rbind", "rprivate", "ro"])?);
        }
    }
    for m in &config.mounts {
        if !m.source.starts_with('/') || !m.destination.starts_with('/') {
            return Err(AdapterError::Invalid(format!(
                "bind mount {}:{}: both paths must be absolute",
                m.source, m.destination
            )));
        }
        let mode = if m.read_only { "ro" } else { "rw" };
        mounts.push(mount(
            &m.destination,
            "bind",
            &m.source,
            &["rbind", "rprivate", mode],
        )?);
    }
    Ok(mounts)
}

fn namespace(kind: LinuxNamespaceType) -> Result<LinuxNamespace, AdapterError> {
    LinuxNamespaceBuilder::default()
        .typ(kind)
        .build()
        .map_err(invalid)
}

fn namespaces(config: &ContainerConfig) -> Result<Vec<LinuxNamespace>, AdapterError> {
    let mut kinds = vec![
        LinuxNamespaceType::Pid,
        LinuxNamespaceType::Ipc,
        LinuxNamespaceType::Uts,
        LinuxNamespaceType::Mount,
    ];
    if config.network == NetworkMode::None {
        kinds.push(LinuxNamespaceType::Network);
    }
    kinds.into_iter().map(namespace).collect()
}

fn device_rule(
    allow: bool,
    kind: Option<LinuxDeviceType>,
    major: Option<i64>,
    minor: Option<i64>,
) -> Result<LinuxDeviceCgroup, AdapterError> {
    let mut rule = LinuxDeviceCgroupBuilder::default()
        .allow(allow)
        .access("rwm");
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

/// The devices cgroup: deny all, then the character devices every
/// container has (null, zero, full, random, urandom, tty, console, ptmx, pts).
fn device_rules() -> Result<Vec<LinuxDeviceCgroup>, AdapterError> {
    let c = Some(LinuxDeviceType::C);
    let mut rules = vec![device_rule(false, None, None, None)?];
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
        rules.push(device_rule(true, c, Some(major), Some(minor))?);
    }
    rules.push(device_rule(true, c, Some(136), None)?);
    Ok(rules)
}

fn resources(config: &ContainerConfig) -> Result<LinuxResources, AdapterError> {
    let mut resources = LinuxResources::default();
    resources.set_devices(Some(device_rules()?));
    if let Some(limit) = config.memory_limit_bytes {
        let limit = i64::try_from(limit)
            .map_err(|_| AdapterError::Invalid("memory limit too large".into()))?;
        resources.set_memory(Some(
            LinuxMemoryBuilder::default()
                .limit(limit)
                .build()
                .map_err(invalid)?,
        ));
    }
    Ok(resources)
}

fn linux(
    id: &ContainerId,
    namespace: &str,
    config: &ContainerConfig,
) -> Result<Linux, AdapterError> {
    let mut linux = Linux::default();
    linux
        .set_resources(Some(resources(config)?))
        .set_cgroups_path(Some(format!("/{namespace}/{id}").into()))
        .set_namespaces(Some(namespaces(config)?))
        .set_masked_paths(Some(MASKED_PATHS.map(str::to_owned).to_vec()))
        .set_readonly_paths(Some(READONLY_PATHS.map(str::to_owned).to_vec()))
        .set_seccomp(Some(seccomp_profile()?));
    Ok(linux)
}

/// System calls a container is refused (EPERM), as dockerd's default profile
/// refuses them to a container without extra capabilities. Most already need
/// a capability the container does not have; the filter matters for those
/// that do not: kernel keyrings (not namespaced), user namespaces and
/// unprivileged BPF (the usual roads to kernel bugs), userfaultfd,
/// perf_event_open, and reading other processes' memory. A denylist, not
/// dockerd's allowlist: it stops the known-dangerous without breaking what
/// the allowlist would have to foresee.
const SECCOMP_DENIED: [&str; 51] = [
    "_sysctl",
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "get_kernel_syms",
    "init_module",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "query_module",
    "quotactl",
    "reboot",
    "request_key",
    "setns",
    "settimeofday",
    "stime",
    "swapoff",
    "swapon",
    "sysfs",
    "umount",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
    "vm86",
    "vm86old",
];

fn seccomp_profile() -> Result<LinuxSeccomp, AdapterError> {
    // runc skips names the architecture does not have.
    let architectures = match std::env::consts::ARCH {
        "aarch64" => vec![Arch::ScmpArchAarch64, Arch::ScmpArchArm],
        _ => vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32],
    };
    let denied = LinuxSyscallBuilder::default()
        .names(SECCOMP_DENIED.map(str::to_owned).to_vec())
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(1u32)
        .build()
        .map_err(invalid)?;
    LinuxSeccompBuilder::default()
        .default_action(LinuxSeccompAction::ScmpActAllow)
        .architectures(architectures)
        .syscalls(vec![denied])
        .build()
        .map_err(invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_core::BindMount;
    use serde_json::{Value, json};

    /// The spec as runc reads it.
    fn json_spec(config: &ContainerConfig, user: &User) -> Result<Value, AdapterError> {
        let spec = build_spec(&id(), "ns", config, &busybox(), user)?;
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
    fn spec_carries_the_create_options() {
        let mut c = ContainerConfig {
            cmd: Some(vec!["sleep".into(), "1".into()]),
            working_dir: Some("/tmp".into()),
            hostname: Some("web".into()),
            read_only_rootfs: true,
            memory_limit_bytes: Some(64 << 20),
            mounts: vec![BindMount {
                source: "/src".into(),
                destination: "/dst".into(),
                read_only: true,
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
}
