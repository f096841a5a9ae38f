//! A private containerd in a temporary directory.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The line containerd logs once every plugin is loaded and it serves.
const BOOTED: &str = "containerd successfully booted";
/// How long a (re)start may take on a slow, shared machine.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running private containerd. See the crate docs.
#[derive(Debug)]
pub struct Containerd {
    dir: tempfile::TempDir,
    config: PathBuf,
    socket: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    boots: usize,
}

impl Containerd {
    /// Starts a containerd on fresh directories and waits until it serves.
    pub fn start() -> Containerd {
        Containerd::start_configured(|dirs, _| {
            holdfast_containerd_config::config_toml(dirs)
                .expect("containerd's directories are named in UTF-8")
        })
    }

    /// Starts a containerd with its built-in CRI plugin on (holdfast's
    /// turns it off), as most Kubernetes nodes run it: the yardstick of
    /// the side-by-side benchmark. Everything is private to its directory:
    /// the plugin's root and state, runc's root, an empty CNI
    /// configuration directory (pods on the host's network need none), its
    /// streaming server on 127.0.0.1 and a free port; AppArmor off (the
    /// holdfast suites' containers run without it too); OOM scores no
    /// lower than containerd's own (a sandbox's -998 needs a privilege a
    /// test machine may not give, and runc fails the sandbox's start on
    /// it). Its sandboxes run
    /// `sandbox_image`, which the caller imports into the `k8s.io`
    /// namespace (containerd pulls it otherwise).
    pub fn start_with_cri(sandbox_image: &str) -> Containerd {
        let sandbox_image = sandbox_image.to_owned();
        Containerd::start_configured(move |dirs, dir| {
            let base = holdfast_containerd_config::config_toml(dirs)
                .expect("containerd's directories are named in UTF-8");
            cri_config(&base, dir, &sandbox_image)
        })
    }

