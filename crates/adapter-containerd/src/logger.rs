//! Task output through containerd's `binary://` logging.
//!
//! The shim starts the logger program named by the task's stdout URI
//! (`binary:///path/to/program?key=value`) with the query as arguments
//! (`key value`, in any order), `CONTAINER_ID` and `CONTAINER_NAMESPACE` in
//! its environment, the container's stdout on fd 3, its stderr on fd 4, and
//! fd 5 to signal readiness (the shim waits for a byte or EOF on it). The
//! logger is owned by the shim, so output keeps flowing while holdfast is down.
//!
//! This logger writes one JSON object per line, Docker's json-file format:
//! `{"log": "...\n", "stream": "stdout"|"stderr", "time": "<RFC 3339, ns>"}`,
//! so the two streams stay apart and in arrival order.
//!
//! While it runs, the logger holds an exclusive advisory lock (`flock`) on
//! the live log file, taken before it signals readiness (so before the
//! container can write anything). A reader that knows the container exited
//! waits for the output to be complete by polling a shared lock on the file
//! at the log path (and checking the path still names the file it locked).
//!
//! The file rotates by size like Docker's json-file driver: when a record
//! would take it past `max-size` bytes, `<log>.N` become `<log>.N+1` (the
//! oldest beyond `max-file` is removed), the live file becomes `<log>.1`,
//! and a new, already locked file takes its place at `<log>` (atomically: the
//! path never goes missing and never names an unlocked file while the logger
//! runs).
//!
//! A container of a Kubernetes pod also has its output written, line by
//! line, to the file kubelet named (`cri-log`), in the CRI's format:
//! `<RFC 3339 time> <stdout|stderr> <F|P> <line>`, `P` for a piece of a
//! line that goes on in the next record. kubelet rotates that file itself
//! (it renames it, then asks the runtime to reopen it): before each record
//! the logger checks that the path still names the file it writes, and
//! opens a new one there when it does not.
//!
//! The daemon passes itself as the logger: when [`is_logger_invocation`] says
//! so, its `main` calls [`run_logger`] and exits.

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The URI argument naming the log file.
pub const LOG_FILE_ARG: &str = "holdfast-log";
/// The URI argument bounding one log file's size, in bytes (`0`: unbounded).
pub const MAX_SIZE_ARG: &str = "max-size";
/// The URI argument bounding how many log files are kept, the live one included.
pub const MAX_FILE_ARG: &str = "max-file";
/// The URI argument saying the output comes from a terminal (`1`).
pub const TTY_ARG: &str = "tty";
/// The URI arguments naming output FIFOs to read instead of the shim's fds
/// (see [`LoggerArgs::output_fifos`]).
pub const STDOUT_FIFO_ARG: &str = "stdout-fifo";
pub const STDERR_FIFO_ARG: &str = "stderr-fifo";
/// The URI argument naming a second log in the CRI's format (pods' containers).
pub const CRI_LOG_ARG: &str = "cri-log";
/// A partial line longer than this is written out as its own record (Docker: 16 KiB).
const MAX_LINE_BYTES: usize = 16 * 1024;
/// How long the logger waits for another holder of the log file's lock (a
/// previous logger still draining, a reader's momentary shared lock) before
/// carrying on without it: a hung logger would block the container.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// When the log file rotates and how many rotated files are kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogLimits {
    /// Rotate before a record would take the file past this many bytes;
    /// `0` never rotates.
    pub max_size: u64,
    /// Files kept, the live one included (`1`: the live file is replaced).
    pub max_files: u32,
}

impl Default for LogLimits {
    /// Docker's `local` driver limits: 20 MiB, 5 files.
    fn default() -> Self {
        Self {
            max_size: 20 * 1024 * 1024,
            max_files: 5,
        }
    }
}

/// The stdout URI that makes the shim run `logger` writing to `log_file`,
/// rotating with the default [`LogLimits`].
pub fn binary_uri(logger: &Path, log_file: &Path) -> String {
    LoggerArgs::new(log_file).uri(logger)
}

