//! `docker info`, `docker version`, `docker events` and `docker system df`:
//! what holdfast knows of its own truth and of the host, its events, and
//! what images, containers and volumes take on disk.

use super::containers::Attachment;
use super::containers::{Sizes, Snapshot};
use super::images::LocalImage;
use super::volumes::VolumeDetails;
use crate::engine::{EngineHandle, Facts};
use crate::events::{EventMessage, Listener};
use crate::refusal::internal;
use holdfast_core::{ConnectionState, RequestError, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The system backend: see the module docs.
#[derive(Debug)]
pub struct System<'a> {
    engine: &'a EngineHandle,
}

/// What `docker info` shows.
#[derive(Clone, Debug)]
pub struct Info {
    pub running: usize,
    pub paused: usize,
    pub stopped: usize,
    pub connection: ConnectionState,
    pub facts: Facts,
    /// How many image names containerd's image store has (0 while it
    /// cannot be asked).
    pub images: usize,
    pub data_root: PathBuf,
    pub host: Host,
    /// This engine's id: random, made once and kept under the data root
    /// (as dockerd keeps its own), the same through restarts.
    pub engine_id: String,
    /// Who listens to the live event feed now.
    pub event_listeners: usize,
    /// The engine's tasks alive now (its counterpart of goroutines).
    pub tasks: usize,
    pub components: Components,
}

/// What holdfast runs on, as each says it is.
#[derive(Clone, Debug, Default)]
pub struct Components {
    /// containerd (`None` while it cannot be asked).
    pub containerd: Option<Component>,
    /// The runc on PATH, which containerd's runc shim runs (`None` when
    /// `runc --version` cannot be read).
    pub runc: Option<Component>,
    /// The init `--init` runs, and what it says of itself.
    pub init: Option<(PathBuf, Component)>,
}

/// A program holdfast runs on, by its version and the commit it was built
/// from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Component {
    pub version: String,
    pub commit: String,
}

/// What the host's cgroups can limit, as dockerd's `sysinfo` reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupFeatures {
    pub memory_limit: bool,
    pub swap_limit: bool,
    pub cpu_cfs_period: bool,
    pub cpu_cfs_quota: bool,
}

/// The host, as `docker info` and `docker version` show it.
#[derive(Clone, Debug)]
pub struct Host {
    pub name: String,
    pub mem_total_bytes: u64,
    pub cpus: usize,
    pub kernel_version: String,
    /// `1` or `2`.
    pub cgroup_version: &'static str,
    /// The machine, as `uname -m` names it (`x86_64`, `aarch64`).
    pub architecture: &'static str,
    /// The same, as Go and OCI name it (`amd64`, `arm64`): `/version`'s.
    pub oci_architecture: &'static str,
    /// `net.ipv4.ip_forward` is on.
    pub ipv4_forwarding: bool,
    /// File descriptors holdfastd has open.
    pub open_fds: usize,
    pub cgroup: CgroupFeatures,
}

/// The kinds of object `docker system df` measures (its `type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskUsageOf {
    pub containers: bool,
    pub images: bool,
    pub volumes: bool,
}

impl DiskUsageOf {
    pub const ALL: DiskUsageOf = DiskUsageOf {
        containers: true,
        images: true,
        volumes: true,
    };
}

/// What everything takes on disk (`docker system df`).
#[derive(Clone, Debug, Default)]
pub struct DiskUsage {
    /// Every image's layers, unpacked, each layer counted once.
    pub layers_size: i64,
    pub images: Vec<ImageUsage>,
    pub containers: Vec<ContainerUsage>,
    pub volumes: Vec<VolumeUsage>,
}

#[derive(Clone, Debug)]
pub struct ImageUsage {
    pub image: LocalImage,
    /// Its layers, unpacked.
    pub size: i64,
    /// The part of `size` in layers another image has too.
    pub shared_size: i64,
    /// How many containers were made from it.
    pub containers: usize,
}

#[derive(Clone, Debug)]
pub struct ContainerUsage {
    pub snapshot: Snapshot,
    pub attachment: Option<Attachment>,
    pub sizes: Sizes,
}

#[derive(Clone, Debug)]
pub struct VolumeUsage {
    pub volume: VolumeDetails,
    /// What its data holds.
    pub size: u64,
}

