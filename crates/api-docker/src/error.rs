//! One error type for every handler: `{"message": ...}` with dockerd's status.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{ErrorKind, RequestError};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// What is not built yet says so (podman's `unsupported.go` idea).
    pub fn not_implemented(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_IMPLEMENTED, message)
    }
}

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

/// A direct adapter call's failure (exec, resize), by what containerd said.
impl From<holdfast_adapter_containerd::AdapterError> for ApiError {
    fn from(e: holdfast_adapter_containerd::AdapterError) -> ApiError {
        use holdfast_core::FailureKind;
        let status = match e.kind() {
            FailureKind::NotFound => StatusCode::NOT_FOUND,
            FailureKind::Invalid => StatusCode::BAD_REQUEST,
            FailureKind::AlreadyExists | FailureKind::FailedPrecondition => StatusCode::CONFLICT,
            FailureKind::Unavailable | FailureKind::Deadline => StatusCode::SERVICE_UNAVAILABLE,
            FailureKind::Other => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError::new(status, e.to_string())
    }
}

impl From<holdfast_engine::engine::EngineGone> for ApiError {
    fn from(e: holdfast_engine::engine::EngineGone) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, message = %self.message, "request failed");
        } else {
            tracing::debug!(status = %self.status, message = %self.message, "request refused");
        }
        (
            self.status,
            Json(serde_json::json!({ "message": self.message })),
        )
            .into_response()
    }
}
