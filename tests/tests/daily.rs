//! The commands of a daily session beside the lifecycle, with the real
//! docker CLI: `top`, `stats` (one-shot and streaming, from the host's
//! cgroups, v1 or v2), `container prune` and `port`.

use holdfast_e2e::Daemon;
use serde_json::Value;

#[test]
fn top_shows_the_containers_processes_only() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "busy",
        "busybox",
        "sh",
        "-c",
        "sleep 1001 & sleep 1002",
    ]);
    d.wait_until("both sleeps run", || {
        let out = d.docker(&["top", "busy"]).stdout;
        out.contains("sleep 1001") && out.contains("sleep 1002")
    });
    let out = d.ok(&["top", "busy", "-o", "pid,args"]);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    // busybox sh execs its last command: the second sleep is the init.
    assert_eq!(
        rows.len(),
        2,
        "two sleeps, nothing of the host:\n{out}\n{}",
        d.diagnostics()
    );
    let init = d.pid_of("busy").to_string();
    assert!(
        rows.iter()
            .any(|r| r.split_whitespace().next() == Some(init.as_str())),
        "the init pid {init} is listed:\n{out}"
    );
    d.fails_saying(
        "ps without a PID column",
        &["top", "busy", "-o", "args"],
        "PID",
    );
    d.ok(&["kill", "busy"]);
    d.fails_saying(
        "top of a stopped container",
        &["top", "busy"],
        "is not running",
    );
}

#[test]
fn stats_read_the_cgroup_once_and_as_a_stream() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "hog",
        "-m",
        "64m",
        "busybox",
        "sh",
        "-c",
        "while :; do :; done",
    ]);
    let out = d.ok(&[
        "stats",
        "--no-stream",
        "--format",
        "{{.Name}} {{.CPUPerc}} {{.MemUsage}} {{.PIDs}}",
        "hog",
    ]);
    let fields: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"hog"), "{out}\n{}", d.diagnostics());
    let cpu: f64 = fields
        .get(1)
        .and_then(|c| c.trim_end_matches('%').parse().ok())
        .unwrap_or(-1.0);
    assert!(
        cpu > 0.0,
        "a busy loop uses CPU: {out}\n{}",
        d.diagnostics()
    );
    assert!(
        out.contains("/ 64MiB"),
        "the memory limit is the container's: {out}"
    );
    assert_eq!(fields.last(), Some(&"1"), "one process: {out}");

    // The API's stream: one object per second, each with the one before.
    let r = d.http(
        "GET",
        "/containers/hog/stats?stream=false&one-shot=true",
        None,
    );
    assert_eq!(r.status, 200, "{r:?}");
    let one: Value = r.json().expect("stats JSON");
    assert_eq!(one["name"], "/hog", "{one}");
    assert!(
        one["cpu_stats"]["cpu_usage"]["total_usage"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{one}"
    );
    assert!(
        one["cpu_stats"]["system_cpu_usage"].as_u64().unwrap_or(0) > 0,
        "{one}"
    );
    assert_eq!(one["memory_stats"]["limit"], 64 * 1024 * 1024, "{one}");
    let bg = d.spawn_docker(&["stats", "--format", "{{.Name}} {{.CPUPerc}}", "hog"]);
    d.wait_until("the streaming stats showed several samples", || {
        bg.stdout_so_far().matches("hog").count() >= 3
    });
    drop(bg);

    // A stopped container: zeroes, not an error (as dockerd).
    d.ok(&["kill", "hog"]);
    let out = d.ok(&[
        "stats",
        "--no-stream",
        "--format",
        "{{.Name}} {{.PIDs}}",
        "hog",
    ]);
    assert_eq!(out.trim(), "hog 0", "{}", d.diagnostics());
}

