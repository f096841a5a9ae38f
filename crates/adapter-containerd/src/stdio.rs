//! Where a task's (or an exec's) stdin, stdout and stderr go.
//!
//! Output always reaches the logger (see [`crate::logger`]), which outlives
//! holdfastd. Without stdin, or with a terminal, the shim starts it itself
//! (`binary://`). With stdin and without a terminal that cannot be: the shim
//! copies stdin only when output goes to FIFOs, so holdfast creates the
//! FIFOs, starts the logger on them (detached, in its own process group)
//! before the create call, and tells it when the call is over
//! ([`TaskIo::settle`]).

use crate::client::Adapter;
use crate::container::ensure_fifo;
use crate::error::AdapterError;
use crate::logger::LoggerArgs;
use holdfast_core::ContainerId;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes FIFO names unique per task creation, so that a logger left over by
/// a crash can never share a FIFO with the next one.
static NEXT_FIFO: AtomicU64 = AtomicU64::new(0);

/// The stdio of one create call.
#[derive(Debug)]
pub(crate) struct TaskIo {
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    logger: Option<tokio::process::Child>,
}

impl TaskIo {
    /// Call once the call that connects the output has returned (task create,
    /// exec start), whatever it
    /// returned: a logger holdfast started learns that its FIFOs have their
    /// writer now, or never will (it then sees EOF and exits), and is reaped.
    pub fn settle(mut self) {
        if let Some(mut child) = self.logger.take() {
            drop(child.stdin.take());
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
        }
    }
}

impl Adapter {
    /// `name` is the log's base (`<id>` or `<id>.exec-<exec id>`).
    pub(crate) fn task_io(
        &self,
        id: &ContainerId,
        name: &str,
        logger: LoggerArgs,
        stdin: Option<PathBuf>,
    ) -> Result<TaskIo, AdapterError> {
        let stdin_arg = stdin
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        if stdin.is_none() || logger.tty {
            let uri = logger.uri(self.logger_binary());
            return Ok(TaskIo {
                stdin: stdin_arg,
                stdout: uri.clone(),
                stderr: uri,
                logger: None,
            });
        }
        let n = NEXT_FIFO.fetch_add(1, Ordering::Relaxed);
        let unique = format!("{}-{n}", std::process::id());
        let dir = &self.config().fifo_dir;
        let out = dir.join(format!("{name}.{unique}.stdout"));
        let err = dir.join(format!("{name}.{unique}.stderr"));
        ensure_fifo(&out)?;
        ensure_fifo(&err)?;
        let args = LoggerArgs {
            output_fifos: Some((out.clone(), err.clone())),
            ..logger
        };
        let child = tokio::process::Command::new(self.logger_binary())
            .args(args.to_args())
            .env("CONTAINER_ID", id.as_str())
            .env("CONTAINER_NAMESPACE", self.namespace())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            // Nobody would read it once holdfastd is gone.
            .stderr(Stdio::null())
            // Not killed with holdfastd's process group or its terminal.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                let _ = std::fs::remove_file(&out);
                let _ = std::fs::remove_file(&err);
                AdapterError::Io(std::io::Error::new(
                    e.kind(),
                    format!("start the logger for {name}: {e}"),
                ))
            })?;
        Ok(TaskIo {
            stdin: stdin_arg,
            stdout: out.to_string_lossy().into_owned(),
            stderr: err.to_string_lossy().into_owned(),
            logger: Some(child),
        })
    }
}
