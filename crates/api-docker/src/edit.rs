//! Edits of a container: `docker rename`, `docker update --restart` and
//! `docker update` of memory and CPU. All are the core's commands (it owns
//! names, restart decisions and when containerd is asked to change a task),
//! sent by the engine's containers backend; what else `update` can name is
//! refused here by name.

use super::containers::{RestartPolicyBody, restart_policy};
use super::params::Params;
use super::state::{Done, respond};
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use holdfast_core::{ResourceUpdate, RestartPolicy};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;

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
    // Peers on a user network know it by its new name from now on.
    let answer = state.engine.containers().rename(&reference, name).await;
    respond(answer, Done::Always(StatusCode::NO_CONTENT))
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

/// What an update body asks for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Update {
    pub policy: Option<RestartPolicy>,
    /// `None` when no resource is given.
    pub resources: Option<ResourceUpdate>,
}

/// dockerd's floor for a memory limit.
const MEMORY_MIN_BYTES: i64 = 6 << 20;

/// Takes a resource field the CLI sends (0 when not given) out of `map`.
fn take_i64(map: &mut BTreeMap<String, Value>, key: &str) -> Result<Option<i64>, ApiError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(0) => Ok(None),
            Some(n) => Ok(Some(n)),
            None => Err(ApiError::bad_request(format!(
                "invalid {key}: {v} is not an integer"
            ))),
        },
    }
}

/// Decodes an update body: the new restart policy and the memory and CPU
/// resources, if any; other resources are refused by name. Pure, so it is
/// unit-tested.
pub fn decode_update(body: &[u8]) -> Result<Update, ApiError> {
    let mut b: UpdateBody = if body.iter().all(u8::is_ascii_whitespace) {
        UpdateBody::default()
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON in the request body: {e}")))?
    };
    let memory = take_i64(&mut b.resources, "Memory")?;
    let swap = take_i64(&mut b.resources, "MemorySwap")?;
    let nano_cpus = take_i64(&mut b.resources, "NanoCpus")?;
    let cpu_shares = take_i64(&mut b.resources, "CpuShares")?;
    if let Some(m) = memory
        && m < MEMORY_MIN_BYTES
    {
        return Err(ApiError::bad_request("Minimum memory limit allowed is 6MB"));
    }
    if let (Some(m), Some(s)) = (memory, swap)
        && s > 0
        && s < m
    {
        return Err(ApiError::bad_request(
            "Minimum memoryswap limit should be larger than memory limit, see usage",
        ));
    }
    if swap.is_some_and(|s| s < -1) {
        return Err(ApiError::bad_request("invalid MemorySwap: below -1"));
    }
    let positive = |name: &str, v: Option<i64>| {
        v.map(|n| {
            u64::try_from(n)
                .map_err(|_| ApiError::bad_request(format!("invalid {name}: {n} is negative")))
        })
        .transpose()
    };
    let update = ResourceUpdate {
        memory_limit_bytes: positive("Memory", memory)?,
        memory_swap_bytes: swap,
        nano_cpus: positive("NanoCpus", nano_cpus)?,
        cpu_shares: positive("CpuShares", cpu_shares)?,
    };
    let resources = (update != ResourceUpdate::default()).then_some(update);
    // The CLI sends every field, zero when not given.
    let asked: Vec<&String> = b
        .resources
        .iter()
        .filter(|(_, v)| !is_unset(v))
        .map(|(k, _)| k)
        .collect();
    if let Some(first) = asked.first() {
        return Err(ApiError::bad_request(format!(
            "updating {first} of a container is not supported by holdfast yet (only --restart, --memory, --memory-swap, --cpus and --cpu-shares)"
        )));
    }
    let policy = b
        .restart_policy
        .filter(|p| p.name.as_deref().is_some_and(|n| !n.is_empty()))
        .map(restart_policy)
        .transpose()?;
    Ok(Update { policy, resources })
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
    let Update { policy, resources } = decode_update(&body)?;
    let warnings = state
        .engine
        .containers()
        .update(&reference, resources, policy)
        .await?;
    Ok(Json(json!({ "Warnings": warnings })).into_response())
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
            decode_update(cli).unwrap().policy,
            Some(RestartPolicy::OnFailure { max_retries: 3 })
        );
        assert_eq!(decode_update(b"").unwrap(), Update::default());
        assert_eq!(
            decode_update(br#"{"RestartPolicy":{"Name":""}}"#).unwrap(),
            Update::default()
        );
        let memory = decode_update(br#"{"Memory":67108864,"CpuShares":0}"#).unwrap();
        assert_eq!(
            memory.resources,
            Some(ResourceUpdate {
                memory_limit_bytes: Some(64 << 20),
                ..ResourceUpdate::default()
            })
        );
        let cpus = decode_update(br#"{"NanoCpus":500000000,"CpuShares":512}"#).unwrap();
        assert_eq!(
            cpus.resources,
            Some(ResourceUpdate {
                nano_cpus: Some(500_000_000),
                cpu_shares: Some(512),
                ..ResourceUpdate::default()
            })
        );
        for (body, needle) in [
            (&br#"{"Memory":1024}"#[..], "Minimum memory limit"),
            (br#"{"Memory":67108864,"MemorySwap":1048576}"#, "memoryswap"),
            (br#"{"Memory":"lots"}"#, "Memory"),
            (br#"{"PidsLimit":10}"#, "PidsLimit"),
            (br#"{"CpuShares":-5}"#, "CpuShares"),
        ] {
            let e = decode_update(body).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e.message);
            assert!(e.message.contains(needle), "{needle}: {}", e.message);
        }
        let bad = decode_update(br#"{"RestartPolicy":{"Name":"sometimes"}}"#).unwrap_err();
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }
}
