//! Replays the committed fuzz corpus through the same entry the cargo-fuzz
//! target calls, on stable and in CI (cargo fuzz itself needs nightly).

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

#[test]
fn transitions_corpus_holds_every_invariant() {
    let files = corpus("transitions");
    assert!(
        files.len() >= 10,
        "the corpus shrank to {} files",
        files.len()
    );
    let mut steps = 0;
    for file in &files {
        let Ok(bytes) = std::fs::read(file) else {
            panic!("cannot read {}", file.display())
        };
        match holdfast_sim::fuzz_one(&bytes) {
            Ok(stats) => {
                println!(
                    "{}: {} steps, {:.0} s simulated, {} faults",
                    file.display(),
                    stats.steps,
                    stats.sim_time.as_secs_f64(),
                    stats.faults.total()
                );
                steps += stats.steps;
            }
            Err(failure) => panic!("corpus file {}:\n{failure}", file.display()),
        }
    }
    assert!(
        steps > 100 * files.len() as u64 / 10,
        "the corpus drove too few steps: {steps}"
    );
}

#[test]
fn any_bytes_decode() {
    for len in 0..64usize {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + len) as u8).collect();
        let (_, transitions) = holdfast_sim::decode(&bytes);
        assert!(transitions.len() <= len);
        if let Err(failure) = holdfast_sim::fuzz_one(&bytes) {
            panic!("{failure}");
        }
    }
}
