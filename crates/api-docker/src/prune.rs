//! `docker container prune` and `docker image prune`: the filters read
//! here, the removals made by the engine's backends (each container through
//! the core's ordinary remove, recorded and carried out like `docker rm`).

use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_core::WallTime;
use holdfast_engine::engine::wall_now;
use serde_json::json;
use std::collections::BTreeMap;

/// `POST /containers/prune?filters={"label":[..],"until":[..]}`
pub async fn containers(
    State(state): State<ApiState>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["label", "label!", "until"])?;
    let until = until_of(&filters)?;
    let now = wall_now();
    let (deleted, reclaimed) = state
        .engine
        .containers()
        .prune(|s| {
            let created = s.record.created_at;
            filters.labels_match(&s.record.config.labels)
                && until.iter().all(|u| created < *u && *u <= now)
        })
        .await?;
    Ok(Json(json!({ "ContainersDeleted": deleted, "SpaceReclaimed": reclaimed })).into_response())
}

/// `POST /images/prune?filters={"dangling":["false"]}`: `docker image
/// prune` removes the untagged images no container uses, `-a` every image
/// no container uses.
pub async fn images(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["dangling", "label", "label!", "until"])?;
    let until = until_of(&filters)?;
    let mut dangling_only = true;
    for v in filters.get("dangling") {
        dangling_only = match v.as_str() {
            "true" | "1" => true,
            "false" | "0" => false,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "invalid filter 'dangling={v}'"
                )));
            }
        };
    }
    // `until`: made before then, by the image's own `created` (an image
    // whose config has none is older than any time).
    let no_labels = BTreeMap::new();
    let wanted = |i: &holdfast_engine::backend::images::LocalImage| {
        let created = i
            .resolved
            .created
            .as_deref()
            .and_then(super::render::parse_rfc3339)
            .unwrap_or(WallTime::from_unix_nanos(i64::MIN));
        filters.labels_match(i.resolved.config.labels.as_ref().unwrap_or(&no_labels))
            && until.iter().all(|u| created < *u)
    };
    let (removed, reclaimed) = state.engine.images().prune(dangling_only, wanted).await?;
    let deleted: Vec<_> = removed.iter().map(super::images::removed_json).collect();
    Ok(Json(json!({ "ImagesDeleted": deleted, "SpaceReclaimed": reclaimed })).into_response())
}

/// The `until` filters: each a time as clients write it (RFC 3339, Unix
/// seconds or a duration before now).
fn until_of(filters: &super::params::Filters) -> Result<Vec<WallTime>, ApiError> {
    filters
        .get("until")
        .iter()
        .map(|u| {
            super::render::parse_client_time(u, wall_now())
                .ok_or_else(|| ApiError::bad_request(format!("invalid filter 'until={u}'")))
        })
        .collect()
}
