//! Chaos: faults under running containers and requests in flight, counted.
//!
//! Each test is one scenario. It drives an engine (holdfastd by default;
//! dockerd with `CHAOS_ENGINE=dockerd`, see bench/vs-dockerd.sh) through
//! the docker CLI, injects faults (containerd SIGKILLed, held down, a shim
//! SIGKILLed, the engine SIGKILLed mid-request, an OOM kill) and counts,
//! against the truth read from `/proc`:
//!
//! - `wrong_kills`: a container's process gone, or a signal logged by a
//!   trapper, that no request asked for;
//! - `lost_exits`: a container shown running whose process is gone, after
//!   the engine is usable again plus [`SEE_EXIT_GRACE`];
//! - `wrong_exit_codes`: an exit recorded with another code than the
//!   process exited with;
//! - `stale_states`: a container shown exited (or running under another
//!   pid) whose process runs;
//! - `lost_containers`: a container neither removed nor asked to be
//!   removed that is no longer listed;
//! - `half_created`: something left behind by a create that failed: a
//!   container listed after its `docker run`/`create` failed during an
//!   outage, or one that containerd holds and the engine does not list;
//! - `failed_requests`: a request that should have succeeded (stop, kill,
//!   rm across an outage; anything once the fault is healed) and did not,
//!   or was not answered within its bound;
//! - `wrong_oom`: `OOMKilled` false for an OOM kill, or true for anything
//!   else.
//!
//! For holdfast every count must be zero. Counts are written as JSON to
//! `$CHAOS_REPORT/<engine>-<scenario>.json` when that is set. Sizes:
//! `CHAOS_CTRD_CYCLES` (3), `CHAOS_CONTAINERS` (4), `CHAOS_ENGINE_CYCLES`
//! (3).

use holdfast_e2e::engine::{Dockerd, Engine, Holdfast, InFlight, eventually, shim_of};
use holdfast_e2e::procs::{self, ProcessIdentity};
use holdfast_e2e::{CommandOutput, TRAPPER, gated_exit, lines, open_gate, poll_until};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long an engine, once usable again, may take to show an exit that
/// happened while it could not see it.
const SEE_EXIT_GRACE: Duration = Duration::from_secs(5);
/// The bound of one request: past it, the request counts as unanswered.
const REQUEST_BOUND: Duration = Duration::from_secs(90);
/// The bound within which a container whose shim was SIGKILLed must be
/// shown exited.
const SHIM_DEATH_BOUND: Duration = Duration::from_secs(10);
/// An outage longer than containerd's shim retries an exit event (~21 s).
const LONG_OUTAGE: Duration = Duration::from_secs(25);
/// Exits 0 on SIGTERM, leaving `/mark/termed` (a host directory bound in
/// by [`Chaos::run_polite`]) as evidence that SIGTERM reached it; without
/// that evidence, its truthful exit code after a stop is SIGKILL's 137.
const POLITE: &str = "trap 'touch /mark/termed; exit 0' TERM; while true; do sleep 0.1; done";

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn start_engine() -> Box<dyn Engine> {
    match std::env::var("CHAOS_ENGINE").as_deref() {
        Ok("dockerd") => Box::new(Dockerd::start()),
        Ok("holdfast") | Err(_) => Box::new(Holdfast::start()),
        Ok(other) => panic!("CHAOS_ENGINE={other}: want holdfast or dockerd"),
    }
}

/// What went wrong in one scenario, counted.
#[derive(Debug, Default)]
struct Counts {
    wrong_kills: usize,
    lost_exits: usize,
    wrong_exit_codes: usize,
    stale_states: usize,
    lost_containers: usize,
    half_created: usize,
    failed_requests: usize,
    wrong_oom: usize,
    /// How many facts were checked: a scenario that checked nothing failed.
    checks: usize,
    /// One line per counted problem, for the report and the failure message.
    notes: Vec<String>,
}

impl Counts {
    fn total(&self) -> usize {
        self.wrong_kills
            + self.lost_exits
            + self.wrong_exit_codes
            + self.stale_states
            + self.lost_containers
            + self.half_created
            + self.failed_requests
            + self.wrong_oom
    }
}

/// A scenario in progress: the engine, what it counted, and how long it ran.
struct Chaos {
    scenario: &'static str,
    engine: Box<dyn Engine>,
    counts: Counts,
    started: Instant,
    /// Host directories bound into the polite containers.
    marks: tempfile::TempDir,
    /// Containers already counted as a lost exit: the audit counts each once.
    lost: BTreeSet<String>,
    /// containerd's containers already counted as left behind: each once,
    /// however many audits see it again.
    leftovers: BTreeSet<String>,
}

/// What a container is known to be doing, from the test's side.
#[derive(Clone, Copy, Debug)]
enum Truth {
    /// Runs until asked otherwise: its process must still be this one.
    Running(ProcessIdentity),
    /// Its process exited with this code (or was killed: 137).
    Exited(i64),
}

