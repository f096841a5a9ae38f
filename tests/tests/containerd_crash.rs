//! The embedded containerd dies (SIGKILL; holdfastd's supervisor starts it
//! again), stays down for a while (a crash loop), or hangs (SIGSTOP) under
//! running containers: the containers are never signalled, exits during the
//! outage are recorded with their real code, requests made during the outage
//! are carried out once it ends, and a create during the outage fails fast
//! and leaves nothing behind.

use holdfast_e2e::procs::ProcessIdentity;
use holdfast_e2e::{BackgroundDocker, Daemon, TRAPPER, gated_exit, now_unix_nanos, open_gate};
use std::time::Duration;

/// Exits 0 on SIGTERM, saying so.
const POLITE: &str = "trap 'echo got-term; exit 0' TERM; while true; do sleep 0.1; done";
/// How fast a create must fail while containerd is unreachable.
const FAIL_FAST: Duration = Duration::from_secs(5);

/// Waits for `command` (such as `docker stop`), started in `bg` `when`
/// containerd could not answer: it must succeed naming the container `name`
/// once containerd answers, and `p`, that container's process, must be gone.
fn assert_carried_out(
    d: &Daemon,
    command: &str,
    when: &str,
    bg: BackgroundDocker,
    name: &str,
    p: ProcessIdentity,
) {
    let out = d.wait_exit(&format!("{command} issued {when} returns"), bg);
    d.assert_printed(
        &format!("{command} issued {when}"),
        &out,
        &format!("{name}\n"),
    );
    assert!(
        !p.is_alive(),
        "{command} answered but the process lives\n{}",
        d.diagnostics()
    );
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
    d.run_ticker("long", &[]);
    d.run_script("trapper", &[], TRAPPER);
    d.run_script("exiter", &[], &gated_exit(42));
    d.run_script("waiter", &[], &gated_exit(9));
    let keep = [d.process_of("long"), d.process_of("trapper")];
    let exiter = d.process_of("exiter");
    let waiter = d.process_of("waiter");
    // a wait in progress must ride out the outage
    let wait = d.spawn_docker(&["wait", "waiter"]);

    let old = d.kill_containerd();
    open_gate(exiter.pid);
    d.wait_until("exiter exited during the outage", || !exiter.is_alive());
    let new = d.wait_containerd_restarted(old);
    assert_ne!(old, new);

    d.wait_exited("exiter");
    let s = d.state("exiter");
    assert_eq!(s["ExitCode"], 42, "exiter: {s:#}\n{}", d.diagnostics());
    assert_eq!(d.ok(&["wait", "exiter"]), "42\n");

    for (name, p) in ["long", "trapper"].into_iter().zip(keep) {
        d.assert_still_running_with_pid(name, p, "after containerd's SIGKILL");
    }
    d.assert_never_signalled("trapper");

    // the wait started before the outage answers with the real exit
    assert!(waiter.is_alive(), "waiter died\n{}", d.diagnostics());
    open_gate(waiter.pid);
    let out = d.wait_exit("docker wait waiter returns", wait);
    d.assert_printed("docker wait across the outage", &out, "9\n");

    d.assert_one_die(t0, "exiter", "42");
    d.assert_one_die(t0, "waiter", "9");

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
    d.run_script("victim", &[], POLITE);
    d.run_detached("doomed", &["busybox", "sleep", "1000"]);
    d.run_script("exiter", &[], &gated_exit(42));
    let victim = d.process_of("victim");
    let doomed = d.process_of("doomed");
    let exiter = d.process_of("exiter");
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
        remove.try_wait().is_none_or(|s| !s.success()),
        "docker rm -f succeeded while containerd was down\n{}",
        d.diagnostics()
    );
    assert!(
        stop.try_wait().is_none_or(|s| !s.success()),
        "docker stop succeeded while containerd was down\n{}",
        d.diagnostics()
    );

    let kills = outage.end();
    assert!(kills >= 1);
    assert_carried_out(
        &d,
        "docker stop",
        "during the outage",
        stop,
        "victim",
        victim,
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
    assert_carried_out(
        &d,
        "docker rm -f",
        "during the outage",
        remove,
        "doomed",
        doomed,
    );
    let before: Vec<String> = before.into_iter().filter(|id| *id != doomed_id).collect();

    // the exit during the outage, learned from the relist
    d.wait_exited("exiter");
    assert_eq!(d.state("exiter")["ExitCode"], 42, "{}", d.diagnostics());
    d.assert_one_die(t0, "exiter", "42");

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
    d.run_script("victim", &[], POLITE);
    d.run_script("bystander", &[], TRAPPER);
    let victim = d.process_of("victim");
    let bystander = d.process_of("bystander");

    let frozen = d.freeze_containerd();
    let stop = d.spawn_docker(&["stop", "-t", "5", "victim"]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        victim.is_alive(),
        "victim died while containerd was frozen\n{}",
        d.diagnostics()
    );
    d.thaw_containerd(frozen);

    assert_carried_out(
        &d,
        "docker stop",
        "while containerd hung",
        stop,
        "victim",
        victim,
    );
    assert_eq!(d.state("victim")["ExitCode"], 0, "{}", d.diagnostics());
    assert_eq!(
        d.logs("victim").0.matches("got-term").count(),
        1,
        "{}",
        d.diagnostics()
    );
    d.assert_still_running_with_pid("bystander", bystander, "after containerd hung");
    d.assert_never_signalled("bystander");
    d.ok(&["rm", "-f", "victim", "bystander"]);
}
