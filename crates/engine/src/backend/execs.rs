//! `docker exec`: create, start (detached, or a session like attach),
//! inspect and resize, each a command of the core, which decides whether
//! an exec may be created or started, starts it, and records how it ended.
//! This backend sets up the session's I/O: the process's output goes
//! through the logger into a log file of its own, read back as attach
//! reads a container's, and the client's input goes to its stdin FIFO.

use crate::engine::EngineHandle;
use crate::logs::{self, LogOptions};
use crate::refusal::{conflict, internal, invalid};
use crate::stdio::{self, DetachKeys, Escape, Input, OnClose, Output};
use bytes::Bytes;
use futures_util::stream::StreamExt as _;
use holdfast_core::{Answer, Command, ContainerId, ErrorKind, ExecSpec, ExecState, RequestError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// The execs backend: see the module docs.
#[derive(Debug)]
pub struct Execs<'a> {
    engine: &'a EngineHandle,
}

/// What a start made of an exec.
pub enum ExecStarted {
    /// Detached: it runs on its own (its log and stdin go once it exits).
    Detached,
    /// Attached: its output until it exits, and the client's input to its
    /// stdin.
    Attached(ExecSession),
}

impl std::fmt::Debug for ExecStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExecStarted::Detached => "Detached",
            ExecStarted::Attached(_) => "Attached",
        })
    }
}

/// What removes an exec's log and stdin once its session is over.
pub type Cleanup = Box<dyn FnOnce() + Send>;

/// An attached exec: its output (which lasts as long as the process, even
/// with nothing to show), its input, and the removal of its files once a
/// session on a hijacked connection is over.
pub struct ExecSession {
    output: Output,
    input: Option<Input>,
    cleanup: Cleanup,
}

impl std::fmt::Debug for ExecSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecSession")
            .field("input", &self.input)
            .finish_non_exhaustive()
    }
}

impl ExecSession {
    /// The output, the input, and what removes the exec's log and stdin
    /// once the session on a hijacked connection is over.
    pub fn into_parts(self) -> (Output, Option<Input>, Cleanup) {
        (self.output, self.input, self.cleanup)
    }
}

/// An exec as `exec inspect` shows it: the core's record of it.
#[derive(Clone, Debug)]
pub struct ExecDetails {
    pub id: String,
    pub container: ContainerId,
    pub spec: Arc<ExecSpec>,
    pub state: ExecState,
}

