//! `docker volume` and the volumes of `docker run -v`: what the volume
//! handlers ask, each one command of the core (which records the volumes,
//! decides what is in use and when one is made, filled or removed) or one
//! read of its records.

use crate::engine::EngineHandle;
use crate::refusal::internal;
use holdfast_adapter_containerd::ImageConfig;
use holdfast_core::{
    Answer, BindMount, Command, ContainerConfig, ContainerId, ErrorKind, RequestError,
    ResourceState, VolumeRecord,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The volumes backend: see the module docs.
#[derive(Debug)]
pub struct Volumes<'a> {
    engine: &'a EngineHandle,
}

/// A volume as the API shows it: its record, where its data is, and the
/// containers whose records name it.
#[derive(Clone, Debug)]
pub struct VolumeDetails {
    pub volume: VolumeRecord,
    /// RFC 3339, as dockerd shows `CreatedAt`.
    pub created_at: String,
    pub mountpoint: PathBuf,
    pub users: Vec<ContainerId>,
}

impl<'a> Volumes<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Volumes<'a> {
        Volumes { engine }
    }

    /// Every volume (one being removed is gone already to its user), by name.
    pub async fn list(&self) -> Result<Vec<VolumeDetails>, RequestError> {
        let found = self
            .engine
            .read(|v| {
                v.core
                    .volumes()
                    .filter(|r| r.state != ResourceState::Removing)
                    .map(|r| (r.clone(), v.core.volume_users(&r.name)))
                    .collect::<Vec<_>>()
            })
            .await?;
        Ok(found
            .into_iter()
            .map(|(volume, users)| self.details(volume, users))
            .collect())
    }

    /// `docker volume create`: the volume named (a new name when none is),
    /// made unless it exists.
    pub async fn create(
        &self,
        name: Option<String>,
        labels: &BTreeMap<String, String>,
    ) -> Result<VolumeDetails, RequestError> {
        let name = match name {
            Some(n) => n,
            None => random_name()?,
        };
        let command = Command::CreateVolume {
            name: name.clone(),
            labels: labels.clone(),
        };
        done(self.engine.command(command).await)?;
        self.inspect(&name).await
    }

    /// `docker volume inspect`.
    pub async fn inspect(&self, name: &str) -> Result<VolumeDetails, RequestError> {
        let wanted = name.to_owned();
        let found = self
            .engine
            .read(move |v| {
                v.core
                    .volume(&wanted)
                    .filter(|r| r.state != ResourceState::Removing)
                    .map(|r| (r.clone(), v.core.volume_users(&wanted)))
            })
            .await?;
        let (volume, users) = found.ok_or_else(|| {
            RequestError::new(ErrorKind::NotFound, format!("get {name}: no such volume"))
        })?;
        Ok(self.details(volume, users))
    }

    /// `docker volume rm` (`force`: one that is not there is no error):
    /// refused (409) while a container (in any state) names it.
    pub async fn remove(&self, name: &str, force: bool) -> Result<(), RequestError> {
        let command = Command::RemoveVolume {
            name: name.to_owned(),
            force,
        };
        done(self.engine.command(command).await)
    }

    /// `docker volume prune`: of the volumes `wanted` picks, those no
    /// container names, removed as one decision of the core; the names of
    /// those removed.
    pub async fn prune(
        &self,
        wanted: impl Fn(&VolumeRecord) -> bool,
    ) -> Result<Vec<String>, RequestError> {
        let names = self
            .list()
            .await?
            .into_iter()
            .filter(|d| wanted(&d.volume))
            .map(|d| d.volume.name)
            .collect();
        match self.engine.command(Command::PruneVolumes { names }).await {
            Answer::Pruned(removed) => Ok(removed),
            Answer::Error(e) => Err(e),
            other => Err(internal(format!("unexpected answer to a prune: {other:?}"))),
        }
    }

    /// Names the volume of every volume mount of `config` (anonymous ones
    /// get a new name, and are made as anonymous by the core) and points
    /// it at that volume's data; adds the image's `VOLUME`s not mounted
    /// otherwise. Making and filling the volumes is the core's, with the
    /// container's create.
    pub fn resolve_mounts(
        &self,
        config: &mut ContainerConfig,
        image: &ImageConfig,
    ) -> Result<(), RequestError> {
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
        for m in &mut config.mounts {
            let Some(name) = m.volume.as_mut() else {
                continue;
            };
            if name.is_empty() {
                *name = random_name()?;
                m.anonymous = true;
            }
            m.source = store.data_dir(name).to_string_lossy().into_owned();
        }
        Ok(())
    }

    fn details(&self, volume: VolumeRecord, users: Vec<ContainerId>) -> VolumeDetails {
        VolumeDetails {
            created_at: holdfast_rfc3339::format_nanos_go(volume.created_at.as_unix_nanos()),
            mountpoint: self.engine.services.volumes.data_dir(&volume.name),
            volume,
            users,
        }
    }
}

/// A command's answer as a result: done, or why not.
pub(crate) fn done(answer: Answer) -> Result<(), RequestError> {
    match answer {
        Answer::Error(e) => Err(e),
        _ => Ok(()),
    }
}

/// A new volume's name: 64 hex digits from 32 random bytes.
pub(crate) fn random_name() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for a volume name: {e}")))?;
    Ok(hex::encode(bytes))
}
