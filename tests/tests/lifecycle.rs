//! The acceptance scenario of issue 7, command by command, with output and
//! exit codes checked: the container lifecycle, logs, events, images, and
//! the errors clients match on.

use holdfast_e2e::procs::{ProcessIdentity, pid_alive};
use holdfast_e2e::{Daemon, TICKER, lines, now_unix_nanos, parse_rfc3339_nanos};
use holdfast_testkit::busybox_image;
use serde_json::Value;
use std::time::{Duration, Instant};

const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

fn is_full_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn time_of(d: &Daemon, v: &Value, what: &str) -> i128 {
    let s = v.as_str().unwrap_or("");
    parse_rfc3339_nanos(s)
        .unwrap_or_else(|| panic!("{what} is not an RFC 3339 time: {v}\n{}", d.diagnostics()))
}

fn ticks(text: &str) -> usize {
    text.lines().filter(|l| l.trim() == "tick").count()
}

#[test]
fn version_and_info() {
    let mut d = Daemon::start();
    let version = d.ok(&["version"]);
    assert!(
        version.contains("Server:"),
        "docker version shows no server:\n{version}\n{}",
        d.diagnostics()
    );
    let api = d.ok(&["version", "--format", "{{.Server.APIVersion}}"]);
    let minor: u32 = api
        .trim()
        .strip_prefix("1.")
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    assert!(
        minor >= 43,
        "the server must claim API 1.43 or newer, claims {api:?}\n{}",
        d.diagnostics()
    );

    let text = d.ok(&["info"]);
    assert!(
        text.contains("Server:") && !text.contains("ERROR"),
        "docker info:\n{text}\n{}",
        d.diagnostics()
    );
    let info: Value = serde_json::from_str(&d.ok(&["info", "--format", "{{json .}}"]))
        .expect("docker info --format json");
    let msg = format!("docker info: {info:#}\n{}", d.diagnostics());
    assert!(info["Images"].as_u64().unwrap_or(0) >= 1, "{msg}");
    assert_eq!(info["Containers"], 0, "{msg}");
    assert_eq!(info["ContainersRunning"], 0, "{msg}");
    assert_eq!(info["ContainersStopped"], 0, "{msg}");
    assert_eq!(info["ContainersPaused"], 0, "{msg}");
    for field in [
        "Driver",
        "KernelVersion",
        "CgroupDriver",
        "LoggingDriver",
        "ServerVersion",
    ] {
        assert!(
            info[field].as_str().is_some_and(|s| !s.is_empty()),
            "{field} missing: {msg}"
        );
    }
    assert_eq!(
        info["DockerRootDir"].as_str(),
        Some(d.data_root().to_str().expect("utf-8 root")),
        "{msg}"
    );
    assert!(
        info["Runtimes"].as_object().is_some_and(|r| !r.is_empty()),
        "{msg}"
    );
    // holdfast's own truth about containerd is where the CLI shows it.
    let truth = format!(
        "{} {} {}",
        info["SystemStatus"], info["Warnings"], info["Labels"]
    )
    .to_lowercase();
    assert!(
        truth.contains("containerd"),
        "info should say how containerd is (SystemStatus, Warnings or Labels): {msg}"
    );
    // The host's own facts, not fixed values.
    let uname = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .expect("uname -m");
    let machine = String::from_utf8_lossy(&uname.stdout).trim().to_owned();
    assert_eq!(info["Architecture"], machine.as_str(), "{msg}");
    let forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
        .expect("ip_forward")
        .trim()
        == "1";
    assert_eq!(info["IPv4Forwarding"], forwarding, "{msg}");
    assert!(info["NFd"].as_u64().unwrap_or(0) > 0, "{msg}");
    let networks = &info["Plugins"]["Network"];
    assert!(
        networks
            .as_array()
            .is_some_and(|n| n.iter().any(|p| p == "bridge")),
        "{msg}"
    );
    // What the cgroups can limit, read from the host as dockerd reads it.
    let cgroup = std::path::Path::new("/sys/fs/cgroup");
    let v2_controllers = std::fs::read_to_string(cgroup.join("cgroup.controllers")).ok();
    let (memory, swap, period, quota) = match &v2_controllers {
        Some(c) => {
            let has = |n: &str| c.split_whitespace().any(|h| h == n);
            (has("memory"), has("memory"), has("cpu"), has("cpu"))
        }
        None => (
            cgroup.join("memory/memory.limit_in_bytes").exists(),
            cgroup.join("memory/memory.memsw.limit_in_bytes").exists(),
            cgroup.join("cpu/cpu.cfs_period_us").exists(),
            cgroup.join("cpu/cpu.cfs_quota_us").exists(),
        ),
    };
    assert_eq!(
        (
            &info["MemoryLimit"],
            &info["SwapLimit"],
            &info["CpuCfsPeriod"],
            &info["CpuCfsQuota"]
        ),
        (
            &Value::Bool(memory),
            &Value::Bool(swap),
            &Value::Bool(period),
            &Value::Bool(quota)
        ),
        "{msg}"
    );
    // containerd and runc as they say they are.
    let runc = std::process::Command::new("runc")
        .arg("--version")
        .output()
        .expect("runc --version");
    let runc = String::from_utf8_lossy(&runc.stdout).into_owned();
    let runc_commit = runc
        .lines()
        .find_map(|l| l.strip_prefix("commit:"))
        .map(str::trim)
        .unwrap_or_default();
    assert_eq!(info["RuncCommit"]["ID"], runc_commit, "{msg}");
    let containerd = std::process::Command::new("containerd")
        .arg("--version")
        .output()
        .expect("containerd --version");
    let containerd = String::from_utf8_lossy(&containerd.stdout).into_owned();
    let revision = info["ContainerdCommit"]["ID"].as_str().unwrap_or_default();
    assert!(
        !revision.is_empty() && containerd.contains(revision),
        "containerd says {containerd:?}: {msg}"
    );
    // The engine's own commit, stamped at build.
    let version: Value = serde_json::from_str(&d.ok(&["version", "--format", "{{json .Server}}"]))
        .expect("docker version --format json");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    assert_eq!(version["GitCommit"], head.as_str(), "{version}");
    let names: Vec<&str> = version["Components"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["Name"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ["Engine", "containerd", "runc"]
            .iter()
            .all(|n| names.contains(n)),
        "{version}"
    );
    // A `docker events` listening is counted while it listens.
    assert_eq!(info["NEventsListener"], 0, "{msg}");
    let listening = d.spawn_docker(&["events"]);
    d.wait_until("docker info counts the listener", || {
        d.ok(&["info", "--format", "{{.NEventsListener}}"]).trim() == "1"
    });
    drop(listening);
    d.wait_until("docker info no longer counts the listener gone", || {
        d.ok(&["info", "--format", "{{.NEventsListener}}"]).trim() == "0"
    });
    // A random id of this engine, kept through a restart.
    let id = info["ID"].as_str().unwrap_or_default().to_owned();
    assert_eq!(id.len(), 36, "a UUID: {msg}");
    d.sigterm_and_wait();
    d.restart();
    let again = d.ok(&["info", "--format", "{{.ID}}"]);
    assert_eq!(again.trim(), id, "the same engine id after a restart");
}

#[test]
fn the_acceptance_scenario() {
    let d = Daemon::start();
    let t0 = now_unix_nanos();

    // ---- run --rm, attached: output, exit code, nothing left
    let out = d.docker(&["run", "--rm", "busybox", "echo", "hello"]);
    d.assert_printed("run --rm echo hello", &out, "hello\n");
    d.assert_no_containers("run --rm ended");
    let out = d.docker(&["run", "--rm", "busybox", "sh", "-c", "exit 3"]);
    assert_eq!(
        out.code(),
        3,
        "run --rm sh -c 'exit 3': stderr {:?}\n{}",
        out.stderr,
        d.diagnostics()
    );
    d.assert_no_containers("run --rm ended");
    let out = d.ok(&[
        "run",
        "--name",
        "done0",
        "busybox",
        "sh",
        "-c",
        "echo bye; echo err >&2",
    ]);
    assert_eq!(out, "bye\n", "{}", d.diagnostics());

    // ---- run -d, ps
    let web = d.run_ticker("web", &["--restart", "unless-stopped"]);
    let web = web.trim().to_owned();
    assert!(
        is_full_id(&web),
        "run -d prints the id, got {web:?}\n{}",
        d.diagnostics()
    );

    let ps = lines(&d.ok(&["ps", "--format", "{{.Names}}|{{.Status}}"]));
    assert!(
        ps.len() == 1 && ps[0].starts_with("web|Up "),
        "docker ps: {ps:?}\n{}",
        d.diagnostics()
    );
    let table = d.ok(&["ps"]);
    assert!(
        table.starts_with("CONTAINER ID") && table.contains(&web[..12]) && table.contains("web"),
        "docker ps:\n{table}\n{}",
        d.diagnostics()
    );
    let exited = lines(&d.ok(&[
        "ps",
        "-a",
        "--filter",
        "status=exited",
        "--format",
        "{{.Names}}|{{.Status}}",
    ]));
    assert!(
        exited.len() == 1
            && exited[0].starts_with("done0|Exited (0) ")
            && exited[0].ends_with(" ago"),
        "ps -a --filter status=exited: {exited:?}\n{}",
        d.diagnostics()
    );
    let running = d.container_ids(false);
    assert_eq!(running, vec![web.clone()], "{}", d.diagnostics());
    let all = d.container_ids(true);
    assert_eq!(all.len(), 2, "ps -a: {all:?}\n{}", d.diagnostics());

    // ---- inspect
    let v = d.inspect("web");
    let msg = format!("inspect web: {v:#}\n{}", d.diagnostics());
    assert_eq!(v["Id"], web.as_str(), "{msg}");
    assert_eq!(v["Name"], "/web", "{msg}");
    assert_eq!(v["State"]["Status"], "running", "{msg}");
    assert_eq!(v["State"]["Running"], true, "{msg}");
    assert_eq!(v["State"]["OOMKilled"], false, "{msg}");
    assert_eq!(v["State"]["ExitCode"], 0, "{msg}");
    assert_eq!(v["State"]["FinishedAt"], ZERO_TIME, "{msg}");
    assert_eq!(v["RestartCount"], 0, "{msg}");
    assert_eq!(
        v["HostConfig"]["RestartPolicy"]["Name"], "unless-stopped",
        "{msg}"
    );
    assert_eq!(
        v["Config"]["Cmd"],
        serde_json::json!(["sh", "-c", TICKER]),
        "{msg}"
    );
    let started_at = time_of(&d, &v["State"]["StartedAt"], "StartedAt");
    assert!(
        started_at >= t0 - 5_000_000_000 && started_at <= now_unix_nanos(),
        "{msg}"
    );
    let pid1 = d.pid_of("web");
    assert!(pid_alive(pid1), "web's pid {pid1} is not alive: {msg}");
    let log_path = v["LogPath"].as_str().unwrap_or("").to_owned();
    assert!(!log_path.is_empty(), "LogPath missing: {msg}");

    // ---- logs: the json-file on the host, --tail, -t
    d.wait_until("web logged 4 ticks", || ticks(&d.logs("web").0) >= 4);
    let (stdout, stderr) = d.logs("web");
    assert!(
        stderr.is_empty(),
        "web wrote nothing to stderr, logs say {stderr:?}"
    );
    assert!(stdout.lines().all(|l| l == "tick"), "logs: {stdout:?}");
    let json_log = std::fs::read_to_string(&log_path)
        .unwrap_or_else(|e| panic!("LogPath {log_path}: {e}\n{}", d.diagnostics()));
    let first: Value = serde_json::from_str(json_log.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("LogPath is not json-file ({e}):\n{json_log}"));
    assert_eq!(first["log"], "tick\n", "json-file line: {first}");
    assert_eq!(first["stream"], "stdout", "json-file line: {first}");
    time_of(&d, &first["time"], "json-file time");
    let tail = lines(&d.ok(&["logs", "--tail", "3", "web"]));
    assert_eq!(
        tail,
        vec!["tick"; 3],
        "logs --tail 3 web\n{}",
        d.diagnostics()
    );
    let stamped = lines(&d.ok(&["logs", "-t", "--tail", "1", "web"]));
    let (stamp, line) = stamped
        .first()
        .and_then(|l| l.split_once(' '))
        .unwrap_or_else(|| panic!("logs -t: {stamped:?}\n{}", d.diagnostics()));
    assert_eq!(line, "tick", "logs -t: {stamped:?}");
    let stamp = parse_rfc3339_nanos(stamp).unwrap_or_else(|| panic!("logs -t stamp {stamp:?}"));
    assert!(
        stamp >= started_at && stamp <= now_unix_nanos(),
        "logs -t stamp {stamp}"
    );
    let (done_out, done_err) = d.logs("done0");
    assert_eq!(
        (done_out.as_str(), done_err.as_str()),
        ("bye\n", "err\n"),
        "done0 logs by stream"
    );

    // ---- logs -f follows, and ends when the container stops (stop -t 2)
    let follower = d.spawn_docker(&["logs", "-f", "--tail", "1", "web"]);
    d.wait_until("logs -f shows a new tick after the tail", || {
        ticks(&follower.stdout_so_far()) >= 2
    });
    let before_stop = d.inspect("web");
    let asked = Instant::now();
    assert_eq!(
        d.ok(&["stop", "-t", "2", "web"]),
        "web\n",
        "{}",
        d.diagnostics()
    );
    let took = asked.elapsed();
    // sh as pid 1 has no TERM handler: the kernel drops SIGTERM; SIGKILL
    // comes after the grace period.
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(12),
        "stop -t 2 of a TERM-ignoring container took {took:?}\n{}",
        d.diagnostics()
    );
    let followed = d.wait_exit("logs -f ended after the stop", follower);
    assert!(
        followed.success(),
        "logs -f exited {}: stderr {:?}\n{}",
        followed.code(),
        followed.stderr,
        d.diagnostics()
    );
    assert!(!pid_alive(pid1), "stop left pid {pid1} alive");
    let s = d.state("web");
    let msg = format!("after stop: {s:#}\n{}", d.diagnostics());
    assert_eq!(s["Status"], "exited", "{msg}");
    assert_eq!(s["Running"], false, "{msg}");
    assert_eq!(s["ExitCode"], 137, "{msg}");
    assert_eq!(s["Pid"], 0, "{msg}");
    let finished = time_of(&d, &s["FinishedAt"], "FinishedAt");
    assert!(finished > started_at, "{msg}");
    assert_eq!(
        d.inspect("web")["RestartCount"],
        before_stop["RestartCount"],
        "{msg}"
    );

    // ---- start, restart
    assert_eq!(d.ok(&["start", "web"]), "web\n", "{}", d.diagnostics());
    let pid2 = d.pid_of("web");
    assert!(
        pid2 != pid1 && pid_alive(pid2),
        "start: pid {pid2}\n{}",
        d.diagnostics()
    );
    let s = d.state("web");
    assert!(
        time_of(&d, &s["StartedAt"], "StartedAt") > finished,
        "start: {s:#}"
    );
    assert_eq!(
        d.ok(&["restart", "-t", "1", "web"]),
        "web\n",
        "{}",
        d.diagnostics()
    );
    let pid3 = d.pid_of("web");
    assert!(
        pid3 != pid2 && pid_alive(pid3) && !pid_alive(pid2),
        "restart: pids {pid2} -> {pid3}\n{}",
        d.diagnostics()
    );

    // ---- kill -s USR1: sh as pid 1 has no USR1 handler, so the kernel
    // drops it; the container runs on, same process, still logging.
    let identity = ProcessIdentity::of(pid3).expect("web's process");
    let logged = ticks(&d.logs("web").0);
    assert_eq!(
        d.ok(&["kill", "-s", "USR1", "web"]),
        "web\n",
        "{}",
        d.diagnostics()
    );
    d.wait_until("a kill event with signal 10", || {
        d.events_since(t0, &["--filter", "container=web", "--filter", "event=kill"])
            .iter()
            .any(|e| e["Actor"]["Attributes"]["signal"] == "10")
    });
    d.wait_until("web logs a tick after USR1", || {
        ticks(&d.logs("web").0) > logged
    });
    assert!(
        identity.is_alive(),
        "USR1 ended web's process\n{}",
        d.diagnostics()
    );
    assert_eq!(d.pid_of("web"), pid3, "{}", d.diagnostics());

    // ---- run -d + wait: the exit code, inspect's exit fields
    let w1 = d.run_script("w1", &[], "sleep 1; exit 7");
    assert!(is_full_id(w1.trim()), "{w1:?}");
    assert_eq!(
        d.ok(&["wait", "w1"]),
        "7\n",
        "docker wait w1\n{}",
        d.diagnostics()
    );
    let s = d.state("w1");
    let msg = format!("w1: {s:#}\n{}", d.diagnostics());
    assert_eq!(s["Status"], "exited", "{msg}");
    assert_eq!(s["Running"], false, "{msg}");
    assert_eq!(s["ExitCode"], 7, "{msg}");
    assert_eq!(s["OOMKilled"], false, "{msg}");
    let w1_started = time_of(&d, &s["StartedAt"], "StartedAt");
    let w1_finished = time_of(&d, &s["FinishedAt"], "FinishedAt");
    assert!(
        w1_finished - w1_started >= 900_000_000,
        "w1 ran a second: {msg}"
    );
    let by_code = d.ok(&["ps", "-a", "-q", "--no-trunc", "--filter", "exited=7"]);
    assert_eq!(
        lines(&by_code),
        vec![w1.trim().to_owned()],
        "{}",
        d.diagnostics()
    );
    // a second wait on an exited container answers at once with the same code
    assert_eq!(d.ok(&["wait", "w1"]), "7\n", "{}", d.diagnostics());

    // ---- rm -f
    assert_eq!(
        d.ok(&["rm", "-f", "web", "w1"]),
        "web\nw1\n",
        "{}",
        d.diagnostics()
    );
    assert!(!pid_alive(pid3), "rm -f left web's process {pid3}");
    d.fails_saying(
        "rm -f removed web",
        &["container", "inspect", "web"],
        "No such container: web",
    );
    let left: Vec<String> = lines(&d.ok(&["ps", "-a", "--format", "{{.Names}}"]));
    assert_eq!(left, vec!["done0"], "{}", d.diagnostics());
    assert_eq!(d.ok(&["rm", "done0"]), "done0\n", "{}", d.diagnostics());
    d.assert_no_containers("every container was removed");

    // ---- events: what happened to web, once each, in order
    let mut events = Vec::new();
    d.wait_until("the destroy of web is in the event log", || {
        events = d.events_since(t0, &["--filter", "container=web"]);
        events.last().is_some_and(|e| e["Action"] == "destroy")
    });
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e["Action"].as_str().unwrap_or("?"))
        .collect();
    let msg = format!("events of web: {actions:?}\n{}", d.diagnostics());
    for e in &events {
        assert_eq!(e["Type"], "container", "{e}\n{msg}");
        assert_eq!(e["Actor"]["ID"], web.as_str(), "{e}\n{msg}");
        assert_eq!(e["Actor"]["Attributes"]["name"], "web", "{e}\n{msg}");
        assert_eq!(e["Actor"]["Attributes"]["image"], "busybox", "{e}\n{msg}");
        assert!(
            e["timeNano"].as_i64().unwrap_or(0) >= t0 as i64 - 1_000_000_000,
            "{e}\n{msg}"
        );
    }
    let count = |a: &str| actions.iter().filter(|x| **x == a).count();
    assert_eq!(actions.first(), Some(&"create"), "{msg}");
    assert_eq!(count("create"), 1, "{msg}");
    assert_eq!(count("start"), 3, "run, start, restart: {msg}");
    assert_eq!(count("die"), 3, "stop, restart, rm -f: {msg}");
    assert_eq!(count("destroy"), 1, "{msg}");
    let position = |a: &str| actions.iter().position(|x| *x == a).expect("present");
    assert!(
        position("create") < position("start")
            && position("start") < position("die")
            && position("die") < position("destroy"),
        "{msg}"
    );
    let times: Vec<i64> = events
        .iter()
        .map(|e| e["timeNano"].as_i64().unwrap_or(0))
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "events out of time order: {msg}"
    );
    let first_die = events.iter().find(|e| e["Action"] == "die").expect("a die");
    assert_eq!(
        first_die["Actor"]["Attributes"]["exitCode"], "137",
        "{first_die}\n{msg}"
    );
    let signals: Vec<&str> = events
        .iter()
        .filter(|e| e["Action"] == "kill")
        .filter_map(|e| e["Actor"]["Attributes"]["signal"].as_str())
        .collect();
    for sig in ["15", "9", "10"] {
        assert!(
            signals.contains(&sig),
            "kill events carry signals {signals:?}\n{msg}"
        );
    }
    d.assert_one_die(t0, "w1", "7");
}

