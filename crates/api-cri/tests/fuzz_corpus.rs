//! Replays the committed corpus of the `cri_requests` fuzz target on
//! stable, through the same entry the cargo-fuzz target calls: nothing
//! panics, refusals name why; the hand-written seeds (`<request>-ok-*`
//! accepted, `<request>-bad-*` refused) are checked as built in code too.

use holdfast_api_cri::fuzz::{Outcome, fuzz_cri_request, seeds};
use std::path::Path;

fn expect(name: &str, outcome: &Outcome) {
    if name.contains("-ok-") {
        assert_eq!(*outcome, Outcome::Accepted, "{name}");
    } else if name.contains("-bad-") {
        assert!(
            matches!(outcome, Outcome::Refused(_)),
            "{name}: {outcome:?}"
        );
    }
}

#[test]
fn the_seeds_are_accepted_or_refused_as_named() {
    for (name, input) in seeds() {
        expect(name, &fuzz_cri_request(&input));
    }
}

#[test]
fn cri_requests_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/cri_requests");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut replayed = 0;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Ok(data) = std::fs::read(&path) else {
            panic!("cannot read {}", path.display());
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        expect(name, &fuzz_cri_request(&data));
        replayed += 1;
    }
    assert!(
        replayed >= seeds().len(),
        "the corpus shrank to {replayed} files"
    );
}

#[test]
fn spdy_frames_corpus_replays() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/spdy_frames");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut frames = 0;
    for entry in entries.filter_map(Result::ok) {
        let Ok(data) = std::fs::read(entry.path()) else {
            panic!("cannot read {}", entry.path().display());
        };
        // Split at nothing (a first byte of 0x80 or 0x00 splits early:
        // both pieces are read either way).
        frames += holdfast_api_cri::fuzz::fuzz_spdy_frames(&data);
    }
    // The captured and hand-built seeds hold six frames between them.
    assert!(frames >= 6, "only {frames} frames read from the corpus");
}
