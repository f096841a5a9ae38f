//! The `cri_requests` fuzz entry: what kubelet (or anyone on the socket)
//! controls in a request, as protobuf bytes, decoded and fed to the pure
//! translations the handlers use, with their properties checked. The
//! cargo-fuzz target in `fuzz/` and the corpus replay test
//! (`tests/fuzz_corpus.rs`, on stable) both call [`fuzz_cri_request`].
//!
//! The first byte picks the request, the rest is its protobuf encoding:
//!
//! | byte | request | translation |
//! | --- | --- | --- |
//! | `r` | `RunPodSandboxRequest` | the sandbox's name and config |
//! | `c` | `CreateContainerRequest` | the container's name and config, in a running sandbox |
//! | `u` | `UpdateContainerResourcesRequest` | the core's resource update |
//! | `p` | `PullImageRequest` | the credentials |
//! | other | (none) | ignored |

use crate::containers::{container_config, resource_update};
use crate::images::pull_auth;
use crate::pods::sandbox_config;
use holdfast_core::{
    ContainerConfig, ContainerId, NetworkMode, PodMember, PodRole, Record, Status as Run,
    TaskState, WallTime,
};
use holdfast_engine::backend::containers::Snapshot;
use k8s_cri::v1 as cri;
use prost::Message as _;
use std::sync::Arc;
use tonic::{Code, Status};

/// What an input did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The bytes are no such request (protobuf refused them), or no
    /// request was picked.
    Undecodable,
    Accepted,
    /// Refused with this status code.
    Refused(Code),
}

/// Decodes and translates one input; panics when a property fails.
pub fn fuzz_cri_request(data: &[u8]) -> Outcome {
    let Some((&pick, bytes)) = data.split_first() else {
        return Outcome::Undecodable;
    };
    match pick {
        b'r' => match cri::RunPodSandboxRequest::decode(bytes) {
            Ok(r) => run_pod_sandbox(r),
            Err(_) => Outcome::Undecodable,
        },
        b'c' => match cri::CreateContainerRequest::decode(bytes) {
            Ok(r) => create_container(r),
            Err(_) => Outcome::Undecodable,
        },
        b'u' => match cri::UpdateContainerResourcesRequest::decode(bytes) {
            Ok(r) => outcome(
                r.linux
                    .map(|l| resource_update(l, &holdfast_core::Resources::default()))
                    .transpose()
                    .map(|_| ()),
            ),
            Err(_) => Outcome::Undecodable,
        },
        b'p' => match cri::PullImageRequest::decode(bytes) {
            Ok(r) => {
                let auth = pull_auth(r.auth);
                if let Ok(auth) = &auth {
                    // Credentials never show in a Debug print.
                    let shown = format!("{auth:?}");
                    assert!(!shown.contains("password:"), "{shown}");
                }
                outcome(auth.map(|_| ()))
            }
            Err(_) => Outcome::Undecodable,
        },
        _ => Outcome::Undecodable,
    }
}

fn run_pod_sandbox(r: cri::RunPodSandboxRequest) -> Outcome {
    let Some(config) = r.config else {
        return Outcome::Refused(Code::InvalidArgument);
    };
    let translated = sandbox_config(config);
    if let Ok((name, c)) = &translated {
        assert!(name.starts_with("k8s_POD_"), "{name}");
        assert_one_name(name);
        assert!(
            matches!(&c.pod, Some(p) if p.role == PodRole::Sandbox),
            "{c:?}"
        );
        assert!(matches!(c.network, NetworkMode::Bridge | NetworkMode::Host));
        for p in &c.ports {
            assert!(p.container_port > 0, "{p:?}");
        }
        assert_round_trips(c);
    }
    outcome(translated.map(|_| ()))
}

fn create_container(r: cri::CreateContainerRequest) -> Outcome {
    let Some(config) = r.config else {
        return Outcome::Refused(Code::InvalidArgument);
    };
    let sandbox = running_sandbox();
    let translated = container_config(config, &sandbox, "busybox".to_owned(), "busybox".to_owned());
    if let Ok((name, c)) = &translated {
        assert!(
            name.starts_with("k8s_") && !name.starts_with("k8s_POD_"),
            "{name}"
        );
        assert_one_name(name);
        assert!(
            matches!(&c.pod, Some(PodMember { role: PodRole::Container { sandbox, .. }, .. })
                if sandbox == sandbox_id()),
            "{c:?}"
        );
        assert_eq!(c.network, NetworkMode::Container);
        for m in &c.mounts {
            assert!(
                m.source.starts_with('/') && m.destination.starts_with('/'),
                "{m:?}"
            );
        }
        assert_round_trips(c);
    }
    outcome(translated.map(|_| ()))
}

