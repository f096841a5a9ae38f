//! `docker exec`: create, start (detached, or a session like attach),
//! inspect and resize. The process runs through the adapter; its output
//! goes through the logger into a log file of its own, read back as attach
//! reads a container's; its end is recorded by [`execs::watch_exit`].

use crate::engine::EngineHandle;
use crate::execs::{self, Exec, ExecSpec, ExecState};
use crate::logs::{self, LogOptions};
use crate::refusal::adapter_failure;
use crate::refusal::{conflict, internal, invalid};
use crate::stdio::{self, DetachKeys, Escape, Input, OnClose, Output};
use bytes::Bytes;
use futures_util::stream::StreamExt as _;
use holdfast_adapter_containerd::ExecRequest;
use holdfast_core::{ErrorKind, RequestError, Status};
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
    /// It could not start, and the client took over the connection: the
    /// reason, as the stream it reads (exit 126 is recorded, as dockerd).
    FailedInStream(Output),
}

impl std::fmt::Debug for ExecStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExecStarted::Detached => "Detached",
            ExecStarted::Attached(_) => "Attached",
            ExecStarted::FailedInStream(_) => "FailedInStream",
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

impl<'a> Execs<'a> {
    pub(crate) fn new(engine: &'a EngineHandle) -> Execs<'a> {
        Execs { engine }
    }

    /// `POST /containers/{id}/exec`: an exec of the container a reference
    /// names, which must be running and not paused. Its id.
    pub async fn create(&self, container: &str, spec: ExecSpec) -> Result<String, RequestError> {
        let s = self.engine.containers().snapshot(container).await?;
        let id = s.record.id;
        if s.status != Status::Running {
            return Err(not_running(id.as_str()));
        }
        if s.paused {
            return Err(paused(id.as_str()));
        }
        let exec_id = new_exec_id()?;
        self.engine.services.execs.insert(exec_id.clone(), id, spec);
        Ok(exec_id)
    }

    /// The exec, for `exec inspect`.
    pub fn inspect(&self, exec_id: &str) -> Result<Arc<Exec>, RequestError> {
        self.engine.services.execs.get(exec_id).ok_or_else(|| {
            RequestError::new(
                ErrorKind::NotFound,
                format!("No such exec instance: {exec_id}"),
            )
        })
    }

    /// `POST /exec/{id}/start`: runs the exec, once, while its container
    /// runs. Unless `detach`, the caller gets its output (and, when it was
    /// created with stdin, its input); `hijack` says the caller took over
    /// the connection, where a start that fails is told in the stream.
    pub async fn start(
        &self,
        exec_id: &str,
        detach: bool,
        hijack: bool,
    ) -> Result<ExecStarted, RequestError> {
        let exec = self.inspect(exec_id)?;
        let container = exec.container.clone();
        let s = self.engine.containers().snapshot_of(&container).await?;
        if s.status != Status::Running {
            return Err(not_running(container.as_str()));
        }
        if s.paused {
            return Err(paused(container.as_str()));
        }
        if !exec.begin() {
            return Err(conflict(format!(
                "Exec command {exec_id} has already run or is running"
            )));
        }
        let services = &self.engine.services;
        let adapter = &services.adapter;
        let spec = &exec.spec;
        let attached = !detach;
        let log = adapter.exec_log_path(&container, exec_id);
        // Everything that must not miss the process is set up before it
        // starts: the exit watch, the output reader and our end of its stdin.
        let live = services.events.subscribe().1;
        let output = (attached && (spec.attach_stdout || spec.attach_stderr)).then(|| {
            let options = LogOptions {
                stdout: spec.attach_stdout,
                stderr: spec.attach_stderr,
                follow: true,
                raw: spec.tty,
                ..LogOptions::default()
            };
            logs::frames(log.clone(), options, Box::pin(exec.exited()))
        });
        let with_stdin = attached && spec.attach_stdin;
        let input = if with_stdin {
            let path = adapter.exec_stdin_path(&container, exec_id);
            let writer = stdio::open_writer(&path)
                .map_err(|e| internal(format!("stdin of exec {exec_id}: {e}")))?;
            let keys = DetachKeys::from_param(spec.detach_keys.as_deref()).map_err(invalid)?;
            Some(Input {
                writer,
                escape: spec.tty.then(|| Escape::new(keys)),
                on_close: if spec.tty {
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
        let request = ExecRequest {
            exec_id: exec_id.to_owned(),
            args: spec.cmd.clone(),
            env: spec.env.clone(),
            working_dir: spec.working_dir.clone(),
            user: spec.user.clone(),
            log_file: Some(log.clone()),
            tty: spec.tty,
            stdin: with_stdin,
        };
        let started = adapter.exec(&container, &request).await;
        let cleanup = {
            let stdin = adapter.exec_stdin_path(&container, exec_id);
            move || {
                let _ = std::fs::remove_file(&log);
                let _ = std::fs::remove_file(&stdin);
            }
        };
        match started {
            Ok(pid) => {
                exec.set(ExecState::Running { pid });
                tokio::spawn(execs::watch_exit(adapter.clone(), Arc::clone(&exec), live));
            }
            Err(e) => {
                // As dockerd: a process that could not be started is exit
                // 126, and an attached client reads why in its stream.
                exec.set(ExecState::Exited { code: Some(126) });
                cleanup();
                let message = format!("exec failed: {e}");
                tracing::debug!(exec = %exec_id, %message);
                if !(attached && hijack) {
                    return Err(RequestError {
                        message,
                        ..adapter_failure(e)
                    });
                }
                let text = format!("{message}\r\n");
                // On stdout, framed unless a terminal, as dockerd writes it.
                let text = if spec.tty {
                    Bytes::from(text)
                } else {
                    logs::stdout_frame(text.as_bytes())
                };
                let told = futures_util::stream::once(async move { Ok(text) });
                return Ok(ExecStarted::FailedInStream(told.boxed()));
            }
        }
        if !attached {
            let exited = exec.exited();
            tokio::spawn(async move {
                exited.await;
                cleanup();
            });
            return Ok(ExecStarted::Detached);
        }
        let output = match output {
            Some(frames) => frames.boxed(),
            None => futures_util::stream::empty().boxed(),
        };
        // A session with no output still lasts as long as the process.
        let exited = exec.exited();
        let output = output
            .chain(futures_util::stream::once(async move {
                exited.await;
                Ok(Bytes::new())
            }))
            .boxed();
        Ok(ExecStarted::Attached(ExecSession {
            output,
            input,
            cleanup: Box::new(cleanup),
        }))
    }

    /// `POST /exec/{id}/resize`: its terminal, while it runs (a process
    /// without a terminal has nothing to resize: accepted as dockerd does).
    pub async fn resize(&self, exec_id: &str, height: u32, width: u32) -> Result<(), RequestError> {
        let exec = self.inspect(exec_id)?;
        if !matches!(exec.state(), ExecState::Running { .. }) {
            return Err(conflict(format!("Exec {exec_id} is not running")));
        }
        if exec.spec.tty {
            self.engine
                .services
                .adapter
                .resize_terminal(&exec.container, exec_id, width, height)
                .await
                .map_err(adapter_failure)?;
        }
        Ok(())
    }
}

fn not_running(container: &str) -> RequestError {
    conflict(format!("Container {container} is not running"))
}

fn paused(container: &str) -> RequestError {
    conflict(format!(
        "Container {container} is paused, unpause the container before exec"
    ))
}

/// 64 hex digits from 32 random bytes, as dockerd makes ids.
fn new_exec_id() -> Result<String, RequestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| internal(format!("no randomness for an exec id: {e}")))?;
    Ok(hex::encode(bytes))
}
