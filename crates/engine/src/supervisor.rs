//! The embedded containerd: started (or adopted) and restarted by holdfastd.
//!
//! When no external containerd address is given, holdfastd runs its own
//! containerd on private directories:
//!
//! - `data_dir/config.toml` (written by [`Supervisor::start`]), `data_dir/root`
//!   (content, snapshots, metadata), `data_dir/opt`, `data_dir/containerd.log`;
//! - `run_dir/state`, `run_dir/containerd.sock` (gRPC),
//!   `run_dir/containerd.sock.ttrpc`, `run_dir/containerd.pid`.
//!
//! containerd outlives holdfastd, as under dockerd: it runs in its own process
//! group, its output goes straight to a file (no pipe that breaks when
//! holdfastd exits), and neither stopping holdfastd nor dropping the
//! [`Supervisor`] kills it. The next holdfastd finds it through the pid file
//! (or, failing that, through `/proc`) and adopts it, so containers and their
//! shims are never disturbed by a holdfastd restart.
//!
//! A background task watches containerd (`wait()` on a child; polling
//! `/proc/<pid>` for an adopted one, which is not our child) and restarts it
//! when it dies: at once after a healthy run, with exponential backoff when
//! it keeps dying.

use holdfast_containerd_config::Dirs;
use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const CONFIG_FILE: &str = "config.toml";
const LOG_FILE: &str = "containerd.log";
const PID_FILE: &str = "containerd.pid";
const SOCKET_FILE: &str = "containerd.sock";
const TTRPC_SOCKET_FILE: &str = "containerd.sock.ttrpc";
/// Written to containerd.log before every start, to tell boots apart.
const START_MARKER: &str = "---- holdfastd: starting containerd";
/// The restart delay after a quick death; doubles on every further quick
/// death up to [`MAX_BACKOFF`]. A death after a healthy run is restarted at once.
const MIN_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A containerd that ran this long was healthy: the backoff starts over.
const HEALTHY_RUN: Duration = Duration::from_secs(30);
/// How often an adopted containerd (not our child) is checked for life.
const ADOPTED_POLL: Duration = Duration::from_millis(500);
/// How often [`Supervisor::wait_ready`] tries to connect.
const READY_POLL: Duration = Duration::from_millis(20);
/// How much of containerd.log an error shows.
const ERROR_TAIL_LINES: usize = 40;
/// `sun_path` holds 108 bytes including the terminating NUL.
const SUN_PATH_MAX: usize = 107;
/// Where a bare binary name is looked up when PATH is unset.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the embedded containerd lives and what runs it.
#[derive(Clone, Debug)]
pub struct SupervisorConfig {
    /// The containerd binary (a bare name is looked up on PATH).
    pub binary: PathBuf,
    /// Persistent: config.toml, root (content, snapshots), containerd.log.
    pub data_dir: PathBuf,
    /// Runtime: state, the gRPC socket, the pid file.
    pub run_dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum SupervisorError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "containerd not found: install it (Debian: apt-get install containerd runc) or pass --containerd SOCKET (looked for {})",
        binary.display()
    )]
    NotFound { binary: PathBuf },
    #[error("{} is not valid UTF-8, so containerd's config cannot name it", path.display())]
    NonUtf8Path { path: PathBuf },
    #[error(
        "socket path {} is {len} bytes, longer than the {SUN_PATH_MAX} a unix socket allows: choose a shorter run directory",
        path.display()
    )]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error(
        "containerd did not accept connections on {} within {timeout:?}; last lines of {}:\n{tail}",
        socket.display(),
        log.display()
    )]
    NotReady {
        socket: PathBuf,
        timeout: Duration,
        log: PathBuf,
        tail: String,
    },
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SupervisorError {
    let what = what.into();
    move |source| SupervisorError::Io { what, source }
}

/// A running (or adopted) containerd, restarted with backoff when it dies.
/// Dropping it stops the watching (and restarting) but leaves containerd
/// running, for the next holdfastd to adopt.
#[derive(Debug)]
pub struct Supervisor {
    paths: Arc<Paths>,
    shared: Arc<Shared>,
    adopted: bool,
    watcher: tokio::task::JoinHandle<()>,
}

