//! Every endpoint of the Docker Engine API v1.43 (107 of them), walked
//! against a real holdfastd: each answers with its own status and words,
//! never "page not found". What holdfast serves answers as it serves (a
//! name that does not exist is a 404 naming it); what it does not run
//! answers as dockerd does without it (swarm: 503 "not a swarm manager";
//! plugins: none installed); what it does not serve yet says so (501,
//! naming the endpoint). Every mishandled endpoint is reported together.

use holdfast_e2e::Daemon;

/// Method, path (a name that does not exist where one is needed), body
/// (sent as JSON), the status, and words the message must hold.
type Endpoint = (
    &'static str,
    &'static str,
    Option<&'static str>,
    u16,
    Option<&'static str>,
);

const ENDPOINTS: [Endpoint; 107] = [
    ("GET", "/containers/json", None, 200, None),
    (
        "POST",
        "/containers/create",
        Some("{}"),
        400,
        Some("config.Image is required"),
    ),
    (
        "GET",
        "/containers/nosuch/json",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/top",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/logs?stdout=1",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/changes",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/export",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/stats?stream=false",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/resize?h=10&w=10",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/start",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/stop",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/restart",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/kill",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/update",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/rename?name=other",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/pause",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/unpause",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/attach?stream=0&stdout=1",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/attach/ws",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "POST",
        "/containers/nosuch/wait",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    (
        "DELETE",
        "/containers/nosuch",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "HEAD",
        "/containers/nosuch/archive?path=/",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "GET",
        "/containers/nosuch/archive?path=/",
        None,
        404,
        Some("No such container: nosuch"),
    ),
    (
        "PUT",
        "/containers/nosuch/archive?path=/",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    ("POST", "/containers/prune", Some("{}"), 200, None),
    ("GET", "/images/json", None, 200, None),
    (
        "POST",
        "/build",
        Some("{}"),
        501,
        Some("not supported by holdfast"),
    ),
    ("POST", "/build/prune", Some("{}"), 200, None),
    ("POST", "/images/create", Some("{}"), 400, Some("fromImage")),
    ("GET", "/images/nosuch/json", None, 404, Some("nosuch")),
    ("GET", "/images/nosuch/history", None, 404, Some("nosuch")),
    (
        "POST",
        "/images/nosuch/push",
        Some("{}"),
        404,
        Some("nosuch"),
    ),
    (
        "POST",
        "/images/nosuch/tag?repo=x",
        Some("{}"),
        404,
        Some("nosuch"),
    ),
    ("DELETE", "/images/nosuch", None, 404, Some("nosuch")),
    (
        "GET",
        "/images/search?term=busybox&limit=0&filters=%7B%22x%22%3A%5B%22y%22%5D%7D",
        None,
        400,
        Some("invalid filter 'x'"),
    ),
    ("POST", "/images/prune", Some("{}"), 200, None),
    (
        "POST",
        "/commit?container=nosuch",
        Some("{}"),
        404,
        Some("No such container: nosuch"),
    ),
    ("GET", "/images/nosuch/get", None, 404, Some("nosuch")),
    ("GET", "/images/get?names=nosuch", None, 404, Some("nosuch")),
    // Not an archive: refused in dockerd's words.
    (
        "POST",
        "/images/load",
        Some("{}"),
        400,
        Some("archive/tar: invalid tar header"),
    ),
    ("GET", "/networks", None, 200, None),
    (
        "GET",
        "/networks/nosuch",
        None,
        404,
        Some("network nosuch not found"),
    ),
    (
        "DELETE",
        "/networks/nosuch",
        None,
        404,
        Some("network nosuch not found"),
    ),
    (
        "POST",
        "/networks/create",
        Some("{}"),
        400,
        Some("needs a name"),
    ),
    (
        "POST",
        "/networks/nosuch/connect",
        Some("{}"),
        404,
        Some("network nosuch not found"),
    ),
    (
        "POST",
        "/networks/nosuch/disconnect",
        Some("{}"),
        404,
        Some("network nosuch not found"),
    ),
    ("POST", "/networks/prune", Some("{}"), 200, None),
    ("GET", "/volumes", None, 200, None),
    ("POST", "/volumes/create", Some("{}"), 201, None),
    ("GET", "/volumes/nosuch", None, 404, Some("no such volume")),
    (
        "PUT",
        "/volumes/nosuch",
        Some("{}"),
        503,
        Some("only valid for cluster volumes"),
    ),
    (
        "DELETE",
        "/volumes/nosuch",
        None,
        404,
        Some("no such volume"),
    ),
    ("POST", "/volumes/prune", Some("{}"), 200, None),
    (
        "POST",
        "/containers/nosuch/exec",
        Some("{}"),
        400,
        Some("No exec command specified"),
    ),
    (
        "POST",
        "/exec/nosuch/start",
        Some("{}"),
        404,
        Some("No such exec instance: nosuch"),
    ),
    (
        "POST",
        "/exec/nosuch/resize?h=10&w=10",
        Some("{}"),
        404,
        Some("No such exec instance: nosuch"),
    ),
    (
        "GET",
        "/exec/nosuch/json",
        None,
        404,
        Some("No such exec instance: nosuch"),
    ),
    ("GET", "/swarm", None, 503, Some("not a swarm manager")),
    (
        "POST",
        "/swarm/init",
        Some("{}"),
        501,
        Some("swarm mode is not supported"),
    ),
    (
        "POST",
        "/swarm/join",
        Some("{}"),
        501,
        Some("swarm mode is not supported"),
    ),
    (
        "POST",
        "/swarm/leave",
        Some("{}"),
        503,
        Some("not part of a swarm"),
    ),
    (
        "POST",
        "/swarm/update",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/swarm/unlockkey",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "POST",
        "/swarm/unlock",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/nodes", None, 503, Some("not a swarm manager")),
    (
        "GET",
        "/nodes/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "DELETE",
        "/nodes/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "POST",
        "/nodes/nosuch/update",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/services", None, 503, Some("not a swarm manager")),
    (
        "POST",
        "/services/create",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/services/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "DELETE",
        "/services/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "POST",
        "/services/nosuch/update",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/services/nosuch/logs",
        None,
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/tasks", None, 503, Some("not a swarm manager")),
    (
        "GET",
        "/tasks/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/tasks/nosuch/logs",
        None,
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/secrets", None, 503, Some("not a swarm manager")),
    (
        "POST",
        "/secrets/create",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/secrets/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "DELETE",
        "/secrets/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "POST",
        "/secrets/nosuch/update",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/configs", None, 503, Some("not a swarm manager")),
    (
        "POST",
        "/configs/create",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    (
        "GET",
        "/configs/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "DELETE",
        "/configs/nosuch",
        None,
        503,
        Some("not a swarm manager"),
    ),
    (
        "POST",
        "/configs/nosuch/update",
        Some("{}"),
        503,
        Some("not a swarm manager"),
    ),
    ("GET", "/plugins", None, 200, None),
    (
        "GET",
        "/plugins/privileges?remote=x",
        None,
        501,
        Some("plugins are not supported"),
    ),
    (
        "POST",
        "/plugins/pull?remote=x",
        Some("{}"),
        501,
        Some("plugins are not supported"),
    ),
    (
        "GET",
        "/plugins/nosuch/json",
        None,
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "DELETE",
        "/plugins/nosuch",
        None,
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/plugins/nosuch/enable",
        Some("{}"),
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/plugins/nosuch/disable",
        Some("{}"),
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/plugins/nosuch/upgrade",
        Some("{}"),
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/plugins/create?name=x",
        Some("{}"),
        501,
        Some("plugins are not supported"),
    ),
    (
        "POST",
        "/plugins/nosuch/push",
        Some("{}"),
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/plugins/nosuch/set",
        Some("{}"),
        404,
        Some("plugin \"nosuch\" not found"),
    ),
    (
        "POST",
        "/auth",
        Some("nope"),
        400,
        Some("invalid credentials"),
    ),
    ("GET", "/info", None, 200, None),
    ("GET", "/version", None, 200, None),
    ("GET", "/_ping", None, 200, None),
    ("HEAD", "/_ping", None, 200, None),
    ("GET", "/events?since=0&until=1", None, 200, None),
    ("GET", "/system/df", None, 200, None),
    // A registry that is not there (the e2e pull test asks a real one).
    (
        "GET",
        "/distribution/127.0.0.1:1/nothing/json",
        None,
        500,
        Some("cannot reach the registry 127.0.0.1:1"),
    ),
    (
        "POST",
        "/session",
        Some("{}"),
        501,
        Some("not supported by holdfast"),
    ),
];

#[test]
fn every_endpoint_of_the_api_answers_as_what_it_is() {
    let d = Daemon::start();
    let mut wrong = Vec::new();
    for (method, path, body, status, words) in ENDPOINTS {
        let r = d.http(method, &format!("/v1.43{path}"), body.map(str::as_bytes));
        let message = r.message().unwrap_or_default();
        let shown = format!(
            "{method} {path}: {} {}",
            r.status,
            r.body.chars().take(200).collect::<String>()
        );
        if r.status != status {
            wrong.push(format!("want {status}: {shown}"));
            continue;
        }
        // A HEAD answer has no body to read.
        if method == "HEAD" {
            continue;
        }
        if status >= 400 {
            if message.is_empty() || message.starts_with("page not found") {
                wrong.push(format!("want a message of its own: {shown}"));
            } else if let Some(w) = words
                && !message.contains(w)
            {
                wrong.push(format!("want {w:?} in the message: {shown}"));
            }
        } else if path != "/_ping" && !path.starts_with("/events") && r.json().is_none() {
            wrong.push(format!("want JSON: {shown}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} endpoints answered wrong:\n- {}\n{}",
        wrong.len(),
        wrong.join("\n- "),
        d.diagnostics()
    );
}
