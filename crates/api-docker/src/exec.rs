//! `docker exec`: create, start (detached, or a hijacked session like
//! attach), inspect and resize. The process runs through the adapter; its
//! output goes through the logger into a log file of its own, read back as
//! attach reads a container's; its end is recorded by [`execs::watch_exit`].

use super::containers::snapshot;
use super::params::Params;
use super::streams::{Input, OnClose, RAW_STREAM, session, switching_protocols, wants_upgrade};
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use holdfast_adapter_containerd::ExecRequest;
use holdfast_core::Status;
use holdfast_engine::execs::{self, Exec, ExecSpec, ExecState};
use holdfast_engine::logs::{self, LogOptions};
use holdfast_engine::stdio::{self, DetachKeys, Escape};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;

/// The body of `POST /containers/{id}/exec`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct CreateBody {
    attach_stdin: bool,
    attach_stdout: bool,
    attach_stderr: bool,
    detach_keys: Option<String>,
    tty: bool,
    env: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    privileged: bool,
    user: Option<String>,
    working_dir: Option<String>,
}

/// Decodes and checks an exec create body. Pure, so it is unit-tested and fuzzed.
pub fn decode_exec_create(body: &[u8]) -> Result<ExecSpec, ApiError> {
    let b: CreateBody = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?;
    let cmd = b.cmd.unwrap_or_default();
    if cmd.is_empty() {
        return Err(ApiError::bad_request("No exec command specified"));
    }
    if b.privileged {
        return Err(ApiError::bad_request(
            "Privileged (docker exec --privileged) is not supported by holdfast yet",
        ));
    }
    if let Some(keys) = &b.detach_keys {
        DetachKeys::from_param(Some(keys)).map_err(ApiError::bad_request)?;
    }
    let env = b.env.unwrap_or_default();
    if let Some(bad) = env.iter().find(|e| e.is_empty() || e.starts_with('=')) {
        return Err(ApiError::bad_request(format!(
            "invalid environment variable: {bad:?}"
        )));
    }
    let working_dir = b.working_dir.filter(|w| !w.is_empty());
    if let Some(w) = &working_dir
        && !w.starts_with('/')
    {
        return Err(ApiError::bad_request(format!(
            "the working directory '{w}' is invalid, it needs to be an absolute path"
        )));
    }
    Ok(ExecSpec {
        cmd,
        env,
        working_dir,
        user: b.user.filter(|u| !u.is_empty()),
        tty: b.tty,
        attach_stdin: b.attach_stdin,
        attach_stdout: b.attach_stdout,
        attach_stderr: b.attach_stderr,
        detach_keys: b.detach_keys.filter(|k| !k.is_empty()),
    })
}

fn not_running(container: &str) -> ApiError {
    ApiError::conflict(format!("Container {container} is not running"))
}

fn paused(container: &str) -> ApiError {
    ApiError::conflict(format!(
        "Container {container} is paused, unpause the container before exec"
    ))
}

/// `POST /containers/{id}/exec`
pub async fn create(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let spec = decode_exec_create(&body)?;
    let id = state.engine.resolve(&reference).await?;
    let s = snapshot(&state, id.clone()).await?;
    if s.status != Status::Running {
        return Err(not_running(id.as_str()));
    }
    if s.paused {
        return Err(paused(id.as_str()));
    }
    let exec_id = new_exec_id()?;
    state.execs.insert(exec_id.clone(), id, spec);
    Ok((StatusCode::CREATED, Json(json!({ "Id": exec_id }))).into_response())
}

fn new_exec_id() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| ApiError::internal(format!("no randomness for an exec id: {e}")))?;
    Ok(hex::encode(bytes))
}

