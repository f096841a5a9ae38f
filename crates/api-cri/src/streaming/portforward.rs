//! `kubectl port-forward`: a TCP connection to a port on the pod's
//! loopback, made inside the pod's network namespace (the sandbox's) from
//! a thread of its own, carried both ways ([`forward`], shared with SPDY's
//! pairs of streams). On a WebSocket ([`serve`]): each port the
//! `PortForward` request named (in its order; kubelet puts there the ports
//! its own client asked for) has two channels, data (2n) and error (2n+1);
//! the server first writes the port on both (two bytes, little endian); a
//! connection that cannot be made is said on the error channel. The
//! stream ends when every port's connection has.

use super::channels::Codec;
use super::idle::Idle;
use crate::Cri;
use axum::extract::ws::{Message, WebSocket};
use bytes::Bytes;
use futures_util::SinkExt as _;
use futures_util::stream::StreamExt as _;
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// The subprotocols kubelet's port forwarding serves on a WebSocket (and
/// none at all: binary).
pub(super) const PROTOCOLS: [&str; 2] = ["v4.channel.k8s.io", "v4.base64.channel.k8s.io"];

/// How long one direction may go on once the other has ended (as
/// containerd's plugin: a second for the rest to drain).
const DRAIN: Duration = Duration::from_secs(1);

/// How long a connection to the pod's port may take to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Forwards `ports` of `sandbox`'s pod over `socket`.
pub(super) async fn serve(
    cri: Cri,
    socket: WebSocket,
    codec: Codec,
    sandbox: String,
    ports: Vec<u16>,
) {
    let (mut sink, mut from_client) = socket.split();
    // Every port's writer sends through one queue to the socket.
    let (to_socket, mut queued) = mpsc::channel::<Message>(64);
    let writer = tokio::spawn(async move {
        while let Some(m) = queued.recv().await {
            if sink.send(m).await.is_err() {
                return;
            }
        }
        let _ = sink.send(super::channels::normal_close()).await;
    });
    let netns = netns_of(&cri, &sandbox).await;
    // One clock for the connection, every port's bytes touch it.
    let idle = Arc::new(cri.idle_clock());
    let mut inputs = HashMap::new();
    let mut forwards = Vec::new();
    for (i, &port) in ports.iter().enumerate() {
        let (data, error) = (channel(2 * i), channel(2 * i + 1));
        for c in [data, error] {
            let _ = to_socket.send(codec.encode(c, &port.to_le_bytes())).await;
        }
        let (input, from) = mpsc::channel::<Bytes>(16);
        inputs.insert(data, input);
        let (to_client, mut replies) = mpsc::channel::<Bytes>(16);
        let to_socket = to_socket.clone();
        let (netns, sandbox, idle) = (netns.clone(), sandbox.clone(), idle.clone());
        forwards.push(tokio::spawn(async move {
            let relay = {
                let to_socket = to_socket.clone();
                tokio::spawn(async move {
                    while let Some(b) = replies.recv().await {
                        if to_socket.send(codec.encode(data, &b)).await.is_err() {
                            return;
                        }
                    }
                })
            };
            let done = match netns {
                Ok(netns) => forward(&netns, port, from, to_client, &idle).await,
                Err(why) => {
                    drop(to_client);
                    Err(why)
                }
            };
            let _ = relay.await;
            if let Err(why) = done {
                let msg = failed(port, &sandbox, &why);
                let _ = to_socket.send(codec.encode(error, msg.as_bytes())).await;
            }
        }));
    }
    drop(to_socket);
    let aborts: Vec<_> = forwards.iter().map(|f| f.abort_handle()).collect();
    let all_done = futures_util::future::join_all(forwards);
    let from_client = async {
        while let Some(Ok(message)) = from_client.next().await {
            if matches!(message, Message::Close(_)) {
                break;
            }
            idle.touch();
            let Some((channel, data)) = codec.decode(message) else {
                continue;
            };
            if let Some(input) = inputs.get(&channel)
                && input.send(Bytes::from(data)).await.is_err()
            {
                inputs.remove(&channel);
            }
        }
        // The client is gone: every port's input ends.
        inputs.clear();
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = all_done => {}
        () = from_client => {}
        // Nothing either way for too long: every port's connection goes,
        // and with them the socket (its writer ends with their senders).
        () = idle.expired() => {
            tracing::debug!(sandbox, "{}: port forwarding closed", idle.reason());
            for abort in aborts {
                abort.abort();
            }
        }
    }
    let _ = writer.await;
}