/// A refusal is `InvalidArgument` (or `NotFound`) with a message.
fn outcome(result: Result<(), Status>) -> Outcome {
    match result {
        Ok(()) => Outcome::Accepted,
        Err(s) => {
            assert!(
                matches!(s.code(), Code::InvalidArgument | Code::NotFound),
                "{s:?}"
            );
            assert!(!s.message().is_empty(), "a refusal without a message");
            Outcome::Refused(s.code())
        }
    }
}

/// A name made of kubelet's metadata stays one name: nothing that would
/// read as a path or a second field of another's.
fn assert_one_name(name: &str) {
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')),
        "{name}"
    );
}

/// What is recorded reads back the same from the store.
fn assert_round_trips(c: &ContainerConfig) {
    let json = serde_json::to_vec(c).unwrap_or_else(|e| panic!("{e}: {c:?}"));
    let back: ContainerConfig = serde_json::from_slice(&json).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&back, c);
}

fn sandbox_id() -> &'static str {
    "5a4dbee0c0ffee0000000000000000000000000000000000000000000000cafe"
}

fn running_sandbox() -> Snapshot {
    let id: ContainerId = sandbox_id().parse().unwrap_or_else(|e| panic!("{e:?}"));
    let mut record = Record::new(id, WallTime::from_unix_nanos(1));
    record.config = Arc::new(ContainerConfig {
        pod: Some(PodMember {
            role: PodRole::Sandbox,
            pod_name: "web".to_owned(),
            pod_uid: "u1".to_owned(),
            pod_namespace: "default".to_owned(),
            attempt: 0,
            annotations: Default::default(),
            log_path: Some("/var/log/pods/default_web_u1".to_owned()),
            image_ref: None,
        }),
        ..ContainerConfig::default()
    });
    Snapshot {
        record,
        status: Run::Running,
        task: TaskState::Running { pid: 42 },
        confirmed: true,
        paused: false,
        health: None,
    }
}

