//! `/images/...`: load, list, inspect, tag, remove (pulls are in `pull.rs`). Images live in
//! containerd's image store; these handlers talk to the adapter directly
//! (no lifecycle decision is involved), and ask the engine only which
//! containers use an image.

mod import;
mod pull;
mod push;

pub use pull::{PullRequest, create, decode_pull, decode_registry_auth, login};
pub use push::{PushRequest, decode_push};

use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use holdfast_adapter_containerd::{
    AdapterError, HistoryEntry, RegistryFailure, ResolvedImage, normalize_reference,
};
use holdfast_engine::events::EventMessage;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tokio::io::AsyncWriteExt as _;

/// Maps an adapter error about an image onto the API's answer.
pub(super) fn image_error(reference: &str, e: AdapterError) -> ApiError {
    match e {
        AdapterError::ImageNotFound(_) => ApiError::not_found(format!(
            "No such image: {}",
            familiar(&normalize_reference(reference))
        )),
        AdapterError::Image(m) | AdapterError::Invalid(m) => ApiError::bad_request(m),
        AdapterError::Registry { kind, message } => match kind {
            RegistryFailure::NotFound => ApiError::not_found(message),
            RegistryFailure::Invalid => ApiError::bad_request(message),
            RegistryFailure::Failed => ApiError::internal(message),
        },
        e if e.is_unreachable() || e.kind() == holdfast_core::FailureKind::Deadline => {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("containerd is unreachable or not answering: {e}"),
            )
        }
        e => ApiError::internal(e.to_string()),
    }
}

/// `docker.io/library/busybox:latest` as Docker shows it: `busybox:latest`.
pub(super) fn familiar(name: &str) -> String {
    name.strip_prefix("docker.io/library/")
        .or_else(|| name.strip_prefix("docker.io/"))
        .unwrap_or(name)
        .to_owned()
}

/// One image id with every name it has.
#[derive(Debug)]
pub(super) struct LocalImage {
    pub(super) names: Vec<String>,
    pub(super) resolved: ResolvedImage,
    pub(super) size: i64,
}

pub(super) async fn local_images(state: &ApiState) -> Result<Vec<LocalImage>, ApiError> {
    let summaries = state
        .adapter
        .list_images()
        .await
        .map_err(|e| image_error("", e))?;
    let mut by_id: BTreeMap<String, LocalImage> = BTreeMap::new();
    for s in summaries {
        // An image whose content is incomplete is skipped, not fatal.
        let Ok(resolved) = state.adapter.resolve_image(&s.name).await else {
            tracing::debug!(image = %s.name, "image cannot be resolved; not listed");
            continue;
        };
        let entry = by_id
            .entry(resolved.config_digest.clone())
            .or_insert_with(|| LocalImage {
                names: Vec::new(),
                resolved,
                size: s.target_size,
            });
        entry.names.push(s.name);
    }
    Ok(by_id.into_values().collect())
}

/// Finds an image by name, full id (`sha256:...`) or unique id prefix.
async fn find_image(state: &ApiState, reference: &str) -> Result<LocalImage, ApiError> {
    let not_found = || ApiError::not_found(format!("No such image: {reference}"));
    if reference.is_empty() {
        return Err(not_found());
    }
    let images = local_images(state).await?;
    let name = normalize_reference(reference);
    let hex = reference.strip_prefix("sha256:").unwrap_or(reference);
    let by_id = hex.len() >= 4 && hex.bytes().all(|b| b.is_ascii_hexdigit());
    let mut found = None;
    for image in images {
        if image.names.contains(&name) {
            return Ok(image);
        }
        if by_id
            && image
                .resolved
                .config_digest
                .strip_prefix("sha256:")
                .is_some_and(|h| h.starts_with(hex))
        {
            if found.is_some() {
                return Err(not_found());
            }
            found = Some(image);
        }
    }
    found.ok_or_else(not_found)
}

