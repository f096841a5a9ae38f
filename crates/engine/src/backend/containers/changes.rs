//! `docker diff`: what the container changed, read from the upper directory
//! of its overlay snapshot, as dockerd's overlay driver reads it: a whiteout
//! (a 0/0 character device) is a deletion; anything else is an addition, or
//! a change when a lower layer has the path too.

use super::Containers;
use crate::refusal::internal;
use holdfast_core::{ErrorKind, RequestError};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path as FsPath, PathBuf};

/// dockerd's kinds.
pub const MODIFIED: u8 = 0;
pub const ADDED: u8 = 1;
pub const DELETED: u8 = 2;

impl Containers<'_> {
    /// `docker diff`: every change of the container a reference names, as
    /// (path in the container, kind), sorted.
    pub async fn changes(&self, reference: &str) -> Result<Vec<(String, u8)>, RequestError> {
        let id = self.engine.resolve(reference).await?;
        let mounts = self
            .engine
            .services
            .adapter
            .rootfs_mounts(&id)
            .await
            .map_err(crate::refusal::adapter_failure)?;
        let option = |key: &str| {
            mounts
                .iter()
                .filter(|m| m.kind == "overlay")
                .flat_map(|m| m.options.iter())
                .find_map(|o| o.strip_prefix(key).map(str::to_owned))
        };
        let Some(upper) = option("upperdir=") else {
            return Err(RequestError::new(
                ErrorKind::NotImplemented,
                "docker diff needs an overlay snapshot with an upper directory",
            ));
        };
        let lowers: Vec<PathBuf> = option("lowerdir=")
            .map(|l| l.split(':').map(PathBuf::from).collect())
            .unwrap_or_default();
        tokio::task::spawn_blocking(move || changes(FsPath::new(&upper), &lowers))
            .await
            .map_err(|e| internal(e.to_string()))
    }
}

/// Every change under `upper`, as (path in the container, kind), sorted.
fn changes(upper: &FsPath, lowers: &[PathBuf]) -> Vec<(String, u8)> {
    let mut out = Vec::new();
    walk(upper, FsPath::new("/"), lowers, &mut out);
    // The engine's mount points, and their directory when nothing else in
    // it changed, are not the container's changes (as dockerd's diff).
    out.retain(|(path, _)| !holdfast_adapter_containerd::is_engine_mount_point(FsPath::new(path)));
    let etc_changed = out.iter().any(|(path, _)| path.starts_with("/etc/"));
    if !etc_changed {
        out.retain(|(path, _)| path != "/etc");
    }
    out.sort();
    out
}

fn walk(dir: &FsPath, at: &FsPath, lowers: &[PathBuf], out: &mut Vec<(String, u8)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = at.join(entry.file_name());
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let relative = path.strip_prefix("/").unwrap_or(&path);
        let in_lower = lowers
            .iter()
            .any(|l| std::fs::symlink_metadata(l.join(relative)).is_ok());
        let kind = if meta.file_type().is_char_device() && meta.rdev() == 0 {
            DELETED
        } else if in_lower {
            MODIFIED
        } else {
            ADDED
        };
        out.push((path.to_string_lossy().into_owned(), kind));
        // Below an added directory everything is added; list it all, as dockerd.
        if meta.is_dir() {
            walk(&entry.path(), &path, lowers, out);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upper_entries_are_changes_additions_and_whiteouts() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, lower) = (dir.path().join("upper"), dir.path().join("lower"));
        std::fs::create_dir_all(upper.join("etc")).unwrap();
        std::fs::create_dir_all(lower.join("etc")).unwrap();
        std::fs::write(lower.join("etc/passwd"), "old").unwrap();
        std::fs::write(upper.join("etc/passwd"), "new").unwrap();
        std::fs::create_dir_all(upper.join("new/deep")).unwrap();
        let got = changes(&upper, &[lower]);
        assert_eq!(
            got,
            [
                ("/etc".to_owned(), MODIFIED),
                ("/etc/passwd".to_owned(), MODIFIED),
                ("/new".to_owned(), ADDED),
                ("/new/deep".to_owned(), ADDED),
            ]
        );
    }

    #[test]
    fn the_engines_mount_points_are_no_change_of_the_container() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, lower) = (dir.path().join("upper"), dir.path().join("lower"));
        std::fs::create_dir_all(upper.join("etc")).unwrap();
        std::fs::create_dir_all(lower.join("etc")).unwrap();
        for file in ["hostname", "hosts", "resolv.conf"] {
            std::fs::write(upper.join("etc").join(file), "").unwrap();
        }
        assert_eq!(changes(&upper, std::slice::from_ref(&lower)), []);
        // Beside a real change, /etc is changed and the mount points still are not.
        std::fs::write(upper.join("etc/motd"), "hi").unwrap();
        assert_eq!(
            changes(&upper, &[lower]),
            [
                ("/etc".to_owned(), MODIFIED),
                ("/etc/motd".to_owned(), ADDED)
            ]
        );
    }
}
