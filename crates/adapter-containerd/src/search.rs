//! `docker search`: a registry's search, as dockerd asks it (the v1 index
//! API, `GET /v1/search?q=&n=`, which Docker Hub serves and a bare
//! distribution registry does not: its refusal is answered as dockerd
//! answers it, "Unexpected status code 404"). The term names the registry
//! as a pull's reference does (`localhost:5000/app`), else Docker Hub.

use crate::error::AdapterError;
use crate::pull::{PullAuth, failed, registry_http};
use serde::Deserialize;

/// Docker Hub's search index.
const HUB_INDEX: &str = "index.docker.io";
/// How much of a registry's answer is read at most (100 results are a few KiB).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// One repository a registry's search found.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct SearchResult {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub is_official: bool,
    #[serde(default)]
    pub is_automated: bool,
    #[serde(default)]
    pub star_count: u64,
}

#[derive(Deserialize)]
struct SearchAnswer {
    #[serde(default)]
    results: Vec<SearchResult>,
}

/// The registry a term names, and what to search it for (moby's
/// `splitReposSearchTerm`: a first part with a dot or a colon, or
/// `localhost`, is a registry; Docker Hub's `library/` is dropped).
pub fn search_target(term: &str) -> (&str, &str) {
    match term.split_once('/') {
        Some((host, rest)) if host.contains('.') || host.contains(':') || host == "localhost" => {
            match host {
                "docker.io" | "index.docker.io" | "registry-1.docker.io" => {
                    (HUB_INDEX, rest.strip_prefix("library/").unwrap_or(rest))
                }
                _ => (host, rest),
            }
        }
        _ => (HUB_INDEX, term.strip_prefix("library/").unwrap_or(term)),
    }
}

/// Asks the registry `term` names for at most `limit` repositories
/// matching it, with `auth` when the client sent credentials.
pub async fn search_registry(
    term: &str,
    limit: u32,
    auth: &PullAuth,
    insecure_registries: &[String],
) -> Result<Vec<SearchResult>, AdapterError> {
    let (host, wanted) = search_target(term);
    let (http, scheme) = registry_http(host, insecure_registries)?;
    let url = format!("{scheme}://{host}/v1/search");
    let limit = limit.to_string();
    let request = http
        .get(&url)
        .query(&[("q", wanted), ("n", limit.as_str())])
        .header("X-Docker-Token", "true");
    let request = match auth {
        PullAuth::Basic { username, password } => request.basic_auth(username, Some(password)),
        PullAuth::Bearer(token) => request.bearer_auth(token),
        PullAuth::Anonymous => request,
    };
    let unreachable = |e: reqwest::Error| failed(format!("cannot reach the registry {host}: {e}"));
    let mut answer = request.send().await.map_err(unreachable)?;
    let status = answer.status();
    if status != reqwest::StatusCode::OK {
        return Err(failed(format!(
            "Unexpected status code {}",
            status.as_u16()
        )));
    }
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(failed(format!(
                "the search answer of {host} is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let answer: SearchAnswer = serde_json::from_slice(&body)
        .map_err(|e| failed(format!("error decoding registry search results: {e}")))?;
    Ok(answer.results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_names_its_registry_as_dockerd_splits_it() {
        assert_eq!(search_target("busybox"), (HUB_INDEX, "busybox"));
        assert_eq!(search_target("library/busybox"), (HUB_INDEX, "busybox"));
        assert_eq!(search_target("someone/app"), (HUB_INDEX, "someone/app"));
        assert_eq!(search_target("docker.io/library/x"), (HUB_INDEX, "x"));
        assert_eq!(
            search_target("localhost:5000/app"),
            ("localhost:5000", "app")
        );
        assert_eq!(search_target("localhost/a/b"), ("localhost", "a/b"));
        assert_eq!(
            search_target("registry.example/team/app"),
            ("registry.example", "team/app")
        );
    }
}