#[test]
fn images_load_list_inspect_tag_remove() {
    let d = Daemon::start();
    let dir = d.root().join("images");
    let other = busybox_image(&dir, "other:1", None);
    let out = d.ok(&["load", "-i", other.docker_archive.to_str().expect("utf-8")]);
    assert!(
        out.contains("Loaded image: other:1"),
        "docker load: {out:?}\n{}",
        d.diagnostics()
    );
    let oci = busybox_image(&dir, "ocilayout:2", Some("SIGUSR2"));
    let out = d.ok(&["load", "-i", oci.oci_layout.to_str().expect("utf-8")]);
    assert!(
        out.contains("Loaded image"),
        "docker load (OCI layout): {out:?}\n{}",
        d.diagnostics()
    );

    let listed = lines(&d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]));
    for want in ["busybox:latest", "other:1", "ocilayout:2"] {
        assert!(
            listed.iter().any(|l| l == want),
            "images lacks {want}: {listed:?}\n{}",
            d.diagnostics()
        );
    }
    let table = d.ok(&["images"]);
    assert!(table.starts_with("REPOSITORY"), "docker images:\n{table}");

    let inspected: Value =
        serde_json::from_str(&d.ok(&["image", "inspect", "busybox"])).expect("image inspect JSON");
    let img = &inspected[0];
    let msg = format!("image inspect busybox: {img:#}\n{}", d.diagnostics());
    let busybox_id = img["Id"].as_str().unwrap_or("").to_owned();
    assert!(
        busybox_id.starts_with("sha256:") && busybox_id.len() == 71,
        "{msg}"
    );
    assert!(
        img["RepoTags"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "busybox:latest")),
        "{msg}"
    );
    assert_eq!(img["Os"], "linux", "{msg}");
    assert!(
        img["Architecture"].as_str().is_some_and(|a| !a.is_empty()),
        "{msg}"
    );
    assert_eq!(img["Config"]["Cmd"], serde_json::json!(["sh"]), "{msg}");
    assert!(
        img["RootFS"]["Layers"]
            .as_array()
            .is_some_and(|l| !l.is_empty()),
        "{msg}"
    );
    let stop_signal = d.ok(&[
        "image",
        "inspect",
        "-f",
        "{{.Config.StopSignal}}",
        "ocilayout:2",
    ]);
    assert_eq!(stop_signal.trim(), "SIGUSR2", "{}", d.diagnostics());

    // a loaded image runs
    let out = d.ok(&["run", "--rm", "other:1", "echo", "from-other"]);
    assert_eq!(out, "from-other\n", "{}", d.diagnostics());

    // tag, rmi
    assert_eq!(
        d.ok(&["tag", "busybox", "mine:1"]),
        "",
        "{}",
        d.diagnostics()
    );
    let tagged = d.ok(&["image", "inspect", "-f", "{{.Id}}", "mine:1"]);
    assert_eq!(tagged.trim(), busybox_id, "{}", d.diagnostics());
    let listed = lines(&d.ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]));
    assert!(listed.iter().any(|l| l == "mine:1"), "{listed:?}");
    let out = d.ok(&["rmi", "mine:1"]);
    assert!(
        out.contains("Untagged: mine:1"),
        "rmi mine:1: {out:?}\n{}",
        d.diagnostics()
    );
    d.fails(&["image", "inspect", "mine:1"]);
    d.ok(&["image", "inspect", "busybox"]);
    d.fails_saying("rmi of no image", &["rmi", "nosuch:1"], "No such image");

    // an image that is not there: the CLI pulls it, Docker Hub cannot be
    // reached from here, and the answer names the registry
    d.fails_saying(
        "running a missing image should say the registry failed it",
        &["run", "--rm", "nosuch-image:1", "true"],
        "registry",
    );
    d.assert_no_containers("a run of a missing image creates nothing");
}