pub(super) fn publish(state: &ApiState, action: &str, id: &str, name: &str) {
    state.events.publish(EventMessage {
        kind: "image",
        action: action.to_owned(),
        actor_id: id.to_owned(),
        from: None,
        attributes: [("name".to_owned(), name.to_owned())].into(),
        time_nanos: holdfast_engine::engine::wall_now().as_unix_nanos(),
    });
}

pub async fn list(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    let images = local_images(&state).await?;
    Ok(Json(Value::Array(
        images
            .iter()
            .map(|i| {
                json!({
                    "Id": i.resolved.config_digest,
                    "ParentId": "",
                    "RepoTags": i.names.iter().map(|n| familiar(n)).collect::<Vec<_>>(),
                    "RepoDigests": [],
                    "Created": 0,
                    "Size": i.size,
                    "SharedSize": -1,
                    "VirtualSize": i.size,
                    "Labels": i.resolved.config.labels,
                    "Containers": -1,
                })
            })
            .collect(),
    )))
}

fn inspect_json(i: &LocalImage) -> Value {
    let c = &i.resolved.config;
    json!({
        "Id": i.resolved.config_digest,
        "RepoTags": i.names.iter().map(|n| familiar(n)).collect::<Vec<_>>(),
        "RepoDigests": [],
        "Parent": "",
        "Comment": "",
        "Created": crate::render::ZERO_TIME,
        "Container": "",
        "DockerVersion": "",
        "Author": "",
        "Config": {
            "Env": c.env,
            "Cmd": c.cmd,
            "Entrypoint": c.entrypoint,
            "WorkingDir": c.working_dir.clone().unwrap_or_default(),
            "User": c.user.clone().unwrap_or_default(),
            "Labels": c.labels,
            "StopSignal": c.stop_signal,
        },
        "Architecture": "amd64",
        "Os": "linux",
        "Size": i.size,
        "VirtualSize": i.size,
        "GraphDriver": { "Name": "overlayfs", "Data": null },
        "RootFS": { "Type": "layers", "Layers": i.resolved.diff_ids },
        "Metadata": { "LastTagTime": crate::render::ZERO_TIME },
    })
}

/// `GET /images/{name}/json` (names hold slashes, so the tail is parsed here).
pub async fn by_name_get(
    State(state): State<ApiState>,
    Path(rest): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    if let Some(name) = rest.strip_suffix("/json") {
        let image = find_image(&state, name).await?;
        return Ok(Json(inspect_json(&image)).into_response());
    }
    if rest == "get" {
        let names: Vec<String> =
            form_urlencoded::parse(query.0.as_deref().unwrap_or("").as_bytes())
                .filter(|(k, _)| k == "names")
                .map(|(_, v)| v.into_owned())
                .collect();
        return save(&state, &names).await;
    }
    if let Some(name) = rest.strip_suffix("/get") {
        return save(&state, &[name.to_owned()]).await;
    }
    if let Some(name) = rest.strip_suffix("/history") {
        let image = find_image(&state, name).await?;
        let sizes = state
            .adapter
            .layer_sizes(&image.resolved.diff_ids)
            .await
            .map_err(|e| image_error(name, e))?;
        let mut tags: Vec<String> = image.names.iter().map(|n| familiar(n)).collect();
        tags.sort();
        let items = history_json(
            &image.resolved.config_digest,
            &tags,
            &image.resolved.history,
            &sizes,
        )
        .map_err(ApiError::internal)?;
        return Ok(Json(Value::Array(items)).into_response());
    }
    Err(ApiError::not_found(format!(
        "page not found: /images/{rest}"
    )))
}

