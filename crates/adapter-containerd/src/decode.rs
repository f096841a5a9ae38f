//! Pure decoding of containerd's task events into core events. Fuzzed.

use containerd_client::events::{
    TaskCreate, TaskDelete, TaskExit, TaskOom, TaskPaused, TaskResumed, TaskStart,
};
use holdfast_core::{ContainerId, ContainerdEvent, WallTime};
use prost::Message;

/// Why an event could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{type_url}: malformed protobuf: {message}")]
    Protobuf { type_url: String, message: String },
    #[error("{type_url}: invalid container id {id:?}")]
    ContainerId { type_url: String, id: String },
}

/// Decodes one event by its `Any.type_url` (containerd sends it without a
/// leading `/`, e.g. `containerd.events.TaskExit`; a `types.googleapis.com/`
/// style prefix or a leading `/` is accepted too). Types the core does not
/// need (exec added/started, checkpointed, non-task events) are
/// `Ok(None)`. Never panics, whatever the input.
pub fn decode_event(type_url: &str, bytes: &[u8]) -> Result<Option<ContainerdEvent>, DecodeError> {
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let proto = |e: prost::DecodeError| DecodeError::Protobuf {
        type_url: type_url.to_owned(),
        message: e.to_string(),
    };
    let id = |s: String| {
        s.parse::<ContainerId>()
            .map_err(|_| DecodeError::ContainerId {
                type_url: type_url.to_owned(),
                id: s,
            })
    };
    let event = match name {
        "containerd.events.TaskCreate" => {
            let e = TaskCreate::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskCreate {
                container: id(e.container_id)?,
                pid: e.pid,
            }
        }
        "containerd.events.TaskStart" => {
            let e = TaskStart::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskStart {
                container: id(e.container_id)?,
                pid: e.pid,
                // In the envelope, not the event: set by the stream.
                published_at: None,
            }
        }
        "containerd.events.TaskExit" => {
            let e = TaskExit::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskExit {
                container: id(e.container_id)?,
                exec_id: e.id,
                pid: e.pid,
                exit_status: e.exit_status,
                exited_at: wall_time(e.exited_at.as_ref()).unwrap_or(WallTime::UNIX_EPOCH),
                // Not in the event: the adapter reads the cgroup (crate::oom).
                oom_kills: None,
            }
        }
        "containerd.events.TaskOOM" => {
            let e = TaskOom::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskOom {
                container: id(e.container_id)?,
                // In the envelope, not the event: set by the stream.
                published_at: None,
            }
        }
        "containerd.events.TaskDelete" => {
            let e = TaskDelete::decode(bytes).map_err(proto)?;
            // A TaskDelete of an exec process (id set and not the container's)
            // says nothing about the container's task.
            if !e.id.is_empty() && e.id != e.container_id {
                return Ok(None);
            }
            ContainerdEvent::TaskDelete {
                container: id(e.container_id)?,
                pid: e.pid,
            }
        }
        "containerd.events.TaskPaused" => {
            let e = TaskPaused::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskPaused {
                container: id(e.container_id)?,
            }
        }
        "containerd.events.TaskResumed" => {
            let e = TaskResumed::decode(bytes).map_err(proto)?;
            ContainerdEvent::TaskResumed {
                container: id(e.container_id)?,
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(event))
}

/// Go's zero `time.Time` as a protobuf timestamp.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// A protobuf timestamp as wall time; `None` when absent or Go's zero time
/// (what containerd reports for "has not exited"). Saturates instead of
/// overflowing.
pub fn wall_time(ts: Option<&prost_types::Timestamp>) -> Option<WallTime> {
    let ts = ts?;
    if ts.seconds <= GO_ZERO_TIME_SECONDS {
        return None;
    }
    let nanos = ts
        .seconds
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(ts.nanos));
    Some(WallTime::from_unix_nanos(nanos))
}

/// Type urls the fuzz input's first byte selects; any other first byte makes
/// the type url itself part of the fuzzed input.
const FUZZ_TYPE_URLS: [&str; 8] = [
    "containerd.events.TaskExit",
    "containerd.events.TaskStart",
    "containerd.events.TaskCreate",
    "containerd.events.TaskOOM",
    "containerd.events.TaskDelete",
    "containerd.events.TaskExecStarted",
    "/containerd.events.TaskExit",
    "types.googleapis.com/containerd.events.TaskDelete",
];

/// The `decode_event` fuzz target's body, here so that the committed corpus
/// is replayed by an ordinary test on stable Rust.
#[doc(hidden)]
pub fn decode_fuzz_input(data: &[u8]) -> Result<Option<ContainerdEvent>, DecodeError> {
    let Some((&selector, rest)) = data.split_first() else {
        return Ok(None);
    };
    match FUZZ_TYPE_URLS.get(usize::from(selector)) {
        Some(type_url) => decode_event(type_url, rest),
        None => {
            let split = usize::from(selector) % (rest.len() + 1);
            let (url, bytes) = rest.split_at(split);
            decode_event(&String::from_utf8_lossy(url), bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::Timestamp;

    fn cid(s: &str) -> ContainerId {
        s.parse().expect("valid id")
    }

    #[test]
    fn task_exit_decodes_with_exec_id_and_time() {
        let e = TaskExit {
            container_id: "c1".into(),
            id: "exec-7".into(),
            pid: 42,
            exit_status: 137,
            exited_at: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 5,
            }),
        };
        let got = decode_event("containerd.events.TaskExit", &e.encode_to_vec());
        assert_eq!(
            got,
            Ok(Some(ContainerdEvent::TaskExit {
                container: cid("c1"),
                exec_id: "exec-7".into(),
                pid: 42,
                exit_status: 137,
                exited_at: WallTime::from_unix_nanos(1_700_000_000_000_000_005),
                oom_kills: None,
            }))
        );
        // The same with a leading slash or a type-url prefix.
        assert_eq!(
            got,
            decode_event("/containerd.events.TaskExit", &e.encode_to_vec())
        );
        assert_eq!(
            got,
            decode_event(
                "types.googleapis.com/containerd.events.TaskExit",
                &e.encode_to_vec()
            )
        );
    }

    #[test]
    fn other_task_events_decode() {
        let start = TaskStart {
            container_id: "c1".into(),
            pid: 9,
        };
        assert_eq!(
            decode_event("containerd.events.TaskStart", &start.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskStart {
                container: cid("c1"),
                pid: 9,
                published_at: None,
            }))
        );
        let paused = TaskPaused {
            container_id: "c1".into(),
        };
        assert_eq!(
            decode_event("containerd.events.TaskPaused", &paused.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskPaused {
                container: cid("c1")
            }))
        );
        let resumed = TaskResumed {
            container_id: "c1".into(),
        };
        assert_eq!(
            decode_event("containerd.events.TaskResumed", &resumed.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskResumed {
                container: cid("c1")
            }))
        );
        let oom = TaskOom {
            container_id: "c1".into(),
        };
        assert_eq!(
            decode_event("containerd.events.TaskOOM", &oom.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskOom {
                container: cid("c1"),
                published_at: None,
            }))
        );
        let create = TaskCreate {
            container_id: "c1".into(),
            pid: 3,
            ..Default::default()
        };
        assert_eq!(
            decode_event("containerd.events.TaskCreate", &create.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskCreate {
                container: cid("c1"),
                pid: 3
            }))
        );
        let delete = TaskDelete {
            container_id: "c1".into(),
            pid: 3,
            id: "c1".into(),
            ..Default::default()
        };
        assert_eq!(
            decode_event("containerd.events.TaskDelete", &delete.encode_to_vec()),
            Ok(Some(ContainerdEvent::TaskDelete {
                container: cid("c1"),
                pid: 3
            }))
        );
        let exec_delete = TaskDelete {
            container_id: "c1".into(),
            pid: 4,
            id: "e1".into(),
            ..Default::default()
        };
        assert_eq!(
            decode_event("containerd.events.TaskDelete", &exec_delete.encode_to_vec()),
            Ok(None)
        );
    }

    #[test]
    fn unknown_types_are_ignored_and_garbage_is_an_error() {
        assert_eq!(
            decode_event("containerd.events.TaskCheckpointed", b"\x0a\x02c1"),
            Ok(None)
        );
        assert_eq!(decode_event("", b""), Ok(None));
        assert!(matches!(
            decode_event("containerd.events.TaskExit", b"\xff\xff\xff"),
            Err(DecodeError::Protobuf { .. })
        ));
        let bad_id = TaskStart {
            container_id: "../etc".into(),
            pid: 1,
        };
        assert!(matches!(
            decode_event("containerd.events.TaskStart", &bad_id.encode_to_vec()),
            Err(DecodeError::ContainerId { .. })
        ));
    }

    #[test]
    fn go_zero_time_is_none() {
        assert_eq!(
            wall_time(Some(&Timestamp {
                seconds: GO_ZERO_TIME_SECONDS,
                nanos: 0
            })),
            None
        );
        assert_eq!(wall_time(None), None);
        assert_eq!(
            wall_time(Some(&Timestamp {
                seconds: 1,
                nanos: 2
            })),
            Some(WallTime::from_unix_nanos(1_000_000_002))
        );
        // Saturates rather than overflowing.
        assert!(
            wall_time(Some(&Timestamp {
                seconds: i64::MAX,
                nanos: i32::MAX
            }))
            .is_some()
        );
    }
}
