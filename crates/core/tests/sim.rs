//! The deterministic simulator (crates/sim), run from inside holdfast-core so
//! that a mutation tool working on this crate alone counts it:
//! `cargo mutants -p holdfast-core -- --test sim --test properties` measures
//! the proof (properties and simulator) without the handler tests.
//!
//! The full CI range of seeds runs in crates/sim/tests/seeds.rs; this runs a
//! smaller range (`SIM_RUNS` seeds from `SIM_SEED`, 400 from 0 by default)
//! and the committed fuzz corpus.

use holdfast_sim::{SimOptions, run_seed};
use std::path::Path;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

#[test]
fn simulator_seeds_hold_every_invariant() {
    let first = env_u64("SIM_SEED").unwrap_or(0);
    let runs = env_u64("SIM_RUNS").unwrap_or(400);
    let opts = SimOptions::default();
    for seed in first..first + runs {
        if let Err(failure) = run_seed(seed, &opts) {
            panic!("{failure}");
        }
    }
}

#[test]
fn simulator_fuzz_corpus_holds_every_invariant() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/transitions");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    files.sort();
    for file in files.iter().filter(|p| p.is_file()) {
        let Ok(bytes) = std::fs::read(file) else {
            panic!("cannot read {}", file.display())
        };
        if let Err(failure) = holdfast_sim::fuzz_one(&bytes) {
            panic!("corpus file {}:\n{failure}", file.display());
        }
    }
}