impl<'a> System<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> System<'a> {
        System { engine }
    }

    /// `docker info`.
    pub async fn info(&self) -> Result<Info, RequestError> {
        let (counts, connection, facts) = self
            .engine
            .read(|v| {
                let mut counts = [0usize; 3]; // running, paused, stopped
                for c in v.core.containers() {
                    match c.status {
                        Status::Running if c.paused => counts[1] += 1,
                        Status::Running | Status::Restarting => counts[0] += 1,
                        _ => counts[2] += 1,
                    }
                }
                (counts, v.core.connection(), v.facts.clone())
            })
            .await?;
        let images = self
            .engine
            .services
            .adapter
            .list_images()
            .await
            .map(|i| i.len())
            .unwrap_or(0);
        Ok(Info {
            event_listeners: self.engine.services.events.listeners(),
            tasks: tokio::runtime::Handle::current()
                .metrics()
                .num_alive_tasks(),
            components: self.components().await,
            running: counts[0],
            paused: counts[1],
            stopped: counts[2],
            connection,
            facts,
            images,
            data_root: self.engine.services.data_root.clone(),
            host: host(),
            engine_id: engine_id(&self.engine.services.data_root)?,
        })
    }

    /// containerd, runc and the init, as each says it is.
    pub async fn components(&self) -> Components {
        let containerd = self
            .engine
            .services
            .adapter
            .containerd_version()
            .await
            .ok()
            .map(|(version, commit)| Component { version, commit });
        Components {
            containerd,
            runc: runc_version().await,
            init: init_version().await,
        }
    }

    /// The host.
    pub fn host(&self) -> Host {
        host()
    }

    /// `docker events`: the history so far and the live feed from exactly
    /// where it ends, the listener counted while it lives.
    pub fn events(&self) -> (Vec<Arc<EventMessage>>, Listener) {
        self.engine.services.events.listen()
    }

    /// `docker system df`, of the kinds of object asked for (the others
    /// left empty, not measured).
    pub async fn disk_usage(&self, of: DiskUsageOf) -> Result<DiskUsage, RequestError> {
        let containers_backend = self.engine.containers();
        let snapshots = containers_backend.snapshots().await?;
        let mut meter = containers_backend.size_meter().await?;
        let mut usage = DiskUsage::default();

        if of.images {
            let mut made_from: BTreeMap<String, usize> = BTreeMap::new();
            for c in &snapshots {
                if let Some(image) = &c.record.config.image_id {
                    *made_from.entry(image.clone()).or_default() += 1;
                }
            }
            let images: Vec<LocalImage> = meter.images().cloned().collect();
            let layers = self.engine.images().layer_usage(&images).await?;
            usage.layers_size = layers.layers_size;
            for image in images {
                let id = &image.resolved.config_digest;
                let own = layers.images.get(id).copied().unwrap_or_default();
                meter.remember(id, own.size);
                let containers = made_from.get(id).copied().unwrap_or(0);
                usage.images.push(ImageUsage {
                    image,
                    size: own.size,
                    shared_size: own.shared_size,
                    containers,
                });
            }
        }

        if of.containers {
            for snapshot in snapshots {
                usage.containers.push(ContainerUsage {
                    attachment: containers_backend.attachment(&snapshot).await?,
                    sizes: meter.measure(&snapshot).await?,
                    snapshot,
                });
            }
        }

        if of.volumes {
            for volume in self.engine.volumes().list().await? {
                let dir = volume.mountpoint.clone();
                let size = tokio::task::spawn_blocking(move || dir_size(&dir))
                    .await
                    .map_err(|e| internal(format!("measuring volume: {e}")))?;
                usage.volumes.push(VolumeUsage { volume, size });
            }
        }
        Ok(usage)
    }
}

/// The engine's id, kept in `<data root>/engine-id`: read, or made (a
/// random UUID, as dockerd's since 23.0) and written durably on first ask.
fn engine_id(data_root: &Path) -> Result<String, RequestError> {
    let path = data_root.join("engine-id");
    if let Ok(id) = std::fs::read_to_string(&path)
        && !id.trim().is_empty()
    {
        return Ok(id.trim().to_owned());
    }
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)
        .map_err(|e| crate::refusal::internal(format!("no randomness for the engine id: {e}")))?;
    b[6] = (b[6] & 0x0f) | 0x40; // version 4
    b[8] = (b[8] & 0x3f) | 0x80; // RFC 4122 variant
    let h = hex::encode(b);
    let id = format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    );
    // Written aside and renamed: a crash leaves the old id or the new one.
    let tmp = data_root.join("engine-id.tmp");
    std::fs::write(&tmp, &id)
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| {
            crate::refusal::internal(format!("keeping the engine id in {}: {e}", path.display()))
        })?;
    Ok(id)
}

fn host() -> Host {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let mem_total_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel_version = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let cgroup_version = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "2"
    } else {
        "1"
    };
    let ipv4_forwarding =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").is_ok_and(|v| v.trim() == "1");
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let cgroup = cgroup_features(Path::new("/sys/fs/cgroup"), cgroup_version == "2");
    Host {
        cgroup,
        name,
        mem_total_bytes,
        cpus,
        kernel_version,
        cgroup_version,
        // Rust names the machines as uname does for those Linux runs on
        // (x86_64, aarch64, riscv64, ...).
        architecture: std::env::consts::ARCH,
        oci_architecture: holdfast_adapter_containerd::host_architecture(),
        ipv4_forwarding,
        open_fds,
    }
}

