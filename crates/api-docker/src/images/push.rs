//! `POST /images/{name}/push` (`docker push`): a local image sent to its
//! registry, answered with dockerd's stream of JSON progress messages.
//!
//! What can be told before anything is sent is an HTTP error as from
//! dockerd (a malformed name 400, an image not present 404);
//! a failure after that (the registry unreachable, credentials refused)
//! comes in the stream as `{"errorDetail":..,"error":..}`.

use super::shared::{
    check_reference, decode_registry_auth, error_line, json_stream, line, progress_bar,
};
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::body::Body;
use axum::extract::RawQuery;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use futures_util::StreamExt as _;
use holdfast_engine::backend::images::{
    PullAuth, PushEvent, PushProgress, PushStatus, PushedImage,
};
use serde_json::{Value, json};

/// What a push request asks for, decoded and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PushRequest {
    /// `repo:tag`; the repository alone for every tag.
    pub reference: String,
    pub auth: PullAuth,
    /// `docker push --all-tags` (no tag given): every local tag of the
    /// repository.
    pub all_tags: bool,
}

/// Decodes a push of `name` (the path's image name) with its query string
/// (`tag`) and `X-Registry-Auth` header. Pure.
pub fn decode_push(
    name: &str,
    query: &str,
    auth_header: Option<&[u8]>,
) -> Result<PushRequest, ApiError> {
    let p = Params::parse(&RawQuery(Some(query.to_owned())));
    let tag = p.str("tag").unwrap_or("").trim();
    let name = name.trim();
    if name.is_empty() {
        return Err(ApiError::bad_request("the image to push must be named"));
    }
    let last = name.rsplit('/').next().unwrap_or(name);
    let (reference, all_tags) = if !tag.is_empty() {
        if last.contains(':') || name.contains('@') {
            return Err(ApiError::bad_request(format!(
                "invalid reference format: {name:?} already has a tag, and tag={tag:?} was given"
            )));
        }
        (format!("{name}:{tag}"), false)
    } else {
        // No tag anywhere: every tag, as dockerd (the CLI's --all-tags).
        (name.to_owned(), !last.contains(':') && !name.contains('@'))
    };
    check_reference(&reference)?;
    if reference.contains('@') {
        return Err(ApiError::bad_request(format!(
            "cannot push a digest reference: {reference}"
        )));
    }
    Ok(PushRequest {
        reference,
        auth: decode_registry_auth(auth_header)?,
        all_tags,
    })
}

fn progress_message(p: &PushProgress) -> Value {
    match p {
        PushProgress::Repository(r) => {
            json!({ "status": format!("The push refers to repository [{r}]") })
        }
        PushProgress::Layer { id, status } => match status {
            PushStatus::Pushing { current, total } => json!({
                "status": "Pushing",
                "progressDetail": { "current": current, "total": total },
                "progress": progress_bar(*current, *total),
                "id": id,
            }),
            other => {
                let text = match other {
                    PushStatus::Preparing => "Preparing",
                    PushStatus::Waiting => "Waiting",
                    PushStatus::Pushed => "Pushed",
                    PushStatus::AlreadyExists => "Layer already exists",
                    PushStatus::Pushing { .. } => "Pushing",
                };
                json!({ "status": text, "progressDetail": {}, "id": id })
            }
        },
    }
}

/// dockerd's last two messages: the digest line the CLI prints, and the
/// `aux` object SDKs read.
fn finished(pushed: &PushedImage) -> [Value; 2] {
    [
        json!({ "status": format!("{}: digest: {} size: {}", pushed.tag, pushed.digest, pushed.size) }),
        json!({
            "progressDetail": {},
            "aux": { "Tag": pushed.tag, "Digest": pushed.digest, "Size": pushed.size },
        }),
    ]
}

/// `POST /images/{name}/push?tag=..`; without a tag, every local tag of
/// the repository, one after another in the order of their names, under
/// one "The push refers to repository" line, each ending with its digest
/// line (dockerd's `--all-tags`). A tag that fails ends the push there.
pub async fn push(
    state: ApiState,
    name: &str,
    headers: &HeaderMap,
    query: &RawQuery,
) -> Result<Response, ApiError> {
    let request = decode_push(
        name,
        query.0.as_deref().unwrap_or(""),
        headers.get("X-Registry-Auth").map(HeaderValue::as_bytes),
    )?;
    let PushRequest {
        reference,
        auth,
        all_tags,
    } = request;
    let events = state
        .engine
        .images()
        .push(reference, auth, all_tags)
        .await?;
    // One repository line for every tag, as dockerd writes it.
    let mut announced = false;
    let lines = events.flat_map(move |event| {
        let messages = match event {
            PushEvent::Progress(PushProgress::Repository(_)) if announced => Vec::new(),
            PushEvent::Progress(p) => {
                announced |= matches!(p, PushProgress::Repository(_));
                vec![line(&progress_message(&p))]
            }
            PushEvent::Pushed { image, .. } => finished(&image).iter().map(line).collect(),
            PushEvent::Failed(message) => vec![error_line(&message)],
        };
        futures_util::stream::iter(messages.into_iter().map(Ok::<_, std::convert::Infallible>))
    });
    Ok(json_stream(Body::from_stream(lines)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[test]
    fn push_requests_decode_like_dockerd() {
        let r = decode_push("127.0.0.1:5000/mine", "tag=1", None).expect("decodes");
        assert_eq!(r.reference, "127.0.0.1:5000/mine:1");
        assert_eq!(r.auth, PullAuth::Anonymous);
        let r = decode_push("localhost:5000/mine:2", "", None).expect("decodes");
        assert_eq!(r.reference, "localhost:5000/mine:2");
        let all = decode_push("localhost:5000/mine", "", None).expect("every tag");
        assert!(all.all_tags);
        assert_eq!(all.reference, "localhost:5000/mine");
        assert!(!r.all_tags);
        for (name, query) in [
            ("", "tag=1"),
            ("Mine", "tag=1"),
            ("mine", "tag=-x"),
            ("mine:1", "tag=2"),
            ("localhost:/mine", "tag=1"),
        ] {
            let e = decode_push(name, query, None).expect_err(name);
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{name}: {}", e.message);
        }
    }

    #[test]
    fn progress_reads_like_dockerd() {
        let m = progress_message(&PushProgress::Layer {
            id: "0123456789ab".into(),
            status: PushStatus::AlreadyExists,
        });
        assert_eq!(m["status"], "Layer already exists");
        let m = progress_message(&PushProgress::Repository("127.0.0.1:5000/mine".into()));
        assert_eq!(
            m["status"],
            "The push refers to repository [127.0.0.1:5000/mine]"
        );
        let [status, aux] = finished(&PushedImage {
            tag: "1".into(),
            digest: "sha256:ab".into(),
            size: 527,
        });
        assert_eq!(status["status"], "1: digest: sha256:ab size: 527");
        assert_eq!(aux["aux"]["Size"], 527);
        assert_eq!(aux["aux"]["Tag"], "1");
    }
}
