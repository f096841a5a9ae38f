//! The CRI's streams over SPDY/3.1, the transport kubectl's requests reach
//! a runtime through (the API server and kubelet's proxy speak it): an
//! HTTP upgrade naming the protocol version (`X-Stream-Protocol-Version`),
//! then one SPDY stream per channel. For exec and attach, the client opens
//! `error`, `stdin`, `stdout`, `stderr` and `resize` streams (those it
//! asked for); the status goes on `error` at the end. For port forwarding
//! (`portforward.k8s.io`), a pair of streams per connection (`error` and
//! `data`, matched by `requestid`) to the `port` they name.
//!
//! The framing ([`frame`], [`dictionary`]) and the connection
//! ([`session`]) are this module's own: no Rust crate speaks SPDY/3.1.

mod dictionary;
pub(crate) mod frame;
mod session;

use super::Asked;
use super::portforward;
use super::remotecommand::{Client, FromClient, ToClient};
use crate::Cri;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use session::{Incoming, Out};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The remote command protocol versions served, the newest first.
pub(super) const REMOTECOMMAND: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];

/// Port forwarding's one protocol.
pub(super) const PORTFORWARD: [&str; 1] = ["portforward.k8s.io"];

/// How long a client may take to open the streams it asked for.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The version to speak: the first the client lists (repeated headers or
/// comma-separated) that is served. Refusals as kubelet words them.
pub(super) fn negotiate(
    headers: &HeaderMap,
    served: &'static [&'static str],
) -> Result<&'static str, Box<Response>> {
    let upgrade = headers
        .get(axum::http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !upgrade.to_ascii_lowercase().contains("spdy/3.1") {
        let why = "unable to upgrade: missing upgrade headers in request (SPDY/3.1 or a WebSocket)";
        return Err(Box::new((StatusCode::BAD_REQUEST, why).into_response()));
    }
    let offered: Vec<&str> = headers
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    if offered.is_empty() {
        let why = "unable to upgrade: header X-Stream-Protocol-Version does not exist in request";
        return Err(Box::new((StatusCode::BAD_REQUEST, why).into_response()));
    }
    match offered.iter().find_map(|o| served.iter().find(|s| *s == o)) {
        Some(chosen) => Ok(chosen),
        None => {
            let mut r = (
                StatusCode::FORBIDDEN,
                format!("unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server accepts {served:?}"),
            )
                .into_response();
            for s in served {
                r.headers_mut().append(
                    "x-accepted-stream-protocol-versions",
                    HeaderValue::from_static(s),
                );
            }
            Err(Box::new(r))
        }
    }
}

/// The 101 that switches the connection to SPDY speaking `version`.
pub(super) fn switching(version: &'static str) -> Response {
    let mut r = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = r.headers_mut();
    h.insert(
        axum::http::header::CONNECTION,
        HeaderValue::from_static("Upgrade"),
    );
    h.insert(
        axum::http::header::UPGRADE,
        HeaderValue::from_static("SPDY/3.1"),
    );
    h.insert(
        "x-stream-protocol-version",
        HeaderValue::from_static(version),
    );
    r
}

