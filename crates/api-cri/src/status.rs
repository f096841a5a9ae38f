//! Every refusal as the gRPC status kubelet expects: what was invalid is
//! `InvalidArgument` (its message names the field), a missing thing
//! `NotFound`, a name in use `AlreadyExists`, containerd away `Unavailable`.

use holdfast_core::{ErrorKind, RequestError};
use tonic::Status;

/// The core's or a backend's refusal as a gRPC status.
pub(crate) fn status(e: RequestError) -> Status {
    let message = e.message;
    match e.kind {
        ErrorKind::Invalid => Status::invalid_argument(message),
        ErrorKind::NotFound => Status::not_found(message),
        ErrorKind::Conflict | ErrorKind::Forbidden => Status::failed_precondition(message),
        ErrorKind::NotImplemented => Status::unimplemented(message),
        ErrorKind::Unavailable => Status::unavailable(message),
        ErrorKind::Internal | ErrorKind::Cancelled => Status::internal(message),
    }
}

/// A create's refusal: a name in use is `AlreadyExists`, as kubelet
/// expects of a sandbox or container asked for twice.
pub(crate) fn create_status(e: RequestError) -> Status {
    if e.kind == ErrorKind::Conflict && e.message.contains(holdfast_core::NAME_TAKEN) {
        Status::already_exists(e.message)
    } else {
        status(e)
    }
}

/// A request field that is missing or wrong, named.
pub(crate) fn invalid(field: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field}: {why}"))
}

/// A field holdfast cannot honour yet, refused by name rather than
/// accepted and ignored.
pub(crate) fn unsupported(field: &str, why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{field} is not supported by holdfast: {why}"))
}