impl Supervisor {
    /// Writes the config, then adopts the containerd named by the pid file
    /// if it still runs with this config, else starts one. Returns at once;
    /// the core's reconnect loop copes with a containerd that is not up yet
    /// (or use [`Supervisor::wait_ready`]).
    pub async fn start(config: SupervisorConfig) -> Result<Supervisor, SupervisorError> {
        let binary = resolve_binary(&config.binary)?;
        let data_dir = std::path::absolute(&config.data_dir)
            .map_err(io_error(format!("resolve {}", config.data_dir.display())))?;
        let run_dir = std::path::absolute(&config.run_dir)
            .map_err(io_error(format!("resolve {}", config.run_dir.display())))?;
        let mut paths = Paths::new(binary, &data_dir, &run_dir);
        for socket in [&paths.socket, &paths.ttrpc] {
            let len = socket.as_os_str().len();
            if len > SUN_PATH_MAX {
                return Err(SupervisorError::SocketPathTooLong {
                    path: socket.clone(),
                    len,
                });
            }
        }
        for dir in [
            &paths.data_dir,
            &paths.run_dir,
            &paths.root,
            &paths.state,
            &paths.opt,
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(dir)
                .map_err(io_error(format!("create {}", dir.display())))?;
        }
        let text = config_toml(&paths)?;
        let changed = write_if_changed(&paths.config, &paths.data_dir, &text)?;
        paths.config_canonical = fs::canonicalize(&paths.config).ok();
        let paths = Arc::new(paths);

        let shared = Arc::new(Shared::default());
        let (running, adopted) = match find_ours(&paths) {
            Some(pid) => {
                if changed {
                    tracing::info!(
                        pid,
                        config = %paths.config.display(),
                        "containerd config changed; it applies when containerd next restarts"
                    );
                }
                write_pid_file(&paths, pid);
                tracing::info!(pid, socket = %paths.socket.display(), "adopted running containerd");
                shared.pid.store(pid, Ordering::SeqCst);
                (Running::Adopted(pid), true)
            }
            None => {
                let (child, pid) = spawn_containerd(&paths)?;
                tracing::info!(
                    pid,
                    binary = %paths.binary.display(),
                    socket = %paths.socket.display(),
                    log = %paths.log.display(),
                    "started containerd"
                );
                shared.pid.store(pid, Ordering::SeqCst);
                (Running::Child(child), false)
            }
        };
        let watcher = tokio::spawn(supervise(paths.clone(), shared.clone(), running));
        Ok(Supervisor {
            paths,
            shared,
            adopted,
            watcher,
        })
    }

    /// containerd's gRPC socket.
    pub fn socket(&self) -> &Path {
        &self.paths.socket
    }

    /// containerd's own log.
    pub fn log_path(&self) -> &Path {
        &self.paths.log
    }

    /// The config.toml containerd runs with.
    pub fn config_path(&self) -> &Path {
        &self.paths.config
    }

    /// containerd's pid, or `None` while it is down (between a death and
    /// the restart).
    pub fn pid(&self) -> Option<u32> {
        match self.shared.pid.load(Ordering::SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// Whether [`Supervisor::start`] adopted a containerd that was already
    /// running (rather than starting one).
    pub fn adopted(&self) -> bool {
        self.adopted
    }

    /// How many times this supervisor has restarted containerd after it died.
    pub fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::SeqCst)
    }

    /// Changes each time the watcher has started containerd again (its
    /// value is [`Supervisor::restarts`]).
    pub fn watch_restarts(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.restarted.subscribe()
    }

    /// Waits until containerd's socket accepts a connection. The error
    /// carries the tail of containerd.log.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), SupervisorError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let connect = tokio::net::UnixStream::connect(&self.paths.socket);
            if let Ok(Ok(_)) = tokio::time::timeout(READY_POLL * 5, connect).await {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SupervisorError::NotReady {
                    socket: self.paths.socket.clone(),
                    timeout,
                    log: self.paths.log.clone(),
                    tail: self.log_tail(ERROR_TAIL_LINES),
                });
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// The last `lines` lines of containerd.log (empty if there is none).
    pub fn log_tail(&self, lines: usize) -> String {
        read_tail(&self.paths.log, lines)
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // Stop watching; containerd (and its shims) keep running.
        self.shared.detached.store(true, Ordering::SeqCst);
        self.watcher.abort();
    }
}

