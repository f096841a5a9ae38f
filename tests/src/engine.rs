//! One interface over the two engines the chaos suite and the side-by-side
//! benchmark drive: holdfastd (a [`Daemon`]) and Debian's dockerd 20.10 (a
//! [`Dockerd`]) on a private containerd in a temporary directory. The same
//! docker CLI, the same busybox image, the same faults: any difference in
//! what they count is the engine's.
//!
//! Nothing here panics on what an engine answers: the chaos suite counts
//! what goes wrong. It panics only when the harness itself cannot do its
//! part (start an engine, find a process), with the engine's logs.

use crate::command::{CommandOutput, run_with_timeout};
use crate::daemon::{ContainerdOutage, Daemon};
use crate::procs::{self, Proc};
use crate::{WAIT_BOUND, poll_until};
use holdfast_testkit::{Containerd, ImageFormat, busybox_image};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long dockerd may take to serve.
const DOCKERD_START_BOUND: Duration = Duration::from_secs(120);

/// What the chaos suite needs of an engine.
pub trait Engine {
    /// `holdfast` or `dockerd`.
    fn name(&self) -> &'static str;

    /// A `docker` command pointed at this engine, with a private config.
    fn docker_command(&self, args: &[&str]) -> Command;

    /// SIGKILLs containerd (never its shims) and returns once a new one
    /// serves: holdfastd's supervisor starts it; for dockerd the harness does.
    fn kill_containerd_and_restart(&mut self);

    /// Takes containerd away until [`Engine::containerd_up`].
    fn containerd_down(&mut self);

    /// Ends [`Engine::containerd_down`]: a new containerd serves.
    fn containerd_up(&mut self);

    /// SIGKILLs the engine (containerd, shims and containers go on).
    fn kill_engine(&mut self);

    /// Starts the engine again on the same roots; returns once it answers.
    fn restart_engine(&mut self);

    /// Whether the engine's log shows that it received a request whose
    /// log line contains every one of `fragments` (such as `DELETE` and
    /// `/containers/c1?`).
    fn saw_request(&self, fragments: &[&str]) -> bool;

    /// The container ids containerd holds in the engine's namespace; `None`
    /// when containerd does not answer.
    fn containerd_container_ids(&self) -> Option<Vec<String>>;

    /// The tails of the engine's and containerd's logs, for failure messages.
    fn diagnostics(&self) -> String;

    /// The engine's whole log, for a measurement to keep.
    fn engine_log(&self) -> PathBuf;

    /// The engine's pid while it runs (for its memory).
    fn engine_pid(&self) -> Option<u32>;

    /// containerd's pid while it runs.
    fn containerd_pid(&self) -> Option<u32>;

    /// Runs `docker args...` within `bound`; whatever it did.
    fn docker(&self, args: &[&str], bound: Duration) -> CommandOutput {
        run_with_timeout(&mut self.docker_command(args), bound)
    }

    /// Runs `docker args...` in a thread of its own, for a request that is
    /// in flight while the test does something else.
    fn spawn_docker(&self, args: &[&str], bound: Duration) -> InFlight {
        let mut cmd = self.docker_command(args);
        let label = args.join(" ");
        let thread = std::thread::spawn(move || run_with_timeout(&mut cmd, bound));
        InFlight { label, thread }
    }
}

/// A docker command running in a thread of its own.
#[derive(Debug)]
pub struct InFlight {
    pub label: String,
    thread: std::thread::JoinHandle<CommandOutput>,
}

impl InFlight {
    /// Waits for its end (it is bounded by its own timeout).
    pub fn finish(self) -> CommandOutput {
        match self.thread.join() {
            Ok(out) => out,
            Err(_) => panic!("the thread running `docker {}` panicked", self.label),
        }
    }
}

/// holdfastd, as the end-to-end suites run it.
#[derive(Debug)]
pub struct Holdfast {
    pub daemon: Daemon,
    outage: Option<ContainerdOutage>,
    old_containerd: Option<u32>,
}

impl Holdfast {
    pub fn start() -> Holdfast {
        Holdfast {
            daemon: Daemon::start(),
            outage: None,
            old_containerd: None,
        }
    }

    /// With its data root on a small tmpfs ([`Daemon::start_on_small_disk`]).
    pub fn on_small_disk(size: &str) -> Holdfast {
        Holdfast {
            daemon: Daemon::start_on_small_disk(size),
            outage: None,
            old_containerd: None,
        }
    }
}

