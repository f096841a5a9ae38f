//! `holdfast-sim`: runs seeds of the deterministic simulator.
//!
//! ```text
//! holdfast-sim [--seed N] [--runs N] [--safety-secs S] [--determinism] [--quiet]
//! ```
//! `SIM_SEED` and `SIM_RUNS` set the same as `--seed` and `--runs`. Without a
//! seed the first one is drawn from the clock (and printed); with one, a
//! single run unless `--runs` says more. Exits 1 on the first failure, after
//! printing it with the seed that reproduces it.

use holdfast_sim::{SimOptions, Summary, check_determinism, run_seed};
use std::process::ExitCode;
use std::time::Duration;

struct Args {
    seed: Option<u64>,
    runs: Option<u64>,
    safety_secs: Option<u64>,
    determinism: bool,
    quiet: bool,
    keep_going: bool,
    trace: Option<u64>,
    bug: Option<String>,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: holdfast-sim [--seed N] [--runs N] [--safety-secs S] [--determinism] [--quiet] [--keep-going] [--trace LINES] [--bug NAME] [--list-bugs]\n\
         env: SIM_SEED, SIM_RUNS"
    );
    ExitCode::from(2)
}

fn parse() -> Result<Args, String> {
    let env_num = |name: &str| -> Result<Option<u64>, String> {
        match std::env::var(name) {
            Ok(v) if !v.is_empty() => v
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={v} is not a number")),
            _ => Ok(None),
        }
    };
    let mut args = Args {
        seed: env_num("SIM_SEED")?,
        runs: env_num("SIM_RUNS")?,
        safety_secs: None,
        determinism: false,
        quiet: false,
        keep_going: false,
        trace: None,
        bug: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or_else(|| format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name} {v}: not a number"))
        };
        match arg.as_str() {
            "--seed" => args.seed = Some(value("--seed")?),
            "--runs" => args.runs = Some(value("--runs")?),
            "--safety-secs" => args.safety_secs = Some(value("--safety-secs")?),
            "--determinism" => args.determinism = true,
            "--quiet" => args.quiet = true,
            "--keep-going" => args.keep_going = true,
            "--trace" => args.trace = Some(value("--trace")?),
            "--bug" => args.bug = Some(it.next().ok_or("--bug needs a name")?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

#[cfg(feature = "deliberate-bugs")]
fn set_bug(opts: &mut SimOptions, name: &str) -> Result<(), String> {
    let bug = holdfast_core::DeliberateBug::from_name(name)
        .ok_or_else(|| format!("unknown bug {name}"))?;
    opts.core_config.deliberate_bug = Some(bug);
    Ok(())
}

/// The deliberate bugs `--bug` takes, one name per line.
#[cfg(feature = "deliberate-bugs")]
fn list_bugs() -> ExitCode {
    for bug in holdfast_core::DeliberateBug::ALL {
        println!("{bug:?}");
    }
    ExitCode::SUCCESS
}

#[cfg(not(feature = "deliberate-bugs"))]
fn list_bugs() -> ExitCode {
    eprintln!("holdfast-sim: --list-bugs needs the deliberate-bugs feature");
    ExitCode::from(2)
}

#[cfg(not(feature = "deliberate-bugs"))]
fn set_bug(_opts: &mut SimOptions, _name: &str) -> Result<(), String> {
    Err("--bug needs the deliberate-bugs feature: cargo run -p holdfast-sim --features deliberate-bugs".into())
}

fn main() -> ExitCode {
    if std::env::args().skip(1).any(|a| a == "--help" || a == "-h") {
        usage();
        return ExitCode::SUCCESS;
    }
    if std::env::args().skip(1).any(|a| a == "--list-bugs") {
        return list_bugs();
    }
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("holdfast-sim: {message}");
            return usage();
        }
    };
    let mut opts = SimOptions::default();
    if let Some(secs) = args.safety_secs {
        opts.safety = Duration::from_secs(secs);
    }
    if let Some(lines) = args.trace {
        opts.print_trace = true;
        opts.trace_len = usize::try_from(lines).unwrap_or(usize::MAX);
    }
    if let Some(name) = &args.bug
        && let Err(message) = set_bug(&mut opts, name)
    {
        eprintln!("holdfast-sim: {message}");
        return usage();
    }
    let first = args.seed.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        u64::try_from(nanos % u128::from(u32::MAX)).unwrap_or(0)
    });
    let runs = args
        .runs
        .unwrap_or(if args.seed.is_some() { 1 } else { 100 });
    println!("holdfast-sim: {runs} seeds from {first}");
    let started = std::time::Instant::now();
    let mut summary = Summary::default();
    let mut failed = 0u64;
    for seed in first..first.saturating_add(runs) {
        if args.determinism {
            match check_determinism(seed, &opts) {
                Ok(hash) if !args.quiet => {
                    println!("seed {seed}: deterministic, trace hash {hash:#018x}")
                }
                Ok(_) => {}
                Err(message) => {
                    eprintln!("{message}");
                    return ExitCode::FAILURE;
                }
            }
        }
        match run_seed(seed, &opts) {
            Ok(stats) => {
                if !args.quiet {
                    println!(
                        "seed {seed}: ok, {} steps, {:.0} s simulated, {} faults",
                        stats.steps,
                        stats.sim_time.as_secs_f64(),
                        stats.faults.total()
                    );
                }
                summary.add(&stats);
            }
            Err(failure) if args.keep_going => {
                println!(
                    "seed {seed}: FAILED at {:?}: {}",
                    failure.at, failure.message
                );
                failed += 1;
            }
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    summary.elapsed = Some(started.elapsed());
    print!("{summary}");
    if failed > 0 {
        println!("{failed} seeds failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