/// The stdout URI that makes the shim run `logger` writing to `log_file`,
/// rotating within `limits`.
pub fn binary_uri_with(logger: &Path, log_file: &Path, limits: &LogLimits) -> String {
    LoggerArgs {
        limits: *limits,
        ..LoggerArgs::new(log_file)
    }
    .uri(logger)
}

/// Everything one logger is told through its URI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggerArgs {
    pub log_file: PathBuf,
    pub limits: LogLimits,
    /// The output comes from a terminal: write what arrives as it arrives
    /// rather than by lines, so a prompt without a newline reaches a reader
    /// of the log (attach follows the log) at once.
    pub tty: bool,
    /// Read the output from these FIFOs (stdout, stderr) instead of the fds
    /// a shim passes. The shim copies a task's stdin only for FIFO output
    /// (its `binary://` mode has no stdin), so a task with stdin and without
    /// a terminal gets FIFOs and a logger that holdfast starts itself
    /// ([`crate::Adapter`] spawns it, detached, before creating the task).
    pub output_fifos: Option<(PathBuf, PathBuf)>,
    /// Also write the output here, in the CRI's format (kubelet's log of a
    /// pod's container).
    pub cri_log: Option<PathBuf>,
}

impl LoggerArgs {
    pub fn new(log_file: &Path) -> LoggerArgs {
        LoggerArgs {
            log_file: log_file.to_owned(),
            limits: LogLimits::default(),
            tty: false,
            output_fifos: None,
            cri_log: None,
        }
    }

    /// The arguments as the shim would pass them: `key value ...`.
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            LOG_FILE_ARG.to_owned(),
            self.log_file.to_string_lossy().into_owned(),
            MAX_SIZE_ARG.to_owned(),
            self.limits.max_size.to_string(),
            MAX_FILE_ARG.to_owned(),
            self.limits.max_files.max(1).to_string(),
        ];
        let mut push = |key: &str, value: &Path| {
            args.push(key.to_owned());
            args.push(value.to_string_lossy().into_owned());
        };
        if let Some((out, err)) = &self.output_fifos {
            push(STDOUT_FIFO_ARG, out);
            push(STDERR_FIFO_ARG, err);
        }
        if let Some(cri_log) = &self.cri_log {
            push(CRI_LOG_ARG, cri_log);
        }
        if self.tty {
            args.push(TTY_ARG.to_owned());
            args.push("1".to_owned());
        }
        args
    }

    /// The `binary://` URI for the task's stdout and stderr.
    pub fn uri(&self, logger: &Path) -> String {
        let mut uri = format!(
            "binary://{}?{LOG_FILE_ARG}={}&{MAX_SIZE_ARG}={}&{MAX_FILE_ARG}={}",
            escape(&logger.to_string_lossy(), false),
            escape(&self.log_file.to_string_lossy(), true),
            self.limits.max_size,
            self.limits.max_files.max(1),
        );
        if self.tty {
            uri.push_str(&format!("&{TTY_ARG}=1"));
        }
        if let Some(cri_log) = &self.cri_log {
            uri.push_str(&format!(
                "&{CRI_LOG_ARG}={}",
                escape(&cri_log.to_string_lossy(), true)
            ));
        }
        uri
    }

    /// Reads the shim's `key value` arguments. A limit that is missing or
    /// does not parse takes its default: refusing to run would leave the
    /// container writing into pipes nobody reads.
    fn parse(args: &[String]) -> Result<LoggerArgs, LoggerError> {
        let log_file = arg_value(args, LOG_FILE_ARG)
            .map(PathBuf::from)
            .ok_or(LoggerError::MissingLogFile)?;
        let defaults = LogLimits::default();
        let limits = LogLimits {
            max_size: arg_value(args, MAX_SIZE_ARG)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(defaults.max_size),
            max_files: arg_value(args, MAX_FILE_ARG)
                .and_then(|v| v.trim().parse::<u32>().ok())
                .map(|n| n.max(1))
                .unwrap_or(defaults.max_files),
        };
        Ok(LoggerArgs {
            log_file,
            limits,
            tty: arg_value(args, TTY_ARG) == Some("1"),
            output_fifos: arg_value(args, STDOUT_FIFO_ARG)
                .zip(arg_value(args, STDERR_FIFO_ARG))
                .map(|(o, e)| (PathBuf::from(o), PathBuf::from(e))),
            cri_log: arg_value(args, CRI_LOG_ARG).map(PathBuf::from),
        })
    }
}

