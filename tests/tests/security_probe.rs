//! What a default container may and may not do, probed from inside it with
//! busybox: it must not mount, unshare a user namespace, read the kernel's
//! memory or firmware, write /proc/sys, load a module, set the clock or add
//! a network link; it must still chown, bind port 80, drop to another uid
//! and ping. The same probe runs against dockerd (`CHAOS_ENGINE=dockerd`,
//! see bench/vs-dockerd.sh), whose table bench/vs-dockerd.md shows beside
//! holdfast's. `CHAOS_REPORT=DIR` writes `<engine>-security.json`.
//!
//! Calls no busybox applet makes go through `tests/probe/syscall_probe.c`,
//! built static with the host's C compiler and bound in read-only at
//! `/probe`: `personality(ADDR_NO_RANDOMIZE)` (a call no capability guards,
//! refused only because dockerd's allowlist does not list that persona),
//! `keyctl` and `kcmp`. A second test gives the container `--cap-add
//! SYS_ADMIN`, `SYS_PTRACE` and `--privileged` and checks that each unlocks
//! what it unlocks under dockerd.
//!
//! Not probed: bpf (refused by capability as well), ptrace of another
//! process (dockerd's profile allows `ptrace` on kernels from 4.8 on; only
//! the capability set and Yama decide).

use holdfast_e2e::engine::{Dockerd, Engine, Holdfast};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `name|must|shell`: `must` is `refused` or `allowed`. Each line prints
/// `name allowed` or `name refused`. Setting the clock sets it to what it
/// already is, to the second, so that a container allowed to do it does no
/// harm.
const PROBES: &[(&str, &str, &str)] = &[
    (
        "mount",
        "refused",
        "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m",
    ),
    ("unshare a user namespace", "refused", "unshare -U true"),
    (
        "read /proc/kcore",
        "refused",
        "test \"$(head -c 16 /proc/kcore 2>/dev/null | wc -c)\" -gt 0",
    ),
    (
        "list /sys/firmware",
        "refused",
        "test -n \"$(ls -A /sys/firmware 2>/dev/null)\"",
    ),
    (
        "write /proc/sys",
        "refused",
        "echo 1 > /proc/sys/vm/drop_caches",
    ),
    (
        "load a module (init_module reaches the kernel)",
        "refused",
        "! insmod /bin/busybox 2>&1 | grep -q 'not permitted'",
    ),
    (
        "set the clock",
        "refused",
        // busybox date reports a refused settime but still exits 0
        "! date -s \"$(date '+%Y-%m-%d %H:%M:%S')\" 2>&1 | grep -q \"can't set\"",
    ),
    (
        "add a network link",
        "refused",
        "ip link add chaos0 type dummy",
    ),
    (
        "an unlisted persona (personality)",
        "refused",
        "/probe/probe personality",
    ),
    ("join a keyring (keyctl)", "refused", "/probe/probe keyctl"),
    ("compare processes (kcmp)", "refused", "/probe/probe kcmp"),
    (
        "chown",
        "allowed",
        "touch /tmp/f && chown 65534:65534 /tmp/f",
    ),
    (
        "bind port 80",
        "allowed",
        "httpd -p 127.0.0.1:80 -h /tmp && killall httpd",
    ),
    // start-stop-daemon starts nothing while a matching process runs; the
    // probe's sh is /bin/busybox too, so match on the user as well
    (
        "setuid to nobody",
        "allowed",
        "start-stop-daemon -S -u 65534 -c 65534:65534 -x /bin/busybox -- id -u | grep -qx 65534",
    ),
    ("ping (NET_RAW)", "allowed", "ping -c 1 -W 2 127.0.0.1"),
];

fn start_engine() -> Box<dyn Engine> {
    match std::env::var("CHAOS_ENGINE").as_deref() {
        Ok("dockerd") => Box::new(Dockerd::start()),
        Ok("holdfast") | Err(_) => Box::new(Holdfast::start()),
        Ok(other) => panic!("CHAOS_ENGINE={other}: want holdfast or dockerd"),
    }
}

