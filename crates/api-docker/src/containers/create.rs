//! `POST /containers/create`: the body decoded (`create_body.rs`), the
//! container made by the engine's containers backend.

use super::create_body::parse_create;
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_engine::backend::containers::NewContainer;
use serde_json::json;

/// `POST /containers/create?name=..&platform=..`
pub async fn create(
    State(state): State<ApiState>,
    query: RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let new = NewContainer {
        platform: p.str("platform").map(str::to_owned),
        name: p.str("name").filter(|n| !n.is_empty()).map(str::to_owned),
        ..parse_create(&body)?
    };
    let created = state.engine.containers().create(new).await?;
    let body = json!({ "Id": created.id.to_string(), "Warnings": created.warnings });
    Ok((StatusCode::CREATED, Json(body)).into_response())
}