#[test]
fn names_ids_and_errors() {
    let d = Daemon::start();
    let first = d.ok(&["create", "--name", "dup", "busybox", "true"]);
    let first = first.trim();
    assert!(is_full_id(first), "create prints the id: {first:?}");
    let created = d.state("dup");
    assert_eq!(created["Status"], "created", "{created:#}");
    let ps = lines(&d.ok(&["ps", "-a", "--format", "{{.Names}}|{{.Status}}"]));
    assert_eq!(ps, vec!["dup|Created"], "{}", d.diagnostics());

    // the name conflict names the other container
    let conflict = d.fails(&["create", "--name", "dup", "busybox", "true"]);
    assert!(
        conflict.stderr.contains("is already in use by container")
            && conflict.stderr.contains(first)
            && conflict.stderr.contains("\"/dup\""),
        "name conflict: {:?}\n{}",
        conflict.stderr,
        d.diagnostics()
    );
    let conflict = d.fails(&["run", "-d", "--name", "dup", "busybox", "true"]);
    assert!(conflict.stderr.contains(first), "{:?}", conflict.stderr);

    // full id, unique prefix, name
    for key in [first, &first[..12], &first[..5], "dup", "/dup"] {
        let id = d.ok(&["inspect", "-f", "{{.Id}}", key]);
        assert_eq!(id.trim(), first, "inspect {key}\n{}", d.diagnostics());
    }

    // unknown containers
    for cmd in [
        vec!["stop", "nosuch"],
        vec!["start", "nosuch"],
        vec!["kill", "nosuch"],
        vec!["rm", "nosuch"],
        vec!["wait", "nosuch"],
        vec!["logs", "nosuch"],
        vec!["restart", "nosuch"],
    ] {
        d.fails_saying("an unknown container", &cmd, "No such container: nosuch");
    }

    // bad names, and nothing created for them
    d.fails_saying(
        "bad name",
        &["create", "--name", "bad name!", "busybox", "true"],
        "Invalid container name",
    );
    d.fails(&["create", "--name=-leading-dash", "busybox", "true"]);

    // stop and start of a container in the wrong state
    d.ok(&["start", "dup"]);
    assert_eq!(d.ok(&["wait", "dup"]), "0\n", "{}", d.diagnostics());
    assert_eq!(
        d.ok(&["stop", "dup"]),
        "dup\n",
        "stopping a stopped container is fine"
    );
    d.fails_saying(
        "kill of an exited container",
        &["kill", "dup"],
        "is not running",
    );

    // rm of a running container needs -f
    d.ok(&["run", "-d", "--name", "busy", "busybox", "sleep", "1000"]);
    let pid = d.pid_of("busy");
    let out = d.fails(&["rm", "busy"]);
    assert!(
        out.stderr.to_lowercase().contains("running") && out.stderr.contains("force"),
        "rm of a running container: {:?}\n{}",
        out.stderr,
        d.diagnostics()
    );
    assert!(pid_alive(pid), "a refused rm must leave it running");
    d.ok(&["rm", "-f", "busy", "dup"]);
    assert!(!pid_alive(pid));
    d.assert_no_containers("every container was removed");
}

