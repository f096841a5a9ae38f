//! `/images/...`: list, inspect, history, tag, remove, save and load; pulls,
//! pushes, imports, searches and distribution inspects in a file each, with what they share in `shared.rs`.
//! Images live in containerd's image store; the engine's images backend
//! reaches it.

mod distribution;
mod import;
mod pull;
mod push;
mod search;
mod shared;

pub use distribution::inspect as distribution;
pub use pull::{PullRequest, create, decode_pull, login};
pub use push::{PushRequest, decode_push};
pub use search::search;
pub use shared::decode_registry_auth;
pub(crate) use shared::new_image_name;

use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdfast_engine::backend::images::{HistoryEntry, Loaded, LocalImage, Removed, familiar};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// `GET /images/json`: one entry per image, with the names the
/// `reference` filter keeps, as dockerd lists them.
pub async fn list(State(state): State<ApiState>, query: RawQuery) -> Result<Json<Value>, ApiError> {
    let p = Params::parse(&query);
    // `all` adds the intermediate images of builds: holdfast has none, so
    // the list is the same either way; `digests` asks for RepoDigests,
    // always there. `shared-size` measures every image's layers against
    // the others' (dockerd's -1 without it: not counted).
    let shared_size = p.bool("shared-size");
    let filters = p.filters()?;
    filters.only(&["dangling", "reference", "before", "since", "label"])?;
    for d in filters.get("dangling") {
        if !matches!(d.as_str(), "true" | "false" | "1" | "0") {
            return Err(ApiError::bad_request(format!(
                "Invalid filter 'dangling={d}'"
            )));
        }
    }
    let images = state.engine.images().list().await?;
    let created = |i: &LocalImage| created_secs(i);
    let bound = |key: &str| -> Result<Option<i64>, ApiError> {
        match filters.get(key) {
            [] => Ok(None),
            [reference] => {
                let found = images
                    .iter()
                    .find(|i| names_image(i, reference))
                    .ok_or_else(|| ApiError::not_found(format!("No such image: {reference}")))?;
                Ok(Some(created(found)))
            }
            _ => Err(ApiError::bad_request(format!(
                "filter {key}: only one image may be named"
            ))),
        }
    };
    let (before, since) = (bound("before")?, bound("since")?);
    let containers = state.engine.images().containers_by_image().await?;
    let layers = if shared_size {
        Some(state.engine.images().layer_usage(&images).await?)
    } else {
        None
    };
    let mut out = Vec::new();
    for i in &images {
        if !filters.any("dangling", |d| matches!(d, "true" | "1") == i.dangling())
            || !filters.labels_match(
                i.resolved
                    .config
                    .labels
                    .as_ref()
                    .unwrap_or(&BTreeMap::new()),
            )
            || before.is_some_and(|b| created(i) >= b)
            || since.is_some_and(|s| created(i) <= s)
        {
            continue;
        }
        let patterns = filters.get("reference");
        let names: Vec<String> = i
            .names
            .iter()
            .filter(|n| patterns.is_empty() || patterns.iter().any(|p| reference_matches(p, n)))
            .cloned()
            .collect();
        // A `reference` filter leaves out what it names not (an untagged
        // image: everything).
        if names.is_empty() && !patterns.is_empty() {
            continue;
        }
        let mut shown = i.clone();
        shown.names = names;
        let used = containers
            .get(&i.resolved.config_digest)
            .copied()
            .unwrap_or(0);
        // What its layers take unpacked, as dockerd shows it.
        let (size, shared) = match layers
            .as_ref()
            .and_then(|l| l.images.get(&i.resolved.config_digest))
        {
            Some(own) => (own.size, own.shared_size),
            None => (state.engine.images().unpacked_size(i).await?, -1),
        };
        out.push(summary_json(&shown, size, shared, used));
    }
    Ok(Json(Value::Array(out)))
}

/// The image's `created`, in Unix seconds (0 when its config has none).
fn created_secs(i: &LocalImage) -> i64 {
    i.resolved
        .created
        .as_deref()
        .and_then(crate::render::parse_rfc3339)
        .map_or(0, |t| t.as_unix_nanos().div_euclid(1_000_000_000))
}

/// Whether `reference` (a name, `name:tag`, a full or short id) names `i`.
fn names_image(i: &LocalImage, reference: &str) -> bool {
    let id = i.resolved.config_digest.as_str();
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    let bare = reference.strip_prefix("sha256:").unwrap_or(reference);
    i.names.iter().any(|n| {
        let f = familiar(n);
        f == reference || f.strip_suffix(":latest") == Some(reference)
    }) || (bare.len() >= 4 && hex.starts_with(bare))
}

/// docker's `reference` filter: the pattern (`*` and `?` as in a shell,
/// never across a `/`) matches the familiar name with its tag, or without.
fn reference_matches(pattern: &str, name: &str) -> bool {
    let full = familiar(name);
    let repo = familiar(&holdfast_engine::backend::images::repository_of(name));
    glob(pattern.as_bytes(), full.as_bytes()) || glob(pattern.as_bytes(), repo.as_bytes())
}

/// Go's `path.Match` for `*` and `?` (other bytes match themselves).
fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((b'*', rest)) => (0..=s.len())
            .take_while(|&k| !s[..k].contains(&b'/'))
            .any(|k| glob(rest, &s[k..])),
        Some((b'?', rest)) => s.first().is_some_and(|c| *c != b'/') && glob(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && glob(rest, &s[1..]),
    }
}

