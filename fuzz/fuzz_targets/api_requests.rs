//! What a client controls in a Docker API request (a create body, `filters=`,
//! `since=`/`until=`, a whole query string), fed to the daemon's pure
//! decoders: they must never panic, refuse with a 4xx that says why, and
//! decode only configs the core can hold. The body lives in the API crate
//! (`holdfast_api_docker::fuzz::fuzz_api_request`) so the corpus is replayed on
//! stable by `crates/api-docker/tests/fuzz_corpus.rs`.
#![no_main]

use holdfast_api_docker::fuzz::fuzz_api_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_api_request(data);
});
