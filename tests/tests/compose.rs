//! docker-compose (Debian's, 1.29) against holdfastd, as a user runs a
//! project: a web service with a published port and a health check, a
//! service it depends on, a named volume and the project's network; then
//! `ps`, `logs`, `exec`, `restart`, `stop`, `start`, `scale`, a second
//! `up -d` that recreates only what changed, and `down -v`, after which
//! nothing of the project is left.

use holdfast_e2e::network::BridgeDaemon;
use holdfast_e2e::{CommandOutput, run_with_timeout};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const COMPOSE_BOUND: Duration = Duration::from_secs(300);

/// The project: `db` keeps a counter in its named volume and serves it;
/// `web` (after `db`) serves a page on a published port, healthy once it
/// answers.
fn project(web_text: &str) -> String {
    format!(
        r#"version: "3.7"
services:
  db:
    image: busybox
    command: ["sh", "-c", "mkdir -p /data && echo db-ready > /data/state && exec sleep 1000000"]
    volumes:
      - dbdata:/data
  web:
    image: busybox
    depends_on:
      - db
    command: ["sh", "-c", "mkdir -p /www && echo {web_text} > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports:
      - "127.0.0.1::8080"
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/"]
      interval: 1s
      timeout: 2s
      retries: 30
volumes:
  dbdata:
"#
    )
}

struct Compose<'a> {
    net: &'a BridgeDaemon,
    dir: &'a Path,
}

impl Compose<'_> {
    fn run(&self, args: &[&str]) -> CommandOutput {
        let mut cmd = Command::new("docker-compose");
        cmd.current_dir(self.dir)
            .env("DOCKER_HOST", self.net.d.host())
            .env("COMPOSE_PROJECT_NAME", "proj")
            .args(args);
        run_with_timeout(&mut cmd, COMPOSE_BOUND)
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.success(),
            "docker-compose {args:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}\n{}",
            out.code(),
            out.stdout,
            out.stderr,
            self.net.d.diagnostics()
        );
        out.stdout
    }
}

#[test]
fn docker_compose_runs_a_project_from_up_to_down() {
    let net = BridgeDaemon::start();
    let d = &net.d;
    let dir = tempfile::Builder::new()
        .prefix("hf-e2e-compose-")
        .tempdir()
        .expect("a temporary directory");
    std::fs::write(dir.path().join("docker-compose.yml"), project("hello")).expect("write");
    let c = Compose {
        net: &net,
        dir: dir.path(),
    };

    c.ok(&["up", "-d"]);
    let names = d.ok(&["ps", "--format", "{{.Names}}"]);
    for name in ["proj_db_1", "proj_web_1"] {
        assert!(names.lines().any(|l| l == name), "{name}: {names}");
    }
    d.wait_until("web healthy", || {
        d.inspect("proj_web_1")["State"]["Health"]["Status"] == "healthy"
    });
    // The published port answers from the host.
    let port = d.ok(&["port", "proj_web_1", "8080"]);
    let port = port.lines().next().unwrap_or_default().trim().to_owned();
    let page = fetch(&port);
    assert_eq!(page.trim(), "hello", "{port}: {page}");
    // The project network, and the volume, are the project's.
    let networks = d.ok(&["network", "ls", "--format", "{{.Name}}"]);
    assert!(networks.lines().any(|l| l == "proj_default"), "{networks}");
    let volumes = d.ok(&["volume", "ls", "--format", "{{.Name}}"]);
    assert!(volumes.lines().any(|l| l == "proj_dbdata"), "{volumes}");
    // Services reach each other by name on the project network.
    let state = c.ok(&[
        "exec",
        "-T",
        "web",
        "wget",
        "-q",
        "-O",
        "-",
        "http://web:8080/",
    ]);
    assert_eq!(state.trim(), "hello");

    let ps = c.ok(&["ps"]);
    assert!(ps.contains("proj_web_1") && ps.contains("Up"), "{ps}");
    let logs = c.run(&["logs", "--no-color", "db"]);
    assert!(logs.success(), "{logs:?}");
    let db = c.ok(&["exec", "-T", "db", "cat", "/data/state"]);
    assert_eq!(db.trim(), "db-ready");

    c.ok(&["restart", "db"]);
    c.ok(&["stop"]);
    let running = d.ok(&["ps", "-q"]);
    assert!(running.trim().is_empty(), "stopped: {running}");
    c.ok(&["start"]);
    d.wait_until("web healthy again", || {
        d.inspect("proj_web_1")["State"]["Health"]["Status"] == "healthy"
    });

    c.ok(&["up", "-d", "--scale", "db=2", "--no-recreate"]);
    let names = d.ok(&["ps", "--format", "{{.Names}}"]);
    assert!(names.lines().any(|l| l == "proj_db_2"), "{names}");
    c.ok(&["up", "-d", "--scale", "db=1", "--no-recreate"]);

    // A changed service is recreated; the unchanged one keeps running.
    let db_before = d.inspect("proj_db_1")["Id"].clone();
    let web_before = d.inspect("proj_web_1")["Id"].clone();
    std::fs::write(dir.path().join("docker-compose.yml"), project("changed")).expect("write");
    c.ok(&["up", "-d"]);
    assert_eq!(
        d.inspect("proj_db_1")["Id"],
        db_before,
        "db unchanged, kept"
    );
    assert_ne!(
        d.inspect("proj_web_1")["Id"],
        web_before,
        "web changed, recreated"
    );

    c.ok(&["down", "-v"]);
    let left = d.ok(&["ps", "-aq"]);
    assert!(left.trim().is_empty(), "containers left: {left}");
    let networks = d.ok(&["network", "ls", "--format", "{{.Name}}"]);
    assert!(!networks.contains("proj_"), "networks left: {networks}");
    let volumes = d.ok(&["volume", "ls", "-q"]);
    assert!(!volumes.contains("proj_"), "volumes left: {volumes}");
}

/// The body at `addr` (host:port), by the host's curl.
fn fetch(addr: &str) -> String {
    let out = run_with_timeout(
        Command::new("curl").args(["-sS", "--max-time", "10", &format!("http://{addr}/")]),
        Duration::from_secs(20),
    );
    assert!(out.success(), "curl {addr}: {out:?}");
    out.stdout
}
