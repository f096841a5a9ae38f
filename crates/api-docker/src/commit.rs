//! `docker commit`: what the container changed (the upper directory of its
//! overlay snapshot, as `docker diff` reads it) as one more layer over its
//! image, with the container's settings as the new image's config.

use super::containers::snapshot;
use super::images::new_image_name;
use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_adapter_containerd::{NewImage, ResolvedImage};
use holdfast_core::{Answer, Command, ContainerConfig};
use serde_json::{Map, Value, json};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path as FsPath;

/// `POST /commit?container=..&repo=..&tag=..&comment=..&author=..`
pub async fn commit(
    State(state): State<ApiState>,
    query: RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let changes = super::params::changes_of(query.0.as_deref());
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    let empty = match &body {
        Value::Null => true,
        Value::Object(o) => o.values().all(Value::is_null),
        _ => false,
    };
    if !empty {
        return Err(ApiError::bad_request(
            "a config in the commit request body is not supported by holdfast yet",
        ));
    }
    let reference = p
        .str("container")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ApiError::bad_request("missing parameter container"))?;
    let name = new_image_name(&p, "a commit")?;
    let id = state.engine.resolve(reference).await?;
    let s = snapshot(&state, id.clone()).await?;
    let config = &s.record.config;
    let base = state
        .adapter
        .resolve_image(&config.image)
        .await
        .map_err(|e| super::images::image_error(&config.image, e))?;
    let mut image_config = image_config(config, &base);
    let base_env = base.config.env.clone().unwrap_or_default();
    holdfast_engine::dockerfile::apply(&changes, &base_env, &mut image_config)?;
    let mounts = state
        .adapter
        .rootfs_mounts(&id)
        .await
        .map_err(ApiError::from)?;
    let upper = mounts
        .iter()
        .filter(|m| m.kind == "overlay")
        .flat_map(|m| m.options.iter())
        .find_map(|o| o.strip_prefix("upperdir=").map(str::to_owned))
        .ok_or_else(|| {
            ApiError::not_implemented(
                "docker commit needs an overlay snapshot with an upper directory",
            )
        })?;
    let dir = tempfile::Builder::new()
        .prefix("commit-")
        .tempdir_in(&state.data_root)
        .map_err(|e| ApiError::internal(format!("cannot make room for the layer: {e}")))?;
    let layer = dir.path().join("layer.tar");
    let out = layer.clone();
    // As dockerd (pause=true unless asked otherwise): the container is
    // frozen while its changes are read, so the layer is one moment's.
    let pause = p.str("pause").is_none_or(|_| p.bool("pause"))
        && s.status == holdfast_core::Status::Running
        && !s.paused;
    if pause {
        match state
            .engine
            .command(Command::Pause { id: id.clone() })
            .await
        {
            Answer::Done | Answer::NotModified => {}
            Answer::Error(e) => return Err(e.into()),
            other => return Err(ApiError::internal(format!("pause: {other:?}"))),
        }
    }
    let read = tokio::task::spawn_blocking(move || layer_tar(FsPath::new(&upper), &out)).await;
    if pause {
        let answer = state
            .engine
            .command(Command::Unpause { id: id.clone() })
            .await;
        if let Answer::Error(e) = answer {
            tracing::warn!(container = %id, error = %e, "not unpaused after a commit");
        }
    }
    read.map_err(|e| ApiError::internal(e.to_string()))?
        .map_err(|e| ApiError::internal(format!("reading the container's changes: {e}")))?;
    let new = NewImage {
        name: name.clone(),
        base: Some(&base),
        layer: &layer,
        config: image_config,
        author: p.str("author").unwrap_or_default().to_owned(),
        comment: p.str("comment").unwrap_or_default().to_owned(),
        // As dockerd: the container's command is what made the layer.
        created_by: config.cmd.clone().unwrap_or_default().join(" "),
        created: super::render::time(holdfast_engine::engine::wall_now()),
    };
    let image_id = state
        .adapter
        .create_image(new)
        .await
        .map_err(|e| super::images::image_error(&name, e))?;
    super::images::publish(&state, "tag", &image_id, &super::images::familiar(&name));
    Ok((StatusCode::CREATED, Json(json!({ "Id": image_id }))).into_response())
}

