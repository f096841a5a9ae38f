//! `docker container prune`: removes every container that is not running
//! (created or exited), through the core's ordinary remove, so each removal
//! is recorded and carried out like `docker rm`.

use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_core::{Answer, Command, ContainerId, Status, WallTime};
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
    let until: Vec<WallTime> = filters
        .get("until")
        .iter()
        .map(|u| {
            super::render::parse_client_time(u)
                .ok_or_else(|| ApiError::bad_request(format!("invalid filter 'until={u}'")))
        })
        .collect::<Result<_, _>>()?;
    let labels_match = |labels: &BTreeMap<String, String>| {
        let has = |l: &String| match l.split_once('=') {
            Some((k, v)) => labels.get(k).is_some_and(|have| have == v),
            None => labels.contains_key(l),
        };
        filters.get("label").iter().all(has) && !filters.get("label!").iter().any(has)
    };
    let now = wall_now();
    let stopped: Vec<(ContainerId, WallTime, BTreeMap<String, String>)> = state
        .engine
        .read(|v| {
            v.core
                .containers()
                .filter(|c| matches!(c.status, Status::Created | Status::Exited))
                .map(|c| {
                    let r = &c.record;
                    (r.id.clone(), r.created_at, r.config.labels.clone())
                })
                .collect()
        })
        .await?;
    let candidates = stopped
        .into_iter()
        .filter(|(_, created, labels)| {
            labels_match(labels) && until.iter().all(|u| created < u && *u <= now)
        })
        .map(|(id, _, _)| id);
    let mut deleted = Vec::new();
    for id in candidates {
        // A container started since the read is refused by the core: skipped.
        match state
            .engine
            .command(Command::Remove {
                id: id.clone(),
                force: false,
            })
            .await
        {
            Answer::Done => deleted.push(id.to_string()),
            other => tracing::debug!(container = %id, answer = ?other, "not pruned"),
        }
    }
    Ok(Json(json!({ "ContainersDeleted": deleted, "SpaceReclaimed": 0 })).into_response())
}

/// `POST /images/prune?filters={"dangling":["false"]}`: `docker image
/// prune` removes dangling images, `-a` every image no container uses.
/// containerd's image store has no untagged images (an image goes with its
/// last name), so there is never a dangling one to remove.
pub async fn images(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["dangling"])?;
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
    let (removed, reclaimed) = state.engine.images().prune(dangling_only).await?;
    let deleted: Vec<_> = removed.iter().map(super::images::removed_json).collect();
    Ok(Json(json!({ "ImagesDeleted": deleted, "SpaceReclaimed": reclaimed })).into_response())
}
