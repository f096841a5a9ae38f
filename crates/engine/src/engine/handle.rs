//! How every API reaches the engine: an [`EngineHandle`], cheap to clone.
//! A command goes to the loop with a oneshot for its answer; a read runs
//! against the core's views inside the loop, so `ps` and `inspect` never
//! read a copy that can drift.

use super::View;
use super::services::Services;
use holdfast_core::{Answer, Api, Command, ContainerId, ErrorKind, RequestError, RequestId};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

pub(super) type ReadFn = Box<dyn FnOnce(&View<'_>) + Send>;
pub(super) type MakeCommand = Box<dyn FnOnce(ContainerId) -> Command + Send>;

/// What a handle asks of the loop.
pub(super) enum Request {
    Command {
        req: RequestId,
        api: Api,
        command: Command,
        reply: oneshot::Sender<Answer>,
    },
    /// A command for the container `reference` names, resolved in the loop
    /// in the same step (see [`EngineHandle::container_command`]).
    ContainerCommand {
        req: RequestId,
        api: Api,
        reference: String,
        make: MakeCommand,
        accepted: oneshot::Sender<Result<ContainerId, RequestError>>,
        reply: oneshot::Sender<Answer>,
    },
    Cancel(RequestId),
    Read(ReadFn),
    /// Ask containerd whether it answers (see [`EngineHandle::probe_containerd`]).
    ProbeContainerd,
    Shutdown,
}

/// The engine went away (holdfastd is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("holdfastd is shutting down")]
pub struct EngineGone;

/// A request the engine could not take: 503, as containerd being away.
impl From<EngineGone> for RequestError {
    fn from(e: EngineGone) -> RequestError {
        RequestError::new(ErrorKind::Unavailable, e.to_string())
    }
}

/// How API handlers reach the engine. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EngineHandle {
    tx: mpsc::UnboundedSender<Request>,
    next_req: Arc<AtomicU64>,
    /// The API whose commands this handle sends: the core decides what
    /// each may change (see [`Api`]).
    api: Api,
    /// What the backends use besides the loop.
    pub(crate) services: Arc<Services>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Command {
                req, api, command, ..
            } => write!(f, "Command({req}, {api:?}, {command:?})"),
            Request::ContainerCommand {
                req,
                api,
                reference,
                ..
            } => {
                write!(f, "ContainerCommand({req}, {api:?}, {reference:?})")
            }
            Request::Cancel(req) => write!(f, "Cancel({req})"),
            Request::Read(_) => f.write_str("Read"),
            Request::ProbeContainerd => f.write_str("ProbeContainerd"),
            Request::Shutdown => f.write_str("Shutdown"),
        }
    }
}

impl EngineHandle {
    pub(super) fn new(tx: mpsc::UnboundedSender<Request>, services: Services) -> EngineHandle {
        EngineHandle {
            tx,
            next_req: Arc::new(AtomicU64::new(0)),
            api: Api::Docker,
            services: Arc::new(services),
        }
    }

    /// The same engine, its commands sent as `api`'s: the handle the CRI
    /// serves with (the engine's own handle is the Docker API's).
    pub fn for_api(&self, api: Api) -> EngineHandle {
        EngineHandle {
            api,
            ..self.clone()
        }
    }

    /// Sends a command and waits for its answer. If the caller stops waiting
    /// (the client hung up), the request is cancelled: a wait is dropped, any
    /// other command goes on, because what it asked for was recorded.
    pub async fn command(&self, command: Command) -> Answer {
        let req = self.next_request();
        let (reply, answer) = oneshot::channel();
        let sent = self.tx.send(Request::Command {
            req,
            api: self.api,
            command,
            reply,
        });
        if sent.is_err() {
            return gone_answer();
        }
        let mut guard = CancelOnDrop {
            tx: self.tx.clone(),
            req: Some(req),
        };
        let answer = answer.await.unwrap_or_else(|_| gone_answer());
        guard.req = None;
        answer
    }