/// What the error channel says of a forward that failed: kubelet's words
/// (its pod uid is not the runtime's to know).
pub(super) fn failed(port: u16, sandbox: &str, why: &str) -> String {
    let msg = format!("error forwarding port {port} to pod {sandbox}, uid : {why}");
    tracing::debug!("{msg}");
    msg
}

/// The network namespace of `sandbox`'s pod, as its running process has
/// it; why not, when it is not running.
pub(super) async fn netns_of(cri: &Cri, sandbox: &str) -> Result<String, String> {
    match cri.sandbox(sandbox).await {
        Ok(Some(s)) if s.running_pid() != 0 => Ok(format!("/proc/{}/ns/net", s.running_pid())),
        Ok(_) => Err(format!("pod {sandbox} is not running")),
        Err(e) => Err(e.message().to_owned()),
    }
}

/// A channel number as the protocol's byte (the request has at most
/// [`MAX_PORTS`] ports).
fn channel(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// The most ports one stream forwards: two channels each, numbered by a
/// byte (a digit from `'0'` in the base64 protocol).
pub(crate) const MAX_PORTS: usize = 100;

/// One port's connection: the client's bytes to it, its bytes to the
/// client, until one side ends and the other has drained.
pub(super) async fn forward(
    netns: &str,
    port: u16,
    mut from_client: mpsc::Receiver<Bytes>,
    to_client: mpsc::Sender<Bytes>,
    idle: &Idle,
) -> Result<(), String> {
    let stream = connect_in(netns, port).await?;
    let (mut reader, mut writer) = stream.into_split();
    let upstream = async move {
        while let Some(bytes) = from_client.recv().await {
            idle.touch();
            if writer.write_all(&bytes).await.is_err() {
                return;
            }
        }
        // The client is done sending: the pod's side sees its end.
        let _ = writer.shutdown().await;
    };
    let downstream = async move {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    idle.touch();
                    if to_client
                        .send(Bytes::copy_from_slice(&buf[..n]))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    tokio::pin!(upstream, downstream);
    tokio::select! {
        () = &mut upstream => { let _ = tokio::time::timeout(DRAIN, downstream).await; }
        () = &mut downstream => { let _ = tokio::time::timeout(DRAIN, upstream).await; }
    }
    Ok(())
}

/// A TCP connection to `port` on loopback inside the network namespace
/// `netns`: made on a thread of its own that enters the namespace and
/// ends with the connection made (a socket keeps the namespace it was
/// made in; the runtime's threads never change theirs).
async fn connect_in(netns: &str, port: u16) -> Result<tokio::net::TcpStream, String> {
    let netns = netns.to_owned();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("portforward-connect".to_owned())
        .spawn(move || {
            let _ = tx.send(connect_on_this_thread(&netns, port));
        })
        .map_err(|e| format!("no thread to connect on: {e}"))?;
    let stream = rx
        .await
        .map_err(|_| "the connecting thread ended".to_owned())??;
    stream
        .set_nonblocking(true)
        .map_err(|e| format!("set nonblocking: {e}"))?;
    tokio::net::TcpStream::from_std(stream).map_err(|e| e.to_string())
}

fn connect_on_this_thread(netns: &str, port: u16) -> Result<std::net::TcpStream, String> {
    let ns = std::fs::File::open(netns).map_err(|e| format!("{netns}: {e}"))?;
    nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| format!("enter {netns}: {e}"))?;
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    std::net::TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT)
        .or_else(|e4| {
            let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
            std::net::TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT).map_err(|_| e4)
        })
        .map_err(|e| format!("connect to localhost:{port}: {e}"))
}
