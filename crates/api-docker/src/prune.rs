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
    let mut deleted = Vec::new();
    let mut reclaimed = 0i64;
    if !dangling_only {
        let used: std::collections::BTreeSet<String> = state
            .engine
            .read(|v| {
                v.core
                    .containers()
                    .filter_map(|c| c.record.config.image_id.clone())
                    .collect()
            })
            .await?;
        for image in super::images::local_images(&state).await? {
            let id = image.resolved.config_digest.clone();
            if used.contains(&id) {
                continue;
            }
            let size = state
                .adapter
                .image_unpacked_size(&image.resolved.diff_ids)
                .await
                .unwrap_or(0);
            for name in &image.names {
                state
                    .adapter
                    .delete_image(name)
                    .await
                    .map_err(|e| super::images::image_error(name, e))?;
                let familiar = super::images::familiar(name);
                super::images::publish(&state, "untag", &id, &familiar);
                deleted.push(json!({ "Untagged": familiar }));
            }
            super::images::publish(&state, "delete", &id, &super::images::short_id(&id));
            deleted.push(json!({ "Deleted": id }));
            reclaimed = reclaimed.saturating_add(size);
        }
    }
    Ok(Json(json!({ "ImagesDeleted": deleted, "SpaceReclaimed": reclaimed })).into_response())
}