/// `<log>.<n>`: the `n`th most recent rotated file of `log`.
pub fn rotated_path(log: &Path, n: u32) -> PathBuf {
    let mut name = OsString::from(log.as_os_str());
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Percent-encodes everything but unreserved characters and `/`.
fn escape(s: &str, query: bool) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/');
        if plain || (!query && b == b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether this process was started by a shim as a `binary://` logger.
pub fn is_logger_invocation() -> bool {
    std::env::var_os("CONTAINER_ID").is_some() && std::env::args().any(|a| a == LOG_FILE_ARG)
}

#[derive(Debug, thiserror::Error)]
pub enum LoggerError {
    #[error("missing argument {LOG_FILE_ARG}")]
    MissingLogFile,
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LoggerError {
    let what = what.into();
    move |source| LoggerError::Io { what, source }
}

/// The value following `key` in the shim's `key value` arguments.
fn arg_value<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == key)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

/// The logger's whole life: open and lock the log, signal ready, copy both
/// streams until the container closes them. `args` are the process
/// arguments without the program name.
pub fn run_logger(args: impl IntoIterator<Item = String>) -> Result<(), LoggerError> {
    let args: Vec<String> = args.into_iter().collect();
    let LoggerArgs {
        log_file,
        limits,
        tty,
        output_fifos,
        cri_log,
    } = LoggerArgs::parse(&args)?;
    if let Some(dir) = log_file.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(format!("create {}", dir.display())))?;
    }
    // The shim sends SIGTERM as soon as the container's output is closed, to
    // let the logger flush: note it instead of dying, and drain to EOF.
    let terminated = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&terminated))
        .map_err(io_err("handle SIGTERM"))?;
    // Locked before the ready signal: the container cannot have written
    // anything the lock does not cover.
    let mut out = LogWriter::open(&log_file, limits)
        .map_err(io_err(format!("open {}", log_file.display())))?;
    if let Some(path) = cri_log {
        out.cri = Some(CriLog::open(&path).map_err(io_err(format!("open {}", path.display())))?);
    }
    if let Some((stdout, stderr)) = output_fifos {
        return copy_from_fifos(&stdout, &stderr, out).map_err(io_err("copy output"));
    }
    // The descriptors the shim passed, reopened through /proc (no unsafe fd
    // adoption needed): for pipes this opens the same pipe.
    let stdout = File::open("/proc/self/fd/3").map_err(io_err("open stdout pipe (fd 3)"))?;
    let stderr = File::open("/proc/self/fd/4").map_err(io_err("open stderr pipe (fd 4)"))?;
    {
        let mut ready = OpenOptions::new()
            .write(true)
            .open("/proc/self/fd/5")
            .map_err(io_err("open wait pipe (fd 5)"))?;
        ready.write_all(b"r").map_err(io_err("signal ready"))?;
    }
    copy_streams(stdout, stderr, out, tty).map_err(io_err("copy output"))
}

/// The FIFO mode: a FIFO reads 0 bytes both before its writer (the shim)
/// opens it and after the writer is done, so the logger holds a writer of
/// its own on each until holdfast says the task exists (a byte on, or the
/// end of, the logger's stdin: also what a crashed holdfast leaves). From
/// then on, EOF is the container's. The FIFO files go once opened.
fn copy_from_fifos(stdout: &Path, stderr: &Path, out: LogWriter) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let open = |path: &Path| -> io::Result<(File, File)> {
        // Non-blocking so that opening does not wait for a writer; then our
        // own writer, then blocking reads.
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)?;
        let writer = OpenOptions::new().write(true).open(path)?;
        nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&reader),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )?;
        Ok((reader, writer))
    };
    let (out_r, out_w) = open(stdout)?;
    let (err_r, err_w) = open(stderr)?;
    let copier = std::thread::spawn(move || copy_streams(out_r, err_r, out, false));
    let mut signal = [0u8; 1];
    let _ = io::stdin().read(&mut signal);
    drop((out_w, err_w));
    for path in [stdout, stderr] {
        let _ = std::fs::remove_file(path);
    }
    copier
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("output copier panicked")))
}

