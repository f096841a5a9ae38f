//! The adapter's errors and their classification into the core's failure kinds.

use containerd_client::tonic::{Code, Status};
use holdfast_core::{Failure, FailureKind};
use std::time::Duration;

/// Everything that can go wrong in the adapter.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// containerd (or the transport to it) answered a call with an error.
    #[error("{what}: {}", .status.message())]
    Rpc {
        what: &'static str,
        #[source]
        status: Box<Status>,
    },
    /// No answer within the call deadline: the call may or may not have taken effect.
    #[error("{what}: no answer within {timeout:?}")]
    Deadline {
        what: &'static str,
        timeout: Duration,
    },
    /// The image is not in containerd's image store.
    #[error("No such image: {0}")]
    ImageNotFound(String),
    /// The image or a tarball is malformed or unsupported.
    #[error("image: {0}")]
    Image(String),
    /// A registry refused a pull, or the pull failed on the registry's side
    /// (never a sign that containerd is away).
    #[error("{message}")]
    Registry {
        kind: RegistryFailure,
        message: String,
    },
    /// A request the adapter cannot carry out (bad user, bad spec, ...).
    #[error("{0}")]
    Invalid(String),
    /// The event stream ended or failed.
    #[error("event stream: {0}")]
    Stream(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

/// How a pull failed on the registry's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistryFailure {
    /// No such repository or manifest, or no access to it (dockerd's 404).
    NotFound,
    /// The reference itself is malformed.
    Invalid,
    /// Unreachable, cut off, corrupted, too large, or otherwise refused.
    Failed,
}

impl AdapterError {
    pub(crate) fn rpc(what: &'static str) -> impl FnOnce(Status) -> AdapterError {
        move |status| AdapterError::Rpc {
            what,
            status: Box::new(status),
        }
    }

    /// The kind of failure, as the core understands it.
    pub fn kind(&self) -> FailureKind {
        match self {
            AdapterError::Rpc { what, status } if is_task_create_under_way(what, status) => {
                FailureKind::AlreadyExists
            }
            AdapterError::Rpc { status, .. } => classify_status(status),
            AdapterError::Deadline { .. } => FailureKind::Deadline,
            // The Docker API's 404 "No such image", not a bad request.
            AdapterError::ImageNotFound(_) => FailureKind::NotFound,
            AdapterError::Image(_) | AdapterError::Invalid(_) => FailureKind::Invalid,
            AdapterError::Stream(_) => FailureKind::Unavailable,
            AdapterError::Registry { kind, .. } => match kind {
                RegistryFailure::NotFound => FailureKind::NotFound,
                RegistryFailure::Invalid => FailureKind::Invalid,
                RegistryFailure::Failed => FailureKind::Other,
            },
            AdapterError::Io(_) => FailureKind::Other,
        }
    }

    /// Whether this error shows that containerd cannot be reached.
    pub fn is_unreachable(&self) -> bool {
        self.kind() == FailureKind::Unavailable
    }

    pub fn to_failure(&self) -> Failure {
        Failure::new(self.kind(), self.to_string())
    }
}

/// containerd 1.6 answers a `Tasks.Create` for an id whose task bundle is
/// already there, typically because an earlier create of it is still under
/// way (its answer lost to our deadline under load), with `Unknown` "failed
/// to start shim: mkdir <bundle>: file exists". That is errdefs'
/// AlreadyExists in all but its code: the task is being or was created, so
/// the core must look before trying again, never give the start up.
fn is_task_create_under_way(what: &str, status: &Status) -> bool {
    what == "Tasks.Create"
        && status.code() == Code::Unknown
        && status.message().contains("failed to start shim")
        && status.message().ends_with("file exists")
}

/// Classifies a gRPC status. containerd maps its errdefs onto gRPC codes;
/// transport failures arrive as `Unavailable` (connection refused) or as
/// `Unknown` carrying a transport error (a connection that broke mid-call).
pub fn classify_status(status: &Status) -> FailureKind {
    if is_client_timeout(status) {
        return FailureKind::Deadline;
    }
    match status.code() {
        Code::NotFound => FailureKind::NotFound,
        Code::AlreadyExists => FailureKind::AlreadyExists,
        Code::Unavailable => FailureKind::Unavailable,
        Code::FailedPrecondition => FailureKind::FailedPrecondition,
        Code::DeadlineExceeded => FailureKind::Deadline,
        Code::InvalidArgument | Code::OutOfRange | Code::Unimplemented => FailureKind::Invalid,
        Code::Unknown | Code::Internal | Code::Cancelled if is_transport_failure(status) => {
            FailureKind::Unavailable
        }
        _ => FailureKind::Other,
    }
}

