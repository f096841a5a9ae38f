//! What a running container's processes are and use: `docker top` and
//! `docker stats`, as the engine reads them; here they are rendered, and
//! stats streamed once a second.

use super::params::Params;
use super::{ApiError, ApiState};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use holdfast_engine::stats::{self, Sample};
use serde_json::json;
use std::time::Duration;

/// How often a streaming `docker stats` gets a new sample (as dockerd).
const STATS_INTERVAL: Duration = Duration::from_secs(1);

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
    let (titles, processes) = state.engine.containers().top(&reference, &args).await?;
    Ok(Json(json!({ "Titles": titles, "Processes": processes })).into_response())
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
    let source = state.engine.containers().stats(&reference).await?;
    let take = {
        let source = source.clone();
        move || source.sample()
    };
    let render_one = {
        let (id, name) = (source.id, source.name);
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
            let take = take.clone();
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
