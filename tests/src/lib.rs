//! Harness for the end-to-end suites: a real `holdfastd` with its embedded
//! containerd in a temporary root, driven by the real `docker` CLI (and curl,
//! and the Python Docker SDK).
//!
//! - [`Daemon`]: starts holdfastd on fresh roots and waits until it serves
//!   with `busybox:latest` loaded; runs the CLI against it; SIGKILLs, SIGTERMs
//!   and restarts it on the same roots; kills, freezes and thaws its embedded
//!   containerd. On drop it removes every trace: processes, mounts, runc state,
//!   cgroups.
//! - [`Terminal`]: the CLI in a real pseudo-terminal (`run -it`, `exec -it`,
//!   `attach`), typed into and read like a person would.
//! - [`wait_until`]: every wait is on a condition, polled, with a generous
//!   bound; no fixed sleeps as synchronisation.
//! - [`procs`]: process facts from `/proc` (is a container's pid the same
//!   process, still alive?).
//! - the steps the suites share on containers: the scripts they run
//!   ([`TICKER`], [`TRAPPER`], [`gated_exit`]), and the checks after a crash
//!   or an outage ([`Daemon::assert_still_running_with_pid`],
//!   [`Daemon::assert_never_signalled`], [`Daemon::assert_one_die`],
//!   [`Daemon::wait_running_again`]).
//!
//! - [`engine`]: one interface over holdfastd and dockerd (on a private
//!   containerd), for the chaos suite and the side-by-side benchmark.
//!
//! - [`registry`]: a real `docker-registry` on loopback, images pushed into
//!   it with `skopeo` from OCI layouts built here, and a proxy that cuts a
//!   blob off mid-transfer.
//!
//! - [`cri`]: the CRI's generated client over a daemon's `cri.sock`, and
//!   the steps the CRI suites share on pods and their containers.
//!
//! - [`archive`]: docker-archive tarballs with their image config edited
//!   (a `HEALTHCHECK`, a `VOLUME`).
//!
//! Every assertion message carries [`Daemon::diagnostics`]: the tails of the
//! holdfastd and containerd logs and the last CLI commands.

pub mod archive;
mod command;
mod containers;
pub mod cri;
mod daemon;
pub mod engine;
pub mod network;
pub mod procs;
pub mod python;
pub mod registry;
mod terminal;
mod time;

pub use command::{CommandOutput, run_with_input, run_with_timeout};
pub use containers::{TICKER, TRAPPER, gated_exit, open_gate};
pub use daemon::{BackgroundDocker, ContainerdOutage, Daemon, HttpResponse, lines};
pub use terminal::Terminal;
pub use time::{now_unix_nanos, parse_rfc3339_nanos, unix_nanos_arg};

use std::time::{Duration, Instant};

/// The bound of every wait on a condition: generous, for a slow, shared
/// 2-core machine. A condition that holds returns at once.
pub const WAIT_BOUND: Duration = Duration::from_secs(60);

/// How often conditions are polled.
pub const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Polls `condition` every 50 ms until it holds or `bound` has passed;
/// whether it held.
pub fn poll_until(bound: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    loop {
        if condition() {
            return true;
        }
        if started.elapsed() > bound {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Polls `condition` every 50 ms until it holds; panics naming `what` when
/// `bound` passes first. Prefer [`Daemon::wait_until`], which adds the logs.
pub fn wait_until(what: &str, bound: Duration, condition: impl FnMut() -> bool) {
    assert!(
        poll_until(bound, condition),
        "timed out after {bound:?} waiting until {what}"
    );
}