/// Whether tonic gave up waiting (the request's `grpc-timeout` expired on
/// our side): the call may or may not have taken effect, and containerd may
/// be merely slow, so this is a deadline, never unreachability.
pub(crate) fn is_client_timeout(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(error) = source {
        if error.is::<containerd_client::tonic::TimeoutExpired>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Whether a status was produced by the transport rather than by containerd:
/// it carries an error source (statuses that come off the wire never do), or
/// its message is one tonic and hyper use for a broken connection. Messages
/// that containerd or runc also produce ("broken pipe" from runc's init,
/// "connection refused" from a shim dial) are containerd's answers, not a
/// sign that containerd is away.
fn is_transport_failure(status: &Status) -> bool {
    if std::error::Error::source(status).is_some() {
        return true;
    }
    let message = status.message().to_ascii_lowercase();
    [
        "transport error",
        "transport is closing",
        "error reading a body from connection",
        "h2 protocol error",
    ]
    .iter()
    .any(|m| message.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_errdefs_map_onto_failure_kinds() {
        let cases = [
            (
                Code::NotFound,
                "container \"x\" in namespace \"n\": not found",
                FailureKind::NotFound,
            ),
            (
                Code::AlreadyExists,
                "id x: already exists",
                FailureKind::AlreadyExists,
            ),
            (
                Code::Unavailable,
                "connection refused",
                FailureKind::Unavailable,
            ),
            (
                Code::FailedPrecondition,
                "namespace is required",
                FailureKind::FailedPrecondition,
            ),
            (Code::DeadlineExceeded, "deadline", FailureKind::Deadline),
            (Code::InvalidArgument, "bad spec", FailureKind::Invalid),
            (
                Code::Unknown,
                "runc create failed: something",
                FailureKind::Other,
            ),
            (Code::Internal, "oops", FailureKind::Other),
        ];
        for (code, message, want) in cases {
            assert_eq!(
                classify_status(&Status::new(code, message)),
                want,
                "{code:?} {message}"
            );
        }
    }

    #[test]
    fn a_task_create_refused_for_an_existing_bundle_is_already_exists() {
        let exists = "failed to start shim: mkdir /run/containerd/io.containerd.runtime.v2.task/ns/abc: file exists";
        let rpc = |what, status| AdapterError::Rpc {
            what,
            status: Box::new(status),
        };
        assert_eq!(
            rpc("Tasks.Create", Status::unknown(exists)).kind(),
            FailureKind::AlreadyExists
        );
        // only that call, that code and that refusal
        assert_eq!(
            rpc("Tasks.Start", Status::unknown(exists)).kind(),
            FailureKind::Other
        );
        assert_eq!(
            rpc("Tasks.Create", Status::internal(exists)).kind(),
            FailureKind::Other
        );
        assert_eq!(
            rpc(
                "Tasks.Create",
                Status::unknown("failed to start shim: exec: no such file")
            )
            .kind(),
            FailureKind::Other
        );
    }

    #[test]
    fn a_broken_connection_is_unavailable_never_an_answer() {
        // What a pending call or stream gets when containerd is SIGKILLed.
        let broken = Status::new(Code::Unknown, "error reading a body from connection");
        assert_eq!(classify_status(&broken), FailureKind::Unavailable);
        let wait = Status::new(Code::Unknown, "transport error");
        assert_eq!(classify_status(&wait), FailureKind::Unavailable);
        // A status whose source is an I/O error came from the transport.
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe");
        let with_source = Status::from_error(Box::new(io));
        assert_eq!(classify_status(&with_source), FailureKind::Unavailable);
    }

    #[test]
    fn containerd_errors_that_mention_pipes_are_answers_not_outages() {
        let runc = Status::new(
            Code::Unknown,
            "OCI runtime create failed: runc create failed: unable to start container process: error during container init: write init-p: broken pipe: unknown",
        );
        assert_eq!(classify_status(&runc), FailureKind::Other);
        let shim = Status::new(
            Code::Unknown,
            "dial unix /run/x.sock: connect: connection refused",
        );
        assert_eq!(classify_status(&shim), FailureKind::Other);
    }

    #[test]
    fn a_client_side_timeout_is_a_deadline_not_an_outage() {
        let timeout = Status::from_error(Box::new(containerd_client::tonic::TimeoutExpired(())));
        assert_eq!(classify_status(&timeout), FailureKind::Deadline);
        let error = AdapterError::rpc("Tasks.Kill")(timeout);
        assert_eq!(error.kind(), FailureKind::Deadline);
        assert!(!error.is_unreachable());
    }

    #[test]
    fn adapter_errors_classify() {
        let deadline = AdapterError::Deadline {
            what: "Tasks.Kill",
            timeout: Duration::from_secs(1),
        };
        assert_eq!(deadline.to_failure().kind, FailureKind::Deadline);
        assert_eq!(
            AdapterError::ImageNotFound("busybox".into()).kind(),
            FailureKind::NotFound
        );
        let rpc = AdapterError::rpc("Tasks.Start")(Status::new(Code::NotFound, "no task"));
        assert_eq!(
            rpc.to_failure(),
            Failure::new(FailureKind::NotFound, "Tasks.Start: no task")
        );
        assert!(AdapterError::rpc("x")(Status::unavailable("down")).is_unreachable());
    }
}
