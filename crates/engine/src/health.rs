//! Health probes: the core decides when and what ([`Probe`]), this runs it
//! as an exec in the container, as dockerd does, and reports exactly one
//! [`ProbeResult`] back, whatever happens.
//!
//! The exec's output goes through the logger into a log file of its own,
//! read back once the process is done (bounded to
//! [`PROBE_OUTPUT_MAX_BYTES`]) and then deleted. A probe still running at its
//! timeout is killed and reported as timed out.

use crate::events::EventLog;
use crate::execs::{self, ExecSpec, ExecState, Execs};
use crate::logs::{self, LogOptions};
use futures_util::StreamExt;
use holdfast_adapter_containerd::{Adapter, ExecRequest};
use holdfast_core::health::PROBE_OUTPUT_MAX_BYTES;
use holdfast_core::{Input, Probe, ProbeOutcome, ProbeResult};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long a killed probe may take to be seen gone.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How long reading its output may take once it is gone.
const OUTPUT_WAIT: Duration = Duration::from_secs(5);

/// Runs `probe` and feeds its result to the core.
pub async fn run_probe(
    adapter: Adapter,
    events: Arc<EventLog>,
    sink: mpsc::UnboundedSender<Input>,
    probe: Probe,
) {
    let outcome = outcome(&adapter, &events, &probe).await;
    tracing::debug!(container = %probe.container, probe = probe.probe, ?outcome, "health probe");
    let _ = sink.send(Input::ProbeResult(ProbeResult {
        container: probe.container,
        run: probe.run,
        probe: probe.probe,
        outcome,
    }));
}

async fn outcome(adapter: &Adapter, events: &EventLog, probe: &Probe) -> ProbeOutcome {
    let exec_id = match new_exec_id() {
        Ok(id) => id,
        Err(message) => return ProbeOutcome::Failed { message },
    };
    // A registry of its own: a probe is not one of the user's execs.
    let registry = Execs::default();
    let exec = registry.insert(
        exec_id.clone(),
        probe.container.clone(),
        ExecSpec {
            cmd: probe.cmd.clone(),
            ..ExecSpec::default()
        },
    );
    let log = adapter.exec_log_path(&probe.container, &exec_id);
    let live = events.live();
    let request = ExecRequest {
        exec_id: exec_id.clone(),
        args: probe.cmd.clone(),
        log_file: Some(log.clone()),
        ..ExecRequest::default()
    };
    let pid = match adapter.exec(&probe.container, &request).await {
        Ok(pid) => pid,
        Err(e) => {
            let _ = tokio::fs::remove_file(&log).await;
            return ProbeOutcome::Failed {
                message: format!("OCI runtime exec failed: {e}"),
            };
        }
    };
    exec.set(ExecState::Running { pid });
    tokio::spawn(execs::watch_exit(adapter.clone(), Arc::clone(&exec), live));
    let timed_out = tokio::time::timeout(probe.timeout, exec.exited())
        .await
        .is_err();
    if timed_out {
        if let Err(e) = adapter.kill_exec(&probe.container, &exec_id, 9).await {
            tracing::debug!(exec = %exec_id, error = %e, "kill of a timed-out probe");
        }
        let _ = tokio::time::timeout(KILL_WAIT, exec.exited()).await;
    }
    let output = read_output(log.clone(), exec.exited()).await;
    let _ = tokio::fs::remove_file(&log).await;
    if timed_out {
        return ProbeOutcome::TimedOut { output };
    }
    match exec.state() {
        ExecState::Exited {
            code: Some(exit_code),
        } => ProbeOutcome::Exited { exit_code, output },
        _ => ProbeOutcome::Failed {
            message: "the health check's exit status is not known (its container stopped)"
                .to_owned(),
        },
    }
}

/// Its stdout and stderr, as written, at most [`PROBE_OUTPUT_MAX_BYTES`].
async fn read_output(
    log: std::path::PathBuf,
    exited: impl std::future::Future<Output = ()> + Send + 'static,
) -> String {
    let options = LogOptions {
        stdout: true,
        stderr: true,
        follow: true,
        raw: true,
        ..LogOptions::default()
    };
    let mut frames = Box::pin(logs::frames(log, options, Box::pin(exited)));
    let mut out = Vec::new();
    let read = async {
        while let Some(Ok(bytes)) = frames.next().await {
            let room = PROBE_OUTPUT_MAX_BYTES.saturating_sub(out.len());
            out.extend_from_slice(&bytes[..bytes.len().min(room)]);
            if out.len() >= PROBE_OUTPUT_MAX_BYTES {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(OUTPUT_WAIT, read).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn new_exec_id() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a probe's exec id: {e}"))?;
    Ok(hex::encode(bytes))
}