impl Engine for Holdfast {
    fn name(&self) -> &'static str {
        "holdfast"
    }

    fn docker_command(&self, args: &[&str]) -> Command {
        self.daemon.docker_command(args)
    }

    fn kill_containerd_and_restart(&mut self) {
        let old = self.daemon.kill_containerd();
        self.daemon.wait_containerd_restarted(old);
    }

    fn containerd_down(&mut self) {
        self.old_containerd = self.daemon.containerd_pid();
        self.outage = Some(self.daemon.hold_containerd_down());
    }

    fn containerd_up(&mut self) {
        if let Some(outage) = self.outage.take() {
            outage.end();
        }
        let old = self.old_containerd.take().unwrap_or(0);
        self.daemon.wait_containerd_restarted(old);
    }

    fn kill_engine(&mut self) {
        self.daemon.sigkill();
    }

    fn restart_engine(&mut self) {
        self.daemon.restart();
    }

    fn saw_request(&self, fragments: &[&str]) -> bool {
        log_has_request(&self.daemon.log_path(), "request method=", fragments)
    }

    fn containerd_container_ids(&self) -> Option<Vec<String>> {
        ctr_container_ids(&self.daemon.containerd_socket(), self.daemon.namespace())
    }

    fn diagnostics(&self) -> String {
        self.daemon.diagnostics()
    }

    fn engine_log(&self) -> PathBuf {
        self.daemon.log_path()
    }

    fn engine_pid(&self) -> Option<u32> {
        self.daemon.holdfastd_pid()
    }

    fn containerd_pid(&self) -> Option<u32> {
        self.daemon.containerd_pid()
    }
}

/// dockerd 20.10 (Debian's docker.io) on a private containerd, both in one
/// temporary directory: its own data-root, exec-root, pid file and socket,
/// no bridge, no iptables, live restore on, its containers under a cgroup
/// parent of their own. Everything it started is stopped on drop.
#[derive(Debug)]
pub struct Dockerd {
    dir: tempfile::TempDir,
    containerd: Option<Containerd>,
    namespace: String,
    child: Option<Child>,
    transcript: Mutex<Vec<String>>,
}

impl Dockerd {
    /// Starts containerd and dockerd, loads `busybox:latest` (the image the
    /// holdfast suites use, built from the host's static busybox) and
    /// returns once `docker image inspect busybox` answers.
    pub fn start() -> Dockerd {
        holdfast_testkit::which("dockerd");
        let dir = tempfile::Builder::new()
            .prefix("hf-dockerd-")
            .tempdir()
            .expect("create a temporary root for dockerd");
        for sub in ["data", "run", "docker-config", "image"] {
            fs::create_dir_all(dir.path().join(sub)).expect("create dockerd's roots");
        }
        let mut me = Dockerd {
            dir,
            containerd: Some(Containerd::start()),
            namespace: holdfast_testkit::unique_namespace("dk"),
            child: None,
            transcript: Mutex::new(Vec::new()),
        };
        me.spawn();
        let image = busybox_image(&me.dir.path().join("image"), "busybox:latest", None);
        let tar = image.tarball(ImageFormat::DockerArchive).to_path_buf();
        let out = me.docker(
            &["load", "-q", "-i", &tar.to_string_lossy()],
            Duration::from_secs(120),
        );
        assert!(
            out.success(),
            "docker load into dockerd: {}\n{}",
            out.stderr,
            me.diagnostics()
        );
        me
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn socket(&self) -> PathBuf {
        self.root().join("run/docker.sock")
    }

    fn log_path(&self) -> PathBuf {
        self.root().join("dockerd.log")
    }

    fn containerd(&self) -> &Containerd {
        self.containerd
            .as_ref()
            .expect("containerd is kept until drop")
    }

    fn containerd_mut(&mut self) -> &mut Containerd {
        self.containerd
            .as_mut()
            .expect("containerd is kept until drop")
    }

    fn note(&self, line: String) {
        self.transcript
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }

    fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the dockerd log");
        let err = log.try_clone().expect("clone the log handle");
        let root = self.root().to_path_buf();
        let child = Command::new("dockerd")
            .arg("--containerd")
            .arg(self.containerd().socket())
            .args(["--containerd-namespace", &self.namespace])
            .args([
                "--containerd-plugins-namespace",
                &format!("{}-plugins", self.namespace),
            ])
            .arg("--data-root")
            .arg(root.join("data"))
            .arg("--exec-root")
            .arg(root.join("run/exec"))
            .arg("--pidfile")
            .arg(root.join("run/docker.pid"))
            .arg("-H")
            .arg(format!("unix://{}", self.socket().display()))
            .args([
                "--bridge=none",
                "--iptables=false",
                "--ip6tables=false",
                "--ip-masq=false",
                "--live-restore",
                "--debug",
            ])
            .arg(format!("--cgroup-parent=/{}", self.namespace))
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn dockerd: {e}"));
        self.note(format!("# started dockerd {}", child.id()));
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "dockerd exited during start-up ({status})\n{}",
                    self.diagnostics()
                );
            }
            if self.docker(&["version"], Duration::from_secs(20)).success() {
                return;
            }
            assert!(
                started.elapsed() < DOCKERD_START_BOUND,
                "dockerd did not serve within {DOCKERD_START_BOUND:?}\n{}",
                self.diagnostics()
            );
            std::thread::sleep(crate::POLL_INTERVAL);
        }
    }
}

