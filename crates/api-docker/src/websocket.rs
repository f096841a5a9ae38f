//! dockerd's WebSocket attach carries the same session as the hijacked
//! connection of `POST /attach` (`stdio::session`: output, input, detach
//! keys, what the end of the input means), only framed as WebSocket
//! messages. So the session runs on one end of an in-memory pipe, and this
//! bridge turns the other end's bytes into messages and back.

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use futures_util::{SinkExt as _, StreamExt as _};
use holdfast_engine::stdio;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How much of the output travels in one message at most.
const CHUNK: usize = 32 * 1024;

/// How output bytes are framed: binary messages (API 1.42 and later), or
/// text messages, as dockerd framed them before (where the bytes are text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    Binary,
    Text,
}

/// Runs a session of `output` and `input` over `socket` until it is over:
/// the output ends (the socket is then closed), the client detaches, or
/// the client goes away.
pub(crate) async fn session(
    socket: WebSocket,
    framing: Framing,
    output: stdio::Output,
    input: Option<stdio::Input>,
) {
    let (ours, theirs) = tokio::io::duplex(CHUNK);
    let session = tokio::spawn(stdio::session(ours, output, input));
    let (mut from_session, mut to_session) = tokio::io::split(theirs);
    let (mut to_client, mut from_client) = socket.split();
    let outgoing = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from_session.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let bytes = bytes::Bytes::copy_from_slice(&buf[..n]);
                    let message = match framing {
                        Framing::Binary => Message::Binary(bytes),
                        // A text message must be UTF-8: bytes that are not
                        // (or a character cut by the chunk) go as they are.
                        Framing::Text => match Utf8Bytes::try_from(bytes.clone()) {
                            Ok(text) => Message::Text(text),
                            Err(_) => Message::Binary(bytes),
                        },
                    };
                    if to_client.send(message).await.is_err() {
                        return;
                    }
                }
            }
        }
        // The session is over: say so to the client.
        let _ = to_client.send(Message::Close(None)).await;
    };
    let incoming = async move {
        while let Some(Ok(message)) = from_client.next().await {
            let data = match message {
                Message::Binary(data) => data,
                Message::Text(text) => bytes::Bytes::from(text),
                Message::Close(_) => break,
                Message::Ping(_) | Message::Pong(_) => continue,
            };
            if to_session.write_all(&data).await.is_err() {
                return;
            }
        }
        // The client's input is over (what that means is the session's).
        let _ = to_session.shutdown().await;
    };
    // The output decides when the session is over; the input may end long
    // before it (a client that sends nothing more, or a `stdin_once`).
    let mut outgoing = std::pin::pin!(outgoing);
    tokio::select! {
        () = &mut outgoing => {}
        () = incoming => outgoing.await,
    }
    // Over, or its client gone: what the session holds (the output's
    // reader, the stdin writer) goes with it.
    session.abort();
}
