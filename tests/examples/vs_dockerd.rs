//! Speed and cost side by side: holdfastd and dockerd 20.10, each on its
//! own private containerd, the same busybox image, the same docker CLI,
//! sampled alternately (engine order flipped every round) so that the noise
//! of a shared machine hits both alike. Run by bench/vs-dockerd.sh, which
//! turns the samples into bench/vs-dockerd.md; by hand (as root):
//!
//! ```sh
//! cargo build --release -p holdfastd
//! cargo run --release -p holdfast-e2e --example vs_dockerd -- OUT_DIR [ROUNDS] [MANY] [RESTARTS]
//! ```
//!
//! Writes `OUT_DIR/samples.jsonl` (one `{"engine","what","ms"}` per line)
//! and `OUT_DIR/rss.jsonl`. Every sample that fails is recorded with
//! `"failed": true` instead of a time.

use holdfast_e2e::engine::{Dockerd, Engine, Holdfast};
use holdfast_e2e::procs::{self, ProcessIdentity};
use holdfast_e2e::{lines, poll_until};
use serde_json::json;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);
/// Exits 0 on SIGTERM (pid 1 without a handler would ignore it).
const POLITE: &str = "trap 'exit 0' TERM; while true; do sleep 0.1; done";

/// Exits 0 the moment SIGTERM comes: the shell waits in `wait`, which a
/// trapped signal interrupts.
const AT_ONCE: &str = "trap 'exit 0' TERM; sleep 1000 & wait";

struct Out {
    samples: fs::File,
}

impl Out {
    fn sample(&mut self, engine: &str, what: &str, took: Option<Duration>) {
        let line = match took {
            Some(d) => json!({"engine": engine, "what": what, "ms": d.as_secs_f64() * 1e3}),
            None => json!({"engine": engine, "what": what, "failed": true}),
        };
        eprintln!("{line}");
        writeln!(self.samples, "{line}").expect("write a sample");
    }
}

fn timed(e: &dyn Engine, args: &[&str]) -> Option<Duration> {
    let out = e.docker(args, BOUND);
    out.success().then_some(out.elapsed)
}

fn ok(e: &dyn Engine, args: &[&str]) -> Option<String> {
    let out = e.docker(args, BOUND);
    out.success().then_some(out.stdout)
}

fn pid_of(e: &dyn Engine, name: &str) -> Option<u32> {
    let pid: u32 = ok(e, &["inspect", "-f", "{{.State.Pid}}", name])?
        .trim()
        .parse()
        .ok()?;
    (pid > 0).then_some(pid)
}

fn rm_all(e: &dyn Engine) {
    let ids = lines(&ok(e, &["ps", "-a", "-q"]).unwrap_or_default());
    if !ids.is_empty() {
        let mut args = vec!["rm", "-f"];
        args.extend(ids.iter().map(String::as_str));
        e.docker(&args, BOUND);
    }
}

/// One sample of each single-container latency.
fn latencies(e: &dyn Engine, round: usize, out: &mut Out) {
    let name = e.name();
    let c = format!("d{round}");
    out.sample(
        name,
        "run -d",
        timed(e, &["run", "-d", "--name", &c, "busybox", "sleep", "1000"]),
    );
    out.sample(
        name,
        "run --rm (attached)",
        timed(e, &["run", "--rm", "busybox", "echo", "hi"]),
    );
    let s = format!("s{round}");
    let stop = ok(
        e,
        &["run", "-d", "--name", &s, "busybox", "sh", "-c", POLITE],
    )
    .and_then(|_| timed(e, &["stop", &s]));
    out.sample(name, "stop (exits on SIGTERM)", stop);
    // The same with a container whose shell runs its trap the moment
    // SIGTERM comes (POLITE's runs it only once its `sleep 0.1` ends: 0 to
    // 100 ms of the container's own in every sample), signalled only once
    // the trap is set (before it, pid 1 ignores SIGTERM).
    let q = format!("q{round}");
    let stop_at_once = ok(
        e,
        &["run", "-d", "--name", &q, "busybox", "sh", "-c", AT_ONCE],
    )
    .and_then(|_| pid_of(e, &q))
    .filter(|pid| poll_until(BOUND, || procs::catches_sigterm(*pid)))
    .and_then(|_| timed(e, &["stop", &q]));
    out.sample(name, "stop (exits at once on SIGTERM)", stop_at_once);

    // exit -> docker wait returns: the process is SIGKILLed from the host
    // once the engine has the wait request
    let w = format!("w{round}");
    let waited = (|| {
        ok(e, &["run", "-d", "--name", &w, "busybox", "sleep", "1000"])?;
        let pid = pid_of(e, &w)?;
        let p = ProcessIdentity::of(pid)?;
        let wait = ExitClock::spawn(e.docker_command(&["wait", &w]))?;
        let fragment = format!("/containers/{w}/wait");
        if !poll_until(BOUND, || e.saw_request(&["POST", &fragment])) {
            wait.kill();
            return None;
        }
        let t0 = Instant::now();
        procs::signal(p.pid, "KILL");
        wait.exited_ok_at().map(|at| at.duration_since(t0))
    })();
    out.sample(name, "exit -> wait returns", waited);
    e.docker(&["rm", "-f", &c, &s, &q, &w], BOUND);
}

