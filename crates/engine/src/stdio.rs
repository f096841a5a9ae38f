//! A client's input into a container's (or an exec's) stdin FIFO.
//!
//! The shim reads the FIFO named at task (or exec) creation and holds a
//! writer of its own on it, so the process's stdin stays open while attaches
//! come and go and while holdfastd restarts: it ends only when holdfast asks
//! the shim to close it (`Adapter::close_stdin`), which an attach does when
//! its client's input ends and the container is `StdinOnce` (`docker run
//! -i`) or it is a non-terminal exec (`docker exec -i`), as dockerd does.

use crate::logs::Stopped;
use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::unix::pipe;

/// Opens a writer on the FIFO at `path`, creating it if needed. Read-write,
/// so that opening never waits for the shim (an attach comes before start)
/// and what is written before the shim opens its end stays in the pipe.
pub fn open_writer(path: &Path) -> io::Result<pipe::Sender> {
    holdfast_adapter_containerd::ensure_fifo(path).map_err(io::Error::other)?;
    pipe::OpenOptions::new().read_write(true).open_sender(path)
}

/// The detach sequence, as `--detach-keys` spells it: comma-separated keys,
/// each one character or `ctrl-<c>` (`ctrl-p,ctrl-q` by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetachKeys(Vec<u8>);

impl Default for DetachKeys {
    fn default() -> Self {
        DetachKeys(vec![0x10, 0x11])
    }
}

impl DetachKeys {
    pub fn parse(spec: &str) -> Result<DetachKeys, String> {
        let bad = |key: &str| format!("invalid detach keys {spec:?}: unknown key {key:?}");
        let mut keys = Vec::new();
        for key in spec.split(',') {
            let lower = key.to_ascii_lowercase();
            let byte = match lower.strip_prefix("ctrl-") {
                Some(c) if c.len() == 1 => match c.as_bytes()[0] {
                    c @ b'a'..=b'z' => c - b'a' + 1,
                    b'@' => 0,
                    c @ (b'[' | b'\\' | b']' | b'^' | b'_') => c - b'[' + 27,
                    _ => return Err(bad(key)),
                },
                Some(_) => return Err(bad(key)),
                None if key.len() == 1 => key.as_bytes()[0],
                None => return Err(bad(key)),
            };
            keys.push(byte);
        }
        Ok(DetachKeys(keys))
    }

    /// `None` for the default when `spec` is absent or empty.
    pub fn from_param(spec: Option<&str>) -> Result<DetachKeys, String> {
        match spec.filter(|s| !s.is_empty()) {
            None => Ok(DetachKeys::default()),
            Some(s) => DetachKeys::parse(s),
        }
    }
}

/// Watches input for the detach sequence. Bytes that might start it are
/// held back until it is complete (detach: they are dropped) or broken
/// (they are passed on), so a process never sees half of it.
#[derive(Debug)]
pub struct Escape {
    keys: Vec<u8>,
    matched: usize,
}

impl Escape {
    pub fn new(keys: DetachKeys) -> Escape {
        Escape {
            keys: keys.0,
            matched: 0,
        }
    }

    /// What of `chunk` to pass on, and whether the sequence completed (the
    /// rest of `chunk` is then dropped: the client has detached).
    pub fn feed(&mut self, chunk: &[u8]) -> (Vec<u8>, bool) {
        let mut out = Vec::with_capacity(chunk.len());
        for &b in chunk {
            if self.keys.get(self.matched) == Some(&b) {
                self.matched += 1;
                if self.matched == self.keys.len() {
                    self.matched = 0;
                    return (out, true);
                }
                continue;
            }
            // The sequence broke: what was held back was input after all.
            out.extend_from_slice(&self.keys[..self.matched]);
            self.matched = 0;
            if self.keys.first() == Some(&b) {
                self.matched = 1;
                if self.keys.len() == 1 {
                    self.matched = 0;
                    return (out, true);
                }
            } else {
                out.push(b);
            }
        }
        (out, false)
    }
}

/// How a client's input ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputEnd {
    /// The client closed its input (EOF or a closed connection).
    Closed,
    /// The client typed the detach sequence.
    Detached,
    /// The FIFO could not be written (the process's stdin is gone).
    Broken,
}

/// Copies `from` into `to` until the client's input ends; with `escape`,
/// until the detach sequence too.
pub async fn pump(
    mut from: impl AsyncRead + Unpin,
    to: &mut pipe::Sender,
    mut escape: Option<Escape>,
) -> InputEnd {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return InputEnd::Closed,
            Ok(n) => n,
        };
        let (data, detached) = match escape.as_mut() {
            Some(e) => e.feed(&buf[..n]),
            None => (buf[..n].to_vec(), false),
        };
        if !data.is_empty() && to.write_all(&data).await.is_err() {
            return InputEnd::Broken;
        }
        if detached {
            return InputEnd::Detached;
        }
    }
}

/// What a client reads of a session (or of a log): chunks until it ends.
pub type Output = futures_util::stream::BoxStream<'static, io::Result<Bytes>>;