macro_rules! count {
    ($chaos:expr, $field:ident, $($fmt:tt)*) => {{
        let note = format!("{}: {}", stringify!($field), format!($($fmt)*));
        eprintln!("chaos[{}/{}] {note}", $chaos.engine.name(), $chaos.scenario);
        $chaos.counts.$field += 1;
        $chaos.counts.notes.push(note);
    }};
}

impl Chaos {
    fn new(scenario: &'static str) -> Chaos {
        Chaos::with_engine(scenario, start_engine())
    }

    fn with_engine(scenario: &'static str, engine: Box<dyn Engine>) -> Chaos {
        Chaos {
            scenario,
            engine,
            counts: Counts::default(),
            started: Instant::now(),
            marks: tempfile::Builder::new()
                .prefix("hf-chaos-marks-")
                .tempdir()
                .expect("create a directory for the stop marks"),
            lost: BTreeSet::new(),
            leftovers: BTreeSet::new(),
        }
    }

    fn docker(&self, args: &[&str]) -> CommandOutput {
        self.engine.docker(args, REQUEST_BOUND)
    }

    /// A request made when nothing is faulty: it must succeed.
    fn must(&mut self, args: &[&str]) -> Option<String> {
        let out = self.docker(args);
        self.counts.checks += 1;
        if out.success() {
            return Some(out.stdout);
        }
        count!(
            self,
            failed_requests,
            "`docker {}` exited {} after {:?}: {}",
            args.join(" "),
            out.code(),
            out.elapsed,
            out.stderr.trim()
        );
        None
    }

    /// `docker run -d --name NAME [OPTIONS] busybox sh -c SCRIPT` when
    /// nothing is faulty; the container's process.
    fn run(&mut self, name: &str, options: &[&str], script: &str) -> Option<ProcessIdentity> {
        let mut args = vec!["run", "-d", "--name", name];
        args.extend_from_slice(options);
        args.extend_from_slice(&["busybox", "sh", "-c", script]);
        self.must(&args)?;
        let pid = self.state(name)?["Pid"].as_u64()? as u32;
        ProcessIdentity::of(pid)
    }

    /// A [`POLITE`] container with its own mark directory bound in.
    fn run_polite(&mut self, name: &str) -> Option<ProcessIdentity> {
        let dir = self.marks.path().join(name);
        std::fs::create_dir_all(&dir).expect("create a mark directory");
        let mount = format!("type=bind,source={},target=/mark", dir.display());
        self.run(name, &["--mount", &mount], POLITE)
    }

    /// The truth of a stopped [`POLITE`] container: 0 when SIGTERM reached
    /// it, else SIGKILL's 137.
    fn stop_truth(&self, name: &str) -> Truth {
        if self.marks.path().join(name).join("termed").exists() {
            Truth::Exited(0)
        } else {
            Truth::Exited(137)
        }
    }

    /// `inspect NAME` -> State; `None` when the engine does not know it.
    fn state(&self, name: &str) -> Option<Value> {
        Some(self.inspect(name)?["State"].clone())
    }

