//! `docker logs` and attach output: reads the json-file log the logger
//! writes (see `holdfast_adapter_containerd::logger`) and turns its lines into
//! Docker's multiplexed frames.
//!
//! The log is `<path>` plus, after rotation, `<path>.1` (newest) ..
//! `<path>.N` (oldest). Lines are read oldest first; `tail` reads backwards
//! from the end in blocks, so it costs what it returns, not the file size.
//!
//! Following polls the live file every [`POLL`] for growth, and the path for
//! a new file (rotation: the old file is read to its end first, then the new
//! one from its start). When the container has stopped, the reader waits for
//! the logger to let go of its exclusive lock on the file (a shared lock
//! succeeds; bounded, as a restarted container may already have a new
//! logger), reads what is left and ends.
//!
//! File work runs on tokio's blocking pool, a bounded step at a time; the
//! stream is fed through a channel and the work stops when it is dropped.

use bytes::{BufMut, Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use holdfast_adapter_containerd::logger::rotated_path;
use holdfast_rfc3339::format_nanos as rfc3339_nanos;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::{File, Metadata, TryLockError};
use std::future::Future;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// What `GET /containers/{id}/logs` (and attach) asked for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    pub stdout: bool,
    pub stderr: bool,
    /// Only the last N lines (`tail=N`); `None` for all. With `follow`,
    /// `Some(0)` means only output written from the call on.
    pub tail: Option<usize>,
    /// Only lines at or after / at or before these times (Unix nanoseconds).
    pub since_nanos: Option<i64>,
    pub until_nanos: Option<i64>,
    /// Prefix each line with its RFC 3339 time, as dockerd does.
    pub timestamps: bool,
    /// Keep reading new lines until `stopped` resolves and the logger is done
    /// (or `until_nanos` has passed).
    pub follow: bool,
    /// The output of a TTY: the bytes alone, without frame headers (there
    /// is only one stream), as dockerd sends it.
    pub raw: bool,
}

/// Resolves when the container is no longer running.
pub type Stopped = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Stream 1 in a frame header.
pub const STDOUT: u8 = 1;
/// Stream 2 in a frame header.
pub const STDERR: u8 = 2;

/// How often a follower looks for new output.
const POLL: Duration = Duration::from_millis(50);
/// How often, and how long at most, a follower whose container stopped
/// tries the logger's lock.
const LOCK_POLL: Duration = Duration::from_millis(10);
const LOCK_WAIT: Duration = Duration::from_secs(2);
/// Bytes read per blocking step (and per `read_at`).
const STEP_BYTES: usize = 1024 * 1024;
const READ_BYTES: usize = 128 * 1024;
/// Block size reading backwards for `tail`.
const TAIL_BLOCK: usize = 64 * 1024;
/// A "line" longer than this is not one the logger wrote (it splits output
/// at 16 KiB): skipped rather than buffered.
const MAX_RECORD: usize = 1024 * 1024;
/// Rotated files looked for (`<path>.1` ..), far beyond any sane max-file.
const MAX_ROTATED: u32 = 1000;
/// Frames buffered between the reader and the client.
const CHANNEL: usize = 64;

/// The log as Docker's multiplexed frames (8-byte header: stream 1 stdout or
/// 2 stderr, three zero bytes, big-endian u32 length; then the payload), one
/// frame per line. I/O errors end the stream after an `Err` item.
pub fn frames(
    path: PathBuf,
    options: LogOptions,
    stopped: Stopped,
) -> impl Stream<Item = io::Result<Bytes>> + Send + 'static {
    // "From now on" means from this call, not from the first poll: attach
    // calls this before it starts the container.
    let snapshot = if options.follow && options.tail == Some(0) {
        std::fs::metadata(&path)
            .ok()
            .map(|m| (file_id(&m), m.len()))
    } else {
        None
    };
    futures_util::stream::once(async move {
        let (tx, rx) = mpsc::channel(CHANNEL);
        tokio::spawn(async move {
            if let Err(e) = drive(path, options, stopped, snapshot, &tx).await {
                let _ = tx.send(Err(e)).await;
            }
        });
        ReceiverStream::new(rx)
    })
    .flatten()
}

/// One multiplexed frame on stdout.
pub fn stdout_frame(payload: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(8 + payload.len());
    frame.put_slice(&[STDOUT, 0, 0, 0]);
    frame.put_u32(u32::try_from(payload.len()).unwrap_or(u32::MAX));
    frame.put_slice(payload);
    frame.freeze()
}

