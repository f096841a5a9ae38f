//! Exec and attach on a WebSocket: Kubernetes' channel protocols
//! ([`channels`]) turned into a [`Client`] of the session, and back. The
//! empty ready message goes first; at the end, the status on the error
//! channel and a Close frame.

use super::channels::{self, Codec};
use super::remotecommand::{Client, FromClient, ToClient};
use axum::extract::ws::{Message, WebSocket};
use futures_util::SinkExt as _;
use futures_util::stream::StreamExt as _;
use tokio::sync::mpsc;

/// The session's end of `socket`: `stdout` and `stderr` say which
/// channels the client asked for (the ready message goes on the first).
pub(super) fn client(socket: WebSocket, codec: Codec, stdout: bool, stderr: bool) -> Client {
    let (mut sink, mut stream) = socket.split();
    let (to, mut to_rx) = mpsc::channel::<ToClient>(16);
    let (from_tx, from) = mpsc::channel::<FromClient>(16);
    tokio::spawn(async move {
        if sink.send(codec.ready(stdout, stderr)).await.is_err() {
            return;
        }
        while let Some(m) = to_rx.recv().await {
            let sent = match m {
                ToClient::Stdout(b) => sink.send(codec.encode(channels::STDOUT, &b)).await,
                ToClient::Stderr(b) => sink.send(codec.encode(channels::STDERR, &b)).await,
                ToClient::End(ending) => {
                    if let Some(status) = codec.status(&ending) {
                        let _ = sink.send(status).await;
                    }
                    break;
                }
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = sink.send(channels::normal_close()).await;
    });
    tokio::spawn(async move {
        while let Some(Ok(message)) = stream.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
            let Some((channel, data)) = codec.decode(message) else {
                continue;
            };
            let m = match channel {
                channels::STDIN => FromClient::Stdin(data),
                channels::RESIZE => FromClient::Resize(data),
                _ if codec.closes_stdin(channel, &data) => FromClient::StdinEnd,
                _ => continue,
            };
            if from_tx.send(m).await.is_err() {
                break;
            }
        }
    });
    Client { to, from }
}