/// Every path the supervisor uses, absolute.
#[derive(Debug)]
struct Paths {
    binary: PathBuf,
    data_dir: PathBuf,
    run_dir: PathBuf,
    config: PathBuf,
    /// The config path with symlinks resolved, to recognise a containerd
    /// started through another spelling of the same directory.
    config_canonical: Option<PathBuf>,
    root: PathBuf,
    state: PathBuf,
    opt: PathBuf,
    socket: PathBuf,
    ttrpc: PathBuf,
    pid_file: PathBuf,
    log: PathBuf,
}

impl Paths {
    fn new(binary: PathBuf, data_dir: &Path, run_dir: &Path) -> Paths {
        Paths {
            binary,
            data_dir: data_dir.to_path_buf(),
            run_dir: run_dir.to_path_buf(),
            config: data_dir.join(CONFIG_FILE),
            config_canonical: None,
            root: data_dir.join("root"),
            state: run_dir.join("state"),
            opt: data_dir.join("opt"),
            socket: run_dir.join(SOCKET_FILE),
            ttrpc: run_dir.join(TTRPC_SOCKET_FILE),
            pid_file: run_dir.join(PID_FILE),
            log: data_dir.join(LOG_FILE),
        }
    }

    /// Whether `pid` is a live containerd running with our config.
    fn runs_our_config(&self, pid: u32) -> bool {
        let cmdline = read_cmdline(pid);
        is_our_containerd(&cmdline, &self.config)
            || self
                .config_canonical
                .as_deref()
                .is_some_and(|c| is_our_containerd(&cmdline, c))
    }
}

/// State shared between the [`Supervisor`] handle and its watcher task.
#[derive(Debug, Default)]
struct Shared {
    /// containerd's pid; 0 while it is down.
    pid: AtomicU32,
    restarts: AtomicU64,
    /// Set when the handle is dropped: never restart after that.
    detached: AtomicBool,
    /// The count of restarts, for those waiting on the next one.
    restarted: tokio::sync::watch::Sender<u64>,
}

/// The containerd being watched.
#[derive(Debug)]
enum Running {
    /// Started by this process: `wait()` tells when and how it ends.
    Child(tokio::process::Child),
    /// Started by an earlier holdfastd: only `/proc` tells when it ends.
    Adopted(u32),
}

/// Restart delays: none after a healthy run, else 200 ms doubling to 10 s.
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { next: MIN_BACKOFF }
    }

    /// The delay before restarting a containerd that died after running
    /// `ran`: none after a healthy run (a single crash costs only
    /// containerd's own start), else the backoff.
    fn after_exit(&mut self, ran: Duration) -> Duration {
        if ran >= HEALTHY_RUN {
            self.next = MIN_BACKOFF;
            return Duration::ZERO;
        }
        self.take()
    }

    /// The delay before retrying a restart that failed.
    fn take(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX_BACKOFF);
        delay
    }
}

