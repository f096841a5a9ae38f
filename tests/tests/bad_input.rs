//! Bad input through curl on the API socket: every one answered with a 4xx
//! and a JSON message, never a panic, nothing half-created, the daemon still
//! serving afterwards. Every request is checked and all the mishandled ones
//! are reported together.

use holdfast_e2e::{Daemon, HttpResponse};
use std::cell::RefCell;

/// The requests that were mishandled so far.
#[derive(Default)]
struct Findings(RefCell<Vec<String>>);

impl Findings {
    /// Checks the status is one of `want` and the body is `{"message": ...}`
    /// with a non-empty message; the message.
    fn expect(&self, what: &str, r: &HttpResponse, want: &[u16]) -> String {
        let message = r.message().unwrap_or_default();
        if !want.contains(&r.status) || message.is_empty() {
            self.add(format!(
                "{what}: want {want:?} with a JSON message, got {} {:?} (curl: {})",
                r.status,
                r.body.chars().take(300).collect::<String>(),
                r.curl_error.trim()
            ));
        }
        message
    }

    fn check(&self, ok: bool, what: String) {
        if !ok {
            self.add(what);
        }
    }

    fn add(&self, finding: String) {
        self.0.borrow_mut().push(finding);
    }

    fn assert_none(&self, d: &Daemon) {
        let findings = self.0.borrow();
        assert!(
            findings.is_empty(),
            "{} bad requests were mishandled:\n- {}\n{}",
            findings.len(),
            findings.join("\n- "),
            d.diagnostics()
        );
    }
}

fn create(d: &Daemon, query: &str, body: &[u8]) -> HttpResponse {
    d.http(
        "POST",
        &format!("/v1.43/containers/create{query}"),
        Some(body),
    )
}