#[test]
fn create_options_filters_and_auto_remove() {
    let d = Daemon::start();
    // Env, WorkingDir, User, Entrypoint
    let out = d.ok(&[
        "run",
        "--rm",
        "-e",
        "GREETING=hi there",
        "-w",
        "/tmp",
        "-u",
        "65534",
        "--entrypoint",
        "sh",
        "busybox",
        "-c",
        "echo \"$GREETING\"; pwd; id -u",
    ]);
    assert_eq!(out, "hi there\n/tmp\n65534\n", "{}", d.diagnostics());
    // the image's Env under the container's
    let env = lines(&d.ok(&["run", "--rm", "-e", "A=1", "busybox", "env"]));
    for want in [
        "A=1",
        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ] {
        assert!(
            env.iter().any(|l| l == want),
            "env lacks {want}: {env:?}\n{}",
            d.diagnostics()
        );
    }
    // a read-only root filesystem
    let out = d.docker(&["run", "--rm", "--read-only", "busybox", "touch", "/x"]);
    assert!(
        out.code() == 1 && out.stderr.contains("Read-only file system"),
        "--read-only: exit {} stderr {:?}\n{}",
        out.code(),
        out.stderr,
        d.diagnostics()
    );
    // settings recorded as given
    d.ok(&[
        "create",
        "--name",
        "opts",
        "-m",
        "64m",
        "--network",
        "host",
        "--stop-signal",
        "USR1",
        "--stop-timeout",
        "3",
        "--label",
        "tier=front",
        "busybox",
        "true",
    ]);
    let v = d.inspect("opts");
    let msg = format!("inspect opts: {v:#}\n{}", d.diagnostics());
    assert_eq!(v["HostConfig"]["Memory"], 64 * 1024 * 1024, "{msg}");
    assert_eq!(v["HostConfig"]["NetworkMode"], "host", "{msg}");
    assert!(
        ["USR1", "SIGUSR1"].contains(&v["Config"]["StopSignal"].as_str().unwrap_or("")),
        "{msg}"
    );
    assert_eq!(v["Config"]["StopTimeout"], 3, "{msg}");
    assert_eq!(v["Config"]["Labels"]["tier"], "front", "{msg}");
    assert_eq!(v["Config"]["Image"], "busybox", "{msg}");
    assert!(
        v["Image"]
            .as_str()
            .is_some_and(|i| i.starts_with("sha256:")),
        "{msg}"
    );

    // list filters
    d.ok(&[
        "create",
        "--name",
        "back1",
        "--label",
        "tier=back",
        "busybox",
        "true",
    ]);
    d.ok(&["run", "-d", "--name", "runner", "busybox", "sleep", "1000"]);
    let names = |filters: &[&str]| -> Vec<String> {
        let mut args = vec!["ps", "-a", "--format", "{{.Names}}"];
        for f in filters {
            args.push("--filter");
            args.push(f);
        }
        let mut v = lines(&d.ok(&args));
        v.sort();
        v
    };
    let runner_id = d.inspect("runner")["Id"].as_str().unwrap_or("").to_owned();
    let by_id = format!("id={}", &runner_id[..10]);
    for (filter, want) in [
        ("label=tier=front", &["opts"][..]),
        ("label=tier", &["back1", "opts"]),
        ("name=runner", &["runner"]),
        ("status=created", &["back1", "opts"]),
        ("status=running", &["runner"]),
        ("ancestor=busybox", &["back1", "opts", "runner"]),
        ("before=runner", &["back1", "opts"]),
        ("since=opts", &["back1", "runner"]),
        (&by_id, &["runner"]),
    ] {
        assert_eq!(
            names(&[filter]),
            want,
            "ps -a --filter {filter}\n{}",
            d.diagnostics()
        );
    }
    let last = lines(&d.ok(&["ps", "-a", "-n", "1", "--format", "{{.Names}}"]));
    assert_eq!(
        last,
        ["runner"],
        "ps -n 1 lists the newest\n{}",
        d.diagnostics()
    );

    // run -d --rm: gone once it exits
    let id = d.ok(&["run", "-d", "--rm", "busybox", "sh", "-c", "sleep 0.3"]);
    let id = id.trim().to_owned();
    d.wait_until("the --rm container is removed after its exit", || {
        !d.container_ids(true).contains(&id)
    });
    d.ok(&["rm", "-f", "opts", "back1", "runner"]);
}

