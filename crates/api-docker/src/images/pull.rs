//! `POST /images/create` (`docker pull`, and `docker run` of an image not
//! present) and `POST /auth` (`docker login`): the registry side of images.
//!
//! A pull answers with dockerd's stream of JSON progress messages. Headers
//! wait until the reference resolved: a repository or tag that does not
//! exist, or refused credentials, is an HTTP error as from dockerd; a
//! failure after that comes in the stream as `{"errorDetail":..,"error":..}`.

use super::{familiar, image_error, publish};
use crate::params::Params;
use crate::{ApiError, ApiState};
use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use holdfast_adapter_containerd::{
    LayerStatus, PullAuth, PullProgress, PulledImage, host_architecture,
};
use serde::Deserialize;
use serde_json::{Value, json};

/// Largest `X-Registry-Auth` header accepted (credentials are a few hundred bytes).
const AUTH_HEADER_MAX_BYTES: usize = 16 << 10;

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

/// The credentials `docker login` stored, as the CLI sends them (in
/// `X-Registry-Auth`, base64url JSON, or as the `/auth` body).
#[derive(Debug, Default, Deserialize)]
struct AuthConfig {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    /// base64 of `username:password`.
    #[serde(default)]
    auth: String,
    #[serde(default)]
    serveraddress: String,
    #[serde(default)]
    identitytoken: String,
    #[serde(default)]
    registrytoken: String,
}

impl AuthConfig {
    fn into_auth(self) -> Result<PullAuth, ApiError> {
        if !self.registrytoken.is_empty() {
            return Ok(PullAuth::Bearer(self.registrytoken));
        }
        // An identity token is an OAuth refresh token; it is sent as the
        // bearer token as it is (no refresh-token exchange with the
        // registry's token service yet), which suits registries that take it.
        if !self.identitytoken.is_empty() {
            return Ok(PullAuth::Bearer(self.identitytoken));
        }
        let (username, password) = if self.username.is_empty() && !self.auth.is_empty() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(self.auth.trim())
                .map_err(|_| ApiError::bad_request("invalid auth: not base64"))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ApiError::bad_request("invalid auth: not UTF-8"))?;
            let (u, p) = text
                .split_once(':')
                .ok_or_else(|| ApiError::bad_request("invalid auth: not username:password"))?;
            (u.to_owned(), p.to_owned())
        } else {
            (self.username, self.password)
        };
        if username.is_empty() && password.is_empty() {
            return Ok(PullAuth::Anonymous);
        }
        Ok(PullAuth::Basic { username, password })
    }
}

/// Decodes `X-Registry-Auth` (base64url JSON; padding and the standard
/// alphabet are accepted too). Absent, empty or `{}` is anonymous.
pub fn decode_registry_auth(header: Option<&[u8]>) -> Result<PullAuth, ApiError> {
    let Some(header) = header.map(<[u8]>::trim_ascii).filter(|h| !h.is_empty()) else {
        return Ok(PullAuth::Anonymous);
    };
    let bad = |why: &str| ApiError::bad_request(format!("invalid X-Registry-Auth header: {why}"));
    if header.len() > AUTH_HEADER_MAX_BYTES {
        return Err(bad("too long"));
    }
    let unpadded: Vec<u8> = header
        .iter()
        .copied()
        .filter(|&b| b != b'=')
        .map(|b| match b {
            b'+' => b'-',
            b'/' => b'_',
            b => b,
        })
        .collect();
    let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(&unpadded)
        .map_err(|_| bad("not base64url"))?;
    let config: AuthConfig = serde_json::from_slice(&json)
        .map_err(|e| bad(&format!("not the JSON of credentials: {e}")))?;
    config.into_auth()
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

/// Docker's reference grammar: `[registry[:port]/]path[:tag][@algo:hex]`,
/// path components lowercase `[a-z0-9]+` joined by `.`, `_`, `__` or `-`.
pub(super) fn check_reference(reference: &str) -> Result<(), ApiError> {
    let bad = |why: &str| {
        ApiError::bad_request(format!("invalid reference format: {reference:?}: {why}"))
    };
    if reference.len() > 512 {
        return Err(bad("too long"));
    }
    let (name, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    if let Some(d) = digest {
        let (algo, hex) = d
            .split_once(':')
            .ok_or_else(|| bad("a digest is algorithm:hex"))?;
        let ok = algo == "sha256"
            && hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !ok {
            return Err(bad("a digest is sha256: and 64 lowercase hex digits"));
        }
    }
    let (first, _) = name.split_once('/').unwrap_or(("", name));
    let has_domain =
        !first.is_empty() && (first.contains('.') || first.contains(':') || first == "localhost");
    let path = if has_domain {
        let domain = first;
        let (host, port) = match domain.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (domain, None),
        };
        // Docker's domain grammar: dot-separated components of letters,
        // digits and inner hyphens.
        let host_ok = host.split('.').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&x| x.is_ascii_alphanumeric() || x == b'-')
        });
        let port_ok = port
            .is_none_or(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()));
        if !host_ok || !port_ok {
            // (No IPv6 literals: the registry client cannot parse them.)
            return Err(bad(
                "invalid registry: a host name or IPv4 address, and a port",
            ));
        }
        &name[domain.len() + 1..]
    } else {
        name
    };
    let (path, tag) = match path.rsplit_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (path, None),
    };
    if let Some(t) = tag {
        let ok = !t.is_empty()
            && t.len() <= 128
            && t.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !ok {
            return Err(bad("a tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"));
        }
    }
    // The registry client's limit (and Docker's): the repository path, as
    // normalized (`busybox` is `library/busybox`), at most 255 characters.
    let implied = if has_domain || path.contains('/') {
        0
    } else {
        "library/".len()
    };
    if path.len() + implied > 255 {
        return Err(bad("repository name must not be more than 255 characters"));
    }
    if path.is_empty() || !path.split('/').all(path_component_ok) {
        return Err(bad(
            "repository names are lowercase letters, digits and separators",
        ));
    }
    Ok(())
}

