//! What a running container's processes are and use: `docker top` (the
//! host's `ps`, filtered to the container's pids, as dockerd does) and
//! `docker stats` (its cgroup, see [`holdfast_engine::stats`]).

use super::containers::snapshot;
use super::params::Params;
use super::render;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_core::{ContainerId, Status, TaskState};
use holdfast_engine::stats::{self, Sample};
use serde_json::json;
use std::time::Duration;

/// How often a streaming `docker stats` gets a new sample (as dockerd).
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// The init pid of a running container; 409 otherwise, as dockerd.
async fn running_pid(state: &ApiState, id: &ContainerId) -> Result<u32, ApiError> {
    let s = snapshot(state, id.clone()).await?;
    match (s.status, s.task) {
        (Status::Running, TaskState::Running { pid }) => Ok(pid),
        _ => Err(ApiError::conflict(format!("Container {id} is not running"))),
    }
}

/// `GET /containers/{id}/top?ps_args=-ef`
pub async fn top(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    let args: Vec<String> = p
        .str("ps_args")
        .filter(|a| !a.is_empty())
        .unwrap_or("-ef")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let id = state.engine.resolve(&reference).await?;
    running_pid(&state, &id).await?;
    let pids = state.adapter.list_pids(&id).await.map_err(ApiError::from)?;
    let out = tokio::process::Command::new("ps")
        .args(&args)
        .output()
        .await
        .map_err(|e| ApiError::internal(format!("running ps: {e}")))?;
    if !out.status.success() {
        return Err(ApiError::internal(format!(
            "ps {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let (titles, processes) = filter_ps(&String::from_utf8_lossy(&out.stdout), &pids)?;
    Ok(Json(json!({ "Titles": titles, "Processes": processes })).into_response())
}

/// `ps` output: the header's titles, and the rows whose PID is one of
/// `pids` (each split into as many fields as titles, the last taking the rest).
pub fn filter_ps(output: &str, pids: &[u32]) -> Result<(Vec<String>, Vec<Vec<String>>), ApiError> {
    let mut lines = output.lines();
    let titles: Vec<String> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let Some(pid_column) = titles.iter().position(|t| t == "PID") else {
        return Err(ApiError::internal(
            "Couldn't find PID field in ps output (give ps_args that show a PID column)",
        ));
    };
    let mut rows = Vec::new();
    for line in lines {
        let mut fields: Vec<String> = Vec::with_capacity(titles.len());
        let mut rest = line.trim_start();
        while fields.len() + 1 < titles.len() {
            let Some((field, tail)) = rest.split_once(char::is_whitespace) else {
                break;
            };
            fields.push(field.to_owned());
            rest = tail.trim_start();
        }
        if !rest.is_empty() {
            fields.push(rest.to_owned());
        }
        let Some(pid) = fields.get(pid_column).and_then(|f| f.parse::<u32>().ok()) else {
            continue;
        };
        if pids.contains(&pid) {
            rows.push(fields);
        }
    }
    Ok((titles, rows))
}

/// `GET /containers/{id}/stats?stream=..&one-shot=..`
pub async fn stats(
    State(state): State<ApiState>,
    Path(reference): Path<String>,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let p = Params::parse(&query);
    // dockerd streams unless told `stream=false` (an absent value is true).
    let stream = p.str("stream").is_none_or(|_| p.bool("stream"));
    let one_shot = p.bool("one-shot");
    let id = state.engine.resolve(&reference).await?;
    let snap = snapshot(&state, id.clone()).await?;
    let name = snap.record.name.clone();
    let pid = match (snap.status, snap.task) {
        (Status::Running, TaskState::Running { pid }) => Some(pid),
        _ => None,
    };
    let take = move || -> Option<(Sample, String)> {
        let pid = pid?;
        let cgroup = stats::cgroup_of(pid, std::path::Path::new("/sys/fs/cgroup")).ok()?;
        let proc_stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        Some((
            stats::sample(&cgroup, &proc_stat),
            render::time(holdfast_engine::engine::wall_now()),
        ))
    };
    let render_one = {
        let (id, name) = (id.to_string(), name.clone());
        move |now: &Option<(Sample, String)>, before: &Option<(Sample, String)>| -> Bytes {
            // A container that is not running shows zeroes, as dockerd does.
            let empty = (Sample::default(), "0001-01-01T00:00:00Z".to_owned());
            let (sample, time) = now.as_ref().unwrap_or(&empty);
            let before = before.as_ref().map(|(s, t)| (s, t.as_str()));
            let mut text = stats::render(&id, &name, sample, time, before).to_string();
            text.push('\n');
            Bytes::from(text)
        }
    };
    if !stream {
        let first = take();
        if one_shot {
            return Ok(render_one(&first, &None).into_response());
        }
        // Two samples, so the CLI can compute a CPU percentage.
        tokio::time::sleep(STATS_INTERVAL).await;
        let second = take();
        return Ok(render_one(&second, &first).into_response());
    }
    let body =
        futures_util::stream::unfold((None::<(Sample, String)>, true), move |(before, first)| {
            let render_one = render_one.clone();
            async move {
                if !first {
                    tokio::time::sleep(STATS_INTERVAL).await;
                }
                let now = take();
                let chunk = render_one(&now, &before);
                Some((Ok::<_, std::convert::Infallible>(chunk), (now, false)))
            }
        });
    Ok(Body::from_stream(body).into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ps_rows_are_the_containers_and_keep_their_command_whole() {
        let out = "UID   PID  PPID  C STIME TTY  TIME     CMD\n\
                   root    1     0  0 10:00 ?    00:00:01 /sbin/init splash\n\
                   root  4242    10  0 10:01 ?    00:00:00 sleep 1000 --long arg\n";
        let (titles, rows) = filter_ps(out, &[4242]).unwrap();
        assert_eq!(titles.len(), 8);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][1], "4242");
        assert_eq!(rows[0][7], "sleep 1000 --long arg");
        assert!(filter_ps("USER COMMAND\nroot x\n", &[1]).is_err());
    }
}
