//! decode_event must never panic, whatever containerd (or a corrupted stream)
//! sends: any type url, any bytes.
#![no_main]

use holdfast_adapter_containerd::decode_event;
use libfuzzer_sys::fuzz_target;

const TYPE_URLS: [&str; 8] = [
    "containerd.events.TaskExit",
    "containerd.events.TaskStart",
    "containerd.events.TaskCreate",
    "containerd.events.TaskOOM",
    "containerd.events.TaskDelete",
    "containerd.events.TaskExecStarted",
    "/containerd.events.TaskExit",
    "types.googleapis.com/containerd.events.TaskDelete",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    match TYPE_URLS.get(usize::from(selector)) {
        Some(type_url) => {
            let _ = decode_event(type_url, rest);
        }
        None => {
            // The type url itself is fuzzed: its length comes from the selector.
            let split = usize::from(selector) % (rest.len() + 1);
            let (url, bytes) = rest.split_at(split);
            let _ = decode_event(&String::from_utf8_lossy(url), bytes);
        }
    }
});
