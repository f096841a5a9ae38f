//! A real holdfastd on a temporary root, and the docker CLI pointed at it.

use crate::command::{CommandOutput, run_with_input, run_with_timeout};
use crate::procs::{self, Proc};
use crate::terminal::Terminal;
use crate::{WAIT_BOUND, poll_until};
use serde_json::Value;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long holdfastd may take to serve with busybox loaded (it boots its
/// containerd and imports the image first).
const START_BOUND: Duration = Duration::from_secs(120);
/// The bound of one CLI command, past which the test fails with the logs.
const COMMAND_BOUND: Duration = Duration::from_secs(90);
/// `RUST_LOG` for holdfastd: its own debug lines, not the HTTP/2 chatter.
const RUST_LOG: &str = "debug,h2=info,hyper=info,hyper_util=info,tower=info,tonic=info";

/// A holdfastd with its embedded containerd in a temporary root. See the
/// crate docs.
#[derive(Debug)]
pub struct Daemon {
    dir: tempfile::TempDir,
    namespace: String,
    binary: PathBuf,
    child: Option<Child>,
    /// Flags given to every start of this holdfastd.
    extra_args: Vec<String>,
    /// Environment given to every start (and so to its containerd, the
    /// shims and runc).
    extra_env: Vec<(String, String)>,
    transcript: Mutex<Vec<String>>,
    requests: AtomicUsize,
}

/// An answer of the API, read through curl.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// 0 when curl got no answer.
    pub status: u16,
    pub body: String,
    /// curl's own complaint, if any.
    pub curl_error: String,
}

impl HttpResponse {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.body).ok()
    }

    /// The `message` of a JSON error body.
    pub fn message(&self) -> Option<String> {
        self.json()?.get("message")?.as_str().map(str::to_owned)
    }
}

impl Daemon {
    /// Starts holdfastd on fresh roots and waits until it serves the API with
    /// `busybox:latest` in its image store.
    pub fn start() -> Daemon {
        // No bridge network unless a test asks for one (Daemon::start_with):
        // a bridge, its NAT rules and addresses are host-wide, and each
        // test that uses one makes its own and removes it.
        Daemon::start_with(&["--bridge", "none"])
    }

    /// [`Daemon::start`] with these holdfastd flags, at every (re)start.
    pub fn start_with(args: &[&str]) -> Daemon {
        Daemon::start_on(None, args)
    }

    /// [`Daemon::start`] with the data root (the store, containerd's
    /// content and snapshots, the container logs) on a tmpfs of `size`
    /// (mount's `size=`, e.g. `96m`): a disk a test can fill. It is
    /// unmounted with everything else under the root.
    pub fn start_on_small_disk(size: &str) -> Daemon {
        Daemon::start_on(Some(size), &["--bridge", "none"])
    }

