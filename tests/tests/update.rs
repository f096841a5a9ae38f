//! `docker update` of memory and CPU with the real docker CLI: the running
//! task's cgroup changes at once, inspect shows it, and it holds for the
//! next run and through a holdfastd crash; what cannot be updated is
//! refused by name.

use holdfast_e2e::Daemon;

/// The value of a cgroup file of process `pid`: `v1` under the named v1
/// controller, else `v2` in its unified cgroup.
fn cgroup_value(pid: u32, controller: &str, v1: &str, v2: &str) -> Option<String> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let file = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/{v2}")
        } else if controllers.split(',').any(|c| c == controller) {
            format!("/sys/fs/cgroup/{controllers}{path}/{v1}")
        } else {
            continue;
        };
        if let Ok(value) = std::fs::read_to_string(&file) {
            return Some(value.trim().to_owned());
        }
    }
    None
}

fn memory_limit(pid: u32) -> Option<String> {
    cgroup_value(pid, "memory", "memory.limit_in_bytes", "memory.max")
}

fn cpu_quota(pid: u32) -> Option<String> {
    cgroup_value(pid, "cpu", "cpu.cfs_quota_us", "cpu.max")
        .map(|v| v.split_whitespace().next().unwrap_or_default().to_owned())
}

#[test]
fn update_changes_the_running_cgroup_the_record_and_the_next_run() {
    let mut d = Daemon::start();
    d.ok(&[
        "run", "-d", "--name", "mem", "-m", "64m", "busybox", "sleep", "1000",
    ]);
    let pid = d.pid_of("mem");
    assert_eq!(memory_limit(pid).as_deref(), Some("67108864"));
    let since = holdfast_e2e::now_unix_nanos();
    d.ok(&[
        "update",
        "--memory",
        "128m",
        "--cpus",
        "0.5",
        "--cpu-shares",
        "512",
        "mem",
    ]);
    assert_eq!(
        memory_limit(pid).as_deref(),
        Some("134217728"),
        "the running task's cgroup\n{}",
        d.diagnostics()
    );
    assert_eq!(cpu_quota(pid).as_deref(), Some("50000"));
    let host_config = |d: &Daemon| d.inspect("mem")["HostConfig"].clone();
    let hc = host_config(&d);
    assert_eq!(
        (&hc["Memory"], &hc["NanoCpus"], &hc["CpuShares"]),
        (
            &serde_json::json!(128 << 20),
            &serde_json::json!(500_000_000),
            &serde_json::json!(512)
        ),
        "{hc}"
    );
    let updates = d.events_since(since, &["--filter", "event=update"]);
    assert_eq!(updates.len(), 1, "{updates:?}");

    // Refused by name, and nothing changes.
    d.fails_saying(
        "a memory limit below dockerd's floor",
        &["update", "--memory", "1m", "mem"],
        "Minimum memory limit",
    );
    d.fails_saying(
        "a resource runc is not asked to change",
        &["update", "--pids-limit", "10", "mem"],
        "PidsLimit",
    );
    assert_eq!(host_config(&d)["Memory"], 128 << 20);

    // The next run is created from the updated spec.
    d.ok(&["restart", "-t", "0", "mem"]);
    let pid = d.pid_of("mem");
    assert_eq!(
        memory_limit(pid).as_deref(),
        Some("134217728"),
        "{}",
        d.diagnostics()
    );

    // An update of a stopped container holds for its next start, and a
    // holdfastd crash forgets nothing.
    d.ok(&["stop", "-t", "0", "mem"]);
    d.ok(&["update", "--memory", "96m", "mem"]);
    d.sigkill();
    d.restart();
    assert_eq!(host_config(&d)["Memory"], 96 << 20);
    d.ok(&["start", "mem"]);
    assert_eq!(
        memory_limit(d.pid_of("mem")).as_deref(),
        Some("100663296"),
        "{}",
        d.diagnostics()
    );
}
