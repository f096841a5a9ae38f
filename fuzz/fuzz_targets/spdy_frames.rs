//! What a SPDY peer of the CRI's streaming server controls: the bytes of
//! its frames, read as the connection reads them (in pieces), header
//! blocks inflated with SPDY's dictionary. Never a panic, never a frame
//! taken before it is whole, and every frame read writes and reads back
//! unchanged. The body lives in the API crate
//! (`holdfast_api_cri::fuzz::fuzz_spdy_frames`) so the corpus is replayed
//! on stable by `crates/api-cri/tests/fuzz_corpus.rs`.
#![no_main]

use holdfast_api_cri::fuzz::fuzz_spdy_frames;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fuzz_spdy_frames(data);
});
