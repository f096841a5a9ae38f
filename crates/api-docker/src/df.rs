//! `docker system df`: images (their unpacked layers), containers (what
//! each wrote), volumes (what their data holds), and who uses what, as the
//! engine measures them; rendered here.

use super::containers::list_json;
use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::State;
use holdfast_engine::engine::wall_now;
use serde_json::{Value, json};

/// `GET /system/df`
pub async fn system_df(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let usage = state.engine.system().disk_usage().await?;
    let images: Vec<Value> = usage
        .images
        .iter()
        .map(|u| {
            let containers = i64::try_from(u.containers).unwrap_or(i64::MAX);
            super::images::summary_json(&u.image, u.size, 0, containers)
        })
        .collect();
    let now = wall_now();
    let containers: Vec<Value> = usage
        .containers
        .iter()
        .map(|c| {
            let mut j = list_json(&c.snapshot, now, c.attachment.as_ref());
            if let Some(o) = j.as_object_mut() {
                o.insert("SizeRw".to_owned(), json!(c.size_rw));
                o.insert("SizeRootFs".to_owned(), json!(c.size_rw));
            }
            j
        })
        .collect();
    let volumes: Vec<Value> = usage
        .volumes
        .iter()
        .map(|v| {
            let mut j = super::volumes::render(&v.volume);
            if let Some(o) = j.as_object_mut() {
                o.insert(
                    "UsageData".to_owned(),
                    json!({
                        "Size": v.size,
                        "RefCount": v.volume.users.len(),
                    }),
                );
            }
            j
        })
        .collect();
    Ok(Json(json!({
        "LayersSize": usage.layers_size,
        "Images": images,
        "Containers": containers,
        "Volumes": volumes,
        "BuildCache": [],
    })))
}
