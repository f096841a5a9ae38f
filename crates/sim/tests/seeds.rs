//! The simulator in CI: a few hundred seeds, each a safety phase with its own
//! fault profile and a liveness phase; determinism; and proof that the
//! simulator has teeth (each deliberate core bug is found).
//!
//! `SIM_SEED` and `SIM_RUNS` pick other seeds for `many_seeds_hold_every_invariant`.

use holdfast_core::{CoreConfig, DeliberateBug};
use holdfast_sim::{SimOptions, Summary, check_determinism, run_seed};

/// Seeds run by default; a slow two-core CI machine takes seconds.
const SEEDS_DEFAULT: u64 = 2_000;

/// Each deliberate bug must be found within this many seeds.
const SEEDS_TO_FIND_A_BUG: u64 = 200;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn many_seeds_hold_every_invariant() {
    let first = env_u64("SIM_SEED").unwrap_or(0);
    let runs = env_u64("SIM_RUNS").unwrap_or(if env_u64("SIM_SEED").is_some() {
        1
    } else {
        SEEDS_DEFAULT
    });
    let opts = SimOptions::default();
    let mut summary = Summary::default();
    for seed in first..first + runs {
        match run_seed(seed, &opts) {
            Ok(stats) => summary.add(&stats),
            Err(failure) => panic!("{failure}"),
        }
    }
    println!("{summary}");
    assert_eq!(summary.seeds, runs);
    assert!(
        summary.faults.total() > runs,
        "the seeds injected too few faults: {summary}"
    );
    for kind in holdfast_sim::FaultKind::ALL {
        assert!(
            summary.faults.get(kind) > 0 || runs < 50,
            "no {kind} fault in {runs} seeds"
        );
    }
}

/// Seeds outside CI's range that once found a bug in the core, each fixed
/// with a handler test: kept, so that the bug cannot come back unseen (as
/// long as the simulator draws these worlds the same way).
const SEEDS_THAT_FOUND_BUGS: [u64; 13] = [
    44_701,  // a stop while a refused policy start's task was deleted
    45_374,  // a relist that could not settle asked for no other
    400_519, // a stop during a lost create, then the task's own exit
    421_896, // a policy start cut by a crash, restored as a user's
    33_621,  // an earlier run's OOM event, late, taken for the next run's
    403_372, // the same, another world
    43_804,  // a reused pid after a crash, told from the last run by nothing
    411_794, // a SIGKILL during a policy start, whose failure re-armed it
    6_123,   // a start sent to a created task whose delete's answer was lost
    22_343,  // (the checker's) a restart owed after a user's start failed
    51_406,  // the same, another world
    111_415, // an OOM of a task whose create's answer was lost
    7_763,   // a pod removed while one of its containers was being made
];

#[test]
fn seeds_that_once_found_bugs_hold_every_invariant() {
    let opts = SimOptions::default();
    for seed in SEEDS_THAT_FOUND_BUGS {
        if let Err(failure) = run_seed(seed, &opts) {
            panic!("{failure}");
        }
    }
}

#[test]
fn a_seed_replays_bit_for_bit() {
    let opts = SimOptions::default();
    for seed in 0..10 {
        if let Err(message) = check_determinism(seed, &opts) {
            panic!("{message}");
        }
    }
}

#[test]
fn different_seeds_differ() {
    let opts = SimOptions {
        hash_trace: true,
        ..SimOptions::default()
    };
    let a = run_seed(1, &opts).map(|s| s.trace_hash);
    let b = run_seed(2, &opts).map(|s| s.trace_hash);
    assert!(a.is_ok() && b.is_ok());
    assert_ne!(a.ok(), b.ok(), "two seeds gave the same action trace");
}

/// Runs seeds with `bug` switched on until one fails with a message of the
/// expected class (so the bug is found by the invariant it breaks, not by
/// some unrelated failure); returns that seed and the failure's message.
fn first_failure(bug: DeliberateBug, classes: &[&str]) -> Option<(u64, String)> {
    let core_config = CoreConfig {
        deliberate_bug: Some(bug),
        ..SimOptions::default().core_config
    };
    let opts = SimOptions {
        core_config,
        ..SimOptions::default()
    };
    (0..SEEDS_TO_FIND_A_BUG).find_map(|seed| {
        let message = run_seed(seed, &opts).err()?.to_string();
        classes
            .iter()
            .any(|class| message.contains(class))
            .then_some((seed, message))
    })
}

fn assert_found(bug: DeliberateBug, classes: &[&str]) {
    match first_failure(bug, classes) {
        Some((seed, message)) => {
            assert!(
                message.contains(&format!("reproduce with SIM_SEED={seed}")),
                "{message}"
            );
            println!(
                "{bug:?} found by seed {seed}:\n{}",
                message.lines().next().unwrap_or("")
            );
        }
        None => panic!("{bug:?} went unnoticed by {classes:?} for {SEEDS_TO_FIND_A_BUG} seeds"),
    }
}

