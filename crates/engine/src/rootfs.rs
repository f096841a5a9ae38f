//! A container's root filesystem for the length of one request: a running
//! container's through its init (`/proc/<pid>/root`), a stopped one's
//! snapshot, mounted by the core for the request (a hold it records, so a
//! crash never leaves it mounted) and released when the request is done.
//! `docker cp` and `docker export` read it through the archive helper
//! ([`crate::archive`]).

use crate::archive::Bind;
use crate::engine::EngineHandle;
use holdfast_core::{Answer, Command, ContainerConfig, ContainerId, MountSpec, RequestError};
use std::path::{Path, PathBuf};

/// A container's root filesystem for the length of one request.
#[derive(Debug)]
pub enum Root {
    /// `/proc/<pid>/root` of the running init, its mounts in it.
    Live(PathBuf),
    /// The snapshot, mounted here for as long as the hold lasts, and the
    /// container's volumes and binds, which whoever reads it mounts.
    Mounted(PathBuf, Hold, Vec<Bind>),
}

impl Root {
    pub fn path(&self) -> &Path {
        match self {
            Root::Live(p) | Root::Mounted(p, ..) => p,
        }
    }

    /// The volumes and binds to mount in it (none in a live root: they
    /// are there).
    pub fn binds(&self) -> &[Bind] {
        match self {
            Root::Live(_) => &[],
            Root::Mounted(_, _, binds) => binds,
        }
    }
}

/// The volumes and binds of a container, as its runtime spec mounts them.
fn binds_of(config: &ContainerConfig) -> Vec<Bind> {
    let mounts = config.mounts.iter().map(|m| Bind {
        source: PathBuf::from(&m.source),
        destination: m.destination.clone(),
        read_only: m.read_only,
    });
    let specs = config.mount_specs.iter().filter_map(|m| match m {
        MountSpec::Bind {
            source,
            target,
            read_only,
            ..
        } => Some(Bind {
            source: PathBuf::from(source),
            destination: target.clone(),
            read_only: *read_only,
        }),
        MountSpec::Tmpfs { .. } => None,
    });
    mounts.chain(specs).collect()
}

/// The core's hold on a container's mounted snapshot: released (the last
/// one out unmounts it) when dropped.
#[derive(Debug)]
pub struct Hold {
    engine: EngineHandle,
    id: ContainerId,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let (engine, id) = (self.engine.clone(), self.id.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let answer = engine.command(Command::UnmountRootfs { id }).await;
                    if let Answer::Error(e) = answer {
                        tracing::warn!(error = %e, "a copy's hold on a snapshot not released");
                    }
                });
            }
            Err(_) => tracing::warn!(container = %id, "a copy's hold released with no runtime"),
        }
    }
}

/// The root of the container a reference names, for one request: the
/// core says whether its process runs (its root is that one's) or mounts
/// its snapshot and holds it for the request.
pub(crate) async fn root(
    engine: &EngineHandle,
    reference: &str,
) -> Result<(ContainerId, Root), RequestError> {
    let pending = engine
        .container_command_accepted(reference, |id| Command::MountRootfs { id })
        .await?;
    let id = pending.id().clone();
    match pending.answer().await {
        Answer::Rootfs { pid: Some(pid) } => {
            Ok((id, Root::Live(PathBuf::from(format!("/proc/{pid}/root")))))
        }
        Answer::Rootfs { pid: None } => {
            let path = engine.services.adapter.rootfs_dir(&id);
            let hold = Hold {
                engine: engine.clone(),
                id: id.clone(),
            };
            let binds = engine
                .containers()
                .snapshot_of(&id)
                .await
                .map(|s| binds_of(&s.record.config))?;
            Ok((id, Root::Mounted(path, hold, binds)))
        }
        Answer::Error(e) => Err(e),
        other => Err(crate::refusal::internal(format!(
            "unexpected answer to a mount: {other:?}"
        ))),
    }
}
