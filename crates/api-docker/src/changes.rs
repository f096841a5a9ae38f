//! `docker diff`: what the container changed, as the engine reads it from
//! its overlay snapshot.

use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// `GET /containers/{id}/changes`
pub async fn diff(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let list = state.engine.containers().changes(&reference).await?;
    let body: Vec<_> = list
        .into_iter()
        .map(|(path, kind)| json!({ "Path": path, "Kind": kind }))
        .collect();
    Ok(Json(body).into_response())
}