/// Hand-written seeds, `(name, input)`: the corpus's first files (written
/// by `cargo run -p holdfast-api-cri --example cri_seeds`) and the replay
/// test's checks. Named `<request>-<ok|bad>-<what>`: `ok` ones are
/// accepted, `bad` ones refused.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    use prost::Message as _;
    let tagged = |pick: u8, bytes: Vec<u8>| {
        let mut v = vec![pick];
        v.extend(bytes);
        v
    };
    let meta = || cri::PodSandboxMetadata {
        name: "web".to_owned(),
        uid: "u1".to_owned(),
        namespace: "default".to_owned(),
        attempt: 1,
    };
    let pod = |c: cri::PodSandboxConfig| {
        tagged(
            b'r',
            cri::RunPodSandboxRequest {
                config: Some(c),
                runtime_handler: String::new(),
            }
            .encode_to_vec(),
        )
    };
    let container = |c: cri::ContainerConfig| {
        tagged(
            b'c',
            cri::CreateContainerRequest {
                pod_sandbox_id: sandbox_id().to_owned(),
                config: Some(c),
                sandbox_config: None,
            }
            .encode_to_vec(),
        )
    };
    let app = || cri::ContainerConfig {
        metadata: Some(cri::ContainerMetadata {
            name: "app".to_owned(),
            attempt: 0,
        }),
        image: Some(cri::ImageSpec {
            image: "busybox".to_owned(),
            ..cri::ImageSpec::default()
        }),
        command: vec!["sh".to_owned()],
        mounts: vec![cri::Mount {
            container_path: "/data".to_owned(),
            host_path: "/srv/data".to_owned(),
            readonly: true,
            ..cri::Mount::default()
        }],
        log_path: "app/0.log".to_owned(),
        ..cri::ContainerConfig::default()
    };
    vec![
        (
            "pod-ok-ports",
            pod(cri::PodSandboxConfig {
                metadata: Some(meta()),
                hostname: "web".to_owned(),
                port_mappings: vec![cri::PortMapping {
                    protocol: 0,
                    container_port: 80,
                    host_port: 8080,
                    host_ip: String::new(),
                }],
                ..cri::PodSandboxConfig::default()
            }),
        ),
        (
            "pod-bad-slash-in-name",
            pod(cri::PodSandboxConfig {
                metadata: Some(cri::PodSandboxMetadata {
                    name: "../web".to_owned(),
                    ..meta()
                }),
                ..cri::PodSandboxConfig::default()
            }),
        ),
        (
            "pod-bad-port",
            pod(cri::PodSandboxConfig {
                metadata: Some(meta()),
                port_mappings: vec![cri::PortMapping {
                    protocol: 0,
                    container_port: 70000,
                    host_port: 0,
                    host_ip: String::new(),
                }],
                ..cri::PodSandboxConfig::default()
            }),
        ),
        ("container-ok-mount", container(app())),
        (
            "container-bad-relative-mount",
            container(cri::ContainerConfig {
                mounts: vec![cri::Mount {
                    container_path: "data".to_owned(),
                    host_path: "/srv".to_owned(),
                    ..cri::Mount::default()
                }],
                ..app()
            }),
        ),
        (
            "container-bad-negative-memory",
            container(cri::ContainerConfig {
                linux: Some(cri::LinuxContainerConfig {
                    resources: Some(cri::LinuxContainerResources {
                        memory_limit_in_bytes: -1,
                        ..cri::LinuxContainerResources::default()
                    }),
                    security_context: None,
                }),
                ..app()
            }),
        ),
        (
            "update-ok-cpu",
            tagged(
                b'u',
                cri::UpdateContainerResourcesRequest {
                    container_id: "x".to_owned(),
                    linux: Some(cri::LinuxContainerResources {
                        cpu_period: 100_000,
                        cpu_quota: 50_000,
                        ..cri::LinuxContainerResources::default()
                    }),
                    ..cri::UpdateContainerResourcesRequest::default()
                }
                .encode_to_vec(),
            ),
        ),
        (
            "pull-ok-auth",
            tagged(
                b'p',
                cri::PullImageRequest {
                    image: None,
                    auth: Some(cri::AuthConfig {
                        auth: "dXNlcjpzZWNyZXQ=".to_owned(),
                        ..cri::AuthConfig::default()
                    }),
                    sandbox_config: None,
                }
                .encode_to_vec(),
            ),
        ),
        (
            "pull-bad-auth",
            tagged(
                b'p',
                cri::PullImageRequest {
                    image: None,
                    auth: Some(cri::AuthConfig {
                        auth: "not base64!".to_owned(),
                        ..cri::AuthConfig::default()
                    }),
                    sandbox_config: None,
                }
                .encode_to_vec(),
            ),
        ),
    ]
}

/// The `spdy_frames` fuzz entry: bytes a SPDY peer controls on the CRI's
/// streaming connection, read as frames (in two pieces, split where the
/// first byte says, as a socket may hand them over) until they run out or
/// are refused. Reading never panics and never takes a frame that is not
/// all there; every frame read is written and read back unchanged (its
/// header block through a fresh pair of zlib streams). The number of
/// frames read.
pub fn fuzz_spdy_frames(data: &[u8]) -> usize {
    use crate::streaming::spdy::frame::{Frame, Reader, Writer};
    use bytes::BytesMut;
    let split = data.first().map_or(0, |&b| usize::from(b).min(data.len()));
    let mut reader = Reader::default();
    let mut buf = BytesMut::from(&data[..split]);
    let mut frames = Vec::new();
    let mut read = |buf: &mut BytesMut, frames: &mut Vec<Frame>| loop {
        match reader.read(buf) {
            Ok(Some(frame)) => frames.push(frame),
            Ok(None) => return true,
            Err(_) => return false,
        }
    };
    if read(&mut buf, &mut frames) {
        buf.extend_from_slice(&data[split..]);
        read(&mut buf, &mut frames);
    }
    let (mut writer, mut again) = (Writer::default(), Reader::default());
    // What this end passes over (SETTINGS, HEADERS, unknown types) it
    // never writes: the rest must come back as they were read.
    for frame in frames.iter().filter(|f| !matches!(f, Frame::Other { .. })) {
        let mut wire = BytesMut::new();
        if writer.write(frame, &mut wire).is_err() {
            continue;
        }
        let back = again.read(&mut wire);
        assert_eq!(back.as_ref().ok().and_then(Option::as_ref), Some(frame));
        assert!(wire.is_empty());
    }
    frames.len()
}