/// The watcher: waits for containerd to die, then restarts it, forever
/// (until the [`Supervisor`] is dropped).
async fn supervise(paths: Arc<Paths>, shared: Arc<Shared>, mut running: Running) {
    let mut backoff = Backoff::new();
    let mut since = Instant::now();
    loop {
        let pid = shared.pid.load(Ordering::SeqCst);
        let status = wait_exit(&paths, running).await;
        shared.pid.store(0, Ordering::SeqCst);
        let ran = since.elapsed();
        let mut delay = backoff.after_exit(ran);
        tracing::warn!(
            pid,
            status = %status,
            ran = ?ran,
            restart_in = ?delay,
            log = %paths.log.display(),
            "containerd exited; restarting it"
        );
        running = loop {
            tokio::time::sleep(delay).await;
            if shared.detached.load(Ordering::SeqCst) {
                return;
            }
            // Another holdfastd on the same directories may have restarted it.
            if let Some(pid) = find_ours(&paths) {
                tracing::info!(
                    pid,
                    "containerd runs again (started elsewhere); adopting it"
                );
                write_pid_file(&paths, pid);
                shared.pid.store(pid, Ordering::SeqCst);
                break Running::Adopted(pid);
            }
            match spawn_containerd(&paths) {
                Ok((child, pid)) => {
                    let restarts = shared.restarts.fetch_add(1, Ordering::SeqCst) + 1;
                    shared.pid.store(pid, Ordering::SeqCst);
                    shared.restarted.send_replace(restarts);
                    tracing::info!(pid, restarts, "restarted containerd");
                    break Running::Child(child);
                }
                Err(error) => {
                    delay = backoff.take();
                    tracing::error!(error = %error, retry_in = ?delay, "could not restart containerd");
                }
            }
        };
        since = Instant::now();
    }
}

/// Waits until the watched containerd is gone; describes how it ended.
async fn wait_exit(paths: &Paths, running: Running) -> String {
    match running {
        Running::Child(mut child) => match child.wait().await {
            Ok(status) => status.to_string(),
            Err(error) => {
                tracing::warn!(error = %error, "waiting for containerd failed; watching its pid instead");
                if let Some(pid) = child.id() {
                    poll_until_gone(paths, pid).await;
                }
                "unknown".to_string()
            }
        },
        Running::Adopted(pid) => {
            poll_until_gone(paths, pid).await;
            "unknown (adopted: not our child)".to_string()
        }
    }
}

/// Polls `/proc/<pid>` until it is no longer our containerd (gone, a
/// zombie, whose cmdline is empty, or the pid reused by something else).
async fn poll_until_gone(paths: &Paths, pid: u32) {
    while paths.runs_our_config(pid) {
        tokio::time::sleep(ADOPTED_POLL).await;
    }
}

/// Starts containerd as a child in its own process group, its output
/// appended to containerd.log, and records its pid.
fn spawn_containerd(paths: &Paths) -> Result<(tokio::process::Child, u32), SupervisorError> {
    // Nothing of ours runs: any socket file left is stale.
    for socket in [&paths.socket, &paths.ttrpc] {
        match fs::remove_file(socket) {
            Ok(()) => tracing::debug!(path = %socket.display(), "removed stale socket"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(format!("remove stale {}", socket.display()))(e)),
        }
    }
    let mut log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&paths.log)
        .map_err(io_error(format!("open {}", paths.log.display())))?;
    writeln!(log, "{START_MARKER}").map_err(io_error(format!("write {}", paths.log.display())))?;
    let err = log
        .try_clone()
        .map_err(io_error(format!("open {}", paths.log.display())))?;
    let child = tokio::process::Command::new(&paths.binary)
        .arg("--config")
        .arg(&paths.config)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(err))
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                SupervisorError::NotFound {
                    binary: paths.binary.clone(),
                }
            } else {
                io_error(format!("start {}", paths.binary.display()))(e)
            }
        })?;
    let Some(pid) = child.id() else {
        return Err(SupervisorError::Io {
            what: format!("start {}", paths.binary.display()),
            source: std::io::Error::other("containerd has no pid right after it was started"),
        });
    };
    write_pid_file(paths, pid);
    Ok((child, pid))
}

/// Records containerd's pid for the next holdfastd. Best effort: a failure
/// only costs adoption (logged), never the running containerd.
fn write_pid_file(paths: &Paths, pid: u32) {
    if let Err(error) = write_atomically(&paths.pid_file, &paths.run_dir, &format!("{pid}\n")) {
        tracing::warn!(error = %error, path = %paths.pid_file.display(), "could not write containerd pid file");
    }
}

/// Writes `text` to `path` unless it already holds it; true if it wrote.
fn write_if_changed(path: &Path, dir: &Path, text: &str) -> Result<bool, SupervisorError> {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    write_atomically(path, dir, text)?;
    Ok(true)
}

