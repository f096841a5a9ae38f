//! Restart policies through the CLI: always, on-failure:N (counts and
//! backoff), unless-stopped, and what a daemon restart does with each.

use holdfast_e2e::procs::{pid_alive, signal};
use holdfast_e2e::{Daemon, now_unix_nanos};
use serde_json::Value;
use std::time::Duration;

/// Long enough to see a restart the policy forbids, were there one: several
/// times the first backoff steps (100 ms, 200 ms, 400 ms).
const STAYS_DOWN: Duration = Duration::from_secs(2);

fn restart_count(d: &Daemon, name: &str) -> u64 {
    d.inspect(name)["RestartCount"].as_u64().unwrap_or(u64::MAX)
}

fn status(d: &Daemon, name: &str) -> String {
    d.state(name)["Status"].as_str().unwrap_or("?").to_owned()
}

fn actions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["Action"].as_str().unwrap_or("?").to_owned())
        .collect()
}

/// Kills a container's process from the host: a crash the engine did not ask for.
fn crash(d: &Daemon, name: &str) -> u32 {
    let pid = d.pid_of(name);
    signal(pid, "KILL");
    d.wait_until("the crashed process is gone", || !pid_alive(pid));
    pid
}

#[test]
fn always_restarts_after_every_exit_until_stopped() {
    let d = Daemon::start();
    let t0 = now_unix_nanos();
    d.run_script(
        "al1",
        &["--restart", "always"],
        "echo run; sleep 0.3; exit 1",
    );
    // while it cycles, what inspect shows is always true: running (with a
    // start time and a pid) or restarting (dockerd's state while a policy
    // restart waits out its backoff); never exited, which would mean done.
    d.assert_inspect_holds_for(
        "al1",
        "a cycling always container shows running or restarting",
        Duration::from_millis(1500),
        |v| {
            let s = &v["State"];
            match s["Status"].as_str() {
                Some("running") => {
                    s["Running"] == true
                        && s["Pid"].as_u64().unwrap_or(0) > 0
                        && s["StartedAt"] != "0001-01-01T00:00:00Z"
                }
                Some("restarting") => s["Restarting"] == true,
                _ => false,
            }
        },
    );
    d.wait_until("always restarted a three times", || {
        restart_count(&d, "al1") >= 3
    });
    let runs = d.logs("al1").0.lines().filter(|l| *l == "run").count();
    assert!(
        runs >= 3,
        "every run logs into the same log: {runs} runs\n{}",
        d.diagnostics()
    );
    let dies = d.die_events(t0, "al1");
    assert!(dies.len() >= 3, "{dies:?}");
    for e in &dies {
        assert_eq!(
            e["Actor"]["Attributes"]["exitCode"],
            "1",
            "{e}\n{}",
            d.diagnostics()
        );
    }

    // a manual stop holds, whether it finds a run or a backoff
    assert_eq!(
        d.ok(&["stop", "-t", "1", "al1"]),
        "al1\n",
        "{}",
        d.diagnostics()
    );
    let count = restart_count(&d, "al1");
    d.assert_inspect_holds_for(
        "al1",
        "al1 stays stopped after docker stop",
        STAYS_DOWN,
        |v| v["State"]["Status"] == "exited" && v["RestartCount"] == count,
    );

    // a crash of a long-running one: restarted, new process
    d.run_ticker("al2", &["--restart", "always"]);
    let old = crash(&d, "al2");
    d.wait_running_again("al2", old, "always restarted b after its crash");
    assert_eq!(restart_count(&d, "al2"), 1, "{}", d.diagnostics());
    d.assert_one_die(t0, "al2", "137");
    d.ok(&["rm", "-f", "al1", "al2"]);
}