/// `docker history`: the config's history newest first, as dockerd 20.10
/// and later shows it: the image's id and tags on the top step,
/// `<missing>` below (holdfast keeps no parent images), each step that made
/// a layer with that layer's unpacked size. An image without history has
/// none to show (an empty list).
fn history_json(
    id: &str,
    tags: &[String],
    history: &[HistoryEntry],
    layer_sizes: &[i64],
) -> Result<Vec<Value>, String> {
    let mut sizes = layer_sizes.iter();
    let mut items = Vec::with_capacity(history.len());
    for step in history {
        let size = if step.empty_layer {
            0
        } else {
            *sizes
                .next()
                .ok_or("too many non-empty layers in History section")?
        };
        let created = crate::render::parse_rfc3339(&step.created)
            .map_or(0, |t| t.as_unix_nanos().div_euclid(1_000_000_000));
        items.push(json!({
            "Id": "<missing>",
            "Created": created,
            "CreatedBy": step.created_by,
            "Tags": null,
            "Size": size,
            "Comment": step.comment,
        }));
    }
    items.reverse();
    if let Some(top) = items.first_mut() {
        top["Id"] = json!(id);
        if !tags.is_empty() {
            top["Tags"] = json!(tags);
        }
    }
    Ok(items)
}

/// `docker save`: the images as a docker-archive, each under the name it
/// was asked by (every name it has when asked by id).
async fn save(state: &ApiState, references: &[String]) -> Result<Response, ApiError> {
    if references.is_empty() {
        return Err(ApiError::bad_request("no image to save: give names"));
    }
    let mut found = Vec::new();
    for reference in references {
        let image = find_image(state, reference).await?;
        let name = normalize_reference(reference);
        let tags: Vec<String> = if image.names.contains(&name) {
            vec![familiar(&name)]
        } else {
            image.names.iter().map(|n| familiar(n)).collect()
        };
        found.push((image, tags));
    }
    let dir = tempfile::Builder::new()
        .prefix("save-")
        .tempdir_in(&state.data_root)
        .map_err(|e| ApiError::internal(format!("cannot make room for the archive: {e}")))?;
    let work = dir.path().join("work");
    std::fs::create_dir(&work)
        .map_err(|e| ApiError::internal(format!("cannot make room for the archive: {e}")))?;
    let out = dir.path().join("images.tar");
    let saved: Vec<holdfast_adapter_containerd::SavedImage<'_>> = found
        .iter()
        .map(|(image, tags)| holdfast_adapter_containerd::SavedImage {
            image: &image.resolved,
            tags: tags.clone(),
        })
        .collect();
    state
        .adapter
        .save_images(&saved, &work, &out)
        .await
        .map_err(|e| image_error(&references.join(" "), e))?;
    let file = tokio::fs::File::open(&out)
        .await
        .map_err(|e| ApiError::internal(format!("reading the archive: {e}")))?;
    // The temporary directory goes once the archive was sent.
    let chunks = futures_util::stream::unfold(Some((file, dir)), |state| async move {
        use tokio::io::AsyncReadExt as _;
        let (mut file, dir) = state?;
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some((file, dir))))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    let mut r = Body::from_stream(chunks).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    Ok(r)
}

/// `POST /images/{name}/tag` and `POST /images/{name}/push`.
pub async fn by_name_post(
    State(state): State<ApiState>,
    Path(rest): Path<String>,
    headers: axum::http::HeaderMap,
    query: RawQuery,
) -> Result<Response, ApiError> {
    if let Some(name) = rest.strip_suffix("/tag") {
        let p = Params::parse(&query);
        let repo = p
            .str("repo")
            .filter(|r| !r.is_empty())
            .ok_or_else(|| ApiError::bad_request("repository name (repo) must be given"))?;
        let tag = p.str("tag").filter(|t| !t.is_empty()).unwrap_or("latest");
        let new_reference = format!("{repo}:{tag}");
        validate_reference(&new_reference)?;
        let image = find_image(&state, name).await?;
        let source = image
            .names
            .first()
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("No such image: {name}")))?;
        let tagged = state
            .adapter
            .tag_image(&source, &new_reference)
            .await
            .map_err(|e| image_error(name, e))?;
        publish(
            &state,
            "tag",
            &image.resolved.config_digest,
            &familiar(&tagged),
        );
        return Ok(StatusCode::CREATED.into_response());
    }
    if let Some(name) = rest.strip_suffix("/push") {
        return push::push(state, name, &headers, &query).await;
    }
    Err(ApiError::not_found(format!(
        "page not found: /images/{rest}"
    )))
}

