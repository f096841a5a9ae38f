//! Replays the committed corpus of the `api_requests` fuzz target on stable,
//! through the same entry the cargo-fuzz target calls: every property holds
//! (nothing panics, refusals are 4xx that say why, decoded configs are sound).
//!
//! Corpus files are named `<decoder>-<expect>-<what>`: the decoder
//! (`create`, `exec`, `filters`, `time`, `query`, `pull`) is the one the first byte picks,
//! and `ok` seeds must be accepted, `bad` ones refused (`any` and files the
//! fuzzer added, which have hash names, may go either way).

use holdfast_api_docker::fuzz::{Decoder, fuzz_api_request};
use std::path::{Path, PathBuf};

fn corpus() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/api_requests");
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
fn api_requests_corpus_replays() {
    let files = corpus();
    assert!(
        files.len() >= 12,
        "the corpus shrank to {} files",
        files.len()
    );
    let (mut named, mut accepted) = (0, 0);
    for file in &files {
        let Ok(data) = std::fs::read(file) else {
            panic!("cannot read {}", file.display())
        };
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let outcome = fuzz_api_request(&data);
        accepted += usize::from(outcome.accepted);
        let mut parts = name.splitn(3, '-');
        let decoder = match parts.next() {
            Some("create") => Decoder::CreateBody,
            Some("exec") => Decoder::ExecBody,
            Some("filters") => Decoder::Filters,
            Some("time") => Decoder::ClientTime,
            Some("query") => Decoder::Query,
            Some("pull") => Decoder::Pull,
            Some("push") => Decoder::Push,
            _ => continue,
        };
        named += 1;
        assert_eq!(outcome.decoder, decoder, "{name}: the first byte");
        match parts.next() {
            Some("ok") => assert!(outcome.accepted, "{name}: refused"),
            Some("bad") => assert!(!outcome.accepted, "{name}: accepted"),
            Some("any") => {}
            other => panic!("{name}: want ok, bad or any after the decoder, not {other:?}"),
        }
    }
    assert!(named >= 12, "only {named} hand-made seeds");
    assert!(accepted > 0, "no seed decodes");
}

#[test]
fn the_real_cli_body_decodes() {
    let body = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus/api_requests/create-ok-docker-run-d"),
    )
    .expect("the docker run -d seed is committed");
    let Some((b'c', json)) = body.split_first() else {
        panic!("the seed starts with c");
    };
    let (config, warnings) = holdfast_api_docker::decode_create(json).expect("decodes");
    assert_eq!(config.image, "busybox");
    assert_eq!(
        config.cmd,
        Some(vec!["sleep".to_owned(), "1000".to_owned()])
    );
    assert!(
        warnings.is_empty(),
        "the default bridge network: {warnings:?}"
    );
    assert_eq!(config.network, holdfast_core::NetworkMode::Bridge);
}

#[test]
fn any_short_input_holds() {
    for selector in 0..=255u8 {
        for len in 0..24usize {
            let mut data = vec![selector];
            data.extend((0..len).map(|i| b"{}[]\":,0123456789-.TZtrue"[(i * 7 + len) % 25]));
            fuzz_api_request(&data);
        }
    }
}