fn now_nanos() -> i64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// A file's identity: device and inode.
type FileId = (u64, u64);

fn file_id(m: &Metadata) -> FileId {
    (m.dev(), m.ino())
}

/// One json-file line.
#[derive(Deserialize)]
struct Record<'a> {
    #[serde(borrow)]
    log: Cow<'a, str>,
    #[serde(borrow)]
    stream: Cow<'a, str>,
    #[serde(borrow)]
    time: Cow<'a, str>,
    /// The bytes themselves (base64), for a line that is not UTF-8.
    #[serde(default, borrow)]
    bytes: Option<Cow<'a, str>>,
}

/// Which lines become frames, and how.
#[derive(Clone, Copy, Debug)]
struct Filter {
    stdout: bool,
    stderr: bool,
    since: Option<i64>,
    until: Option<i64>,
    timestamps: bool,
    raw: bool,
}

enum Verdict {
    Emit(Bytes),
    Skip,
    /// Selected but after `until`: a forward reader is done.
    PastUntil,
}

impl Filter {
    fn new(o: &LogOptions) -> Self {
        Self {
            stdout: o.stdout,
            stderr: o.stderr,
            since: o.since_nanos,
            until: o.until_nanos,
            timestamps: o.timestamps,
            raw: o.raw,
        }
    }

    fn frame(&self, line: &[u8]) -> Verdict {
        let Ok(record) = serde_json::from_slice::<Record>(line) else {
            return Verdict::Skip;
        };
        let stream = match &*record.stream {
            "stdout" if self.stdout => STDOUT,
            "stderr" if self.stderr => STDERR,
            _ => return Verdict::Skip,
        };
        let time = holdfast_rfc3339::parse_nanos(&record.time).and_then(|t| i64::try_from(t).ok());
        if let Some(since) = self.since
            && time.is_none_or(|t| t < since)
        {
            return Verdict::Skip;
        }
        if let Some(until) = self.until {
            match time {
                None => return Verdict::Skip,
                Some(t) if t > until => return Verdict::PastUntil,
                Some(_) => {}
            }
        }
        let prefix = if self.timestamps {
            let mut p = time.map_or_else(|| record.time.clone().into_owned(), rfc3339_nanos);
            p.push(' ');
            p
        } else {
            String::new()
        };
        // A line that is not UTF-8 is read back as the bytes it was.
        let decoded = record.bytes.as_deref().and_then(|b| {
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, b).ok()
        });
        let payload = decoded.as_deref().unwrap_or(record.log.as_bytes());
        let Ok(len) = u32::try_from(prefix.len() + payload.len()) else {
            return Verdict::Skip;
        };
        let mut frame = BytesMut::with_capacity(8 + len as usize);
        if !self.raw {
            frame.put_slice(&[stream, 0, 0, 0]);
            frame.put_u32(len);
        }
        frame.put_slice(prefix.as_bytes());
        frame.put_slice(payload);
        Verdict::Emit(frame.freeze())
    }
}

/// An open log file read forwards from `pos`.
#[derive(Debug)]
struct Source {
    file: File,
    id: FileId,
    pos: u64,
    /// The start of a line whose end has not been read yet.
    pending: Vec<u8>,
    /// Inside an over-long line: drop bytes up to the next newline.
    skipping: bool,
}

impl Source {
    /// `None` when there is no such file.
    fn open(path: &Path) -> io::Result<Option<Source>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let id = file_id(&file.metadata()?);
        Ok(Some(Source {
            file,
            id,
            pos: 0,
            pending: Vec::new(),
            skipping: false,
        }))
    }

    fn restart_at(&mut self, pos: u64) {
        self.pos = pos;
        self.pending.clear();
        self.skipping = false;
    }

    /// Reads up to about `budget` bytes from `pos`, handing each complete
    /// line to `line`. True when it reached the end of the file.
    fn read(&mut self, budget: usize, line: &mut dyn FnMut(&[u8])) -> io::Result<bool> {
        let mut buf = vec![0u8; READ_BYTES];
        let mut done = 0;
        while done < budget {
            let n = match self.file.read_at(&mut buf, self.pos) {
                Ok(0) => return Ok(true),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            self.pos += n as u64;
            done += n;
            self.take(&buf[..n], line);
        }
        Ok(false)
    }

    fn take(&mut self, mut data: &[u8], line: &mut dyn FnMut(&[u8])) {
        while let Some(i) = data.iter().position(|b| *b == b'\n') {
            if self.skipping {
                self.skipping = false;
            } else if self.pending.is_empty() {
                line(&data[..i]);
            } else {
                self.pending.extend_from_slice(&data[..i]);
                let whole = std::mem::take(&mut self.pending);
                line(&whole);
                self.pending = whole;
                self.pending.clear();
            }
            data = &data[i + 1..];
        }
        if !self.skipping {
            self.pending.extend_from_slice(data);
            if self.pending.len() > MAX_RECORD {
                self.pending = Vec::new();
                self.skipping = true;
            }
        }
    }
}