/// Copies both streams into `out` until both reach EOF (stderr on a thread
/// of its own), then closes the log, releasing its lock.
fn copy_streams(
    stdout: impl Read,
    stderr: impl Read + Send + 'static,
    out: LogWriter,
    tty: bool,
) -> io::Result<()> {
    let out = Arc::new(Mutex::new(out));
    let err_out = Arc::clone(&out);
    let t = std::thread::spawn(move || copy_lines(stderr, LogStream::Stderr, &err_out, false));
    let first = copy_lines(stdout, LogStream::Stdout, &out, tty);
    let second = t
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("stderr copier panicked")));
    first.and(second)
}

/// Copies `from` into `out` as records of `stream`, one per line (or per
/// [`MAX_LINE_BYTES`] of a longer line), until EOF. With `as_read`, each
/// read becomes a record (up to the last whole UTF-8 character), so what a
/// terminal shows without a newline is in the log at once. When the log
/// cannot be written it keeps draining `from` (a container blocked on a full
/// pipe is worse than lost output) and returns the first error at the end.
fn copy_lines(
    mut from: impl Read,
    stream: LogStream,
    out: &Mutex<LogWriter>,
    as_read: bool,
) -> io::Result<()> {
    let mut buf = vec![0u8; 32 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut failed: Option<io::Error> = None;
    let record = |line: &[u8], failed: &mut Option<io::Error>| {
        if failed.is_none()
            && let Err(e) = write_record(out, stream, line)
        {
            *failed = Some(e);
        }
    };
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(failed.unwrap_or(e)),
        };
        pending.extend_from_slice(&buf[..n]);
        let mut start = 0;
        while let Some(pos) = pending[start..].iter().position(|b| *b == b'\n') {
            // A long line goes out in pieces, whether or not it was read whole.
            let end = start + (pos + 1).min(MAX_LINE_BYTES);
            record(&pending[start..end], &mut failed);
            start = end;
        }
        pending.drain(..start);
        if as_read && !pending.is_empty() {
            let whole = utf8_prefix_len(&pending);
            if whole > 0 {
                record(&pending[..whole], &mut failed);
                pending.drain(..whole);
            }
        }
        while pending.len() >= MAX_LINE_BYTES {
            let rest = pending.split_off(MAX_LINE_BYTES);
            record(&pending, &mut failed);
            pending = rest;
        }
    }
    if !pending.is_empty() {
        record(&pending, &mut failed);
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// How much of `bytes` ends on a whole UTF-8 character: an incomplete
/// sequence at the end waits for the next read (a record is a string). Bytes
/// that can never become valid count as whole and are written lossily.
fn utf8_prefix_len(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => bytes.len(),
    }
}

fn write_record(out: &Mutex<LogWriter>, stream: LogStream, line: &[u8]) -> io::Result<()> {
    let record = LogRecord {
        log: String::from_utf8_lossy(line).into_owned(),
        stream,
        time: rfc3339_now(),
        bytes: std::str::from_utf8(line)
            .is_err()
            .then(|| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, line)),
    };
    let mut text = serde_json::to_vec(&record).map_err(io::Error::other)?;
    text.push(b'\n');
    let mut writer = out
        .lock()
        .map_err(|_| io::Error::other("log file lock poisoned"))?;
    if let Some(cri) = writer.cri.as_mut() {
        // Best effort, as kubelet's own reader is: the json-file log is
        // the record holdfast reads back.
        let _ = cri.write(&record.time, stream, line);
    }
    writer.write(&text)
}

/// The CRI-format log of a pod's container, reopened when kubelet has
/// renamed it away (its rotation).
#[derive(Debug)]
struct CriLog {
    path: PathBuf,
    file: File,
}

