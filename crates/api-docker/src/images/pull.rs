//! `POST /images/create` (`docker pull`, and `docker run` of an image not
//! present) and `POST /auth` (`docker login`): the registry side of images.
//!
//! A pull answers with dockerd's stream of JSON progress messages. Headers
//! wait until the reference resolved: a repository or tag that does not
//! exist, or refused credentials, is an HTTP error as from dockerd; a
//! failure after that comes in the stream as `{"errorDetail":..,"error":..}`.

use super::shared::{
    AuthConfig, check_reference, decode_registry_auth, error_line, json_stream, line, progress_bar,
};
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use holdfast_engine::backend::images::{
    LayerStatus, LoginOutcome, PullAuth, PullEvent, PullProgress, Pulling, host_architecture,
};
use serde_json::{Value, json};

/// What a pull request asks for, decoded and checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// `repo[:tag]` or `repo@digest`, as the user named it; the repository
    /// alone when every tag is pulled.
    pub reference: String,
    pub auth: PullAuth,
    /// `docker pull --all-tags`: neither `tag` nor `fromImage` names a tag
    /// or digest, which dockerd takes as every tag of the repository.
    pub all_tags: bool,
}

/// Decodes a pull's query string (`fromImage`, `tag`, `platform`, ...) and
/// its `X-Registry-Auth` header. Pure, for the fuzz target.
pub fn decode_pull(query: &str, auth_header: Option<&[u8]>) -> Result<PullRequest, ApiError> {
    let p = Params::parse(&RawQuery(Some(query.to_owned())));
    if p.str("fromSrc").is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::not_implemented(
            "docker import is not a pull (POST /images/create?fromSrc= is handled apart)",
        ));
    }
    let image = p.str("fromImage").unwrap_or("").trim();
    if image.is_empty() {
        return Err(ApiError::bad_request(
            "fromImage (the image to pull) must be given",
        ));
    }
    if let Some(platform) = p.str("platform").filter(|s| !s.is_empty()) {
        let arch = host_architecture();
        let wanted = platform.to_ascii_lowercase();
        let mut parts = wanted.split('/');
        let (os, a) = (parts.next(), parts.next());
        if os != Some("linux") || a.is_some_and(|a| a != arch) {
            return Err(ApiError::bad_request(format!(
                "platform {platform:?} is not supported: holdfast runs linux/{arch} images"
            )));
        }
    }
    let tag = p.str("tag").unwrap_or("").trim();
    let reference = if tag.is_empty() {
        image.to_owned()
    } else if tag.contains(':') {
        format!("{image}@{tag}")
    } else {
        format!("{image}:{tag}")
    };
    check_reference(&reference)?;
    // As dockerd (and the API's documentation): no tag anywhere is every
    // tag; the CLI sends `tag` for every pull but `--all-tags`.
    let last = reference.rsplit('/').next().unwrap_or(&reference);
    let all_tags = !last.contains(':') && !last.contains('@');
    Ok(PullRequest {
        reference,
        auth: decode_registry_auth(auth_header)?,
        all_tags,
    })
}

/// One of dockerd's progress messages.
fn progress_message(p: &PullProgress) -> Value {
    match p {
        PullProgress::PullingFrom { repository, tag } => {
            json!({ "status": format!("Pulling from {repository}"), "id": tag })
        }
        PullProgress::Digest(d) => json!({ "status": format!("Digest: {d}") }),
        PullProgress::Layer { id, status } => {
            let text = match status {
                LayerStatus::PullingFsLayer => "Pulling fs layer",
                LayerStatus::Waiting => "Waiting",
                LayerStatus::Downloading { .. } => "Downloading",
                LayerStatus::VerifyingChecksum => "Verifying Checksum",
                LayerStatus::DownloadComplete => "Download complete",
                LayerStatus::Extracting => "Extracting",
                LayerStatus::PullComplete => "Pull complete",
                LayerStatus::AlreadyExists => "Already exists",
            };
            match status {
                LayerStatus::Downloading { current, total } => json!({
                    "status": text,
                    "progressDetail": { "current": current, "total": total },
                    "progress": progress_bar(*current, *total),
                    "id": id,
                }),
                _ => json!({ "status": text, "progressDetail": {}, "id": id }),
            }
        }
    }
}

/// `POST /images/create?fromImage=..&tag=..`.
pub async fn create(
    State(state): State<ApiState>,
    headers: HeaderMap,
    query: RawQuery,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let params = Params::parse(&query);
    if params.str("fromSrc").is_some_and(|s| !s.is_empty()) {
        return super::import::import(&state, &params, query.0.as_deref(), body).await;
    }
    let decoded = decode_pull(
        query.0.as_deref().unwrap_or(""),
        headers.get("X-Registry-Auth").map(HeaderValue::as_bytes),
    );
    if decoded.is_err() {
        // `docker import -` uploads a tarball with the request: read it to
        // the end (and drop it) so that the client reads the refusal
        // rather than a broken pipe.
        let mut data = body.into_data_stream();
        while let Some(Ok(_)) = futures_util::StreamExt::next(&mut data).await {}
    }
    let PullRequest {
        reference,
        auth,
        all_tags,
    } = decoded?;
    let images = state.engine.images();
    if all_tags {
        // Each tag pulled in turn with its own progress (`<tag>: Pulling
        // from`, layers, `Digest:`), then one status line for the
        // repository, as dockerd writes them.
        let events = images.pull_all_tags(reference, auth).await?;
        return Ok(json_stream(Body::from_stream(events.map(event_line))));
    }
    match images.pull(reference, auth).await? {
        Pulling::Done(event) => Ok(json_stream(Body::from(event_bytes(&event)))),
        Pulling::Going(events) => Ok(json_stream(Body::from_stream(events.map(event_line)))),
    }
}