    /// `inspect NAME`; `None` when the engine does not know it.
    fn inspect(&self, name: &str) -> Option<Value> {
        let out = self.docker(&["container", "inspect", name]);
        if !out.success() {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v.get(0).cloned()
    }

    fn listed(&self) -> BTreeSet<String> {
        let out = self.docker(&["ps", "-a", "--format", "{{.Names}}"]);
        lines(&out.stdout).into_iter().collect()
    }

    fn listed_ids(&self) -> BTreeSet<String> {
        let out = self.docker(&["ps", "-a", "-q", "--no-trunc"]);
        lines(&out.stdout).into_iter().collect()
    }

    /// Waits until the engine can run a container again (containerd back
    /// and seen); counts a failed request when it cannot within the bound.
    fn wait_usable(&mut self) {
        self.counts.checks += 1;
        let engine = &self.engine;
        let usable = eventually(|| {
            engine
                .docker(&["run", "--rm", "busybox", "true"], REQUEST_BOUND)
                .success()
        });
        if !usable {
            count!(
                self,
                failed_requests,
                "the engine could not run a container within the bound after the fault"
            );
        }
    }

    /// Checks what the engine shows of `name` against `truth`, giving it
    /// [`SEE_EXIT_GRACE`] to see an exit.
    fn check(&mut self, name: &str, truth: Truth) {
        self.counts.checks += 1;
        match truth {
            Truth::Running(p) => {
                if !p.is_alive() {
                    count!(self, wrong_kills, "{name}: its process {} is gone", p.pid);
                    return;
                }
                let Some(s) = self.state(name) else {
                    count!(self, lost_containers, "{name} is no longer known");
                    return;
                };
                if s["Running"] != true || s["Pid"].as_u64() != Some(u64::from(p.pid)) {
                    count!(
                        self,
                        stale_states,
                        "{name} runs as {} but shows {}",
                        p.pid,
                        compact(&s)
                    );
                }
            }
            Truth::Exited(code) => {
                let mut last = None;
                let seen = poll_until(SEE_EXIT_GRACE, || {
                    last = self.state(name);
                    last.as_ref().is_some_and(|s| s["Running"] == false)
                });
                let Some(s) = last else {
                    count!(self, lost_containers, "{name} is no longer known");
                    return;
                };
                if !seen {
                    self.lost.insert(name.to_owned());
                    count!(
                        self,
                        lost_exits,
                        "{name} exited {code} but shows {}",
                        compact(&s)
                    );
                    return;
                }
                if s["ExitCode"].as_i64() != Some(code) {
                    count!(
                        self,
                        wrong_exit_codes,
                        "{name} exited {code}, recorded {}",
                        s["ExitCode"]
                    );
                }
            }
        }
    }

    /// Everything the engine lists against the truth of `/proc`, and
    /// containerd's containers against the engine's.
    fn audit(&mut self) {
        let ids = self.listed_ids();
        for id in &ids {
            self.counts.checks += 1;
            let Some(v) = self.inspect(id) else { continue };
            let name = v["Name"].as_str().unwrap_or("").trim_start_matches('/');
            if self.lost.contains(name) {
                continue;
            }
            let s = &v["State"];
            let pid = s["Pid"].as_u64().unwrap_or(0) as u32;
            if s["Running"] == true && (pid == 0 || !procs::pid_alive(pid)) {
                // its process may have just exited: give the engine its grace
                let seen = poll_until(SEE_EXIT_GRACE, || {
                    self.state(id).is_none_or(|s| s["Running"] == false)
                });
                if !seen {
                    count!(
                        self,
                        lost_exits,
                        "{id} shows running as {pid}, which is gone"
                    );
                }
            }
        }
        self.counts.checks += 1;
        let Some(held) = self.engine.containerd_container_ids() else {
            count!(self, failed_requests, "containerd does not answer ctr");
            return;
        };
        let ids = self.listed_ids();
        for id in held {
            if !ids.contains(&id) && self.leftovers.insert(id.clone()) {
                count!(
                    self,
                    half_created,
                    "containerd holds {id}, which the engine does not list"
                );
            }
        }
    }

    /// Asserts the trappers were never signalled (their logs say so).
    fn check_trappers(&mut self, names: &[String]) {
        for name in names {
            self.counts.checks += 1;
            let out = self.docker(&["logs", name]);
            if out.stdout.contains("got-") || out.stderr.contains("got-") {
                count!(self, wrong_kills, "{name} was signalled");
            }
        }
    }

    /// A request issued while something was faulty that must succeed once
    /// the fault is healed (stop, kill, rm).
    fn must_succeed(&mut self, req: InFlight) -> bool {
        let label = req.label.clone();
        let out = req.finish();
        self.counts.checks += 1;
        if out.success() {
            return true;
        }
        count!(
            self,
            failed_requests,
            "`docker {label}` exited {} after {:?}: {}",
            out.code(),
            out.elapsed,
            out.stderr.trim()
        );
        false
    }

    /// Waits until the engine's log shows the request; the harness is
    /// wrong when it never does.
    fn wait_received(&self, fragments: &[&str]) {
        assert!(
            eventually(|| self.engine.saw_request(fragments)),
            "{}: the engine's log never showed a request with {fragments:?}\n{}",
            self.scenario,
            self.engine.diagnostics()
        );
    }

    /// Prints the counts, writes them for the report, and for holdfast
    /// asserts that every one is zero.
    fn finish(self) {
        let c = &self.counts;
        let row = json!({
            "engine": self.engine.name(),
            "scenario": self.scenario,
            "wrong_kills": c.wrong_kills,
            "lost_exits": c.lost_exits,
            "wrong_exit_codes": c.wrong_exit_codes,
            "stale_states": c.stale_states,
            "lost_containers": c.lost_containers,
            "half_created": c.half_created,
            "failed_requests": c.failed_requests,
            "wrong_oom": c.wrong_oom,
            "checks": c.checks,
            "seconds": self.started.elapsed().as_secs(),
            "notes": c.notes,
        });
        eprintln!("chaos result: {row}");
        if let Some(dir) = std::env::var_os("CHAOS_REPORT") {
            let path = std::path::Path::new(&dir).join(format!(
                "{}-{}.json",
                self.engine.name(),
                self.scenario
            ));
            if let Err(e) = std::fs::write(&path, row.to_string()) {
                panic!("write {}: {e}", path.display());
            }
        }
        assert!(c.checks > 0, "{}: nothing was checked", self.scenario);
        if self.engine.name() == "holdfast" {
            assert!(
                c.total() == 0,
                "{}: holdfast must count zero, counted {row:#}\n{}",
                self.scenario,
                self.engine.diagnostics()
            );
        }
    }
}

fn compact(state: &Value) -> String {
    format!(
        "Status={} Running={} Pid={} ExitCode={} OOMKilled={} Error={}",
        state["Status"],
        state["Running"],
        state["Pid"],
        state["ExitCode"],
        state["OOMKilled"],
        state["Error"]
    )
}

/// containerd SIGKILLed and started again, N cycles, with M containers
/// running and churn in flight across each: a run, a stop, a removal, an
/// exit during the outage and one just after.
#[test]
fn containerd_sigkill_cycles_under_churn() {
    let cycles = env_count("CHAOS_CTRD_CYCLES", 3);
    let m = env_count("CHAOS_CONTAINERS", 4);
    let mut c = Chaos::new("containerd_cycles");
    let mut long = Vec::new();
    for i in 0..m {
        let name = format!("long{i}");
        if let Some(p) = c.run(&name, &[], TRAPPER) {
            long.push((name, p));
        }
    }
    for i in 0..cycles {
        let code = 10 + (i % 100) as i64;
        let ex = format!("ex{i}");
        let stopme = format!("stopme{i}");
        let rmme = format!("rmme{i}");
        let Some(exiter) = c.run(&ex, &[], &gated_exit(code as i32)) else {
            continue;
        };
        let stopped = c.run_polite(&stopme);
        let removed = c.run(&rmme, &[], "sleep 1000");
        let (Some(stopped), Some(removed)) = (stopped, removed) else {
            continue;
        };
        // churn in flight as containerd dies
        let fresh = format!("fresh{i}");
        let quick = format!("quick{i}");
        let churn_run = c.engine.spawn_docker(
            &["run", "-d", "--name", &fresh, "busybox", "sleep", "1000"],
            REQUEST_BOUND,
        );
        let churn_quick = c.engine.spawn_docker(
            &[
                "run", "-d", "--name", &quick, "busybox", "sh", "-c", "exit 3",
            ],
            REQUEST_BOUND,
        );
        let stop = c
            .engine
            .spawn_docker(&["stop", "-t", "5", &stopme], REQUEST_BOUND);
        let rm = c.engine.spawn_docker(&["rm", "-f", &rmme], REQUEST_BOUND);
        c.engine.containerd_down();
        open_gate(exiter.pid);
        eventually(|| !exiter.is_alive());
        c.engine.containerd_up();

        // stop and rm must be carried out; a run may fail, leaving nothing
        if c.must_succeed(stop) {
            let truth = c.stop_truth(&stopme);
            c.check(&stopme, truth);
        }
        if c.must_succeed(rm) {
            c.counts.checks += 1;
            if c.state(&rmme).is_some() {
                count!(c, stale_states, "{rmme} is listed after rm -f succeeded");
            }
        }
        if removed.is_alive() {
            // rm -f answered, or not: its process must not outlive a success
            c.counts.checks += 1;
            if c.state(&rmme).is_none() {
                count!(c, stale_states, "{rmme} is gone but its process runs");
            }
        }
        c.counts.checks += 1;
        if stopped.is_alive() && c.state(&stopme).is_some_and(|s| s["Running"] == false) {
            count!(c, stale_states, "{stopme} shown exited, its process runs");
        }
        for (req, name, truth) in [
            (churn_run, &fresh, None),
            (churn_quick, &quick, Some(Truth::Exited(3))),
        ] {
            let out = req.finish();
            c.counts.checks += 1;
            if out.success() {
                match truth {
                    Some(t) => c.check(name, t),
                    None => {
                        if let Some(p) = c
                            .state(name)
                            .and_then(|s| s["Pid"].as_u64())
                            .and_then(|pid| ProcessIdentity::of(pid as u32))
                        {
                            c.check(name, Truth::Running(p));
                        } else {
                            count!(c, stale_states, "{name}: run succeeded, no live process");
                        }
                    }
                }
            }
        }
        c.wait_usable();
        c.check(&ex, Truth::Exited(code));
        for (name, p) in long.clone() {
            c.check(&name, Truth::Running(p));
        }
        c.audit();
        // churn: the cycle's containers go; the long ones stay
        for name in [&ex, &stopme, &rmme, &fresh, &quick] {
            c.docker(&["rm", "-f", name]);
        }
    }
    let names: Vec<String> = long.iter().map(|(n, _)| n.clone()).collect();
    c.check_trappers(&names);
    for name in &names {
        c.counts.checks += 1;
        if !c.listed().contains(name) {
            count!(c, lost_containers, "{name} is not listed");
        }
    }
    c.finish();
}

/// Exits while containerd is down for longer than the shim retries its
/// exit events (it waits 25 s, beside the other scenarios): only a relist
/// can tell.
#[test]
fn exits_during_an_outage_longer_than_the_event_retry() {
    let mut c = Chaos::new("long_outage");
    let mut exiters = Vec::new();
    for (i, code) in [0, 7, 42].into_iter().enumerate() {
        let name = format!("late{i}");
        if let Some(p) = c.run(&name, &[], &gated_exit(code)) {
            exiters.push((name, p, i64::from(code)));
        }
    }
    let keep = c.run("keep", &[], TRAPPER);
    c.engine.containerd_down();
    for (_, p, _) in &exiters {
        open_gate(p.pid);
    }
    eventually(|| exiters.iter().all(|(_, p, _)| !p.is_alive()));
    // the point of this scenario is time passing: the shim gives up
    let down_since = Instant::now();
    poll_until(LONG_OUTAGE, || down_since.elapsed() >= LONG_OUTAGE);
    c.engine.containerd_up();
    c.wait_usable();
    for (name, _, code) in exiters.clone() {
        c.check(&name, Truth::Exited(code));
    }
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    c.check_trappers(&["keep".to_owned()]);
    c.audit();
    c.finish();
}

/// A container's shim SIGKILLed: its task vanishes; the container must be
/// shown exited within a bound, with a reason.
#[test]
fn shim_sigkill_is_an_exit_within_a_bound() {
    let mut c = Chaos::new("shim_kill");
    let keep = c.run("keep", &[], TRAPPER);
    for i in 0..2 {
        let name = format!("victim{i}");
        let Some(p) = c.run(&name, &[], "sleep 1000") else {
            continue;
        };
        let Some(shim) = shim_of(p.pid) else {
            panic!(
                "{name}: no shim above {}\n{}",
                p.pid,
                c.engine.diagnostics()
            );
        };
        procs::signal(shim, "KILL");
        c.counts.checks += 1;
        let started = Instant::now();
        let mut last = None;
        let seen = poll_until(SHIM_DEATH_BOUND, || {
            last = c.state(&name);
            last.as_ref().is_some_and(|s| s["Running"] == false)
        });
        let shown = last.as_ref().map(compact).unwrap_or_default();
        if seen {
            eprintln!(
                "chaos[{}/shim_kill] {name} shown exited after {:?}: {shown}",
                c.engine.name(),
                started.elapsed()
            );
            c.counts.notes.push(format!(
                "info: {name} exited after {:?}: {shown}",
                started.elapsed()
            ));
            if p.is_alive() {
                count!(c, stale_states, "{name} shown exited, its process runs");
            }
        } else {
            count!(
                c,
                lost_exits,
                "{name}: shim killed, still {shown} after {SHIM_DEATH_BOUND:?}"
            );
        }
    }
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    c.wait_usable();
    c.audit();
    c.finish();
}

/// The engine SIGKILLed with a run, a stop and a removal in flight, N
/// cycles, and an exit while it is down; with live restore for dockerd.
#[test]
fn engine_sigkill_mid_operation_cycles() {
    let cycles = env_count("CHAOS_ENGINE_CYCLES", 3);
    let mut c = Chaos::new("engine_cycles");
    let mut long = Vec::new();
    for i in 0..2 {
        let name = format!("long{i}");
        if let Some(p) = c.run(&name, &[], TRAPPER) {
            long.push((name, p));
        }
    }
    for i in 0..cycles {
        let code = 20 + (i % 100) as i64;
        let ex = format!("ex{i}");
        let stopme = format!("stopme{i}");
        let rmme = format!("rmme{i}");
        let fresh = format!("fresh{i}");
        let Some(exiter) = c.run(&ex, &[], &gated_exit(code as i32)) else {
            continue;
        };
        let (Some(stopped), Some(removed)) =
            (c.run_polite(&stopme), c.run(&rmme, &[], "sleep 1000"))
        else {
            continue;
        };
        let run = c.engine.spawn_docker(
            &["run", "-d", "--name", &fresh, "busybox", "sleep", "1000"],
            REQUEST_BOUND,
        );
        let stop = c
            .engine
            .spawn_docker(&["stop", "-t", "5", &stopme], REQUEST_BOUND);
        let rm = c.engine.spawn_docker(&["rm", "-f", &rmme], REQUEST_BOUND);
        c.wait_received(&["POST", &format!("/containers/create?name={fresh}")]);
        c.wait_received(&["POST", &format!("/containers/{stopme}/stop")]);
        c.wait_received(&["DELETE", &format!("/containers/{rmme}?")]);
        c.engine.kill_engine();
        open_gate(exiter.pid);
        eventually(|| !exiter.is_alive());
        c.engine.restart_engine();
        let (run, stop, rm) = (run.finish(), stop.finish(), rm.finish());

        // whatever was cut, the record must match the truth
        c.wait_usable();
        c.check(&ex, Truth::Exited(code));
        if stop.success() || !stopped.is_alive() {
            let truth = c.stop_truth(&stopme);
            c.check(&stopme, truth);
        } else {
            c.check(&stopme, Truth::Running(stopped));
        }
        c.counts.checks += 1;
        match (c.state(&rmme), removed.is_alive()) {
            (None, true) => count!(c, stale_states, "{rmme} is gone, its process runs"),
            (Some(_), _) if rm.success() => {
                count!(c, stale_states, "{rmme} is listed after rm -f succeeded")
            }
            (Some(s), false) if s["Running"] == true => {
                let seen = poll_until(SEE_EXIT_GRACE, || {
                    c.state(&rmme).is_none_or(|s| s["Running"] == false)
                });
                if !seen {
                    count!(c, lost_exits, "{rmme} shows running, its process is gone");
                }
            }
            _ => {}
        }
        if run.success() {
            match c
                .state(&fresh)
                .and_then(|s| s["Pid"].as_u64())
                .and_then(|pid| ProcessIdentity::of(pid as u32))
            {
                Some(p) => c.check(&fresh, Truth::Running(p)),
                None => count!(c, lost_containers, "{fresh}: run answered, nothing runs"),
            }
        }
        for (name, p) in long.clone() {
            c.check(&name, Truth::Running(p));
        }
        c.audit();
        for name in [&ex, &stopme, &rmme, &fresh] {
            c.docker(&["rm", "-f", name]);
        }
    }
    let names: Vec<String> = long.iter().map(|(n, _)| n.clone()).collect();
    c.check_trappers(&names);
    c.finish();
}

/// stop, kill and rm issued while containerd is down: carried out once it
/// is back, each answered with success.
#[test]
fn stop_kill_rm_during_an_outage_are_carried_out() {
    let mut c = Chaos::new("outage_stop_kill_rm");
    let (Some(a), Some(b), Some(r)) = (
        c.run_polite("stopped"),
        c.run("killed", &[], "sleep 1000"),
        c.run("removed", &[], "sleep 1000"),
    ) else {
        c.finish();
        return;
    };
    let keep = c.run("keep", &[], TRAPPER);
    c.engine.containerd_down();
    let stop = c
        .engine
        .spawn_docker(&["stop", "-t", "5", "stopped"], REQUEST_BOUND);
    let kill = c.engine.spawn_docker(&["kill", "killed"], REQUEST_BOUND);
    let rm = c
        .engine
        .spawn_docker(&["rm", "-f", "removed"], REQUEST_BOUND);
    c.wait_received(&["POST", "/containers/stopped/stop"]);
    c.wait_received(&["POST", "/containers/killed/kill"]);
    c.wait_received(&["DELETE", "/containers/removed?"]);
    c.engine.containerd_up();
    if c.must_succeed(stop) {
        let truth = c.stop_truth("stopped");
        c.check("stopped", truth);
    }
    if c.must_succeed(kill) {
        c.check("killed", Truth::Exited(137));
    }
    let removed_ok = c.must_succeed(rm);
    c.counts.checks += 1;
    if removed_ok && (c.state("removed").is_some() || r.is_alive()) {
        count!(
            c,
            stale_states,
            "removed: rm -f succeeded, still listed or running"
        );
    }
    for (name, p) in [("stopped", a), ("killed", b)] {
        c.counts.checks += 1;
        if p.is_alive() && c.state(name).is_some_and(|s| s["Running"] == false) {
            count!(c, stale_states, "{name} shown exited, its process runs");
        }
    }
    c.wait_usable();
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    c.check_trappers(&["keep".to_owned()]);
    c.audit();
    c.finish();
}

/// run and create issued while containerd is down: either they succeed
/// for real, or they fail and leave nothing behind.
#[test]
fn create_during_an_outage_leaves_nothing_behind() {
    let mut c = Chaos::new("outage_create");
    let keep = c.run("keep", &[], TRAPPER);
    c.engine.containerd_down();
    let attempts = [
        vec![
            "run",
            "-d",
            "--name",
            "during-run",
            "busybox",
            "sleep",
            "1000",
        ],
        vec![
            "create",
            "--name",
            "during-create",
            "busybox",
            "sleep",
            "1000",
        ],
    ];
    let outcomes: Vec<(String, CommandOutput)> = attempts
        .iter()
        .map(|args| {
            let name = args
                .iter()
                .position(|a| *a == "--name")
                .and_then(|i| args.get(i + 1))
                .expect("every attempt names its container");
            ((*name).to_owned(), c.docker(args))
        })
        .collect();
    c.engine.containerd_up();
    c.wait_usable();
    for ((name, out), args) in outcomes.into_iter().zip(&attempts) {
        c.counts.checks += 1;
        let state = c.state(&name);
        eprintln!(
            "chaos[{}/outage_create] `docker {}` during the outage: exit {} after {:?}: {}",
            c.engine.name(),
            args.join(" "),
            out.code(),
            out.elapsed,
            out.stderr.trim()
        );
        match (out.success(), state) {
            (false, Some(s)) => count!(
                c,
                half_created,
                "`docker {}` failed during the outage, left {name}: {}",
                args[0],
                compact(&s)
            ),
            (true, None) => count!(c, lost_containers, "{name}: created, then not listed"),
            (true, Some(s)) if args[0] == "run" => {
                match s["Pid"]
                    .as_u64()
                    .and_then(|pid| ProcessIdentity::of(pid as u32))
                {
                    Some(p) => c.check(&name, Truth::Running(p)),
                    None => count!(c, stale_states, "{name}: run answered, nothing runs"),
                }
            }
            _ => {}
        }
    }
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    c.audit();
    c.finish();
}

/// A container OOM-killed under a small memory limit shows `OOMKilled`, as
/// does one whose child the OOM killer ended while its init exited 0 (the
/// cgroup's count is the evidence, as dockerd's OOM event is); one killed
/// by `docker kill`, or exiting 137 by itself, never does.
#[test]
fn oom_kill_is_reported_and_never_invented() {
    let mut c = Chaos::new("oom");
    // tail holds the whole endless "line" in memory: the OOM killer ends it
    let hog = "head -c 200m /dev/zero | tail";
    // (name, OOMKilled, exit code)
    let mut cases: Vec<(String, bool, i64)> = Vec::new();
    for i in 0..2 {
        let name = format!("hog{i}");
        c.must(&[
            "run", "-d", "--name", &name, "-m", "16m", "busybox", "sh", "-c", hog,
        ]);
        cases.push((name, true, 137));
    }
    // Its init leaves a mark once the pipeline is over: the truth of its
    // exit code, read, not assumed. Under load the OOM killer may take
    // the init too (when it cannot reap the first victim's memory in
    // time it picks another process of the cgroup): then 137 is the truth.
    let marks = c.marks.path().join("child");
    std::fs::create_dir_all(&marks).expect("create a mark directory");
    let mount = format!("type=bind,source={},target=/mark", marks.display());
    let child = format!("{hog}; touch /mark/survived; exit 0");
    c.must(&[
        "run", "-d", "--name", "child", "-m", "16m", "--mount", &mount, "busybox", "sh", "-c",
        &child,
    ]);
    cases.push(("child".to_owned(), true, 0));
    let killed = c.run("killed", &["-m", "16m"], "sleep 1000");
    if let Some(p) = killed {
        c.must(&["kill", "killed"]);
        eventually(|| !p.is_alive());
        cases.push(("killed".to_owned(), false, 137));
    }
    c.must(&[
        "run", "-d", "--name", "self137", "-m", "16m", "busybox", "sh", "-c", "exit 137",
    ]);
    cases.push(("self137".to_owned(), false, 137));
    for (name, oom, code) in cases {
        c.counts.checks += 1;
        let mut last = None;
        let exited = eventually(|| {
            last = c.state(&name);
            last.as_ref().is_some_and(|s| s["Running"] == false)
        });
        let Some(s) = last else {
            count!(c, lost_containers, "{name} is not known");
            continue;
        };
        if !exited {
            count!(c, lost_exits, "{name} never shown exited: {}", compact(&s));
            continue;
        }
        if s["OOMKilled"] != oom {
            count!(
                c,
                wrong_oom,
                "{name}: OOMKilled {} (want {oom}): {}",
                s["OOMKilled"],
                compact(&s)
            );
        }
        let code = if name == "child" && !marks.join("survived").exists() {
            eprintln!(
                "chaos[oom] child: its init did not survive the OOM kill (no mark): 137 is the truth"
            );
            137
        } else {
            code
        };
        if s["ExitCode"] != code {
            count!(c, wrong_exit_codes, "{name} (want {code}): {}", compact(&s));
        }
    }
    c.audit();
    c.finish();
}

/// Writes zeros to `path` until the file system refuses more: 1 MiB at a
/// time, then 4 KiB, so that not a page is left.
fn fill_disk(path: &std::path::Path) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).expect("create the ballast");
    for chunk in [1 << 20, 4096] {
        let zeros = vec![0u8; chunk];
        while f.write_all(&zeros).is_ok() {}
    }
    let _ = f.sync_all();
}

