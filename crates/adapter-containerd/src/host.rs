//! What a container's spec needs from the host and the image's files:
//! device nodes (`--device`, `--privileged`), supplementary groups
//! (`--group-add`) and the init binary (`--init`). The I/O that keeps
//! [`crate::spec::build_spec`] pure.

use crate::container::read_rootfs_file;
use crate::error::AdapterError;
use crate::spec::{HostDevice, HostFacts};
use containerd_client::types::Mount;
use holdfast_core::ContainerConfig;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

/// Where an init for `--init` may be installed: docker's own, then the
/// static tini of Debian's `tini` package. (A dynamically linked tini would
/// not run in an image without its libraries, such as busybox.)
const INIT_CANDIDATES: [&str; 4] = [
    "/usr/bin/docker-init",
    "/usr/libexec/docker/docker-init",
    "/usr/sbin/docker-init",
    "/usr/bin/tini-static",
];

/// The host's init binary for `--init`, if one is installed.
pub fn find_init_binary() -> Option<PathBuf> {
    INIT_CANDIDATES
        .iter()
        .map(PathBuf::from)
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
}

pub(crate) fn host_facts(
    config: &ContainerConfig,
    rootfs: &[Mount],
    shm_source: Option<PathBuf>,
) -> Result<HostFacts, AdapterError> {
    let p = &config.privileges;
    let mut devices = if p.privileged {
        host_devices(Path::new("/dev"))
    } else {
        Vec::new()
    };
    for d in &p.devices {
        let device =
            device_node(Path::new(&d.path_on_host), &d.path_in_container).map_err(|e| {
                AdapterError::Invalid(format!(
                    "error gathering device information while adding custom device {:?}: {e}",
                    d.path_on_host
                ))
            })?;
        devices.retain(|have| have.path_in_container != device.path_in_container);
        devices.push(HostDevice {
            permissions: d.cgroup_permissions.clone(),
            ..device
        });
    }
    let init_binary = if config.init {
        Some(find_init_binary().ok_or_else(|| {
            AdapterError::Invalid("--init: no init binary is installed (install tini)".into())
        })?)
    } else {
        None
    };
    Ok(HostFacts {
        additional_gids: group_ids(&p.group_add, rootfs)?,
        devices,
        init_binary,
        bounding_capabilities: bounding_capabilities(),
        shm_source,
        netns_path: None,
        hosts_path: None,
        resolv_path: None,
        hostname_path: None,
    })
}

/// holdfastd's own bounding set (`CapBnd` in `/proc/self/status`): in a
/// machine that is itself a container, some capabilities are not there to
/// grant.
fn bounding_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("CapBnd:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// `--group-add`: numbers as they are, names from the image's `/etc/group`.
fn group_ids(groups: &[String], rootfs: &[Mount]) -> Result<Vec<u32>, AdapterError> {
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let group_file = if groups.iter().all(|g| g.parse::<u32>().is_ok()) {
        None
    } else {
        read_rootfs_file(rootfs, "etc/group")
    };
    groups
        .iter()
        .map(|g| {
            if let Ok(gid) = g.parse::<u32>() {
                return Ok(gid);
            }
            group_file
                .as_deref()
                .and_then(|text| crate::spec::group_id(text, g))
                .ok_or_else(|| {
                    AdapterError::Invalid(format!(
                        "unable to find group {g}: no matching entries in group file"
                    ))
                })
        })
        .collect()
}

/// Linux's `dev_t` encoding.
fn major_minor(rdev: u64) -> (i64, i64) {
    let major = ((rdev >> 8) & 0xfff) | ((rdev >> 32) & !0xfff);
    let minor = (rdev & 0xff) | ((rdev >> 12) & !0xff);
    (major as i64, minor as i64)
}

fn device_node(host: &Path, in_container: &str) -> std::io::Result<HostDevice> {
    let meta = std::fs::metadata(host)?;
    let kind = meta.file_type();
    if !kind.is_char_device() && !kind.is_block_device() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a device node",
        ));
    }
    let (major, minor) = major_minor(meta.rdev());
    Ok(HostDevice {
        path_in_container: in_container.to_owned(),
        block: kind.is_block_device(),
        major,
        minor,
        file_mode: meta.mode() & 0o7777,
        uid: meta.uid(),
        gid: meta.gid(),
        permissions: "rwm".to_owned(),
    })
}

