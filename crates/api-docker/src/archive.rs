//! `docker cp`: `GET`, `HEAD` and `PUT /containers/{id}/archive?path=..`.
//! The tar work happens in a helper chrooted into the container (see
//! [`holdfast_engine::archive`]); here the container's root is found (a running
//! container's through its init, a stopped one's snapshot mounted for the
//! length of the request) and the streams are wired to HTTP.

use super::containers::snapshot;
use super::params::Params;
use super::{ApiError, ApiState};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures_util::StreamExt as _;
use holdfast_core::{ContainerId, Status, TaskState};
use holdfast_engine::archive::{self, ArchiveError, Op, PathStat};
use nix::mount::{MntFlags, MsFlags};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const STAT_HEADER: &str = "x-docker-container-path-stat";
static NEXT_MOUNT: AtomicU64 = AtomicU64::new(0);

impl From<ArchiveError> for ApiError {
    fn from(e: ArchiveError) -> ApiError {
        match e {
            ArchiveError::NotFound(m) => ApiError::not_found(m),
            ArchiveError::Invalid(m) => ApiError::bad_request(m),
            ArchiveError::Failed(m) => ApiError::internal(m),
        }
    }
}

/// A container's root filesystem for the length of one request.
#[derive(Debug)]
pub(super) enum Root {
    /// `/proc/<pid>/root` of the running init.
    Live(PathBuf),
    /// The snapshot, mounted here; unmounted and removed on drop.
    Mounted(PathBuf),
}

