//! The embedded containerd dies (SIGKILL; holdfastd's supervisor starts it
//! again), stays down for a while (a crash loop), or hangs (SIGSTOP) under
//! running containers: the containers are never signalled, exits during the
//! outage are recorded with their real code, requests made during the outage
//! are carried out once it ends, and a create during the outage fails fast
//! and leaves nothing behind.

use holdfast_e2e::procs::ProcessIdentity;
use holdfast_e2e::{Daemon, now_unix_nanos};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::Child;
use std::time::Duration;

const TICKER: &str = "while true; do echo tick; sleep 0.2; done";
const TRAPPER: &str = "trap 'echo got-term' TERM; trap 'echo got-usr1' USR1; \
    trap 'echo got-int' INT; trap 'echo got-hup' HUP; \
    while true; do echo tick; sleep 0.2; done";
/// Exits 0 on SIGTERM, saying so.
const POLITE: &str = "trap 'echo got-term; exit 0' TERM; while true; do sleep 0.1; done";
/// How fast a create must fail while containerd is unreachable.
const FAIL_FAST: Duration = Duration::from_secs(5);

fn gated_exit(code: i32) -> String {
    format!("while [ ! -f /tmp/go ]; do sleep 0.1; done; rm /tmp/go; exit {code}")
}

fn open_gate(pid: u32) {
    let gate = PathBuf::from(format!("/proc/{pid}/root/tmp/go"));
    std::fs::write(&gate, b"go").unwrap_or_else(|e| panic!("write {}: {e}", gate.display()));
}

fn identity(d: &Daemon, name: &str) -> ProcessIdentity {
    ProcessIdentity::of(d.pid_of(name)).unwrap_or_else(|| panic!("{name} has no live process"))
}

