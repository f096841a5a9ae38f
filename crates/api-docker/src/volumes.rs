//! `docker volume` and the volumes of `docker run -v`: named volumes made
//! on first use, anonymous ones for `-v /path` and the image's `VOLUME`s, a
//! new (empty) volume filled with what the image has at its mount point, as
//! dockerd does; removal refused while any container's record names the
//! volume.

use super::archive::mounted_root;
use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_adapter_containerd::ImageConfig;
use holdfast_core::{BindMount, ContainerConfig, ContainerId};
use holdfast_engine::archive::{self, Op};
use holdfast_engine::volumes::{ANONYMOUS_LABEL, Volume, VolumeError};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

impl From<VolumeError> for ApiError {
    fn from(e: VolumeError) -> ApiError {
        match e {
            VolumeError::Invalid(m) => ApiError::bad_request(m),
            VolumeError::NotFound(_) => ApiError::not_found(e.to_string()),
            VolumeError::Io { .. } => ApiError::internal(e.to_string()),
        }
    }
}

fn now() -> String {
    super::render::time(holdfast_engine::engine::wall_now())
}

/// A volume's data directories still to be filled from the image.
#[derive(Debug, Default)]
pub struct ToFill(Vec<(String, String)>);

/// Gives every volume mount of `config` its volume (created when missing,
/// anonymous ones named now) and adds the image's `VOLUME`s not mounted
/// otherwise. Returns the volumes that are empty, to fill after create.
pub fn resolve_mounts(
    state: &ApiState,
    config: &mut ContainerConfig,
    image: &ImageConfig,
) -> Result<ToFill, ApiError> {
    for path in image.volumes.iter().flatten() {
        if path.starts_with('/') && !config.mounts.iter().any(|m| &m.destination == path) {
            config.mounts.push(BindMount {
                source: String::new(),
                destination: path.clone(),
                read_only: false,
                volume: Some(String::new()),
            });
        }
    }
    let mut fill = ToFill::default();
    for m in &mut config.mounts {
        let Some(name) = m.volume.as_mut() else {
            continue;
        };
        let mut labels = BTreeMap::new();
        if name.is_empty() {
            *name = random_name()?;
            labels.insert(ANONYMOUS_LABEL.to_owned(), String::new());
        }
        state.volumes.ensure(name, &labels, &now())?;
        m.source = state.volumes.data_dir(name).to_string_lossy().into_owned();
        if state.volumes.is_empty(name) {
            fill.0.push((name.clone(), m.destination.clone()));
        }
    }
    Ok(fill)
}

fn random_name() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for a volume name: {e}")))?;
    Ok(hex::encode(bytes))
}

/// Copies what the new container's image has at each mount point into its
/// empty volume (owners and modes kept). Before the container first starts.
pub async fn fill_from_image(
    state: &ApiState,
    id: &ContainerId,
    fill: ToFill,
) -> Result<(), ApiError> {
    if fill.0.is_empty() {
        return Ok(());
    }
    let root = mounted_root(state, id).await?;
    for (name, destination) in fill.0 {
        let mut child = archive::spawn(Op::GetContents, root.path(), &destination, false)
            .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| ApiError::internal("archive helper without stdout"))?;
        let stdout = std::fs::File::from(
            stdout
                .into_owned_fd()
                .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?,
        );
        let target = state.volumes.data_dir(&name);
        let unpacked = tokio::task::spawn_blocking(move || {
            let mut archive = tar::Archive::new(stdout);
            archive.set_preserve_permissions(true);
            archive.set_preserve_ownerships(true);
            archive.set_preserve_mtime(true);
            archive.unpack(&target)
        })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let finished = archive::finish(child).await;
        tracing::debug!(volume = %name, %destination, ?finished, ?unpacked, "filled from the image");
        match finished {
            // Nothing at that path in the image: the volume stays empty.
            Err(archive::ArchiveError::NotFound(_)) => {}
            Err(e) => return Err(e.into()),
            Ok(_) => unpacked.map_err(|e| {
                ApiError::internal(format!("filling volume {name} from the image: {e}"))
            })?,
        }
    }
    Ok(())
}