impl<'a> Execs<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Execs<'a> {
        Execs { engine }
    }

    /// `POST /containers/{id}/exec`: an exec of the container a reference
    /// names (the core refuses one of a container not running, or paused).
    /// Its id.
    pub async fn create(&self, container: &str, spec: ExecSpec) -> Result<String, RequestError> {
        let exec_id = new_exec_id()?;
        let (id, spec) = (exec_id.clone(), Arc::new(spec));
        let create = move |container| Command::CreateExec {
            id: container,
            exec_id: id,
            spec,
        };
        match self.engine.container_command(container, create).await {
            Answer::Error(e) => Err(e),
            _ => Ok(exec_id),
        }
    }

    /// The exec, for `exec inspect`.
    pub async fn inspect(&self, exec_id: &str) -> Result<ExecDetails, RequestError> {
        let wanted = exec_id.to_owned();
        self.engine
            .read(move |v| {
                v.core.exec(&wanted).map(|(c, e)| ExecDetails {
                    id: e.id.clone(),
                    container: c.record.id.clone(),
                    spec: Arc::clone(&e.spec),
                    state: e.state,
                })
            })
            .await?
            .ok_or_else(|| {
                RequestError::new(
                    ErrorKind::NotFound,
                    format!("No such exec instance: {exec_id}"),
                )
            })
    }

    /// `POST /exec/{id}/start`, first half: refuses a start the core would
    /// refuse now (before an API has answered anything), and sets up what
    /// must not miss the process: the watch for its end, the output reader
    /// and our end of its stdin. [`PreparedStart::begin`] starts it.
    pub async fn prepare(
        &self,
        exec_id: &str,
        detach: bool,
    ) -> Result<PreparedStart, RequestError> {
        self.prepare_as(exec_id, detach, false).await
    }

    /// [`prepare`](Self::prepare) of an attached session whose input is
    /// plain, as containerd's CRI plugin takes kubelet's: no detach
    /// sequence is watched for, and the end of the client's input closes
    /// the process's stdin, terminal or not.
    pub async fn prepare_plain(&self, exec_id: &str) -> Result<PreparedStart, RequestError> {
        self.prepare_as(exec_id, false, true).await
    }

    async fn prepare_as(
        &self,
        exec_id: &str,
        detach: bool,
        plain_input: bool,
    ) -> Result<PreparedStart, RequestError> {
        let wanted = exec_id.to_owned();
        if let Some(refusal) = self
            .engine
            .read(move |v| v.core.exec_start_refusal(&wanted))
            .await?
        {
            return Err(refusal);
        }
        let exec = self.inspect(exec_id).await?;
        let container = exec.container.clone();
        let adapter = &self.engine.services.adapter;
        let spec = &exec.spec;
        let attached = !detach;
        let log = adapter.exec_log_path(&container, exec_id);
        let ended = self.ended(&container, exec_id);
        let output = (attached && (spec.attach_stdout || spec.attach_stderr)).then(|| {
            let options = LogOptions {
                stdout: spec.attach_stdout,
                stderr: spec.attach_stderr,
                follow: true,
                raw: spec.tty,
                ..LogOptions::default()
            };
            logs::frames(log.clone(), options, ended.future()).boxed()
        });
        let with_stdin = attached && spec.attach_stdin;
        let input = if with_stdin {
            let path = adapter.exec_stdin_path(&container, exec_id);
            let writer = stdio::open_writer(&path)
                .map_err(|e| internal(format!("stdin of exec {exec_id}: {e}")))?;
            let keys = DetachKeys::from_param(spec.detach_keys.as_deref()).map_err(invalid)?;
            Some(Input {
                writer,
                escape: (spec.tty && !plain_input).then(|| Escape::new(keys)),
                on_close: if spec.tty && !plain_input {
                    OnClose::EndSession
                } else {
                    // The session begins once the exec has started: the
                    // shim has its end of the FIFO already.
                    let adapter = adapter.clone();
                    let (container, exec_id) = (container.clone(), exec_id.to_owned());
                    OnClose::CloseStdin {
                        ready: Box::pin(async {}),
                        close: Box::pin(async move {
                            if let Err(e) = adapter.close_stdin(&container, &exec_id).await {
                                tracing::debug!(exec = %exec_id, error = %e, "close stdin");
                            }
                        }),
                    }
                },
            })
        } else {
            None
        };
        let cleanup = {
            let stdin = adapter.exec_stdin_path(&container, exec_id);
            move || {
                let _ = std::fs::remove_file(&log);
                let _ = std::fs::remove_file(&stdin);
            }
        };
        Ok(PreparedStart {
            engine: self.engine.clone(),
            exec_id: exec_id.to_owned(),
            detach,
            tty: spec.tty,
            output,
            input,
            cleanup: Some(Box::new(cleanup)),
            ended,
        })
    }

    /// `POST /exec/{id}/resize`: its terminal, while it runs (the core's
    /// command; a process without a terminal has nothing to resize:
    /// accepted as dockerd does).
    pub async fn resize(&self, exec_id: &str, height: u32, width: u32) -> Result<(), RequestError> {
        // A client resizes as soon as its session is up, which is before
        // the process runs (the 101 goes out first): as dockerd, wait for
        // the start, at most 10 s, then resize (or refuse, if it never ran).
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut exec = self.inspect(exec_id).await?;
        while exec.spec.tty
            && matches!(exec.state, ExecState::Created | ExecState::Starting)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            exec = self.inspect(exec_id).await?;
        }
        if !exec.spec.tty {
            if exec.state.may_run() {
                return Ok(());
            }
            return Err(conflict(format!("Exec {exec_id} is not running")));
        }
        let resize = Command::Resize {
            id: exec.container,
            exec_id: Some(exec_id.to_owned()),
            width,
            height,
        };
        super::volumes::done(self.engine.command(resize).await)
    }

    /// Signals a running exec's process (the CRI's `ExecSync` past its
    /// timeout): the core keeps the signal until containerd has taken it
    /// or the process has ended, through an outage or a restart of
    /// holdfastd, and answers once it has.
    pub async fn kill(
        &self,
        exec_id: &str,
        signal: holdfast_core::Signal,
    ) -> Result<(), RequestError> {
        let kill = Command::KillExec {
            exec_id: exec_id.to_owned(),
            signal,
        };
        super::volumes::done(self.engine.command(kill).await)
    }

    /// Resolves once the core has recorded the exec's end (the `exec_die`
    /// it publishes, from the event or from what containerd said), or its
    /// container's run is over. Subscribed before the core is asked to
    /// start it, so an end is never missed.
    fn ended(&self, container: &ContainerId, exec_id: &str) -> Ended {
        let mut live = self.engine.services.events.live();
        let engine = self.engine.clone();
        let (container, exec_id) = (container.to_string(), exec_id.to_owned());
        let watch = async move {
            loop {
                match live.recv().await {
                    Ok(e)
                        if e.actor_id == container
                            && (e.action == "die"
                                || e.action == "destroy"
                                || e.action == "exec_die"
                                    && e.attributes.get("execID") == Some(&exec_id)) =>
                    {
                        return;
                    }
                    Ok(_) => {}
                    // Events were missed: the core's record says.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        let wanted = exec_id.clone();
                        let over = engine
                            .read(move |v| {
                                v.core.exec(&wanted).is_none_or(|(_, e)| !e.state.may_run())
                            })
                            .await
                            .unwrap_or(true);
                        if over {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        let watch: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(watch);
        Ended(futures_util::FutureExt::shared(watch))
    }
}

/// An exec ready to start: see [`Execs::prepare`].
pub struct PreparedStart {
    engine: EngineHandle,
    exec_id: String,
    detach: bool,
    tty: bool,
    output: Option<Output>,
    input: Option<Input>,
    /// Taken by `begin`; run on drop when the exec was never begun (its
    /// client went away first): the stdin FIFO made for it goes.
    cleanup: Option<Cleanup>,
    ended: Ended,
}

impl Drop for PreparedStart {
    fn drop(&mut self) {
        if let Some(cleanup) = self.cleanup.take() {
            cleanup();
        }
    }
}

impl std::fmt::Debug for PreparedStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedStart")
            .field("exec_id", &self.exec_id)
            .field("detach", &self.detach)
            .finish_non_exhaustive()
    }
}

impl PreparedStart {
    /// Asks the core to start the exec, once. Detached, it runs on its
    /// own (its log and stdin go once it exits); attached, the caller gets
    /// its output until it exits and, when it was created with stdin, its
    /// input.
    pub async fn begin(mut self) -> Result<ExecStarted, RequestError> {
        let start = Command::StartExec {
            exec_id: self.exec_id.clone(),
            detach: self.detach,
        };
        if let Answer::Error(e) = self.engine.command(start).await {
            return Err(e); // dropped: cleaned up
        }
        let cleanup = self.cleanup.take().unwrap_or_else(|| Box::new(|| {}));
        if self.detach {
            let ended = self.ended.future();
            tokio::spawn(async move {
                ended.await;
                cleanup();
            });
            return Ok(ExecStarted::Detached);
        }
        let output = self
            .output
            .take()
            .unwrap_or_else(|| futures_util::stream::empty().boxed());
        // A session with no output still lasts as long as the process.
        let ended = self.ended.future();
        let output = output
            .chain(futures_util::stream::once(async move {
                ended.await;
                Ok(Bytes::new())
            }))
            .boxed();
        Ok(ExecStarted::Attached(ExecSession {
            output,
            input: self.input.take(),
            cleanup,
        }))
    }

    /// [`begin`](Self::begin) for a client that has taken over its
    /// connection already: a start that fails is told in the stream, as
    /// dockerd tells it (exit 126, when the process could not be started,
    /// is recorded by the core).
    pub async fn begin_in_stream(self) -> ExecSession {
        let tty = self.tty;
        match self.begin().await {
            Ok(ExecStarted::Attached(session)) => session,
            Ok(ExecStarted::Detached) => ExecSession {
                output: futures_util::stream::empty().boxed(),
                input: None,
                cleanup: Box::new(|| {}),
            },
            Err(e) => {
                let text = format!("{}\r\n", e.message);
                // On stdout, framed unless a terminal, as dockerd writes it.
                let text = if tty {
                    Bytes::from(text)
                } else {
                    logs::stdout_frame(text.as_bytes())
                };
                let told = futures_util::stream::once(async move { Ok(text) });
                ExecSession {
                    output: told.boxed(),
                    input: None,
                    cleanup: Box::new(|| {}),
                }
            }
        }
    }
}

/// The end of an exec, awaited by its output reader, its session and its
/// cleanup alike.
#[derive(Clone)]
struct Ended(futures_util::future::Shared<Pin<Box<dyn Future<Output = ()> + Send>>>);

impl Ended {
    fn future(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(self.0.clone())
    }
}

/// 64 hex digits from 32 random bytes, as dockerd makes ids.
fn new_exec_id() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for an exec id: {e}")))?;
    Ok(hex::encode(bytes))
}
