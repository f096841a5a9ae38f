//! `docker cp`: tar streams out of and into a container's filesystem.
//!
//! The work is done by this same binary started as a helper that first
//! chroots into the container's root (`/proc/<pid>/root` of a running
//! container, or its snapshot mounted for the occasion). Inside the chroot
//! every path and symlink resolves as the container sees it, so an absolute
//! symlink planted in the container (`/x -> /etc/shadow`) can never lead to
//! the host's files. The helper talks tar on stdin or stdout and reports a
//! path's stat, or why it failed, on stderr as one line of JSON.

use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;

/// The environment variable that makes this binary the archive helper.
const OP_ENV: &str = "HOLDFAST_ARCHIVE_OP";
const ROOT_ENV: &str = "HOLDFAST_ARCHIVE_ROOT";
const PATH_ENV: &str = "HOLDFAST_ARCHIVE_PATH";
const OWNERS_ENV: &str = "HOLDFAST_ARCHIVE_KEEP_OWNERS";
const NO_DIR_SWAP_ENV: &str = "HOLDFAST_ARCHIVE_NO_OVERWRITE_DIR_NON_DIR";
const BINDS_ENV: &str = "HOLDFAST_ARCHIVE_BINDS";

/// A volume or bind mount of a container whose process does not run: the
/// helper mounts it where the container has it (in a mount namespace of
/// its own, gone with it), so that a copy reaches the volume as it would
/// in the running container, not the directory the volume hides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    pub source: PathBuf,
    pub destination: String,
    pub read_only: bool,
}
const CONTENTS_ENV: &str = "HOLDFAST_ARCHIVE_CONTENTS";

/// What `X-Docker-Container-Path-Stat` carries (Go's `os.FileMode` bits).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStat {
    pub name: String,
    pub size: i64,
    pub mode: u32,
    pub mtime: String,
    #[serde(rename = "linkTarget")]
    pub link_target: String,
}

/// Go's `os.ModeDir` and `os.ModeSymlink`.
const GO_MODE_DIR: u32 = 1 << 31;
const GO_MODE_SYMLINK: u32 = 1 << 27;

impl PathStat {
    pub fn is_dir(&self) -> bool {
        self.mode & GO_MODE_DIR != 0
    }
}

/// The helper's one line on stderr.
#[derive(Debug, Serialize, Deserialize)]
enum Report {
    Stat(PathStat),
    NotFound(String),
    Invalid(String),
    Failed(String),
}

/// How a request failed, for the API's status code.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Failed(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Stat,
    Get,
    /// A directory's contents, named relative to it (to fill a volume).
    GetContents,
    Put(PutOptions),
}

/// How a tar is extracted (`PUT /containers/{id}/archive`'s query).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// Files keep the owners the tar names (`copyUIDGID`), else root's.
    pub keep_owners: bool,
    /// A directory is never replaced by a non-directory nor the other way
    /// round (`noOverwriteDirNonDir`, which `docker cp` always sends).
    pub no_overwrite_dir_non_dir: bool,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Stat => "stat",
            Op::Get | Op::GetContents => "get",
            Op::Put(_) => "put",
        }
    }
}

/// Whether this process was started as the archive helper.
pub fn is_archive_invocation() -> bool {
    std::env::var_os(OP_ENV).is_some()
}