/// Frames read in one blocking step.
#[derive(Debug, Default)]
struct Batch {
    frames: Vec<Bytes>,
    /// Every file was read to its current end.
    caught_up: bool,
}

/// The reading state, moved into the blocking pool for each step.
#[derive(Debug)]
struct Reader {
    path: PathBuf,
    filter: Filter,
    /// Files rotated away, to read to their end and drop, oldest first.
    backlog: VecDeque<Source>,
    /// The file at `path` when last looked.
    live: Option<Source>,
    /// A line after `until` was read.
    past_until: bool,
}

impl Reader {
    /// Opens the log and reads the `tail`, if asked for; returns the frames
    /// the tail gave and the reader positioned for what comes next.
    fn start(
        path: PathBuf,
        filter: Filter,
        tail: Option<usize>,
        follow: bool,
        snapshot: Option<(FileId, u64)>,
    ) -> io::Result<(Reader, Vec<Bytes>)> {
        let mut reader = Reader {
            path,
            filter,
            backlog: VecDeque::new(),
            live: None,
            past_until: false,
        };
        match tail {
            Some(0) if follow => {
                if let Some(mut live) = Source::open(&reader.path)? {
                    if let Some((id, len)) = snapshot
                        && id == live.id
                        && live.file.metadata()?.len() >= len
                    {
                        live.restart_at(len);
                    }
                    reader.live = Some(live);
                }
                Ok((reader, Vec::new()))
            }
            Some(0) => Ok((reader, Vec::new())),
            Some(n) => {
                let (live, rotated) = open_all(&reader.path)?;
                let mut newest_first = Vec::new();
                let mut resume = 0;
                let mut files = live.iter().chain(rotated.iter());
                if let Some(s) = files.next() {
                    let len = s.file.metadata()?.len();
                    resume = scan_back(&s.file, len, n, &filter, &mut newest_first)?;
                }
                for s in files {
                    if newest_first.len() >= n {
                        break;
                    }
                    let len = s.file.metadata()?.len();
                    scan_back(&s.file, len, n, &filter, &mut newest_first)?;
                }
                newest_first.reverse();
                if follow {
                    reader.live = live.map(|mut s| {
                        s.restart_at(resume);
                        s
                    });
                }
                Ok((reader, newest_first))
            }
            None => {
                let (live, mut rotated) = open_all(&reader.path)?;
                rotated.reverse();
                reader.backlog = rotated.into();
                reader.live = live;
                Ok((reader, Vec::new()))
            }
        }
    }

    /// Reads on, at most [`STEP_BYTES`]: rotated files first, then the live one.
    fn step(&mut self) -> io::Result<Batch> {
        let mut frames = Vec::new();
        let filter = self.filter;
        let past_until = &mut self.past_until;
        let mut on_line = |line: &[u8]| {
            if *past_until {
                return;
            }
            match filter.frame(line) {
                Verdict::Emit(f) => frames.push(f),
                Verdict::Skip => {}
                Verdict::PastUntil => *past_until = true,
            }
        };
        let caught_up = if let Some(old) = self.backlog.front_mut() {
            if old.read(STEP_BYTES, &mut on_line)? {
                // What is left of a rotated file is a torn line: dropped.
                self.backlog.pop_front();
            }
            false
        } else if let Some(live) = &mut self.live {
            live.read(STEP_BYTES, &mut on_line)?
        } else {
            true
        };
        Ok(Batch { frames, caught_up })
    }

