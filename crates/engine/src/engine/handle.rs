//! How every API reaches the engine: an [`EngineHandle`], cheap to clone.
//! A command goes to the loop with a oneshot for its answer; a read runs
//! against the core's views inside the loop, so `ps` and `inspect` never
//! read a copy that can drift.

use super::View;
use holdfast_core::{Answer, Command, ContainerId, ErrorKind, RequestError, RequestId};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::{mpsc, oneshot};

pub(super) type ReadFn = Box<dyn FnOnce(&View<'_>) + Send>;

/// What a handle asks of the loop.
pub(super) enum Request {
    Command {
        req: RequestId,
        command: Command,
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

/// How API handlers reach the engine. Cheap to clone.
#[derive(Clone, Debug)]
pub struct EngineHandle {
    tx: mpsc::UnboundedSender<Request>,
    next_req: Arc<AtomicU64>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Command { req, command, .. } => write!(f, "Command({req}, {command:?})"),
            Request::Cancel(req) => write!(f, "Cancel({req})"),
            Request::Read(_) => f.write_str("Read"),
            Request::ProbeContainerd => f.write_str("ProbeContainerd"),
            Request::Shutdown => f.write_str("Shutdown"),
        }
    }
}

impl EngineHandle {
    pub(super) fn new(tx: mpsc::UnboundedSender<Request>) -> EngineHandle {
        EngineHandle {
            tx,
            next_req: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Sends a command and waits for its answer. If the caller stops waiting
    /// (the client hung up), the request is cancelled: a wait is dropped, any
    /// other command goes on, because what it asked for was recorded.
    pub async fn command(&self, command: Command) -> Answer {
        let req = RequestId(self.next_req.fetch_add(1, Ordering::Relaxed) + 1);
        let (reply, answer) = oneshot::channel();
        let mut guard = CancelOnDrop {
            tx: self.tx.clone(),
            req: Some(req),
        };
        if self
            .tx
            .send(Request::Command {
                req,
                command,
                reply,
            })
            .is_err()
        {
            guard.req = None;
            return gone_answer();
        }
        let answer = answer.await.unwrap_or_else(|_| gone_answer());
        guard.req = None;
        answer
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
        self.read(move |v| v.core.resolve(&reference))
            .await
            .map_err(|e| RequestError::new(ErrorKind::Unavailable, e.to_string()))?
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

fn gone_answer() -> Answer {
    Answer::Error(RequestError::new(
        ErrorKind::Unavailable,
        "holdfastd is shutting down; what was recorded will be carried out when it is back",
    ))
}

/// Cancels a request whose caller stopped waiting before the answer came.
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
