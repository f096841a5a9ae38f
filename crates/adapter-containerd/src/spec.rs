//! The OCI runtime spec of a container, from its image config and the
//! user's create options. Pure: everything it needs comes in as arguments.

use crate::error::AdapterError;
use crate::image::ImageConfig;
use holdfast_core::{ContainerConfig, ContainerId, NetworkMode};
use serde_json::{Value, json};

pub(crate) const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
pub(crate) const PROCESS_TYPE_URL: &str =
    "types.containerd.io/opencontainers/runtime-spec/1/Process";
const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Docker's default capability set.
const CAPABILITIES: [&str; 14] = [
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
) -> Result<Value, AdapterError> {
    let hostname = hostname(id, config);
    let args = process_args(config, image)?;
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
    let caps: Vec<&str> = CAPABILITIES.to_vec();
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
    ];
    // A fresh, read-only sysfs in both modes, as dockerd does. (A bind of the
    // host's /sys would leave its submounts, such as /sys/fs/bpf or
    // /sys/kernel/debug, writable: `ro` does not recurse.)
    mounts.push(json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}));
    mounts.push(json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}));
    if config.network == NetworkMode::Host {
        for file in ["/etc/hosts", "/etc/resolv.conf"] {
            mounts.push(json!({"destination": file, "type": "bind", "source": file, "options": ["rbind", "rprivate", "ro"]}));
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
        mounts.push(json!({"destination": m.destination, "type": "bind", "source": m.source, "options": ["rbind", "rprivate", mode]}));
    }
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if config.network == NetworkMode::None {
        namespaces.push(json!({"type": "network"}));
    }
    let mut resources = json!({
        "devices": [
            {"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 5, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 7, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 8, "access": "rwm"},
            {"allow": true, "type": "c", "major": 1, "minor": 9, "access": "rwm"},
            {"allow": true, "type": "c", "major": 5, "minor": 0, "access": "rwm"},
            {"allow": true, "type": "c", "major": 5, "minor": 1, "access": "rwm"},
            {"allow": true, "type": "c", "major": 5, "minor": 2, "access": "rwm"},
            {"allow": true, "type": "c", "major": 136, "access": "rwm"},
        ]
    });
    if let Some(limit) = config.memory_limit_bytes {
        let limit = i64::try_from(limit)
            .map_err(|_| AdapterError::Invalid("memory limit too large".into()))?;
        resources["memory"] = json!({ "limit": limit });
    }
    let mut annotations = serde_json::Map::new();
    for (k, v) in &config.labels {
        annotations.insert(k.clone(), json!(v));
    }
    Ok(json!({
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": config.tty,
            "user": { "uid": user.uid, "gid": user.gid },
            "args": args,
            "env": process_env(config, image, &hostname),
            "cwd": cwd,
            "capabilities": { "bounding": caps, "effective": caps, "permitted": caps },
            "rlimits": [{ "type": "RLIMIT_NOFILE", "hard": 1024u64, "soft": 1024u64 }],
            "noNewPrivileges": false,
        },
        "root": { "path": "rootfs", "readonly": config.read_only_rootfs },
        "hostname": hostname,
        "mounts": mounts,
        "annotations": annotations,
        "linux": {
            "resources": resources,
            "cgroupsPath": format!("/{namespace}/{id}"),
            "namespaces": namespaces,
            "maskedPaths": MASKED_PATHS,
            "readonlyPaths": READONLY_PATHS,
            "seccomp": seccomp_profile(),
        },
    }))
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

fn seccomp_profile() -> Value {
    // runc skips names the architecture does not have.
    let architectures: &[&str] = match std::env::consts::ARCH {
        "aarch64" => &["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
        _ => &["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    };
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": architectures,
        "syscalls": [{ "names": SECCOMP_DENIED.as_slice(), "action": "SCMP_ACT_ERRNO", "errnoRet": 1 }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use holdfast_core::BindMount;

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
                volume: None,
                source: "/src".into(),
                destination: "/dst".into(),
                read_only: true,
            }],
            ..Default::default()
        };
        c.labels.insert("k".into(), "v".into());
        let user = User { uid: 1, gid: 2 };
        let spec = build_spec(&id(), "ns", &c, &busybox(), &user).expect("spec");
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
        let host = build_spec(&id(), "ns", &c, &busybox(), &user).expect("spec");
        assert!(!has_netns(&host));
        assert_eq!(
            build_spec(&id(), "ns", &ContainerConfig::default(), &busybox(), &user).expect("spec")
                ["hostname"],
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
        assert!(build_spec(&id(), "ns", &rel, &busybox(), &user).is_err());
    }

    #[test]
    fn a_tty_container_gets_a_terminal_and_term() {
        let user = User { uid: 0, gid: 0 };
        let tty = ContainerConfig {
            tty: true,
            ..Default::default()
        };
        let spec = build_spec(&id(), "ns", &tty, &busybox(), &user).expect("spec");
        assert_eq!(spec["process"]["terminal"], json!(true));
        let env = spec["process"]["env"].as_array().expect("env");
        assert!(env.contains(&json!("TERM=xterm")), "{env:?}");
        let plain =
            build_spec(&id(), "ns", &ContainerConfig::default(), &busybox(), &user).expect("spec");
        assert_eq!(plain["process"]["terminal"], json!(false));
    }
}