    /// Looks at the path: a file appeared, or another file took the place of
    /// the one being read (rotation; the old one is read to its end first),
    /// or the file shrank (truncated: read again from its start). True when
    /// something changed.
    fn check_rotation(&mut self) -> io::Result<bool> {
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        match &mut self.live {
            Some(live) if live.id == file_id(&meta) => {
                if meta.len() < live.pos {
                    live.restart_at(0);
                    return Ok(true);
                }
                Ok(false)
            }
            _ => {
                let Some(new) = Source::open(&self.path)? else {
                    return Ok(false);
                };
                if let Some(old) = self.live.replace(new) {
                    self.backlog.push_back(old);
                }
                Ok(true)
            }
        }
    }
}

/// The live file and the rotated ones (newest first), each once: while the
/// logger rotates, the live file is briefly also `<path>.1`, and a rotation
/// between opening `<path>` and the others is retried.
fn open_all(path: &Path) -> io::Result<(Option<Source>, Vec<Source>)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let live = Source::open(path)?;
        let mut seen: Vec<FileId> = live.iter().map(|s| s.id).collect();
        let mut rotated = Vec::new();
        for n in 1..=MAX_ROTATED {
            let Some(s) = Source::open(&rotated_path(path, n))? else {
                break;
            };
            if !seen.contains(&s.id) {
                seen.push(s.id);
                rotated.push(s);
            }
        }
        let now = std::fs::metadata(path).ok().map(|m| file_id(&m));
        if now == live.as_ref().map(|s| s.id) || attempt >= 3 {
            return Ok((live, rotated));
        }
    }
}

/// Reads `file[..len]` backwards in blocks, pushing the frames of selected
/// complete lines (newest first) onto `out` until it holds `want`. Returns
/// the offset just after the last complete line (where following resumes).
fn scan_back(
    file: &File,
    len: u64,
    want: usize,
    filter: &Filter,
    out: &mut Vec<Bytes>,
) -> io::Result<u64> {
    let mut buf = vec![0u8; TAIL_BLOCK];
    let mut end = len;
    // The bytes after `end` up to the newline ending their line.
    let mut carry: Vec<u8> = Vec::new();
    let mut carry_too_long = false;
    // Just after the last newline; what follows it is a torn or unfinished line.
    let mut complete_end: Option<u64> = None;
    let emit = |line: &[u8], too_long: bool, out: &mut Vec<Bytes>| {
        if !too_long && let Verdict::Emit(f) = filter.frame(line) {
            out.push(f);
        }
    };
    while end > 0 && out.len() < want {
        let start = end.saturating_sub(TAIL_BLOCK as u64);
        let block = &mut buf[..(end - start) as usize];
        match file.read_exact_at(block, start) {
            Ok(()) => {}
            // The file shrank under us: what was read is all there is.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
        let mut seg_end = block.len();
        for i in (0..block.len()).rev() {
            if block[i] != b'\n' {
                continue;
            }
            if complete_end.is_none() {
                complete_end = Some(start + i as u64 + 1);
            } else if carry.is_empty() {
                emit(&block[i + 1..seg_end], carry_too_long, out);
            } else {
                let mut line = block[i + 1..seg_end].to_vec();
                line.extend_from_slice(&carry);
                emit(&line, carry_too_long, out);
            }
            carry.clear();
            carry_too_long = false;
            seg_end = i;
            if out.len() >= want {
                return Ok(complete_end.unwrap_or(0));
            }
        }
        if seg_end > 0 && !carry_too_long {
            if carry.len() + seg_end > MAX_RECORD {
                carry = Vec::new();
                carry_too_long = true;
            } else {
                let mut joined = block[..seg_end].to_vec();
                joined.extend_from_slice(&carry);
                carry = joined;
            }
        }
        end = start;
    }
    // The file's first line.
    if end == 0 && complete_end.is_some() && out.len() < want {
        emit(&carry, carry_too_long, out);
    }
    Ok(complete_end.unwrap_or(0))
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("log reader: {e}")))
}

/// Sends the frames; false when the client went away.
async fn send_all(tx: &mpsc::Sender<io::Result<Bytes>>, frames: Vec<Bytes>) -> bool {
    for f in frames {
        if tx.send(Ok(f)).await.is_err() {
            return false;
        }
    }
    true
}

/// One step in the blocking pool.
async fn step(reader: Reader) -> io::Result<(Reader, Batch)> {
    let (reader, batch) = blocking(move || {
        let mut reader = reader;
        let b = reader.step();
        (reader, b)
    })
    .await?;
    Ok((reader, batch?))
}

async fn check_rotation(reader: Reader) -> io::Result<(Reader, bool)> {
    let (reader, changed) = blocking(move || {
        let mut reader = reader;
        let c = reader.check_rotation();
        (reader, c)
    })
    .await?;
    Ok((reader, changed?))
}

