//! `logs` and `attach`: both read the json-file log that the logger (this
//! binary, run by the shim) writes, so output reaches them live and keeps
//! being recorded while holdfastd is down. Input goes the other way, into
//! the stdin FIFO the shim reads (see [`crate::stdio`]).

use super::Containers;
use crate::logs::{self, LogOptions, Stopped};
use crate::refusal::{internal, invalid};
use crate::stdio::{self, DetachKeys, Escape, Input, OnClose, Output};
use futures_util::stream::StreamExt as _;
use holdfast_core::{ContainerId, ErrorKind, LogDriver, RequestError, Status};

/// A container's log as frames (or the bytes alone, for a TTY).
pub struct LogStream {
    pub frames: Output,
    /// The container has a TTY: its output is one stream, unframed.
    pub tty: bool,
}

impl std::fmt::Debug for LogStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStream")
            .field("tty", &self.tty)
            .finish_non_exhaustive()
    }
}

/// What `attach` asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttachOptions {
    pub stdout: bool,
    pub stderr: bool,
    /// The log so far too.
    pub logs: bool,
    /// Output from now until the container stops.
    pub stream: bool,
    /// The client's input into the container's stdin (a container created
    /// with `-i` only, as dockerd).
    pub stdin: bool,
    /// `detachKeys`, as the CLI spells them.
    pub detach_keys: Option<String>,
    /// The input is plain, as containerd's CRI plugin takes kubelet's: no
    /// detach sequence is watched for, and its end closes the stdin of a
    /// container created `stdin_once`, terminal or not.
    pub plain_input: bool,
    /// The output's bytes alone, without the frame headers that tell
    /// stdout from stderr, terminal or not (dockerd's WebSocket attach,
    /// where the two streams are one).
    pub raw_output: bool,
}

/// An attach: the container's output, and the client's input.
#[derive(Debug)]
pub struct Attached {
    pub output: LogStream,
    pub input: Option<Input>,
}

impl Containers<'_> {
    /// `docker logs`: the container's log as `options` ask; with `follow`,
    /// until it stops.
    pub async fn logs(
        &self,
        reference: &str,
        options: LogOptions,
    ) -> Result<LogStream, RequestError> {
        let s = self.snapshot(reference).await?;
        let id = s.record.id;
        let config = s.record.config;
        if config.log_driver == LogDriver::None {
            // dockerd's words and status for a driver that keeps nothing.
            return Err(RequestError::new(
                ErrorKind::NotImplemented,
                "configured logging driver does not support reading",
            ));
        }
        let tty = config.tty;
        let stopped = self.stopped(&id, true).await?;
        let options = LogOptions {
            raw: tty,
            ..options
        };
        let log = self.engine.services.adapter.log_path(&id);
        Ok(LogStream {
            frames: logs::frames(log, options, stopped).boxed(),
            tty,
        })
    }

    /// `docker attach`: the container's output from now on (with `logs`,
    /// the past too) until it stops, and, with `stdin`, the client's input
    /// into its stdin.
    pub async fn attach(
        &self,
        reference: &str,
        options: AttachOptions,
    ) -> Result<Attached, RequestError> {
        let s = self.snapshot(reference).await?;
        let id = s.record.id;
        let config = s.record.config;
        let AttachOptions {
            stdout,
            stderr,
            logs: logs_too,
            stream,
            stdin,
            detach_keys,
            plain_input,
            raw_output,
        } = options;
        let log_options = LogOptions {
            stdout,
            stderr,
            tail: if logs_too { None } else { Some(0) },
            since_nanos: None,
            until_nanos: None,
            timestamps: false,
            follow: stream,
            raw: config.tty || raw_output,
        };
        let adapter = &self.engine.services.adapter;
        // Stdin is attached only to a container created with `-i`, as dockerd does.
        let input = if stdin && stream && config.open_stdin {
            let keys = DetachKeys::from_param(detach_keys.as_deref()).map_err(invalid)?;
            let path = adapter.stdin_path(&id);
            let writer = stdio::open_writer(&path)
                .map_err(|e| internal(format!("stdin of {id} ({}): {e}", path.display())))?;
            Some(Input {
                writer,
                escape: (config.tty && !plain_input).then(|| Escape::new(keys)),
                on_close: if config.tty && !plain_input {
                    OnClose::EndSession
                } else if config.stdin_once {
                    let adapter = adapter.clone();
                    let id = id.clone();
                    OnClose::CloseStdin {
                        ready: self.task_exists(&id).await?,
                        close: Box::pin(async move {
                            if let Err(e) = adapter.close_stdin(&id, "").await {
                                tracing::debug!(container = %id, error = %e, "close stdin");
                            }
                        }),
                    }
                } else {
                    OnClose::KeepStdin
                },
            })
        } else {
            None
        };
        // With `logs` only, the past; with `stream`, from now until the next exit.
        let stopped = self.stopped(&id, !stream).await?;
        let frames = logs::frames(adapter.log_path(&id), log_options, stopped).boxed();
        Ok(Attached {
            output: LogStream {
                frames,
                tty: config.tty,
            },
            input,
        })
    }

    /// Resolves once the container is no longer running: at once if it is
    /// not running now (with `now_counts`), else at its next `die` or
    /// `destroy` event.
    async fn stopped(&self, id: &ContainerId, now_counts: bool) -> Result<Stopped, RequestError> {
        // Subscribe before looking, so an exit in between is not missed.
        let (_, mut live) = self.engine.services.events.subscribe();
        let s = self.snapshot_of(id).await?;
        if now_counts && !matches!(s.status, Status::Running | Status::Restarting) {
            return Ok(Box::pin(async {}));
        }
        let id = id.to_string();
        Ok(Box::pin(async move {
            loop {
                match live.recv().await {
                    Ok(e) if e.actor_id == id && (e.action == "die" || e.action == "destroy") => {
                        return;
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }))
    }

    /// Resolves once the container's task exists (it has started, or ended,
    /// or the container is gone): from then on the shim holds its end of
    /// the stdin FIFO, and what was written before is not lost when the
    /// last writer goes.
    async fn task_exists(&self, id: &ContainerId) -> Result<Stopped, RequestError> {
        let (_, mut live) = self.engine.services.events.subscribe();
        if self.snapshot_of(id).await?.status != Status::Created {
            return Ok(Box::pin(async {}));
        }
        let id = id.to_string();
        Ok(Box::pin(async move {
            loop {
                match live.recv().await {
                    Ok(e)
                        if e.actor_id == id
                            && matches!(e.action.as_str(), "start" | "die" | "destroy") =>
                    {
                        return;
                    }
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }))
    }
}