/// Which containers name each volume in their mounts.
pub(super) async fn users(
    state: &ApiState,
) -> Result<BTreeMap<String, Vec<ContainerId>>, ApiError> {
    let pairs: Vec<(String, ContainerId)> = state
        .engine
        .read(|v| {
            v.core
                .containers()
                .flat_map(|c| {
                    let id = c.record.id.clone();
                    c.record
                        .config
                        .mounts
                        .iter()
                        .filter_map(|m| m.volume.clone())
                        .map(move |name| (name, id.clone()))
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .await?;
    let mut map: BTreeMap<String, Vec<ContainerId>> = BTreeMap::new();
    for (name, id) in pairs {
        map.entry(name).or_default().push(id);
    }
    Ok(map)
}

pub(super) fn render(state: &ApiState, v: &Volume) -> Value {
    json!({
        "Name": v.name,
        "Driver": "local",
        "Mountpoint": state.volumes.data_dir(&v.name).to_string_lossy(),
        "CreatedAt": v.created_at,
        "Labels": v.labels,
        "Scope": "local",
        "Options": {},
    })
}

/// `GET /volumes?filters=..`
pub async fn list(State(state): State<ApiState>, query: RawQuery) -> Result<Response, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["dangling", "name", "label", "driver"])?;
    let used = users(&state).await?;
    let mut out = Vec::new();
    for v in state.volumes.list()? {
        let dangling = !used.contains_key(&v.name);
        let keep = filters.any("name", |n| v.name.contains(n))
            && filters.any("driver", |d| d == "local")
            && filters.any("dangling", |d| matches!(d, "true" | "1") == dangling)
            && filters
                .get("label")
                .iter()
                .all(|l| match l.split_once('=') {
                    Some((k, val)) => v.labels.get(k).is_some_and(|have| have == val),
                    None => v.labels.contains_key(l),
                });
        if keep {
            out.push(render(&state, &v));
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
    let name = match b.name.filter(|n| !n.is_empty()) {
        Some(n) => n,
        None => random_name()?,
    };
    let (v, _) = state
        .volumes
        .ensure(&name, &b.labels.unwrap_or_default(), &now())?;
    Ok((StatusCode::CREATED, Json(render(&state, &v))).into_response())
}

/// `GET /volumes/{name}`
pub async fn inspect(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let v = state.volumes.get(&name)?;
    Ok(Json(render(&state, &v)).into_response())
}

/// `DELETE /volumes/{name}`: refused while a container (in any state) uses it.
pub async fn remove(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    state.volumes.get(&name)?;
    if let Some(ids) = users(&state).await?.get(&name) {
        let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
        return Err(ApiError::conflict(format!(
            "remove {name}: volume is in use - [{}]",
            ids.join(", ")
        )));
    }
    state.volumes.remove(&name)?;
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
    let used: BTreeSet<String> = users(&state).await?.into_keys().collect();
    let mut deleted = Vec::new();
    for v in state.volumes.list()? {
        let has = |l: &String| match l.split_once('=') {
            Some((k, val)) => v.labels.get(k).is_some_and(|have| have == val),
            None => v.labels.contains_key(l),
        };
        let wanted = (all || v.anonymous())
            && filters.get("label").iter().all(has)
            && !filters.get("label!").iter().any(has);
        if wanted && !used.contains(&v.name) {
            state.volumes.remove(&v.name)?;
            deleted.push(v.name);
        }
    }
    Ok(Json(json!({ "VolumesDeleted": deleted, "SpaceReclaimed": 0 })).into_response())
}

/// After `docker rm -v`: the container's anonymous volumes that no other
/// container uses.
pub async fn remove_anonymous(state: &ApiState, mounts: &[BindMount]) -> Result<(), ApiError> {
    let used = users(state).await?;
    for name in mounts.iter().filter_map(|m| m.volume.as_ref()) {
        if used.contains_key(name) {
            continue;
        }
        match state.volumes.get(name) {
            Ok(v) if v.anonymous() => state.volumes.remove(name)?,
            _ => {}
        }
    }
    Ok(())
}
