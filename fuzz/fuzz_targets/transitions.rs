//! Fuzz bytes decoded into transitions (user commands, time, faults), run
//! through the deterministic simulator with every invariant checked.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(failure) = holdfast_sim::fuzz_one(data) {
        panic!("{failure}");
    }
});
