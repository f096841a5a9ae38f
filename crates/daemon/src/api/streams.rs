//! `logs` and `attach`: both read the json-file log that the logger (this
//! binary, run by the shim) writes, so output reaches them live and keeps
//! being recorded while holdfastd is down.

use super::containers::snapshot;
use super::params::Params;
use super::render;
use super::{ApiError, ApiState};
use crate::logs::{self, LogOptions, Stopped};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use holdfast_core::{ContainerId, Status};
use tokio::io::AsyncWriteExt as _;

const RAW_STREAM: &str = "application/vnd.docker.raw-stream";
const MULTIPLEXED_STREAM: &str = "application/vnd.docker.multiplexed-stream";

/// Resolves once the container is no longer running: at once if it is not
/// running now, else at its next `die` or `destroy` event.
async fn stopped_future(
    state: &ApiState,
    id: &ContainerId,
    now_counts: bool,
) -> Result<Stopped, ApiError> {
    // Subscribe before looking, so an exit in between is not missed.
    let (_, mut live) = state.events.subscribe();
    let s = snapshot(state, id.clone()).await?;
    if now_counts && !matches!(s.status, Status::Running | Status::Restarting) {
        return Ok(Box::pin(async {}));
    }
    let id = id.to_string();
    Ok(Box::pin(async move {
        loop {
            match live.recv().await {
                Ok(e) if e.actor_id == id && (e.action == "die" || e.action == "destroy") => return,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }))
}

fn log_options(p: &Params) -> Result<LogOptions, ApiError> {
    let time = |key: &str| -> Result<Option<i64>, ApiError> {
        match p.str(key).filter(|s| !s.is_empty() && *s != "0") {
            None => Ok(None),
            Some(t) => render::parse_client_time(t)
                .map(|w| Some(w.as_unix_nanos()))
                .ok_or_else(|| ApiError::bad_request(format!("invalid value for {key}: {t:?}"))),
        }
    };
    let tail = match p.str("tail").unwrap_or("all") {
        "all" | "" => None,
        n => Some(n.parse::<usize>().map_err(|_| {
            ApiError::bad_request(format!(
                "invalid value for tail: {n:?}: want a number or all"
            ))
        })?),
    };
    Ok(LogOptions {
        stdout: p.bool("stdout"),
        stderr: p.bool("stderr"),
        tail,
        since_nanos: time("since")?,
        until_nanos: time("until")?,
        timestamps: p.bool("timestamps"),
        follow: p.bool("follow"),
    })
}

pub async fn logs(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let options = log_options(&p)?;
    if !options.stdout && !options.stderr {
        return Err(ApiError::bad_request(
            "Bad parameters: you must choose at least one stream",
        ));
    }
    let id = state.engine.resolve(&reference).await?;
    let stopped = stopped_future(&state, &id, true).await?;
    let frames = logs::frames(state.adapter.log_path(&id), options, stopped);
    let mut r = Body::from_stream(frames).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(MULTIPLEXED_STREAM),
    );
    Ok(r)
}

/// `POST /containers/{id}/attach`: output only (stdin comes with exec and
/// TTY support). The connection is upgraded to a raw stream carrying
/// multiplexed frames from now on, until the container stops.
pub async fn attach(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
    mut req: Request,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    if p.bool("stdin") {
        tracing::debug!("attach asked for stdin, which holdfast does not carry yet");
    }
    let id = state.engine.resolve(&reference).await?;
    let logs_too = p.bool("logs");
    let stream = p.bool("stream");
    let options = LogOptions {
        stdout: p.bool("stdout"),
        stderr: p.bool("stderr"),
        tail: if logs_too { None } else { Some(0) },
        since_nanos: None,
        until_nanos: None,
        timestamps: false,
        follow: stream,
    };
    // With `logs` only, the past; with `stream`, from now until the next exit.
    let stopped = stopped_future(&state, &id, !stream).await?;
    let frames = logs::frames(state.adapter.log_path(&id), options, stopped);
    let upgrade = hyper::upgrade::on(&mut req);
    let wants_upgrade = req
        .headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"tcp"));
    if !wants_upgrade {
        let mut r = Body::from_stream(frames).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
        return Ok(r);
    }
    tokio::spawn(async move {
        let upgraded = match upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "attach upgrade failed");
                return;
            }
        };
        let mut io = hyper_util::rt::TokioIo::new(upgraded);
        let mut frames = std::pin::pin!(frames);
        while let Some(chunk) = frames.next().await {
            let Ok(chunk) = chunk else { break };
            if io.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = io.flush().await;
        let _ = io.shutdown().await;
    });
    let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("tcp"));
    Ok(r)
}
