//! What the image endpoints share: Docker's reference grammar and the name
//! a commit or an import writes, the registry credentials the CLI sends,
//! and the lines of dockerd's JSON progress streams (pull, push, import).

use crate::ApiError;
use crate::params::Params;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use base64::Engine as _;
use holdfast_engine::backend::images::{PullAuth, normalize_reference};
use serde::Deserialize;
use serde_json::{Value, json};

/// Largest `X-Registry-Auth` header accepted (credentials are a few hundred bytes).
const AUTH_HEADER_MAX_BYTES: usize = 16 << 10;

/// The credentials `docker login` stored, as the CLI sends them (in
/// `X-Registry-Auth`, base64url JSON, or as the `/auth` body).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AuthConfig {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    /// base64 of `username:password`.
    #[serde(default)]
    auth: String,
    #[serde(default)]
    pub(crate) serveraddress: String,
    #[serde(default)]
    identitytoken: String,
    #[serde(default)]
    registrytoken: String,
}

impl AuthConfig {
    pub(crate) fn into_auth(self) -> Result<PullAuth, ApiError> {
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

/// Docker's reference grammar: `[registry[:port]/]path[:tag][@algo:hex]`,
/// path components lowercase `[a-z0-9]+` joined by `.`, `_`, `__` or `-`.
pub(crate) fn check_reference(reference: &str) -> Result<(), ApiError> {
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

/// The image name a commit or an import writes: `repo` and `tag` from the
/// query, normalized; empty without a `repo`: the image is untagged, as
/// dockerd makes it (`what` names the operation in the refusal).
pub(crate) fn new_image_name(p: &Params, what: &str) -> Result<String, ApiError> {
    let Some(repo) = p.str("repo").filter(|r| !r.is_empty()) else {
        // dockerd drops a tag given without a repository; it is refused.
        if p.str("tag").is_some_and(|t| !t.is_empty()) {
            return Err(ApiError::bad_request(format!(
                "a tag without a repository for {what}: give repo too"
            )));
        }
        return Ok(String::new());
    };
    let name = match p.str("tag").filter(|t| !t.is_empty()) {
        Some(tag) => format!("{repo}:{tag}"),
        None => repo.to_owned(),
    };
    if name
        .chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return Err(ApiError::bad_request(format!(
            "invalid reference format: repository name ({name}) must be lowercase"
        )));
    }
    Ok(normalize_reference(&name))
}

/// dockerd's `[=====>      ]  1.2MB/3.4MB` for clients that print it as is.
pub(crate) fn progress_bar(current: u64, total: u64) -> String {
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

pub(crate) fn line(value: &Value) -> Bytes {
    let mut text = value.to_string();
    text.push_str("\r\n");
    Bytes::from(text)
}

pub(crate) fn error_line(message: &str) -> Bytes {
    line(&json!({ "errorDetail": { "message": message }, "error": message }))
}

pub(crate) fn json_stream(body: Body) -> Response {
    let mut r = Response::new(body);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
