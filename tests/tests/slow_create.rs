//! A task create slower than the adapter's call deadline (10 s), in runc
//! and in the shim's start: the deadline reaches the core as a call whose
//! answer is lost, never as a failure of the container, and the container
//! starts once the relist that follows finds what containerd made. The
//! slow program is a wrapper on holdfastd's PATH (its containerd, the
//! shims and runc inherit it) that makes one call sleep past the deadline.

use holdfast_e2e::Daemon;
use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

#[test]
fn a_runc_create_slower_than_the_call_deadline_still_starts() {
    slow_once("runc", "create");
}

#[test]
fn a_shim_start_slower_than_the_call_deadline_still_starts() {
    slow_once("containerd-shim-runc-v2", "start");
}

/// Runs a container while the first call of `program` with the argument
/// `verb` takes 14 s, then restarts it at the usual speed.
fn slow_once(program: &str, verb: &str) {
    let dir = tempfile::Builder::new()
        .prefix("hf-slow-")
        .tempdir()
        .expect("a temporary dir");
    let real = which(program);
    let gate = dir.path().join("gate");
    // A line per call of `program` with `verb`.
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
    let d = Daemon::start_with_env(&["--bridge", "none"], &[("PATH", &path)]);

    std::fs::write(&gate, b"").expect("close the gate");
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
    assert!(
        std::fs::read_to_string(d.log_path()).is_ok_and(|log| log.contains("no answer within")),
        "the create never outlasted its deadline\n{}",
        d.diagnostics()
    );
    // The create past its deadline was left to finish in containerd, not
    // cut halfway and made again (cut, it can leave its bundle behind
    // under load, and containerd then refuses the container's creates).
    let made = std::fs::read_to_string(&calls).unwrap_or_default();
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
