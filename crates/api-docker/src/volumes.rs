//! `docker volume`: list, create, inspect, remove and prune, over the
//! engine's volumes backend (which refuses to remove a volume any
//! container's record names).

use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_engine::backend::volumes::VolumeDetails;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(super) fn render(v: &VolumeDetails) -> Value {
    json!({
        "Name": v.volume.name,
        "Driver": "local",
        "Mountpoint": v.mountpoint.to_string_lossy(),
        "CreatedAt": v.created_at,
        "Labels": v.volume.labels,
        "Scope": "local",
        "Options": {},
    })
}

/// `GET /volumes?filters=..`
pub async fn list(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["dangling", "name", "label", "driver"])?;
    let mut out = Vec::new();
    for v in state.engine.volumes().list().await? {
        let dangling = v.users.is_empty();
        let labels = &v.volume.labels;
        let keep = filters.any("name", |n| v.volume.name.contains(n))
            && filters.any("driver", |d| d == "local")
            && filters.any("dangling", |d| matches!(d, "true" | "1") == dangling)
            && filters.labels_match(labels);
        if keep {
            out.push(render(&v));
        }
    }
    Ok(Json(json!({ "Volumes": out, "Warnings": [] })).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct CreateBody {
    name: Option<String>,
    driver: Option<String>,
    driver_opts: Option<BTreeMap<String, String>>,
    labels: Option<BTreeMap<String, String>>,
}

/// `POST /volumes/create`
pub async fn create(State(state): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let b: CreateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CreateBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    if let Some(d) = b
        .driver
        .as_deref()
        .filter(|d| !d.is_empty() && *d != "local")
    {
        return Err(ApiError::bad_request(format!(
            "volume driver {d:?} is not supported by holdfast: only local"
        )));
    }
    if b.driver_opts.as_ref().is_some_and(|o| !o.is_empty()) {
        return Err(ApiError::bad_request(
            "volume driver options (-o) are not supported by holdfast yet",
        ));
    }
    let name = b.name.filter(|n| !n.is_empty());
    let v = state
        .engine
        .volumes()
        .create(name, &b.labels.unwrap_or_default())
        .await?;
    Ok((StatusCode::CREATED, Json(render(&v))).into_response())
}

/// `GET /volumes/{name}`
pub async fn inspect(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let v = state.engine.volumes().inspect(&name).await?;
    Ok(Json(render(&v)).into_response())
}

/// `DELETE /volumes/{name}?force=..`: refused while a container (in any
/// state) uses it; `force`: one that is not there is no error (dockerd's).
pub async fn remove(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let force = Params::parse(&query).bool("force");
    state.engine.volumes().remove(&name, force).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /volumes/prune`: unused anonymous volumes, or all unused ones with
/// the filter `all=true` (API 1.42 on, as dockerd).
pub async fn prune(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["all", "label", "label!"])?;
    let all = filters
        .get("all")
        .iter()
        .any(|v| matches!(v.as_str(), "true" | "1"));
    let deleted = state
        .engine
        .volumes()
        .prune(|v| {
            let has = |l: &String| match l.split_once('=') {
                Some((k, val)) => v.labels.get(k).is_some_and(|have| have == val),
                None => v.labels.contains_key(l),
            };
            (all || v.anonymous())
                && filters.get("label").iter().all(has)
                && !filters.get("label!").iter().any(has)
        })
        .await?;
    Ok(Json(json!({ "VolumesDeleted": deleted, "SpaceReclaimed": 0 })).into_response())
}
