//! `kubectl exec` and `kubectl attach` on a WebSocket: the process's
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

use super::channels::{self, Codec, Ending, Resizes};
use crate::Cri;
use crate::exec::{Demux, Stream};
use axum::extract::ws::{Message, WebSocket};
use futures_util::stream::{SplitSink, SplitStream, StreamExt as _};
use futures_util::{Future, SinkExt as _};
use holdfast_core::{ExecSpec, ExecState, RequestError, Signal};
use holdfast_engine::backend::containers::AttachOptions;
use holdfast_engine::backend::execs::ExecStarted;
use holdfast_engine::stdio::{self, Input, Output};
use k8s_cri::v1 as cri;
use std::time::Duration;
use tokio::io::AsyncWriteExt as _;

/// How long a killed exec's end is waited for before the connection goes.
const KILL_WAIT: Duration = Duration::from_secs(5);

type Sink = SplitSink<WebSocket, Message>;

/// An exec's session: the command `request` names, in `container`.
pub(super) async fn exec(
    cri: Cri,
    socket: WebSocket,
    codec: Codec,
    container: String,
    request: cri::ExecRequest,
) {
    let (mut sink, from_client) = socket.split();
    if sink
        .send(codec.ready(request.stdout, request.stderr))
        .await
        .is_err()
    {
        return;
    }
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
            return finish(sink, codec, failed(why)).await;
        }
        Err(e) => return finish(sink, codec, failed(e.message)).await,
    };
    let (output, input, cleanup) = session.into_parts();
    let resize = |height, width| {
        let exec_id = exec_id.clone();
        let execs = cri.engine.execs();
        async move { execs.resize(&exec_id, height, width).await }
    };
    let ends = relay(
        (sink, from_client),
        codec,
        output,
        request.tty,
        input,
        resize,
    )
    .await;
    match ends {
        Some(sink) => {
            let ending = match execs.inspect(&exec_id).await {
                Ok(e) => match e.state {
                    ExecState::Exited { code: Some(code) } => Ending::Exited { code, what },
                    other => failed(format!("its end is not known ({other:?})")),
                },
                Err(e) => failed(e.message),
            };
            finish(sink, codec, ending).await;
        }
        None => {
            tracing::debug!(exec = %exec_id, "the exec's client went away: killing it");
            let kill = execs.kill(&exec_id, Signal::SIGKILL);
            if let Ok(Err(e)) = tokio::time::timeout(KILL_WAIT, kill).await {
                tracing::debug!(exec = %exec_id, error = %e.message, "kill of an abandoned exec");
            }
        }
    }
    cleanup();
}

/// An attach's session to `container`'s own process.
pub(super) async fn attach(
    cri: Cri,
    socket: WebSocket,
    codec: Codec,
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
    };
    let (mut sink, from_client) = socket.split();
    if sink
        .send(codec.ready(request.stdout, request.stderr))
        .await
        .is_err()
    {
        return;
    }
    let attached = match cri.engine.containers().attach(&container, options).await {
        Ok(attached) => attached,
        Err(e) => {
            let why = format!("error attaching to container: {}", e.message);
            return finish(sink, codec, Ending::Failed(why)).await;
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
    let socket = (sink, from_client);
    if let Some(sink) = relay(
        socket,
        codec,
        output.frames,
        output.tty,
        attached.input,
        resize,
    )
    .await
    {
        // The container's run is over: the attach ended as it should.
        let what = String::new();
        finish(sink, codec, Ending::Exited { code: 0, what }).await;
    }
}

/// Carries `output` to the client and the client's stdin and resizes to
/// the process until the output ends (the sink back, for the last word)
/// or the client goes away (`None`).
async fn relay<F, R>(
    (mut sink, mut from_client): (Sink, SplitStream<WebSocket>),
    codec: Codec,
    output: Output,
    tty: bool,
    input: Option<Input>,
    resize: F,
) -> Option<Sink>
where
    F: Fn(u32, u32) -> R,
    R: Future<Output = Result<(), RequestError>>,
{
    // The client's stdin goes through a pipe into the engine's feed, which
    // closes the process's stdin when the client's ends.
    let (stdin, stdin_end) = tokio::io::duplex(64 * 1024);
    let mut stdin = match input {
        Some(input) => {
            tokio::spawn(stdio::feed(input, stdin_end));
            Some(stdin)
        }
        None => None,
    };
    let to_client = async {
        let mut output = std::pin::pin!(output);
        let mut demux = Demux::default();
        while let Some(chunk) = output.next().await {
            let Ok(chunk) = chunk else { break };
            let mut messages = Vec::new();
            if tty {
                messages.push(codec.encode(channels::STDOUT, &chunk));
            } else {
                demux.feed(&chunk, |stream, payload| {
                    let channel = match stream {
                        Stream::Stdout => channels::STDOUT,
                        Stream::Stderr => channels::STDERR,
                    };
                    messages.push(codec.encode(channel, payload));
                });
            }
            for m in messages {
                if sink.send(m).await.is_err() {
                    return false;
                }
            }
        }
        true
    };
    let from_client = async {
        let mut resizes = Resizes::default();
        while let Some(Ok(message)) = from_client.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
            let Some((channel, data)) = codec.decode(message) else {
                continue;
            };
            match channel {
                channels::STDIN => {
                    if let Some(pipe) = stdin.as_mut()
                        && pipe.write_all(&data).await.is_err()
                    {
                        stdin = None;
                    }
                }
                channels::RESIZE => {
                    for (height, width) in resizes.feed(&data) {
                        if let Err(e) = resize(height, width).await {
                            tracing::debug!(error = %e.message, "resize");
                        }
                    }
                }
                _ if codec.closes_stdin(channel, &data) => stdin = None,
                _ => {}
            }
        }
    };
    tokio::select! {
        delivered = to_client => delivered.then_some(sink),
        () = from_client => None,
    }
}

/// Says how the command ended on the error channel and closes.
async fn finish(mut sink: Sink, codec: Codec, ending: Ending) {
    let _ = sink.send(codec.status(&ending)).await;
    let _ = sink.send(Message::Close(None)).await;
}