impl Engine for Dockerd {
    fn name(&self) -> &'static str {
        "dockerd"
    }

    fn docker_command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("docker");
        cmd.args(args)
            .env("DOCKER_HOST", format!("unix://{}", self.socket().display()))
            .env("DOCKER_CONFIG", self.root().join("docker-config"))
            .env("DOCKER_CLI_HINTS", "false")
            .env_remove("DOCKER_CONTEXT")
            .env_remove("DOCKER_API_VERSION")
            .env_remove("DOCKER_TLS_VERIFY")
            .env_remove("DOCKER_CERT_PATH");
        cmd
    }

    fn kill_containerd_and_restart(&mut self) {
        self.note("# SIGKILL containerd, start it again".to_owned());
        self.containerd_mut().restart();
    }

    fn containerd_down(&mut self) {
        self.note("# SIGKILL containerd (held down)".to_owned());
        self.containerd_mut().kill();
    }

    fn containerd_up(&mut self) {
        self.note("# containerd started again".to_owned());
        self.containerd_mut().restart();
    }

    fn kill_engine(&mut self) {
        if let Some(mut child) = self.child.take() {
            self.note(format!("# SIGKILL dockerd {}", child.id()));
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart_engine(&mut self) {
        assert!(self.child.is_none(), "dockerd still runs: kill it first");
        self.spawn();
    }

    fn saw_request(&self, fragments: &[&str]) -> bool {
        log_has_request(&self.log_path(), "Calling ", fragments)
    }

    fn containerd_container_ids(&self) -> Option<Vec<String>> {
        ctr_container_ids(self.containerd().socket(), &self.namespace)
    }

    fn diagnostics(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "\n==== dockerd log, last 60 lines");
        s.push_str(&tail(&self.log_path(), 60));
        let _ = writeln!(s, "\n==== containerd log, last 40 lines");
        s.push_str(&self.containerd().log_tail());
        let _ = writeln!(s, "\n==== last harness steps");
        let transcript = self.transcript.lock().unwrap_or_else(|e| e.into_inner());
        for line in &transcript[transcript.len().saturating_sub(20)..] {
            let _ = writeln!(s, "{line}");
        }
        s
    }

    fn engine_log(&self) -> PathBuf {
        self.log_path()
    }

    fn engine_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn containerd_pid(&self) -> Option<u32> {
        self.containerd().pid()
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        // Containers are live-restored: stop dockerd, then its containerd
        // (whose drop kills the shims and the containers under them).
        if let Some(mut child) = self.child.take() {
            procs::signal(child.id(), "TERM");
            if !poll_until(Duration::from_secs(20), || {
                child.try_wait().ok().flatten().is_some()
            }) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        self.containerd = None;
        let root = self.root().to_string_lossy().into_owned();
        for pid in procs::processes_mentioning(&root) {
            procs::signal(pid, "KILL");
        }
        procs::unmount_under(self.root());
        procs::remove_cgroups(&self.namespace);
        let _ = fs::remove_dir_all(Path::new("/run/containerd/runc").join(&self.namespace));
    }
}

/// The shim of a container's init process: its parent, when that is a
/// containerd shim.
pub fn shim_of(container_pid: u32) -> Option<u32> {
    let p = Proc::read(container_pid)?;
    let parent = Proc::read(p.ppid)?;
    parent
        .cmdline
        .first()
        .is_some_and(|a| a.contains("containerd-shim"))
        .then_some(parent.pid)
}

/// Waits (with the suites' generous bound) until `condition` holds; whether
/// it did. For the chaos suite, which counts instead of panicking.
pub fn eventually(condition: impl FnMut() -> bool) -> bool {
    poll_until(WAIT_BOUND, condition)
}

fn ctr_container_ids(socket: &Path, namespace: &str) -> Option<Vec<String>> {
    let mut cmd = Command::new("ctr");
    cmd.arg("--address")
        .arg(socket)
        .args(["-n", namespace, "containers", "ls", "-q"]);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(30));
    out.success().then(|| crate::lines(&out.stdout))
}

fn log_has_request(log: &Path, marker: &str, fragments: &[&str]) -> bool {
    let Ok(bytes) = fs::read(log) else {
        return false;
    };
    String::from_utf8_lossy(&bytes)
        .lines()
        .any(|l| l.contains(marker) && fragments.iter().all(|f| l.contains(f)))
}

fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let mut s = lines[lines.len().saturating_sub(n)..].join("\n");
    s.push('\n');
    s
}
