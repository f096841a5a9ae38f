//! `GET /distribution/{name}/json`: what a registry says of a reference
//! (its descriptor and platforms), asked with the client's credentials
//! (`X-Registry-Auth`), without pulling anything.

use super::shared::{check_reference, decode_registry_auth};
use crate::{ApiError, ApiState};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use holdfast_engine::backend::images::DistributionInspect;
use serde_json::{Value, json};

pub async fn inspect(
    State(state): State<ApiState>,
    Path(rest): Path<String>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    // Names hold slashes: the tail is parsed here.
    let reference = rest
        .strip_suffix("/json")
        .filter(|r| !r.is_empty())
        .ok_or_else(|| ApiError::not_found(format!("page not found: /distribution/{rest}")))?;
    check_reference(reference)?;
    let auth = decode_registry_auth(headers.get("X-Registry-Auth").map(HeaderValue::as_bytes))?;
    let found = state.engine.images().distribution(reference, &auth).await?;
    Ok(Json(inspect_json(&found)))
}

/// dockerd's shape: the descriptor, and each platform as the OCI spec
/// writes it.
fn inspect_json(d: &DistributionInspect) -> Value {
    let platforms: Vec<Value> = d
        .platforms
        .iter()
        .map(|p| {
            let mut v = json!({ "architecture": p.architecture, "os": p.os });
            if let Some(variant) = &p.variant {
                v["variant"] = json!(variant);
            }
            v
        })
        .collect();
    json!({
        "Descriptor": { "mediaType": d.media_type, "digest": d.digest, "size": d.size },
        "Platforms": platforms,
    })
}
