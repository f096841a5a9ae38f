//! A SPDY/3.1 connection, the server's end: the streams the client opens
//! (each answered at once with an empty SYN_REPLY, as kubelet's server
//! answers), their data, and what this end writes. Pings are echoed; each
//! byte received is given back to the sender's window (peers that keep
//! flow control stall without it; spdystream ignores it); SETTINGS and
//! window updates are read and passed over: this end never waits for a
//! window, as kubelet's does not.

use super::frame::{FLAG_FIN, Frame, Headers, Reader, Writer};
use bytes::{Bytes, BytesMut};
use std::collections::HashMap;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::mpsc;

/// The most one data frame carries from this end.
const CHUNK: usize = 32 * 1024;

/// The largest data frame taken from a client (client-go sends 32 KiB at
/// most, node-spdy 8 KiB): more is a peer to stop reading from.
const MAX_DATA: usize = 1 << 20;

/// The most streams a connection may have open at once.
const MAX_STREAMS: usize = 1000;

/// How long the socket is still read once this end has said GOAWAY, so
/// that what the client sends meanwhile does not reset the connection
/// under the status it has not read yet.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// A stream the client opened: its headers and its data until the client
/// ends it (FIN or reset) or the connection goes.
#[derive(Debug)]
pub(crate) struct Incoming {
    pub(crate) id: u32,
    pub(crate) headers: Headers,
    pub(crate) data: mpsc::Receiver<Bytes>,
}

impl Incoming {
    /// A header's value (names are lower-case on the wire).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What this end writes.
#[derive(Clone, Debug)]
pub(crate) struct Out {
    frames: mpsc::Sender<Frame>,
}

impl Out {
    /// `data` on stream `id`; false once the connection is gone.
    pub(crate) async fn data(&self, id: u32, data: Bytes) -> bool {
        for at in (0..data.len()).step_by(CHUNK) {
            let chunk = data.slice(at..(at + CHUNK).min(data.len()));
            let frame = Frame::Data {
                stream_id: id,
                flags: 0,
                data: chunk,
            };
            if self.frames.send(frame).await.is_err() {
                return false;
            }
        }
        true
    }

    /// This end's last frame on stream `id`.
    pub(crate) async fn finish(&self, id: u32) {
        let fin = Frame::Data {
            stream_id: id,
            flags: FLAG_FIN,
            data: Bytes::new(),
        };
        let _ = self.frames.send(fin).await;
    }

    /// Refuses stream `id` (RST_STREAM CANCEL, as kubelet refuses one).
    pub(crate) async fn refuse(&self, id: u32) {
        let rst = Frame::RstStream {
            stream_id: id,
            status: 5,
        };
        let _ = self.frames.send(rst).await;
    }

