//! `kubectl exec` and `kubectl attach`, whatever carries them (a
//! WebSocket's channels, SPDY's streams: a [`Client`]): the process's
//! output to the client on stdout and stderr (one stream with a terminal),
//! the client's stdin and terminal size to the process, and at the end its
//! exit status on the error channel. The exec and the attach are the same
//! sessions `docker exec` and `docker attach` have (the core starts the
//! exec and records its end), with kubelet's plain input: its end closes
//! the process's stdin, and no detach sequence is watched for.
//!
//! As containerd's CRI plugin does, an exec whose client goes away before
//! it ends is killed (nothing is left running that nobody can reach); an
//! attach's container is left alone.

use super::channels::{Ending, Resizes};
use super::idle::Idle;
use crate::Cri;
use crate::exec::{Demux, Stream};
use bytes::Bytes;
use futures_util::Future;
use futures_util::stream::StreamExt as _;
use holdfast_core::{ExecSpec, ExecState, RequestError, Signal};
use holdfast_engine::backend::containers::AttachOptions;
use holdfast_engine::backend::execs::ExecStarted;
use holdfast_engine::stdio::{self, Input, Output};
use k8s_cri::v1 as cri;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;
use tokio::sync::mpsc;

/// How long a killed exec's end is waited for before the connection goes.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// How long the client's stdin may take to reach the process once the
/// session is over.
const FEED_END: Duration = Duration::from_secs(1);

/// What a client sent, whatever carried it.
#[derive(Debug)]
pub(super) enum FromClient {
    Stdin(Vec<u8>),
    /// The client's stdin is over (its stream half-closed, v5's close).
    StdinEnd,
    /// Bytes of the resize channel (JSON sizes, possibly split).
    Resize(Vec<u8>),
}

/// What goes to the client.
#[derive(Debug)]
pub(super) enum ToClient {
    Stdout(Bytes),
    Stderr(Bytes),
    /// How it ended; the transport says it and closes.
    End(Ending),
}

/// A client on some transport: what it sends (`None` once it is gone)
/// and what it is sent (a send fails once it is gone).
#[derive(Debug)]
pub(super) struct Client {
    pub(super) to: mpsc::Sender<ToClient>,
    pub(super) from: mpsc::Receiver<FromClient>,
}

/// An exec's session: the command `request` names, in `container`.
pub(super) async fn exec(
    cri: Cri,
    mut client: Client,
    container: String,
    request: cri::ExecRequest,
) {
    let what = format!("error executing command [{}]", request.cmd.join(" "));
    let failed =
        |why: String| Ending::Failed(format!("error executing command in container: {why}"));
    let execs = cri.engine.execs();
    let spec = ExecSpec {
        cmd: request.cmd,
        tty: request.tty,
        attach_stdin: request.stdin,
        attach_stdout: request.stdout,
        attach_stderr: request.stderr,
        ..ExecSpec::default()
    };
    let started = async {
        let exec_id = execs.create(&container, spec).await?;
        let prepared = execs.prepare_plain(&exec_id).await?;
        Ok::<_, RequestError>((exec_id, prepared.begin().await?))
    };
    let (exec_id, session) = match started.await {
        Ok((exec_id, ExecStarted::Attached(session))) => (exec_id, session),
        Ok((_, ExecStarted::Detached)) => {
            let why = "the exec was started detached".to_owned();
            let _ = client.to.send(ToClient::End(failed(why))).await;
            return;
        }
        Err(e) => {
            let _ = client.to.send(ToClient::End(failed(e.message))).await;
            return;
        }
    };
    let (output, input, cleanup) = session.into_parts();
    let resize = |height, width| {
        let exec_id = exec_id.clone();
        let execs = cri.engine.execs();
        async move { execs.resize(&exec_id, height, width).await }
    };
    let idle = cri.idle_clock();
    let relayed = relay(&mut client, output, request.tty, input, resize, &idle).await;
    if relayed == Relayed::Ended {
        let ending = match execs.inspect(&exec_id).await {
            Ok(e) => match e.state {
                ExecState::Exited { code: Some(code) } => Ending::Exited { code, what },
                other => failed(format!("its end is not known ({other:?})")),
            },
            Err(e) => failed(e.message),
        };
        let _ = client.to.send(ToClient::End(ending)).await;
    } else {
        // The client went away, the output could not be read, or nothing
        // went either way for too long: nobody sees the process any more.
        // Said, in case the client is still there to read it (never a
        // success made up).
        let why = match relayed {
            Relayed::Idle => idle.reason(),
            _ => "its output was lost".to_owned(),
        };
        let _ = client.to.send(ToClient::End(failed(why))).await;
        tracing::debug!(exec = %exec_id, ?relayed, "the exec's session is over: killing it");
        let kill = execs.kill(&exec_id, Signal::SIGKILL);
        if let Ok(Err(e)) = tokio::time::timeout(KILL_WAIT, kill).await {
            tracing::debug!(exec = %exec_id, error = %e.message, "kill of an abandoned exec");
        }
    }
    cleanup();
}

