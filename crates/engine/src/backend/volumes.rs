//! `docker volume` and the volumes of `docker run -v`: named volumes made
//! on first use, anonymous ones for `-v /path` and the image's `VOLUME`s, a
//! new (empty) volume filled with what the image has at its mount point, as
//! dockerd does; removal refused while any container's record names the
//! volume (running or not).

use crate::archive::{self, ArchiveError, Op};
use crate::engine::EngineHandle;
use crate::refusal::{conflict, internal};
use crate::volumes::{ANONYMOUS_LABEL, Volume};
use holdfast_adapter_containerd::ImageConfig;
use holdfast_core::{BindMount, ContainerConfig, ContainerId, RequestError};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The volumes backend: see the module docs.
#[derive(Debug)]
pub struct Volumes<'a> {
    engine: &'a EngineHandle,
}

/// A volume as the API shows it: what it was created with, where its data
/// is, and the containers whose records name it.
#[derive(Clone, Debug)]
pub struct VolumeDetails {
    pub volume: Volume,
    pub mountpoint: PathBuf,
    pub users: Vec<ContainerId>,
}

/// A new container's volumes still to be filled from its image: each
/// volume's name and where it is mounted.
#[derive(Debug, Default)]
pub struct ToFill(Vec<(String, String)>);

impl<'a> Volumes<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Volumes<'a> {
        Volumes { engine }
    }

    /// Every volume, by name.
    pub async fn list(&self) -> Result<Vec<VolumeDetails>, RequestError> {
        let mut users = self.users().await?;
        Ok(self
            .engine
            .services
            .volumes
            .list()?
            .into_iter()
            .map(|volume| {
                let users = users.remove(&volume.name).unwrap_or_default();
                self.details(volume, users)
            })
            .collect())
    }

    /// `docker volume create`: the volume named (a new name when none is),
    /// made unless it exists.
    pub fn create(
        &self,
        name: Option<String>,
        labels: &BTreeMap<String, String>,
    ) -> Result<VolumeDetails, RequestError> {
        let name = match name {
            Some(n) => n,
            None => random_name()?,
        };
        let (volume, _) = self.engine.services.volumes.ensure(&name, labels, &now())?;
        Ok(self.details(volume, Vec::new()))
    }

    /// `docker volume inspect`.
    pub fn inspect(&self, name: &str) -> Result<VolumeDetails, RequestError> {
        let volume = self.engine.services.volumes.get(name)?;
        Ok(self.details(volume, Vec::new()))
    }

    /// `docker volume rm`: refused (409) while a container (in any state)
    /// names it.
    pub async fn remove(&self, name: &str) -> Result<(), RequestError> {
        let store = &self.engine.services.volumes;
        store.get(name)?;
        if let Some(ids) = self.users().await?.get(name) {
            let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
            return Err(conflict(format!(
                "remove {name}: volume is in use - [{}]",
                ids.join(", ")
            )));
        }
        store.remove(name)?;
        Ok(())
    }

    /// `docker volume prune`: every volume `wanted` picks that no container
    /// names; the names of those removed.
    pub async fn prune(
        &self,
        wanted: impl Fn(&Volume) -> bool,
    ) -> Result<Vec<String>, RequestError> {
        let store = &self.engine.services.volumes;
        let used = self.users().await?;
        let mut deleted = Vec::new();
        for v in store.list()? {
            if wanted(&v) && !used.contains_key(&v.name) {
                store.remove(&v.name)?;
                deleted.push(v.name);
            }
        }
        Ok(deleted)
    }

    /// Gives every volume mount of `config` its volume (created when
    /// missing, anonymous ones named now) and adds the image's `VOLUME`s not
    /// mounted otherwise. Returns the volumes that are empty, to fill after
    /// create.
    pub fn resolve_mounts(
        &self,
        config: &mut ContainerConfig,
        image: &ImageConfig,
    ) -> Result<ToFill, RequestError> {
        let store = &self.engine.services.volumes;
        for path in image.volumes.iter().flatten() {
            if path.starts_with('/') && !config.mounts.iter().any(|m| &m.destination == path) {
                config.mounts.push(BindMount {
                    source: String::new(),
                    destination: path.clone(),
                    read_only: false,
                    volume: Some(String::new()),
                    anonymous: false,
                });
            }
        }
        let mut fill = ToFill::default();
        for m in &mut config.mounts {
            let Some(name) = m.volume.as_mut() else {
                continue;
            };
            let mut labels = BTreeMap::new();
            if name.is_empty() {
                *name = random_name()?;
                labels.insert(ANONYMOUS_LABEL.to_owned(), String::new());
            }
            store.ensure(name, &labels, &now())?;
            m.source = store.data_dir(name).to_string_lossy().into_owned();
            if store.is_empty(name) {
                fill.0.push((name.clone(), m.destination.clone()));
            }
        }
        Ok(fill)
    }

    /// Copies what the new container's image has at each mount point into
    /// its empty volume (owners and modes kept). Before the container
    /// first starts.
    pub async fn fill_from_image(
        &self,
        id: &ContainerId,
        fill: ToFill,
    ) -> Result<(), RequestError> {
        if fill.0.is_empty() {
            return Ok(());
        }
        let services = &self.engine.services;
        let root = crate::rootfs::mounted_root(&services.adapter, &services.mount_dir, id).await?;
        let internal = |message: String| internal(message);
        for (name, destination) in fill.0 {
            let mut child = archive::spawn(Op::GetContents, root.path(), &destination, false)
                .map_err(|e| internal(format!("archive helper: {e}")))?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| internal("archive helper without stdout".to_owned()))?;
            let stdout = std::fs::File::from(
                stdout
                    .into_owned_fd()
                    .map_err(|e| internal(format!("archive helper: {e}")))?,
            );
            let target = services.volumes.data_dir(&name);
            let unpacked = tokio::task::spawn_blocking(move || {
                let mut archive = tar::Archive::new(stdout);
                archive.set_preserve_permissions(true);
                archive.set_preserve_ownerships(true);
                archive.set_preserve_mtime(true);
                archive.unpack(&target)
            })
            .await
            .map_err(|e| internal(e.to_string()))?;
            let finished = archive::finish(child).await;
            tracing::debug!(volume = %name, %destination, ?finished, ?unpacked, "filled from the image");
            match finished {
                // Nothing at that path in the image: the volume stays empty.
                Err(ArchiveError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
                Ok(_) => unpacked
                    .map_err(|e| internal(format!("filling volume {name} from the image: {e}")))?,
            }
        }
        Ok(())
    }

    /// After `docker rm -v`: the container's anonymous volumes that no
    /// other container uses.
    pub async fn remove_anonymous(&self, mounts: &[BindMount]) -> Result<(), RequestError> {
        let store = &self.engine.services.volumes;
        let used = self.users().await?;
        for name in mounts.iter().filter_map(|m| m.volume.as_ref()) {
            if used.contains_key(name) {
                continue;
            }
            match store.get(name) {
                Ok(v) if v.anonymous() => store.remove(name)?,
                _ => {}
            }
        }
        Ok(())
    }

    fn details(&self, volume: Volume, users: Vec<ContainerId>) -> VolumeDetails {
        VolumeDetails {
            mountpoint: self.engine.services.volumes.data_dir(&volume.name),
            volume,
            users,
        }
    }

    /// Which containers name each volume in their mounts.
    pub(crate) async fn users(&self) -> Result<BTreeMap<String, Vec<ContainerId>>, RequestError> {
        let pairs: Vec<(String, ContainerId)> = self
            .engine
            .read(|v| {
                v.core
                    .containers()
                    .flat_map(|c| {
                        let id = c.record.id.clone();
                        c.record
                            .config
                            .mounts
                            .iter()
                            .filter_map(|m| m.volume.clone())
                            .map(move |name| (name, id.clone()))
                            .collect::<Vec<_>>()
                    })
                    .collect()
            })
            .await?;
        let mut map: BTreeMap<String, Vec<ContainerId>> = BTreeMap::new();
        for (name, id) in pairs {
            map.entry(name).or_default().push(id);
        }
        Ok(map)
    }
}

/// A new volume's name: 64 hex digits from 32 random bytes.
pub(crate) fn random_name() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for a volume name: {e}")))?;
    Ok(hex::encode(bytes))
}

/// Now, as a volume's `CreatedAt`.
pub(crate) fn now() -> String {
    holdfast_rfc3339::format_nanos_go(crate::engine::wall_now().as_unix_nanos())
}
