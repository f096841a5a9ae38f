//! What a default container may and may not do, probed from inside it with
//! busybox: it must not mount, unshare a user namespace, read the kernel's
//! memory or firmware, write /proc/sys, load a module, set the clock or add
//! a network link; it must still chown, bind port 80, drop to another uid
//! and ping. The same probe runs against dockerd (`CHAOS_ENGINE=dockerd`,
//! see bench/vs-dockerd.sh), whose table bench/vs-dockerd.md shows beside
//! holdfast's. `CHAOS_REPORT=DIR` writes `<engine>-security.json`.
//!
//! Not probed (no busybox applet can make the call): keyctl, bpf, ptrace of
//! another process.

use holdfast_e2e::engine::{Dockerd, Engine, Holdfast};
use serde_json::json;
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

#[test]
fn a_default_container_is_refused_what_dockerd_refuses_and_allowed_the_rest() {
    let engine = start_engine();
    let script: String = PROBES
        .iter()
        .map(|(name, _, cmd)| {
            format!("if ( {cmd} ) >/dev/null 2>&1; then echo '{name}: allowed'; else echo '{name}: refused'; fi\n")
        })
        .collect();
    let out = engine.docker(
        &[
            "run",
            "--rm",
            "--network",
            "none",
            "busybox",
            "sh",
            "-c",
            &script,
        ],
        Duration::from_secs(90),
    );
    assert!(
        out.success(),
        "the probe container failed: exit {}, stdout {:?}, stderr {:?}\n{}",
        out.code(),
        out.stdout,
        out.stderr,
        engine.diagnostics()
    );
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for (name, must, _) in PROBES {
        let got = out
            .stdout
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
            out.stdout
        );
    }
}