    /// Sends the command `make` builds for the container `reference` names
    /// (a name, full id or unique id prefix) and waits for its answer. The
    /// reference is resolved inside the loop, in the same step as the
    /// command is fed to the core: no separate resolve round trip, and
    /// nothing in between. One that names no container is answered with
    /// the core's refusal (404, or ambiguous).
    pub async fn container_command(
        &self,
        reference: &str,
        make: impl FnOnce(ContainerId) -> Command + Send + 'static,
    ) -> Answer {
        match self.container_command_accepted(reference, make).await {
            Ok(pending) => pending.answer().await,
            Err(e) => Answer::Error(e),
        }
    }

    /// As [`EngineHandle::container_command`], but returns once the
    /// reference is resolved and the command fed, with its answer still to
    /// come: for a response whose status must go before the answer
    /// (`docker wait` sends its headers at once, a missing container
    /// still being a 404).
    pub async fn container_command_accepted(
        &self,
        reference: &str,
        make: impl FnOnce(ContainerId) -> Command + Send + 'static,
    ) -> Result<PendingAnswer, RequestError> {
        let req = self.next_request();
        let (reply, answer) = oneshot::channel();
        let (accepted, resolved) = oneshot::channel();
        let sent = self.tx.send(Request::ContainerCommand {
            req,
            api: self.api,
            reference: reference.to_owned(),
            make: Box::new(make),
            accepted,
            reply,
        });
        if sent.is_err() {
            return Err(EngineGone.into());
        }
        // From here a caller that goes away cancels the request.
        let guard = CancelOnDrop {
            tx: self.tx.clone(),
            req: Some(req),
        };
        let id = resolved.await.unwrap_or_else(|_| Err(EngineGone.into()))?;
        Ok(PendingAnswer { id, answer, guard })
    }

    fn next_request(&self) -> RequestId {
        RequestId(self.next_req.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// Runs `read` against the core inside the loop and returns its result.
    pub async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&View<'_>) -> T + Send + 'static,
    ) -> Result<T, EngineGone> {
        let (reply, result) = oneshot::channel();
        let f: ReadFn = Box::new(move |view| {
            let _ = reply.send(read(view));
        });
        self.tx.send(Request::Read(f)).map_err(|_| EngineGone)?;
        result.await.map_err(|_| EngineGone)
    }

    /// Resolves a name, full id or unique id prefix.
    pub async fn resolve(&self, reference: &str) -> Result<ContainerId, RequestError> {
        let reference = reference.to_owned();
        self.read(move |v| v.core.resolve(&reference)).await?
    }

    /// containerd may serve again (the supervisor restarted it and its
    /// socket accepts): one call finds out, and if it answers the core
    /// learns so at once (`ConnectionFact::Connected`) instead of at its
    /// next reconnect attempt.
    pub fn probe_containerd(&self) {
        let _ = self.tx.send(Request::ProbeContainerd);
    }

    /// Asks the loop to stop after the input it is handling.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Request::Shutdown);
    }
}

/// A command fed to the core whose answer is still to come. Dropped before
/// it came, the request is cancelled (see [`EngineHandle::command`]).
#[derive(Debug)]
pub struct PendingAnswer {
    id: ContainerId,
    answer: oneshot::Receiver<Answer>,
    guard: CancelOnDrop,
}

impl PendingAnswer {
    /// The container the reference named.
    pub fn id(&self) -> &ContainerId {
        &self.id
    }

    /// Waits for the core's answer.
    pub async fn answer(mut self) -> Answer {
        let answer = (&mut self.answer).await.unwrap_or_else(|_| gone_answer());
        self.guard.req = None;
        answer
    }
}

fn gone_answer() -> Answer {
    Answer::Error(RequestError::new(
        ErrorKind::Unavailable,
        "holdfastd is shutting down; what was recorded will be carried out when it is back",
    ))
}

/// Cancels a request whose caller stopped waiting before the answer came.
#[derive(Debug)]
struct CancelOnDrop {
    tx: mpsc::UnboundedSender<Request>,
    req: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(req) = self.req.take() {
            let _ = self.tx.send(Request::Cancel(req));
        }
    }
}
