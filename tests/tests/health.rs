//! Health checks with the real docker CLI: `--health-*` probes run as execs
//! in the container, `State.Health` in inspect, the status in `docker ps`,
//! `health_status` events; an unhealthy container is left running;
//! `--no-healthcheck`, a probe's timeout, refusals; a restarted holdfastd
//! keeps the health it had and goes on probing.

use holdfast_e2e::Daemon;
use serde_json::Value;

fn health(d: &Daemon, name: &str) -> Value {
    d.state(name)["Health"].clone()
}

fn health_status(d: &Daemon, name: &str) -> String {
    health(d, name)["Status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn ps_status(d: &Daemon, name: &str) -> String {
    let filter = format!("name={name}");
    d.ok(&["ps", "--filter", &filter, "--format", "{{.Status}}"])
        .trim()
        .to_owned()
}

#[test]
fn a_probe_goes_starting_unhealthy_healthy_with_inspect_ps_and_events() {
    let d = Daemon::start();
    let since = holdfast_e2e::now_unix_nanos();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "doc",
        "--health-cmd",
        "echo probing; test -f /tmp/ok",
        "--health-interval",
        "2s",
        "--health-retries",
        "3",
        "busybox",
        "sleep",
        "1000",
    ]);
    let pid = d.pid_of("doc");
    let config = &d.inspect("doc")["Config"]["Healthcheck"];
    assert_eq!(
        config,
        &serde_json::json!({"Test": ["CMD-SHELL", "echo probing; test -f /tmp/ok"],
            "Interval": 2_000_000_000u64, "Retries": 3}),
        "{}",
        d.diagnostics()
    );
    // Three failures 2 s apart are needed before it is unhealthy.
    assert_eq!(
        health_status(&d, "doc"),
        "starting",
        "{:#}",
        d.inspect("doc")["State"]
    );
    assert!(
        ps_status(&d, "doc").ends_with("(health: starting)"),
        "{}",
        ps_status(&d, "doc")
    );

    d.wait_until("the container is unhealthy", || {
        health_status(&d, "doc") == "unhealthy"
    });
    let h = health(&d, "doc");
    assert!(h["FailingStreak"].as_u64() >= Some(3), "{h:#}");
    let log = h["Log"].as_array().cloned().unwrap_or_default();
    assert!((3..=5).contains(&log.len()), "{h:#}");
    for entry in &log {
        assert_eq!(entry["ExitCode"], 1, "{h:#}");
        assert_eq!(entry["Output"], "probing\n", "{h:#}");
        let start = entry["Start"].as_str().unwrap_or_default();
        let end = entry["End"].as_str().unwrap_or_default();
        let (Some(start), Some(end)) = (
            holdfast_e2e::parse_rfc3339_nanos(start),
            holdfast_e2e::parse_rfc3339_nanos(end),
        ) else {
            panic!("Start and End are times: {h:#}");
        };
        assert!(start <= end, "{h:#}");
    }
    assert!(
        ps_status(&d, "doc").ends_with("(unhealthy)"),
        "{}",
        ps_status(&d, "doc")
    );
    // Unhealthy is not a reason to stop or restart it.
    let state = d.state("doc");
    assert_eq!(
        (&state["Running"], &state["Pid"]),
        (&Value::Bool(true), &serde_json::json!(pid)),
        "{state:#}"
    );

    d.ok(&["exec", "doc", "touch", "/tmp/ok"]);
    d.wait_until("the container is healthy", || {
        health_status(&d, "doc") == "healthy"
    });
    assert_eq!(health(&d, "doc")["FailingStreak"], 0);
    assert!(
        ps_status(&d, "doc").ends_with("(healthy)"),
        "{}",
        ps_status(&d, "doc")
    );
    assert_eq!(d.pid_of("doc"), pid, "the same process goes on");
    assert_eq!(
        d.ok(&["ps", "--filter", "health=healthy", "--format", "{{.Names}}"])
            .trim(),
        "doc"
    );
    assert_eq!(
        d.ok(&[
            "ps",
            "--filter",
            "health=unhealthy",
            "--format",
            "{{.Names}}"
        ])
        .trim(),
        ""
    );

    let statuses: Vec<String> = d
        .events_since(since, &["--filter", "container=doc"])
        .iter()
        .filter_map(|e| e["Action"].as_str().map(str::to_owned))
        .filter(|a| a.starts_with("health_status"))
        .collect();
    assert_eq!(
        statuses,
        ["health_status: unhealthy", "health_status: healthy"],
        "{}",
        d.diagnostics()
    );
    let printed = d.events_printed_since(since, &["--filter", "event=health_status"]);
    assert!(
        printed.contains("container health_status: healthy"),
        "{printed}"
    );

    // Once the run ends probing stops, and the status is unhealthy, as
    // dockerd shows it; a new run starts over.
    d.ok(&["stop", "-t", "0", "doc"]);
    assert_eq!(health_status(&d, "doc"), "unhealthy");
    d.ok(&["start", "doc"]);
    assert_eq!(health_status(&d, "doc"), "starting", "{}", d.diagnostics());
    assert!(
        health(&d, "doc")["Log"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
}

#[test]
fn no_healthcheck_timeouts_and_refusals() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "none",
        "--no-healthcheck",
        "busybox",
        "sleep",
        "1000",
    ]);
    assert_eq!(
        d.inspect("none")["Config"]["Healthcheck"]["Test"],
        serde_json::json!(["NONE"])
    );
    assert_eq!(health(&d, "none"), Value::Null, "no health without a check");
    assert!(
        d.state("none").get("Health").is_none(),
        "left out, as dockerd leaves it out"
    );
    d.ok(&["run", "-d", "--name", "plain", "busybox", "sleep", "1000"]);
    assert!(d.inspect("plain")["Config"].get("Healthcheck").is_none());
    assert!(
        ps_status(&d, "none").starts_with("Up"),
        "{:?}",
        ps_status(&d, "none")
    );
    assert!(!ps_status(&d, "none").contains("health"));
    let mut unchecked =
        holdfast_e2e::lines(&d.ok(&["ps", "--filter", "health=none", "--format", "{{.Names}}"]));
    unchecked.sort();
    assert_eq!(
        unchecked,
        ["none", "plain"],
        "a disabled check and none at all"
    );
    d.fails_saying(
        "an unknown health filter",
        &["ps", "--filter", "health=sick"],
        "Unrecognised filter value for health: sick",
    );

    // A probe past its timeout is killed and counts as a failure.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "slow",
        "--health-cmd",
        "sleep 30",
        "--health-interval",
        "1s",
        "--health-timeout",
        "1s",
        "--health-retries",
        "1",
        "busybox",
        "sleep",
        "1000",
    ]);
    d.wait_until("the slow probe makes it unhealthy", || {
        health_status(&d, "slow") == "unhealthy"
    });
    let h = health(&d, "slow");
    assert_eq!(h["Log"][0]["ExitCode"], -1, "{h:#}");
    assert_eq!(
        h["Log"][0]["Output"], "Health check exceeded timeout (1s)",
        "{h:#}"
    );
    d.wait_until("the killed probe is gone from the container", || {
        let top = d.ok(&["top", "slow"]);
        !top.contains("sleep 30")
    });

    // What dockerd refuses, refused by name; nothing is created.
    let before = d.container_ids(true).len();
    for (body, needle) in [
        (
            r#"{"Image":"busybox","Healthcheck":{"Test":["CMD","true"],"Interval":5}}"#,
            "Interval in Healthcheck cannot be less than 1ms",
        ),
        (
            r#"{"Image":"busybox","Healthcheck":{"Test":["CMD","true"],"Retries":-1}}"#,
            "Retries in Healthcheck cannot be negative",
        ),
        (
            r#"{"Image":"busybox","Healthcheck":{"Test":["SHELL","true"]}}"#,
            "Healthcheck.Test",
        ),
    ] {
        let r = d.http("POST", "/v1.43/containers/create", Some(body.as_bytes()));
        assert_eq!(r.status, 400, "{body}: {r:?}");
        assert!(
            r.message().is_some_and(|m| m.contains(needle)),
            "{body}: {r:?}"
        );
    }
    assert_eq!(d.container_ids(true).len(), before);
}

