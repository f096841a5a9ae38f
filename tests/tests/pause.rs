//! `docker pause` and `docker unpause` with the real docker CLI: the
//! container's cgroup is really frozen, inspect, ps and events say so, what
//! dockerd refuses is refused, a stop of a paused container lets its own
//! handler run, and holdfastd learns a pause it did not see from containerd.

use holdfast_e2e::Daemon;

/// Whether the kernel has frozen the cgroup of process `pid` (cgroup v2's
/// `cgroup.events`, or v1's freezer controller).
fn frozen(pid: u32) -> bool {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            let events = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cgroup.events"))
                .unwrap_or_default();
            if events.lines().any(|l| l == "frozen 1") {
                return true;
            }
        } else if controllers.split(',').any(|c| c == "freezer") {
            let state =
                std::fs::read_to_string(format!("/sys/fs/cgroup/freezer{path}/freezer.state"))
                    .unwrap_or_default();
            if state.trim() == "FROZEN" {
                return true;
            }
        }
    }
    false
}

#[test]
fn pause_freezes_the_cgroup_and_unpause_thaws_it_with_state_ps_and_events() {
    let d = Daemon::start();
    d.ok(&["run", "-d", "--name", "ice", "busybox", "sleep", "1000"]);
    let pid = d.pid_of("ice");
    assert!(!frozen(pid), "not frozen before the pause");
    let since = holdfast_e2e::now_unix_nanos();
    d.ok(&["pause", "ice"]);
    assert!(frozen(pid), "the cgroup is frozen\n{}", d.diagnostics());
    let state = d.state("ice");
    assert_eq!(
        (&state["Status"], &state["Running"], &state["Paused"]),
        (
            &serde_json::json!("paused"),
            &serde_json::json!(true),
            &serde_json::json!(true)
        ),
        "{state}\n{}",
        d.diagnostics()
    );
    let status = d.ok(&["ps", "--format", "{{.Names}} {{.Status}}"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("ice Up") && l.ends_with("(Paused)")),
        "{status}"
    );
    assert_eq!(
        d.ok(&["ps", "--filter", "status=paused", "--format", "{{.Names}}"])
            .trim(),
        "ice"
    );

    // What dockerd refuses, refused with its words; nothing changes.
    d.fails_saying("a second pause", &["pause", "ice"], "is already paused");
    d.fails_saying(
        "exec into it",
        &["exec", "ice", "true"],
        "unpause the container before exec",
    );
    d.fails_saying(
        "rm without -f",
        &["rm", "ice"],
        "cannot remove a paused container",
    );
    d.fails_saying(
        "start of a paused container",
        &["start", "ice"],
        "cannot start a paused container",
    );
    assert!(frozen(pid), "a refusal changes nothing");

    d.ok(&["unpause", "ice"]);
    assert!(!frozen(pid), "thawed\n{}", d.diagnostics());
    let state = d.state("ice");
    assert_eq!(
        (&state["Status"], &state["Paused"]),
        (&serde_json::json!("running"), &serde_json::json!(false)),
        "{state}"
    );
    assert_eq!(state["Pid"], pid, "the same process goes on");
    d.fails_saying("unpause again", &["unpause", "ice"], "is not paused");
    d.ok(&["exec", "ice", "true"]);

    let actions: Vec<String> = d
        .events_since(
            since,
            &["--filter", "container=ice", "--filter", "type=container"],
        )
        .iter()
        .filter_map(|e| e["Action"].as_str().map(str::to_owned))
        .filter(|a| a == "pause" || a == "unpause")
        .collect();
    assert_eq!(actions, ["pause", "unpause"], "{}", d.diagnostics());

    d.ok(&["stop", "ice"]);
    d.fails_saying(
        "pause of a stopped container",
        &["pause", "ice"],
        "is not running",
    );
}

#[test]
fn a_paused_container_stops_by_its_own_handler_and_goes_with_rm_f() {
    let d = Daemon::start();
    // Exits 7 on SIGTERM: a stop that SIGKILLs instead would show 137.
    d.ok(&[
        "run",
        "-d",
        "--name",
        "polite",
        "busybox",
        "sh",
        "-c",
        "trap 'exit 7' TERM; while :; do sleep 0.1; done",
    ]);
    d.ok(&["pause", "polite"]);
    let started = std::time::Instant::now();
    d.ok(&["stop", "-t", "60", "polite"]);
    let state = d.state("polite");
    assert_eq!(
        (&state["Status"], &state["ExitCode"], &state["Paused"]),
        (
            &serde_json::json!("exited"),
            &serde_json::json!(7),
            &serde_json::json!(false)
        ),
        "the handler ran once thawed: {state}\n{}",
        d.diagnostics()
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the stop did not wait for its grace period: {:?}",
        started.elapsed()
    );

    d.ok(&["run", "-d", "--name", "gone", "busybox", "sleep", "1000"]);
    d.ok(&["pause", "gone"]);
    d.ok(&["rm", "-f", "gone"]);
    d.fails_saying("inspect after rm -f", &["inspect", "gone"], "No such");
}

#[test]
fn a_restarted_holdfastd_learns_the_pause_from_containerd() {
    let mut d = Daemon::start();
    d.ok(&["run", "-d", "--name", "kept", "busybox", "sleep", "1000"]);
    let pid = d.pid_of("kept");
    d.ok(&["pause", "kept"]);
    d.sigkill();
    d.restart();
    d.wait_until("the relist shows it paused", || {
        d.state("kept")["Status"] == "paused"
    });
    assert!(
        frozen(pid),
        "still frozen: holdfastd's restart touched nothing"
    );
    assert_eq!(d.pid_of("kept"), pid);
    d.ok(&["unpause", "kept"]);
    assert!(!frozen(pid));
    assert_eq!(d.state("kept")["Status"], "running");
}