/// The session's end of a SPDY connection for exec or attach: waits for
/// the streams asked for (at most [`STREAM_CREATION_TIMEOUT`]); `None`
/// when they never came (the connection is closed).
pub(super) async fn client(
    io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    version: &'static str,
    asked: Asked,
) -> Option<Client> {
    let (mut streams, out) = session::serve(io);
    // A terminal's resize stream came with v3.
    let resizes = asked.tty && matches!(version, "v3.channel.k8s.io" | "v4.channel.k8s.io");
    let expected = 1
        + usize::from(asked.stdin)
        + usize::from(asked.stdout)
        + usize::from(asked.stderr)
        + usize::from(resizes);
    let mut by_type: HashMap<String, Incoming> = HashMap::new();
    let mut last_id = 0;
    let collect = async {
        while by_type.len() < expected {
            let incoming = streams.recv().await?;
            last_id = last_id.max(incoming.id);
            let kind = incoming.header("streamtype").unwrap_or("").to_owned();
            // Only the streams asked for count (a client opening others
            // does not end the wait early).
            let wanted = match kind.as_str() {
                "error" => true,
                "stdin" => asked.stdin,
                "stdout" => asked.stdout,
                "stderr" => asked.stderr,
                "resize" => resizes,
                _ => false,
            };
            if wanted {
                by_type.insert(kind, incoming);
            } else {
                tracing::debug!(streamtype = kind, "SPDY stream not asked for");
            }
        }
        Some(())
    };
    if !matches!(
        tokio::time::timeout(STREAM_CREATION_TIMEOUT, collect).await,
        Ok(Some(()))
    ) {
        tracing::debug!("the client did not open the streams it asked for");
        out.go_away(last_id).await;
        return None;
    }
    let id = |t: &str| by_type.get(t).map(|s| s.id);
    let (error, stdout, stderr) = (id("error"), id("stdout"), id("stderr"));
    let status_json = version == "v4.channel.k8s.io";
    let (to, mut to_rx) = mpsc::channel::<ToClient>(16);
    let writer = out.clone();
    tokio::spawn(async move {
        while let Some(m) = to_rx.recv().await {
            let sent = match m {
                ToClient::Stdout(b) => match stdout {
                    Some(id) => writer.data(id, b).await,
                    None => true,
                },
                ToClient::Stderr(b) => match stderr {
                    Some(id) => writer.data(id, b).await,
                    None => true,
                },
                ToClient::End(ending) => {
                    if let (Some(id), Some(text)) = (error, ending.status_text(status_json)) {
                        writer.data(id, Bytes::from(text)).await;
                    }
                    break;
                }
            };
            if !sent {
                return;
            }
        }
        for id in [stdout, stderr, error].into_iter().flatten() {
            writer.finish(id).await;
        }
        writer.go_away(last_id).await;
    });
    let (from_tx, from) = mpsc::channel::<FromClient>(16);
    let mut stdin = by_type.remove("stdin").map(|s| s.data);
    let mut resize = by_type.remove("resize").map(|s| s.data);
    tokio::spawn(async move {
        loop {
            let m = tokio::select! {
                data = recv(&mut stdin) => match data {
                    Some(d) => FromClient::Stdin(d.to_vec()),
                    None => {
                        stdin = None;
                        FromClient::StdinEnd
                    }
                },
                data = recv(&mut resize) => match data {
                    Some(d) => FromClient::Resize(d.to_vec()),
                    None => {
                        resize = None;
                        continue;
                    }
                },
                // Another stream, or (None) the connection is gone.
                more = streams.recv() => match more {
                    Some(_) => continue,
                    None => break,
                },
                // The session is over: nothing more is read for it.
                () = from_tx.closed() => break,
            };
            if from_tx.send(m).await.is_err() {
                break;
            }
        }
    });
    Some(Client { to, from })
}

/// The next data of a stream that is still open; pending for ever once
/// it is not (so that a `select!` waits on the others).
async fn recv(stream: &mut Option<mpsc::Receiver<Bytes>>) -> Option<Bytes> {
    match stream {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Port forwarding on a SPDY connection: each pair of streams the client
/// opens (`error` and `data`, one `requestid`) is one connection to the
/// `port` they name in the pod, until the client closes.
pub(super) async fn port_forward(
    cri: Cri,
    io: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    sandbox: String,
) {
    let (mut streams, out) = session::serve(io);
    let netns = portforward::netns_of(&cri, &sandbox).await;
    // One clock for the connection: every pair's bytes touch it.
    let idle = Arc::new(cri.idle_clock());
    let mut waiting: HashMap<String, HalfPair> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let incoming = tokio::select! {
            incoming = streams.recv() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
            _ = tick.tick() => {
                expire(&mut waiting, &out).await;
                continue;
            }
            // Nothing either way for too long: the connection goes (its
            // streams' data ends, and every pair's forward with it).
            () = idle.expired() => {
                tracing::debug!(sandbox, "{}: port forwarding closed", idle.reason());
                out.go_away(0).await;
                break;
            }
        };
        idle.touch();
        let port = incoming
            .header("port")
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p > 0);
        let kind = incoming.header("streamtype").unwrap_or("");
        let (Some(port), "error" | "data") = (port, kind) else {
            out.refuse(incoming.id).await;
            continue;
        };
        // Paired by requestid; a client that sends none pairs by ids (the
        // data stream opened right after its error stream).
        let request = match incoming.header("requestid") {
            Some(r) => r.to_owned(),
            None if kind == "error" => incoming.id.to_string(),
            None => incoming.id.saturating_sub(2).to_string(),
        };
        let pair = waiting.entry(request.clone()).or_insert_with(|| HalfPair {
            since: tokio::time::Instant::now(),
            error: None,
            data: None,
        });
        let slot = if kind == "error" {
            &mut pair.error
        } else {
            &mut pair.data
        };
        if slot.is_some() {
            out.refuse(incoming.id).await;
            continue;
        }
        *slot = Some(incoming);
        let complete = matches!(
            waiting.get(&request),
            Some(HalfPair {
                error: Some(_),
                data: Some(_),
                ..
            })
        );
        if complete
            && let Some(HalfPair {
                error: Some(error),
                data: Some(data),
                ..
            }) = waiting.remove(&request)
        {
            let (out, netns, sandbox) = (out.clone(), netns.clone(), sandbox.clone());
            let idle = idle.clone();
            tokio::spawn(async move {
                forward_pair(out, netns, sandbox, port, error, data, &idle).await;
            });
        }
    }
}