/// Waits for a background docker command; (success, stdout, stderr).
fn finish(d: &Daemon, what: &str, mut child: Child) -> (bool, String, String) {
    d.wait_until(what, || {
        child.try_wait().expect("wait for docker").is_some()
    });
    let status = child.wait().expect("docker status");
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    (status.success(), out, err)
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn info_truth(d: &Daemon) -> String {
    let out = d.docker(&["info", "--format", "{{json .}}"]);
    let info: serde_json::Value = serde_json::from_str(&out.stdout).unwrap_or_default();
    format!(
        "{} {} {}",
        info["SystemStatus"], info["Warnings"], info["Labels"]
    )
    .to_lowercase()
}

#[test]
fn sigkill_of_containerd_signals_nothing_and_loses_no_exit() {
    let d = Daemon::start();
    let t0 = now_unix_nanos();
    d.ok(&["run", "-d", "--name", "long", "busybox", "sh", "-c", TICKER]);
    d.ok(&[
        "run", "-d", "--name", "trapper", "busybox", "sh", "-c", TRAPPER,
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "exiter",
        "busybox",
        "sh",
        "-c",
        &gated_exit(42),
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "waiter",
        "busybox",
        "sh",
        "-c",
        &gated_exit(9),
    ]);
    let keep = [identity(&d, "long"), identity(&d, "trapper")];
    let exiter = identity(&d, "exiter");
    let waiter = identity(&d, "waiter");
    // a wait in progress must ride out the outage
    let wait = d.spawn_docker(&["wait", "waiter"]);

    let old = d.kill_containerd();
    open_gate(exiter.pid);
    d.wait_until("exiter exited during the outage", || !exiter.is_alive());
    let new = d.wait_containerd_restarted(old);
    assert_ne!(old, new);

    d.wait_until("exiter is seen exited", || {
        d.state("exiter")["Status"] == "exited"
    });
    let s = d.state("exiter");
    assert_eq!(s["ExitCode"], 42, "exiter: {s:#}\n{}", d.diagnostics());
    assert_eq!(d.ok(&["wait", "exiter"]), "42\n");

    for (name, p) in ["long", "trapper"].iter().zip(keep) {
        assert!(
            p.is_alive(),
            "{name} died with containerd\n{}",
            d.diagnostics()
        );
        assert_eq!(
            d.pid_of(name),
            p.pid,
            "{name} keeps its pid\n{}",
            d.diagnostics()
        );
    }
    let (out, err) = d.logs("trapper");
    assert!(
        !out.contains("got-") && !err.contains("got-"),
        "trapper was signalled:\n{out}{err}\n{}",
        d.diagnostics()
    );

    // the wait started before the outage answers with the real exit
    assert!(waiter.is_alive(), "waiter died\n{}", d.diagnostics());
    open_gate(waiter.pid);
    let (ok, out, err) = finish(&d, "docker wait waiter returns", wait);
    assert!(
        ok && out == "9\n",
        "docker wait across the outage: ok={ok} stdout={out:?} stderr={err:?}\n{}",
        d.diagnostics()
    );

    for (name, code) in [("exiter", "42"), ("waiter", "9")] {
        let dies = d.events_since(
            t0,
            &[
                "--filter",
                &format!("container={name}"),
                "--filter",
                "event=die",
            ],
        );
        assert_eq!(
            dies.len(),
            1,
            "one die for {name}: {dies:?}\n{}",
            d.diagnostics()
        );
        assert_eq!(
            dies[0]["Actor"]["Attributes"]["exitCode"],
            code,
            "{}",
            d.diagnostics()
        );
    }

    // usable again, and holdfast's record matches containerd's
    assert_eq!(d.ok(&["run", "--rm", "busybox", "echo", "back"]), "back\n");
    assert_eq!(
        sorted(d.containerd_container_ids()),
        sorted(d.container_ids(true)),
        "containerd and holdfast disagree on the containers\n{}",
        d.diagnostics()
    );
    d.ok(&["rm", "-f", "long", "trapper", "exiter", "waiter"]);
}

#[test]
fn during_an_outage_reads_work_creates_fail_fast_and_a_stop_is_carried_out_after() {
    let d = Daemon::start();
    d.ok(&[
        "run", "-d", "--name", "victim", "busybox", "sh", "-c", POLITE,
    ]);
    d.ok(&["run", "-d", "--name", "doomed", "busybox", "sleep", "1000"]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "exiter",
        "busybox",
        "sh",
        "-c",
        &gated_exit(42),
    ]);
    let victim = identity(&d, "victim");
    let doomed = identity(&d, "doomed");
    let exiter = identity(&d, "exiter");
    let doomed_id = d.inspect("doomed")["Id"].as_str().unwrap_or("").to_owned();
    let before = d.container_ids(true);
    let t0 = now_unix_nanos();

    let outage = d.hold_containerd_down();
    // an exit nobody can report while containerd is down
    open_gate(exiter.pid);
    d.wait_until("exiter exited during the outage", || !exiter.is_alive());

    // reads keep working from the core
    assert_eq!(d.container_ids(false), before, "{}", d.diagnostics());
    assert_eq!(d.state("victim")["Running"], true, "{}", d.diagnostics());
    d.logs("victim");
    d.wait_until("docker info says containerd is unreachable", || {
        info_truth(&d).contains("unreachable")
    });

    // creates fail fast and leave nothing behind
    for cmd in [
        vec!["run", "-d", "--name", "during", "busybox", "true"],
        vec!["create", "--name", "during2", "busybox", "true"],
        vec!["run", "--rm", "busybox", "echo", "nope"],
    ] {
        let out = d.docker(&cmd);
        assert!(
            !out.success() && out.elapsed < FAIL_FAST,
            "docker {cmd:?} during the outage: exit {} after {:?} (want a failure within {FAIL_FAST:?})\n\
             stdout {:?}\nstderr {:?}\n{}",
            out.code(),
            out.elapsed,
            out.stdout,
            out.stderr,
            d.diagnostics()
        );
    }
    assert_eq!(
        d.container_ids(true),
        before,
        "a failed create left a container\n{}",
        d.diagnostics()
    );

    // a stop and a forced remove asked during the outage
    let mut stop = d.spawn_docker(&["stop", "-t", "2", "victim"]);
    let mut remove = d.spawn_docker(&["rm", "-f", "doomed"]);
    // give the requests time to reach holdfastd, then check that they
    // could not have been carried out yet
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        victim.is_alive() && doomed.is_alive(),
        "a container died during the outage\n{}",
        d.diagnostics()
    );
    assert!(
        remove
            .try_wait()
            .expect("wait")
            .is_none_or(|s| !s.success()),
        "docker rm -f succeeded while containerd was down\n{}",
        d.diagnostics()
    );
    assert!(
        stop.try_wait().expect("wait").is_none_or(|s| !s.success()),
        "docker stop succeeded while containerd was down\n{}",
        d.diagnostics()
    );

    let kills = outage.end();
    assert!(kills >= 1);
    let (ok, out, err) = finish(&d, "docker stop returns after the outage", stop);
    assert!(
        ok && out == "victim\n",
        "docker stop issued during the outage: ok={ok} stdout={out:?} stderr={err:?}\n{}",
        d.diagnostics()
    );
    assert!(
        !victim.is_alive(),
        "stop answered but the process lives\n{}",
        d.diagnostics()
    );
    let s = d.state("victim");
    assert_eq!(
        (s["Status"].as_str(), s["ExitCode"].as_i64()),
        (Some("exited"), Some(0)),
        "victim exits 0 on SIGTERM: {s:#}\n{}",
        d.diagnostics()
    );
    let terms = d.logs("victim").0.matches("got-term").count();
    assert_eq!(
        terms,
        1,
        "SIGTERM delivered exactly once\n{}",
        d.diagnostics()
    );
    let (ok, out, err) = finish(&d, "docker rm -f returns after the outage", remove);
    assert!(
        ok && out == "doomed\n",
        "docker rm -f issued during the outage: ok={ok} stdout={out:?} stderr={err:?}\n{}",
        d.diagnostics()
    );
    assert!(
        !doomed.is_alive(),
        "rm -f answered but the process lives\n{}",
        d.diagnostics()
    );
    let before: Vec<String> = before.into_iter().filter(|id| *id != doomed_id).collect();

    // the exit during the outage, learned from the relist
    d.wait_until("exiter is seen exited", || {
        d.state("exiter")["Status"] == "exited"
    });
    assert_eq!(d.state("exiter")["ExitCode"], 42, "{}", d.diagnostics());
    let dies = d.events_since(
        t0,
        &["--filter", "container=exiter", "--filter", "event=die"],
    );
    assert_eq!(
        dies.len(),
        1,
        "one die for exiter: {dies:?}\n{}",
        d.diagnostics()
    );
    assert_eq!(
        dies[0]["Actor"]["Attributes"]["exitCode"],
        "42",
        "{}",
        d.diagnostics()
    );

    // nothing half-created, in holdfast or in containerd
    assert_eq!(d.ok(&["run", "--rm", "busybox", "echo", "back"]), "back\n");
    assert_eq!(d.container_ids(true), before, "{}", d.diagnostics());
    assert_eq!(
        sorted(d.containerd_container_ids()),
        sorted(before.clone()),
        "containerd holds containers holdfast does not list\n{}",
        d.diagnostics()
    );
    d.wait_until("docker info no longer says unreachable", || {
        !info_truth(&d).contains("unreachable")
    });
    d.ok(&["rm", "victim", "exiter"]);
}

