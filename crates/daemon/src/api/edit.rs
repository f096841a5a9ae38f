//! Edits of a container's record: `docker rename` and `docker update
//! --restart`. Both are the core's commands (it owns names and restart
//! decisions); what runc would have to change (`update --memory`, CPU) is
//! refused by name until it is carried to the running task.

use super::containers::{RestartPolicyBody, restart_policy};
use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{Answer, Command, RestartPolicy};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

async fn done(
    state: &ApiState,
    command: Command,
    status: StatusCode,
) -> Result<Response, ApiError> {
    match state.engine.command(command).await {
        Answer::Error(e) => Err(e.into()),
        _ if status == StatusCode::OK => {
            Ok(Json(json!({ "Warnings": Vec::<String>::new() })).into_response())
        }
        _ => Ok(status.into_response()),
    }
}

/// `POST /containers/{id}/rename?name=..`
pub async fn rename(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let name = p
        .str("name")
        .map(|n| n.trim_start_matches('/').to_owned())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::bad_request("Neither old nor new names may be empty"))?;
    let id = state.engine.resolve(&reference).await?;
    done(&state, Command::Rename { id, name }, StatusCode::NO_CONTENT).await
}

/// The body of `POST /containers/{id}/update`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase", default)]
struct UpdateBody {
    restart_policy: Option<RestartPolicyBody>,
    /// Everything else is a resource of the running task.
    #[serde(flatten)]
    resources: BTreeMap<String, Value>,
}

/// Decodes an update body: the new restart policy, if any. Resource
/// changes are refused by name. Pure, so it is unit-tested.
pub fn decode_update(body: &[u8]) -> Result<Option<RestartPolicy>, ApiError> {
    let b: UpdateBody = if body.iter().all(u8::is_ascii_whitespace) {
        UpdateBody::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    // The CLI sends every field, zero when not given.
    let asked: Vec<&String> = b
        .resources
        .iter()
        .filter(|(_, v)| !is_unset(v))
        .map(|(k, _)| k)
        .collect();
    if let Some(first) = asked.first() {
        return Err(ApiError::bad_request(format!(
            "updating {first} of a container is not supported by holdfast yet (only --restart)"
        )));
    }
    b.restart_policy
        .filter(|p| p.name.as_deref().is_some_and(|n| !n.is_empty()))
        .map(restart_policy)
        .transpose()
}

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_unset),
    }
}

/// `POST /containers/{id}/update`
pub async fn update(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let policy = decode_update(&body)?;
    let id = state.engine.resolve(&reference).await?;
    match policy {
        Some(policy) => {
            done(
                &state,
                Command::UpdateRestartPolicy { id, policy },
                StatusCode::OK,
            )
            .await
        }
        None => Ok(Json(json!({ "Warnings": Vec::<String>::new() })).into_response()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_the_restart_policy_is_updated() {
        let cli = br#"{"CpuShares":0,"Memory":0,"CpusetCpus":"","BlkioWeight":0,
            "RestartPolicy":{"Name":"on-failure","MaximumRetryCount":3}}"#;
        assert_eq!(
            decode_update(cli).unwrap(),
            Some(RestartPolicy::OnFailure { max_retries: 3 })
        );
        assert_eq!(decode_update(b"").unwrap(), None);
        assert_eq!(
            decode_update(br#"{"RestartPolicy":{"Name":""}}"#).unwrap(),
            None
        );
        let memory = decode_update(br#"{"Memory":67108864}"#).unwrap_err();
        assert!(memory.message.contains("Memory"), "{}", memory.message);
        let bad = decode_update(br#"{"RestartPolicy":{"Name":"sometimes"}}"#).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }
}
