//! Image manifests, indexes and configs come from registries and tarballs:
//! reading them must never panic, whatever the bytes. The body lives in the
//! adapter (`image_document_fuzz_input`) so the corpus is replayed on stable
//! by `crates/adapter-containerd/tests/fuzz_corpus.rs`.
#![no_main]

use holdfast_adapter_containerd::image_document_fuzz_input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = image_document_fuzz_input(data);
});
