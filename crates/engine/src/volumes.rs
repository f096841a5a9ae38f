//! Local volumes: a directory per volume under `<data root>/volumes`, its
//! data in `<name>/_data` (bind-mounted into containers) and what it was
//! created with in `<name>/volume.json`, written atomically. They live on
//! the data root, so they outlast holdfastd, containerd and containers.
//!
//! Which containers use a volume is not stored here: the containers'
//! records say it (their mounts name the volume), and the API reads them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

const META_FILE: &str = "volume.json";
const DATA_DIR: &str = "_data";
/// dockerd's label on volumes created for one container (`-v /path`, an
/// image's `VOLUME`): what `rm -v` and a plain `volume prune` remove.
pub const ANONYMOUS_LABEL: &str = "com.docker.volume.anonymous";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Volume {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// RFC 3339.
    pub created_at: String,
}

impl Volume {
    pub fn anonymous(&self) -> bool {
        self.labels.contains_key(ANONYMOUS_LABEL)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("{0}")]
    Invalid(String),
    #[error("get {0}: no such volume")]
    NotFound(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> VolumeError {
    let what = what.into();
    move |source| VolumeError::Io { what, source }
}

/// dockerd's rule for volume names: `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
pub fn validate_name(name: &str) -> Result<(), VolumeError> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if first && rest && name.len() >= 2 && name.len() <= 255 {
        Ok(())
    } else {
        Err(VolumeError::Invalid(format!(
            "create {name}: \"{name}\" includes invalid characters for a local volume name, only \"[a-zA-Z0-9][a-zA-Z0-9_.-]\" are allowed. If you intended to pass a host directory, use absolute path"
        )))
    }
}

#[derive(Debug)]
pub struct Volumes {
    root: PathBuf,
    /// Creation and removal one at a time, so two creates of one name agree.
    lock: std::sync::Mutex<()>,
}

impl Volumes {
    pub fn new(root: PathBuf) -> Volumes {
        Volumes {
            root,
            lock: std::sync::Mutex::new(()),
        }
    }

    pub fn data_dir(&self, name: &str) -> PathBuf {
        self.root.join(name).join(DATA_DIR)
    }

    /// The volume, created when missing (as `docker volume create` and
    /// `-v name:/path` do); whether it was created now.
    pub fn ensure(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
        now: &str,
    ) -> Result<(Volume, bool), VolumeError> {
        validate_name(name)?;
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = self.read(name)? {
            return Ok((v, false));
        }
        let dir = self.root.join(name);
        std::fs::create_dir_all(dir.join(DATA_DIR))
            .map_err(io_err(format!("create volume {name}")))?;
        let volume = Volume {
            name: name.to_owned(),
            labels: labels.clone(),
            created_at: now.to_owned(),
        };
        let json = serde_json::to_vec_pretty(&volume)
            .map_err(|e| VolumeError::Invalid(format!("volume {name}: {e}")))?;
        // Written whole or not at all: a volume without its file is not one.
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        let mut f =
            std::fs::File::create(&tmp).map_err(io_err(format!("write {}", tmp.display())))?;
        f.write_all(&json)
            .and_then(|()| f.sync_all())
            .map_err(io_err(format!("write {}", tmp.display())))?;
        std::fs::rename(&tmp, dir.join(META_FILE))
            .map_err(io_err(format!("create volume {name}")))?;
        Ok((volume, true))
    }

    fn read(&self, name: &str) -> Result<Option<Volume>, VolumeError> {
        let path = self.root.join(name).join(META_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| VolumeError::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(format!("read {}", path.display()))(e)),
        }
    }

    pub fn get(&self, name: &str) -> Result<Volume, VolumeError> {
        if validate_name(name).is_err() {
            return Err(VolumeError::NotFound(name.to_owned()));
        }
        self.read(name)?
            .ok_or_else(|| VolumeError::NotFound(name.to_owned()))
    }

    pub fn list(&self) -> Result<Vec<Volume>, VolumeError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(format!("list {}", self.root.display()))(e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if validate_name(&name).is_ok()
                && let Ok(Some(v)) = self.read(&name)
            {
                out.push(v);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Deletes the volume and its data (the caller checked it is unused).
    pub fn remove(&self, name: &str) -> Result<(), VolumeError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.read(name)?
            .ok_or_else(|| VolumeError::NotFound(name.to_owned()))?;
        let dir = self.root.join(name);
        // The file first: a half-removed volume is no longer listed.
        std::fs::remove_file(dir.join(META_FILE))
            .map_err(io_err(format!("remove volume {name}")))?;
        std::fs::remove_dir_all(&dir).map_err(io_err(format!("remove volume {name}")))
    }

    /// Whether a volume's data directory is empty (a new volume is filled
    /// with what the image has at the mount point, as dockerd does).
    pub fn is_empty(&self, name: &str) -> bool {
        std::fs::read_dir(self.data_dir(name)).is_ok_and(|mut d| d.next().is_none())
    }
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
    fn volumes_are_created_once_listed_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let vols = Volumes::new(dir.path().join("volumes"));
        assert!(vols.list().unwrap().is_empty());
        let labels = BTreeMap::from([("a".to_owned(), "b".to_owned())]);
        let (v, created) = vols.ensure("data", &labels, "t0").unwrap();
        assert!(created && v.labels == labels);
        let (again, created) = vols.ensure("data", &BTreeMap::new(), "t1").unwrap();
        assert!(!created);
        assert_eq!(again, v, "the first create's labels stay");
        assert!(vols.is_empty("data"));
        std::fs::write(vols.data_dir("data").join("f"), "x").unwrap();
        assert!(!vols.is_empty("data"));
        assert_eq!(vols.list().unwrap(), [v]);
        assert!(matches!(
            vols.ensure("-bad", &labels, "t"),
            Err(VolumeError::Invalid(_))
        ));
        assert!(matches!(vols.get("nope"), Err(VolumeError::NotFound(_))));
        assert!(matches!(vols.get("../etc"), Err(VolumeError::NotFound(_))));
        vols.remove("data").unwrap();
        assert!(vols.list().unwrap().is_empty());
        assert!(!dir.path().join("volumes/data").exists());
        assert!(matches!(vols.remove("data"), Err(VolumeError::NotFound(_))));
    }
}
