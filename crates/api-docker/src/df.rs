//! `docker system df`: images (their unpacked layers), containers (what
//! each wrote), volumes (what their data holds), and who uses what, as the
//! engine measures them; rendered here.

use super::containers::list_json;
use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::{RawQuery, State};
use holdfast_engine::backend::system::DiskUsageOf;
use holdfast_engine::engine::wall_now;
use serde_json::{Value, json};

/// `GET /system/df?type=..`: the kinds asked for (all without `type`);
/// those not asked for are not measured and answered null, as dockerd's.
pub async fn system_df(
    State(state): State<ApiState>,
    query: RawQuery,
) -> Result<Json<Value>, ApiError> {
    let of = kinds(&Params::parse(&query))?;
    let usage = state.engine.system().disk_usage(of).await?;
    let images: Vec<Value> = usage
        .images
        .iter()
        .map(|u| {
            let containers = i64::try_from(u.containers).unwrap_or(i64::MAX);
            super::images::summary_json(&u.image, u.size, u.shared_size, containers)
        })
        .collect();
    let now = wall_now();
    let containers: Vec<Value> = usage
        .containers
        .iter()
        .map(|c| {
            let mut j = list_json(&c.snapshot, now, c.attachment.as_ref());
            if let Some(o) = j.as_object_mut() {
                super::containers::insert_sizes(o, &c.sizes);
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
    let shown = |asked: bool, list: Vec<Value>| if asked { json!(list) } else { Value::Null };
    Ok(Json(json!({
        "LayersSize": usage.layers_size,
        "Images": shown(of.images, images),
        "Containers": shown(of.containers, containers),
        "Volumes": shown(of.volumes, volumes),
        // holdfast builds nothing, so it has no build cache.
        "BuildCache": [],
    })))
}

/// The kinds of object `type` asks for, every one if none is named.
fn kinds(p: &Params) -> Result<DiskUsageOf, ApiError> {
    let asked = p.all("type");
    if asked.is_empty() {
        return Ok(DiskUsageOf::ALL);
    }
    let mut of = DiskUsageOf {
        containers: false,
        images: false,
        volumes: false,
    };
    for kind in asked {
        match kind.as_str() {
            "container" => of.containers = true,
            "image" => of.images = true,
            "volume" => of.volumes = true,
            // Nothing to measure: holdfast builds nothing.
            "build-cache" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown object type: {other}"
                )));
            }
        }
    }
    Ok(of)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(query: &str) -> Result<DiskUsageOf, ApiError> {
        kinds(&Params::parse(&RawQuery(Some(query.to_owned()))))
    }

    #[test]
    fn type_names_the_kinds_measured() {
        assert_eq!(of("").ok(), Some(DiskUsageOf::ALL));
        let images_and_volumes = DiskUsageOf {
            containers: false,
            images: true,
            volumes: true,
        };
        assert_eq!(of("type=image&type=volume").ok(), Some(images_and_volumes));
        let nothing = DiskUsageOf {
            containers: false,
            images: false,
            volumes: false,
        };
        assert_eq!(of("type=build-cache").ok(), Some(nothing));
        let e = of("type=image&type=layers").expect_err("refused");
        assert_eq!(e.message, "unknown object type: layers");
    }
}
