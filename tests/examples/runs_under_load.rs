//! Many `docker run -d` at once on a machine under CPU load, holdfastd and
//! dockerd side by side (engines alternated round by round, the same
//! hogs running through all of it): what each CLI was told, and whether
//! what it was told held afterwards. A CLI told its run failed whose
//! container then runs, or one told it started whose container does not,
//! is a lie this counts. Run by bench/runs-under-load.sh; by hand (as
//! root, with dockerd installed):
//!
//! ```sh
//! cargo build --release -p holdfastd
//! cargo run --release -p holdfast-e2e --example runs_under_load -- OUT_DIR [MANY] [HOGS] [ROUNDS]
//! ```
//!
//! Writes `OUT_DIR/rounds.jsonl`, one line per engine and round.

use holdfast_e2e::engine::{Dockerd, Engine, Holdfast};
use holdfast_e2e::lines;
use serde_json::json;
use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longer than any engine keeps a start's request open (holdfast: 420 s).
const CLI_BOUND: Duration = Duration::from_secs(900);
const BOUND: Duration = Duration::from_secs(120);
/// States are read until they have not changed for this long.
const STABLE_FOR: Duration = Duration::from_secs(30);
/// ... or for at most this long after the last CLI answered.
const SETTLE_MAX: Duration = Duration::from_secs(600);

/// CPU-bound processes, killed when dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn start(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("start a hog")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

fn rm_all(e: &dyn Engine) {
    let out = e.docker(&["ps", "-a", "-q"], BOUND);
    let ids = lines(&out.stdout);
    for chunk in ids.chunks(50) {
        let mut args = vec!["rm", "-f"];
        args.extend(chunk.iter().map(String::as_str));
        e.docker(&args, CLI_BOUND);
    }
}

/// Each `l*` container's state, by name (`running`, `created`, ...;
/// `missing` when the engine has none).
fn states(e: &dyn Engine, many: usize) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = (0..many)
        .map(|i| (format!("l{i}"), "missing".to_owned()))
        .collect();
    let listed = e.docker(&["ps", "-a", "--format", "{{.Names}} {{.State}}"], BOUND);
    for row in lines(&listed.stdout) {
        if let Some((name, state)) = row.split_once(' ')
            && let Some(slot) = out.get_mut(name)
        {
            *slot = state.to_owned();
        }
    }
    out
}

struct Told {
    ok: bool,
    secs: f64,
    said: String,
}

fn round(e: &dyn Engine, round: usize, many: usize, dir: &Path, out: &mut fs::File) {
    rm_all(e);
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let t0 = Instant::now();
    let runs: Vec<_> = (0..many)
        .map(|i| {
            let n = format!("l{i}");
            e.spawn_docker(
                &["run", "-d", "--name", &n, "busybox", "sleep", "100000"],
                CLI_BOUND,
            )
        })
        .collect();
    let told: Vec<Told> = runs
        .into_iter()
        .map(|r| {
            let o = r.finish();
            Told {
                ok: o.success(),
                secs: o.elapsed.as_secs_f64(),
                // The error, not a warning printed before it.
                said: o
                    .stderr
                    .lines()
                    .find(|l| !l.starts_with("WARNING"))
                    .unwrap_or_default()
                    .to_owned(),
            }
        })
        .collect();
    let answered = t0.elapsed();
    // What holds afterwards: states read until they stop changing.
    let mut last = states(e, many);
    let mut since = Instant::now();
    let settle_start = Instant::now();
    while since.elapsed() < STABLE_FOR && settle_start.elapsed() < SETTLE_MAX {
        std::thread::sleep(Duration::from_secs(3));
        let now = states(e, many);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
    let state = |i: usize| last.get(&format!("l{i}")).cloned().unwrap_or_default();
    let count = |f: &dyn Fn(usize) -> bool| (0..many).filter(|i| f(*i)).count();
    let told_ok = count(&|i| told[i].ok);
    let ok_not_running = count(&|i| told[i].ok && state(i) != "running");
    // Each answer that did not hold, by name and state, to be looked
    // into: with its inspect and the engine's logs, beside the rounds.
    let breaches: BTreeMap<String, String> = (0..many)
        .filter(|&i| told[i].ok != (state(i) == "running"))
        .map(|i| (format!("l{i}"), state(i)))
        .collect();
    let failed_running = count(&|i| !told[i].ok && state(i) == "running");
    if !breaches.is_empty() {
        let mut report = String::new();
        for (name, state) in &breaches {
            let inspect = e.docker(&["inspect", name], BOUND);
            report.push_str(&format!("== {name}: {state}\n{}\n", inspect.stdout));
        }
        report.push_str(&e.diagnostics());
        let path = dir.join(format!("breaches-{}-{round}.txt", e.name()));
        fs::write(&path, report).expect("write the breaches");
    }
    let mut secs: Vec<f64> = told.iter().map(|t| t.secs).collect();
    secs.sort_by(f64::total_cmp);
    let mut said: BTreeMap<String, usize> = BTreeMap::new();
    for t in told.iter().filter(|t| !t.ok) {
        *said.entry(t.said.chars().take(160).collect()).or_default() += 1;
    }
    let line = json!({
        "engine": e.name(),
        "round": round,
        "many": many,
        "load_at_start": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        "all_answered_s": answered.as_secs_f64(),
        "cli_median_s": secs.get(many / 2),
        "cli_max_s": secs.last(),
        "told_started": told_ok,
        "told_failed": many - told_ok,
        "told_started_not_running": ok_not_running,
        "told_failed_running_after": failed_running,
        "running_after": count(&|i| state(i) == "running"),
        "breaches": breaches,
        "failures_said": said,
    });
    eprintln!("{line}");
    writeln!(out, "{line}").expect("write a round");
    // The engine's whole log so far: why a run failed (a connection
    // judged lost, a call that found no answer) is told there.
    if told_ok < many || !breaches.is_empty() {
        let to = dir.join(format!("log-{}-{round}.txt", e.name()));
        if let Err(err) = fs::copy(e.engine_log(), &to) {
            eprintln!("cannot keep {}: {err}", to.display());
        }
    }
    rm_all(e);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next().map(PathBuf::from) else {
        eprintln!("usage: runs_under_load OUT_DIR [MANY] [HOGS] [ROUNDS] [holdfast,dockerd]");
        std::process::exit(2);
    };
    let many: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200);
    let hogs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(28);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2);
    fs::create_dir_all(&dir).expect("create the output directory");
    let mut out = fs::File::create(dir.join("rounds.jsonl")).expect("create rounds.jsonl");
    // Which engines, named: both unless told (a run of one alone, to
    // measure a change of that one).
    let names = args.next().unwrap_or_else(|| "holdfast,dockerd".to_owned());
    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    for name in names.split(',') {
        match name {
            "holdfast" => engines.push(Box::new(Holdfast::start())),
            "dockerd" => engines.push(Box::new(Dockerd::start())),
            other => {
                eprintln!("unknown engine {other:?}: holdfast or dockerd");
                std::process::exit(2);
            }
        }
    }
    for e in &engines {
        // Warm caches (image, binaries); not recorded.
        e.docker(&["run", "--rm", "busybox", "true"], BOUND);
    }
    let hogs = Hogs::start(hogs);
    for r in 0..rounds {
        // Alternated, so that neither always runs on the machine the
        // other's round left behind.
        let mut order: Vec<&dyn Engine> = engines.iter().map(AsRef::as_ref).collect();
        if r % 2 == 1 {
            order.reverse();
        }
        for e in order {
            round(e, r, many, &dir, &mut out);
        }
    }
    drop(hogs);
}