fn event_line(event: PullEvent) -> Result<Bytes, std::convert::Infallible> {
    Ok(event_bytes(&event))
}

/// A pull's event as dockerd writes it in the stream.
fn event_bytes(event: &PullEvent) -> Bytes {
    match event {
        PullEvent::Progress(p) => line(&progress_message(p)),
        PullEvent::Done { name, up_to_date } => {
            line(&json!({ "status": status_line(name, *up_to_date) }))
        }
        PullEvent::Failed(message) => error_line(message),
    }
}

fn status_line(name: &str, up_to_date: bool) -> String {
    if up_to_date {
        format!("Status: Image is up to date for {name}")
    } else {
        format!("Status: Downloaded newer image for {name}")
    }
}

/// `POST /auth`: checks credentials against the registry, as `docker login`
/// asks the daemon to (the CLI then stores them itself).
pub async fn login(State(state): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let config: AuthConfig = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid credentials: {e}")))?;
    let server = config.serveraddress.clone();
    let auth = config.into_auth()?;
    match state.engine.images().login(&server, &auth).await? {
        LoginOutcome::Accepted => {
            Ok(Json(json!({ "Status": "Login Succeeded", "IdentityToken": "" })).into_response())
        }
        LoginOutcome::Refused(message) => Err(ApiError::new(StatusCode::UNAUTHORIZED, message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn header(json: &str) -> Vec<u8> {
        base64::engine::general_purpose::URL_SAFE
            .encode(json)
            .into_bytes()
    }

    #[test]
    fn credentials_decode_as_the_cli_sends_them() {
        let basic = decode_registry_auth(Some(&header(
            r#"{"username":"me","password":"p+w/d","serveraddress":"localhost:5000"}"#,
        )))
        .expect("decodes");
        assert_eq!(
            basic,
            PullAuth::Basic {
                username: "me".into(),
                password: "p+w/d".into()
            }
        );
        let token = decode_registry_auth(Some(&header(r#"{"identitytoken":"tok"}"#)));
        assert_eq!(token.expect("decodes"), PullAuth::Bearer("tok".into()));
        for empty in [None, Some(&b""[..]), Some(&b"e30="[..]), Some(&b"e30"[..])] {
            assert_eq!(
                decode_registry_auth(empty).expect("anonymous"),
                PullAuth::Anonymous
            );
        }
        let folded = decode_registry_auth(Some(&header(r#"{"auth":"bWU6c2VjcmV0"}"#)));
        assert_eq!(
            folded.expect("decodes"),
            PullAuth::Basic {
                username: "me".into(),
                password: "secret".into()
            }
        );
        let bad = decode_registry_auth(Some(b"!!!")).expect_err("refused");
        assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    }

    #[test]
    fn pull_queries_decode_like_dockerd() {
        let r = decode_pull("fromImage=busybox&tag=latest", None).expect("decodes");
        assert_eq!(r.reference, "busybox:latest");
        let d = format!("sha256:{}", "a".repeat(64));
        let r =
            decode_pull(&format!("fromImage=localhost:5000/x/y&tag={d}"), None).expect("decodes");
        assert_eq!(r.reference, format!("localhost:5000/x/y@{d}"));
        for good in ["a--b", "a__b", "a.b_c-d", "me/app_1.x"] {
            assert!(
                decode_pull(&format!("fromImage={good}"), None).is_ok(),
                "{good}"
            );
        }
        let longest = format!("fromImage=localhost/{}", "a".repeat(255));
        assert!(decode_pull(&longest, None).is_ok());
        let every = decode_pull("fromImage=busybox", None).expect("decodes");
        assert_eq!(every.reference, "busybox");
        assert!(every.all_tags, "no tag anywhere is every tag, as dockerd");
        assert!(!r.all_tags);
        let named = decode_pull("fromImage=localhost:5000/app:1", None).expect("decodes");
        assert!(!named.all_tags);
        assert!(
            decode_pull("fromImage=localhost:5000/app", None)
                .expect("decodes")
                .all_tags
        );
        for bad in [
            "",
            "fromImage=",
            "fromImage=BusyBox&tag=latest",
            "fromImage=busybox&tag=-x",
            "fromImage=busybox&tag=sha256:abc",
            "fromImage=a//b",
            "fromImage=busybox&platform=windows/amd64",
            &format!("fromImage={}", "a".repeat(250)),
            "fromImage=localhost:/app",
            "fromImage=reg-.lan/app",
            "fromImage=reg..lan:5000/app",
            "fromImage=q----------.i",
            "fromImage=a___b",
            "fromImage=a._b",
        ] {
            let e = decode_pull(bad, None).expect_err(bad);
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad}: {}", e.message);
        }
        assert_eq!(
            decode_pull("fromSrc=-&repo=x", None)
                .expect_err("import")
                .status,
            StatusCode::NOT_IMPLEMENTED
        );
    }

    #[test]
    fn progress_reads_like_dockerd() {
        let m = progress_message(&PullProgress::Layer {
            id: "0123456789ab".into(),
            status: LayerStatus::Downloading {
                current: 5,
                total: 10,
            },
        });
        assert_eq!(m["status"], "Downloading");
        assert_eq!(m["progressDetail"]["current"], 5);
        assert_eq!(m["progressDetail"]["total"], 10);
        assert_eq!(m["id"], "0123456789ab");
        let from = progress_message(&PullProgress::PullingFrom {
            repository: "library/busybox".into(),
            tag: "latest".into(),
        });
        assert_eq!(from["status"], "Pulling from library/busybox");
        assert!(progress_bar(0, 0).starts_with('['));
        assert!(
            progress_bar(20, 10).contains("==================================================")
        );
    }
}
