//! What each API family asks of the engine, a file per family, in the shape
//! of moby's `api/server/router/*/backend.go`: the narrow interface that
//! family's handlers need, so that a handler only parses, makes one call
//! and renders what it gets. A backend is reached through the engine's
//! handle ([`EngineHandle::containers`], [`EngineHandle::volumes`], ...).
//!
//! A backend refuses or fails with the core's [`RequestError`] kinds (what
//! was invalid, not found, in conflict, unavailable, ...), so that an API
//! maps every answer onto its statuses in one place.
//!
//! [`RequestError`]: holdfast_core::RequestError

pub mod containers;
pub mod execs;
pub mod images;
pub mod networks;
pub mod system;
pub mod volumes;

use crate::engine::EngineHandle;
use crate::events::EventLog;
use crate::execs::Execs as ExecStore;
use crate::network::Network;
use crate::volumes::Volumes as VolumeStore;
use holdfast_adapter_containerd::Adapter;
use holdfast_core::{ErrorKind, FailureKind, RequestError};
use std::path::PathBuf;
use std::sync::Arc;

/// What the backends work with besides the loop, shared by every clone of
/// the handle.
#[derive(Debug)]
pub(crate) struct Services {
    pub(crate) adapter: Adapter,
    pub(crate) network: Network,
    pub(crate) events: Arc<EventLog>,
    pub(crate) volumes: VolumeStore,
    pub(crate) execs: ExecStore,
    /// The data root: where uploads, saves and layers are staged, beside
    /// the image content they become.
    pub(crate) data_root: PathBuf,
    /// Where a stopped container's snapshot is mounted for the length of
    /// one request (`docker cp`, a volume's fill).
    pub(crate) mount_dir: PathBuf,
}

/// A direct adapter call's failure (exec, resize, a snapshot's mounts), by
/// what containerd said.
pub(crate) fn adapter_failure(e: holdfast_adapter_containerd::AdapterError) -> RequestError {
    let kind = match e.kind() {
        FailureKind::NotFound => ErrorKind::NotFound,
        FailureKind::Invalid => ErrorKind::Invalid,
        FailureKind::AlreadyExists | FailureKind::FailedPrecondition => ErrorKind::Conflict,
        FailureKind::Unavailable | FailureKind::Deadline => ErrorKind::Unavailable,
        FailureKind::Other => ErrorKind::Internal,
    };
    RequestError::new(kind, e.to_string())
}

/// The request is not one the engine can take (400).
pub(crate) fn invalid(message: impl Into<String>) -> RequestError {
    RequestError::new(ErrorKind::Invalid, message)
}

/// The request conflicts with what is (409).
pub(crate) fn conflict(message: impl Into<String>) -> RequestError {
    RequestError::new(ErrorKind::Conflict, message)
}

/// Something failed inside the engine or the host (500).
pub(crate) fn internal(message: impl Into<String>) -> RequestError {
    RequestError::new(ErrorKind::Internal, message)
}

impl From<crate::archive::ArchiveError> for RequestError {
    fn from(e: crate::archive::ArchiveError) -> RequestError {
        use crate::archive::ArchiveError;
        let (kind, message) = match e {
            ArchiveError::NotFound(m) => (ErrorKind::NotFound, m),
            ArchiveError::Invalid(m) => (ErrorKind::Invalid, m),
            ArchiveError::Failed(m) => (ErrorKind::Internal, m),
        };
        RequestError::new(kind, message)
    }
}

impl EngineHandle {
    /// `docker container ...`: what is not a command for the core alone.
    pub fn containers(&self) -> containers::Containers<'_> {
        containers::Containers::new(self)
    }

    /// `docker exec`.
    pub fn execs(&self) -> execs::Execs<'_> {
        execs::Execs::new(self)
    }

    /// `docker image ...`, `pull`, `push`, `login`, `commit`.
    pub fn images(&self) -> images::Images<'_> {
        images::Images::new(self)
    }

    /// `docker network`.
    pub fn networks(&self) -> networks::Networks<'_> {
        networks::Networks::new(self)
    }

    /// `docker info`, `version`, `events`, `system df`.
    pub fn system(&self) -> system::System<'_> {
        system::System::new(self)
    }

    /// `docker volume` and the volumes of `docker run -v`.
    pub fn volumes(&self) -> volumes::Volumes<'_> {
        volumes::Volumes::new(self)
    }
}