/// Starts the helper for `op` on `path` inside `root`, with `binds`
/// mounted in it first. For `Get` read its stdout, for `Put` write its
/// stdin; then [`finish`].
pub fn spawn(op: Op, root: &Path, binds: &[Bind], path: &str) -> io::Result<tokio::process::Child> {
    let binds = serde_json::to_string(binds).map_err(io::Error::other)?;
    let put = match op {
        Op::Put(options) => options,
        _ => PutOptions::default(),
    };
    let flag = |on: bool| if on { "1" } else { "0" };
    tokio::process::Command::new(std::env::current_exe()?)
        .env(OP_ENV, op.name())
        .env(ROOT_ENV, root)
        .env(PATH_ENV, path)
        .env(OWNERS_ENV, flag(put.keep_owners))
        .env(NO_DIR_SWAP_ENV, flag(put.no_overwrite_dir_non_dir))
        .env(CONTENTS_ENV, flag(op == Op::GetContents))
        .env(BINDS_ENV, binds)
        .stdin(if matches!(op, Op::Put(_)) {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(if matches!(op, Op::Get | Op::GetContents) {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// Waits for the helper; the stat it reported.
pub async fn finish(child: tokio::process::Child) -> Result<PathStat, ArchiveError> {
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| ArchiveError::Failed(format!("archive helper: {e}")))?;
    let text = String::from_utf8_lossy(&out.stderr);
    let report = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Report>(l).ok());
    match report {
        Some(Report::Stat(s)) if out.status.success() => Ok(s),
        Some(Report::NotFound(m)) => Err(ArchiveError::NotFound(m)),
        Some(Report::Invalid(m)) => Err(ArchiveError::Invalid(m)),
        Some(Report::Failed(m)) => Err(ArchiveError::Failed(m)),
        _ => Err(ArchiveError::Failed(format!(
            "archive helper exited with {}: {}",
            out.status,
            text.trim()
        ))),
    }
}

/// The helper's whole life; the process exit code.
pub fn run_helper() -> u8 {
    let report = helper().unwrap_or_else(|r| r);
    let ok = matches!(report, Report::Stat(_));
    if let Ok(line) = serde_json::to_string(&report) {
        let _ = writeln!(io::stderr(), "{line}");
    }
    if ok { 0 } else { 1 }
}

fn helper() -> Result<Report, Report> {
    let var = |k: &str| std::env::var(k).map_err(|_| Report::Invalid(format!("{k} not set")));
    let (op, root, path) = (var(OP_ENV)?, var(ROOT_ENV)?, var(PATH_ENV)?);
    let keep_owners = std::env::var(OWNERS_ENV).is_ok_and(|v| v == "1");
    let no_dir_swap = std::env::var(NO_DIR_SWAP_ENV).is_ok_and(|v| v == "1");
    let contents = std::env::var(CONTENTS_ENV).is_ok_and(|v| v == "1");
    let binds: Vec<Bind> = match std::env::var(BINDS_ENV) {
        Ok(text) if !text.is_empty() => {
            serde_json::from_str(&text).map_err(|e| Report::Invalid(format!("{BINDS_ENV}: {e}")))?
        }
        _ => Vec::new(),
    };
    mount_binds(Path::new(&root), &binds)?;
    std::os::unix::fs::chroot(&root).map_err(|e| Report::Failed(format!("chroot {root}: {e}")))?;
    std::env::set_current_dir("/").map_err(|e| Report::Failed(format!("chdir /: {e}")))?;
    let path = container_path(&path);
    let stat = stat(&path)?;
    match op.as_str() {
        "stat" => {}
        "get" => {
            let mut out = io::stdout().lock();
            write_tar(&path, &stat, contents, &mut out)
                .map_err(|e| Report::Failed(format!("archive: {e}")))?;
            out.flush().map_err(|e| Report::Failed(e.to_string()))?;
        }
        "put" => {
            if !stat.is_dir() {
                return Err(Report::Invalid(format!(
                    "extraction point is not a directory: {}",
                    path.display()
                )));
            }
            // dockerd's words for a read-only volume or bind (the tar
            // crate would only say it failed to unpack).
            if nix::sys::statvfs::statvfs(&path)
                .is_ok_and(|v| v.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
            {
                return Err(Report::Invalid(
                    "mounted volume is marked read-only".to_owned(),
                ));
            }
            let mut archive = tar::Archive::new(io::stdin().lock());
            archive.set_preserve_permissions(true);
            archive.set_preserve_mtime(true);
            archive.set_preserve_ownerships(keep_owners);
            archive.set_overwrite(true);
            let failed =
                |e: io::Error| Report::Invalid(format!("extracting into {}: {e}", path.display()));
            if no_dir_swap {
                unpack_keeping_kinds(&mut archive, &path).map_err(|e| match e {
                    Unpack::Io(e) => failed(e),
                    Unpack::KindChange(m) => Report::Invalid(m),
                })?;
            } else {
                archive.unpack(&path).map_err(failed)?;
            }
        }
        other => return Err(Report::Invalid(format!("unknown operation {other}"))),
    }
    Ok(Report::Stat(stat))
}

/// Mounts `binds` under `root` where the container has them, in a mount
/// namespace of this helper's own (nothing is seen outside, and all goes
/// when it exits); shallower destinations first, as a runtime mounts them.
/// A destination is made where it is missing (as a runtime makes it at
/// start); one that leads through a symlink is refused, never followed
/// out of the root.
fn mount_binds(root: &Path, binds: &[Bind]) -> Result<(), Report> {
    use nix::mount::{MsFlags, mount};
    if binds.is_empty() {
        return Ok(());
    }
    let failed = |what: String| move |e: nix::Error| Report::Failed(format!("{what}: {e}"));
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS)
        .map_err(failed("a mount namespace for the copy".into()))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(failed("making the copy's mounts private".into()))?;
    let mut ordered: Vec<&Bind> = binds.iter().collect();
    ordered.sort_by_key(|b| container_path(&b.destination).components().count());
    for b in ordered {
        let inside = container_path(&b.destination);
        let relative = inside.strip_prefix("/").unwrap_or(&inside);
        let mut at = root.to_path_buf();
        for part in relative.components() {
            at.push(part);
            if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Report::Invalid(format!(
                    "the mount point {} leads through a symlink in the container: not copied through",
                    inside.display()
                )));
            }
        }
        let source_is_dir = std::fs::metadata(&b.source).map_or(true, |m| m.is_dir());
        if std::fs::symlink_metadata(&at).is_err() {
            let made = if source_is_dir {
                std::fs::create_dir_all(&at)
            } else {
                at.parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::File::create(&at).map(drop))
            };
            made.map_err(|e| Report::Failed(format!("the mount point {}: {e}", inside.display())))?;
        }
        let what = format!("mounting {} at {}", b.source.display(), inside.display());
        mount(
            Some(&b.source),
            &at,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        )
        .map_err(failed(what.clone()))?;
        if b.read_only {
            mount(
                None::<&str>,
                &at,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
                None::<&str>,
            )
            .map_err(failed(what))?;
        }
    }
    Ok(())
}

