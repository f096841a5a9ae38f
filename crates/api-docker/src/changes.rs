//! `docker diff`: what the container changed, read from the upper directory
//! of its overlay snapshot, as dockerd's overlay driver reads it: a whiteout
//! (a 0/0 character device) is a deletion; anything else is an addition, or
//! a change when a lower layer has the path too.

use super::{ApiError, ApiState};
use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path as FsPath, PathBuf};

/// dockerd's kinds.
const MODIFIED: u8 = 0;
const ADDED: u8 = 1;
const DELETED: u8 = 2;

/// Every change under `upper`, as (path in the container, kind), sorted.
pub fn changes(upper: &FsPath, lowers: &[PathBuf]) -> Vec<(String, u8)> {
    let mut out = Vec::new();
    walk(upper, FsPath::new("/"), lowers, &mut out);
    out.sort();
    out
}

fn walk(dir: &FsPath, at: &FsPath, lowers: &[PathBuf], out: &mut Vec<(String, u8)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = at.join(entry.file_name());
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        let relative = path.strip_prefix("/").unwrap_or(&path);
        let in_lower = lowers
            .iter()
            .any(|l| std::fs::symlink_metadata(l.join(relative)).is_ok());
        let kind = if meta.file_type().is_char_device() && meta.rdev() == 0 {
            DELETED
        } else if in_lower {
            MODIFIED
        } else {
            ADDED
        };
        out.push((path.to_string_lossy().into_owned(), kind));
        // Below an added directory everything is added; list it all, as dockerd.
        if meta.is_dir() {
            walk(&entry.path(), &path, lowers, out);
        }
    }
}

/// `GET /containers/{id}/changes`
pub async fn diff(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let id = state.engine.resolve(&reference).await?;
    let mounts = state
        .adapter
        .rootfs_mounts(&id)
        .await
        .map_err(ApiError::from)?;
    let option = |key: &str| {
        mounts
            .iter()
            .filter(|m| m.kind == "overlay")
            .flat_map(|m| m.options.iter())
            .find_map(|o| o.strip_prefix(key).map(str::to_owned))
    };
    let Some(upper) = option("upperdir=") else {
        return Err(ApiError::not_implemented(
            "docker diff needs an overlay snapshot with an upper directory",
        ));
    };
    let lowers: Vec<PathBuf> = option("lowerdir=")
        .map(|l| l.split(':').map(PathBuf::from).collect())
        .unwrap_or_default();
    let list = tokio::task::spawn_blocking(move || changes(FsPath::new(&upper), &lowers))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let body: Vec<_> = list
        .into_iter()
        .map(|(path, kind)| json!({ "Path": path, "Kind": kind }))
        .collect();
    Ok(Json(body).into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upper_entries_are_changes_additions_and_whiteouts() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, lower) = (dir.path().join("upper"), dir.path().join("lower"));
        std::fs::create_dir_all(upper.join("etc")).unwrap();
        std::fs::create_dir_all(lower.join("etc")).unwrap();
        std::fs::write(lower.join("etc/passwd"), "old").unwrap();
        std::fs::write(upper.join("etc/passwd"), "new").unwrap();
        std::fs::create_dir_all(upper.join("new/deep")).unwrap();
        let got = changes(&upper, &[lower]);
        assert_eq!(
            got,
            [
                ("/etc".to_owned(), MODIFIED),
                ("/etc/passwd".to_owned(), MODIFIED),
                ("/new".to_owned(), ADDED),
                ("/new/deep".to_owned(), ADDED),
            ]
        );
    }
}