/// Docker's path component: runs of `[a-z0-9]` joined by exactly one
/// separator, `.`, `_`, `__` or any number of `-`.
fn path_component_ok(component: &str) -> bool {
    let mut rest = component.as_bytes();
    loop {
        let run = rest
            .iter()
            .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            .count();
        if run == 0 {
            return false;
        }
        rest = &rest[run..];
        if rest.is_empty() {
            return true;
        }
        let separator = if rest.starts_with(b"__") {
            2
        } else if rest[0] == b'.' || rest[0] == b'_' {
            1
        } else {
            rest.iter().take_while(|&&b| b == b'-').count()
        };
        if separator == 0 {
            return false;
        }
        rest = &rest[separator..];
    }
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

/// dockerd's `[=====>      ]  1.2MB/3.4MB` for clients that print it as is.
pub(super) fn progress_bar(current: u64, total: u64) -> String {
    const WIDTH: u64 = 50;
    let filled = (current.min(total) * WIDTH)
        .checked_div(total)
        .unwrap_or_default() as usize;
    let bar = if filled as u64 >= WIDTH {
        "=".repeat(WIDTH as usize)
    } else {
        format!(
            "{}>{}",
            "=".repeat(filled),
            " ".repeat(WIDTH as usize - filled - 1)
        )
    };
    let mb = |b: u64| format!("{:.1}MB", b as f64 / 1e6);
    format!("[{bar}] {}/{}", mb(current), mb(total))
}

pub(super) fn line(value: &Value) -> Bytes {
    let mut text = value.to_string();
    text.push_str("\r\n");
    Bytes::from(text)
}

pub(super) fn error_line(message: &str) -> Bytes {
    line(&json!({ "errorDetail": { "message": message }, "error": message }))
}

fn pull_error(reference: &str, e: holdfast_adapter_containerd::AdapterError) -> ApiError {
    image_error(reference, e)
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
    let request = decoded?;
    if request.all_tags {
        return pull_all_tags(state, request).await;
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PullProgress>();
    let adapter = state.adapter.clone();
    let PullRequest {
        reference, auth, ..
    } = request;
    let pulling = reference.clone();
    tracing::info!(reference = %pulling, "pull");
    // Its own task: a client that goes away does not cut a pull in half.
    let task = tokio::spawn(async move { adapter.pull_image(&pulling, &auth, &tx).await });
    let first = rx.recv().await;
    if first.is_none() {
        // The pull ended before it got going.
        let pulled = task
            .await
            .map_err(|e| ApiError::internal(format!("the pull failed: {e}")))?
            .map_err(|e| pull_error(&reference, e))?;
        return Ok(json_stream(Body::from(line(&finished(&state, &pulled)))));
    }
    let (body_tx, body_rx) =
        tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        let mut next = first;
        while let Some(p) = next {
            // A client that went away stops hearing, not the pull.
            let _ = body_tx.send(Ok(line(&progress_message(&p)))).await;
            next = rx.recv().await;
        }
        let last = match task.await {
            Ok(Ok(pulled)) => line(&finished(&state, &pulled)),
            Ok(Err(e)) => {
                tracing::info!(%reference, error = %e, "pull failed");
                error_line(&e.to_string())
            }
            Err(e) => error_line(&format!("the pull failed: {e}")),
        };
        let _ = body_tx.send(Ok(last)).await;
    });
    Ok(json_stream(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(body_rx),
    )))
}