/// What the cgroups mounted at `root` can limit: on v2, what the root's
/// controllers offer; on v1, the files of the limits in their
/// hierarchies (dockerd's `sysinfo`).
fn cgroup_features(root: &Path, v2: bool) -> CgroupFeatures {
    if v2 {
        let controllers =
            std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
        let has = |c: &str| controllers.split_whitespace().any(|have| have == c);
        return CgroupFeatures {
            memory_limit: has("memory"),
            swap_limit: has("memory"),
            cpu_cfs_period: has("cpu"),
            cpu_cfs_quota: has("cpu"),
        };
    }
    let exists = |path: &str| root.join(path).exists();
    CgroupFeatures {
        memory_limit: exists("memory/memory.limit_in_bytes"),
        swap_limit: exists("memory/memory.memsw.limit_in_bytes"),
        cpu_cfs_period: exists("cpu/cpu.cfs_period_us"),
        cpu_cfs_quota: exists("cpu/cpu.cfs_quota_us"),
    }
}

/// `runc --version` of the runc on PATH.
async fn runc_version() -> Option<Component> {
    let out = tokio::process::Command::new("runc")
        .arg("--version")
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    out.status
        .success()
        .then(|| parse_runc_version(&String::from_utf8_lossy(&out.stdout)))
        .flatten()
}

/// The init binary `--init` runs and `<init> --version`.
async fn init_version() -> Option<(PathBuf, Component)> {
    let path = holdfast_adapter_containerd::find_init_binary()?;
    let out = tokio::process::Command::new(&path)
        .arg("--version")
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    let component = parse_tini_version(&String::from_utf8_lossy(&out.stdout))?;
    Some((path, component))
}

/// `tini version 0.19.0 - git.de40ad0` (the commit left out by some
/// builds, as Debian's).
fn parse_tini_version(text: &str) -> Option<Component> {
    let rest = text.lines().next()?.strip_prefix("tini version ")?;
    let (version, commit) = match rest.split_once(" - ") {
        Some((v, c)) => (v, c.trim().strip_prefix("git.").unwrap_or(c.trim())),
        None => (rest, ""),
    };
    Some(Component {
        version: version.trim().to_owned(),
        commit: commit.to_owned(),
    })
}

/// `runc version 1.1.5` and `commit: v1.1.5-0-gf19387a` lines.
fn parse_runc_version(text: &str) -> Option<Component> {
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.trim().to_owned())
    };
    Some(Component {
        version: field("runc version ")?,
        commit: field("commit:").unwrap_or_default(),
    })
}

/// Bytes of the regular files under `dir`, symlinks not followed; what
/// cannot be read counts nothing.
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dir_size_counts_files_once_and_follows_no_symlink() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), [0u8; 23]).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        assert_eq!(dir_size(dir.path()), 123);
    }

    #[test]
    fn runc_says_its_version_and_commit() {
        let debian =
            "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\n";
        assert_eq!(
            parse_runc_version(debian),
            Some(Component {
                version: "1.1.5+ds1".into(),
                commit: "1.1.5+ds1-1+deb12u1".into()
            })
        );
        assert_eq!(parse_runc_version("something else\n"), None);
        let tini = |v: &str, c: &str| {
            Some(Component {
                version: v.into(),
                commit: c.into(),
            })
        };
        assert_eq!(
            parse_tini_version("tini version 0.19.0 - git.de40ad0\n"),
            tini("0.19.0", "de40ad0")
        );
        assert_eq!(
            parse_tini_version("tini version 0.19.0\n"),
            tini("0.19.0", "")
        );
    }

    #[test]
    fn cgroup_features_are_read_from_the_hierarchies() {
        let v1 = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(v1.path().join("memory")).unwrap();
        std::fs::create_dir_all(v1.path().join("cpu")).unwrap();
        std::fs::write(v1.path().join("memory/memory.limit_in_bytes"), "").unwrap();
        std::fs::write(v1.path().join("cpu/cpu.cfs_period_us"), "").unwrap();
        assert_eq!(
            cgroup_features(v1.path(), false),
            CgroupFeatures {
                memory_limit: true,
                swap_limit: false,
                cpu_cfs_period: true,
                cpu_cfs_quota: false,
            }
        );
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.controllers"), "cpuset cpu io pids\n").unwrap();
        assert_eq!(
            cgroup_features(v2.path(), true),
            CgroupFeatures {
                memory_limit: false,
                swap_limit: false,
                cpu_cfs_period: true,
                cpu_cfs_quota: true,
            }
        );
    }
}