impl CriLog {
    fn open(path: &Path) -> io::Result<CriLog> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        use std::os::unix::fs::OpenOptionsExt as _;
        // Readable by its owner's group only, as containerd makes it: a
        // pod's output may hold what only its readers may see.
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .open(path)?;
        Ok(CriLog {
            path: path.to_owned(),
            file,
        })
    }

    /// `<time> <stream> <F|P> <line>`: `F` for a whole line (its newline
    /// is the record's end), `P` for a piece of one.
    fn write(&mut self, time: &str, stream: LogStream, line: &[u8]) -> io::Result<()> {
        if !self.still_at_path() {
            *self = CriLog::open(&self.path)?;
        }
        let (body, tag) = match line.strip_suffix(b"\n") {
            Some(body) => (body, "F"),
            None => (line, "P"),
        };
        let stream = match stream {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        };
        let mut record = Vec::with_capacity(body.len() + 48);
        record.extend_from_slice(format!("{time} {stream} {tag} ").as_bytes());
        record.extend_from_slice(body);
        record.push(b'\n');
        self.file.write_all(&record)
    }

    fn still_at_path(&self) -> bool {
        match (std::fs::metadata(&self.path), self.file.metadata()) {
            (Ok(at_path), Ok(open)) => at_path.ino() == open.ino() && at_path.dev() == open.dev(),
            _ => false,
        }
    }
}

/// The live log file, exclusively locked, and its rotation.
#[derive(Debug)]
struct LogWriter {
    path: PathBuf,
    file: File,
    size: u64,
    limits: LogLimits,
    /// The CRI-format copy, for a pod's container.
    cri: Option<CriLog>,
}