/// Docker's reference grammar, loosely: lowercase repository path
/// components, an optional registry with a port, a tag of `[\w][\w.-]{0,127}`.
fn validate_reference(reference: &str) -> Result<(), ApiError> {
    let bad = || ApiError::bad_request(format!("invalid reference format: {reference:?}"));
    let (repo, tag) = reference.rsplit_once(':').ok_or_else(bad)?;
    let tag_ok = !tag.is_empty()
        && tag.len() <= 128
        && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    let repo_ok = !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|part| {
            !part.is_empty()
                && part.chars().all(|c| {
                    c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || matches!(c, '_' | '.' | '-' | ':')
                })
        });
    if tag_ok && repo_ok {
        Ok(())
    } else {
        Err(bad())
    }
}

/// `DELETE /images/{name}`: untags; deletes the image when its last name
/// goes. Refused (409) while a container uses it, unless forced.
pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let force = p.bool("force");
    let image = find_image(&state, &reference).await?;
    let id = image.resolved.config_digest.clone();
    let name = normalize_reference(&reference);
    let by_name = image.names.contains(&name);
    let doomed: Vec<String> = if by_name {
        vec![name]
    } else {
        image.names.clone()
    };
    let last_name_goes = doomed.len() == image.names.len();
    if !by_name && image.names.len() > 1 && !force {
        return Err(ApiError::conflict(format!(
            "conflict: unable to delete {} (must be forced) - image is referenced in multiple repositories",
            short_id(&id)
        )));
    }
    if last_name_goes && !force {
        let wanted = id.clone();
        let user = state
            .engine
            .read(move |v| {
                v.core
                    .containers()
                    .find(|c| c.record.config.image_id.as_deref() == Some(wanted.as_str()))
                    .map(|c| c.record.id.to_string())
            })
            .await?;
        if let Some(container) = user {
            return Err(ApiError::conflict(format!(
                "conflict: unable to remove repository reference \"{reference}\" (must force) - container {} is using its referenced image {}",
                &container[..container.len().min(12)],
                short_id(&id)
            )));
        }
    }
    let mut out = Vec::new();
    for n in &doomed {
        state
            .adapter
            .delete_image(n)
            .await
            .map_err(|e| image_error(n, e))?;
        publish(&state, "untag", &id, &familiar(n));
        out.push(json!({ "Untagged": familiar(n) }));
    }
    if last_name_goes {
        publish(&state, "delete", &id, &familiar(&doomed.join(",")));
        out.push(json!({ "Deleted": id }));
    }
    Ok(Json(Value::Array(out)).into_response())
}

pub(super) fn short_id(id: &str) -> String {
    id.strip_prefix("sha256:")
        .unwrap_or(id)
        .chars()
        .take(12)
        .collect()
}

/// Streams a request body to `path`; returns how many bytes it held.
pub(super) async fn store_upload(
    body: &mut axum::body::BodyDataStream,
    path: &std::path::Path,
) -> Result<u64, ApiError> {
    let stored = |e: std::io::Error| ApiError::internal(format!("cannot store the upload: {e}"));
    let mut file = tokio::fs::File::create(path).await.map_err(stored)?;
    let mut total: u64 = 0;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the upload: {e}")))?;
        total += chunk.len() as u64;
        file.write_all(&chunk).await.map_err(stored)?;
    }
    file.flush().await.map_err(stored)?;
    Ok(total)
}

