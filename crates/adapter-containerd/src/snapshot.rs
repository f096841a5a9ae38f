//! A container's snapshot from outside its task: what it changed, as a
//! layer (`Call::ReadChanges`, for `docker commit`), and its files mounted
//! where the daemon's copies find them (`Call::MountRootfs` and
//! `Call::UnmountRootfs`, for `docker cp` of a stopped container and for
//! filling its volumes at create). Each is idempotent: the core issues them
//! again after a crash, and a mount is at one path per container.

use crate::client::Adapter;
use crate::error::AdapterError;
use crate::spec::is_engine_mount_point;
use holdfast_core::ContainerId;
use nix::mount::{MntFlags, MsFlags};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};

impl Adapter {
    /// Where the container's snapshot is mounted for a copy or a fill.
    pub fn rootfs_dir(&self, id: &ContainerId) -> PathBuf {
        self.config().rootfs_dir.join(id.as_str())
    }

    /// Writes what the container changed (its overlay snapshot's upper
    /// directory) to `layer` as a tar: whiteouts as `.wh.` files, opaque
    /// directories as `.wh..wh..opq`, symlinks kept.
    pub async fn read_changes(&self, id: &ContainerId, layer: &Path) -> Result<(), AdapterError> {
        let mounts = self.rootfs_mounts(id).await?;
        let upper = mounts
            .iter()
            .filter(|m| m.kind == "overlay")
            .flat_map(|m| m.options.iter())
            .find_map(|o| o.strip_prefix("upperdir=").map(PathBuf::from))
            .ok_or_else(|| {
                AdapterError::Invalid(
                    "docker commit needs an overlay snapshot with an upper directory".into(),
                )
            })?;
        let out = layer.to_owned();
        tokio::task::spawn_blocking(move || layer_tar(&upper, &out))
            .await
            .map_err(|e| AdapterError::Invalid(format!("reading the changes: {e}")))?
            .map_err(|e| {
                with_context(
                    format!("reading the container's changes into {}", layer.display()),
                    e,
                )
            })
    }

    /// Mounts the container's snapshot at [`Adapter::rootfs_dir`] (nothing
    /// if it is mounted there already).
    pub async fn mount_rootfs(&self, id: &ContainerId) -> Result<(), AdapterError> {
        let dir = self.rootfs_dir(id);
        if is_mount_point(&dir) {
            return Ok(());
        }
        let mounts = self.rootfs_mounts(id).await?;
        if mounts.is_empty() {
            return Err(AdapterError::Invalid(format!(
                "container {id} has no rootfs"
            )));
        }
        let io = |what: String| move |e| with_context(what, e);
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
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
            .map_err(|e| {
                io(format!("mount the rootfs of {id}"))(std::io::Error::from_raw_os_error(e as i32))
            })?;
        }
        Ok(())
    }

    /// Unmounts what [`Adapter::mount_rootfs`] mounted (nothing if nothing
    /// is), and removes its directory.
    pub fn unmount_rootfs(&self, id: &ContainerId) -> Result<(), AdapterError> {
        let dir = self.rootfs_dir(id);
        while is_mount_point(&dir) {
            // A copy's helper may still hold it for an instant: detach, so
            // the snapshot is released as soon as it lets go.
            nix::mount::umount2(dir.as_path(), MntFlags::MNT_DETACH).map_err(|e| {
                with_context(
                    format!("unmount the rootfs of {id}"),
                    std::io::Error::from_raw_os_error(e as i32),
                )
            })?;
        }
        match std::fs::remove_dir(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(with_context(format!("remove {}", dir.display()), e))
            }
            _ => Ok(()),
        }
    }
}

fn with_context(what: String, e: std::io::Error) -> AdapterError {
    AdapterError::Io(std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

/// Whether something is mounted at `dir` (this process's mount table).
fn is_mount_point(dir: &Path) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let wanted = dir.to_string_lossy();
    table
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mount_point| unescape_octal(mount_point) == wanted)
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let digits: String = chars.by_ref().take(3).collect();
            if let Ok(n) = u8::from_str_radix(&digits, 8) {
                out.push(char::from(n));
                continue;
            }
            out.push('\\');
            out.push_str(&digits);
        } else {
            out.push(c);
        }
    }
    out
}

