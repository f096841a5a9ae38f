//! A task create slower than the adapter's ordinary call deadline (10 s),
//! in runc and in the shim's start: the create is waited for with its own
//! patience (300 s), never cut nor made again, and the container starts.
//! And a
//! start whose containerd is killed under it: its client waits, and is
//! told it started once it has. And a run whose containerd hangs past
//! the create's bound: its client waits, and the run succeeds. The slow
//! program is a wrapper on
//! holdfastd's PATH (its containerd, the shims and runc inherit it) that
//! makes one call sleep past the deadline.

use holdfast_e2e::{BackgroundDocker, Daemon};
use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

/// Past a request's answer bound (30 s) and then some.
const PAST_BOUND: Duration = Duration::from_secs(40);

/// Whether `bg` is still unanswered after `wait` (looked at every half
/// second).
fn unanswered_for(bg: &mut BackgroundDocker, wait: Duration) -> bool {
    let since = std::time::Instant::now();
    while since.elapsed() < wait {
        if bg.try_wait().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    true
}

#[test]
fn a_runc_create_slower_than_the_call_deadline_still_starts() {
    slow_once("runc", "create");
}

#[test]
fn a_shim_start_slower_than_the_call_deadline_still_starts() {
    slow_once("containerd-shim-runc-v2", "start");
}

#[test]
fn a_start_whose_containerd_dies_under_it_keeps_its_client_waiting_and_starts() {
    // runc's start of the task is slow; the shim carries it out whether
    // containerd lives or not.
    let slow = Slowed::new("runc", "start");
    let d = Daemon::start_with_env(&["--bridge", "none"], &[("PATH", &slow.path)]);
    d.ok(&["create", "--name", "cut", "busybox", "sleep", "300"]);
    std::fs::write(&slow.gate, b"").expect("close the gate");
    let start = d.spawn_docker(&["start", "cut"]);
    d.wait_until("runc start has begun", || {
        std::fs::read_to_string(&slow.calls).is_ok_and(|c| c.contains("start"))
    });
    // containerd dies while the task is being started, and stays away
    // past the start's answer bound (30 s): the start is not told
    // "unreachable" (the shim starts the task anyway: a CLI told it failed
    // would see it run); its client waits.
    let mut start = start;
    let outage = d.hold_containerd_down();
    assert!(
        unanswered_for(&mut start, PAST_BOUND),
        "the start was answered while containerd was away\n{}",
        d.diagnostics()
    );
    // containerd back: its relist shows what the shim did, and the start
    // is answered by it.
    outage.end();
    let out = d.wait_exit("the start is answered", start);
    assert!(
        out.success(),
        "the start through a containerd crash: {}\n{}",
        out.stderr,
        d.diagnostics()
    );
    d.wait_until("cut runs", || d.state("cut")["Running"] == true);
    d.ok(&["rm", "-f", "cut"]);
}

#[test]
fn a_run_while_containerd_hangs_past_the_create_bound_waits_and_starts() {
    // A containerd too loaded to answer (frozen here) past the call
    // deadline (10 s) and past a create's answer bound (30 s): the
    // create's calls run on, the CLI waits, and the run succeeds once
    // containerd answers, as with dockerd; neither a failed run nor a
    // container rolled back under its client.
    let d = Daemon::start();
    let frozen = d.freeze_containerd();
    let mut run = d.spawn_docker(&["run", "-d", "--name", "hung", "busybox", "sleep", "300"]);
    if !unanswered_for(&mut run, PAST_BOUND) {
        d.thaw_containerd(frozen);
        let out = d.wait_exit("the run was answered", run);
        panic!(
            "the run was answered while containerd hung: {}{}\n{}",
            out.stdout,
            out.stderr,
            d.diagnostics()
        );
    }
    d.thaw_containerd(frozen);
    let out = d.wait_exit("the run is answered", run);
    assert!(
        out.success(),
        "a run through a containerd that hung: {}\n{}",
        out.stderr,
        d.diagnostics()
    );
    d.wait_until("hung runs", || d.state("hung")["Running"] == true);
    d.ok(&["rm", "-f", "hung"]);
}

/// A wrapper of `program` on a PATH of its own: while `gate` exists, the
/// next call of it with the argument `verb` takes 14 s (and removes the
/// gate); each such call is a line in `calls`.
struct Slowed {
    _dir: tempfile::TempDir,
    gate: std::path::PathBuf,
    calls: std::path::PathBuf,
    /// The PATH with the wrapper first.
    path: String,
}

impl Slowed {
    fn new(program: &str, verb: &str) -> Slowed {
        let dir = tempfile::Builder::new()
            .prefix("hf-slow-")
            .tempdir()
            .expect("a temporary dir");
        let real = which(program);
        let gate = dir.path().join("gate");
        let calls = dir.path().join("calls");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("create the wrapper's dir");
        let wrapper = bin.join(program);
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\n\
                 for a in \"$@\"; do\n\
                   if [ \"$a\" = {verb} ]; then echo {verb} >> {calls}; fi\n\
                   if [ \"$a\" = {verb} ] && rm {gate} 2>/dev/null; then sleep 14; break; fi\n\
                 done\n\
                 exec {real} \"$@\"\n",
                gate = gate.display(),
                calls = calls.display(),
            ),
        )
        .expect("write the wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the wrapper");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Slowed {
            _dir: dir,
            gate,
            calls,
            path,
        }
    }
}

/// Runs a container while the first call of `program` with the argument
/// `verb` takes 14 s, then restarts it at the usual speed.
fn slow_once(program: &str, verb: &str) {
    let slow = Slowed::new(program, verb);
    let (gate, calls) = (&slow.gate, &slow.calls);
    let d = Daemon::start_with_env(&["--bridge", "none"], &[("PATH", &slow.path)]);

    std::fs::write(gate, b"").expect("close the gate");
    let out = d.docker_within(
        &["run", "-d", "--name", "slow", "busybox", "sleep", "300"],
        Duration::from_secs(150),
    );
    assert!(
        out.success(),
        "docker run with a slow {program} {verb}: {}\n{}",
        out.stderr,
        d.diagnostics()
    );
    assert!(!gate.exists(), "the slow {program} {verb} never ran");
    d.wait_until("slow runs", || d.state("slow")["Running"] == true);
    // Waited for past the ordinary deadline, not taken as lost (a cut
    // is passed on to the shim, which kills the runc it runs: under load
    // that left bundles behind and killed a starting container's init).
    assert!(
        std::fs::read_to_string(d.log_path())
            .is_ok_and(|log| !log.contains("Tasks.Create: no answer within")),
        "the create was cut at the ordinary deadline\n{}",
        d.diagnostics()
    );
    // Left to finish in containerd, not cut halfway and made again (cut,
    // it can leave its bundle behind under load, and containerd then
    // refuses the container's creates).
    let made = std::fs::read_to_string(calls).unwrap_or_default();
    assert_eq!(
        made.lines().count(),
        1,
        "{program} {verb} ran more than once for one start\n{}",
        d.diagnostics()
    );
    d.ok(&["restart", "-t", "0", "slow"]);
    d.wait_until("slow runs again", || d.state("slow")["Running"] == true);
    d.ok(&["rm", "-f", "slow"]);
}

fn which(program: &str) -> String {
    let out = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .expect("run sh");
    let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!path.is_empty(), "{program} is not installed");
    path
}