#[test]
fn stop_signal_and_grace_period_precedence() {
    let d = Daemon::start();
    let trapping = "trap 'echo got-usr1; exit 0' USR1; trap 'echo got-usr2; exit 0' USR2; \
                    trap 'echo got-term; exit 0' TERM; while true; do sleep 0.1; done";
    let image = busybox_image(&d.root().join("images"), "stopsig:1", Some("SIGUSR2"));
    d.ok(&[
        "load",
        "-q",
        "-i",
        image.docker_archive.to_str().expect("utf-8"),
    ]);
    let got = |name: &str| -> Vec<String> {
        d.logs(name)
            .0
            .lines()
            .filter(|l| l.starts_with("got-"))
            .map(str::to_owned)
            .collect()
    };
    let timed_stop = |args: &[&str]| -> Duration {
        let started = Instant::now();
        d.ok(args);
        started.elapsed()
    };

    // (name, what it is run with, how it is stopped, the signal it gets)
    let cases: [(&str, &[&str], &[&str], &str); 4] = [
        // SIGTERM by default
        ("plain", &["busybox"], &["stop"], "got-term"),
        // image StopSignal over SIGTERM
        ("fromimage", &["stopsig:1"], &["stop"], "got-usr2"),
        // container StopSignal over the image's
        (
            "fromcontainer",
            &["--stop-signal", "USR1", "stopsig:1"],
            &["stop"],
            "got-usr1",
        ),
        // the request's signal over the container's
        (
            "fromrequest",
            &["--stop-signal", "USR1", "busybox"],
            &["stop", "--signal", "USR2"],
            "got-usr2",
        ),
    ];
    for (name, run, stop, signal) in cases {
        d.run_detached(name, &[run, &["sh", "-c", trapping]].concat());
        timed_stop(&[stop, &[name]].concat());
        assert_eq!(got(name), [signal], "{name}\n{}", d.diagnostics());
    }
    for (name, ..) in cases {
        let s = d.state(name);
        assert_eq!(s["ExitCode"], 0, "{name} exits 0 on its stop signal: {s}");
    }

    // grace period: the container's StopTimeout over the default 10 s
    d.run_detached(
        "stubborn",
        &["--stop-timeout", "1", "busybox", "sleep", "1000"],
    );
    let took = timed_stop(&["stop", "stubborn"]);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "StopTimeout 1 s: stop took {took:?}\n{}",
        d.diagnostics()
    );
    assert_eq!(d.state("stubborn")["ExitCode"], 137, "{}", d.diagnostics());
    // the request's t over the container's StopTimeout
    d.run_detached(
        "patient",
        &["--stop-timeout", "60", "busybox", "sleep", "1000"],
    );
    let took = timed_stop(&["stop", "-t", "1", "patient"]);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(6),
        "stop -t 1 over StopTimeout 60: took {took:?}\n{}",
        d.diagnostics()
    );
    // t=0: SIGKILL at once
    d.run_detached("now", &["busybox", "sleep", "1000"]);
    let took = timed_stop(&["stop", "-t", "0", "now"]);
    assert!(
        took < Duration::from_secs(3),
        "stop -t 0 took {took:?}\n{}",
        d.diagnostics()
    );
    assert_eq!(d.state("now")["ExitCode"], 137, "{}", d.diagnostics());
    d.ok(&[
        "rm",
        "plain",
        "fromimage",
        "fromcontainer",
        "fromrequest",
        "stubborn",
        "patient",
        "now",
    ]);
}