/// Replaces `path` (in `dir`) with `text` by writing a temporary file and
/// renaming it over, so readers never see half a file.
fn write_atomically(path: &Path, dir: &Path, text: &str) -> Result<(), SupervisorError> {
    let what = || format!("write {}", path.display());
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_error(what()))?;
    tmp.write_all(text.as_bytes()).map_err(io_error(what()))?;
    tmp.as_file()
        .set_permissions(fs::Permissions::from_mode(0o644))
        .map_err(io_error(what()))?;
    tmp.persist(path).map_err(|e| io_error(what())(e.error))?;
    Ok(())
}

/// The containerd running with our config, if any: the one the pid file
/// names, else any found in `/proc` (the pid file may be lost or stale).
fn find_ours(paths: &Paths) -> Option<u32> {
    let from_file = fs::read_to_string(&paths.pid_file)
        .ok()
        .and_then(|text| parse_pid(&text))
        .filter(|pid| paths.runs_our_config(*pid));
    from_file.or_else(|| {
        scan_proc(|pid| paths.runs_our_config(pid))
            .into_iter()
            .min()
    })
}

/// The pids in `/proc` for which `keep` holds.
fn scan_proc(keep: impl Fn(u32) -> bool) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| *pid != std::process::id() && keep(*pid))
        .collect()
}

/// A pid file's pid, if it holds a plausible one.
fn parse_pid(text: &str) -> Option<u32> {
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|pid| *pid > 1 && i32::try_from(*pid).is_ok())
}

/// `/proc/<pid>/cmdline` as arguments; empty if the process is gone or a
/// zombie.
fn read_cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| parse_cmdline(&bytes))
        .unwrap_or_default()
}

fn parse_cmdline(bytes: &[u8]) -> Vec<String> {
    let bytes = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    if bytes.is_empty() {
        return Vec::new();
    }
    bytes
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Whether a command line is containerd (not a shim) run with `--config
/// config` (also `--config=config`, `-c config`, `-c=config`), i.e. the
/// containerd of these directories, which we may adopt.
fn is_our_containerd(cmdline: &[String], config: &Path) -> bool {
    let Some((argv0, args)) = cmdline.split_first() else {
        return false;
    };
    let name = Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.starts_with("containerd") || name.contains("shim") {
        return false;
    }
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "--config" | "-c" | "-config" => args.next().map(String::as_str),
            other => other
                .strip_prefix("--config=")
                .or_else(|| other.strip_prefix("-c="))
                .or_else(|| other.strip_prefix("-config=")),
        };
        if let Some(value) = value {
            // The last --config wins, as in containerd's flag parsing.
            if args.clone().all(|a| !is_config_flag(a)) {
                return Path::new(value) == config;
            }
        }
    }
    false
}

fn is_config_flag(arg: &str) -> bool {
    matches!(arg, "--config" | "-c" | "-config")
        || arg.starts_with("--config=")
        || arg.starts_with("-c=")
        || arg.starts_with("-config=")
}

/// Finds the binary: a bare name on PATH, anything else as a path.
fn resolve_binary(binary: &Path) -> Result<PathBuf, SupervisorError> {
    let not_found = || SupervisorError::NotFound {
        binary: binary.to_path_buf(),
    };
    if binary.as_os_str().is_empty() {
        return Err(not_found());
    }
    if binary.as_os_str().as_bytes().contains(&b'/') {
        if !is_executable(binary) {
            return Err(not_found());
        }
        return std::path::absolute(binary)
            .map_err(io_error(format!("resolve {}", binary.display())));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(binary))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(not_found)
}

fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// containerd 1.6's config (version 2) for these directories, with a word
/// for whoever opens it.
fn config_toml(paths: &Paths) -> Result<String, SupervisorError> {
    let config = holdfast_containerd_config::config_toml(&Dirs {
        root: &paths.root,
        state: &paths.state,
        socket: &paths.socket,
        ttrpc: &paths.ttrpc,
        opt: &paths.opt,
    })
    .map_err(|e| SupervisorError::NonUtf8Path { path: e.path })?;
    Ok(format!(
        "# Written by holdfastd at every start; edits are overwritten.\n{config}"
    ))
}

