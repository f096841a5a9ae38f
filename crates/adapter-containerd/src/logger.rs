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
//! The daemon passes itself as the logger: when [`is_logger_invocation`] says
//! so, its `main` calls [`run_logger`] and exits.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// The URI argument naming the log file.
pub const LOG_FILE_ARG: &str = "holdfast-log";
/// A partial line longer than this is written out as its own record (Docker: 16 KiB).
const MAX_LINE_BYTES: usize = 16 * 1024;

/// The stdout URI that makes the shim run `logger` writing to `log_file`.
pub fn binary_uri(logger: &Path, log_file: &Path) -> String {
    format!(
        "binary://{}?{LOG_FILE_ARG}={}",
        escape(&logger.to_string_lossy(), false),
        escape(&log_file.to_string_lossy(), true)
    )
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

/// The logger's whole life: open the log, signal ready, copy both streams
/// until the container closes them. `args` are the process arguments
/// without the program name.
pub fn run_logger(args: impl IntoIterator<Item = String>) -> Result<(), LoggerError> {
    let args: Vec<String> = args.into_iter().collect();
    let log_file = args
        .iter()
        .position(|a| a == LOG_FILE_ARG)
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .ok_or(LoggerError::MissingLogFile)?;
    if let Some(dir) = log_file.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(format!("create {}", dir.display())))?;
    }
    // The shim sends SIGTERM as soon as the container's output is closed, to
    // let the logger flush: note it instead of dying, and drain to EOF.
    let terminated = Arc::new(std::sync::atomic::AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&terminated))
        .map_err(io_err("handle SIGTERM"))?;
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_file)
        .map_err(io_err(format!("open {}", log_file.display())))?;
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
    let out = Arc::new(Mutex::new(out));
    let copy_err = {
        let err_out = Arc::clone(&out);
        let t = std::thread::spawn(move || copy_lines(stderr, LogStream::Stderr, &err_out));
        let first = copy_lines(stdout, LogStream::Stdout, &out);
        let second = t
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("stderr copier panicked")));
        first.and(second)
    };
    copy_err.map_err(io_err("copy output"))
}

fn copy_lines(mut from: File, stream: LogStream, out: &Mutex<File>) -> io::Result<()> {
    let mut buf = vec![0u8; 32 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(pos) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=pos).collect();
            write_record(out, stream, &line)?;
        }
        if pending.len() >= MAX_LINE_BYTES {
            let line = std::mem::take(&mut pending);
            write_record(out, stream, &line)?;
        }
    }
    if !pending.is_empty() {
        write_record(out, stream, &pending)?;
    }
    Ok(())
}

fn write_record(out: &Mutex<File>, stream: LogStream, line: &[u8]) -> io::Result<()> {
    let record = LogRecord {
        log: String::from_utf8_lossy(line).into_owned(),
        stream,
        time: rfc3339_now(),
    };
    let mut text = serde_json::to_vec(&record).map_err(io::Error::other)?;
    text.push(b'\n');
    let mut file = out
        .lock()
        .map_err(|_| io::Error::other("log file lock poisoned"))?;
    file.write_all(&text)
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
}

/// Reads a log file written by [`run_logger`]. A torn last line (the logger
/// was killed mid-write) is skipped.
pub fn read_log(path: &Path) -> io::Result<Vec<LogRecord>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

pub(crate) fn rfc3339_secs(seconds: i64) -> String {
    rfc3339(seconds, 0)
}

fn rfc3339_now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs() as i64, d.subsec_nanos())
}

/// `seconds` since the epoch as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
fn rfc3339(seconds: i64, nanos: u32) -> String {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_as_rfc3339() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(rfc3339(1_700_000_000, 5), "2023-11-14T22:13:20.000000005Z");
        assert_eq!(rfc3339(951_782_400, 0), "2000-02-29T00:00:00.000000000Z");
    }

    #[test]
    fn uri_escapes_the_log_path() {
        let uri = binary_uri(
            Path::new("/usr/bin/holdfastd"),
            Path::new("/var/log/a b&c.log"),
        );
        assert_eq!(
            uri,
            "binary:///usr/bin/holdfastd?holdfast-log=/var/log/a%20b%26c.log"
        );
    }
}