#[test]
fn a_stop_while_containerd_hangs_is_carried_out_once_it_answers() {
    let d = Daemon::start();
    d.ok(&[
        "run", "-d", "--name", "victim", "busybox", "sh", "-c", POLITE,
    ]);
    d.ok(&[
        "run",
        "-d",
        "--name",
        "bystander",
        "busybox",
        "sh",
        "-c",
        TRAPPER,
    ]);
    let victim = identity(&d, "victim");
    let bystander = identity(&d, "bystander");

    let frozen = d.freeze_containerd();
    let stop = d.spawn_docker(&["stop", "-t", "5", "victim"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        victim.is_alive(),
        "victim died while containerd was frozen\n{}",
        d.diagnostics()
    );
    d.thaw_containerd(frozen);

    let (ok, out, err) = finish(&d, "docker stop returns after containerd answers", stop);
    assert!(
        ok && out == "victim\n",
        "docker stop issued while containerd hung: ok={ok} stdout={out:?} stderr={err:?}\n{}",
        d.diagnostics()
    );
    assert!(!victim.is_alive(), "{}", d.diagnostics());
    assert_eq!(d.state("victim")["ExitCode"], 0, "{}", d.diagnostics());
    assert_eq!(
        d.logs("victim").0.matches("got-term").count(),
        1,
        "{}",
        d.diagnostics()
    );
    assert!(bystander.is_alive(), "{}", d.diagnostics());
    assert_eq!(d.pid_of("bystander"), bystander.pid);
    let (out, err) = d.logs("bystander");
    assert!(
        !out.contains("got-") && !err.contains("got-"),
        "bystander was signalled\n{out}{err}"
    );
    d.ok(&["rm", "-f", "victim", "bystander"]);
}