/// `tests/probe/syscall_probe.c` built static into `dir/probe`.
fn build_probe(dir: &Path) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("probe/syscall_probe.c");
    let out = Command::new("cc")
        .args(["-static", "-O2", "-o"])
        .arg(dir.join("probe"))
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cc (gcc and libc6-dev, see scripts/deps): {e}"));
    assert!(
        out.status.success(),
        "cc -static {}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs each `(name, shell)` in one busybox container started with
/// `options`, the probe bound at `/probe`; `name: allowed` or `name:
/// refused` per line of its output.
fn probe(engine: &dyn Engine, options: &[&str], probes: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    build_probe(dir.path());
    let bind = format!("{}:/probe:ro", dir.path().display());
    let script: String = probes
        .iter()
        .map(|(name, cmd)| {
            format!("if ( {cmd} ) >/dev/null 2>&1; then echo '{name}: allowed'; else echo '{name}: refused'; fi\n")
        })
        .collect();
    let mut args = vec!["run", "--rm", "--network", "none", "-v", &bind];
    args.extend_from_slice(options);
    args.extend_from_slice(&["busybox", "sh", "-c", &script]);
    let out = engine.docker(&args, Duration::from_secs(90));
    // dockerd 20.10 cannot start `--privileged` on a kernel with
    // capabilities newer than it knows ("unable to apply caps"): its rows
    // read "not run", counted, never asserted.
    if !out.success() && engine.name() != "holdfast" {
        eprintln!("{} {options:?}: {}", engine.name(), out.stderr.trim());
        return String::new();
    }
    assert!(
        out.success(),
        "the probe container failed: exit {}, stdout {:?}, stderr {:?}\n{}",
        out.code(),
        out.stdout,
        out.stderr,
        engine.diagnostics()
    );
    out.stdout
}

#[test]
fn a_default_container_is_refused_what_dockerd_refuses_and_allowed_the_rest() {
    let engine = start_engine();
    let probes: Vec<(&str, &str)> = PROBES.iter().map(|(n, _, c)| (*n, *c)).collect();
    let stdout = probe(engine.as_ref(), &[], &probes);
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for (name, must, _) in PROBES {
        let got = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or("not run");
        if got != *must {
            wrong.push(format!("{name}: {got} (must be {must})"));
        }
        rows.push(json!({"probe": name, "must": must, "got": got}));
    }
    let report = json!({"engine": engine.name(), "rows": rows});
    eprintln!("security probe: {report}");
    if let Some(dir) = std::env::var_os("CHAOS_REPORT") {
        let path = std::path::Path::new(&dir).join(format!("{}-security.json", engine.name()));
        if let Err(e) = std::fs::write(&path, report.to_string()) {
            panic!("write {}: {e}", path.display());
        }
    }
    if engine.name() == "holdfast" {
        assert!(
            wrong.is_empty(),
            "a default holdfast container:\n{}\nprobe output:\n{}",
            wrong.join("\n"),
            stdout
        );
    }
}

/// What a capability unlocks in dockerd's profile, it unlocks here, and no
/// more: `SYS_ADMIN` mount and a mount namespace, `SYS_PTRACE` kcmp;
/// `--privileged` has no filter at all.
#[test]
fn capabilities_unlock_what_dockerd_unlocks() {
    let engine = start_engine();
    let probes = [
        ("mount", "mkdir -p /tmp/m && mount -t tmpfs none /tmp/m"),
        ("unshare a mount namespace", "unshare -m true"),
        ("kcmp", "/probe/probe kcmp"),
        ("personality", "/probe/probe personality"),
    ];
    /// Options, then what each of `probes` must be.
    type Case<'a> = (&'a [&'a str], [&'a str; 4]);
    let cases: [Case; 3] = [
        (
            &["--cap-add", "SYS_ADMIN"],
            ["allowed", "allowed", "refused", "refused"],
        ),
        (
            &["--cap-add", "SYS_PTRACE"],
            ["refused", "refused", "allowed", "refused"],
        ),
        (
            &["--privileged"],
            ["allowed", "allowed", "allowed", "allowed"],
        ),
    ];
    let mut wrong = Vec::new();
    for (options, must) in cases {
        let stdout = probe(engine.as_ref(), options, &probes);
        for ((name, _), must) in probes.iter().zip(must) {
            let got = stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .unwrap_or("not run");
            eprintln!("{} {options:?} {name}: {got}", engine.name());
            if got != must {
                wrong.push(format!("{options:?} {name}: {got} (must be {must})"));
            }
        }
    }
    if engine.name() == "holdfast" {
        assert!(
            wrong.is_empty(),
            "holdfast with added capabilities:\n{}",
            wrong.join("\n")
        );
    }
}