/// The last `lines` lines of the file at `path`, reading at most its last
/// 256 KiB.
fn read_tail(path: &Path, lines: usize) -> String {
    const WINDOW: u64 = 256 * 1024;
    let Ok(mut file) = fs::File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.take(WINDOW).read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    // A window that starts mid-file starts mid-line: drop that partial line.
    let text = if start > 0 {
        text.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        &text
    };
    tail_lines(text, lines)
}

fn tail_lines(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    fn test_paths(data: &str, run: &str) -> Paths {
        Paths::new(
            PathBuf::from("/usr/bin/containerd"),
            Path::new(data),
            Path::new(run),
        )
    }

    #[test]
    fn config_is_the_shared_template_under_a_word_for_readers() {
        let paths = test_paths("/var/lib/holdfast/containerd", "/run/holdfast/containerd");
        let text = config_toml(&paths).expect("config");
        assert!(
            text.starts_with("# Written by holdfastd at every start"),
            "{text}"
        );
        assert!(
            text.contains("root = \"/var/lib/holdfast/containerd/root\""),
            "{text}"
        );
    }

    #[test]
    fn config_refuses_non_utf8_paths() {
        use std::os::unix::ffi::OsStrExt as _;
        let data = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
        let paths = Paths::new(
            PathBuf::from("containerd"),
            Path::new(data),
            Path::new("/run/x"),
        );
        assert!(matches!(
            config_toml(&paths),
            Err(SupervisorError::NonUtf8Path { .. })
        ));
    }

    #[test]
    fn adopts_only_containerd_with_our_config() {
        let config = Path::new("/var/lib/holdfast/containerd/config.toml");
        let c = "/var/lib/holdfast/containerd/config.toml";
        let ours = [
            strings(&["/usr/bin/containerd", "--config", c]),
            strings(&["containerd", "--config", c]),
            strings(&["containerd", &format!("--config={c}")]),
            strings(&["containerd", "-c", c]),
            strings(&["containerd", "--log-level", "debug", "-c", c]),
            strings(&[
                "/usr/bin/containerd",
                "--config",
                "/etc/containerd/config.toml",
                "--config",
                c,
            ]),
            strings(&[
                "/usr/bin/containerd",
                "--config",
                "/var/lib/holdfast//containerd/config.toml",
            ]),
        ];
        for cmdline in &ours {
            assert!(is_our_containerd(cmdline, config), "{cmdline:?} is ours");
        }
        let not_ours = [
            // A zombie or a vanished process.
            Vec::new(),
            strings(&[""]),
            // The system containerd.
            strings(&["/usr/bin/containerd"]),
            strings(&[
                "/usr/bin/containerd",
                "--config",
                "/etc/containerd/config.toml",
            ]),
            // Ours was named, but a later flag overrides it.
            strings(&[
                "/usr/bin/containerd",
                "--config",
                c,
                "--config",
                "/etc/containerd/config.toml",
            ]),
            // Another containerd of another holdfastd.
            strings(&[
                "containerd",
                "--config",
                "/var/lib/other/containerd/config.toml",
            ]),
            // A shim of ours.
            strings(&[
                "/usr/bin/containerd-shim-runc-v2",
                "-namespace",
                "x",
                "--config",
                c,
            ]),
            // Something else that happens to name the path.
            strings(&["vim", "--config", c]),
            strings(&["cat", c]),
            // --config with no value.
            strings(&["containerd", "--config"]),
            // A relative spelling is not ours.
            strings(&["containerd", "--config", "config.toml"]),
        ];
        for cmdline in &not_ours {
            assert!(
                !is_our_containerd(cmdline, config),
                "{cmdline:?} is not ours"
            );
        }
    }

    #[test]
    fn parses_cmdlines_and_pid_files() {
        assert_eq!(
            parse_cmdline(b"/usr/bin/containerd\0--config\0/x/config.toml\0"),
            strings(&["/usr/bin/containerd", "--config", "/x/config.toml"])
        );
        assert_eq!(parse_cmdline(b""), Vec::<String>::new());
        assert_eq!(parse_pid("1234\n"), Some(1234));
        assert_eq!(parse_pid(" 77 "), Some(77));
        for bad in ["", "\n", "abc", "0", "1", "-5", "12ab", "4294967295"] {
            assert_eq!(parse_pid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn own_process_is_never_ours() {
        let cmdline = read_cmdline(std::process::id());
        assert!(!cmdline.is_empty());
        assert!(!is_our_containerd(
            &cmdline,
            Path::new("/nonexistent/config.toml")
        ));
        assert!(read_cmdline(u32::MAX).is_empty());
    }

    #[test]
    fn backoff_doubles_to_ten_seconds_and_resets_after_a_healthy_run() {
        let quick = Duration::from_secs(1);
        let mut b = Backoff::new();
        let delays: Vec<u64> = (0..9)
            .map(|_| b.after_exit(quick).as_millis() as u64)
            .collect();
        assert_eq!(
            delays,
            [200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        assert_eq!(b.after_exit(HEALTHY_RUN), Duration::ZERO);
        assert_eq!(b.after_exit(quick), MIN_BACKOFF);
        assert_eq!(b.take(), Duration::from_millis(400));
        assert_eq!(
            b.after_exit(Duration::from_secs(29)),
            Duration::from_millis(800)
        );
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail_lines("a\nb", 5), "a\nb");
        assert_eq!(tail_lines("", 3), "");

        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("log");
        assert_eq!(read_tail(&log, 3), "");
        let mut text = String::new();
        for i in 0..100_000 {
            text.push_str(&format!("line {i}\n"));
        }
        fs::write(&log, text).expect("write log");
        assert_eq!(read_tail(&log, 3), "line 99997\nline 99998\nline 99999");
    }

    #[tokio::test]
    async fn missing_binary_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        for binary in ["/nonexistent/containerd", "holdfast-no-such-containerd"] {
            let err = Supervisor::start(SupervisorConfig {
                binary: PathBuf::from(binary),
                data_dir: dir.path().join("data"),
                run_dir: dir.path().join("run"),
            })
            .await
            .expect_err("no such binary");
            let msg = err.to_string();
            assert!(
                msg.starts_with("containerd not found: install it (Debian: apt-get install containerd runc) or pass --containerd SOCKET"),
                "{msg}"
            );
            assert!(msg.contains(binary), "{msg}");
        }
    }

    // ---- Against a real containerd (needs root and /usr/bin/containerd).

    /// How long a (re)start may take on a slow, shared machine.
    const BOUND: Duration = Duration::from_secs(60);

    /// Kills every containerd running with this test's config (and nothing
    /// else) and removes the directory, even when the test fails. Declare it
    /// before the supervisors so that they drop (stop watching) first.
    struct Cleanup {
        config: PathBuf,
        dir: Option<tempfile::TempDir>,
    }

    impl Cleanup {
        fn new() -> Cleanup {
            require_root_and_containerd();
            let dir = tempfile::Builder::new()
                .prefix("hf-sup-")
                .tempdir()
                .expect("create a temporary directory");
            Cleanup {
                config: dir.path().join("data").join(CONFIG_FILE),
                dir: Some(dir),
            }
        }

        fn config(&self) -> SupervisorConfig {
            let dir = self.dir.as_ref().expect("dir").path();
            SupervisorConfig {
                binary: PathBuf::from("containerd"),
                data_dir: dir.join("data"),
                run_dir: dir.join("run"),
            }
        }

        fn ours(&self) -> Vec<u32> {
            scan_proc(|pid| is_our_containerd(&read_cmdline(pid), &self.config))
        }
    }

    impl Drop for Cleanup {
        fn drop(&mut self) {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let pids = self.ours();
                if pids.is_empty() || Instant::now() > deadline {
                    break;
                }
                for pid in pids {
                    if let Ok(pid) = i32::try_from(pid) {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(self.dir.take());
        }
    }

    fn require_root_and_containerd() {
        use std::os::unix::fs::MetadataExt as _;
        let uid = fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(u32::MAX);
        assert_eq!(uid, 0, "this test runs containerd: it needs root");
        resolve_binary(Path::new("containerd")).expect(
            "this test runs containerd: install it (Debian: apt-get install containerd runc)",
        );
    }

    fn sigkill(pid: u32) {
        let pid = i32::try_from(pid).expect("pid fits i32");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("SIGKILL containerd");
    }

    async fn ready(sup: &Supervisor, bound: Duration) {
        if let Err(e) = sup.wait_ready(bound).await {
            panic!("{e}");
        }
    }

    /// Waits until the supervisor reports a containerd other than `old`.
    async fn new_pid(sup: &Supervisor, old: u32) -> u32 {
        let started = Instant::now();
        loop {
            if let Some(pid) = sup.pid()
                && pid != old
            {
                return pid;
            }
            assert!(
                started.elapsed() < BOUND,
                "containerd was not restarted within {BOUND:?}:\n{}",
                sup.log_tail(ERROR_TAIL_LINES)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn pid_file(cleanup: &Cleanup) -> Option<u32> {
        let run = cleanup.config().run_dir;
        fs::read_to_string(run.join(PID_FILE))
            .ok()
            .and_then(|t| parse_pid(&t))
    }

    #[tokio::test]
    async fn restarts_containerd_after_sigkill() {
        let cleanup = Cleanup::new();
        let config = cleanup.config();

        // Leftovers of an earlier run: a pid file naming a live process that
        // is not containerd (this test), and a stale socket file.
        fs::create_dir_all(&config.run_dir).expect("create run dir");
        fs::write(
            config.run_dir.join(PID_FILE),
            format!("{}\n", std::process::id()),
        )
        .expect("write stale pid file");
        fs::write(config.run_dir.join(SOCKET_FILE), "stale").expect("write stale socket");

        let sup = Supervisor::start(config.clone()).await.expect("start");
        assert!(
            !sup.adopted(),
            "a pid file naming a non-containerd is not adopted"
        );
        ready(&sup, BOUND).await;
        let first = sup.pid().expect("containerd runs");
        assert_eq!(pid_file(&cleanup), Some(first));
        assert_eq!(cleanup.ours(), vec![first]);
        // Its own process group: a Ctrl-C to holdfastd's group misses it.
        let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(
            i32::try_from(first).expect("pid"),
        )))
        .expect("getpgid");
        assert_eq!(pgid.as_raw(), i32::try_from(first).expect("pid"));
        assert!(sup.socket().starts_with(&config.run_dir));
        let text = fs::read_to_string(sup.config_path()).expect("config written");
        assert!(text.contains("io.containerd.grpc.v1.cri"));

        sigkill(first);
        let second = new_pid(&sup, first).await;
        ready(&sup, BOUND).await;
        assert_eq!(sup.restarts(), 1);
        assert_eq!(pid_file(&cleanup), Some(second));
        assert_eq!(cleanup.ours(), vec![second]);
        let log = fs::read_to_string(sup.log_path()).expect("log");
        assert_eq!(log.matches(START_MARKER).count(), 2, "{log}");
        assert!(sup.log_tail(5).lines().count() <= 5);
    }

    #[tokio::test]
    async fn second_start_adopts_the_running_containerd() {
        let cleanup = Cleanup::new();
        let first = Supervisor::start(cleanup.config()).await.expect("start");
        ready(&first, BOUND).await;
        let pid = first.pid().expect("containerd runs");

        let second = Supervisor::start(cleanup.config())
            .await
            .expect("start again");
        assert!(second.adopted());
        assert_eq!(second.pid(), Some(pid));
        ready(&second, Duration::from_secs(5)).await;
        assert_eq!(cleanup.ours(), vec![pid], "no second containerd");

        // The first holdfastd goes away: containerd keeps running.
        drop(first);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            cleanup.ours(),
            vec![pid],
            "dropping the supervisor left containerd running"
        );

        // The adopted containerd dies: the adopter notices and restarts it.
        sigkill(pid);
        let restarted = new_pid(&second, pid).await;
        ready(&second, BOUND).await;
        assert_eq!(second.restarts(), 1);
        assert_eq!(cleanup.ours(), vec![restarted]);
        assert_eq!(pid_file(&cleanup), Some(restarted));
    }
}