enum Unpack {
    Io(io::Error),
    /// A directory would be replaced by a non-directory, or the other way
    /// round: dockerd's words.
    KindChange(String),
}

/// `Archive::unpack`, refusing an entry that would change what kind of
/// thing (directory or not) is at its place; directories made last (so
/// that a read-only one is filled first), as `unpack` does.
fn unpack_keeping_kinds(
    archive: &mut tar::Archive<impl io::Read>,
    dst: &Path,
) -> Result<(), Unpack> {
    let mut directories = Vec::new();
    for entry in archive.entries().map_err(Unpack::Io)? {
        let mut entry = entry.map_err(Unpack::Io)?;
        let name = entry.path().map_err(Unpack::Io)?.into_owned();
        let is_dir = entry.header().entry_type() == tar::EntryType::Directory;
        let at = dst.join(
            container_path(&name.to_string_lossy())
                .strip_prefix("/")
                .unwrap_or(&name),
        );
        if let Ok(there) = std::fs::symlink_metadata(&at) {
            if there.is_dir() && !is_dir {
                return Err(Unpack::KindChange(format!(
                    "cannot overwrite directory {:?} with non-directory {:?}",
                    at.display().to_string(),
                    name.display().to_string()
                )));
            }
            if !there.is_dir() && is_dir {
                return Err(Unpack::KindChange(format!(
                    "cannot overwrite non-directory {:?} with directory {:?}",
                    at.display().to_string(),
                    name.display().to_string()
                )));
            }
        }
        if is_dir {
            directories.push(entry);
        } else {
            entry.unpack_in(dst).map_err(Unpack::Io)?;
        }
    }
    // Deepest first, as `unpack` does.
    directories.sort_by(|a, b| b.path_bytes().cmp(&a.path_bytes()));
    for mut dir in directories {
        dir.unpack_in(dst).map_err(Unpack::Io)?;
    }
    Ok(())
}

