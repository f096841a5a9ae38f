//! A container's root filesystem for the length of one request: a running
//! container's through its init (`/proc/<pid>/root`), a stopped one's
//! snapshot mounted for the occasion and unmounted when the request is
//! done. `docker cp`, `docker export` and a new volume's fill read it
//! through the archive helper ([`crate::archive`]).

use holdfast_adapter_containerd::Adapter;
use holdfast_core::{ContainerId, ErrorKind, RequestError};
use nix::mount::{MntFlags, MsFlags};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_MOUNT: AtomicU64 = AtomicU64::new(0);

/// A container's root filesystem for the length of one request.
#[derive(Debug)]
pub enum Root {
    /// `/proc/<pid>/root` of the running init.
    Live(PathBuf),
    /// The snapshot, mounted here; unmounted and removed on drop.
    Mounted(PathBuf),
}

impl Root {
    pub fn path(&self) -> &Path {
        match self {
            Root::Live(p) | Root::Mounted(p) => p,
        }
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Root::Mounted(dir) = self {
            if let Err(e) = nix::mount::umount2(dir.as_path(), MntFlags::MNT_DETACH) {
                tracing::warn!(dir = %dir.display(), error = %e, "unmounting a copy's rootfs");
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

/// The container's snapshot, mounted under `mount_dir` for the length of
/// one request.
pub(crate) async fn mounted_root(
    adapter: &Adapter,
    mount_dir: &Path,
    id: &ContainerId,
) -> Result<Root, RequestError> {
    let mounts = adapter
        .rootfs_mounts(id)
        .await
        .map_err(crate::refusal::adapter_failure)?;
    let internal = |message: String| RequestError::new(ErrorKind::Internal, message);
    if mounts.is_empty() {
        return Err(internal(format!("container {id} has no rootfs")));
    }
    let n = NEXT_MOUNT.fetch_add(1, Ordering::Relaxed);
    let dir = mount_dir.join(format!("{id}-{n}"));
    std::fs::create_dir_all(&dir).map_err(|e| internal(format!("{}: {e}", dir.display())))?;
    let root = Root::Mounted(dir.clone());
    for m in &mounts {
        let mut flags = MsFlags::empty();
        let mut data = Vec::new();
        for o in &m.options {
            match o.as_str() {
                "ro" => flags |= MsFlags::MS_RDONLY,
                "rw" => {}
                "bind" => flags |= MsFlags::MS_BIND,
                "rbind" => flags |= MsFlags::MS_BIND | MsFlags::MS_REC,
                other => data.push(other),
            }
        }
        let data = data.join(",");
        nix::mount::mount(
            Some(m.source.as_str()),
            dir.as_path(),
            Some(m.kind.as_str()),
            flags,
            (!data.is_empty()).then_some(data.as_str()),
        )
        .map_err(|e| internal(format!("mounting the rootfs of {id}: {e}")))?;
    }
    Ok(root)
}
