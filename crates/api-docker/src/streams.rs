//! `logs` and `attach`: both read the json-file log that the logger (this
//! binary, run by the shim) writes, so output reaches them live and keeps
//! being recorded while holdfastd is down. Input goes the other way, into
//! the stdin FIFO the shim reads (see [`holdfast_engine::stdio`]). Exec sessions are
//! the same hijacked stream ([`session`]) over the exec's own log.

use super::containers::snapshot;
use super::params::Params;
use super::render;
use super::{ApiError, ApiState};
use axum::body::Body;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdfast_core::{ContainerId, Status};
use holdfast_engine::logs::{self, LogOptions, Stopped};
use holdfast_engine::stdio::{self, DetachKeys, Escape, Input, OnClose};

pub(super) const RAW_STREAM: &str = "application/vnd.docker.raw-stream";
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
        raw: false,
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
    let config = snapshot(&state, id.clone()).await?.record.config;
    if config.log_driver == holdfast_core::LogDriver::None {
        // dockerd's words and status for a driver that keeps nothing.
        return Err(ApiError::not_implemented(
            "configured logging driver does not support reading",
        ));
    }
    let tty = config.tty;
    let stopped = stopped_future(&state, &id, true).await?;
    let options = LogOptions {
        raw: tty,
        ..options
    };
    let frames = logs::frames(state.adapter.log_path(&id), options, stopped);
    let mut r = Body::from_stream(frames).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if tty { RAW_STREAM } else { MULTIPLEXED_STREAM }),
    );
    Ok(r)
}

/// Resolves once the container's task exists (it has started, or ended, or
/// the container is gone): from then on the shim holds its end of the stdin
/// FIFO, and what was written before is not lost when the last writer goes.
async fn task_exists(state: &ApiState, id: &ContainerId) -> Result<Stopped, ApiError> {
    let (_, mut live) = state.events.subscribe();
    if snapshot(state, id.clone()).await?.status != Status::Created {
        return Ok(Box::pin(async {}));
    }
    let id = id.to_string();
    Ok(Box::pin(async move {
        loop {
            match live.recv().await {
                Ok(e)
                    if e.actor_id == id
                        && matches!(e.action.as_str(), "start" | "die" | "destroy") =>
                {
                    return;
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }))
}

/// The response that switches the connection to the raw stream.
pub(super) fn switching_protocols() -> Response {
    let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("tcp"));
    r
}

pub(super) fn wants_upgrade(req: &Request) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"tcp"))
}

/// `POST /containers/{id}/attach`: the connection is upgraded to a raw
/// stream carrying the container's output from now on (multiplexed frames,
/// or the bytes alone for a TTY) until it stops, and, with `stdin`, the
/// client's input into the container's stdin.
pub async fn attach(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
    mut req: Request,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let id = state.engine.resolve(&reference).await?;
    let config = snapshot(&state, id.clone()).await?.record.config;
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
        raw: config.tty,
    };
    // Stdin is attached only to a container created with `-i`, as dockerd does.
    let input = if p.bool("stdin") && stream && config.open_stdin {
        let keys = DetachKeys::from_param(p.str("detachKeys")).map_err(ApiError::bad_request)?;
        let path = state.adapter.stdin_path(&id);
        let writer = stdio::open_writer(&path)
            .map_err(|e| ApiError::internal(format!("stdin of {id} ({}): {e}", path.display())))?;
        Some(Input {
            writer,
            escape: config.tty.then(|| Escape::new(keys)),
            on_close: if config.tty {
                OnClose::EndSession
            } else if config.stdin_once {
                let adapter = state.adapter.clone();
                let id = id.clone();
                OnClose::CloseStdin {
                    ready: task_exists(&state, &id).await?,
                    close: Box::pin(async move {
                        if let Err(e) = adapter.close_stdin(&id, "").await {
                            tracing::debug!(container = %id, error = %e, "close stdin");
                        }
                    }),
                }
            } else {
                OnClose::KeepStdin
            },
        })
    } else {
        None
    };
    // With `logs` only, the past; with `stream`, from now until the next exit.
    let stopped = stopped_future(&state, &id, !stream).await?;
    let frames = logs::frames(state.adapter.log_path(&id), options, stopped);
    let upgrade = hyper::upgrade::on(&mut req);
    if !wants_upgrade(&req) {
        let mut r = Body::from_stream(frames).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
        return Ok(r);
    }
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                let connection = hyper_util::rt::TokioIo::new(upgraded);
                stdio::session(connection, frames, input).await;
            }
            Err(e) => tracing::debug!(error = %e, "attach upgrade failed"),
        }
    });
    Ok(switching_protocols())
}
