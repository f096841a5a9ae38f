//! `docker cp`: `GET`, `HEAD` and `PUT /containers/{id}/archive?path=..`,
//! and `docker export`. The engine's containers backend finds the
//! container's root and runs the archive helper in it; here the streams
//! are wired to HTTP, with the path's stat in its header.

use super::params::Params;
use super::{ApiError, ApiState};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use holdfast_engine::archive::{PathStat, PutOptions};

const STAT_HEADER: &str = "x-docker-container-path-stat";

fn path_param(query: &RawQuery) -> Result<String, ApiError> {
    Params::parse(query)
        .str("path")
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request("bad parameter: path cannot be empty"))
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
    let s = state
        .engine
        .containers()
        .stat_path(&reference, &path)
        .await?;
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
    let archive = state.engine.containers().archive(&reference, &path).await?;
    let mut r = Body::from_stream(archive.tar).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    h.insert(STAT_HEADER, stat_header(&archive.stat)?);
    Ok(r)
}

/// `GET /containers/{id}/export`: the whole filesystem as a tar, as
/// `docker export` writes it.
pub async fn export(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let tar = state.engine.containers().export(&reference).await?;
    let mut r = Body::from_stream(tar).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-tar"),
    );
    Ok(r)
}

/// `PUT /containers/{id}/archive?path=DIR&copyUIDGID=..&noOverwriteDirNonDir=..`:
/// extracts the tar body into DIR.
pub async fn put(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
    req: Request,
) -> Result<Response, ApiError> {
    let path = path_param(&query)?;
    let p = Params::parse(&query);
    let options = PutOptions {
        keep_owners: p.bool("copyUIDGID"),
        no_overwrite_dir_non_dir: p.bool("noOverwriteDirNonDir"),
    };
    let tar = req.into_body().into_data_stream();
    state
        .engine
        .containers()
        .extract(&reference, &path, options, tar)
        .await?;
    Ok(StatusCode::OK.into_response())
}
