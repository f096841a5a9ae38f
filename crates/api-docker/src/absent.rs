//! What holdfast does not run, answered as dockerd answers without it:
//! swarm mode (dockerd's words for a node that is in no swarm), plugins
//! (none installed), builds (no build cache, no BuildKit session). A
//! client learns the truth from the status and the words, never from a
//! "page not found" that looks like a wrong address, nor from a made-up
//! success.

use super::ApiError;
use super::params::Params;
use axum::Json;
use axum::extract::{Path, RawQuery};
use axum::http::StatusCode;
use serde_json::{Value, json};

/// dockerd's answer for every swarm read or change on a node in no swarm.
const NOT_A_MANAGER: &str = "This node is not a swarm manager. Use \"docker swarm init\" or \"docker swarm join\" to connect this node to swarm and try again.";

/// Nodes, services, tasks, secrets, configs, the swarm's own state: there
/// is no swarm to ask (503, as dockerd's on a node in no swarm).
pub async fn not_a_swarm_manager() -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, NOT_A_MANAGER)
}

/// `POST /swarm/leave`: there is no swarm to leave.
pub async fn not_in_a_swarm() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "This node is not part of a swarm",
    )
}

/// `POST /swarm/init` and `/swarm/join`: where dockerd would start or
/// join one, holdfast cannot.
pub async fn no_swarm_mode() -> ApiError {
    ApiError::not_implemented(
        "swarm mode is not supported by holdfast: it runs the containers of one host",
    )
}

/// `PUT /volumes/{name}`: cluster volumes only, dockerd's words without a
/// swarm.
pub async fn no_cluster_volumes() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "volume update only valid for cluster volumes, but swarm is not enabled",
    )
}

/// `GET /plugins`: none is installed (its filters checked as dockerd's).
pub async fn plugins(query: RawQuery) -> Result<Json<Value>, ApiError> {
    let filters = Params::parse(&query).filters()?;
    filters.only(&["capability", "enable"])?;
    for v in filters.get("enable") {
        if !matches!(v.as_str(), "true" | "false") {
            return Err(ApiError::bad_request(format!(
                "Invalid filter 'enable={v}'"
            )));
        }
    }
    Ok(Json(json!([])))
}

/// A plugin by name (inspect, remove, enable, disable, upgrade, push,
/// set): none is installed, so none is found (dockerd's words).
pub async fn no_such_plugin(Path(params): Path<Vec<(String, String)>>) -> ApiError {
    let name = params.first().map_or("", |(_, v)| v.as_str());
    ApiError::not_found(format!("plugin {name:?} not found"))
}

/// Installing a plugin (pull, create, the privileges a pull would ask):
/// holdfast runs none.
pub async fn no_plugins() -> ApiError {
    ApiError::not_implemented("plugins are not supported by holdfast")
}

/// `POST /build/prune`: holdfast builds nothing, so its build cache is
/// empty and nothing is reclaimed; what the query asks is still checked.
pub async fn build_prune(query: RawQuery) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(&query);
    let filters = p.filters()?;
    filters.only(&[
        "until",
        "id",
        "parent",
        "type",
        "description",
        "inuse",
        "shared",
        "private",
    ])?;
    p.int::<i64>("keep-storage")?;
    Ok(Json(json!({ "CachesDeleted": [], "SpaceReclaimed": 0 })))
}

/// `POST /session`: BuildKit's session, for builds holdfast does not do.
pub async fn no_session() -> ApiError {
    ApiError::not_implemented(
        "POST /session is not supported by holdfast: it builds no images, so it has no BuildKit session",
    )
}
