//! Steps the suites share on containers: the busybox scripts they run (a
//! ticker, a trapper, a gated exit), a container's process for good, and the
//! checks made after a crash or an outage: the same process still runs, no
//! signal reached it, one `die` with the real exit code, running again under
//! a new pid.

use crate::Daemon;
use crate::procs::ProcessIdentity;
use serde_json::Value;
use std::path::PathBuf;

/// Prints `tick` five times a second, forever; sh as pid 1 has no handler
/// for TERM, so only SIGKILL ends it.
pub const TICKER: &str = "while true; do echo tick; sleep 0.2; done";

/// Writes a line for every signal that reaches it (`got-term`, `got-usr1`,
/// ...); the kernel delivers none of these to a pid 1 without a handler, so
/// this one has handlers. See [`Daemon::assert_never_signalled`].
pub const TRAPPER: &str = "trap 'echo got-term' TERM; trap 'echo got-usr1' USR1; \
    trap 'echo got-int' INT; trap 'echo got-hup' HUP; \
    while true; do echo tick; sleep 0.2; done";

/// A script that exits with `code` once the test creates /tmp/go in its root
/// filesystem (consuming it, so that a restarted run waits again). See
/// [`open_gate`].
pub fn gated_exit(code: i32) -> String {
    format!("while [ ! -f /tmp/go ]; do sleep 0.1; done; rm /tmp/go; exit {code}")
}

/// Opens the gate of a [`gated_exit`] container from the host, through its
/// process `pid`.
pub fn open_gate(pid: u32) {
    let gate = PathBuf::from(format!("/proc/{pid}/root/tmp/go"));
    std::fs::write(&gate, b"go").unwrap_or_else(|e| panic!("write {}: {e}", gate.display()));
}

impl Daemon {
    /// `docker run -d --name NAME ARGS...` (ARGS: options, image, command);
    /// asserts exit 0; stdout, the id.
    pub fn run_detached(&self, name: &str, args: &[&str]) -> String {
        let mut all = vec!["run", "-d", "--name", name];
        all.extend_from_slice(args);
        self.ok(&all)
    }

    /// `docker run -d --name NAME OPTIONS... busybox sh -c SCRIPT`; asserts
    /// exit 0; stdout, the id.
    pub fn run_script(&self, name: &str, options: &[&str], script: &str) -> String {
        let mut args = options.to_vec();
        args.extend_from_slice(&["busybox", "sh", "-c", script]);
        self.run_detached(name, &args)
    }

    /// [`Daemon::run_script`] of the [`TICKER`].
    pub fn run_ticker(&self, name: &str, options: &[&str]) -> String {
        self.run_script(name, options, TICKER)
    }

    /// Asserts that `docker ps -a` lists no container; `why` says why there
    /// must be none.
    pub fn assert_no_containers(&self, why: &str) {
        let left = self.container_ids(true);
        assert!(
            left.is_empty(),
            "{why}, yet docker ps -a lists {left:?}\n{}",
            self.diagnostics()
        );
    }

    /// The process of the running container `name`, for good (pid and start
    /// time); panics with the logs when it has none.
    pub fn process_of(&self, name: &str) -> ProcessIdentity {
        ProcessIdentity::of(self.pid_of(name))
            .unwrap_or_else(|| panic!("{name} has no live process\n{}", self.diagnostics()))
    }

    /// Asserts that `p`, the process `name` had before `event` (such as
    /// "after holdfastd's restart"), still runs and is still the pid inspect
    /// shows: the container was not touched.
    pub fn assert_still_running_with_pid(&self, name: &str, p: ProcessIdentity, event: &str) {
        assert!(
            p.is_alive(),
            "{name}'s process {} is gone {event}\n{}",
            p.pid,
            self.diagnostics()
        );
        assert_eq!(
            self.pid_of(name),
            p.pid,
            "{name} keeps its pid {event}\n{}",
            self.diagnostics()
        );
    }

    /// Asserts that the logs of `name`, a [`TRAPPER`], show no signal.
    pub fn assert_never_signalled(&self, name: &str) {
        let (out, err) = self.logs(name);
        assert!(
            !out.contains("got-") && !err.contains("got-"),
            "{name} was signalled:\n{out}{err}\n{}",
            self.diagnostics()
        );
    }

    /// Waits until inspect shows `name` exited.
    pub fn wait_exited(&self, name: &str) {
        self.wait_until(&format!("{name} is seen exited"), || {
            self.state(name)["Status"] == "exited"
        });
    }

    /// Waits until `name` runs again under a pid other than `old_pid` (its
    /// restart policy started a new run); `what` names the wait.
    pub fn wait_running_again(&self, name: &str, old_pid: u32, what: &str) {
        self.wait_until(what, || {
            let s = self.state(name);
            s["Running"] == true && s["Pid"].as_u64().is_some_and(|p| p as u32 != old_pid)
        });
    }

    /// The `die` events of `name` from `since_nanos` until now.
    pub fn die_events(&self, since_nanos: i128, name: &str) -> Vec<Value> {
        self.events_since(
            since_nanos,
            &[
                "--filter",
                &format!("container={name}"),
                "--filter",
                "event=die",
            ],
        )
    }

    /// Asserts that `name` died exactly once since `since_nanos`, and with
    /// `exit_code`: no exit lost, none reported twice.
    pub fn assert_one_die(&self, since_nanos: i128, name: &str, exit_code: &str) {
        let dies = self.die_events(since_nanos, name);
        assert_eq!(
            dies.len(),
            1,
            "one die for {name}: {dies:?}\n{}",
            self.diagnostics()
        );
        assert_eq!(
            dies[0]["Actor"]["Attributes"]["exitCode"],
            exit_code,
            "the die of {name}: {}\n{}",
            dies[0],
            self.diagnostics()
        );
    }
}