/// The data root (the store, containerd's content and snapshots, the logs)
/// on a small tmpfs, filled to the last page: a run, a stop, a removal and
/// renames asked meanwhile are answered within their bound (with an error,
/// or done), running containers are untouched; once the space is back, everything
/// works, what failed left nothing behind, what was answered done is so,
/// and a restarted holdfastd finds every record. holdfast only: dockerd's
/// roots are not on a disk of the test's own. As measured: containerd
/// refuses the run (its metadata cannot grow); stop, rm and renames fit in
/// the free pages redb keeps in its file and succeed; creates with a 100
/// KiB label make the store itself refuse ("the store could not be
/// written"), after which the engine rebuilds its core from the store and,
/// until it has reconnected, answers creates "containerd is unreachable".
#[test]
fn disk_full_fails_cleanly_and_recovers() {
    if std::env::var("CHAOS_ENGINE").as_deref() == Ok("dockerd") {
        eprintln!("disk_full: holdfast only");
        return;
    }
    let engine = holdfast_e2e::engine::Holdfast::on_small_disk("96m");
    let ballast = engine.daemon.data_root().join("ballast");
    let mut c = Chaos::with_engine("disk_full", Box::new(engine));
    let keep = c.run_polite("keep");
    let stopme = c.run_polite("stopme");
    let rmme = c.run("rmme", &[], "sleep 100000");
    fill_disk(&ballast);

    // Asked while the disk is full: answered within the bound, either way.
    let answered = |c: &mut Chaos, args: &[&str]| -> bool {
        let out = c.docker(args);
        c.counts.checks += 1;
        if out.elapsed >= REQUEST_BOUND {
            count!(c, failed_requests, "`docker {}` unanswered", args.join(" "));
        }
        eprintln!(
            "disk full: `docker {}` -> {} {}",
            args.join(" "),
            out.code(),
            out.stderr.trim()
        );
        out.success()
    };
    let ran = answered(
        &mut c,
        &[
            "run", "-d", "--name", "during", "busybox", "sleep", "100000",
        ],
    );
    let stopped = answered(&mut c, &["stop", "stopme"]);
    let removed = answered(&mut c, &["rm", "-f", "rmme"]);
    // Creates whose records alone outgrow what the store has left (a
    // 100 KiB label each): the store itself must refuse a write.
    let big = format!("big={}", "x".repeat(100 * 1024));
    let mut created = Vec::new();
    for i in 0..4 {
        let name = format!("big{i}");
        if answered(
            &mut c,
            &["create", "--name", &name, "--label", &big, "busybox"],
        ) {
            created.push(name);
        }
    }
    // Writes of the store alone (redb may hold free pages in its file, so
    // that these succeed, or not): each answered, and afterwards the
    // container has exactly one of its names.
    let mut name = "keep";
    for i in 0..20 {
        let to = if i % 2 == 0 { "keep-b" } else { "keep" };
        if answered(&mut c, &["rename", name, to]) {
            name = to;
        }
    }
    if let Some(p) = keep {
        c.check(name, Truth::Running(p));
    }

    std::fs::remove_file(&ballast).expect("remove the ballast");
    c.wait_usable();
    let listed = c.listed();
    if listed.contains("keep") == listed.contains("keep-b") {
        count!(
            c,
            stale_states,
            "keep is listed as neither or both of its names"
        );
    }
    if listed.contains("keep-b") {
        c.must(&["rename", "keep-b", "keep"]);
    }
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    // What failed left nothing behind; what was answered done is so.
    let listed = c.listed();
    if !ran && listed.contains("during") {
        count!(c, half_created, "`run` of during failed, yet it is listed");
    }
    for i in 0..4 {
        let name = format!("big{i}");
        if listed.contains(&name) != created.contains(&name) {
            count!(
                c,
                half_created,
                "{name}: create answered {}, listed {}",
                created.contains(&name),
                listed.contains(&name)
            );
        }
    }
    if ran {
        let running = c.state("during").is_some_and(|s| s["Running"] == true);
        if !running {
            count!(c, stale_states, "during was answered run but does not run");
        }
    }
    // A stop refused while full is asked again.
    let stopped = stopped || stopme.is_some() && c.must(&["stop", "stopme"]).is_some();
    if stopped {
        let truth = c.stop_truth("stopme");
        c.check("stopme", truth);
    }
    if removed {
        if c.listed().contains("rmme") {
            count!(c, stale_states, "rmme was answered removed but is listed");
        }
        if rmme.is_some_and(|p| p.is_alive()) {
            count!(
                c,
                stale_states,
                "rmme was answered removed but its process runs"
            );
        }
    } else if rmme.is_some() {
        c.must(&["rm", "-f", "rmme"]);
    }
    c.must(&["run", "--rm", "busybox", "true"]);

    // Nothing corrupt: a restarted holdfastd finds every record.
    let before = c.listed();
    c.engine.kill_engine();
    c.engine.restart_engine();
    let after = c.listed();
    for name in before.difference(&after) {
        count!(c, lost_containers, "{name} is gone after a restart");
    }
    if let Some(p) = keep {
        c.check("keep", Truth::Running(p));
    }
    c.audit();
    c.finish();
}
