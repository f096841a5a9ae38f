//! `docker commit`: what the container changed as one more layer over its
//! image, with the container's settings as the new image's config, made by
//! the engine's images backend; here the request is read.

use super::images::new_image_name;
use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_engine::backend::images::CommitRequest;
use serde_json::{Value, json};

/// `POST /commit?container=..&repo=..&tag=..&comment=..&author=..`
pub async fn commit(
    State(state): State<ApiState>,
    query: RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let changes = super::params::changes_of(query.0.as_deref());
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    let empty = match &body {
        Value::Null => true,
        Value::Object(o) => o.values().all(Value::is_null),
        _ => false,
    };
    if !empty {
        return Err(ApiError::bad_request(
            "a config in the commit request body is not supported by holdfast yet",
        ));
    }
    let reference = p
        .str("container")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing parameter container"))?;
    let name = new_image_name(&p, "a commit")?;
    let request = CommitRequest {
        container: reference.to_owned(),
        name,
        changes,
        author: p.str("author").unwrap_or_default().to_owned(),
        comment: p.str("comment").unwrap_or_default().to_owned(),
        // As dockerd: the container is frozen while its changes are read,
        // unless asked otherwise.
        pause: p.str("pause").is_none_or(|_| p.bool("pause")),
    };
    let image_id = state.engine.images().commit(request).await?;
    Ok((StatusCode::CREATED, Json(json!({ "Id": image_id }))).into_response())
}