#[test]
fn a_restarted_holdfastd_keeps_probing() {
    let mut d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "steady",
        "--health-cmd",
        "test -f /tmp/ok",
        "--health-interval",
        "1s",
        "busybox",
        "sh",
        "-c",
        "touch /tmp/ok; exec sleep 1000",
    ]);
    let pid = d.pid_of("steady");
    d.wait_until("it is healthy", || health_status(&d, "steady") == "healthy");
    d.sigkill();
    d.restart();
    let restarted = holdfast_e2e::now_unix_nanos();
    // The health it had is kept (persisted with each result), as dockerd's
    // live restore keeps it: healthy at once, never `starting` again, with
    // the log of the results before the crash.
    let kept = health(&d, "steady");
    assert_eq!(
        kept["Status"],
        "healthy",
        "right after the restart: {kept}\n{}",
        d.diagnostics()
    );
    assert!(
        kept["Log"]
            .as_array()
            .is_some_and(|log| log.iter().any(|e| {
                e["Start"]
                    .as_str()
                    .and_then(holdfast_e2e::parse_rfc3339_nanos)
                    .is_some_and(|t| t < restarted)
            })),
        "the log from before the restart: {kept}\n{}",
        d.diagnostics()
    );
    assert_eq!(d.pid_of("steady"), pid, "the container ran on");
    d.wait_until("a probe after the restart makes it healthy", || {
        let h = health(&d, "steady");
        h["Status"] == "healthy"
            && h["Log"].as_array().is_some_and(|log| {
                log.iter().any(|e| {
                    e["Start"]
                        .as_str()
                        .and_then(holdfast_e2e::parse_rfc3339_nanos)
                        .is_some_and(|t| t >= restarted)
                })
            })
    });
    d.ok(&["exec", "steady", "rm", "/tmp/ok"]);
    d.wait_until("failures after the restart make it unhealthy", || {
        health_status(&d, "steady") == "unhealthy"
    });
    assert_eq!(d.pid_of("steady"), pid);
    // Unhealthy is kept across a second crash too, and never shown as
    // `starting` in between.
    d.sigkill();
    d.restart();
    assert_eq!(
        health_status(&d, "steady"),
        "unhealthy",
        "{}",
        d.diagnostics()
    );
    assert!(
        ps_status(&d, "steady").contains("(unhealthy)"),
        "{}",
        d.diagnostics()
    );
}

