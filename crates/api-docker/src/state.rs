//! What every handler shares: the state it is given (the engine's handle,
//! and through it each family's backend), and the one mapping of what the
//! engine answers onto HTTP: a refusal or a failure by its kind, and a
//! command carried out as the endpoint tells it.

use crate::ApiError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{Answer, ErrorKind, RequestError};
use holdfast_engine::engine::EngineHandle;

/// What every handler may use.
#[derive(Clone, Debug)]
pub struct ApiState {
    pub engine: EngineHandle,
}

/// A refusal or a failure, from the core or from a backend, by its kind.
impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        let status = match e.kind {
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::NotImplemented => StatusCode::NOT_IMPLEMENTED,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Internal | ErrorKind::Cancelled => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.message)
    }
}

/// How an endpoint tells that a command was carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// 204, and 304 when there was nothing to do (dockerd's lifecycle
    /// endpoints: a start of a running container is 304).
    NoContentOrNotModified,
    /// This status, whether or not there was anything to do.
    Always(StatusCode),
}

/// A command's answer as HTTP: see the module docs.
pub(crate) fn respond(answer: Answer, done: Done) -> Result<Response, ApiError> {
    let status = match (answer, done) {
        (Answer::Error(e), _) => return Err(e.into()),
        (Answer::NotModified, Done::NoContentOrNotModified) => StatusCode::NOT_MODIFIED,
        (
            Answer::Done | Answer::Waited { .. } | Answer::Pruned(_) | Answer::Rootfs { .. },
            Done::NoContentOrNotModified,
        ) => StatusCode::NO_CONTENT,
        (_, Done::Always(status)) => status,
    };
    Ok(status.into_response())
}