async fn drive(
    path: PathBuf,
    options: LogOptions,
    mut stopped: Stopped,
    snapshot: Option<(FileId, u64)>,
    tx: &mpsc::Sender<io::Result<Bytes>>,
) -> io::Result<()> {
    if !options.stdout && !options.stderr {
        return Ok(());
    }
    let filter = Filter::new(&options);
    let (follow, tail, until) = (options.follow, options.tail, options.until_nanos);
    let lock_path = path.clone();
    let (mut reader, tail_frames) =
        blocking(move || Reader::start(path, filter, tail, follow, snapshot)).await??;
    if !send_all(tx, tail_frames).await {
        return Ok(());
    }
    let wait_for_logger = loop {
        let (r, batch) = step(reader).await?;
        reader = r;
        if !send_all(tx, batch.frames).await || reader.past_until {
            return Ok(());
        }
        if !batch.caught_up {
            continue;
        }
        if !follow {
            return Ok(());
        }
        let (r, changed) = check_rotation(reader).await?;
        reader = r;
        if changed {
            continue;
        }
        if until.is_some_and(|u| now_nanos() > u) {
            break false;
        }
        tokio::select! {
            () = &mut stopped => break true,
            () = tokio::time::sleep(POLL) => {}
            () = tx.closed() => return Ok(()),
        }
    };
    if wait_for_logger && !logger_finished(&lock_path, tx).await {
        return Ok(());
    }
    // The rest: to the end of the live file, through any last rotations.
    let mut rotations = 0;
    loop {
        let (r, batch) = step(reader).await?;
        reader = r;
        if !send_all(tx, batch.frames).await || reader.past_until {
            return Ok(());
        }
        if !batch.caught_up {
            continue;
        }
        let (r, changed) = check_rotation(reader).await?;
        reader = r;
        rotations += 1;
        if !changed || rotations > 16 {
            return Ok(());
        }
    }
}

/// Waits (at most [`LOCK_WAIT`]) until no logger holds the log's lock; false
/// when the client went away meanwhile.
async fn logger_finished(path: &Path, tx: &mpsc::Sender<io::Result<Bytes>>) -> bool {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        let p = path.to_owned();
        if blocking(move || logger_done(&p)).await.unwrap_or(true) {
            return true;
        }
        if tx.is_closed() {
            return false;
        }
        if Instant::now() >= deadline {
            return true;
        }
        tokio::time::sleep(LOCK_POLL).await;
    }
}