impl Root {
    pub(super) fn path(&self) -> &std::path::Path {
        match self {
            Root::Live(p) | Root::Mounted(p) => p,
        }
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Root::Mounted(dir) = self {
            if let Err(e) = nix::mount::umount2(dir.as_path(), MntFlags::MNT_DETACH) {
                tracing::warn!(dir = %dir.display(), error = %e, "unmounting a copy's rootfs");
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

async fn root_of(state: &ApiState, id: &ContainerId) -> Result<Root, ApiError> {
    let s = snapshot(state, id.clone()).await?;
    if let (Status::Running, TaskState::Running { pid }) = (s.status, s.task) {
        return Ok(Root::Live(PathBuf::from(format!("/proc/{pid}/root"))));
    }
    mounted_root(state, id).await
}

/// The container's snapshot, mounted for the length of one request.
pub(super) async fn mounted_root(state: &ApiState, id: &ContainerId) -> Result<Root, ApiError> {
    let mounts = state
        .adapter
        .rootfs_mounts(id)
        .await
        .map_err(ApiError::from)?;
    if mounts.is_empty() {
        return Err(ApiError::internal(format!("container {id} has no rootfs")));
    }
    let n = NEXT_MOUNT.fetch_add(1, Ordering::Relaxed);
    let dir = state.exec_root.join("cp").join(format!("{id}-{n}"));
    std::fs::create_dir_all(&dir)
        .map_err(|e| ApiError::internal(format!("{}: {e}", dir.display())))?;
    let root = Root::Mounted(dir.clone());
    for m in &mounts {
        let mut flags = MsFlags::empty();
        let mut data = Vec::new();
        for o in &m.options {
            match o.as_str() {
                "ro" => flags |= MsFlags::MS_RDONLY,
                "rw" => {}
                "bind" => flags |= MsFlags::MS_BIND,
                "rbind" => flags |= MsFlags::MS_BIND | MsFlags::MS_REC,
                other => data.push(other),
            }
        }
        let data = data.join(",");
        nix::mount::mount(
            Some(m.source.as_str()),
            dir.as_path(),
            Some(m.kind.as_str()),
            flags,
            (!data.is_empty()).then_some(data.as_str()),
        )
        .map_err(|e| ApiError::internal(format!("mounting the rootfs of {id}: {e}")))?;
    }
    Ok(root)
}

fn path_param(query: &RawQuery) -> Result<String, ApiError> {
    Params::parse(query)
        .str("path")
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request("bad parameter: path cannot be empty"))
}

async fn stat(id: &ContainerId, root: &Root, path: &str) -> Result<PathStat, ApiError> {
    let child = archive::spawn(Op::Stat, root.path(), path, false)
        .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?;
    archive::finish(child).await.map_err(|e| match e {
        ArchiveError::NotFound(_) => {
            ApiError::not_found(format!("Could not find the file {path} in container {id}"))
        }
        other => other.into(),
    })
}

fn stat_header(s: &PathStat) -> Result<HeaderValue, ApiError> {
    let json = serde_json::to_vec(s).map_err(|e| ApiError::internal(e.to_string()))?;
    HeaderValue::from_str(&base64::engine::general_purpose::STANDARD.encode(json))
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// `HEAD /containers/{id}/archive?path=..`: the stat header only.
pub async fn head(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let path = path_param(&query)?;
    let id = state.engine.resolve(&reference).await?;
    let root = root_of(&state, &id).await?;
    let s = stat(&id, &root, &path).await?;
    let mut r = StatusCode::OK.into_response();
    r.headers_mut().insert(STAT_HEADER, stat_header(&s)?);
    Ok(r)
}

/// `GET /containers/{id}/archive?path=..`: a tar of the path.
pub async fn get(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let path = path_param(&query)?;
    let id = state.engine.resolve(&reference).await?;
    let root = root_of(&state, &id).await?;
    let s = stat(&id, &root, &path).await?;
    let mut child = archive::spawn(Op::Get, root.path(), &path, false)
        .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| ApiError::internal("archive helper without stdout"))?;
    // The root stays mounted, and the helper is reaped, once the stream ends.
    let tail = futures_util::stream::once(async move {
        let result = archive::finish(child).await;
        drop(root);
        match result {
            Ok(_) => Ok(bytes::Bytes::new()),
            Err(e) => Err(std::io::Error::other(e.to_string())),
        }
    });
    let body = chunks(stdout).chain(tail);
    let mut r = Body::from_stream(body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    h.insert(STAT_HEADER, stat_header(&s)?);
    Ok(r)
}

/// `GET /containers/{id}/export`: the whole filesystem as a tar, as
/// `docker export` writes it.
pub async fn export(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let id = state.engine.resolve(&reference).await?;
    let root = root_of(&state, &id).await?;
    let mut child = archive::spawn(Op::GetContents, root.path(), "/", false)
        .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| ApiError::internal("archive helper without stdout"))?;
    let tail = futures_util::stream::once(async move {
        let result = archive::finish(child).await;
        drop(root);
        result
            .map(|_| bytes::Bytes::new())
            .map_err(|e| std::io::Error::other(e.to_string()))
    });
    let mut r = Body::from_stream(chunks(stdout).chain(tail)).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    Ok(r)
}

/// A child's stdout as a stream of chunks.
fn chunks(
    from: tokio::process::ChildStdout,
) -> impl futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send {
    futures_util::stream::unfold(Some(from), |from| async move {
        let mut from = from?;
        let mut buf = vec![0u8; 64 * 1024];
        match from.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(bytes::Bytes::from(buf)), Some(from)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

/// `PUT /containers/{id}/archive?path=DIR`: extracts the tar body into DIR.
pub async fn put(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
    req: Request,
) -> Result<Response, ApiError> {
    let path = path_param(&query)?;
    let keep_owners = Params::parse(&query).bool("copyUIDGID");
    let id = state.engine.resolve(&reference).await?;
    let root = root_of(&state, &id).await?;
    let s = stat(&id, &root, &path).await?;
    if !s.is_dir() {
        return Err(ApiError::bad_request(format!(
            "extraction point is not a directory: {path}"
        )));
    }
    let mut child = archive::spawn(Op::Put, root.path(), &path, keep_owners)
        .map_err(|e| ApiError::internal(format!("archive helper: {e}")))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| ApiError::internal("archive helper without stdin"))?;
    let mut body = req.into_body().into_data_stream();
    while let Some(chunk) = body.next().await {
        let chunk =
            chunk.map_err(|e| ApiError::bad_request(format!("reading the archive: {e}")))?;
        if stdin.write_all(&chunk).await.is_err() {
            // The helper stopped reading: its report says why.
            break;
        }
    }
    drop(stdin);
    archive::finish(child).await?;
    drop(root);
    Ok(StatusCode::OK.into_response())
}
