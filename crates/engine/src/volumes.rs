//! The volume executor: local volumes' directories, a directory per volume
//! under `<data root>/volumes`, its data in `<name>/_data` (bind-mounted
//! into containers) and what it was made with in `<name>/volume.json`
//! (written atomically, so the volumes a crash left are found again).
//!
//! Which volumes exist, who uses them and when one is made, filled or
//! removed is the core's decision ([`holdfast_core::VolumeCall`]); this
//! module only carries it out. Each call is idempotent: the core issues it
//! again after a crash.

use crate::archive::{self, ArchiveError, Op};
use holdfast_core::{Done, Failure, FailureKind, FoundVolume, VolumeCall, WallTime};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

const META_FILE: &str = "volume.json";
const DATA_DIR: &str = "_data";
/// A fill's own journal, beside the data: while it exists, a fill is under
/// way (or was cut by a crash) and is finished by the next.
const FILLING_MARK: &str = ".filling";
/// Where a fill unpacks before it moves what it made into the data.
const FILL_STAGING: &str = "_fill";

pub use holdfast_core::volume::ANONYMOUS_LABEL;

/// What `volume.json` holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    name: String,
    labels: BTreeMap<String, String>,
    /// RFC 3339.
    created_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("{0}")]
    Invalid(String),
}

/// dockerd's rule for volume names (the core's): `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
pub fn validate_name(name: &str) -> Result<(), VolumeError> {
    holdfast_core::volume::validate_volume_name(name).map_err(VolumeError::Invalid)
}

#[derive(Debug)]
pub struct Volumes {
    root: PathBuf,
}

impl Volumes {
    pub fn new(root: PathBuf) -> Volumes {
        Volumes { root }
    }