impl LogWriter {
    /// Opens (creating) `path` for appending and locks it.
    fn open(path: &Path, limits: LogLimits) -> io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        lock_exclusive(&file, LOCK_WAIT);
        let size = file.metadata()?.len();
        Ok(Self {
            path: path.to_owned(),
            file,
            size,
            limits,
            cri: None,
        })
    }

    /// Appends one whole record, rotating first if it would not fit. A
    /// failed rotation leaves the current file in use.
    fn write(&mut self, text: &[u8]) -> io::Result<()> {
        let len = text.len() as u64;
        if self.limits.max_size > 0
            && self.size > 0
            && self.size.saturating_add(len) > self.limits.max_size
        {
            // Best effort: output goes on into the current file otherwise.
            let _ = self.rotate();
        }
        self.file.write_all(text)?;
        self.size = self.size.saturating_add(len);
        Ok(())
    }

    /// Shifts the rotated files, links the live file as `<log>.1` and
    /// renames a new, already locked file over `<log>`; then lets go of the
    /// old file (and its lock).
    fn rotate(&mut self) -> io::Result<()> {
        let keep = self.limits.max_files.max(1);
        let mut staged_name = OsString::from(self.path.as_os_str());
        staged_name.push(".rotating");
        let staged = PathBuf::from(staged_name);
        remove_if_present(&staged)?;
        let new = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&staged)?;
        lock_exclusive(&new, Duration::from_millis(100));
        let installed = (|| {
            if keep > 1 {
                remove_if_present(&rotated_path(&self.path, keep - 1))?;
                for n in (1..keep - 1).rev() {
                    match std::fs::rename(
                        rotated_path(&self.path, n),
                        rotated_path(&self.path, n + 1),
                    ) {
                        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                        _ => {}
                    }
                }
                std::fs::hard_link(&self.path, rotated_path(&self.path, 1))?;
            }
            std::fs::rename(&staged, &self.path)
        })();
        if let Err(e) = installed {
            let _ = std::fs::remove_file(&staged);
            return Err(e);
        }
        // Dropping the old file releases its lock; the new one already holds.
        self.file = new;
        self.size = 0;
        Ok(())
    }
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Takes `file`'s exclusive lock, waiting at most `wait` for other holders;
/// gives up silently (after `wait`, or when the file system has no locks).
fn lock_exclusive(file: &File, wait: Duration) {
    let deadline = Instant::now() + wait;
    loop {
        match file.try_lock() {
            Ok(()) | Err(TryLockError::Error(_)) => return,
            Err(TryLockError::WouldBlock) if Instant::now() >= deadline => return,
            Err(TryLockError::WouldBlock) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// One line of output as the logger stored it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRecord {
    pub log: String,
    pub stream: LogStream,
    pub time: String,
    /// The line's bytes in base64 when they are not UTF-8: `log` holds
    /// them lossily, as dockerd's json-file does, for readers of the
    /// format; holdfast's own reader gives back the bytes (an exec's or an
    /// attach's output is the process's, binary or not: `kubectl cp`'s
    /// tar, a `docker exec cat` of a binary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// Reads a log written by [`run_logger`], its rotated files (`<log>.N` ..
/// `<log>.1`) first. A torn last line (the logger was killed mid-write) is
/// skipped.
pub fn read_log(path: &Path) -> io::Result<Vec<LogRecord>> {
    let mut seen = Vec::new();
    let mut texts = Vec::new();
    let live = std::fs::read_to_string(path)?;
    if let Ok(m) = std::fs::metadata(path) {
        seen.push((m.dev(), m.ino()));
    }
    let mut n = 1;
    // The live file is briefly linked as `.1` too while it rotates.
    while let Ok(m) = std::fs::metadata(rotated_path(path, n)) {
        if !seen.contains(&(m.dev(), m.ino())) {
            seen.push((m.dev(), m.ino()));
            texts.push(std::fs::read_to_string(rotated_path(path, n)).unwrap_or_default());
        }
        n += 1;
    }
    texts.reverse();
    texts.push(live);
    Ok(texts
        .iter()
        .flat_map(|t| t.lines())
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The wall clock as a record's `time`.
fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    holdfast_rfc3339::format(d.as_secs() as i64, d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn uri_escapes_the_log_path() {
        let uri = binary_uri(
            Path::new("/usr/bin/holdfastd"),
            Path::new("/var/log/a b&c.log"),
        );
        assert_eq!(
            uri,
            "binary:///usr/bin/holdfastd?holdfast-log=/var/log/a%20b%26c.log\
             &max-size=20971520&max-file=5"
        );
    }

    /// The shim hands the query over as `key value` arguments.
    fn shim_args(uri: &str) -> Vec<String> {
        let query = uri.split_once('?').unwrap().1;
        query
            .split('&')
            .flat_map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                let v = v.replace("%20", " ").replace("%26", "&");
                [k.to_owned(), v]
            })
            .collect()
    }

    #[test]
    fn limits_travel_through_the_uri() {
        let limits = LogLimits {
            max_size: 1000,
            max_files: 2,
        };
        let uri = binary_uri_with(Path::new("/l"), Path::new("/x/a b.log"), &limits);
        let parsed = LoggerArgs::parse(&shim_args(&uri)).unwrap();
        assert_eq!(parsed.log_file, Path::new("/x/a b.log"));
        assert_eq!(parsed.limits, limits);
        assert!(!parsed.tty);

        let args: Vec<String> = ["max-file", "zero", "holdfast-log", "/a", "max-size", "-3"]
            .map(String::from)
            .into();
        assert_eq!(
            LoggerArgs::parse(&args).unwrap().limits,
            LogLimits::default()
        );
        let args: Vec<String> = ["max-file", "0"].map(String::from).into();
        assert!(matches!(
            LoggerArgs::parse(&args),
            Err(LoggerError::MissingLogFile)
        ));
    }

    #[test]
    fn every_argument_travels_through_the_uri_and_the_command_line() {
        let args = LoggerArgs {
            tty: true,
            ..LoggerArgs::new(Path::new("/x/c 1.log"))
        };
        let parsed = LoggerArgs::parse(&shim_args(&args.uri(Path::new("/l")))).unwrap();
        assert_eq!(parsed, args);
        let fifos = LoggerArgs {
            output_fifos: Some(("/r/o 1".into(), "/r/e".into())),
            ..LoggerArgs::new(Path::new("/x/c.log"))
        };
        assert_eq!(LoggerArgs::parse(&fifos.to_args()).unwrap(), fifos);
    }

    #[test]
    fn terminal_output_is_logged_as_it_arrives_in_whole_characters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let out = Mutex::new(LogWriter::open(&path, LogLimits::default()).unwrap());
        let (from, mut to) = std::io::pipe().unwrap();
        let copier = std::thread::scope(|scope| {
            let copier = scope.spawn(|| copy_lines(from, LogStream::Stdout, &out, true));
            // A prompt without a newline is in the log before anything else
            // arrives: that is what an attached terminal waits for.
            to.write_all("/ # ".as_bytes()).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            while read_log(&path).unwrap().is_empty() {
                assert!(Instant::now() < deadline, "prompt never logged");
                std::thread::sleep(Duration::from_millis(5));
            }
            // A character split across two writes is logged whole.
            let e_acute = "é".as_bytes();
            to.write_all(&e_acute[..1]).unwrap();
            to.write_all(&e_acute[1..]).unwrap();
            to.write_all(b"\r\n").unwrap();
            drop(to);
            copier.join().unwrap()
        });
        copier.unwrap();
        let text: String = read_log(&path)
            .unwrap()
            .into_iter()
            .map(|r| r.log)
            .collect();
        assert_eq!(text, "/ # é\r\n");
        assert_eq!(read_log(&path).unwrap()[0].log, "/ # ");
    }

    fn locked(path: &Path) -> bool {
        matches!(
            File::open(path).unwrap().try_lock_shared(),
            Err(TryLockError::WouldBlock)
        )
    }

    fn lines(path: &Path) -> Vec<String> {
        read_log(path)
            .unwrap()
            .into_iter()
            .map(|r| r.log.trim_end().to_owned())
            .collect()
    }

    #[test]
    fn rotates_by_size_keeping_max_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let limits = LogLimits {
            max_size: 400,
            max_files: 3,
        };
        let writer = LogWriter::open(&path, limits).unwrap();
        assert!(locked(&path));
        let (out_r, mut out_w) = std::io::pipe().unwrap();
        let (err_r, err_w) = std::io::pipe().unwrap();
        drop(err_w);
        let feeder = std::thread::spawn(move || {
            for i in 0..100 {
                writeln!(out_w, "line {i:03}").unwrap();
            }
        });
        let out = Mutex::new(writer);
        copy_lines(out_r, LogStream::Stdout, &out, false).unwrap();
        copy_lines(err_r, LogStream::Stderr, &out, false).unwrap();
        feeder.join().unwrap();

        // The live file and two rotated ones, each within the limit.
        for p in [path.clone(), rotated_path(&path, 1), rotated_path(&path, 2)] {
            let len = std::fs::metadata(&p).unwrap().len();
            assert!(len > 0 && len <= 400, "{}: {len}", p.display());
        }
        assert!(!rotated_path(&path, 3).exists());
        assert!(!dir.path().join("c.log.rotating").exists());
        // What is kept is the newest output, whole and in order.
        let kept = lines(&path);
        let first: usize = kept[0].trim_start_matches("line ").parse().unwrap();
        let expected: Vec<String> = (first..100).map(|i| format!("line {i:03}")).collect();
        assert_eq!(kept, expected);
        assert!(first > 50, "kept from {first}");
        // The lock moved to the new file; the rotated ones are free.
        assert!(locked(&path));
        assert!(!locked(&rotated_path(&path, 1)));
        drop(out);
        assert!(!locked(&path));
    }

    #[test]
    fn a_line_that_is_not_utf8_keeps_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let out = Mutex::new(LogWriter::open(&path, LogLimits::default()).unwrap());
        let binary = [0xff_u8, 0x00, 0xfe, b'a', b'\n'];
        copy_lines(&binary[..], LogStream::Stdout, &out, false).unwrap();
        copy_lines(&b"text\n"[..], LogStream::Stdout, &out, false).unwrap();
        let records = read_log(&path).unwrap();
        assert_eq!(records.len(), 2);
        let bytes = records[0].bytes.as_deref().expect("the bytes kept");
        assert_eq!(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, bytes).unwrap(),
            binary
        );
        // the text stays readable as dockerd writes it, lossily
        assert_eq!(records[0].log, "\u{fffd}\u{0}\u{fffd}a\n");
        // a UTF-8 line carries nothing more
        assert_eq!(records[1].bytes, None);
        assert!(
            !std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .nth(1)
                .unwrap()
                .contains("bytes")
        );
    }

    #[test]
    fn one_file_means_replacing_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        let limits = LogLimits {
            max_size: 200,
            max_files: 1,
        };
        let out = Mutex::new(LogWriter::open(&path, limits).unwrap());
        let input: Vec<u8> = (0..20)
            .flat_map(|i| format!("l{i}\n").into_bytes())
            .collect();
        copy_lines(&input[..], LogStream::Stderr, &out, false).unwrap();
        assert!(!rotated_path(&path, 1).exists());
        assert!(std::fs::metadata(&path).unwrap().len() <= 200);
        assert_eq!(lines(&path).last().map(String::as_str), Some("l19"));
        assert!(locked(&path));
    }

    #[test]
    fn both_streams_are_copied_from_files_and_the_log_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.log");
        std::fs::write(
            &path,
            b"{\"log\":\"old\\n\",\"stream\":\"stdout\",\"time\":\"t\"}\n",
        )
        .unwrap();
        let src_out = dir.path().join("out");
        let src_err = dir.path().join("err");
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        std::fs::write(&src_out, format!("a\n{long}\nb-no-newline")).unwrap();
        std::fs::write(&src_err, "e\n").unwrap();
        let writer = LogWriter::open(&path, LogLimits::default()).unwrap();
        copy_streams(
            File::open(&src_out).unwrap(),
            File::open(&src_err).unwrap(),
            writer,
            false,
        )
        .unwrap();
        let records = read_log(&path).unwrap();
        let out: Vec<&str> = records
            .iter()
            .filter(|r| r.stream == LogStream::Stdout)
            .map(|r| r.log.as_str())
            .collect();
        assert_eq!(out.len(), 5);
        assert_eq!(out[0], "old\n");
        assert_eq!(out[1], "a\n");
        assert_eq!(out[2].len(), MAX_LINE_BYTES);
        assert_eq!(out[3], "x".repeat(10) + "\n");
        assert_eq!(out[4], "b-no-newline");
        let err: Vec<&str> = records
            .iter()
            .filter(|r| r.stream == LogStream::Stderr)
            .map(|r| r.log.as_str())
            .collect();
        assert_eq!(err, ["e\n"]);
        assert!(!locked(&path));
    }

    /// A pod's container's log in the CRI's format, whole lines `F` and
    /// pieces `P`, each stream named; after kubelet renames the file away
    /// (its rotation), the next record starts a new file at the path.
    #[test]
    fn the_cri_log_has_kubelets_format_and_follows_its_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pods/default_web/app/0.log");
        let mut log = CriLog::open(&path).unwrap();
        log.write(
            "2026-12-06T00:00:00.000000001Z",
            LogStream::Stdout,
            b"hello\n",
        )
        .unwrap();
        log.write("2026-12-06T00:00:00.000000002Z", LogStream::Stderr, b"part")
            .unwrap();
        let rotated = dir.path().join("pods/default_web/app/0.log.20261206");
        std::fs::rename(&path, &rotated).unwrap();
        log.write("2026-12-06T00:00:01Z", LogStream::Stdout, b"after\n")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&rotated).unwrap(),
            "2026-12-06T00:00:00.000000001Z stdout F hello\n\
             2026-12-06T00:00:00.000000002Z stderr P part\n"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "2026-12-06T00:00:01Z stdout F after\n"
        );
    }

    #[test]
    fn the_cri_log_is_an_argument_of_the_uri() {
        let args = LoggerArgs {
            cri_log: Some(PathBuf::from("/var/log/pods/a b/app/0.log")),
            ..LoggerArgs::new(Path::new("/l/c.log"))
        };
        let uri = args.uri(Path::new("/usr/bin/holdfastd"));
        assert!(
            uri.ends_with("&cri-log=/var/log/pods/a%20b/app/0.log"),
            "{uri}"
        );
        assert_eq!(LoggerArgs::parse(&args.to_args()).unwrap(), args);
    }
}