#[test]
fn prune_removes_what_is_not_running_and_port_is_empty_without_networks() {
    let d = Daemon::start();
    d.ok(&["run", "-d", "--name", "stays", "busybox", "sleep", "1000"]);
    // It writes 300 kB: what its prune reclaims.
    d.ok(&[
        "run",
        "--name",
        "done",
        "busybox",
        "dd",
        "if=/dev/zero",
        "of=/written",
        "bs=1000",
        "count=300",
    ]);
    d.ok(&[
        "create", "--name", "kept", "--label", "keep=yes", "busybox", "true",
    ]);
    d.ok(&["create", "--name", "fresh", "busybox", "true"]);
    let pruned = d.http(
        "POST",
        "/containers/prune?filters=%7B%22label!%22%3A%5B%22keep%22%5D%7D",
        None,
    );
    let body = pruned.json().unwrap_or_default();
    assert_eq!(
        body["ContainersDeleted"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    let reclaimed = body["SpaceReclaimed"].as_i64().unwrap_or(0);
    assert!(
        (300_000..400_000).contains(&reclaimed),
        "what the pruned containers wrote: {body}"
    );
    let names = d.ok(&["ps", "-a", "--format", "{{.Names}}"]);
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    assert_eq!(names, ["kept", "stays"], "{}", d.diagnostics());
    d.ok(&["container", "prune", "--force"]);
    assert_eq!(
        d.ok(&["ps", "-a", "--format", "{{.Names}}"]).trim(),
        "stays"
    );
    assert_eq!(
        d.ok(&["port", "stays"]).trim(),
        "",
        "no published ports without a network"
    );
    d.ok(&[
        "run",
        "-d",
        "--name",
        "hostnet",
        "--network",
        "host",
        "busybox",
        "sleep",
        "1000",
    ]);
    assert_eq!(
        d.ok(&["port", "hostnet"]).trim(),
        "",
        "none on the host's network either"
    );
}

#[test]
fn rename_and_update_restart_edit_the_record_and_survive_a_restart() {
    let mut d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "before",
        "busybox",
        "sh",
        "-c",
        "while [ ! -f /tmp/go ]; do sleep 0.1; done; exit 3",
    ]);
    d.ok(&["run", "-d", "--name", "other", "busybox", "sleep", "1000"]);
    let since = holdfast_e2e::now_unix_nanos();
    d.ok(&["rename", "before", "after"]);
    d.fails_saying(
        "a taken name",
        &["rename", "after", "other"],
        "already in use",
    );
    d.ok(&["update", "--restart", "on-failure:2", "after"]);
    d.fails_saying(
        "update of a resource",
        &["update", "--pids-limit", "10", "after"],
        "not supported",
    );
    let events = d.events_since(since, &["--filter", "event=rename"]);
    assert!(
        events
            .iter()
            .any(|e| e["Actor"]["Attributes"]["oldName"] == "/before"
                && e["Actor"]["Attributes"]["name"] == "after"),
        "rename event: {events:?}\n{}",
        d.diagnostics()
    );
    // Recorded: a crash of holdfastd forgets neither.
    d.sigkill();
    d.restart();
    let v = d.inspect("after");
    assert_eq!(v["Name"], "/after", "{}", d.diagnostics());
    assert_eq!(
        v["HostConfig"]["RestartPolicy"]["Name"], "on-failure",
        "{v}"
    );
    assert_eq!(
        v["HostConfig"]["RestartPolicy"]["MaximumRetryCount"], 2,
        "{v}"
    );
    d.fails_saying("the old name", &["inspect", "before"], "No such");
    // The new policy holds for the next exit.
    d.ok(&["exec", "after", "touch", "/tmp/go"]);
    d.wait_until(
        "the updated policy restarted it twice, then let it be",
        || {
            let v = d.inspect("after");
            v["RestartCount"] == 2 && v["State"]["Status"] == "exited"
        },
    );
}

