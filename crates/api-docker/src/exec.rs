//! `docker exec`: create, start (detached, or a hijacked session like
//! attach), inspect and resize, over the engine's execs backend.

use super::params::Params;
use super::streams::{hijacked, raw_stream, wants_upgrade};
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{ExecSpec, ExecState};
use holdfast_engine::backend::execs::ExecStarted;
use holdfast_engine::stdio::DetachKeys;
use serde::Deserialize;
use serde_json::json;

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

/// `POST /containers/{id}/exec`
pub async fn create(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let spec = decode_exec_create(&body)?;
    let exec_id = state.engine.execs().create(&reference, spec).await?;
    Ok((StatusCode::CREATED, Json(json!({ "Id": exec_id }))).into_response())
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
    let upgrade = hyper::upgrade::on(&mut req);
    let prepared = state.engine.execs().prepare(&exec_id, start.detach).await?;
    if start.detach || !wants_upgrade(&req) {
        return Ok(match prepared.begin().await? {
            ExecStarted::Detached => StatusCode::OK.into_response(),
            ExecStarted::Attached(session) => raw_stream(session.into_parts().0),
        });
    }
    // As dockerd: the 101 goes out before the process starts. A client
    // that reads the upgraded socket beneath the buffer it read the
    // headers through (the Python SDK does) would lose output already
    // written behind them.
    Ok(hijacked(upgrade, "exec", async move {
        prepared.begin_in_stream().await.into_parts()
    }))
}

/// `GET /exec/{id}/json`
pub async fn inspect(
    State(state): State<ApiState>,
    Path(exec_id): Path<String>,
) -> Result<Response, ApiError> {
    let exec = state.engine.execs().inspect(&exec_id).await?;
    let spec = &exec.spec;
    let (running, exit_code, pid) = match exec.state {
        ExecState::Created => (false, None, 0),
        // Its start was sent, its answer not in (yet): it may run.
        ExecState::Starting => (true, None, 0),
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
    let (height, width) = super::params::terminal_size(&Params::parse(&query))?;
    state.engine.execs().resize(&exec_id, height, width).await?;
    Ok(StatusCode::OK.into_response())
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
