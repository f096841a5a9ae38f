//! What the engine answers when it refuses a request or fails it: the
//! core's [`RequestError`] kinds (an API maps each onto its status in one
//! place), made from what the adapter, the volumes, the network and the
//! archive helper said.

use crate::archive::ArchiveError;
use crate::network::DefError;
use crate::volumes::VolumeError;
use holdfast_core::{ErrorKind, FailureKind, RequestError};

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

impl From<ArchiveError> for RequestError {
    fn from(e: ArchiveError) -> RequestError {
        let (kind, message) = match e {
            ArchiveError::NotFound(m) => (ErrorKind::NotFound, m),
            ArchiveError::Invalid(m) => (ErrorKind::Invalid, m),
            ArchiveError::Failed(m) => (ErrorKind::Internal, m),
        };
        RequestError::new(kind, message)
    }
}

impl From<VolumeError> for RequestError {
    fn from(e: VolumeError) -> RequestError {
        let kind = match e {
            VolumeError::Invalid(_) => ErrorKind::Invalid,
        };
        RequestError::new(kind, e.to_string())
    }
}

impl From<DefError> for RequestError {
    fn from(e: DefError) -> RequestError {
        let kind = match e {
            DefError::Invalid(_) => ErrorKind::Invalid,
            DefError::Conflict(_) => ErrorKind::Conflict,
            DefError::Other(_) => ErrorKind::Internal,
        };
        RequestError::new(kind, e.to_string())
    }
}
