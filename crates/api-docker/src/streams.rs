//! `logs` and `attach`: the container's log as the engine reads it (live,
//! and kept while holdfastd is down: the logger writes it), as a response
//! body or on the connection the client hijacks, where attach's input goes
//! the other way, into the container's stdin (or as WebSocket messages:
//! `websocket.rs`). Exec sessions are the same
//! hijacked stream over the exec's own log (`exec.rs`).

use super::params::Params;
use super::render;
use super::{ApiError, ApiState, websocket};
use axum::body::Body;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdfast_engine::backend::containers::AttachOptions;
use holdfast_engine::backend::execs::Cleanup;
use holdfast_engine::engine::wall_now;
use holdfast_engine::logs::LogOptions;
use holdfast_engine::stdio;
use std::future::Future;

pub(super) const RAW_STREAM: &str = "application/vnd.docker.raw-stream";
const MULTIPLEXED_STREAM: &str = "application/vnd.docker.multiplexed-stream";

fn log_options(p: &Params) -> Result<LogOptions, ApiError> {
    let time = |key: &str| -> Result<Option<i64>, ApiError> {
        match p.str(key).filter(|s| !s.is_empty() && *s != "0") {
            None => Ok(None),
            Some(t) => render::parse_client_time(t, wall_now())
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
    let log = state.engine.containers().logs(&reference, options).await?;
    let tty = log.tty;
    let mut r = Body::from_stream(log.frames).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(if tty { RAW_STREAM } else { MULTIPLEXED_STREAM }),
    );
    Ok(r)
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
    let options = AttachOptions {
        stdout: p.bool("stdout"),
        stderr: p.bool("stderr"),
        logs: p.bool("logs"),
        stream: p.bool("stream"),
        stdin: p.bool("stdin"),
        detach_keys: p.str("detachKeys").map(str::to_owned),
        plain_input: false,
        raw_output: false,
    };
    let attached = state
        .engine
        .containers()
        .attach(&reference, options)
        .await?;
    let (frames, input) = (attached.output.frames, attached.input);
    let upgrade = hyper::upgrade::on(&mut req);
    if !wants_upgrade(&req) {
        return Ok(raw_stream(frames));
    }
    let no_cleanup: Cleanup = Box::new(|| {});
    Ok(hijacked(upgrade, "attach", async move {
        (frames, input, no_cleanup)
    }))
}

/// `output` as a response body of the raw stream (a client that did not
/// ask for the connection).
pub(super) fn raw_stream(output: stdio::Output) -> Response {
    let mut r = Body::from_stream(output).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
    r
}

/// A session (`what`: attach, exec) on the connection the client takes
/// over once the 101 is out: `session` (begun only then) gives the output
/// to send, the input to take, and what to run when the session is over.
pub(super) fn hijacked<S>(
    upgrade: hyper::upgrade::OnUpgrade,
    what: &'static str,
    session: S,
) -> Response
where
    S: Future<Output = (stdio::Output, Option<stdio::Input>, Cleanup)> + Send + 'static,
{
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => {
                let (output, input, then) = session.await;
                let connection = hyper_util::rt::TokioIo::new(upgraded);
                stdio::session(connection, output, input).await;
                then();
            }
            Err(e) => {
                tracing::debug!(error = %e, "{what} upgrade failed");
                // Nothing was begun for a client that is gone: what the
                // session would have cleaned up is dropped with it.
                drop(session);
            }
        }
    });
    switching_protocols()
}

/// `GET /containers/{id}/attach/ws`: the attach of `POST .../attach` as
/// WebSocket messages, as dockerd serves it: the streams are one (no frame
/// headers), stdin, stdout and stderr are attached unless the query says
/// otherwise (dockerd attaches all three whatever it says), and `logs` and
/// `stream` choose the past and the future as for the other attach.
pub async fn attach_websocket(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
    asked: Option<axum::Extension<crate::AskedVersion>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let unless_refused = |key: &str| p.str(key).is_none() || p.bool(key);
    let options = AttachOptions {
        stdout: unless_refused("stdout"),
        stderr: unless_refused("stderr"),
        logs: p.bool("logs"),
        stream: p.bool("stream"),
        stdin: unless_refused("stdin"),
        detach_keys: p.str("detachKeys").map(str::to_owned),
        plain_input: false,
        raw_output: true,
    };
    // The container is looked for first, as dockerd does: a missing one is
    // a 404 whether or not the request was a WebSocket handshake.
    let attached = state
        .engine
        .containers()
        .attach(&reference, options)
        .await?;
    let upgrade = upgrade.map_err(|e| ApiError::bad_request(e.body_text()))?;
    // API 1.42 made the output binary messages; before, text.
    let framing = match asked {
        Some(axum::Extension(v)) if v < crate::AskedVersion(1, 42) => websocket::Framing::Text,
        _ => websocket::Framing::Binary,
    };
    Ok(upgrade.on_upgrade(move |socket| {
        websocket::session(socket, framing, attached.output.frames, attached.input)
    }))
}