    /// Ends the connection: GOAWAY, then the socket is closed once what
    /// was queued before is written.
    pub(crate) async fn go_away(&self, last_good_stream_id: u32) {
        let _ = self
            .frames
            .send(Frame::GoAway {
                last_good_stream_id,
                status: 0,
            })
            .await;
    }
}

/// Runs the connection on `io`: the streams the client opens come out of
/// the receiver (which ends with the connection), and `Out` writes.
pub(crate) fn serve(
    io: impl AsyncRead + AsyncWrite + Send + 'static,
) -> (mpsc::Receiver<Incoming>, Out) {
    let (mut read, mut write) = tokio::io::split(io);
    let (frames, mut queued) = mpsc::channel::<Frame>(64);
    let (streams_tx, streams) = mpsc::channel::<Incoming>(16);
    tokio::spawn(async move {
        let mut writer = Writer::default();
        let mut buf = BytesMut::new();
        while let Some(frame) = queued.recv().await {
            buf.clear();
            if let Err(e) = writer.write(&frame, &mut buf) {
                tracing::debug!(error = %e, "SPDY frame not written");
                break;
            }
            if write.write_all(&buf).await.is_err() {
                break;
            }
            if matches!(frame, Frame::GoAway { .. }) {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    let out = Out { frames };
    let replies = out.clone();
    tokio::spawn(async move {
        let mut reader = Reader::default();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        let mut open: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
        'connection: loop {
            loop {
                let frame = match reader.read(&mut buf) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "SPDY connection dropped");
                        break 'connection;
                    }
                };
                match frame {
                    Frame::SynStream {
                        stream_id,
                        flags,
                        headers,
                    } => {
                        let reply = Frame::SynReply {
                            stream_id,
                            flags: 0,
                            headers: Vec::new(),
                        };
                        if replies.frames.send(reply).await.is_err() {
                            break 'connection;
                        }
                        open.retain(|_, tx| !tx.is_closed());
                        if open.len() >= MAX_STREAMS {
                            tracing::debug!("SPDY connection with too many streams dropped");
                            break 'connection;
                        }
                        let (tx, data) = mpsc::channel(64);
                        if flags & FLAG_FIN == 0 {
                            open.insert(stream_id, tx);
                        }
                        let incoming = Incoming {
                            id: stream_id,
                            headers,
                            data,
                        };
                        if streams_tx.send(incoming).await.is_err() {
                            break 'connection;
                        }
                    }
                    Frame::Data {
                        stream_id,
                        flags,
                        data,
                    } => {
                        if data.len() > MAX_DATA {
                            tracing::debug!("SPDY connection with an oversized frame dropped");
                            break 'connection;
                        }
                        let n = u32::try_from(data.len()).unwrap_or(0);
                        if n > 0 {
                            if let Some(tx) = open.get(&stream_id)
                                && tx.send(data).await.is_err()
                            {
                                open.remove(&stream_id);
                            }
                            // Given back: to the stream, and (3.1) the session.
                            for id in [stream_id, 0] {
                                let update = Frame::WindowUpdate {
                                    stream_id: id,
                                    delta: n,
                                };
                                let _ = replies.frames.send(update).await;
                            }
                        }
                        if flags & FLAG_FIN != 0 {
                            open.remove(&stream_id);
                        }
                    }
                    Frame::RstStream { stream_id, .. } => {
                        open.remove(&stream_id);
                    }
                    Frame::Ping { id } => {
                        let _ = replies.frames.send(Frame::Ping { id }).await;
                    }
                    Frame::GoAway { .. } => break 'connection,
                    Frame::SynReply { .. } | Frame::WindowUpdate { .. } | Frame::Other { .. } => {}
                }
            }
            tokio::select! {
                r = read.read_buf(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
                // This end said GOAWAY (or can write no more): read on a
                // moment, then close.
                () = replies.frames.closed() => {
                    let drain = async {
                        let mut sink = BytesMut::with_capacity(16 * 1024);
                        while matches!(read.read_buf(&mut sink).await, Ok(n) if n > 0) {
                            sink.clear();
                        }
                    };
                    let _ = tokio::time::timeout(LINGER, drain).await;
                    break;
                }
            }
        }
        // The connection is over: every stream's data ends, and so does
        // the stream of streams.
        drop(open);
        drop(streams_tx);
    });
    (streams, out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    /// The client's end of a connection, framed by hand.
    struct Peer {
        io: tokio::io::DuplexStream,
        writer: Writer,
        reader: Reader,
        buf: BytesMut,
    }

    impl Peer {
        async fn send(&mut self, frame: Frame) {
            let mut wire = BytesMut::new();
            self.writer.write(&frame, &mut wire).unwrap();
            self.io.write_all(&wire).await.unwrap();
        }

        /// The next frame from the server; `None` once it closed.
        async fn next(&mut self) -> Option<Frame> {
            loop {
                if let Some(f) = self.reader.read(&mut self.buf).unwrap() {
                    return Some(f);
                }
                let read =
                    tokio::time::timeout(Duration::from_secs(10), self.io.read_buf(&mut self.buf));
                if read.await.expect("an answer within 10 s").unwrap() == 0 {
                    return None;
                }
            }
        }
    }

    fn connect() -> (Peer, mpsc::Receiver<Incoming>, Out) {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (streams, out) = serve(server);
        let peer = Peer {
            io: client,
            writer: Writer::default(),
            reader: Reader::default(),
            buf: BytesMut::new(),
        };
        (peer, streams, out)
    }

    fn syn(id: u32, kind: &str) -> Frame {
        Frame::SynStream {
            stream_id: id,
            flags: 0,
            headers: vec![("streamtype".to_owned(), kind.to_owned())],
        }
    }

    #[tokio::test]
    async fn a_stream_is_answered_its_data_delivered_and_the_window_given_back() {
        let (mut peer, mut streams, _out) = connect();
        peer.send(syn(1, "stdin")).await;
        assert_eq!(
            peer.next().await,
            Some(Frame::SynReply {
                stream_id: 1,
                flags: 0,
                headers: Vec::new()
            })
        );
        let mut stdin = streams.recv().await.unwrap();
        assert_eq!(stdin.header("streamtype"), Some("stdin"));
        peer.send(Frame::Data {
            stream_id: 1,
            flags: 0,
            data: Bytes::from_static(b"hello"),
        })
        .await;
        assert_eq!(stdin.data.recv().await.unwrap(), "hello");
        // the five bytes given back to the stream's window and the session's
        for id in [1, 0] {
            assert_eq!(
                peer.next().await,
                Some(Frame::WindowUpdate {
                    stream_id: id,
                    delta: 5
                })
            );
        }
        // an empty FIN ends the stream's data
        peer.send(Frame::Data {
            stream_id: 1,
            flags: FLAG_FIN,
            data: Bytes::new(),
        })
        .await;
        assert_eq!(stdin.data.recv().await, None);
    }

    #[tokio::test]
    async fn pings_are_echoed_and_goaway_ends_the_connection() {
        let (mut peer, mut streams, out) = connect();
        peer.send(Frame::Ping { id: 3 }).await;
        assert_eq!(peer.next().await, Some(Frame::Ping { id: 3 }));
        peer.send(syn(1, "stdout")).await;
        assert!(matches!(peer.next().await, Some(Frame::SynReply { .. })));
        let stdout = streams.recv().await.unwrap();
        assert!(out.data(stdout.id, Bytes::from_static(b"out")).await);
        out.finish(stdout.id).await;
        out.go_away(1).await;
        assert_eq!(
            peer.next().await,
            Some(Frame::Data {
                stream_id: 1,
                flags: 0,
                data: Bytes::from_static(b"out")
            })
        );
        assert!(matches!(
            peer.next().await,
            Some(Frame::Data {
                flags: FLAG_FIN,
                ..
            })
        ));
        assert_eq!(
            peer.next().await,
            Some(Frame::GoAway {
                last_good_stream_id: 1,
                status: 0
            })
        );
        // the server closes, and its side of the streams ends with it
        assert_eq!(peer.next().await, None);
        drop(peer);
        assert!(streams.recv().await.is_none());
    }

    #[tokio::test]
    async fn an_oversized_data_frame_drops_the_connection() {
        let (mut peer, mut streams, _out) = connect();
        peer.send(syn(1, "stdin")).await;
        assert!(matches!(peer.next().await, Some(Frame::SynReply { .. })));
        let mut stdin = streams.recv().await.unwrap();
        peer.send(Frame::Data {
            stream_id: 1,
            flags: 0,
            data: Bytes::from(vec![0u8; MAX_DATA + 1]),
        })
        .await;
        assert_eq!(stdin.data.recv().await, None);
        assert!(streams.recv().await.is_none());
    }
}