fn layer_tar(upper: &Path, out: &Path) -> std::io::Result<()> {
    let file = std::fs::File::create(out)?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
    builder.follow_symlinks(false);
    add_dir(&mut builder, upper, Path::new(""))?;
    builder.into_inner()?.into_inner()?.sync_all()
}

fn add_dir<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    at: &Path,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let host = entry.path();
        let name = at.join(entry.file_name());
        // The engine's mount points are no part of the container's layer,
        // nor their directory when nothing else of it changed.
        if is_engine_mount_point(&Path::new("/").join(&name)) {
            continue;
        }
        let meta = std::fs::symlink_metadata(&host)?;
        if meta.is_dir() && !opaque(&host) && holds_only_engine_mount_points(&host, &name) {
            continue;
        }
        // overlay's whiteout: a character device 0/0.
        if meta.file_type().is_char_device() && meta.rdev() == 0 {
            let mut whiteout = std::ffi::OsString::from(".wh.");
            whiteout.push(entry.file_name());
            append_marker(builder, &at.join(whiteout))?;
            continue;
        }
        builder.append_path_with_name(&host, &name)?;
        if meta.is_dir() {
            if opaque(&host) {
                append_marker(builder, &name.join(".wh..wh..opq"))?;
            }
            add_dir(builder, &host, &name)?;
        }
    }
    Ok(())
}

/// Whether `dir` (at `at` in the container) holds something, and nothing
/// but the engine's mount points.
fn holds_only_engine_mount_points(dir: &Path, at: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut any = false;
    for entry in entries.flatten() {
        if !is_engine_mount_point(&Path::new("/").join(at).join(entry.file_name())) {
            return false;
        }
        any = true;
    }
    any
}

/// An empty file that only marks (a whiteout, an opaque directory).
fn append_marker<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    path: &Path,
) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(0);
    header.set_mode(0o600);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, path, std::io::empty())
}

/// Whether overlay marked the directory opaque (`trusted.` as root,
/// `user.` on a userxattr mount).
fn opaque(dir: &Path) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut value = [0u8; 4];
            rustix::fs::lgetxattr(dir, *name, &mut value[..])
                .is_ok_and(|n| n == 1 && value[0] == b'y')
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_upper_directory_becomes_a_layer_with_symlinks_kept() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("etc/new")).unwrap();
        std::fs::write(upper.join("etc/new/file"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", upper.join("link")).unwrap();
        // The engine's mount point beside a real change.
        std::fs::write(upper.join("etc/hostname"), "").unwrap();
        assert_eq!(
            layer_entries(&upper),
            [
                ("etc".to_owned(), tar::EntryType::Directory),
                ("etc/new".to_owned(), tar::EntryType::Directory),
                ("etc/new/file".to_owned(), tar::EntryType::Regular),
                ("link".to_owned(), tar::EntryType::Symlink),
            ]
        );
    }

    #[test]
    fn the_engines_mount_points_alone_are_no_layer_content() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("etc")).unwrap();
        for file in ["hostname", "hosts", "resolv.conf"] {
            std::fs::write(upper.join("etc").join(file), "").unwrap();
        }
        // An empty directory of the container's own is a change.
        std::fs::create_dir_all(upper.join("fresh")).unwrap();
        assert_eq!(
            layer_entries(&upper),
            [("fresh".to_owned(), tar::EntryType::Directory)]
        );
    }

    /// The entries of the layer `upper` makes, sorted.
    fn layer_entries(upper: &Path) -> Vec<(String, tar::EntryType)> {
        let out = upper.with_extension("tar");
        layer_tar(upper, &out).unwrap();
        let mut archive = tar::Archive::new(std::fs::File::open(&out).unwrap());
        let mut got: Vec<(String, tar::EntryType)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().entry_type(),
                )
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        got
    }

    #[test]
    fn mountinfo_paths_are_unescaped() {
        assert_eq!(unescape_octal("/a\\040b"), "/a b");
        assert_eq!(unescape_octal("/plain"), "/plain");
        assert!(!is_mount_point(Path::new("/surely/not/mounted")));
        assert!(is_mount_point(Path::new("/")));
    }
}
