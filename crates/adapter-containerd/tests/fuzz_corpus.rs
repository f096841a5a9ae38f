//! Replays the committed corpus of the `decode_event` fuzz target on stable:
//! nothing panics, and the well-formed seeds decode to the event they encode.

use holdfast_adapter_containerd::decode_fuzz_input;
use holdfast_core::ContainerdEvent;
use std::path::Path;

/// The committed seeds of the fuzz target `target`, by file name, in order
/// (at least ten).
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the {target} corpus is committed: {e}"))
        .map(|entry| entry.expect("readable corpus entry").path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "corpus too small: {files:?}");
    files
        .into_iter()
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            (name, std::fs::read(&path).expect("readable corpus file"))
        })
        .collect()
}

#[test]
fn decode_event_corpus_replays() {
    for (name, data) in corpus("decode_event") {
        let name = name.as_str();
        let decoded = decode_fuzz_input(&data);
        if name.starts_with("valid-") {
            let event = decoded
                .clone()
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .unwrap_or_else(|| panic!("{name}: ignored"));
            let container = match &event {
                ContainerdEvent::TaskExit { container, .. }
                | ContainerdEvent::TaskStart { container, .. }
                | ContainerdEvent::TaskCreate { container, .. }
                | ContainerdEvent::TaskOom { container, .. }
                | ContainerdEvent::TaskDelete { container, .. }
                | ContainerdEvent::TaskPaused { container }
                | ContainerdEvent::TaskResumed { container } => container,
            };
            assert_eq!(container.as_str(), "c1", "{name}: {event:?}");
        }
        if name == "valid-task-exit-slash-url" {
            let Ok(Some(ContainerdEvent::TaskExit { exited_at, .. })) = decoded else {
                panic!("{name}: not a TaskExit");
            };
            assert_eq!(
                exited_at,
                holdfast_core::WallTime::UNIX_EPOCH,
                "Go's zero time means none"
            );
        }
        if name == "bad-container-id" {
            assert!(
                decoded.is_err(),
                "an invalid container id is an error: {decoded:?}"
            );
        }
    }
}

/// The `image_documents` corpus: nothing panics, `ok-*` seeds are read and
/// `bad-*` ones refused.
#[test]
fn image_documents_corpus_replays() {
    for (name, data) in corpus("image_documents") {
        let accepted = holdfast_adapter_containerd::image_document_fuzz_input(&data);
        if name.starts_with("ok-") {
            assert!(accepted, "{name}: refused");
        } else if name.starts_with("bad-") {
            assert!(!accepted, "{name}: accepted");
        }
    }
}
