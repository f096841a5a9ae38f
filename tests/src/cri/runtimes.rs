//! One interface over the two CRI runtimes the pod chaos suite and the
//! CRI side-by-side benchmark drive: holdfastd (a [`Holdfast`]) and
//! containerd's own CRI plugin (a [`ContainerdCri`]), the runtime most
//! Kubernetes nodes run, on the same Debian containerd build, each in a
//! temporary directory of its own. The same CRI client, the same busybox
//! image, the same faults: any difference in what they count is the
//! runtime's.
//!
//! Where the two are built differently the faults follow the build: for
//! containerd's plugin the runtime *is* containerd, so "the runtime
//! SIGKILLed" and "containerd SIGKILLed" are one fault, and while
//! containerd is down its CRI socket is gone too.

use super::channel;
use crate::command::{CommandOutput, run_with_timeout};
use crate::engine::{Engine, Holdfast};
use crate::procs::ProcessIdentity;
use crate::{Daemon, POLL_INTERVAL, WAIT_BOUND, lines};
use holdfast_testkit::{Containerd, ImageFormat, busybox_image, pause_image};
use k8s_cri::v1 as cri;
use k8s_cri::v1::image_service_client::ImageServiceClient;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What a failed step prints: the runtime's and containerd's logs.
pub trait Diagnose {
    fn diagnostics(&self) -> String;
}

impl Diagnose for Daemon {
    fn diagnostics(&self) -> String {
        Daemon::diagnostics(self)
    }
}

/// What the pod chaos suite and the benchmark need of a CRI runtime.
pub trait CriRuntime: Diagnose {
    /// `holdfast` or `containerd-cri`.
    fn name(&self) -> &'static str;

    /// The runtime's CRI socket.
    fn cri_socket(&self) -> PathBuf;

    /// A directory of this runtime's own for the pods' log directories.
    fn scratch(&self) -> &Path;

    /// The process of a running container or sandbox (its init, which
    /// containerd's shim started). Panics (with the logs) when it has none.
    fn process_of(&self, id: &str) -> ProcessIdentity;

    /// How many requests of `method` (`StopContainer`, ...) the runtime's
    /// log shows so far: it grows once a request is in, not only sent.
    fn requests_logged(&self, method: &str) -> usize;

    /// Takes containerd away until [`CriRuntime::containerd_up`].
    fn containerd_down(&mut self);

    /// Ends [`CriRuntime::containerd_down`]: a new containerd serves.
    fn containerd_up(&mut self);

    /// SIGKILLs containerd (never its shims) and returns once a new one
    /// serves.
    fn kill_containerd_and_restart(&mut self);

    /// SIGKILLs the runtime (its shims and containers go on).
    fn kill_runtime(&mut self);

    /// Starts the runtime again on the same roots.
    fn restart_runtime(&mut self);

    /// The container ids containerd holds for the runtime; `None` when
    /// containerd does not answer.
    fn containerd_container_ids(&self) -> Option<Vec<String>>;

    /// The processes that are the runtime (not the shims): their memory
    /// is the runtime's cost.
    fn runtime_pids(&self) -> Vec<u32>;
}

impl Diagnose for Holdfast {
    fn diagnostics(&self) -> String {
        self.daemon.diagnostics()
    }
}

impl CriRuntime for Holdfast {
    fn name(&self) -> &'static str {
        "holdfast"
    }

    fn cri_socket(&self) -> PathBuf {
        self.daemon.exec_root().join("cri.sock")
    }

    fn scratch(&self) -> &Path {
        self.daemon.root()
    }

    fn process_of(&self, id: &str) -> ProcessIdentity {
        self.daemon.process_of(id)
    }

    fn requests_logged(&self, method: &str) -> usize {
        let log = fs::read_to_string(self.daemon.log_path()).unwrap_or_default();
        let path = format!("/{method}");
        log.lines()
            .filter(|l| l.contains("cri request") && l.contains(&path))
            .count()
    }

    fn containerd_down(&mut self) {
        Engine::containerd_down(self);
    }

    fn containerd_up(&mut self) {
        Engine::containerd_up(self);
    }

    fn kill_containerd_and_restart(&mut self) {
        Engine::kill_containerd_and_restart(self);
    }

    fn kill_runtime(&mut self) {
        self.daemon.sigkill();
    }

    fn restart_runtime(&mut self) {
        self.daemon.restart();
    }

    fn containerd_container_ids(&self) -> Option<Vec<String>> {
        Engine::containerd_container_ids(self)
    }

    fn runtime_pids(&self) -> Vec<u32> {
        [self.daemon.holdfastd_pid(), self.daemon.containerd_pid()]
            .into_iter()
            .flatten()
            .collect()
    }
}

/// The pause image containerd's plugin runs sandboxes of: the same one
/// holdfastd seeds (the host's busybox, `sleep infinity`), imported
/// before the first pod, so that neither runtime pulls anything.
const SANDBOX_IMAGE: &str = "holdfast.local/pause:1";
/// The containerd namespace the CRI plugin keeps its pods in.
const CRI_NAMESPACE: &str = "k8s.io";

/// containerd 1.6 with its CRI plugin on ([`Containerd::start_with_cri`]),
/// busybox and the pause image imported into its namespace. Everything
/// it started is stopped on drop.
#[derive(Debug)]
pub struct ContainerdCri {
    containerd: Containerd,
    transcript: Mutex<Vec<String>>,
}