/// The container's settings as an image config, over its image's: what a
/// container made from the new image runs as this one does.
fn image_config(c: &ContainerConfig, base: &ResolvedImage) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(entrypoint) = &c.entrypoint {
        // As at create: a new entrypoint drops the image's command.
        out.insert("Entrypoint".into(), json!(entrypoint));
        out.insert("Cmd".into(), json!(c.cmd));
    } else if let Some(cmd) = &c.cmd {
        out.insert("Cmd".into(), json!(cmd));
    }
    if !c.env.is_empty() {
        let mut env: Vec<String> = base.config.env.clone().unwrap_or_default();
        for e in &c.env {
            let key = e.split_once('=').map_or(e.as_str(), |(k, _)| k);
            env.retain(|have| have.split_once('=').map_or(have.as_str(), |(k, _)| k) != key);
            env.push(e.clone());
        }
        out.insert("Env".into(), json!(env));
    }
    if let Some(w) = &c.working_dir {
        out.insert("WorkingDir".into(), json!(w));
    }
    if let Some(u) = &c.user {
        out.insert("User".into(), json!(u));
    }
    if !c.labels.is_empty() {
        let mut labels = base.config.labels.clone().unwrap_or_default();
        labels.extend(c.labels.clone());
        out.insert("Labels".into(), json!(labels));
    }
    if let Some(signal) = c.stop_signal {
        out.insert("StopSignal".into(), json!(signal.to_string()));
    }
    if c.healthcheck.is_some() {
        out.insert(
            "Healthcheck".into(),
            holdfast_engine::health_config::config_json(c.healthcheck.as_ref()),
        );
    }
    out
}

/// The upper directory as an OCI layer: a whiteout (a 0/0 character
/// device) becomes `.wh.<name>`, an opaque directory (deleted and made
/// again: overlay marks it with an xattr) gets `.wh..wh..opq`; symlinks are
/// stored, never followed.
fn layer_tar(upper: &FsPath, out: &FsPath) -> std::io::Result<()> {
    let file = std::fs::File::create(out)?;
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
    builder.follow_symlinks(false);
    add_dir(&mut builder, upper, FsPath::new(""))?;
    builder.into_inner()?.into_inner()?.sync_all()
}

fn add_dir<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    dir: &FsPath,
    at: &FsPath,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let host = entry.path();
        let name = at.join(entry.file_name());
        let meta = std::fs::symlink_metadata(&host)?;
        if meta.file_type().is_char_device() && meta.rdev() == 0 {
            let mut whiteout = std::ffi::OsString::from(".wh.");
            whiteout.push(entry.file_name());
            let mut header = tar::Header::new_gnu();
            header.set_size(0);
            header.set_mode(0o600);
            header.set_entry_type(tar::EntryType::Regular);
            builder.append_data(&mut header, at.join(whiteout), std::io::empty())?;
            continue;
        }
        builder.append_path_with_name(&host, &name)?;
        if meta.is_dir() {
            if opaque(&host) {
                let mut header = tar::Header::new_gnu();
                header.set_size(0);
                header.set_mode(0o600);
                header.set_entry_type(tar::EntryType::Regular);
                builder.append_data(&mut header, name.join(".wh..wh..opq"), std::io::empty())?;
            }
            add_dir(builder, &host, &name)?;
        }
    }
    Ok(())
}

/// Whether overlay marked the directory opaque (`trusted.` as root,
/// `user.` on a userxattr mount).
fn opaque(dir: &FsPath) -> bool {
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| {
            let mut value = [0u8; 4];
            rustix::fs::lgetxattr(dir, *name, &mut value[..])
                .is_ok_and(|n| n == 1 && value[0] == b'y')
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_upper_directory_becomes_a_layer_with_symlinks_kept() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("etc/new")).unwrap();
        std::fs::write(upper.join("etc/new/file"), "hello").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", upper.join("link")).unwrap();
        let out = dir.path().join("layer.tar");
        layer_tar(&upper, &out).unwrap();
        let mut archive = tar::Archive::new(std::fs::File::open(&out).unwrap());
        let mut got: Vec<(String, tar::EntryType)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().into_owned(),
                    e.header().entry_type(),
                )
            })
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            [
                ("etc".to_owned(), tar::EntryType::Directory),
                ("etc/new".to_owned(), tar::EntryType::Directory),
                ("etc/new/file".to_owned(), tar::EntryType::Regular),
                ("link".to_owned(), tar::EntryType::Symlink),
            ]
        );
    }
}
