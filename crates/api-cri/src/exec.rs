//! `ExecSync`: a command run in a pod's container to its end (kubelet's
//! exec probes), through the same execs as `docker exec`: the core
//! creates and starts it and records its exit code. Its output is capped,
//! as containerd's plugin caps it; past its timeout it is killed (a signal
//! the core keeps until containerd has taken it).

use crate::Cri;
use crate::status::{invalid, status};
use bytes::Bytes;
use futures_util::StreamExt as _;
use holdfast_core::ExecSpec;
use holdfast_engine::backend::execs::ExecStarted;
use k8s_cri::v1 as cri;
use std::time::Duration;
use tonic::Status;

/// The most of each stream an `ExecSync` answers (containerd's cap).
const OUTPUT_CAP: usize = 16 << 20;

/// How long a killed command's output is read on before the answer goes.
const OUTPUT_DRAIN: Duration = Duration::from_secs(5);

impl Cri {
    pub(crate) async fn exec_sync(
        &self,
        r: cri::ExecSyncRequest,
    ) -> Result<cri::ExecSyncResponse, Status> {
        if r.cmd.is_empty() {
            return Err(invalid("cmd", "must not be empty"));
        }
        let timeout =
            u64::try_from(r.timeout).map_err(|_| invalid("timeout", "must not be negative"))?;
        let container = self.member_id(&r.container_id).await?.ok_or_else(|| {
            Status::not_found(format!("container {:?} not found", r.container_id))
        })?;
        let spec = ExecSpec {
            cmd: r.cmd,
            attach_stdout: true,
            attach_stderr: true,
            ..ExecSpec::default()
        };
        let execs = self.engine.execs();
        let exec_id = execs.create(&container, spec).await.map_err(status)?;
        let prepared = execs.prepare(&exec_id, false).await.map_err(status)?;
        let ExecStarted::Attached(session) = prepared.begin().await.map_err(status)? else {
            return Err(Status::internal("the exec was started detached"));
        };
        let (mut output, _, cleanup) = session.into_parts();
        let mut frames = Frames::default();
        let read = async {
            while let Some(chunk) = output.next().await {
                match chunk {
                    Ok(bytes) => frames.feed(&bytes),
                    Err(e) => return Err(Status::internal(format!("the exec's output: {e}"))),
                }
            }
            Ok(())
        };
        let outcome = if timeout == 0 {
            read.await
        } else {
            tokio::pin!(read);
            match tokio::time::timeout(Duration::from_secs(timeout), &mut read).await {
                Ok(done) => done,
                Err(_) => {
                    // As containerd's plugin: the process is killed, and
                    // the answer waits for its end (its output closes),
                    // so that a probe past its timeout leaves nothing
                    // behind. The core keeps the kill through an outage.
                    // The answer is the timeout whatever the kill's own
                    // (the core keeps a kill it could not deliver yet),
                    // and kubelet is not kept waiting long for it.
                    let kill = execs.kill(&exec_id, holdfast_core::Signal::SIGKILL);
                    let killed = tokio::time::timeout(OUTPUT_DRAIN, kill).await;
                    if matches!(killed, Ok(Ok(()))) {
                        // Bounded: a child the command left behind may
                        // hold its output open after it is gone.
                        let _ = tokio::time::timeout(OUTPUT_DRAIN, &mut read).await;
                    }
                    let how = match killed {
                        Ok(Ok(())) => "the command was killed".to_owned(),
                        Ok(Err(e)) => format!("its kill was not taken: {}", e.message),
                        Err(_) => "its kill is kept, not delivered yet".to_owned(),
                    };
                    Err(Status::deadline_exceeded(format!(
                        "timeout {timeout}s exceeded: {how}"
                    )))
                }
            }
        };
        cleanup();
        outcome?;
        let details = execs.inspect(&exec_id).await.map_err(status)?;
        let exit_code = match details.state {
            holdfast_core::ExecState::Exited { code: Some(code) } => code,
            other => {
                return Err(Status::unknown(format!(
                    "the exec's exit status is not known ({other:?})"
                )));
            }
        };
        Ok(cri::ExecSyncResponse {
            stdout: frames.stdout,
            stderr: frames.stderr,
            exit_code,
        })
    }
}

/// The exec's output split into stdout and stderr, each capped at
/// [`OUTPUT_CAP`].
#[derive(Default)]
struct Frames {
    demux: Demux,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Frames {
    fn feed(&mut self, bytes: &Bytes) {
        let (stdout, stderr) = (&mut self.stdout, &mut self.stderr);
        self.demux.feed(bytes, |stream, payload| {
            let into = if stream == Stream::Stderr {
                &mut *stderr
            } else {
                &mut *stdout
            };
            let room = OUTPUT_CAP.saturating_sub(into.len());
            into.extend_from_slice(&payload[..payload.len().min(room)]);
        });
    }
}

/// Which of a process's outputs a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The engine's output of a process without a terminal (Docker's
/// multiplexed frames: a stream byte, three zeros, a big-endian length,
/// the bytes) taken apart, whatever pieces it arrives in.
#[derive(Debug, Default)]
pub(crate) struct Demux {
    pending: Vec<u8>,
}

impl Demux {
    /// Hands every whole frame `bytes` completes to `each`.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(Stream, &[u8])) {
        self.pending.extend_from_slice(bytes);
        let mut at = 0;
        while let Some(header) = self.pending.get(at..at + 8) {
            let len = u32::from_be_bytes([header[4], header[5], header[6], header[7]]) as usize;
            let stream = if header[0] == 2 {
                Stream::Stderr
            } else {
                Stream::Stdout
            };
            let Some(payload) = self.pending.get(at + 8..at + 8 + len) else {
                break;
            };
            each(stream, payload);
            at += 8 + len;
        }
        self.pending.drain(..at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(stream: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![stream, 0, 0, 0];
        f.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn frames_split_into_stdout_and_stderr_across_chunks() {
        let mut all = frame(1, b"out1 ");
        all.extend(frame(2, b"err"));
        all.extend(frame(1, b"out2"));
        let mut frames = Frames::default();
        // fed in awkward pieces: a header split, a payload split
        for piece in all.chunks(3) {
            frames.feed(&Bytes::copy_from_slice(piece));
        }
        assert_eq!(frames.stdout, b"out1 out2");
        assert_eq!(frames.stderr, b"err");
        assert!(frames.demux.pending.is_empty());
    }

    #[test]
    fn each_stream_is_capped() {
        let mut frames = Frames::default();
        let big = vec![b'x'; 1 << 20];
        for _ in 0..17 {
            frames.feed(&Bytes::from(frame(1, &big)));
        }
        frames.feed(&Bytes::from(frame(2, b"still here")));
        assert_eq!(frames.stdout.len(), OUTPUT_CAP);
        assert_eq!(frames.stderr, b"still here");
    }
}
