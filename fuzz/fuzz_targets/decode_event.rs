//! decode_event must never panic, whatever containerd (or a corrupted stream)
//! sends: any type url, any bytes. The body lives in the adapter
//! (`decode_fuzz_input`) so the corpus is replayed on stable by
//! `crates/adapter-containerd/tests/fuzz_corpus.rs`.
#![no_main]

use holdfast_adapter_containerd::decode_fuzz_input;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_fuzz_input(data);
});