#[test]
fn on_failure_gives_up_after_its_count_with_growing_backoff() {
    let d = Daemon::start();
    let t0 = now_unix_nanos();
    d.run_script(
        "onfail",
        &["--restart", "on-failure:2"],
        "echo attempt; exit 5",
    );
    d.wait_until("on-failure:2 gave up: exited after 2 restarts", || {
        let v = d.inspect("onfail");
        v["State"]["Status"] == "exited" && v["RestartCount"] == 2
    });
    d.assert_inspect_holds_for(
        "onfail",
        "onfail stays down with its count and code",
        STAYS_DOWN,
        |v| {
            v["State"]["Status"] == "exited"
                && v["RestartCount"] == 2
                && v["State"]["ExitCode"] == 5
        },
    );
    assert_eq!(d.ok(&["wait", "onfail"]), "5\n", "{}", d.diagnostics());
    let attempts = d
        .logs("onfail")
        .0
        .lines()
        .filter(|l| *l == "attempt")
        .count();
    assert_eq!(attempts, 3, "one run and two restarts\n{}", d.diagnostics());

    let events = d.events_since(
        t0,
        &[
            "--filter",
            "container=onfail",
            "--filter",
            "event=start",
            "--filter",
            "event=die",
        ],
    );
    let acts = actions(&events);
    assert_eq!(
        acts,
        ["start", "die", "start", "die", "start", "die"],
        "{}",
        d.diagnostics()
    );
    for e in events.iter().filter(|e| e["Action"] == "die") {
        assert_eq!(e["Actor"]["Attributes"]["exitCode"], "5", "{e}");
    }
    // the backoff: 100 ms, then 200 ms (dockerd's numbers), so each gap from
    // a die to the next start is at least that. (Whether the second gap is
    // longer than the first is not checked: each gap also holds the task's
    // creation, which on a loaded machine varies by more than 100 ms.)
    let t: Vec<i64> = events
        .iter()
        .map(|e| e["timeNano"].as_i64().unwrap_or(0))
        .collect();
    let gap1 = t[2] - t[1];
    let gap2 = t[4] - t[3];
    assert!(
        gap1 >= 90_000_000 && gap2 >= 180_000_000,
        "restart backoff gaps {gap1} ns then {gap2} ns\n{}",
        d.diagnostics()
    );

    // success is not a failure: no restart
    d.run_detached("fine", &["--restart", "on-failure:2", "busybox", "true"]);
    assert_eq!(d.ok(&["wait", "fine"]), "0\n");
    d.assert_inspect_holds_for("fine", "a clean exit is not restarted", STAYS_DOWN, |v| {
        v["State"]["Status"] == "exited" && v["RestartCount"] == 0
    });
    d.ok(&["rm", "onfail", "fine"]);
}

#[test]
fn unless_stopped_restarts_after_a_crash_and_stays_down_after_stop() {
    let d = Daemon::start();
    d.run_ticker("unless", &["--restart", "unless-stopped"]);
    let old = crash(&d, "unless");
    d.wait_running_again("unless", old, "unless-stopped restarted u after its crash");
    assert_eq!(restart_count(&d, "unless"), 1, "{}", d.diagnostics());

    assert_eq!(d.ok(&["stop", "-t", "1", "unless"]), "unless\n");
    d.assert_inspect_holds_for(
        "unless",
        "unless stays down after docker stop",
        STAYS_DOWN,
        |v| v["State"]["Status"] == "exited" && v["RestartCount"] == 1,
    );
    assert_eq!(d.ok(&["start", "unless"]), "unless\n");
    let pid = d.pid_of("unless");
    assert!(pid_alive(pid));
    d.ok(&["rm", "-f", "unless"]);
}

/// A daemon restart starts nothing a user stopped, whatever the policy.
/// dockerd starts stopped `always` containers when it starts, because for
/// dockerd a daemon start usually follows a reboot. For holdfast a restart
/// of holdfastd is routine and never touches containers (live restore is
/// the only mode), so starting one the user stopped would be a restart no
/// user and no exit asked for.
#[test]
fn a_daemon_restart_starts_nothing_a_user_stopped() {
    let mut d = Daemon::start();
    for (name, policy) in [("al", "always"), ("us", "unless-stopped"), ("no", "no")] {
        d.run_ticker(name, &["--restart", policy]);
        assert_eq!(d.ok(&["stop", "-t", "1", name]), format!("{name}\n"));
    }
    let exit = d.sigterm_and_wait();
    assert!(
        exit.success(),
        "holdfastd exited {exit}\n{}",
        d.diagnostics()
    );
    d.restart();
    d.wait_until("the restarted daemon answers for all three", || {
        ["al", "us", "no"]
            .iter()
            .all(|name| d.code(&["inspect", name]) == 0)
    });
    d.assert_holds_for(
        "every user-stopped container stays stopped",
        STAYS_DOWN,
        || {
            status(&d, "al") == "exited"
                && status(&d, "us") == "exited"
                && status(&d, "no") == "exited"
        },
    );
    d.ok(&["rm", "-f", "al", "us", "no"]);
}