/// An image as `docker images` and `docker system df` list it: its `size`,
/// and what it shares and how many containers use it (-1: not counted).
/// An untagged image is listed as `<none>:<none>`, as API 1.43's dockerd
/// lists it.
pub(crate) fn summary_json(i: &LocalImage, size: i64, shared_size: i64, containers: i64) -> Value {
    let (tags, digests) = if i.dangling() {
        (json!(["<none>:<none>"]), json!(["<none>@<none>"]))
    } else {
        (
            json!(familiar_all(i.tags())),
            json!(familiar_all(i.digests())),
        )
    };
    json!({
        "Id": i.resolved.config_digest,
        "ParentId": "",
        "RepoTags": tags,
        "RepoDigests": digests,
        "Created": created_secs(i),
        "Size": size,
        "SharedSize": shared_size,
        "VirtualSize": size,
        "Labels": i.resolved.config.labels,
        "Containers": containers,
    })
}

/// Names as Docker shows them (`busybox:latest`).
fn familiar_all<'a>(names: impl Iterator<Item = &'a String>) -> Vec<String> {
    names.map(|n| familiar(n)).collect()
}

/// The config dockerd shows for an image without `container_config`:
/// every field at its zero value.
fn empty_container_config() -> Value {
    json!({
        "Hostname": "", "Domainname": "", "User": "",
        "AttachStdin": false, "AttachStdout": false, "AttachStderr": false,
        "Tty": false, "OpenStdin": false, "StdinOnce": false,
        "Env": null, "Cmd": null, "Image": "", "Volumes": null,
        "WorkingDir": "", "Entrypoint": null, "OnBuild": null, "Labels": null,
    })
}

fn inspect_json(i: &LocalImage, size: i64) -> Value {
    let c = &i.resolved.config;
    json!({
        "Id": i.resolved.config_digest,
        "RepoTags": familiar_all(i.tags()),
        "RepoDigests": familiar_all(i.digests()),
        "Parent": "",
        "Comment": "",
        // As the config says (dockerd shows it as written); the zero time
        // for a config without one, as dockerd.
        "Created": i.resolved.created.clone().unwrap_or_else(|| crate::render::ZERO_TIME.to_owned()),
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
        // API 1.43 still has it (docker-compose 1 reads its `Volumes` to
        // recreate a container): the config's own, or, for an image that
        // has none (built by BuildKit, OCI), the empty config dockerd
        // shows then.
        "ContainerConfig": i.resolved.container_config.clone().unwrap_or_else(empty_container_config),
        "Architecture": i.resolved.architecture,
        "Os": i.resolved.os,
        "Size": size,
        "VirtualSize": size,
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
        let images = state.engine.images();
        let image = images.find(name).await?;
        let size = images.unpacked_size(&image).await?;
        return Ok(Json(inspect_json(&image, size)).into_response());
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
        let (image, sizes) = state.engine.images().history(name).await?;
        let mut tags = familiar_all(image.tags());
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
    let chunks = state.engine.images().save(references).await?;
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
        state.engine.images().tag(name, &new_reference).await?;
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

/// `DELETE /images/{name}?force=..&noprune=..`: untags; deletes the image
/// when its last name goes. Refused (409) while a container uses it, unless
/// forced. `noprune` (keep the untagged parents) holds either way: an
/// image in containerd's store has no parent images, only its layers,
/// which go with it.
pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let removed = state
        .engine
        .images()
        .remove(&reference, p.bool("force"))
        .await?;
    Ok(Json(Value::Array(removed.iter().map(removed_json).collect())).into_response())
}

/// One step of a removal as dockerd lists it.
pub(crate) fn removed_json(removed: &Removed) -> Value {
    match removed {
        Removed::Untagged(name) => json!({ "Untagged": name }),
        Removed::Deleted(id) => json!({ "Deleted": id }),
    }
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
    let loaded = state.engine.images().load(body.into_data_stream()).await?;
    let mut lines = String::new();
    for image in &loaded {
        let said = match image {
            Loaded::Name(name) => format!("Loaded image: {name}\n"),
            Loaded::Id(id) => format!("Loaded image ID: {id}\n"),
        };
        lines.push_str(&json!({ "stream": said }).to_string());
        lines.push('\n');
    }
    if loaded.is_empty() && !quiet {
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
    fn the_reference_filter_matches_as_dockers() {
        let cases = [
            ("busybox", "docker.io/library/busybox:latest", true),
            ("busybox:latest", "docker.io/library/busybox:latest", true),
            ("busy*", "docker.io/library/busybox:1.36", true),
            ("busybox:1.?6", "docker.io/library/busybox:1.36", true),
            ("*", "example.com/team/app:v1", false),
            ("example.com/*/app", "example.com/team/app:v1", true),
            ("busybox:old", "docker.io/library/busybox:latest", false),
            ("box", "docker.io/library/busybox:latest", false),
            ("busybox", "docker.io/library/busybox@sha256:ab", true),
            ("busy*", "docker.io/library/busybox@sha256:ab", true),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(reference_matches(pattern, name), want, "{pattern} ~ {name}");
        }
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