/// Every device node under `/dev` (one level of subdirectories deep), as a
/// privileged container gets them; not the container's own pts, shm or
/// mqueue, nor the host's console.
fn host_devices(dev: &Path) -> Vec<HostDevice> {
    let mut out = Vec::new();
    let mut dirs = vec![(dev.to_path_buf(), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if kind.is_dir() {
                if depth == 0 && !matches!(name.to_str(), Some("pts" | "shm" | "mqueue" | "fd")) {
                    dirs.push((path, depth + 1));
                }
                continue;
            }
            if name == "console" || kind.is_symlink() {
                continue;
            }
            let Some(container_path) = path.to_str() else {
                continue;
            };
            if let Ok(d) = device_node(&path, container_path) {
                out.push(d);
            }
        }
    }
    out.sort_by(|a, b| a.path_in_container.cmp(&b.path_in_container));
    out
}

/// `--cpu-rt-runtime` on cgroup v1: a cgroup may give its children only the
/// real-time budget it has itself, and a new cgroup has none. As dockerd's
/// `--cpu-rt-runtime` does for its parent, each ancestor of the container's
/// cgroup (`cgroup_path`, below the cpu controller's root) gets this much
/// more. A budget it cannot get is left to runc, which then fails the
/// start with the kernel's reason.
pub(crate) fn grant_realtime_budget(cgroup_path: &str, runtime_us: i64) {
    let Some(root) = ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.join("cpu.rt_runtime_us").exists())
    else {
        return;
    };
    let ancestors: Vec<&str> = cgroup_path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let mut dir = root.to_path_buf();
    for part in ancestors.iter().take(ancestors.len().saturating_sub(1)) {
        dir.push(part);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!(error = %e, dir = %dir.display(), "no cgroup for the real-time budget");
            return;
        }
        let file = dir.join("cpu.rt_runtime_us");
        let have: i64 = std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        if let Err(e) = std::fs::write(&file, (have + runtime_us).to_string()) {
            tracing::warn!(error = %e, file = %file.display(), "real-time budget not granted");
            return;
        }
    }
}

/// The tmpfs a `--ipc shareable` container has as `/dev/shm`, mounted on
/// the host (beside the stdin FIFOs) so that containers joining its IPC
/// namespace can bind the same one: a mount inside the container's own
/// mount namespace could not be bound into another.
pub(crate) fn shareable_shm_dir(fifo_dir: &Path, id: &str) -> PathBuf {
    fifo_dir.with_file_name("shm").join(id)
}

/// Mounts the shareable `/dev/shm` of a container (`size_bytes`, 64 MiB by
/// default), unless it is mounted already (a retried create).
pub(crate) fn mount_shareable_shm(dir: &Path, size_bytes: Option<u64>) -> Result<(), AdapterError> {
    use nix::mount::{MsFlags, mount};
    std::fs::create_dir_all(dir)?;
    if is_mount_point(dir) {
        return Ok(());
    }
    let options = format!("mode=1777,size={}", size_bytes.unwrap_or(64 << 20));
    mount(
        Some("shm"),
        dir,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some(options.as_str()),
    )
    .map_err(|e| {
        AdapterError::Io(std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!("mount the shareable /dev/shm at {}: {e}", dir.display()),
        ))
    })
}

/// Unmounts and removes a shareable `/dev/shm`, if there is one.
pub(crate) fn remove_shareable_shm(dir: &Path) {
    if !dir.exists() {
        return;
    }
    if is_mount_point(dir)
        && let Err(e) = nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH)
    {
        tracing::warn!(error = %e, dir = %dir.display(), "shareable /dev/shm not unmounted");
        return;
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::warn!(error = %e, dir = %dir.display(), "shareable /dev/shm not removed");
    }
}

fn is_mount_point(dir: &Path) -> bool {
    let (Ok(here), Some(Ok(parent))) =
        (std::fs::metadata(dir), dir.parent().map(std::fs::metadata))
    else {
        return false;
    };
    here.dev() != parent.dev()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_decode() {
        // /dev/null is 1:3; a large minor uses the high bits.
        assert_eq!(major_minor(0x0103), (1, 3));
        assert_eq!(major_minor((0x12 << 8) | 0x34 | (0x5 << 20)), (0x12, 0x534));
    }

    #[test]
    fn dev_null_is_a_character_device() {
        let d = device_node(Path::new("/dev/null"), "/dev/nil").expect("dev null");
        assert_eq!((d.major, d.minor, d.block), (1, 3, false));
        assert!(device_node(Path::new("/etc"), "/x").is_err());
    }
}