/// A CLI whose exit is timed by a thread blocked in `wait(2)`, not by
/// polling: `exit -> wait returns` is a few ms for holdfast, and the 5 ms
/// `try_wait` polling (and output readers) of `Engine::docker` would add
/// up to 10 ms of the harness's own to each sample, for both engines.
struct ExitClock {
    pid: u32,
    exited: mpsc::Receiver<(Instant, bool)>,
}

impl ExitClock {
    fn spawn(mut cmd: Command) -> Option<ExitClock> {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let pid = child.id();
        let (tx, exited) = mpsc::channel();
        std::thread::spawn(move || {
            let ok = child.wait().is_ok_and(|s| s.success());
            let _ = tx.send((Instant::now(), ok));
        });
        Some(ExitClock { pid, exited })
    }

    /// When it exited, if it succeeded within [`BOUND`] (else it is killed).
    fn exited_ok_at(self) -> Option<Instant> {
        match self.exited.recv_timeout(BOUND) {
            Ok((at, ok)) => ok.then_some(at),
            Err(_) => {
                self.kill();
                None
            }
        }
    }

    fn kill(self) {
        procs::signal(self.pid, "KILL");
        let _ = self.exited.recv_timeout(Duration::from_secs(5));
    }
}

/// `many` containers created and started by as many parallel CLIs; how
/// many succeeded.
fn parallel_runs(e: &dyn Engine, many: usize, out: &mut Out) -> usize {
    let t0 = Instant::now();
    let runs: Vec<_> = (0..many)
        .map(|i| {
            let n = format!("m{i}");
            e.spawn_docker(
                &["run", "-d", "--name", &n, "busybox", "sleep", "100000"],
                BOUND,
            )
        })
        .collect();
    let done = runs
        .into_iter()
        .map(|r| r.finish().success())
        .filter(|ok| *ok)
        .count();
    let took = t0.elapsed();
    out.sample(
        e.name(),
        &format!("{many} parallel run -d, all answered"),
        (done == many).then_some(took),
    );
    done
}

/// Whether every `m*` container but `dead` shows running and `dead` not.
fn states_right(e: &dyn Engine, many: usize, dead: &str) -> bool {
    let names: Vec<String> = (0..many).map(|i| format!("m{i}")).collect();
    let mut args = vec!["inspect", "-f", "{{.Name}} {{.State.Running}}"];
    args.extend(names.iter().map(String::as_str));
    let Some(text) = ok(e, &args) else {
        return false;
    };
    let rows = lines(&text);
    rows.len() == many
        && rows.iter().all(|r| {
            let running = r.ends_with(" true");
            if r.starts_with(&format!("/{dead} ")) {
                !running
            } else {
                running
            }
        })
}

/// When process `pid` started, from its start time in `/proc/<pid>/stat`
/// (clock ticks after boot) against `/proc/uptime`: 10 ms resolution.
fn started_at(pid: u32) -> Option<Instant> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // the fields after the command, which is in parentheses
    let rest = &stat[stat.rfind(')')? + 2..];
    let ticks: f64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let uptime: f64 = fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // USER_HZ is 100 on every Linux this runs on
    let age = (uptime - ticks / 100.0).max(0.0);
    Instant::now().checked_sub(Duration::from_secs_f64(age))
}

fn rss_kb(pid: Option<u32>) -> Option<u64> {
    procs::memory_kb(pid?, "VmRSS:", "status")
}

fn rss(e: &dyn Engine, when: &str, rss_out: &mut fs::File) {
    let line = json!({
        "engine": e.name(),
        "when": when,
        "engine_kb": rss_kb(e.engine_pid()),
        "containerd_kb": rss_kb(e.containerd_pid()),
    });
    eprintln!("{line}");
    writeln!(rss_out, "{line}").expect("write rss");
}