    fn start_configured(
        config_text: impl FnOnce(&holdfast_containerd_config::Dirs<'_>, &Path) -> String,
    ) -> Containerd {
        let binary = crate::which("containerd");
        crate::which("runc");
        crate::which("containerd-shim-runc-v2");
        let dir = tempfile::Builder::new()
            .prefix("hf-ctrd-")
            .tempdir()
            .expect("create a temporary directory for containerd");
        let root = dir.path().join("root");
        let state = dir.path().join("state");
        let socket = dir.path().join("containerd.sock");
        let config = dir.path().join("config.toml");
        let log = dir.path().join("containerd.log");
        for d in [&root, &state, &dir.path().join("opt")] {
            fs::create_dir_all(d).expect("create containerd directories");
        }
        let text = config_text(
            &holdfast_containerd_config::Dirs {
                root: &root,
                state: &state,
                socket: &socket,
                ttrpc: &dir.path().join("containerd.sock.ttrpc"),
                opt: &dir.path().join("opt"),
            },
            dir.path(),
        );
        fs::write(&config, text).expect("write containerd config");
        let mut me = Containerd {
            dir,
            config,
            socket,
            log,
            child: None,
            boots: 0,
        };
        me.spawn(&binary);
        me
    }

    /// The gRPC socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The temporary directory holding everything of this containerd.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// containerd's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILLs containerd (not its shims: they and their tasks keep running,
    /// as after a real crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL containerd");
            child.wait().expect("reap containerd");
        }
    }

    /// Starts containerd again on the same directories and waits until it
    /// serves. Kills it first if it still runs.
    pub fn restart(&mut self) {
        self.kill();
        let binary = crate::which("containerd");
        self.spawn(&binary);
    }

    /// containerd's own log (its output, every start appended).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// containerd's own log, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn spawn(&mut self, binary: &Path) {
        let mut log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open containerd log");
        writeln!(log, "---- holdfast-testkit: starting containerd").expect("write containerd log");
        let err = log.try_clone().expect("clone log handle");
        let child = Command::new(binary)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .expect("spawn containerd");
        self.child = Some(child);
        self.boots += 1;
        let started = Instant::now();
        loop {
            let text = fs::read_to_string(&self.log).unwrap_or_default();
            if text.matches(BOOTED).count() >= self.boots && self.socket.exists() {
                return;
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                panic!(
                    "containerd exited during start-up ({status}):\n{}",
                    self.log_tail()
                );
            }
            if started.elapsed() > START_TIMEOUT {
                panic!(
                    "containerd did not boot within {START_TIMEOUT:?}:\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills every shim of this containerd and every process under them.
    fn kill_shims(&self) {
        let socket = self.socket.to_string_lossy().into_owned();
        let procs = processes();
        let shims: Vec<u32> = procs
            .iter()
            .filter(|(_, p)| p.cmdline.iter().any(|a| a.contains("containerd-shim")))
            .filter(|(_, p)| p.cmdline.contains(&socket))
            .map(|(pid, _)| *pid)
            .collect();
        let mut doomed = BTreeSet::new();
        let mut frontier = shims.clone();
        while let Some(parent) = frontier.pop() {
            for (pid, p) in &procs {
                if p.ppid == parent && doomed.insert(*pid) {
                    frontier.push(*pid);
                }
            }
        }
        for pid in doomed.iter().chain(shims.iter()) {
            sigkill(*pid);
        }
    }

    fn namespaces(&self) -> Vec<String> {
        let tasks = self.dir.path().join("state/io.containerd.runtime.v2.task");
        let Ok(entries) = fs::read_dir(tasks) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let namespaces = self.namespaces();
        self.kill_shims();
        self.kill();
        unmount_under(self.dir.path());
        for ns in namespaces {
            let _ = fs::remove_dir_all(Path::new("/run/containerd/runc").join(&ns));
            remove_cgroups(&ns);
        }
    }
}

/// holdfast's containerd configuration (`base`) with the CRI plugin
/// turned back on and configured in `dir` (see
/// [`Containerd::start_with_cri`]).
fn cri_config(base: &str, dir: &Path, sandbox_image: &str) -> String {
    let q = |p: &Path| {
        holdfast_containerd_config::toml_string(p.to_str().expect("a UTF-8 temporary directory"))
    };
    for sub in ["runc", "cni"] {
        fs::create_dir_all(dir.join(sub)).expect("create the CRI plugin's directories");
    }
    let cri_off = "  \"io.containerd.grpc.v1.cri\",\n";
    assert!(
        base.contains(cri_off),
        "holdfast's config no longer turns the CRI off as expected:\n{base}"
    );
    let base = base.replace(cri_off, "");
    format!(
        r#"{base}
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {sandbox_image}
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = {runc}
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = {cni}
"#,
        sandbox_image = holdfast_containerd_config::toml_string(sandbox_image),
        runc = q(&dir.join("runc")),
        cni = q(&dir.join("cni")),
    )
}

/// SIGKILLs a process (used for cleanup and by tests that kill a task from
/// the host). A process that is already gone is fine.
pub fn sigkill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

struct Proc {
    ppid: u32,
    cmdline: Vec<String>,
}

fn processes() -> HashMap<u32, Proc> {
    let mut out = HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.filter_map(|e| e.ok()) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The command name may hold spaces and parentheses: ppid follows the last ')'.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
        else {
            continue;
        };
        let cmdline = fs::read(entry.path().join("cmdline"))
            .unwrap_or_default()
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        out.insert(pid, Proc { ppid, cmdline });
    }
    out
}

/// Lazily unmounts every mount point under `dir`, deepest first (for the
/// clean-up of a test that mounted there).
pub fn unmount_under(dir: &Path) {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.to_string_lossy().into_owned();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount")
            .args(["-l", &p])
            .stderr(Stdio::null())
            .status();
    }
}

/// Removes the cgroups runc made for a containerd namespace
/// (`/<namespace>/<id>` in every hierarchy), leaves first.
pub fn remove_cgroups(namespace: &str) {
    let Ok(controllers) = fs::read_dir("/sys/fs/cgroup") else {
        return;
    };
    for c in controllers.filter_map(|e| e.ok()) {
        let base = c.path().join(namespace);
        remove_cgroup_tree(&base);
    }
    let _ = fs::remove_dir(Path::new("/sys/fs/cgroup").join(namespace));
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.filter_map(|e| e.ok()) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}