/// An attach's session to `container`'s own process.
pub(super) async fn attach(
    cri: Cri,
    mut client: Client,
    container: String,
    request: cri::AttachRequest,
) {
    let options = AttachOptions {
        stdout: request.stdout,
        stderr: request.stderr,
        logs: false,
        stream: true,
        stdin: request.stdin,
        detach_keys: None,
        plain_input: true,
        raw_output: false,
    };
    let attached = match cri.engine.containers().attach(&container, options).await {
        Ok(attached) => attached,
        Err(e) => {
            let why = format!("error attaching to container: {}", e.message);
            let _ = client.to.send(ToClient::End(Ending::Failed(why))).await;
            return;
        }
    };
    let resize = |height, width| {
        let container = container.clone();
        let cri = cri.clone();
        async move {
            cri.engine
                .containers()
                .resize(&container, height, width)
                .await
        }
    };
    let output = attached.output;
    let idle = cri.idle_clock();
    let ending = match relay(
        &mut client,
        output.frames,
        output.tty,
        attached.input,
        resize,
        &idle,
    )
    .await
    {
        // The container's run is over: the attach ended as it should.
        Relayed::Ended => Ending::Exited {
            code: 0,
            what: String::new(),
        },
        // The container runs on; the client is told why it is let go.
        Relayed::Idle => Ending::Failed(format!("error attaching to container: {}", idle.reason())),
        Relayed::Lost => return,
    };
    let _ = client.to.send(ToClient::End(ending)).await;
}

/// How a relay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Relayed {
    /// The process's output ended: it is over.
    Ended,
    /// The client went away, or the output could not be read.
    Lost,
    /// Nothing went either way for the idle limit.
    Idle,
}

/// Carries `output` to the client and the client's stdin and resizes to
/// the process until the output ends, the client goes away (or the output
/// cannot be read), or nothing goes either way for `idle`'s limit.
async fn relay<F, R>(
    client: &mut Client,
    output: Output,
    tty: bool,
    input: Option<Input>,
    resize: F,
    idle: &Idle,
) -> Relayed
where
    F: Fn(u32, u32) -> R,
    R: Future<Output = Result<(), RequestError>>,
{
    let Client { to, from } = client;
    // The client's stdin goes through a pipe into the engine's feed, which
    // closes the process's stdin when the client's ends.
    let (stdin, stdin_end) = tokio::io::duplex(64 * 1024);
    let (mut stdin, feeding) = match input {
        Some(input) => (
            Some(stdin),
            Some(tokio::spawn(stdio::feed(input, stdin_end))),
        ),
        None => (None, None),
    };
    let to_client = async {
        let mut output = std::pin::pin!(output);
        let mut demux = Demux::default();
        while let Some(chunk) = output.next().await {
            // An output that cannot be read is no end of the process:
            // taken as a lost session (an exec is killed, not reported).
            let Ok(chunk) = chunk else {
                return Relayed::Lost;
            };
            if chunk.is_empty() {
                continue;
            }
            idle.touch();
            let mut messages = Vec::new();
            if tty {
                messages.push(ToClient::Stdout(chunk));
            } else {
                demux.feed(&chunk, |stream, payload| {
                    let payload = Bytes::copy_from_slice(payload);
                    messages.push(match stream {
                        Stream::Stdout => ToClient::Stdout(payload),
                        Stream::Stderr => ToClient::Stderr(payload),
                    });
                });
            }
            for m in messages {
                if to.send(m).await.is_err() {
                    return Relayed::Lost;
                }
            }
        }
        Relayed::Ended
    };
    let from_client = async {
        let mut resizes = Resizes::default();
        while let Some(message) = from.recv().await {
            idle.touch();
            match message {
                FromClient::Stdin(data) => {
                    if let Some(pipe) = stdin.as_mut()
                        && pipe.write_all(&data).await.is_err()
                    {
                        stdin = None;
                    }
                }
                FromClient::StdinEnd => stdin = None,
                FromClient::Resize(data) => {
                    for (height, width) in resizes.feed(&data) {
                        if let Err(e) = resize(height, width).await {
                            tracing::debug!(error = %e.message, "resize");
                        }
                    }
                }
            }
        }
    };
    let relayed = tokio::select! {
        relayed = to_client => relayed,
        () = from_client => Relayed::Lost,
        () = idle.expired() => Relayed::Idle,
    };
    // The client's stdin ends here; the feed then does what that means
    // (closes the process's stdin) unless it is stuck writing to a process
    // that does not read: it is given a moment, then dropped with its FIFO.
    drop(stdin);
    if let Some(mut feeding) = feeding
        && tokio::time::timeout(FEED_END, &mut feeding).await.is_err()
    {
        feeding.abort();
    }
    relayed
}