/// A copy of the docker-archive at `archive` whose image config has
/// `Healthcheck` set to `check` (what a Dockerfile's HEALTHCHECK writes).
fn with_healthcheck(archive: &std::path::Path, check: &Value, out: &std::path::Path) {
    holdfast_e2e::archive::with_config_key(archive, "Healthcheck", check, out);
}

#[test]
fn an_image_healthcheck_is_used_merged_and_disabled() {
    let d = Daemon::start();
    let dir = d.root().join("images");
    let image = holdfast_testkit::busybox_image(&dir, "checked:1", None);
    let checked = dir.join("checked.docker.tar");
    let check = serde_json::json!({
        "Test": ["CMD-SHELL", "test -f /etc/passwd && echo fine"],
        "Interval": 1_000_000_000u64,
        "Retries": 4,
    });
    with_healthcheck(&image.docker_archive, &check, &checked);
    d.ok(&["load", "-i", checked.to_str().expect("utf-8")]);

    d.ok(&["run", "-d", "--name", "img", "checked:1", "sleep", "1000"]);
    assert_eq!(d.inspect("img")["Config"]["Healthcheck"], check);
    d.wait_until("the image's check makes it healthy", || {
        health_status(&d, "img") == "healthy"
    });
    assert_eq!(health(&d, "img")["Log"][0]["Output"], "fine\n");

    // What the user sets wins; the rest comes from the image.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "merged",
        "--health-cmd",
        "false",
        "--health-retries",
        "1",
        "checked:1",
        "sleep",
        "1000",
    ]);
    assert_eq!(
        d.inspect("merged")["Config"]["Healthcheck"],
        serde_json::json!({"Test": ["CMD-SHELL", "false"], "Interval": 1_000_000_000u64,
            "Retries": 1})
    );
    d.wait_until("the user's check makes it unhealthy", || {
        health_status(&d, "merged") == "unhealthy"
    });

    d.ok(&[
        "run",
        "-d",
        "--name",
        "off",
        "--no-healthcheck",
        "checked:1",
        "sleep",
        "1000",
    ]);
    assert_eq!(health(&d, "off"), Value::Null);
    assert!(!ps_status(&d, "off").contains("health"));
}

#[test]
fn a_containerd_outage_says_nothing_of_health() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "calm",
        "--health-cmd",
        "true",
        "--health-interval",
        "1s",
        "--health-retries",
        "1",
        "busybox",
        "sleep",
        "1000",
    ]);
    d.wait_until("it is healthy", || health_status(&d, "calm") == "healthy");
    let outage = d.hold_containerd_down();
    // With one retry, a single probe counted as failed would make it
    // unhealthy: none is run, and none counts, while containerd is away.
    d.assert_inspect_holds_for(
        "calm",
        "healthy while containerd is down",
        std::time::Duration::from_secs(4),
        |v| v["State"]["Health"]["Status"] == "healthy",
    );
    outage.end();
    let back = holdfast_e2e::now_unix_nanos();
    d.wait_until("a probe after the outage", || {
        let h = health(&d, "calm");
        h["Log"].as_array().is_some_and(|log| {
            log.iter().any(|e| {
                e["Start"]
                    .as_str()
                    .and_then(holdfast_e2e::parse_rfc3339_nanos)
                    .is_some_and(|t| t >= back)
            })
        })
    });
    let h = health(&d, "calm");
    assert_eq!(
        (&h["Status"], &h["FailingStreak"]),
        (&Value::from("healthy"), &Value::from(0)),
        "{h:#}\n{}",
        d.diagnostics()
    );
}