#[test]
fn cp_copies_both_ways_into_running_and_stopped_containers_and_never_out_of_them() {
    let d = Daemon::start();
    let host = tempfile::tempdir().expect("temp dir");
    let src = host.path().join("dir");
    std::fs::create_dir_all(src.join("sub")).expect("mkdir");
    std::fs::write(src.join("a.txt"), "hello\n").expect("write");
    std::fs::write(src.join("sub/b.txt"), "deep\n").expect("write");
    let src_arg = src.to_string_lossy().into_owned();
    let out_dir = host.path().join("out");
    std::fs::create_dir(&out_dir).expect("mkdir");
    let out = |name: &str| out_dir.join(name).to_string_lossy().into_owned();

    // Into and out of a running container.
    d.ok(&["run", "-d", "--name", "live", "busybox", "sleep", "1000"]);
    d.ok(&["cp", &src_arg, "live:/tmp/"]);
    assert_eq!(
        d.ok(&["exec", "live", "cat", "/tmp/dir/sub/b.txt"]),
        "deep\n"
    );
    d.ok(&["cp", "live:/tmp/dir", &out("dir")]);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("dir/a.txt")).unwrap_or_default(),
        "hello\n",
        "{}",
        d.diagnostics()
    );

    // A symlink planted in the container to a host-only file: copied as a
    // link, and followed (-L) only inside the container, where it leads nowhere.
    d.ok(&["exec", "live", "ln", "-s", "/etc/shadow", "/tmp/planted"]);
    d.ok(&["cp", "live:/tmp/planted", &out("planted")]);
    let meta = std::fs::symlink_metadata(out_dir.join("planted")).expect("copied");
    assert!(meta.file_type().is_symlink(), "copied as a link");
    d.fails_saying(
        "following the planted link",
        &["cp", "-L", "live:/tmp/planted", &out("shadow")],
        "Could not find",
    );
    assert!(
        !out_dir.join("shadow").exists(),
        "nothing of the host's came out"
    );

    // A created, never started container: its snapshot is mounted for the copy.
    d.ok(&["create", "--name", "cold", "busybox", "cat", "/seed.txt"]);
    d.ok(&["cp", &src.join("a.txt").to_string_lossy(), "cold:/seed.txt"]);
    d.ok(&["cp", "cold:/seed.txt", &out("seed.txt")]);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("seed.txt")).unwrap_or_default(),
        "hello\n"
    );
    let started = d.ok(&["start", "-a", "cold"]);
    assert_eq!(
        started, "hello\n",
        "the copy is in the container's own filesystem"
    );

    d.fails_saying(
        "a missing path",
        &["cp", "live:/no/such", &out("x")],
        "Could not find",
    );
    d.fails_saying("into a file", &["cp", &src_arg, "live:/etc/passwd/x"], "");

    // A directory is never replaced by a file nor a file by a directory
    // (the CLI's noOverwriteDirNonDir, dockerd's words), and nothing of
    // such a copy is written.
    d.ok(&["exec", "live", "mkdir", "-p", "/tmp/swap/was-dir"]);
    d.ok(&["exec", "live", "touch", "/tmp/swap/was-file"]);
    let swap = host.path().join("swap");
    std::fs::create_dir_all(swap.join("was-file")).expect("mkdir");
    std::fs::write(swap.join("was-dir"), "a file now\n").expect("write");
    let swap_arg = |name: &str| swap.join(name).to_string_lossy().into_owned();
    d.fails_saying(
        "a file onto a directory",
        &["cp", &swap_arg("was-dir"), "live:/tmp/swap/"],
        "cannot overwrite directory",
    );
    d.fails_saying(
        "a directory onto a file",
        &["cp", &swap_arg("was-file"), "live:/tmp/swap/"],
        "cannot overwrite non-directory",
    );
    assert_eq!(
        d.ok(&[
            "exec",
            "live",
            "sh",
            "-c",
            "test -d /tmp/swap/was-dir && test -f /tmp/swap/was-file && echo kept"
        ]),
        "kept\n",
        "{}",
        d.diagnostics()
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    assert!(
        !mounts.contains(&d.exec_root().join("cp").to_string_lossy().into_owned()),
        "no copy mount left behind:\n{mounts}"
    );
}

#[test]
fn export_writes_the_containers_own_filesystem() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "-d",
        "--name",
        "exp",
        "-v",
        "expv:/data",
        "busybox",
        "sh",
        "-c",
        "echo x > /data/in-volume; echo hi > /marker; sleep 1000",
    ]);
    d.wait_until("the marker is written", || {
        d.docker(&["exec", "exp", "cat", "/marker"]).stdout == "hi\n"
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let tarball = dir.path().join("exp.tar");
    d.ok(&["export", "-o", &tarball.to_string_lossy(), "exp"]);
    let listing = std::process::Command::new("tar")
        .arg("-tf")
        .arg(&tarball)
        .output()
        .expect("tar");
    let names = String::from_utf8_lossy(&listing.stdout).into_owned();
    let has = |n: &str| names.lines().any(|l| l.trim_end_matches('/') == n);
    assert!(
        has("marker") && has("bin/busybox"),
        "the container's files:\n{names}"
    );
    assert!(has("proc") && has("data"), "mount points stay, empty");
    assert!(
        !has("proc/cpuinfo") && !has("data/in-volume"),
        "what is mounted inside is not exported:\n{names}"
    );
}

#[test]
fn diff_lists_what_the_container_changed() {
    let d = Daemon::start();
    d.ok(&[
        "run",
        "--name",
        "changer",
        "busybox",
        "sh",
        "-c",
        "echo x >> /etc/passwd; rm /bin/ls; mkdir -p /new/d; touch /new/d/f",
    ]);
    assert_eq!(
        d.ok(&["diff", "changer"]),
        "C /bin\nD /bin/ls\nC /etc\nC /etc/passwd\nA /new\nA /new/d\nA /new/d/f\n",
        "{}",
        d.diagnostics()
    );
    // What the engine binds (/etc/hosts, /etc/hostname, /etc/resolv.conf)
    // is no change of the container's, as with dockerd.
    d.ok(&["run", "--name", "untouched", "busybox", "true"]);
    assert_eq!(d.ok(&["diff", "untouched"]), "", "{}", d.diagnostics());
}

#[test]
fn what_is_not_built_yet_answers_501_naming_it() {
    let d = Daemon::start();
    d.ok(&["run", "-d", "--name", "idle", "busybox", "sleep", "1000"]);
    // (network connect and disconnect are built: tests/network_connect.rs.)
    let r = d.http("POST", "/build", None);
    assert_eq!(r.status, 501, "POST /build: {r:?}");
    assert_eq!(d.state("idle")["Status"], "running", "nothing was touched");
}
