//! `docker system df`: images (their unpacked layers), containers (what
//! each wrote), volumes (what their data holds), and who uses what. Sizes
//! come from containerd's snapshotter and the volumes' directories; nothing
//! here decides anything.

use super::containers::{Snapshot, attachment, list_json};
use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::State;
use holdfast_engine::backend::images::familiar;
use holdfast_engine::engine::wall_now;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;

/// Bytes of the regular files under `dir`, symlinks not followed; what
/// cannot be read counts nothing.
fn dir_size(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// `GET /system/df`
pub async fn system_df(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let containers: Vec<Snapshot> = state
        .engine
        .read(|v| {
            v.core
                .containers()
                .map(|c| Snapshot {
                    record: c.record.clone(),
                    status: c.status,
                    task: c.task,
                    confirmed: c.confirmed,
                    paused: c.paused,
                    health: v.core.health(&c.record.id).cloned(),
                })
                .collect()
        })
        .await?;
    let mut users: BTreeMap<String, usize> = BTreeMap::new();
    for c in &containers {
        if let Some(image) = &c.record.config.image_id {
            *users.entry(image.clone()).or_default() += 1;
        }
    }

    let mut layers_size = 0i64;
    let mut images = Vec::new();
    let images_backend = state.engine.images();
    for i in images_backend.list().await? {
        let size = images_backend.unpacked_size(&i).await?;
        layers_size = layers_size.saturating_add(size);
        let id = i.resolved.config_digest.clone();
        images.push(json!({
            "Id": id,
            "ParentId": "",
            "RepoTags": i.names.iter().map(|n| familiar(n)).collect::<Vec<_>>(),
            "RepoDigests": [],
            "Created": 0,
            "Size": size,
            "SharedSize": 0,
            "VirtualSize": size,
            "Labels": i.resolved.config.labels,
            "Containers": users.get(&id).copied().unwrap_or(0),
        }));
    }

    let now = wall_now();
    let mut rendered = Vec::new();
    for c in &containers {
        let size_rw = match state.adapter.container_rw_size(&c.record.id).await {
            Ok(size) => size,
            // A container being created or removed has no snapshot (yet).
            Err(e) if e.kind() == holdfast_core::FailureKind::NotFound => 0,
            Err(e) => return Err(e.into()),
        };
        let mut j = list_json(c, now, attachment(&state, c).as_ref());
        if let Some(o) = j.as_object_mut() {
            o.insert("SizeRw".to_owned(), json!(size_rw));
            o.insert("SizeRootFs".to_owned(), json!(size_rw));
        }
        rendered.push(j);
    }

    let mut volumes = Vec::new();
    for v in state.engine.volumes().list().await? {
        let dir = v.mountpoint.clone();
        let size = tokio::task::spawn_blocking(move || dir_size(&dir))
            .await
            .map_err(|e| ApiError::internal(format!("measuring volume: {e}")))?;
        let mut j = super::volumes::render(&v);
        if let Some(o) = j.as_object_mut() {
            o.insert(
                "UsageData".to_owned(),
                json!({
                    "Size": size,
                    "RefCount": v.users.len(),
                }),
            );
        }
        volumes.push(j);
    }

    Ok(Json(json!({
        "LayersSize": layers_size,
        "Images": images,
        "Containers": rendered,
        "Volumes": volumes,
        "BuildCache": [],
    })))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn dir_size_counts_files_once_and_follows_no_symlink() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [0u8; 100]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), [0u8; 23]).unwrap();
        std::os::unix::fs::symlink("/", dir.path().join("root")).unwrap();
        assert_eq!(dir_size(dir.path()), 123);
    }
}