/// With `many` containers: ps -a, memory, containerd and engine restarts.
fn with_many(e: &mut dyn Engine, round: usize, many: usize, out: &mut Out, rss_out: &mut fs::File) {
    let name = e.name();
    if parallel_runs(e, many, out) != many {
        // the parallel sample is recorded as failed; the rest of the round
        // needs all `many` running: make up the missing ones one by one
        eprintln!("{name}: not every parallel run succeeded; completing them one by one");
        for i in 0..many {
            let n = format!("m{i}");
            if pid_of(e, &n).is_none() {
                e.docker(&["rm", "-f", &n], BOUND);
                e.docker(
                    &["run", "-d", "--name", &n, "busybox", "sleep", "100000"],
                    BOUND,
                );
            }
        }
        if (0..many).any(|i| pid_of(e, &format!("m{i}")).is_none()) {
            eprintln!("{name}: cannot get {many} running; skipping the rest of round {round}");
            rm_all(e);
            return;
        }
    }
    for _ in 0..5 {
        out.sample(
            name,
            &format!("ps -a ({many} containers)"),
            timed(e, &["ps", "-a"]),
        );
    }
    rss(e, &format!("{many} running"), rss_out);

    // containerd SIGKILLed; one container's process dies while it is down
    let victim = format!("m{}", round % many);
    if let Some(p) = pid_of(e, &victim).and_then(ProcessIdentity::of) {
        e.containerd_down();
        procs::signal(p.pid, "KILL");
        poll_until(BOUND, || !p.is_alive());
        let t0 = Instant::now();
        e.containerd_up();
        let spawned = e.containerd_pid().and_then(started_at);
        let right = poll_until(BOUND, || states_right(e, many, &victim));
        out.sample(
            name,
            &format!("containerd restart -> {many} states right"),
            right.then(|| t0.elapsed()),
        );
        // The same from the new containerd's process start (for holdfast
        // its supervisor's backoff after the crash loop is left out).
        out.sample(
            name,
            &format!("containerd process start -> {many} states right"),
            spawned.filter(|_| right).map(|at| at.elapsed()),
        );
        e.docker(&["rm", "-f", &victim], BOUND);
        e.docker(
            &["run", "-d", "--name", &victim, "busybox", "sleep", "100000"],
            BOUND,
        );
    }

    // the engine SIGKILLed; one container's process dies while it is down
    let victim = format!("m{}", (round + 1) % many);
    if let Some(p) = pid_of(e, &victim).and_then(ProcessIdentity::of) {
        e.kill_engine();
        procs::signal(p.pid, "KILL");
        poll_until(BOUND, || !p.is_alive());
        let t0 = Instant::now();
        e.restart_engine();
        out.sample(
            name,
            &format!("engine restart -> API answering ({many})"),
            Some(t0.elapsed()),
        );
        let right = poll_until(BOUND, || states_right(e, many, &victim));
        out.sample(
            name,
            &format!("engine restart -> {many} states right"),
            right.then(|| t0.elapsed()),
        );
    }
    rm_all(e);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: vs_dockerd OUT_DIR [ROUNDS] [MANY] [RESTARTS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let many: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let restarts: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    run(&dir, rounds, many, restarts);
}

fn run(dir: &Path, rounds: usize, many: usize, restarts: usize) {
    fs::create_dir_all(dir).expect("create the output directory");
    let mut out = Out {
        samples: fs::File::create(dir.join("samples.jsonl")).expect("create samples.jsonl"),
    };
    let mut rss_out = fs::File::create(dir.join("rss.jsonl")).expect("create rss.jsonl");
    let mut engines: Vec<Box<dyn Engine>> =
        vec![Box::new(Holdfast::start()), Box::new(Dockerd::start())];
    for e in &engines {
        // warm caches (image, binaries); not recorded
        e.docker(&["run", "--rm", "busybox", "true"], BOUND);
        rss(e.as_ref(), "idle", &mut rss_out);
    }
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            latencies(engines[i].as_ref(), round, &mut out);
        }
    }
    for round in 0..restarts {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            with_many(engines[i].as_mut(), round, many, &mut out, &mut rss_out);
        }
    }
    for e in &engines {
        rss(e.as_ref(), "idle, after", &mut rss_out);
    }
    engines.clear();
}