#[test]
fn attach_and_log_windows() {
    let d = Daemon::start();
    d.run_script(
        "att",
        &[],
        "while true; do echo tick; echo tock >&2; sleep 0.2; done",
    );
    // attach: live output, ends with the container
    let attach = d.spawn_docker(&["attach", "--no-stdin", "--sig-proxy=false", "att"]);
    d.wait_until("attach shows live output", || {
        ticks(&attach.stdout_so_far()) >= 2
    });
    assert_eq!(d.ok(&["stop", "-t", "1", "att"]), "att\n");
    d.wait_exit("attach ends with the container", attach);

    // stream selection and time windows
    let out = d.docker(&["logs", "att"]);
    assert!(
        out.stdout.lines().all(|l| l == "tick") && out.stderr.lines().all(|l| l == "tock"),
        "logs keep the streams apart: {:?} / {:?}",
        out.stdout,
        out.stderr
    );
    let stamped = lines(&d.ok(&["logs", "-t", "att"]));
    let stamps: Vec<i128> = stamped
        .iter()
        .filter_map(|l| parse_rfc3339_nanos(l.split_once(' ')?.0))
        .collect();
    assert!(
        stamps.len() >= 4,
        "logs -t: {stamped:?}\n{}",
        d.diagnostics()
    );
    let middle = stamps[stamps.len() / 2];
    let cut = holdfast_e2e::unix_nanos_arg(middle);
    let since: Vec<i128> = lines(&d.ok(&["logs", "-t", "--since", &cut, "att"]))
        .iter()
        .filter_map(|l| parse_rfc3339_nanos(l.split_once(' ')?.0))
        .collect();
    assert!(
        !since.is_empty() && since.len() < stamps.len() && since.iter().all(|t| *t >= middle),
        "logs --since {cut}: {since:?} of {stamps:?}\n{}",
        d.diagnostics()
    );
    let until: Vec<i128> = lines(&d.ok(&["logs", "-t", "--until", &cut, "att"]))
        .iter()
        .filter_map(|l| parse_rfc3339_nanos(l.split_once(' ')?.0))
        .collect();
    assert!(
        !until.is_empty() && until.len() < stamps.len() && until.iter().all(|t| *t <= middle),
        "logs --until {cut}: {until:?} of {stamps:?}\n{}",
        d.diagnostics()
    );
    d.ok(&["rm", "att"]);
}