/// Whether no logger writes the file at `path`: a shared lock on it
/// succeeds and the path still names the file locked (a rotating logger
/// puts its new file in place already locked). A missing file, or a file
/// system without locks, has nothing to wait for.
fn logger_done(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return true;
    };
    match file.try_lock_shared() {
        Ok(()) => match (std::fs::metadata(path), file.metadata()) {
            (Ok(at_path), Ok(locked)) => file_id(&at_path) == file_id(&locked),
            _ => true,
        },
        Err(TryLockError::WouldBlock) => false,
        Err(TryLockError::Error(_)) => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;
    use tokio::sync::oneshot;

    const BASE: i64 = 1_704_164_645_123_456_789; // 2024-01-02T03:04:05.123456789Z

    fn record(stream: &str, log: &str, time: i64) -> String {
        let mut s = serde_json::json!({"log": log, "stream": stream, "time": rfc3339_nanos(time)})
            .to_string();
        s.push('\n');
        s
    }

    #[test]
    fn a_line_that_is_not_utf8_is_read_back_as_its_bytes() {
        let options = LogOptions {
            stdout: true,
            stderr: true,
            raw: true,
            ..LogOptions::default()
        };
        let filter = Filter::new(&options);
        let line = serde_json::json!({
            "log": "\u{fffd}a", "stream": "stdout", "time": rfc3339_nanos(BASE), "bytes": "/2E=",
        })
        .to_string();
        let Verdict::Emit(frame) = filter.frame(line.as_bytes()) else {
            panic!("not emitted");
        };
        assert_eq!(&frame[..], [0xff, b'a']);
        // without them, the text
        let Verdict::Emit(frame) = filter.frame(record("stdout", "ok", BASE).as_bytes()) else {
            panic!("not emitted");
        };
        assert_eq!(&frame[..], b"ok");
    }

    /// `count` lines "<prefix><i>\n", alternating stdout/stderr when `mixed`,
    /// one second apart from `BASE + first` seconds.
    fn lines(prefix: &str, first: usize, count: usize, mixed: bool) -> String {
        (first..first + count)
            .map(|i| {
                let stream = if mixed && i % 2 == 1 {
                    "stderr"
                } else {
                    "stdout"
                };
                record(
                    stream,
                    &format!("{prefix}{i}\n"),
                    BASE + i as i64 * 1_000_000_000,
                )
            })
            .collect()
    }

    fn append(path: &Path, text: &str) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }

    fn both() -> LogOptions {
        LogOptions {
            stdout: true,
            stderr: true,
            ..Default::default()
        }
    }

    fn never() -> Stopped {
        Box::pin(std::future::pending())
    }

    fn stopper() -> (oneshot::Sender<()>, Stopped) {
        let (tx, rx) = oneshot::channel::<()>();
        (
            tx,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }

    /// Splits multiplexed frames into (stream, payload).
    fn decode(mut data: &[u8]) -> Vec<(u8, String)> {
        let mut out = Vec::new();
        while !data.is_empty() {
            assert!(data.len() >= 8, "short header");
            assert_eq!(&data[1..4], &[0, 0, 0]);
            let len = u32::from_be_bytes([data[4], data[5], data[6], data[7]]) as usize;
            let payload = &data[8..8 + len];
            out.push((data[0], String::from_utf8(payload.to_vec()).unwrap()));
            data = &data[8 + len..];
        }
        out
    }

    async fn collect(path: &Path, options: LogOptions) -> Vec<(u8, String)> {
        let stream = frames(path.to_owned(), options, never());
        let all: Vec<io::Result<Bytes>> =
            tokio::time::timeout(Duration::from_secs(10), stream.collect())
                .await
                .unwrap();
        let mut data = Vec::new();
        for f in all {
            data.extend_from_slice(&f.unwrap());
        }
        decode(&data)
    }

    fn payloads(frames: &[(u8, String)]) -> Vec<&str> {
        frames.iter().map(|(_, p)| p.trim_end()).collect()
    }

    /// Reads frames from a live stream until `n` arrived.
    async fn next_n(
        stream: &mut (impl Stream<Item = io::Result<Bytes>> + Unpin),
        n: usize,
    ) -> Vec<(u8, String)> {
        let mut got = Vec::new();
        while got.len() < n {
            let f = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("a frame in time")
                .expect("the stream goes on")
                .unwrap();
            got.extend(decode(&f));
        }
        got
    }

    async fn ends(stream: &mut (impl Stream<Item = io::Result<Bytes>> + Unpin)) {
        let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("the stream ends in time");
        assert!(next.is_none(), "unexpected frame {next:?}");
    }

    #[tokio::test]
    async fn selects_streams() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 4, true));
        let all = collect(&path, both()).await;
        assert_eq!(
            all,
            [
                (1, "l0\n".to_owned()),
                (2, "l1\n".to_owned()),
                (1, "l2\n".to_owned()),
                (2, "l3\n".to_owned())
            ]
        );
        let out = LogOptions {
            stdout: true,
            ..Default::default()
        };
        assert_eq!(payloads(&collect(&path, out).await), ["l0", "l2"]);
        let err = LogOptions {
            stderr: true,
            ..Default::default()
        };
        assert_eq!(payloads(&collect(&path, err).await), ["l1", "l3"]);
        assert!(collect(&path, LogOptions::default()).await.is_empty());
    }

    #[tokio::test]
    async fn raw_output_has_no_frame_headers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 2, false));
        let raw = LogOptions {
            raw: true,
            ..both()
        };
        let bytes: Vec<u8> = frames(path, raw, never())
            .map(|b| b.unwrap().to_vec())
            .concat()
            .await;
        assert_eq!(String::from_utf8(bytes).unwrap(), "l0\nl1\n");
    }

    #[tokio::test]
    async fn tails() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 6, true));
        let tail = |n, stdout, stderr| LogOptions {
            stdout,
            stderr,
            tail: Some(n),
            ..Default::default()
        };
        assert_eq!(
            payloads(&collect(&path, tail(2, true, true)).await),
            ["l4", "l5"]
        );
        assert_eq!(
            payloads(&collect(&path, tail(2, true, false)).await),
            ["l2", "l4"]
        );
        assert_eq!(
            payloads(&collect(&path, tail(1, false, true)).await),
            ["l5"]
        );
        assert_eq!(collect(&path, tail(100, true, true)).await.len(), 6);
        assert!(collect(&path, tail(0, true, true)).await.is_empty());
    }

    #[tokio::test]
    async fn tails_across_blocks_and_rotated_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        // Lines long enough that a tail spans several blocks.
        let long = "x".repeat(300);
        let text = |first: usize, count: usize| -> String {
            (first..first + count)
                .map(|i| record("stdout", &format!("{i} {long}\n"), BASE))
                .collect()
        };
        append(&rotated_path(&path, 2), &text(0, 300));
        append(&rotated_path(&path, 1), &text(300, 300));
        append(&path, &text(600, 300));
        let numbers = |frames: Vec<(u8, String)>| -> Vec<usize> {
            frames
                .iter()
                .map(|(_, p)| p.split(' ').next().unwrap().parse().unwrap())
                .collect()
        };
        let opts = |tail| LogOptions {
            stdout: true,
            tail,
            ..Default::default()
        };
        assert_eq!(
            numbers(collect(&path, opts(Some(700))).await),
            (200..900).collect::<Vec<_>>()
        );
        assert_eq!(
            numbers(collect(&path, opts(Some(250))).await),
            (650..900).collect::<Vec<_>>()
        );
        // Everything, oldest file first.
        assert_eq!(
            numbers(collect(&path, opts(None)).await),
            (0..900).collect::<Vec<_>>()
        );
        assert_eq!(
            numbers(collect(&path, opts(Some(5000))).await),
            (0..900).collect::<Vec<_>>()
        );
    }

    #[tokio::test]
    async fn filters_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 6, true));
        let sec = 1_000_000_000;
        let opts = |since: Option<i64>, until: Option<i64>, tail| LogOptions {
            since_nanos: since,
            until_nanos: until,
            tail,
            ..both()
        };
        let window = opts(Some(BASE + 2 * sec), Some(BASE + 4 * sec), None);
        assert_eq!(payloads(&collect(&path, window).await), ["l2", "l3", "l4"]);
        let window = opts(Some(BASE + 2 * sec - 1), Some(BASE + 4 * sec - 1), Some(2));
        assert_eq!(payloads(&collect(&path, window).await), ["l2", "l3"]);
        let since = opts(Some(BASE + 5 * sec), None, None);
        assert_eq!(payloads(&collect(&path, since).await), ["l5"]);
        let until = opts(None, Some(BASE), None);
        assert_eq!(payloads(&collect(&path, until).await), ["l0"]);
    }

    #[tokio::test]
    async fn prefixes_timestamps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &record("stderr", "hello\n", BASE));
        let opts = LogOptions {
            timestamps: true,
            ..both()
        };
        assert_eq!(
            collect(&path, opts).await,
            [(2, "2024-01-02T03:04:05.123456789Z hello\n".to_owned())]
        );
    }

    #[tokio::test]
    async fn skips_torn_and_invalid_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &record("stdout", "a\n", BASE));
        append(
            &path,
            "not json\n{\"log\":\"b\\n\",\"stream\":\"stdout\"}\n\n",
        );
        append(&path, &record("stdout", "c\n", BASE));
        append(&path, "{\"log\":\"torn");
        assert_eq!(payloads(&collect(&path, both()).await), ["a", "c"]);
        let tail = LogOptions {
            tail: Some(1),
            ..both()
        };
        assert_eq!(payloads(&collect(&path, tail).await), ["c"]);
        // Only a torn line, or nothing at all.
        let only = dir.path().join("only.log");
        append(&only, "{\"log\":\"torn");
        assert!(collect(&only, both()).await.is_empty());
        let tail = LogOptions {
            tail: Some(3),
            ..both()
        };
        assert!(collect(&only, tail.clone()).await.is_empty());
        assert!(
            collect(&dir.path().join("missing.log"), tail)
                .await
                .is_empty()
        );
        assert!(
            collect(&dir.path().join("missing.log"), both())
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn follows_until_stopped_and_the_logger_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("old", 0, 3, false));
        let (stop, stopped) = stopper();
        let opts = LogOptions {
            follow: true,
            tail: Some(1),
            ..both()
        };
        let mut stream = Box::pin(frames(path.clone(), opts, stopped));
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["old2"]);
        // A line written in two pieces comes out once, whole.
        let line = record("stderr", "new\n", BASE);
        append(&path, &line[..10]);
        tokio::time::sleep(Duration::from_millis(120)).await;
        append(&path, &line[10..]);
        assert_eq!(next_n(&mut stream, 1).await, [(2, "new\n".to_owned())]);

        // The container stopped, but its logger still holds the file and
        // writes one more line before it lets go.
        let logger = File::open(&path).unwrap();
        logger.lock().unwrap();
        stop.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        append(&path, &record("stdout", "last\n", BASE));
        drop(logger);
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["last"]);
        ends(&mut stream).await;
    }

    #[tokio::test]
    async fn follows_across_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("a", 0, 2, false));
        let (stop, stopped) = stopper();
        let opts = LogOptions {
            follow: true,
            ..both()
        };
        let mut stream = Box::pin(frames(path.clone(), opts, stopped));
        assert_eq!(payloads(&next_n(&mut stream, 2).await), ["a0", "a1"]);
        // The logger's rotation: the last lines of the old file, then the new
        // file in its place (already holding output).
        append(&path, &lines("a", 2, 1, false));
        std::fs::hard_link(&path, rotated_path(&path, 1)).unwrap();
        let staged = dir.path().join("c.log.rotating");
        append(&staged, &lines("b", 0, 2, false));
        std::fs::rename(&staged, &path).unwrap();
        assert_eq!(payloads(&next_n(&mut stream, 3).await), ["a2", "b0", "b1"]);
        // Rotated again, by a shorter file (same name, new inode).
        std::fs::rename(&path, rotated_path(&path, 1)).unwrap();
        append(&path, &lines("c", 0, 1, false));
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["c0"]);
        stop.send(()).unwrap();
        ends(&mut stream).await;
    }

    #[tokio::test]
    async fn attach_follows_a_log_that_does_not_exist_yet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let (stop, stopped) = stopper();
        let opts = LogOptions {
            follow: true,
            tail: Some(0),
            ..both()
        };
        let mut stream = Box::pin(frames(path.clone(), opts, stopped));
        tokio::time::sleep(Duration::from_millis(100)).await;
        append(&path, &lines("l", 0, 2, true));
        assert_eq!(
            next_n(&mut stream, 2).await,
            [(1, "l0\n".to_owned()), (2, "l1\n".to_owned())]
        );
        stop.send(()).unwrap();
        ends(&mut stream).await;
    }

    #[tokio::test]
    async fn tail_zero_follow_starts_at_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("old", 0, 3, false));
        let (stop, stopped) = stopper();
        let opts = LogOptions {
            follow: true,
            tail: Some(0),
            ..both()
        };
        let stream = frames(path.clone(), opts, stopped);
        // Written after the call but before the stream is first polled.
        append(&path, &lines("new", 0, 1, false));
        let mut stream = Box::pin(stream);
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["new0"]);
        stop.send(()).unwrap();
        ends(&mut stream).await;
    }

    #[tokio::test]
    async fn follow_ends_at_until_and_stopped_before_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 1, false));
        let opts = LogOptions {
            follow: true,
            until_nanos: Some(now_nanos() + 200_000_000),
            ..both()
        };
        let mut stream = Box::pin(frames(path.clone(), opts, never()));
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["l0"]);
        ends(&mut stream).await;

        // Already stopped: the content, then the end.
        let opts = LogOptions {
            follow: true,
            ..both()
        };
        let mut stream = Box::pin(frames(path.clone(), opts, Box::pin(async {})));
        assert_eq!(payloads(&next_n(&mut stream, 1).await), ["l0"]);
        ends(&mut stream).await;
        // Stopped and never logged anything.
        let opts = LogOptions {
            follow: true,
            tail: Some(0),
            ..both()
        };
        let mut stream = Box::pin(frames(
            dir.path().join("none.log"),
            opts,
            Box::pin(async {}),
        ));
        ends(&mut stream).await;
    }

    #[tokio::test]
    async fn a_dropped_stream_stops_the_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        append(&path, &lines("l", 0, 200, false));
        let opts = LogOptions {
            follow: true,
            ..both()
        };
        let (stop, stopped) = stopper();
        let mut stream = Box::pin(frames(path.clone(), opts, stopped));
        next_n(&mut stream, 1).await;
        drop(stream);
        // The reader task owned the receiving end of `stop`; once it is gone
        // the sender sees the channel closed.
        tokio::time::timeout(Duration::from_secs(5), async {
            while !stop.is_closed() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
    }
}