#[test]
fn finds_stream_error_taken_as_exit() {
    assert_found(DeliberateBug::StreamErrorIsExit, &["but the truth is"]);
}

#[test]
fn finds_late_exit_overwriting_the_first() {
    assert_found(
        DeliberateBug::LateExitOverwrites,
        &["recorded 2 times", "changed from"],
    );
}

#[test]
fn finds_skipped_relist_after_reconnect() {
    assert_found(
        DeliberateBug::SkipRelistAfterReconnect,
        &["shown running", "was never recorded", "while blind"],
    );
}

#[test]
fn finds_kill_before_stop_deadline() {
    assert_found(
        DeliberateBug::KillBeforeStopDeadline,
        &["before its stop's grace period ended"],
    );
}

#[test]
fn finds_prune_removing_volumes_in_use() {
    assert_found(
        DeliberateBug::PruneIgnoresUsers,
        &[
            "removed while container",
            "recorded as made, its directory is gone",
        ],
    );
}

#[test]
fn finds_the_docker_api_changing_a_pod() {
    assert_found(
        DeliberateBug::DockerApiChangesPods,
        &["the core must refuse was answered"],
    );
}

/// A pod's sandbox created without its start (RunPodSandbox as two
/// steps): one made and never started.
#[test]
fn finds_a_sandbox_started_apart_from_its_create() {
    assert_found(
        DeliberateBug::SandboxStartedApart,
        &["a pod's sandbox made and never started"],
    );
}

/// A task create refused as existing retried for ever, where a create
/// cut halfway left its bundle behind: the start never fails, never
/// happens.
#[test]
fn finds_a_leftover_retried_for_ever() {
    assert_found(
        DeliberateBug::LeftoverRetriedForEver,
        &["after containerd was left refusing its every create"],
    );
}

#[test]
fn finds_an_exec_exit_taken_as_its_container_exit() {
    assert_found(
        DeliberateBug::ExecExitIsContainerExit,
        &["an exec's end changed its container"],
    );
}

#[test]
fn finds_a_stale_address_in_the_record() {
    assert_found(DeliberateBug::StaleAllocation, &["recorded with 10.88."]);
}

/// pouch #2519: a run that ended while holdfastd was down, found exited
/// at start-up, taken as stopped by its user: no policy restart.
#[test]
fn finds_an_exit_found_at_start_up_taken_as_a_user_stop() {
    assert_found(
        DeliberateBug::ExitFoundAtStartupIsUserStop,
        &["its restart policy calls for a start"],
    );
}

/// An exec's exit between an OOM event and its container's exit taken as
/// the end of the OOM's run, where no cgroup count says otherwise.
#[test]
fn finds_an_exec_exit_erasing_the_oom_evidence() {
    assert_found(
        DeliberateBug::ExecExitErasesOom,
        &["the exit is recorded without OOM"],
    );
}

/// A commit of a running container, and holdfastd killed while it reads:
/// rare among random seeds (the window is the read's), so scripted.
fn commit_cut_by_a_crash() -> Vec<holdfast_sim::Transition> {
    use holdfast_sim::{FaultKind, Transition as T, UserOp};
    vec![
        T::User(UserOp::Create {
            policy: 0,
            auto_remove: false,
            stop_timeout_s: None,
            stop_signal: 0,
        }),
        T::Advance(100),
        T::User(UserOp::Start(0)),
        T::Advance(500),
        T::User(UserOp::Snapshot(0, 0)),
        T::Advance(20),
        T::Fault(FaultKind::DaemonCrash, 0),
    ]
}

#[test]
fn finds_a_commit_thaw_not_recorded() {
    let script = commit_cut_by_a_crash();
    let with_bug = SimOptions {
        core_config: CoreConfig {
            deliberate_bug: Some(DeliberateBug::CommitThawNotRecorded),
            ..SimOptions::default().core_config
        },
        ..SimOptions::default()
    };
    let found = (0..SEEDS_TO_FIND_A_BUG).find(|seed| {
        holdfast_sim::run_script(*seed, &script, &with_bug)
            .err()
            .is_some_and(|f| {
                f.message.contains("no user paused it")
                    || f.message.contains("a commit's thaw still owed")
            })
    });
    let Some(seed) = found else {
        panic!("CommitThawNotRecorded went unnoticed for {SEEDS_TO_FIND_A_BUG} scripted seeds");
    };
    // The same script and seed hold every invariant on the real core.
    let passed = holdfast_sim::run_script(seed, &script, &SimOptions::default());
    assert!(
        passed.is_ok(),
        "{}",
        passed.err().map(|f| f.to_string()).unwrap_or_default()
    );
    println!("CommitThawNotRecorded found by scripted seed {seed}");
}