fn lookup(state: &ApiState, exec_id: &str) -> Result<Arc<Exec>, ApiError> {
    state
        .execs
        .get(exec_id)
        .ok_or_else(|| ApiError::not_found(format!("No such exec instance: {exec_id}")))
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct StartBody {
    detach: bool,
}

/// `POST /exec/{id}/start`
pub async fn start(
    State(state): State<ApiState>,
    Path(exec_id): Path<String>,
    mut req: Request,
) -> Result<Response, ApiError> {
    let body = axum::body::to_bytes(std::mem::take(req.body_mut()), 64 * 1024)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
    let start: StartBody = if body.iter().all(u8::is_ascii_whitespace) {
        StartBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    let exec = lookup(&state, &exec_id)?;
    let container = exec.container.clone();
    let s = snapshot(&state, container.clone()).await?;
    if s.status != Status::Running {
        return Err(not_running(container.as_str()));
    }
    if s.paused {
        return Err(paused(container.as_str()));
    }
    if !exec.begin() {
        return Err(ApiError::conflict(format!(
            "Exec command {exec_id} has already run or is running"
        )));
    }
    let spec = &exec.spec;
    let attached = !start.detach;
    let log = state.adapter.exec_log_path(&container, &exec_id);
    // Everything that must not miss the process is set up before it starts:
    // the exit watch, the output reader and our end of its stdin.
    let live = state.events.subscribe().1;
    let output = (attached && (spec.attach_stdout || spec.attach_stderr)).then(|| {
        let options = LogOptions {
            stdout: spec.attach_stdout,
            stderr: spec.attach_stderr,
            follow: true,
            raw: spec.tty,
            ..LogOptions::default()
        };
        logs::frames(log.clone(), options, Box::pin(exec.exited()))
    });
    let with_stdin = attached && spec.attach_stdin;
    let input = if with_stdin {
        let path = state.adapter.exec_stdin_path(&container, &exec_id);
        let writer = stdio::open_writer(&path)
            .map_err(|e| ApiError::internal(format!("stdin of exec {exec_id}: {e}")))?;
        let keys =
            DetachKeys::from_param(spec.detach_keys.as_deref()).map_err(ApiError::bad_request)?;
        Some(Input {
            writer,
            escape: spec.tty.then(|| Escape::new(keys)),
            on_close: if spec.tty {
                OnClose::EndSession
            } else {
                // The session begins once the exec has started: the shim
                // has its end of the FIFO already.
                let adapter = state.adapter.clone();
                let (container, exec_id) = (container.clone(), exec_id.clone());
                OnClose::CloseStdin {
                    ready: Box::pin(async {}),
                    close: Box::pin(async move {
                        if let Err(e) = adapter.close_stdin(&container, &exec_id).await {
                            tracing::debug!(exec = %exec_id, error = %e, "close stdin");
                        }
                    }),
                }
            },
        })
    } else {
        None
    };
    let request = ExecRequest {
        exec_id: exec_id.clone(),
        args: spec.cmd.clone(),
        env: spec.env.clone(),
        working_dir: spec.working_dir.clone(),
        user: spec.user.clone(),
        log_file: Some(log.clone()),
        tty: spec.tty,
        stdin: with_stdin,
    };
    let upgrade = hyper::upgrade::on(&mut req);
    let hijack = wants_upgrade(&req);
    let started = state.adapter.exec(&container, &request).await;
    let cleanup = {
        let stdin = state.adapter.exec_stdin_path(&container, &exec_id);
        move || {
            let _ = std::fs::remove_file(&log);
            let _ = std::fs::remove_file(&stdin);
        }
    };
    match started {
        Ok(pid) => {
            exec.set(ExecState::Running { pid });
            tokio::spawn(execs::watch_exit(
                state.adapter.clone(),
                Arc::clone(&exec),
                live,
            ));
        }
        Err(e) => {
            // As dockerd: a process that could not be started is exit 126,
            // and an attached client reads why in its stream.
            exec.set(ExecState::Exited { code: Some(126) });
            cleanup();
            let message = format!("exec failed: {e}");
            tracing::debug!(exec = %exec_id, %message);
            if !(attached && hijack) {
                return Err(ApiError {
                    message,
                    ..ApiError::from(e)
                });
            }
            let tty = spec.tty;
            tokio::spawn(async move {
                if let Ok(upgraded) = upgrade.await {
                    let text = format!("{message}\r\n");
                    // On stdout, framed unless a terminal, as dockerd writes it.
                    let text = if tty {
                        Bytes::from(text)
                    } else {
                        logs::stdout_frame(text.as_bytes())
                    };
                    let output = futures_util::stream::once(async move { Ok(text) });
                    session(upgraded, output, None).await;
                }
            });
            return Ok(switching_protocols());
        }
    }
    if !attached {
        let exited = exec.exited();
        tokio::spawn(async move {
            exited.await;
            cleanup();
        });
        return Ok(StatusCode::OK.into_response());
    }
    let output = match output {
        Some(frames) => futures_util::StreamExt::boxed(frames),
        None => futures_util::StreamExt::boxed(futures_util::stream::empty()),
    };
    // A session with no output still lasts as long as the process.
    let exited = exec.exited();
    let output = futures_util::StreamExt::chain(
        output,
        futures_util::stream::once(async move {
            exited.await;
            Ok(Bytes::new())
        }),
    );
    if !hijack {
        let mut r = Body::from_stream(output).into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(RAW_STREAM));
        return Ok(r);
    }
    tokio::spawn(async move {
        match upgrade.await {
            Ok(upgraded) => session(upgraded, output, input).await,
            Err(e) => tracing::debug!(error = %e, "exec upgrade failed"),
        }
        cleanup();
    });
    Ok(switching_protocols())
}

/// `GET /exec/{id}/json`
pub async fn inspect(
    State(state): State<ApiState>,
    Path(exec_id): Path<String>,
) -> Result<Response, ApiError> {
    let exec = lookup(&state, &exec_id)?;
    let spec = &exec.spec;
    let (running, exit_code, pid) = match exec.state() {
        ExecState::Created => (false, None, 0),
        ExecState::Running { pid } => (true, None, pid),
        ExecState::Exited { code } => (false, Some(code.unwrap_or(-1)), 0),
    };
    let (entrypoint, arguments) = match spec.cmd.split_first() {
        Some((first, rest)) => (first.clone(), rest.to_vec()),
        None => (String::new(), Vec::new()),
    };
    Ok(Json(json!({
        "ID": exec.id,
        "Running": running,
        "ExitCode": exit_code,
        "ProcessConfig": {
            "tty": spec.tty,
            "entrypoint": entrypoint,
            "arguments": arguments,
            "privileged": false,
            "user": spec.user.clone().unwrap_or_default(),
        },
        "OpenStdin": spec.attach_stdin,
        "OpenStderr": spec.attach_stderr,
        "OpenStdout": spec.attach_stdout,
        "CanRemove": false,
        "ContainerID": exec.container.as_str(),
        "DetachKeys": spec.detach_keys.clone().unwrap_or_default(),
        "Pid": pid,
    }))
    .into_response())
}

/// `POST /exec/{id}/resize?h=..&w=..`
pub async fn resize(
    State(state): State<ApiState>,
    Path(exec_id): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (height, width) = size(&Params::parse(&query))?;
    let exec = lookup(&state, &exec_id)?;
    if !matches!(exec.state(), ExecState::Running { .. }) {
        return Err(ApiError::conflict(format!("Exec {exec_id} is not running")));
    }
    if exec.spec.tty {
        state
            .adapter
            .resize_terminal(&exec.container, &exec_id, width, height)
            .await
            .map_err(ApiError::from)?;
    }
    Ok(StatusCode::OK.into_response())
}

/// `h` and `w` of a resize, both required, as dockerd wants them.
pub(super) fn size(p: &Params) -> Result<(u32, u32), ApiError> {
    let get = |key: &str| {
        p.int::<u32>(key)?
            .ok_or_else(|| ApiError::bad_request(format!("missing parameter {key}")))
    };
    Ok((get("h")?, get("w")?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn exec_bodies_are_checked() {
        let spec = decode_exec_create(
            br#"{"AttachStdin":true,"AttachStdout":true,"Tty":true,"Cmd":["sh"],
                "Env":["A=1"],"User":"1:2","WorkingDir":"/tmp","DetachKeys":"ctrl-x"}"#,
        )
        .unwrap();
        assert_eq!(spec.cmd, ["sh"]);
        assert!(spec.tty && spec.attach_stdin && spec.attach_stdout && !spec.attach_stderr);
        assert_eq!(spec.user.as_deref(), Some("1:2"));
        for (body, needle) in [
            (&br#"{}"#[..], "No exec command"),
            (br#"{"Cmd":[]}"#, "No exec command"),
            (br#"{"Cmd":["x"],"Privileged":true}"#, "Privileged"),
            (br#"{"Cmd":["x"],"DetachKeys":"ctrl-1"}"#, "detach keys"),
            (br#"{"Cmd":["x"],"Env":["=x"]}"#, "environment"),
            (br#"{"Cmd":["x"],"WorkingDir":"rel"}"#, "absolute"),
            (br#"{"Cmd":"x"}"#, "invalid JSON"),
            (br#"nope"#, "invalid JSON"),
        ] {
            let e = decode_exec_create(body).expect_err("refused");
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{needle}: {}", e.message);
        }
    }
}
