//! holdfastd SIGKILLed at chosen points of what the core decides about
//! volumes, networks and commits: each call the test names is held (never
//! carried out, `HOLDFAST_TEST_HOLD_CALLS`) so that holdfastd dies while it
//! is in flight, after the core recorded it. The next holdfastd finishes
//! what was recorded: no volume, bridge or freeze is left behind, and
//! nothing a container still names is removed.

use holdfast_e2e::Daemon;
use holdfast_e2e::network::BridgeDaemon;
use std::path::PathBuf;

const HOLD: &str = "HOLDFAST_TEST_HOLD_CALLS";

fn volume_dir(d: &Daemon, name: &str) -> PathBuf {
    d.data_root().join("volumes").join(name)
}

fn volume_names(d: &Daemon) -> Vec<String> {
    d.ok(&["volume", "ls", "-q"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// SIGKILL, then a holdfastd with no call held.
fn crash_and_restart(d: &mut Daemon) {
    d.sigkill();
    d.set_env(&[]);
    d.restart();
}

#[test]
fn rm_v_cut_by_a_crash_removes_the_anonymous_volume_once_back() {
    let mut d = Daemon::start_with_env(&[], &[(HOLD, "volume_remove")]);
    d.ok(&[
        "run", "-d", "--name", "c1", "-v", "/data", "busybox", "sleep", "600",
    ]);
    let name = d.ok(&["inspect", "-f", "{{range .Mounts}}{{.Name}}{{end}}", "c1"]);
    let name = name.trim().to_owned();
    assert!(volume_dir(&d, &name).exists(), "{}", d.diagnostics());
    // The container goes; its volume's removal is recorded, then held.
    d.ok(&["rm", "-f", "-v", "c1"]);
    assert!(
        volume_dir(&d, &name).exists(),
        "held: not removed yet\n{}",
        d.diagnostics()
    );
    assert!(!volume_names(&d).contains(&name), "{}", d.diagnostics());
    crash_and_restart(&mut d);
    d.wait_until("the anonymous volume is removed", || {
        !volume_dir(&d, &name).exists()
    });
    assert!(volume_names(&d).is_empty(), "{}", d.diagnostics());
}

#[test]
fn a_prune_cut_by_a_crash_removes_what_it_chose_and_nothing_in_use() {
    let mut d = Daemon::start_with_env(&[], &[(HOLD, "volume_remove")]);
    d.ok(&["volume", "create", "free"]);
    d.ok(&["volume", "create", "kept"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "user",
        "-v",
        "kept:/data",
        "busybox",
        "sleep",
        "600",
    ]);
    let pid = d.pid_of("user");
    let prune = d.spawn_docker(&["volume", "prune", "--all", "-f"]);
    d.wait_until("the prune is recorded", || {
        !volume_names(&d).contains(&"free".to_owned())
    });
    assert!(volume_dir(&d, "free").exists(), "held: not removed yet");
    crash_and_restart(&mut d);
    drop(prune);
    d.wait_until("the pruned volume is removed", || {
        !volume_dir(&d, "free").exists()
    });
    assert_eq!(volume_names(&d), ["kept"], "{}", d.diagnostics());
    assert!(volume_dir(&d, "kept").join("_data").exists());
    // Its user runs on, untouched.
    assert_eq!(d.pid_of("user"), pid, "{}", d.diagnostics());
}

#[test]
fn a_network_rm_cut_by_a_crash_removes_the_network_once_back() {
    let mut net = BridgeDaemon::start_with_env(&[], &[(HOLD, "network_undefine")]);
    let d = &mut net.d;
    d.ok(&["network", "create", "--subnet", "10.197.3.0/24", "doomed"]);
    let id = d.ok(&["network", "inspect", "-f", "{{.Id}}", "doomed"]);
    let bridge = format!("hf-{}", &id.trim()[..12]);
    let listed = |d: &Daemon| d.ok(&["network", "ls", "--format", "{{.Name}}"]);
    let rm = d.spawn_docker(&["network", "rm", "doomed"]);
    d.wait_until("the removal is recorded", || {
        !listed(d).lines().any(|n| n == "doomed")
    });
    // A container cannot be put on it meanwhile.
    d.fails_saying(
        "a create on a network being removed",
        &["create", "--network", "doomed", "busybox", "true"],
        "doomed",
    );
    crash_and_restart(d);
    drop(rm);
    d.wait_until("its bridge is gone", || {
        !std::path::Path::new("/sys/class/net")
            .join(&bridge)
            .exists()
    });
    assert!(
        !listed(d).lines().any(|n| n == "doomed"),
        "{}",
        d.diagnostics()
    );
    // Its name is free again.
    d.ok(&["network", "create", "--subnet", "10.197.3.0/24", "doomed"]);
    d.ok(&["network", "rm", "doomed"]);
}

#[test]
fn a_commit_cut_by_a_crash_leaves_the_container_running_and_not_paused() {
    let mut d = Daemon::start_with_env(&[], &[(HOLD, "read_changes")]);
    d.ok(&["run", "-d", "--name", "c1", "busybox", "sleep", "600"]);
    let pid = d.pid_of("c1");
    let commit = d.spawn_docker(&["commit", "c1", "snapshot:1"]);
    // Frozen for the read (as dockerd), which is held.
    d.wait_until("the commit froze the container", || {
        d.state("c1")["Paused"].as_bool() == Some(true)
    });
    crash_and_restart(&mut d);
    drop(commit);
    d.wait_until("the restarted holdfastd thaws it", || {
        let s = d.state("c1");
        s["Paused"].as_bool() == Some(false) && s["Running"].as_bool() == Some(true)
    });
    assert_eq!(d.pid_of("c1"), pid, "the same process runs on");
    // Thawed for real: the cgroup lets it be signalled and stopped.
    d.ok(&["exec", "c1", "true"]);
    d.ok(&["stop", "-t", "1", "c1"]);
}

#[test]
fn a_copy_into_a_stopped_container_cut_by_a_crash_leaves_nothing_mounted() {
    use std::io::Write as _;
    let mut d = Daemon::start();
    d.ok(&["create", "--name", "c2", "busybox", "true"]);
    let id = d.ok(&["inspect", "-f", "{{.Id}}", "c2"]).trim().to_owned();
    let mounted = |id: &str| {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .any(|l| l.contains(&format!("/rootfs/{id}")))
    };
    // A copy into it whose client stalls halfway through its tar: the
    // snapshot is mounted for it while holdfastd dies.
    let mut copy =
        std::os::unix::net::UnixStream::connect(d.socket()).expect("connect to holdfastd");
    let head = "PUT /containers/c2/archive?path=/ HTTP/1.1\r\nHost: holdfast\r\n\
                Content-Type: application/x-tar\r\nContent-Length: 10240\r\n\r\n";
    copy.write_all(head.as_bytes()).expect("send the request");
    copy.write_all(&[0u8; 512]).expect("send part of the tar");
    d.wait_until("the copy mounted the snapshot", || mounted(&id));
    d.sigkill();
    drop(copy);
    d.restart();
    d.wait_until("the restarted holdfastd unmounts it", || !mounted(&id));
    d.ok(&["start", "c2"]);
    assert_eq!(d.ok(&["wait", "c2"]).trim(), "0", "{}", d.diagnostics());
}