/// The path as the container names it, absolute and without `..` above `/`.
fn container_path(path: &str) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in Path::new(path).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

fn stat(path: &Path) -> Result<PathStat, Report> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Report::NotFound(format!(
                "Could not find the file {} in container",
                path.display()
            ))
        } else {
            Report::Failed(format!("stat {}: {e}", path.display()))
        }
    })?;
    let link_target = if meta.file_type().is_symlink() {
        std::fs::read_link(path)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default()
    } else {
        String::new()
    };
    let mut mode = meta.mode() & 0o7777;
    if meta.is_dir() {
        mode |= GO_MODE_DIR;
    }
    if meta.file_type().is_symlink() {
        mode |= GO_MODE_SYMLINK;
    }
    Ok(PathStat {
        name: path
            .file_name()
            .map_or_else(|| "/".to_owned(), |n| n.to_string_lossy().into_owned()),
        size: i64::try_from(meta.size()).unwrap_or(i64::MAX),
        mode,
        mtime: holdfast_rfc3339::format_nanos(meta.mtime().saturating_mul(1_000_000_000)),
        link_target,
    })
}

/// The path as a tar stream named by its last component, as dockerd sends
/// it; a directory with everything in it, symlinks as links.
fn write_tar(path: &Path, stat: &PathStat, contents: bool, out: impl Write) -> io::Result<()> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let name = if stat.name == "/" || contents {
        "."
    } else {
        stat.name.as_str()
    };
    if path == Path::new("/") {
        // The whole filesystem: what is mounted on it inside the container
        // (proc, sys, dev, volumes) is not the container's own, as with
        // dockerd's export of the rootfs; the mount points stay, empty.
        let device = std::fs::symlink_metadata(path)?.dev();
        append_one_filesystem(&mut builder, device, path, Path::new(name))?;
    } else if stat.is_dir() {
        builder.append_dir_all(name, path)?;
    } else {
        builder.append_path_with_name(path, name)?;
    }
    builder.into_inner()?.flush()
}

fn append_one_filesystem(
    builder: &mut tar::Builder<impl Write>,
    device: u64,
    dir: &Path,
    name: &Path,
) -> io::Result<()> {
    builder.append_path_with_name(dir, name)?;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let child = name.join(entry.file_name());
        // A running container's files may go while we walk.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let result = if meta.is_dir() && meta.dev() == device {
            append_one_filesystem(builder, device, &path, &child)
        } else {
            builder.append_path_with_name(&path, &child)
        };
        match result {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn container_paths_stay_under_the_root() {
        assert_eq!(container_path("etc/hosts"), Path::new("/etc/hosts"));
        assert_eq!(container_path("/../../etc/./x/.."), Path::new("/etc"));
        assert_eq!(container_path(""), Path::new("/"));
    }

    #[test]
    fn go_mode_bits_mark_directories() {
        let s = PathStat {
            name: "d".into(),
            size: 0,
            mode: 0o755 | GO_MODE_DIR,
            mtime: String::new(),
            link_target: String::new(),
        };
        assert!(s.is_dir());
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["linkTarget"], "");
        assert_eq!(json["mode"], 0o755 | GO_MODE_DIR);
    }
}