/// The image name a commit or an import writes: `repo` and `tag` from the
/// query, normalized (`what` names the operation in the refusal).
pub(super) fn new_image_name(p: &Params, what: &str) -> Result<String, ApiError> {
    let repo = p.str("repo").filter(|r| !r.is_empty()).ok_or_else(|| {
        ApiError::bad_request(format!(
            "holdfast needs a repository name for {what} (untagged images are not supported yet)"
        ))
    })?;
    let name = match p.str("tag").filter(|t| !t.is_empty()) {
        Some(tag) => format!("{repo}:{tag}"),
        None => repo.to_owned(),
    };
    if name
        .chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return Err(ApiError::bad_request(format!(
            "invalid reference format: repository name ({name}) must be lowercase"
        )));
    }
    Ok(normalize_reference(&name))
}

/// `POST /images/load`: the tarball (docker-archive or OCI layout) is
/// streamed to a temporary file, then imported.
pub async fn load(
    State(state): State<ApiState>,
    query: RawQuery,
    body: Body,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let quiet = p.bool("quiet");
    let dir = tempfile::Builder::new()
        .prefix("load-")
        .tempdir_in(&state.data_root)
        .map_err(|e| ApiError::internal(format!("cannot make room for the upload: {e}")))?;
    let path = dir.path().join("image.tar");
    let total = store_upload(&mut body.into_data_stream(), &path).await?;
    if total == 0 {
        return Err(ApiError::bad_request(
            "no image tarball in the request body",
        ));
    }
    let imported = state
        .adapter
        .import_image(&path)
        .await
        .map_err(|e| image_error("", e))?;
    let mut lines = String::new();
    for i in &imported {
        let id = match state.adapter.resolve_image(&i.name).await {
            Ok(r) => r.config_digest,
            Err(_) => i.target_digest.clone(),
        };
        publish(&state, "load", &id, &familiar(&i.name));
        let msg = json!({ "stream": format!("Loaded image: {}\n", familiar(&i.name)) });
        lines.push_str(&msg.to_string());
        lines.push('\n');
    }
    if imported.is_empty() && !quiet {
        lines.push_str(&json!({ "stream": "No image was named in the tarball\n" }).to_string());
        lines.push('\n');
    }
    let mut r = lines.into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn familiar_names() {
        assert_eq!(
            familiar("docker.io/library/busybox:latest"),
            "busybox:latest"
        );
        assert_eq!(familiar("docker.io/me/app:1"), "me/app:1");
        assert_eq!(familiar("localhost:5000/app:1"), "localhost:5000/app:1");
    }

    #[test]
    fn history_reads_as_dockerd_shows_it() {
        let step = |created_by: &str, empty_layer: bool| HistoryEntry {
            created: "2024-01-02T03:04:05Z".into(),
            created_by: created_by.into(),
            comment: String::new(),
            empty_layer,
        };
        let history = [
            step("ADD rootfs /", false),
            step("CMD [\"sh\"]", true),
            step("holdfast commit", false),
        ];
        let items = history_json("sha256:ab", &["mine:1".to_owned()], &history, &[100, 7])
            .expect("as many layers as steps that made one");
        assert_eq!(items.len(), 3);
        assert_eq!(items[0]["Id"], "sha256:ab");
        assert_eq!(items[0]["Tags"], json!(["mine:1"]));
        assert_eq!(items[0]["CreatedBy"], "holdfast commit");
        assert_eq!(items[0]["Size"], 7);
        assert_eq!(items[1]["Id"], "<missing>");
        assert_eq!(items[1]["Tags"], Value::Null);
        assert_eq!(items[1]["Size"], 0);
        assert_eq!(items[2]["Size"], 100);
        assert_eq!(items[2]["Created"], 1_704_164_645);
        assert!(history_json("sha256:ab", &[], &history, &[100]).is_err());
        assert_eq!(history_json("sha256:ab", &[], &[], &[100]), Ok(Vec::new()));
    }

    #[test]
    fn references_are_checked() {
        assert!(validate_reference("mine:1").is_ok());
        assert!(validate_reference("localhost:5000/a/b:v1.2").is_ok());
        assert!(validate_reference("Mine:1").is_err());
        assert!(validate_reference("mine:").is_err());
        assert!(validate_reference("a//b:1").is_err());
    }
}