    /// Where a volume's data is: what containers mount.
    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.join(name).join(DATA_DIR)
    }

    /// `VolumeCall::Create`: the directory and its file (nothing if made).
    pub fn make(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        created_at: WallTime,
    ) -> Result<Done, Failure> {
        validate_name(name).map_err(|e| Failure::new(FailureKind::Invalid, e.to_string()))?;
        let dir = self.root.join(name);
        if dir.join(META_FILE).exists() {
            return Ok(Done::Ok);
        }
        std::fs::create_dir_all(dir.join(DATA_DIR)).map_err(io(format!("create volume {name}")))?;
        let meta = Meta {
            name: name.to_owned(),
            labels: labels.clone(),
            created_at: holdfast_rfc3339::format_nanos_go(created_at.as_unix_nanos()),
        };
        let json = serde_json::to_vec_pretty(&meta)
            .map_err(|e| Failure::new(FailureKind::Other, format!("volume {name}: {e}")))?;
        // Written whole or not at all: a volume without its file is not one.
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp).map_err(io(format!("write {}", tmp.display())))?;
        f.write_all(&json)
            .and_then(|()| f.sync_all())
            .map_err(io(format!("write {}", tmp.display())))?;
        std::fs::rename(&tmp, dir.join(META_FILE)).map_err(io(format!("create volume {name}")))?;
        Ok(Done::Ok)
    }

    /// `VolumeCall::Remove`: the directory and everything in it (nothing
    /// if gone). The file first: a half-removed volume is not found again.
    pub fn remove(&self, name: &str) -> Result<Done, Failure> {
        if validate_name(name).is_err() {
            return Ok(Done::Ok);
        }
        let dir = self.root.join(name);
        for result in [
            std::fs::remove_file(dir.join(META_FILE)),
            std::fs::remove_dir_all(&dir),
        ] {
            match result {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(io(format!("remove volume {name}"))(e));
                }
                _ => {}
            }
        }
        Ok(Done::Ok)
    }

    /// `VolumeCall::Fill`: what `root` (a container's root, mounted) has at
    /// `path` goes into the volume, if the volume is empty (as dockerd
    /// fills a volume at a container's create), owners and modes kept.
    /// Resumable: unpacked aside first, then each top-level entry moved in
    /// whole; one cut by a crash (its mark left) is finished by the next.
    pub async fn fill(&self, name: &str, root: &Path, path: &str) -> Result<Done, Failure> {
        let dir = self.root.join(name);
        let data = dir.join(DATA_DIR);
        let mark = dir.join(FILLING_MARK);
        let empty = std::fs::read_dir(&data)
            .map_err(io(format!("read {}", data.display())))?
            .next()
            .is_none();
        if !empty && !mark.exists() {
            return Ok(Done::Ok);
        }
        std::fs::write(&mark, b"").map_err(io(format!("write {}", mark.display())))?;
        let staging = dir.join(FILL_STAGING);
        match std::fs::remove_dir_all(&staging) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(io(format!("remove {}", staging.display()))(e));
            }
            _ => {}
        }
        std::fs::create_dir_all(&staging).map_err(io(format!("create {}", staging.display())))?;
        let failed = |m: String| Failure::new(FailureKind::Other, m);
        let mut child = archive::spawn(Op::GetContents, root, &[], path)
            .map_err(|e| failed(format!("archive helper: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("archive helper without stdout".to_owned()))?;
        let stdout = std::fs::File::from(
            stdout
                .into_owned_fd()
                .map_err(|e| failed(format!("archive helper: {e}")))?,
        );
        let target = staging.clone();
        let unpacked = tokio::task::spawn_blocking(move || {
            let mut archive = tar::Archive::new(stdout);
            archive.set_preserve_permissions(true);
            archive.set_preserve_ownerships(true);
            archive.set_preserve_mtime(true);
            archive.unpack(&target)
        })
        .await
        .map_err(|e| failed(e.to_string()))?;
        match archive::finish(child).await {
            // Nothing at that path in the image: the volume stays empty.
            Err(ArchiveError::NotFound(_)) => {}
            Err(e) => return Err(failed(format!("filling volume {name} from the image: {e}"))),
            Ok(_) => unpacked
                .map_err(|e| failed(format!("filling volume {name} from the image: {e}")))?,
        }
        let entries =
            std::fs::read_dir(&staging).map_err(io(format!("read {}", staging.display())))?;
        for entry in entries {
            let entry = entry.map_err(io(format!("read {}", staging.display())))?;
            let into = data.join(entry.file_name());
            // Moved before a crash: kept as it is.
            if std::fs::symlink_metadata(&into).is_err() {
                std::fs::rename(entry.path(), &into)
                    .map_err(io(format!("move into {}", into.display())))?;
            }
        }
        std::fs::remove_dir_all(&staging).map_err(io(format!("remove {}", staging.display())))?;
        std::fs::remove_file(&mark).map_err(io(format!("remove {}", mark.display())))?;
        Ok(Done::Ok)
    }

    /// Every volume on disk: the volume side's relist, for the core at
    /// start-up.
    pub fn found(&self) -> Vec<FoundVolume> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<FoundVolume> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                validate_name(&name).ok()?;
                let bytes = std::fs::read(self.root.join(&name).join(META_FILE)).ok()?;
                let meta: Meta = serde_json::from_slice(&bytes).ok()?;
                let created_at = holdfast_rfc3339::parse_nanos(&meta.created_at)
                    .and_then(|n| i64::try_from(n).ok())
                    .map_or(WallTime::from_unix_nanos(0), WallTime::from_unix_nanos);
                Some(FoundVolume {
                    name,
                    labels: meta.labels,
                    created_at,
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Carries out a `Create` or `Remove` (a `Fill` needs the container's
    /// root: see the engine).
    pub fn carry_out(&self, call: &VolumeCall) -> Result<Done, Failure> {
        match call {
            VolumeCall::Create { name, labels } => {
                self.make(name, labels, crate::engine::wall_now())
            }
            VolumeCall::Remove { name } => self.remove(name),
            VolumeCall::Fill { .. } => Err(Failure::new(
                FailureKind::Other,
                "a fill is carried out with its container's root",
            )),
        }
    }
}

fn io(what: String) -> impl FnOnce(io::Error) -> Failure {
    move |e| Failure::new(FailureKind::Other, format!("{what}: {e}"))
}

/// Anonymous volumes are named like container ids: 64 hex digits.
pub fn is_anonymous_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The volume name a mount source names, when it is not a host path.
pub fn volume_of_source(source: &str) -> Option<&str> {
    (!source.is_empty() && !Path::new(source).is_absolute()).then_some(source)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_volume_is_made_once_found_again_and_removed_idempotently() {
        let dir = tempfile::tempdir().unwrap();
        let vols = Volumes::new(dir.path().join("volumes"));
        assert!(vols.found().is_empty());
        let labels = BTreeMap::from([("a".to_owned(), "b".to_owned())]);
        let at = WallTime::from_unix_nanos(1_700_000_000_000_000_000);
        vols.make("data", &labels, at).unwrap();
        std::fs::write(vols.data_dir("data").join("f"), "x").unwrap();
        // Made again (after a crash): nothing changes, its data stays.
        vols.make("data", &BTreeMap::new(), at).unwrap();
        assert!(vols.data_dir("data").join("f").exists());
        let found = vols.found();
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].labels.clone(), found[0].created_at), (labels, at));
        assert_eq!(
            vols.make("-bad", &BTreeMap::new(), at).map_err(|f| f.kind),
            Err(FailureKind::Invalid)
        );
        vols.remove("data").unwrap();
        assert!(!dir.path().join("volumes/data").exists());
        vols.remove("data").unwrap();
        vols.remove("../etc").unwrap();
        assert!(vols.found().is_empty());
    }
}