/// A port-forward request whose other stream has not come yet.
#[derive(Debug)]
struct HalfPair {
    since: tokio::time::Instant,
    error: Option<Incoming>,
    data: Option<Incoming>,
}

/// Ends the requests whose pair did not come within
/// [`STREAM_CREATION_TIMEOUT`], saying so on the error stream as kubelet
/// does.
async fn expire(waiting: &mut HashMap<String, HalfPair>, out: &Out) {
    let now = tokio::time::Instant::now();
    let stale: Vec<String> = waiting
        .iter()
        .filter(|(_, p)| now.duration_since(p.since) >= STREAM_CREATION_TIMEOUT)
        .map(|(r, _)| r.clone())
        .collect();
    for request in stale {
        let Some(pair) = waiting.remove(&request) else {
            continue;
        };
        if let Some(error) = &pair.error {
            let why = format!("(request={request}) timed out waiting for streams");
            out.data(error.id, Bytes::from(why)).await;
        }
        for stream in [pair.error, pair.data].into_iter().flatten() {
            out.finish(stream.id).await;
        }
    }
}

/// One forwarded connection: the data stream to `port` and back; a
/// failure said on the error stream; both finished at the end.
async fn forward_pair(
    out: Out,
    netns: Result<String, String>,
    sandbox: String,
    port: u16,
    error: Incoming,
    data: Incoming,
    idle: &super::idle::Idle,
) {
    let (to_client, mut queued) = mpsc::channel::<Bytes>(16);
    let writer = {
        let out = out.clone();
        let id = data.id;
        tokio::spawn(async move {
            while let Some(b) = queued.recv().await {
                if !out.data(id, b).await {
                    return;
                }
            }
        })
    };
    let done = match netns {
        Ok(netns) => portforward::forward(&netns, port, data.data, to_client, idle).await,
        Err(why) => {
            drop(to_client);
            Err(why)
        }
    };
    let _ = writer.await;
    if let Err(why) = done {
        let msg = portforward::failed(port, &sandbox, &why);
        out.data(error.id, Bytes::from(msg)).await;
    }
    out.finish(error.id).await;
    out.finish(data.id).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::frame::{FLAG_FIN, Frame, Reader, Writer};
    use super::*;
    use bytes::BytesMut;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn a_forward_whose_pair_never_comes_is_ended_with_kubelets_words() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let (mut streams, out) = session::serve(server);
        let mut wire = BytesMut::new();
        let headers = [("streamtype", "error"), ("port", "80"), ("requestid", "0")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .to_vec();
        let syn = Frame::SynStream {
            stream_id: 1,
            flags: 0,
            headers,
        };
        Writer::default().write(&syn, &mut wire).unwrap();
        client.write_all(&wire).await.unwrap();
        let error = streams.recv().await.unwrap();
        let mut waiting = HashMap::new();
        let since = tokio::time::Instant::now() - STREAM_CREATION_TIMEOUT;
        let fresh = HalfPair {
            since: tokio::time::Instant::now(),
            error: None,
            data: None,
        };
        waiting.insert("1".to_owned(), fresh);
        let half = HalfPair {
            since,
            error: Some(error),
            data: None,
        };
        waiting.insert("0".to_owned(), half);
        expire(&mut waiting, &out).await;
        assert_eq!(waiting.len(), 1, "the fresh one waits on");
        let (mut reader, mut buf, mut frames) = (Reader::default(), BytesMut::new(), Vec::new());
        while frames.len() < 3 {
            client.read_buf(&mut buf).await.unwrap();
            while let Some(f) = reader.read(&mut buf).unwrap() {
                frames.push(f);
            }
        }
        assert!(matches!(frames[0], Frame::SynReply { stream_id: 1, .. }));
        let Frame::Data { data, .. } = &frames[1] else {
            panic!("{frames:?}");
        };
        assert_eq!(&data[..], b"(request=0) timed out waiting for streams");
        assert!(matches!(
            frames[2],
            Frame::Data {
                stream_id: 1,
                flags: FLAG_FIN,
                ..
            }
        ));
    }
}