/// `docker pull --all-tags`: the repository's tags as its registry lists
/// them, each pulled in turn with its own progress (`<tag>: Pulling from`,
/// layers, `Digest:`), then one status line for the repository, as dockerd
/// writes them. The list is asked for before answering, so a repository
/// the registry does not know is an HTTP error; a tag that fails ends the
/// pull with an error in the stream (what was pulled before it stays).
async fn pull_all_tags(state: ApiState, request: PullRequest) -> Result<Response, ApiError> {
    let PullRequest {
        reference, auth, ..
    } = request;
    let tags = state
        .adapter
        .list_tags(&reference, &auth)
        .await
        .map_err(|e| pull_error(&reference, e))?;
    let repository = familiar(&holdfast_adapter_containerd::normalize_reference(
        &reference,
    ));
    let repository = repository
        .rsplit_once(':')
        .map_or(repository.clone(), |(r, _)| r.to_owned());
    tracing::info!(%reference, tags = tags.len(), "pull of every tag");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<PullProgress>();
    let adapter = state.adapter.clone();
    let name = reference.clone();
    // Its own task, as a single pull: a client that goes away does not cut it.
    let task = tokio::spawn(async move {
        let mut downloaded = false;
        for tag in tags {
            let pulled = adapter
                .pull_image(&format!("{name}:{tag}"), &auth, &tx)
                .await?;
            downloaded |= !pulled.up_to_date;
        }
        Ok::<bool, holdfast_adapter_containerd::AdapterError>(downloaded)
    });
    let (body_tx, body_rx) =
        tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let _ = body_tx.send(Ok(line(&progress_message(&p)))).await;
        }
        let last = match task.await {
            Ok(Ok(downloaded)) => {
                publish(&state, "pull", &repository, &repository);
                line(&json!({ "status": status_line(&repository, !downloaded) }))
            }
            Ok(Err(e)) => {
                tracing::info!(%reference, error = %e, "pull of every tag failed");
                error_line(&e.to_string())
            }
            Err(e) => error_line(&format!("the pull failed: {e}")),
        };
        let _ = body_tx.send(Ok(last)).await;
    });
    Ok(json_stream(Body::from_stream(
        tokio_stream::wrappers::ReceiverStream::new(body_rx),
    )))
}

fn status_line(name: &str, up_to_date: bool) -> String {
    if up_to_date {
        format!("Status: Image is up to date for {name}")
    } else {
        format!("Status: Downloaded newer image for {name}")
    }
}

/// The last message of a pull that succeeded; publishes the `pull` event.
fn finished(state: &ApiState, pulled: &PulledImage) -> Value {
    let name = familiar(&pulled.name);
    publish(state, "pull", &name, &name);
    json!({ "status": status_line(&name, pulled.up_to_date) })
}

pub(super) fn json_stream(body: Body) -> Response {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `POST /auth`: checks credentials against the registry, as `docker login`
/// asks the daemon to (the CLI then stores them itself).
pub async fn login(State(state): State<ApiState>, body: Bytes) -> Result<Response, ApiError> {
    let config: AuthConfig = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid credentials: {e}")))?;
    let server = config.serveraddress.clone();
    let auth = config.into_auth()?;
    holdfast_adapter_containerd::check_login(
        &server,
        &auth,
        &state.adapter.config().insecure_registries,
    )
    .await
    .map_err(|e| match e {
        holdfast_adapter_containerd::AdapterError::Registry {
            kind: holdfast_adapter_containerd::RegistryFailure::NotFound,
            message,
        } => ApiError::new(StatusCode::UNAUTHORIZED, message),
        e => image_error("", e),
    })?;
    Ok(Json(json!({ "Status": "Login Succeeded", "IdentityToken": "" })).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

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