/// A session's input: the client's bytes into a stdin FIFO.
pub struct Input {
    pub writer: pipe::Sender,
    /// The detach sequence, watched for on a terminal only (as dockerd).
    pub escape: Option<Escape>,
    pub on_close: OnClose,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("escape", &self.escape)
            .field("on_close", &self.on_close)
            .finish_non_exhaustive()
    }
}

/// What the end of the client's input means.
pub enum OnClose {
    /// A terminal: the session ends; the process's stdin stays open.
    EndSession,
    /// Output goes on; the process's stdin stays open for later attaches.
    KeepStdin,
    /// Output goes on, and the process's stdin ends: `close` is run after
    /// `ready` (the shim has the FIFO; what was written is not lost) and
    /// after our writer is dropped.
    CloseStdin {
        ready: Stopped,
        close: Pin<Box<dyn Future<Output = ()> + Send>>,
    },
}

impl std::fmt::Debug for OnClose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OnClose::EndSession => "EndSession",
            OnClose::KeepStdin => "KeepStdin",
            OnClose::CloseStdin { .. } => "CloseStdin",
        })
    }
}

/// A session on a connection the client hijacked: `output` to the client
/// until it ends, `input` from the client meanwhile. Detaching ends the
/// session at once; so does the end of a terminal's input.
pub async fn session(
    connection: impl AsyncRead + AsyncWrite,
    output: impl Stream<Item = io::Result<Bytes>> + Send,
    input: Option<Input>,
) {
    let (reader, mut writer) = tokio::io::split(connection);
    let output = async move {
        let mut output = std::pin::pin!(output);
        while let Some(chunk) = output.next().await {
            let Ok(chunk) = chunk else { break };
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = writer.flush().await;
        let _ = writer.shutdown().await;
    };
    let mut output = std::pin::pin!(output);
    let Some(input) = input else {
        output.await;
        return;
    };
    let session_over = tokio::select! {
        () = &mut output => return,
        over = feed(input, reader) => over,
    };
    if !session_over {
        output.await;
    }
}

/// Copies the client's input into the process's stdin until it ends, then
/// does what its end means ([`OnClose`]). Whether the session is over with
/// it: a detach, or the end of a terminal's input; otherwise its output
/// goes on.
pub async fn feed(mut input: Input, from: impl AsyncRead + Unpin) -> bool {
    let end = pump(from, &mut input.writer, input.escape.take()).await;
    match (end, input.on_close) {
        (InputEnd::Detached, _) | (InputEnd::Closed, OnClose::EndSession) => true,
        (_, OnClose::CloseStdin { ready, close }) => {
            let writer = input.writer;
            tokio::spawn(async move {
                ready.await;
                drop(writer);
                close.await;
            });
            false
        }
        (_, OnClose::EndSession | OnClose::KeepStdin) => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn detach_keys_parse_as_docker_spells_them() {
        assert_eq!(DetachKeys::parse("ctrl-p,ctrl-q").unwrap().0, [16, 17]);
        assert_eq!(
            DetachKeys::parse("ctrl-@,a,ctrl-[,ctrl-_").unwrap().0,
            [0, b'a', 27, 31]
        );
        assert_eq!(DetachKeys::parse("CTRL-A").unwrap().0, [1]);
        assert_eq!(
            DetachKeys::from_param(Some("")).unwrap(),
            DetachKeys::default()
        );
        for bad in ["ctrl-", "ctrl-1", "ab", "", "ctrl-p,,ctrl-q"] {
            assert!(DetachKeys::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_sequence_is_held_back_until_it_completes_or_breaks() {
        let mut e = Escape::new(DetachKeys::default());
        assert_eq!(e.feed(b"ab\x10"), (b"ab".to_vec(), false));
        // Broken by another key: the held ctrl-p is input after all.
        assert_eq!(e.feed(b"c"), (b"\x10c".to_vec(), false));
        // Completed across two reads: nothing of it passes, the rest is dropped.
        assert_eq!(e.feed(b"x\x10"), (b"x".to_vec(), false));
        assert_eq!(e.feed(b"\x11tail"), (Vec::new(), true));
        // A repeated first key restarts the match.
        let mut e = Escape::new(DetachKeys::default());
        assert_eq!(e.feed(b"\x10\x10\x11"), (b"\x10".to_vec(), true));
        let mut single = Escape::new(DetachKeys::parse("ctrl-a").unwrap());
        assert_eq!(single.feed(b"hi\x01"), (b"hi".to_vec(), true));
    }

    #[tokio::test]
    async fn input_reaches_the_fifo_and_the_detach_sequence_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.stdin");
        let mut writer = open_writer(&path).unwrap();
        let mut reader = pipe::OpenOptions::new().open_receiver(&path).unwrap();
        let end = pump(
            &b"echo hi\n\x10\x11ignored"[..],
            &mut writer,
            Some(Escape::new(DetachKeys::default())),
        )
        .await;
        assert_eq!(end, InputEnd::Detached);
        drop(writer);
        let mut got = Vec::new();
        reader.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"echo hi\n");

        let mut writer = open_writer(&path).unwrap();
        assert_eq!(
            pump(&b"more"[..], &mut writer, None).await,
            InputEnd::Closed
        );
    }
}