#[test]
fn bad_requests_get_4xx_and_change_nothing() {
    let d = Daemon::start();
    let f = Findings::default();
    let pid = d.holdfastd_pid().expect("holdfastd runs");

    // a container to aim kill and stop at
    let r = create(
        &d,
        "?name=target",
        br#"{"Image":"busybox","Cmd":["sleep","1000"]}"#,
    );
    assert_eq!(r.status, 201, "a good create: {r:?}\n{}", d.diagnostics());
    let target = r
        .json()
        .and_then(|v| v["Id"].as_str().map(str::to_owned))
        .expect("Id");
    let r = d.http("POST", &format!("/v1.43/containers/{target}/start"), None);
    assert_eq!(r.status, 204, "start: {r:?}\n{}", d.diagnostics());
    let target_pid = d.pid_of("target");

    // malformed JSON
    let r = create(&d, "", br#"{"Image": "busybox", "Cmd": ["#);
    f.expect("truncated JSON", &r, &[400]);
    let r = create(&d, "", b"this is not json");
    f.expect("not JSON at all", &r, &[400]);
    let r = create(&d, "", b"{\"Image\": \"busy\xff\xfebox\"}");
    f.expect("invalid UTF-8", &r, &[400]);
    let r = create(&d, "", b"");
    f.expect("empty body", &r, &[400]);
    let r = create(&d, "", b"[1, 2, 3]");
    f.expect("an array for an object", &r, &[400]);

    // wrong types
    for body in [
        r#"{"Image": 42}"#,
        r#"{"Image": "busybox", "Env": {"A": "B"}}"#,
        r#"{"Image": "busybox", "HostConfig": {"Memory": "lots"}}"#,
        r#"{"Image": "busybox", "HostConfig": {"RestartPolicy": {"Name": "sometimes"}}}"#,
        r#"{"Image": "busybox", "StopTimeout": "ten"}"#,
        r#"{"Image": "busybox", "Labels": ["a", "b"]}"#,
    ] {
        let r = create(&d, "", body.as_bytes());
        f.expect(&format!("wrong type: {body}"), &r, &[400]);
    }
    let r = create(&d, "", br#"{"Cmd": ["true"]}"#);
    f.expect("no image", &r, &[400]);
    let r = create(&d, "", br#"{"Image": "nosuch:1", "Cmd": ["true"]}"#);
    let m = f.expect("missing image", &r, &[404]);
    f.check(
        m.contains("No such image"),
        format!("missing image message: {m:?}"),
    );

    // an option that changes behaviour and is not supported is refused by name
    let r = create(
        &d,
        "",
        br#"{"Image": "busybox", "HostConfig": {"OomScoreAdj": 100}}"#,
    );
    let m = f.expect("OomScoreAdj is not supported yet", &r, &[400]);
    f.check(
        m.contains("OomScoreAdj"),
        format!("the OomScoreAdj message names the option: {m:?}"),
    );

    // Fields beside the ones dockerd reads on Linux: refused by name, never
    // accepted and ignored.
    for (body, name) in [
        (
            r#""HostConfig": {"StorageOpt": {"size": "1G"}}"#,
            "StorageOpt",
        ),
        (r#""HostConfig": {"VolumeDriver": "nfs"}"#, "VolumeDriver"),
        (r#""HostConfig": {"Cgroup": "container:target"}"#, "Cgroup"),
        (r#""HostConfig": {"IOMaximumIOps": 5}"#, "Maximum IO IOps"),
        (
            r#""HostConfig": {"KernelMemoryTCP": 1048576}"#,
            "KernelMemoryTCP",
        ),
        (r#""Shell": ["/bin/bash", "-c"]"#, "Shell"),
        (r#""OnBuild": ["RUN true"]"#, "OnBuild"),
        (r#""NetworkDisabled": true"#, "NetworkDisabled"),
        (r#""ArgsEscaped": true"#, "ArgsEscaped"),
        (
            r#""HostConfig": {"Isolation": "hyperv"}"#,
            "Invalid isolation",
        ),
    ] {
        let body = format!(r#"{{"Image": "busybox", {body}}}"#);
        let r = create(&d, "", body.as_bytes());
        let m = f.expect(&format!("refused by name: {body}"), &r, &[400]);
        f.check(
            m.contains(name),
            format!("{body}: the message names {name}: {m:?}"),
        );
    }
    // A start's options: refused by name (no checkpoints; nothing for
    // detach keys to end).
    for query in ["detachKeys=ctrl-x", "checkpoint=c1"] {
        let r = d.http(
            "POST",
            &format!("/v1.43/containers/target/start?{query}"),
            None,
        );
        let m = f.expect(&format!("start?{query}"), &r, &[400]);
        let key = query.split('=').next().unwrap_or_default();
        f.check(
            m.contains(key),
            format!("start?{query}: names {key}: {m:?}"),
        );
    }
    // A network of another scope is not found; a verbose that is no
    // boolean is refused.
    let r = d.http("GET", "/v1.43/networks/host?scope=swarm", None);
    f.expect("a local network asked for as a swarm one", &r, &[404]);
    let r = d.http(
        "GET",
        "/v1.43/networks/host?scope=local&verbose=maybe",
        None,
    );
    let m = f.expect("verbose=maybe", &r, &[400]);
    f.check(m.contains("verbose"), format!("verbose=maybe: {m:?}"));
    let r = d.http("GET", "/v1.43/networks/host?scope=local&verbose=true", None);
    f.check(r.status == 200, format!("a local network, verbose: {r:?}"));

    // bad names
    for name in ["bad%20name!", "-dash", "a", "x%2Fy", "%E2%98%83"] {
        let r = create(&d, &format!("?name={name}"), br#"{"Image":"busybox"}"#);
        let m = f.expect(&format!("bad name {name:?}"), &r, &[400]);
        f.check(
            m.contains("Invalid container name"),
            format!("bad name {name}: {m:?}"),
        );
    }

    // unknown endpoints: 404 with a JSON message, prefixed or not
    for path in [
        "/v1.43/nosuch/endpoint",
        "/nosuch",
        "/v1.43/containers/target/frobnicate",
    ] {
        let r = d.http("GET", path, None);
        f.expect(&format!("GET {path}"), &r, &[404]);
    }
    let r = d.http("POST", "/v1.43/containers/nosuch/stop", None);
    let m = f.expect("stop of no container", &r, &[404]);
    f.check(
        m == "No such container: nosuch",
        format!("stop of no container: {m:?}"),
    );

    // unsupported API versions
    let r = d.http("GET", "/v1.12/version", None);
    let m = f.expect("API 1.12 (too old)", &r, &[400]);
    f.check(
        m.contains("1.12"),
        format!("API 1.12 names the version: {m:?}"),
    );
    let r = d.http("GET", "/v9.99/version", None);
    f.expect("API 9.99 (too new)", &r, &[400]);
    let r = d.http("GET", "/vbogus/version", None);
    f.expect("API version not a number", &r, &[400, 404]);

    // bad signals and query values
    for signal in ["NOPE", "999", "-1", "SIGFOO"] {
        let r = d.http(
            "POST",
            &format!("/v1.43/containers/target/kill?signal={signal}"),
            None,
        );
        f.expect(&format!("kill signal={signal}"), &r, &[400]);
    }
    for (what, method, path) in [
        ("stop t=abc", "POST", "/v1.43/containers/target/stop?t=abc"),
        (
            "filters not JSON",
            "GET",
            "/v1.43/containers/json?filters=notjson",
        ),
        (
            "filter status=bogus",
            "GET",
            "/v1.43/containers/json?filters=%7B%22status%22%3A%5B%22bogus%22%5D%7D",
        ),
        (
            "unknown filter",
            "GET",
            "/v1.43/containers/json?filters=%7B%22nosuchfilter%22%3A%5B%22x%22%5D%7D",
        ),
        (
            "wait condition=someday",
            "POST",
            "/v1.43/containers/target/wait?condition=someday",
        ),
        (
            "logs tail=many",
            "GET",
            "/v1.43/containers/target/logs?stdout=1&tail=many",
        ),
    ] {
        let r = d.http(method, path, None);
        f.expect(what, &r, &[400]);
    }
    f.check(
        d.pid_of("target") == target_pid,
        "bad kills must not touch the target".to_owned(),
    );

    // exec and pull parameters
    let exec = r#"/v1.43/containers/target/exec"#;
    for (what, path, body, want) in [
        ("exec with invalid JSON", exec, Some(&b"{"[..]), 400),
        ("exec without a command", exec, Some(br#"{"Cmd":[]}"#), 400),
        (
            "exec with a relative working dir",
            exec,
            Some(br#"{"Cmd":["true"],"WorkingDir":"rel"}"#),
            400,
        ),
        (
            "exec with a nameless env entry",
            exec,
            Some(br#"{"Cmd":["true"],"Env":["=x"]}"#),
            400,
        ),
        (
            "exec with a Cmd of the wrong type",
            exec,
            Some(br#"{"Cmd":"true"}"#),
            400,
        ),
        (
            "exec into a missing container",
            "/v1.43/containers/nosuch/exec",
            Some(br#"{"Cmd":["true"]}"#),
            404,
        ),
        (
            "start of a missing exec",
            "/v1.43/exec/nosuch/start",
            Some(br#"{"Detach":true}"#),
            404,
        ),
        (
            "resize of a missing exec",
            "/v1.43/exec/nosuch/resize?h=10&w=10",
            None,
            404,
        ),
        ("pull without an image", "/v1.43/images/create", None, 400),
        (
            "pull of an invalid reference",
            "/v1.43/images/create?fromImage=UPPER%2FCase&tag=x",
            None,
            400,
        ),
        (
            "pull with an invalid tag",
            "/v1.43/images/create?fromImage=busybox&tag=bad%20tag",
            None,
            400,
        ),
    ] {
        let r = d.http("POST", path, body);
        f.expect(what, &r, &[want]);
    }
    // A real exec, resized with sizes that are not numbers.
    let r = d.http("POST", exec, Some(br#"{"Cmd":["true"]}"#));
    let exec_id = r
        .json()
        .and_then(|v| v["Id"].as_str().map(str::to_owned))
        .unwrap_or_default();
    f.check(!exec_id.is_empty(), format!("a good exec: {r:?}"));
    let r = d.http(
        "POST",
        &format!("/v1.43/exec/{exec_id}/resize?h=tall&w=10"),
        None,
    );
    f.expect("exec resize h=tall", &r, &[400]);
    let images = d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    f.check(
        holdfast_e2e::lines(&images) == ["busybox:latest"],
        format!("bad pulls registered nothing: {images:?}"),
    );

    // a huge body
    let mut huge = br#"{"Image":"busybox","Cmd":[""#.to_vec();
    huge.resize(huge.len() + 32 * 1024 * 1024, b'a');
    huge.extend_from_slice(br#""]}"#);
    let r = create(&d, "?name=huge", &huge);
    f.expect("a 32 MiB create body", &r, &[413, 400]);

    // still serving, never panicked, nothing half-created
    f.assert_none(&d);
    let version = d.ok(&["version"]);
    assert!(version.contains("Server:"), "{version}");
    let names = holdfast_e2e::lines(&d.ok(&["ps", "-a", "--format", "{{.Names}}"]));
    assert_eq!(
        names,
        ["target"],
        "only the good create exists\n{}",
        d.diagnostics()
    );
    assert_eq!(
        d.containerd_container_ids(),
        std::slice::from_ref(&target),
        "{}",
        d.diagnostics()
    );
    assert_eq!(d.holdfastd_pid(), Some(pid));
    assert!(
        holdfast_e2e::procs::pid_alive(pid),
        "holdfastd died\n{}",
        d.diagnostics()
    );
    let log = std::fs::read_to_string(d.log_path()).unwrap_or_default();
    assert!(
        !log.contains("panicked"),
        "holdfastd panicked\n{}",
        d.diagnostics()
    );
    d.ok(&["rm", "-f", "target"]);
}