    /// [`Daemon::start_with`] with these environment variables for
    /// holdfastd, which its containerd, the shims and runc inherit.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::start_on_with(None, args, env)
    }

    fn start_on(tmpfs_size: Option<&str>, args: &[&str]) -> Daemon {
        Daemon::start_on_with(tmpfs_size, args, &[])
    }

    fn start_on_with(tmpfs_size: Option<&str>, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let binary = holdfastd_binary();
        require_tools();
        let dir = tempfile::Builder::new()
            .prefix("hf-e2e-")
            .tempdir()
            .expect("create a temporary root");
        for sub in ["data", "run", "docker-config", "http"] {
            fs::create_dir_all(dir.path().join(sub)).expect("create the roots");
        }
        if let Some(size) = tmpfs_size {
            let data = dir.path().join("data");
            let out = Command::new("mount")
                .args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size},mode=0711"),
                    "tmpfs",
                ])
                .arg(&data)
                .output()
                .expect("run mount");
            assert!(
                out.status.success(),
                "mount a tmpfs on {}: {}",
                data.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let mut daemon = Daemon {
            dir,
            namespace: holdfast_testkit::unique_namespace("e2e"),
            binary,
            child: None,
            extra_args: args.iter().map(|a| (*a).to_owned()).collect(),
            extra_env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            transcript: Mutex::new(Vec::new()),
            requests: AtomicUsize::new(0),
        };
        daemon.spawn();
        daemon
    }

    // ---- where things are

    /// The temporary root holding everything of this daemon.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_root(&self) -> PathBuf {
        self.root().join("data")
    }

    pub fn exec_root(&self) -> PathBuf {
        self.root().join("run")
    }

    /// The API socket.
    pub fn socket(&self) -> PathBuf {
        self.exec_root().join("holdfast.sock")
    }

    /// `unix://<socket>`, for clients.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// The containerd namespace of this daemon's containers.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// holdfastd's stdout and stderr.
    pub fn log_path(&self) -> PathBuf {
        self.root().join("holdfastd.log")
    }

    /// The embedded containerd's log.
    pub fn containerd_log_path(&self) -> PathBuf {
        self.data_root().join("containerd/containerd.log")
    }

    pub fn containerd_socket(&self) -> PathBuf {
        self.exec_root().join("containerd/containerd.sock")
    }

    fn containerd_pidfile(&self) -> PathBuf {
        self.exec_root().join("containerd/containerd.pid")
    }

    /// holdfastd's pid while it runs.
    pub fn holdfastd_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    // ---- the docker CLI

    /// A `docker` command against this daemon, with a private config.
    pub fn docker_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("docker");
        cmd.args(args)
            .env("DOCKER_HOST", self.host())
            .env("DOCKER_CONFIG", self.root().join("docker-config"))
            .env("DOCKER_CLI_HINTS", "false")
            .env_remove("DOCKER_CONTEXT")
            .env_remove("DOCKER_API_VERSION")
            .env_remove("DOCKER_TLS_VERIFY")
            .env_remove("DOCKER_CERT_PATH");
        cmd
    }

    /// Runs `docker args...` and returns what it did, whatever its exit code;
    /// panics (with the logs) only when it runs past `bound`.
    pub fn docker_within(&self, args: &[&str], bound: Duration) -> CommandOutput {
        let out = run_with_timeout(&mut self.docker_command(args), bound);
        self.record(args, &out);
        assert!(
            !out.timed_out(),
            "`docker {}` did not finish within {bound:?}\n--- stdout\n{}\n--- stderr\n{}\n{}",
            show_args(args),
            out.stdout,
            out.stderr,
            self.diagnostics()
        );
        out
    }

    /// Runs `docker args...` with `input` on its stdin, then closed.
    pub fn docker_with_input(&self, args: &[&str], input: &[u8]) -> CommandOutput {
        let out = run_with_input(&mut self.docker_command(args), Some(input), COMMAND_BOUND);
        self.record(args, &out);
        assert!(
            !out.timed_out(),
            "`docker {}` (with input) did not finish within {COMMAND_BOUND:?}\n--- stdout\n{}\n--- stderr\n{}\n{}",
            show_args(args),
            out.stdout,
            out.stderr,
            self.diagnostics()
        );
        out
    }

    /// Runs `docker args...` in a real pseudo-terminal of `rows` x `cols`
    /// (through util-linux `script`), for `run -it`, `exec -it`, `attach`.
    pub fn terminal(&self, args: &[&str], rows: u16, cols: u16) -> Terminal {
        self.note(format!("$ docker {} (in a terminal)", show_args(args)));
        Terminal::spawn(self.docker_command(&[]), args, rows, cols)
    }

    /// Runs `docker args...` with the generous command bound.
    pub fn docker(&self, args: &[&str]) -> CommandOutput {
        self.docker_within(args, COMMAND_BOUND)
    }

    /// Runs `docker args...`, asserts exit 0, returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.docker(args);
        assert!(
            out.success(),
            "`docker {}` exited {} (expected 0)\n--- stdout\n{}\n--- stderr\n{}\n{}",
            show_args(args),
            out.code(),
            out.stdout,
            out.stderr,
            self.diagnostics()
        );
        out.stdout
    }

    /// Asserts that `out`, what `what` did, is an exit 0 that printed exactly
    /// `stdout`.
    pub fn assert_printed(&self, what: &str, out: &CommandOutput, stdout: &str) {
        assert!(
            out.success() && out.stdout == stdout,
            "{what}: exit {}, stdout {:?}, stderr {:?} (want exit 0, stdout {stdout:?})\n{}",
            out.code(),
            out.stdout,
            out.stderr,
            self.diagnostics()
        );
    }

    /// Runs `docker args...` and returns its exit code.
    pub fn code(&self, args: &[&str]) -> i32 {
        self.docker(args).code()
    }

    /// Runs `docker args...`, asserts a non-zero exit, returns the output.
    pub fn fails(&self, args: &[&str]) -> CommandOutput {
        let out = self.docker(args);
        assert!(
            !out.success(),
            "`docker {}` succeeded, expected a failure\n--- stdout\n{}\n--- stderr\n{}\n{}",
            show_args(args),
            out.stdout,
            out.stderr,
            self.diagnostics()
        );
        out
    }

    /// Runs `docker args...`, asserts a non-zero exit whose stderr contains
    /// `needle`; `what` names the case. Returns the output.
    pub fn fails_saying(&self, what: &str, args: &[&str], needle: &str) -> CommandOutput {
        let out = self.fails(args);
        assert!(
            out.stderr.contains(needle),
            "{what}: `docker {}` failed without saying {needle:?}: stderr {:?}\n{}",
            show_args(args),
            out.stderr,
            self.diagnostics()
        );
        out
    }

    /// Starts `docker args...` in the background, collecting its stdout and
    /// stderr as they come (for `logs -f`, `attach`, or a command issued
    /// during an outage). See [`Daemon::wait_exit`].
    pub fn spawn_docker(&self, args: &[&str]) -> BackgroundDocker {
        let command = format!("docker {}", show_args(args));
        self.note(format!("$ {command} &"));
        let started = Instant::now();
        let mut child = self
            .docker_command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn docker");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            collect(child.stdout.take().expect("piped stdout"), stdout.clone()),
            collect(child.stderr.take().expect("piped stderr"), stderr.clone()),
        ];
        BackgroundDocker {
            command,
            child,
            started,
            stdout,
            stderr,
            readers,
        }
    }

    /// Waits until a background docker command exits (`what` names the
    /// wait); all it printed.
    pub fn wait_exit(&self, what: &str, mut bg: BackgroundDocker) -> CommandOutput {
        let mut status = None;
        self.wait_until(what, || {
            status = bg.try_wait();
            status.is_some()
        });
        for reader in bg.readers.drain(..) {
            let _ = reader.join();
        }
        let out = CommandOutput {
            status,
            stdout: bg.stdout_so_far(),
            stderr: locked(&bg.stderr).clone(),
            elapsed: bg.started.elapsed(),
        };
        self.note(format!(
            "$ {} & -> exit {} in {:?}",
            bg.command,
            out.code(),
            out.elapsed
        ));
        out
    }

    /// `docker container inspect NAME`, the one object; panics when missing.
    pub fn inspect(&self, name: &str) -> Value {
        let out = self.ok(&["container", "inspect", name]);
        let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
            panic!(
                "inspect {name}: not JSON ({e}):\n{out}\n{}",
                self.diagnostics()
            )
        });
        v.get(0).cloned().unwrap_or_else(|| {
            panic!(
                "inspect {name}: not a one-element array:\n{out}\n{}",
                self.diagnostics()
            )
        })
    }

    /// `inspect(name)["State"]`.
    pub fn state(&self, name: &str) -> Value {
        self.inspect(name)["State"].clone()
    }

    /// `State.Pid` of a running container; panics when not running.
    pub fn pid_of(&self, name: &str) -> u32 {
        let state = self.state(name);
        let pid = state["Pid"].as_u64().unwrap_or(0);
        assert!(
            state["Running"] == Value::Bool(true) && pid > 0,
            "{name} should be running with a pid, State: {state}\n{}",
            self.diagnostics()
        );
        pid as u32
    }

    /// Ids of the containers `docker ps [-a]` lists.
    pub fn container_ids(&self, all: bool) -> Vec<String> {
        let args: &[&str] = if all {
            &["ps", "-a", "-q", "--no-trunc"]
        } else {
            &["ps", "-q", "--no-trunc"]
        };
        lines(&self.ok(args))
    }

    /// `docker logs NAME`: (stdout, stderr).
    pub fn logs(&self, name: &str) -> (String, String) {
        let out = self.docker(&["logs", name]);
        assert!(
            out.success(),
            "`docker logs {name}` exited {}\n--- stderr\n{}\n{}",
            out.code(),
            out.stderr,
            self.diagnostics()
        );
        (out.stdout, out.stderr)
    }

    /// An image one layer above busybox: a container runs `sh -c script`
    /// and is committed as `image` (with `commit_flags` such as `-m`), then
    /// removed.
    pub fn commit_of_script(&self, script: &str, commit_flags: &[&str], image: &str) {
        self.ok(&["run", "--name", "maker", "busybox", "sh", "-c", script]);
        let mut args = vec!["commit"];
        args.extend_from_slice(commit_flags);
        args.extend(["maker", image]);
        self.ok(&args);
        self.ok(&["rm", "maker"]);
    }

    /// Events from `since_nanos` until now, as JSON objects, with extra CLI
    /// arguments such as `--filter container=web`.
    pub fn events_since(&self, since_nanos: i128, extra: &[&str]) -> Vec<Value> {
        let mut args = vec!["--format", "{{json .}}"];
        args.extend_from_slice(extra);
        let out = self.events_printed_since(since_nanos, &args);
        lines(&out)
            .iter()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("event not JSON ({e}): {l}\n{}", self.diagnostics()))
            })
            .collect()
    }

    /// `docker events` from `since_nanos` until now with `extra` flags, as
    /// the CLI prints them.
    pub fn events_printed_since(&self, since_nanos: i128, extra: &[&str]) -> String {
        let since = crate::unix_nanos_arg(since_nanos);
        let until = crate::unix_nanos_arg(crate::now_unix_nanos());
        let mut args = vec!["events", "--since", &since, "--until", &until];
        args.extend_from_slice(extra);
        self.ok(&args)
    }

    // ---- raw HTTP through curl

    /// Sends one request to the API socket through curl. `path` is sent as
    /// given (already URL-encoded); a body is sent as JSON.
    pub fn http(&self, method: &str, path: &str, body: Option<&[u8]>) -> HttpResponse {
        self.http_with_headers(method, path, body, &[])
    }

    /// [`Daemon::http`] with more headers (`X-Registry-Auth`).
    pub fn http_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        headers: &[(&str, &str)],
    ) -> HttpResponse {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        let dir = self.root().join("http");
        let response = dir.join(format!("response-{n}"));
        let mut cmd = Command::new("curl");
        cmd.args(["-sS", "-g", "--max-time", "60", "--unix-socket"])
            .arg(self.socket());
        // A HEAD answer has no body: curl is told so, or it waits for one.
        if method == "HEAD" {
            cmd.arg("--head");
        } else {
            cmd.args(["-X", method]);
        }
        cmd.arg("-o").arg(&response).args(["-w", "%{http_code}"]);
        if let Some(body) = body {
            let request = dir.join(format!("request-{n}"));
            fs::write(&request, body).expect("write the request body");
            cmd.args(["-H", "Content-Type: application/json", "--data-binary"])
                .arg(format!("@{}", request.display()));
        }
        for (name, value) in headers {
            cmd.arg("-H").arg(format!("{name}: {value}"));
        }
        cmd.arg(format!("http://holdfast{path}"));
        let out = run_with_timeout(&mut cmd, Duration::from_secs(90));
        let status = out.stdout.trim().parse().unwrap_or(0);
        let body = fs::read(&response)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        self.note(format!(
            "$ curl -X {method} {path} -> {status} {}",
            body.chars().take(200).collect::<String>()
        ));
        HttpResponse {
            status,
            body,
            curl_error: out.stderr,
        }
    }

    // ---- containerd's own view, through ctr

    /// The container ids containerd holds in this daemon's namespace.
    pub fn containerd_container_ids(&self) -> Vec<String> {
        lines(&self.ctr(&["containers", "ls", "-q"]))
    }

    /// `ctr ARGS...` in this daemon's containerd namespace: its stdout.
    fn ctr(&self, args: &[&str]) -> String {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(self.containerd_socket())
            .args(["-n", &self.namespace])
            .args(args);
        let out = run_with_timeout(&mut cmd, Duration::from_secs(30));
        assert!(
            out.success(),
            "ctr {} failed ({}):\n{}\n{}",
            args.join(" "),
            out.code(),
            out.stderr,
            self.diagnostics()
        );
        out.stdout
    }

    /// The OCI runtime spec containerd holds for container `id`.
    pub fn containerd_spec(&self, id: &str) -> Value {
        let info: Value =
            serde_json::from_str(&self.ctr(&["containers", "info", id])).unwrap_or_default();
        info["Spec"].clone()
    }

    // ---- waiting

    /// Polls `condition` every 50 ms until it holds; panics with the logs
    /// when [`WAIT_BOUND`] passes first.
    pub fn wait_until(&self, what: &str, condition: impl FnMut() -> bool) {
        self.wait_until_within(what, WAIT_BOUND, condition);
    }

    /// As [`Daemon::wait_until`] with another bound.
    pub fn wait_until_within(&self, what: &str, bound: Duration, condition: impl FnMut() -> bool) {
        if !poll_until(bound, condition) {
            panic!(
                "timed out after {bound:?} waiting until {what}\n{}",
                self.diagnostics()
            );
        }
    }

    /// Asserts that `condition` holds at every poll for `duration`: for
    /// things that must NOT happen (a restart that policy forbids). The only
    /// place where time passing is itself the point.
    pub fn assert_holds_for(
        &self,
        what: &str,
        duration: Duration,
        mut condition: impl FnMut() -> bool,
    ) {
        let started = Instant::now();
        while started.elapsed() < duration {
            assert!(
                condition(),
                "{what} stopped holding after {:?}\n{}",
                started.elapsed(),
                self.diagnostics()
            );
            std::thread::sleep(crate::POLL_INTERVAL * 4);
        }
    }

    /// Asserts that `inspect(name)` satisfies `condition` at every poll for
    /// `duration`; on failure shows the State and RestartCount it saw.
    pub fn assert_inspect_holds_for(
        &self,
        name: &str,
        what: &str,
        duration: Duration,
        condition: impl Fn(&Value) -> bool,
    ) {
        let started = Instant::now();
        while started.elapsed() < duration {
            let v = self.inspect(name);
            assert!(
                condition(&v),
                "{what} stopped holding after {:?}: RestartCount {}, State {:#}\n{}",
                started.elapsed(),
                v["RestartCount"],
                v["State"],
                self.diagnostics()
            );
            std::thread::sleep(crate::POLL_INTERVAL * 4);
        }
    }

    // ---- holdfastd's life

    /// SIGKILLs holdfastd (containerd, the shims and the containers go on).
    pub fn sigkill(&mut self) {
        let mut child = self.child.take().expect("holdfastd is not running");
        self.note(format!("# SIGKILL holdfastd {}", child.id()));
        child.kill().expect("SIGKILL holdfastd");
        child.wait().expect("reap holdfastd");
    }

    /// SIGTERMs holdfastd and waits until it exits; its exit status.
    pub fn sigterm_and_wait(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("holdfastd is not running");
        self.note(format!("# SIGTERM holdfastd {}", child.id()));
        procs::signal(child.id(), "TERM");
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("wait for holdfastd") {
                return status;
            }
            if started.elapsed() > WAIT_BOUND {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "holdfastd did not exit within {WAIT_BOUND:?} of SIGTERM\n{}",
                    self.diagnostics()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The environment holdfastd is started with from now on (its next
    /// start): a crash test's pause point is not set again, say.
    pub fn set_env(&mut self, env: &[(&str, &str)]) {
        self.extra_env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
    }

    /// Starts holdfastd again on the same roots and waits until it serves.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "holdfastd still runs: stop it first");
        self.spawn();
    }

    /// As [`Daemon::restart`], but returns as soon as `docker version`
    /// answers: what a user racing holdfastd's start-up sees.
    pub fn restart_until_version(&mut self) {
        assert!(self.child.is_none(), "holdfastd still runs: stop it first");
        self.spawn_child();
        self.wait_until("holdfastd answers `docker version`", || {
            self.docker(&["version"]).success()
        });
    }

    /// A power cut and reboot, as far as this holdfastd can tell: every
    /// process it, its containerd and its shims started is SIGKILLed,
    /// every mount under its roots goes, and the exec root (a tmpfs under
    /// `/run` on a real host) is emptied; the data root stays. Start it
    /// again with [`Daemon::restart`].
    pub fn reboot(&mut self) {
        self.note("# power cut: every process, mount and the exec root gone".to_owned());
        self.end_everything();
        let run = self.exec_root();
        for entry in fs::read_dir(&run).into_iter().flatten().flatten() {
            let path = entry.path();
            let gone = if path.is_dir() {
                fs::remove_dir_all(&path)
            } else {
                fs::remove_file(&path)
            };
            if let Err(e) = gone {
                panic!("empty the exec root: {}: {e}", path.display());
            }
        }
    }

    /// Kills holdfastd and everything under it, unmounts what they mounted
    /// under the root and removes their cgroups and runc's state.
    fn end_everything(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let root = self.root().to_string_lossy().into_owned();
        // containerd (its config is under the root), the shims (their
        // -address is), the loggers (their log file is), and everything
        // under them; a frozen containerd dies of SIGKILL too. Then whatever
        // is left in the namespace's cgroups.
        let mut doomed = procs::processes_mentioning(&root);
        doomed.extend(cgroup_pids(&self.namespace));
        for pid in &doomed {
            procs::signal(*pid, "KILL");
        }
        poll_until(Duration::from_secs(10), || {
            doomed.iter().all(|p| !procs::pid_alive(*p))
        });
        // A shim or logger caught mid-spawn by the first sweep.
        for pid in procs::processes_mentioning(&root)
            .into_iter()
            .chain(cgroup_pids(&self.namespace))
        {
            procs::signal(pid, "KILL");
        }
        procs::unmount_under(self.root());
        let _ = fs::remove_dir_all(Path::new("/run/containerd/runc").join(&self.namespace));
        poll_until(Duration::from_secs(5), || {
            cgroup_pids(&self.namespace).is_empty()
        });
        procs::remove_cgroups(&self.namespace);
    }

    // ---- the embedded containerd

    /// The pid of the embedded containerd, from its pid file, when that
    /// process is alive and is a containerd.
    pub fn containerd_pid(&self) -> Option<u32> {
        let text = fs::read_to_string(self.containerd_pidfile()).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let p = Proc::read(pid)?;
        (p.is_alive() && is_containerd(&p)).then_some(pid)
    }

    fn expect_containerd_pid(&self) -> u32 {
        let mut pid = None;
        self.wait_until("the embedded containerd runs (pid file)", || {
            pid = self.containerd_pid();
            pid.is_some()
        });
        pid.expect("waited for it")
    }

    /// SIGKILLs the embedded containerd (not its shims) and waits until it is
    /// gone; its pid. holdfastd's supervisor will start a new one.
    pub fn kill_containerd(&self) -> u32 {
        let pid = self.expect_containerd_pid();
        self.note(format!("# SIGKILL containerd {pid}"));
        procs::signal(pid, "KILL");
        self.wait_until("the killed containerd is gone", || !procs::pid_alive(pid));
        pid
    }

    /// Waits until a containerd other than `old` runs (the supervisor
    /// restarted it); its pid.
    pub fn wait_containerd_restarted(&self, old: u32) -> u32 {
        let mut pid = None;
        self.wait_until("the supervisor started a new containerd", || {
            pid = self.containerd_pid().filter(|p| *p != old);
            pid.is_some()
        });
        pid.expect("waited for it")
    }

    /// SIGSTOPs the embedded containerd: it stays, holds its socket, and
    /// answers nothing; its pid.
    pub fn freeze_containerd(&self) -> u32 {
        let pid = self.expect_containerd_pid();
        self.note(format!("# SIGSTOP containerd {pid}"));
        procs::signal(pid, "STOP");
        self.wait_until("containerd is stopped", || {
            Proc::read(pid).is_some_and(|p| p.state == 'T' || p.state == 't')
        });
        pid
    }

    /// SIGCONTs a containerd frozen by [`Daemon::freeze_containerd`].
    pub fn thaw_containerd(&self, pid: u32) {
        self.note(format!("# SIGCONT containerd {pid}"));
        procs::signal(pid, "CONT");
    }

    /// Keeps the embedded containerd down until the returned guard ends: a
    /// thread SIGKILLs every containerd of this root as soon as it appears
    /// (a crash loop), so holdfastd sees it unreachable for as long as the
    /// test needs. Kills the running one first and waits until it is gone.
    pub fn hold_containerd_down(&self) -> ContainerdOutage {
        let first = self.expect_containerd_pid();
        self.note(format!("# crash-looping containerd (first {first})"));
        let root = self.root().to_string_lossy().into_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let kills = Arc::new(AtomicUsize::new(0));
        let thread = {
            let stop = stop.clone();
            let kills = kills.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for p in procs::processes() {
                        if p.is_alive()
                            && is_containerd(&p)
                            && p.cmdline.iter().any(|a| a.contains(&root))
                        {
                            procs::signal(p.pid, "KILL");
                            kills.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        self.wait_until("the first containerd is gone", || !procs::pid_alive(first));
        ContainerdOutage {
            stop,
            kills,
            thread: Some(thread),
        }
    }

    // ---- diagnostics

    /// The tails of holdfastd's and containerd's logs and the last commands,
    /// for every failure message.
    pub fn diagnostics(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n==== holdfastd log ({}), last 80 lines but the harness's own requests",
            self.log_path().display()
        );
        s.push_str(&tail_without(&self.log_path(), 80, "api: request method="));
        let _ = writeln!(
            s,
            "\n==== containerd log ({}), last 40 lines",
            self.containerd_log_path().display()
        );
        s.push_str(&tail(&self.containerd_log_path(), 40));
        let _ = writeln!(s, "\n==== last commands");
        let transcript = self.transcript.lock().unwrap_or_else(|e| e.into_inner());
        for line in &transcript[transcript.len().saturating_sub(20)..] {
            let _ = writeln!(s, "{line}");
        }
        s
    }

    fn note(&self, line: String) {
        self.transcript
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    fn record(&self, args: &[&str], out: &CommandOutput) {
        let result = match out.status {
            Some(_) => format!("exit {}", out.code()),
            None => "TIMED OUT".to_owned(),
        };
        self.note(format!(
            "$ docker {} -> {result} in {:?}",
            show_args(args),
            out.elapsed
        ));
    }

    // ---- start-up

    fn spawn(&mut self) {
        self.spawn_child();
        self.wait_ready();
    }

    fn spawn_child(&mut self) {
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the holdfastd log");
        writeln!(log, "---- holdfast-e2e: starting holdfastd").expect("write the holdfastd log");
        let err = log.try_clone().expect("clone the log handle");
        let child = Command::new(&self.binary)
            .arg("--data-root")
            .arg(self.data_root())
            .arg("--exec-root")
            .arg(self.exec_root())
            .arg("-H")
            .arg(self.host())
            .arg("--containerd-namespace")
            .arg(&self.namespace)
            .args(&self.extra_args)
            .env("RUST_LOG", RUST_LOG)
            .env("NO_COLOR", "1")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.binary.display()));
        self.note(format!("# started holdfastd {}", child.id()));
        self.child = Some(child);
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "holdfastd exited during start-up ({status})\n{}",
                    self.diagnostics()
                );
            }
            let serving = run_with_timeout(
                &mut self.docker_command(&["version"]),
                Duration::from_secs(20),
            )
            .success()
                && run_with_timeout(
                    &mut self.docker_command(&["image", "inspect", "busybox"]),
                    Duration::from_secs(20),
                )
                .success();
            if serving {
                self.note(format!("# holdfastd serving after {:?}", started.elapsed()));
                return;
            }
            if started.elapsed() > START_BOUND {
                panic!(
                    "holdfastd did not serve `docker version` and `docker image inspect busybox` \
                     within {START_BOUND:?}\n{}",
                    self.diagnostics()
                );
            }
            std::thread::sleep(crate::POLL_INTERVAL);
        }
    }
}

