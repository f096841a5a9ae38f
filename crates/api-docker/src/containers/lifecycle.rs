//! The lifecycle of a container: start, stop, restart, kill, pause,
//! unpause, wait, remove and resize. Each is one command (or one call of
//! the containers backend) for the container a reference names; its answer
//! is the response.

use crate::params::Params;
use crate::state::{Done, respond};
use crate::{ApiError, ApiState};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{Answer, Command, Signal, WaitCondition};
use serde_json::json;
use std::time::Duration;

/// A lifecycle command's answer: done 204, nothing to do 304.
fn lifecycle(answer: Answer) -> Result<Response, ApiError> {
    respond(answer, Done::NoContentOrNotModified)
}

/// `POST /containers/{id}/start`. Its query's options are refused by
/// name, never ignored: holdfast has no checkpoints, and a start attaches
/// nothing for `detachKeys` to end (attach and exec start take them).
pub async fn start(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    start_options(&Params::parse(&query))?;
    let start = |id| Command::Start { id };
    lifecycle(state.engine.container_command(&reference, start).await)
}

/// `POST /containers/{id}/pause`: 204 once containerd froze it.
pub async fn pause(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let pause = |id| Command::Pause { id };
    lifecycle(state.engine.container_command(&reference, pause).await)
}

/// `POST /containers/{id}/unpause`: 204 once containerd thawed it.
pub async fn unpause(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
) -> Result<Response, ApiError> {
    let unpause = |id| Command::Unpause { id };
    lifecycle(state.engine.container_command(&reference, unpause).await)
}

/// `t` (seconds; negative: wait for ever) and `signal`, shared by stop and restart.
fn start_options(p: &Params) -> Result<(), ApiError> {
    for (key, why) in [
        ("checkpoint", "holdfast has no checkpoints"),
        ("checkpoint-dir", "holdfast has no checkpoints"),
        (
            "detachKeys",
            "a start attaches nothing; give detachKeys to attach or exec start",
        ),
    ] {
        if p.str(key).is_some_and(|v| !v.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "start: {key} is not supported ({why})"
            )));
        }
    }
    Ok(())
}

fn stop_options(p: &Params) -> Result<(Option<Duration>, Option<Signal>), ApiError> {
    let timeout = p.int::<i64>("t")?.map(|t| {
        u64::try_from(t).map_or(
            Duration::from_secs(u64::from(u32::MAX)),
            Duration::from_secs,
        )
    });
    let signal = p
        .str("signal")
        .filter(|s| !s.is_empty())
        .map(parse_signal)
        .transpose()?;
    Ok((timeout, signal))
}

pub(super) fn parse_signal(s: &str) -> Result<Signal, ApiError> {
    s.parse::<Signal>()
        .map_err(|e| ApiError::bad_request(e.to_string()))
}

pub async fn stop(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (timeout, signal) = stop_options(&Params::parse(&query))?;
    let stop = move |id| Command::Stop {
        id,
        timeout,
        signal,
    };
    lifecycle(state.engine.container_command(&reference, stop).await)
}

pub async fn restart(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (timeout, signal) = stop_options(&Params::parse(&query))?;
    let restart = move |id| Command::Restart {
        id,
        timeout,
        signal,
    };
    lifecycle(state.engine.container_command(&reference, restart).await)
}

pub async fn kill(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let signal = match p.str("signal").filter(|s| !s.is_empty()) {
        Some(s) => parse_signal(s)?,
        None => Signal::SIGKILL,
    };
    let kill = move |id| Command::Kill { id, signal };
    lifecycle(state.engine.container_command(&reference, kill).await)
}

pub async fn remove(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    if p.bool("link") {
        return Err(ApiError::not_implemented(
            "links are not supported by holdfast",
        ));
    }
    // `-v`: its anonymous volumes go with it, once it is gone.
    let answer = state
        .engine
        .containers()
        .remove(&reference, p.bool("force"), p.bool("v"))
        .await;
    lifecycle(answer)
}

