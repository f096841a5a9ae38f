//! What a CRI client controls in a request (a pod sandbox config, a
//! container config, a resources update, pull credentials), as protobuf
//! bytes, fed to the translations the CRI handlers use: they must never
//! panic, refuse with `InvalidArgument`/`NotFound` and a message, and make
//! only configs the core can hold and the store reads back. The body lives
//! in the API crate (`holdfast_api_cri::fuzz::fuzz_cri_request`) so the
//! corpus is replayed on stable by `crates/api-cri/tests/fuzz_corpus.rs`.
#![no_main]

use holdfast_api_cri::fuzz::fuzz_cri_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_cri_request(data);
});