impl ContainerdCri {
    /// Starts containerd with the plugin, imports the images and returns
    /// once the plugin lists both.
    pub fn start() -> ContainerdCri {
        holdfast_testkit::which("ctr");
        let me = ContainerdCri {
            containerd: Containerd::start_with_cri(SANDBOX_IMAGE),
            transcript: Mutex::new(Vec::new()),
        };
        let images = me.scratch().join("images");
        let busybox = busybox_image(&images, "busybox:latest", None);
        let pause = pause_image(&images.join("pause"), SANDBOX_IMAGE);
        for tarball in [busybox.tarball(ImageFormat::DockerArchive), &pause] {
            let out = me.ctr(&["images", "import", &tarball.to_string_lossy()]);
            assert!(
                out.success(),
                "ctr images import {}: {}{}",
                tarball.display(),
                out.stderr,
                me.diagnostics()
            );
        }
        me.wait_images_listed(&[busybox.containerd_name.as_str(), SANDBOX_IMAGE]);
        me
    }

    /// `ctr` on this containerd, in the plugin's namespace.
    fn ctr(&self, args: &[&str]) -> CommandOutput {
        let mut cmd = Command::new("ctr");
        cmd.arg("--address")
            .arg(self.containerd.socket())
            .args(["-n", CRI_NAMESPACE])
            .args(args);
        run_with_timeout(&mut cmd, Duration::from_secs(120))
    }

    /// The plugin learns of imported images from containerd's events:
    /// waits until its `ImageStatus` knows each of `names`.
    fn wait_images_listed(&self, names: &[&str]) {
        let socket = self.cri_socket();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let known = rt.block_on(async {
            let mut images = ImageServiceClient::new(channel(socket));
            let deadline = Instant::now() + WAIT_BOUND;
            loop {
                let mut all = true;
                for name in names {
                    let status = images
                        .image_status(cri::ImageStatusRequest {
                            image: Some(cri::ImageSpec {
                                image: (*name).to_owned(),
                                ..cri::ImageSpec::default()
                            }),
                            verbose: false,
                        })
                        .await;
                    all &= status.is_ok_and(|s| s.into_inner().image.is_some());
                }
                if all || Instant::now() >= deadline {
                    return all;
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        });
        assert!(
            known,
            "containerd's CRI plugin never listed {names:?}{}",
            self.diagnostics()
        );
    }

    fn note(&self, line: String) {
        self.transcript
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
    }
}

impl Diagnose for ContainerdCri {
    fn diagnostics(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "\n==== containerd (CRI plugin) log, last 40 lines");
        s.push_str(&self.containerd.log_tail());
        let _ = writeln!(s, "\n==== last harness steps");
        let transcript = self.transcript.lock().unwrap_or_else(|e| e.into_inner());
        for line in &transcript[transcript.len().saturating_sub(20)..] {
            let _ = writeln!(s, "{line}");
        }
        s
    }
}

impl CriRuntime for ContainerdCri {
    fn name(&self) -> &'static str {
        "containerd-cri"
    }

    fn cri_socket(&self) -> PathBuf {
        self.containerd.socket().to_path_buf()
    }

    fn scratch(&self) -> &Path {
        self.containerd.dir()
    }

    fn process_of(&self, id: &str) -> ProcessIdentity {
        let pidfile = self
            .scratch()
            .join("state/io.containerd.runtime.v2.task")
            .join(CRI_NAMESPACE)
            .join(id)
            .join("init.pid");
        fs::read_to_string(&pidfile)
            .ok()
            .and_then(|pid| pid.trim().parse().ok())
            .and_then(ProcessIdentity::of)
            .unwrap_or_else(|| {
                panic!(
                    "{id} has no live process ({}){}",
                    pidfile.display(),
                    self.diagnostics()
                )
            })
    }

    fn requests_logged(&self, method: &str) -> usize {
        // The plugin logs each request at info level: `msg="StopContainer
        // for ..."`, `msg="CreateContainer within sandbox ..."`.
        let log = fs::read_to_string(self.containerd.log_path()).unwrap_or_default();
        let needle = format!("msg=\"{method} ");
        log.lines().filter(|l| l.contains(&needle)).count()
    }

    fn containerd_down(&mut self) {
        self.note("# SIGKILL containerd (held down)".to_owned());
        self.containerd.kill();
    }

    fn containerd_up(&mut self) {
        self.note("# containerd started again".to_owned());
        self.containerd.restart();
    }

    fn kill_containerd_and_restart(&mut self) {
        self.note("# SIGKILL containerd, start it again".to_owned());
        self.containerd.restart();
    }

    fn kill_runtime(&mut self) {
        self.note("# SIGKILL containerd (the runtime)".to_owned());
        self.containerd.kill();
    }

    fn restart_runtime(&mut self) {
        self.note("# containerd (the runtime) started again".to_owned());
        self.containerd.restart();
    }

    fn containerd_container_ids(&self) -> Option<Vec<String>> {
        let out = self.ctr(&["containers", "ls", "-q"]);
        out.success().then(|| lines(&out.stdout))
    }

    fn runtime_pids(&self) -> Vec<u32> {
        self.containerd.pid().into_iter().collect()
    }
}