/// A docker command started by [`Daemon::spawn_docker`].
#[derive(Debug)]
pub struct BackgroundDocker {
    command: String,
    child: Child,
    started: Instant,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl BackgroundDocker {
    /// What it wrote to stdout so far.
    pub fn stdout_so_far(&self) -> String {
        locked(&self.stdout).clone()
    }

    /// Its exit status once it has exited; `None` while it runs.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("wait for docker")
    }
}

impl Drop for BackgroundDocker {
    /// A command the test no longer waits for (`stats`, `logs -f`) is killed.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Appends what `from` yields to `into`, as it comes, until end of file.
fn collect(
    mut from: impl std::io::Read + Send + 'static,
    into: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            locked(&into).push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
}

fn locked(text: &Mutex<String>) -> std::sync::MutexGuard<'_, String> {
    text.lock().unwrap_or_else(|e| e.into_inner())
}

/// Ends a [`Daemon::hold_containerd_down`] outage.
#[derive(Debug)]
pub struct ContainerdOutage {
    stop: Arc<AtomicBool>,
    kills: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ContainerdOutage {
    /// Lets the supervisor's next containerd live; how many were killed.
    pub fn end(mut self) -> usize {
        self.finish();
        self.kills.load(Ordering::Relaxed)
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ContainerdOutage {
    fn drop(&mut self) {
        self.finish();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if std::env::var_os("HOLDFAST_E2E_TRANSCRIPT").is_some() {
            let transcript = self.transcript.lock().unwrap_or_else(|e| e.into_inner());
            eprintln!(
                "==== transcript of {}\n{}",
                self.root().display(),
                transcript.join("\n")
            );
        }
        self.end_everything();
    }
}

/// The processes in the cgroups of a containerd namespace, in any hierarchy.
fn cgroup_pids(namespace: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(hierarchies) = fs::read_dir("/sys/fs/cgroup") else {
        return pids;
    };
    for h in hierarchies.filter_map(|e| e.ok()) {
        collect_cgroup_pids(&h.path().join(namespace), &mut pids);
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn collect_cgroup_pids(dir: &Path, pids: &mut Vec<u32>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    if let Ok(text) = fs::read_to_string(dir.join("cgroup.procs")) {
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    for e in entries.filter_map(|e| e.ok()) {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            collect_cgroup_pids(&e.path(), pids);
        }
    }
}

fn is_containerd(p: &Proc) -> bool {
    p.cmdline
        .first()
        .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "containerd"))
}

/// target/<profile>/holdfastd, beside this test's target/<profile>/deps.
fn holdfastd_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("HOLDFASTD") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile_dir.join("holdfastd");
    assert!(
        binary.is_file(),
        "{} is missing: build it first: cargo build -p holdfastd",
        binary.display()
    );
    binary
}

/// The tools the suites drive; missing ones fail loudly, never skip.
fn require_tools() {
    for tool in [
        "docker",
        "containerd",
        "runc",
        "containerd-shim-runc-v2",
        "busybox",
        "ctr",
    ] {
        holdfast_testkit::which(tool);
    }
}

fn tail(path: &Path, n: usize) -> String {
    tail_without(path, n, "\0")
}

/// The last `n` lines of a file, leaving out those containing `noise`.
fn tail_without(path: &Path, n: usize, noise: &str) -> String {
    let Ok(bytes) = fs::read(path) else {
        return format!("<cannot read {}>\n", path.display());
    };
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains(noise)).collect();
    let mut s = lines[lines.len().saturating_sub(n)..].join("\n");
    s.push('\n');
    s
}

/// Non-empty lines, trimmed.
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

fn show_args(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains([' ', '\'', '"', '$', ';']) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                (*a).to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