pub async fn wait(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let condition = match p.str("condition").unwrap_or("") {
        "" | "not-running" => WaitCondition::NotRunning,
        "next-exit" => WaitCondition::NextExit,
        "removed" => WaitCondition::Removed,
        other => {
            return Err(ApiError::bad_request(format!(
                "invalid condition: {other:?}: want not-running, next-exit or removed"
            )));
        }
    };
    // dockerd sends the headers at once and the result when the condition
    // is met: the CLI starts the container only after the headers came.
    // If the client goes away, the body is dropped and the wait cancelled.
    let wait = move |id| Command::Wait { id, condition };
    let waiting = state
        .engine
        .container_command_accepted(&reference, wait)
        .await?;
    let body = futures_util::stream::once(async move {
        let result = match waiting.answer().await {
            Answer::Waited { exit_code, error } => json!({
                "StatusCode": exit_code,
                "Error": error.map(|m| json!({ "Message": m })),
            }),
            Answer::Done | Answer::NotModified | Answer::Pruned(_) | Answer::Rootfs { .. } => {
                json!({ "StatusCode": 0, "Error": null })
            }
            Answer::Error(e) => json!({ "StatusCode": -1, "Error": { "Message": e.message } }),
        };
        let mut text = result.to_string();
        text.push('\n');
        Ok::<_, std::convert::Infallible>(Bytes::from(text))
    });
    let mut r = axum::body::Body::from_stream(body).into_response();
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Ok(r)
}

/// `POST /containers/{id}/resize?h=..&w=..`: the init's terminal.
pub async fn resize(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let (height, width) = crate::params::terminal_size(&Params::parse(&query))?;
    state
        .engine
        .containers()
        .resize(&reference, height, width)
        .await?;
    Ok(StatusCode::OK.into_response())
}

pub async fn unsupported(req: axum::extract::Request) -> ApiError {
    ApiError::not_implemented(format!(
        "{} {} is not supported by holdfast yet",
        req.method(),
        req.uri().path()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(query: &str) -> Params {
        Params::parse(&RawQuery(Some(query.to_owned())))
    }

    #[test]
    fn stop_options_read_as_dockerd_reads_them() {
        let (timeout, signal) = stop_options(&params("t=3&signal=SIGUSR1")).expect("valid");
        assert_eq!(timeout, Some(Duration::from_secs(3)));
        assert_eq!(signal, "SIGUSR1".parse().ok());
        // A negative timeout waits for ever (as long as a u32 of seconds).
        let (timeout, signal) = stop_options(&params("t=-1&signal=")).expect("valid");
        assert_eq!(timeout, Some(Duration::from_secs(u64::from(u32::MAX))));
        assert_eq!(signal, None);
        assert_eq!(stop_options(&params("")).expect("valid"), (None, None));
        for bad in ["t=soon", "signal=SIGNOPE"] {
            let e = stop_options(&params(bad)).expect_err(bad);
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}: {}", e.message);
        }
    }

    #[test]
    fn start_refuses_its_options_by_name() {
        assert!(start_options(&params("")).is_ok());
        assert!(start_options(&params("detachKeys=")).is_ok());
        for (query, key) in [
            ("detachKeys=ctrl-x", "detachKeys"),
            ("checkpoint=c1", "checkpoint"),
            ("checkpoint-dir=/x", "checkpoint-dir"),
        ] {
            let e = start_options(&params(query)).expect_err(query);
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(key), "{query}: {}", e.message);
        }
    }

    #[test]
    fn answers_are_204_done_and_304_nothing_to_do() {
        let status = |a| lifecycle(a).map(|r| r.status());
        assert_eq!(status(Answer::Done).ok(), Some(StatusCode::NO_CONTENT));
        assert_eq!(
            status(Answer::NotModified).ok(),
            Some(StatusCode::NOT_MODIFIED)
        );
        let refused = holdfast_core::RequestError::new(
            holdfast_core::ErrorKind::Conflict,
            "You cannot remove a running container",
        );
        let e = lifecycle(Answer::Error(refused)).expect_err("refused");
        assert_eq!(e.status, StatusCode::CONFLICT);
    }
}
