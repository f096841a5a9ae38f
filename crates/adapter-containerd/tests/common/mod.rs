//! Shared set-up for tests against a real, private containerd.
#![allow(dead_code)]

use containerd_client::services::v1::snapshots::ListSnapshotsRequest;
use containerd_client::services::v1::{ListContainersRequest, ListTasksRequest};
use containerd_client::tonic::Request;
use containerd_client::with_namespace;
use holdfast_adapter_containerd::{Adapter, AdapterConfig};
use holdfast_core::{
    Call, ContainerConfig, ContainerId, ContainerdEvent, Done, Failure, Input, OpId,
};
use holdfast_testkit::{BusyboxImage, Containerd, busybox_image};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Generous: the machine is small and shared.
pub const WAIT: Duration = Duration::from_secs(30);

pub struct Env {
    pub ctrd: Containerd,
    pub adapter: Adapter,
    pub image: BusyboxImage,
    pub namespace: String,
    pub sink: UnboundedSender<Input>,
    pub inputs: UnboundedReceiver<Input>,
    /// Everything received so far, in order.
    pub seen: Vec<Input>,
    pub dir: tempfile::TempDir,
    next_op: AtomicU64,
}

/// Trace lines kept for a failure's report: the last of them.
const TRACE_LINES_MAX: usize = 400;

static TRACE: OnceLock<Mutex<VecDeque<String>>> = OnceLock::new();

fn trace() -> &'static Mutex<VecDeque<String>> {
    TRACE.get_or_init(|| Mutex::new(VecDeque::with_capacity(TRACE_LINES_MAX)))
}

/// One formatted event, appended to [`TRACE`] when the formatter is done.
struct TraceLine(Vec<u8>);

impl std::io::Write for TraceLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for TraceLine {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.0).trim_end().to_owned();
        let mut kept = trace().lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == TRACE_LINES_MAX {
            kept.pop_front();
        }
        kept.push_back(line);
    }
}

/// With `RUST_LOG` set, the trace goes to the test's output as asked.
/// Without it, the adapter's trace, each RPC's span closed with its time, is
/// kept in memory (the runtimes are multi-threaded, so the test writer would
/// not capture it) and printed by [`Env`]'s drop when the test fails.
pub fn init_tracing() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "holdfast_adapter_containerd=trace",
        ))
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_ansi(false)
        .with_thread_names(true)
        .with_writer(|| TraceLine(Vec::new()))
        .try_init();
}

/// What a failed test prints: containerd's log and the adapter's trace (the
/// trace is the test binary's, so tests running beside it appear too).
pub fn failure_report(ctrd: &Containerd) -> String {
    let kept = trace().lock().unwrap_or_else(|e| e.into_inner());
    let lines: Vec<&str> = kept.iter().map(String::as_str).collect();
    format!(
        "==== containerd log ({}), last lines\n{}\n==== adapter trace, last {} lines (this test binary's, all tests)\n{}",
        ctrd.dir().display(),
        ctrd.log_tail(),
        lines.len(),
        lines.join("\n")
    )
}

/// Prints [`failure_report`] when dropped during a panic: hold one for as
/// long as the test's containerd lives.
pub struct ReportOnPanic<'a>(pub &'a Containerd);

impl Drop for ReportOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("{}", failure_report(self.0));
        }
    }
}

pub fn adapter_for(ctrd: &Containerd, namespace: &str, dir: &std::path::Path) -> Adapter {
    let mut config = AdapterConfig::new(
        ctrd.socket(),
        namespace,
        env!("CARGO_BIN_EXE_holdfast-logger"),
        dir.join("logs"),
    );
    config.call_timeout = Duration::from_secs(20);
    Adapter::new(config).expect("adapter")
}

impl Env {
    /// A private containerd, an adapter on a fresh namespace, and the busybox
    /// image imported (docker-archive).
    pub async fn start() -> Env {
        init_tracing();
        let ctrd = Containerd::start();
        let dir = tempfile::tempdir().expect("tempdir");
        let image = busybox_image(&dir.path().join("images"), "busybox:latest", None);
        let namespace = holdfast_testkit::unique_namespace("hf");
        let adapter = adapter_for(&ctrd, &namespace, dir.path());
        adapter
            .import_image(&image.docker_archive)
            .await
            .expect("import busybox");
        let (sink, inputs) = unbounded_channel();
        Env {
            ctrd,
            adapter,
            image,
            namespace,
            sink,
            inputs,
            seen: Vec::new(),
            dir,
            next_op: AtomicU64::new(1),
        }
    }

    pub fn op(&self) -> OpId {
        OpId(self.next_op.fetch_add(1, Ordering::Relaxed))
    }

    /// Runs an ordinary call to its result.
    pub async fn call(&mut self, call: Call) -> Result<Done, Failure> {
        let op = self.op();
        tokio::spawn(self.adapter.execute(op, call, self.sink.clone()));
        let got = self
            .wait_for(|i| matches!(i, Input::ActionResult(o, _) if *o == op))
            .await;
        match got {
            Input::ActionResult(_, r) => r,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Opens the event stream and waits until it is live.
    pub async fn subscribe(&mut self) -> OpId {
        let op = self.op();
        tokio::spawn(self.adapter.execute(op, Call::Subscribe, self.sink.clone()));
        let live = self
            .wait_for(|i| {
                matches!(i, Input::Connection(holdfast_core::ConnectionFact::StreamLive(o)) if *o == op)
                    || matches!(i, Input::ActionResult(o, _) if *o == op)
            })
            .await;
        assert!(
            matches!(live, Input::Connection(_)),
            "subscription failed: {live:?}"
        );
        op
    }

    /// Waits (up to [`WAIT`]) for the first input matching `pred`, keeping all.
    pub async fn wait_for(&mut self, pred: impl Fn(&Input) -> bool) -> Input {
        self.wait_for_within(WAIT, pred)
            .await
            .unwrap_or_else(|| panic!("no matching input within {WAIT:?} (what was seen follows)"))
    }

    pub async fn wait_for_within(
        &mut self,
        within: Duration,
        pred: impl Fn(&Input) -> bool,
    ) -> Option<Input> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let got = tokio::time::timeout_at(deadline, self.inputs.recv())
                .await
                .ok()??;
            self.seen.push(got.clone());
            if pred(&got) {
                return Some(got);
            }
        }
    }

    /// Waits for the init exit of `id`; returns its status.
    pub async fn exit_of(&mut self, id: &ContainerId) -> u32 {
        // It may have arrived while waiting for a call's result.
        for i in &self.seen {
            if let Input::Event(ContainerdEvent::TaskExit {
                container,
                exec_id,
                exit_status,
                ..
            }) = i
                && container == id
                && exec_id == id.as_str()
            {
                return *exit_status;
            }
        }
        let id2 = id.clone();
        match self
            .wait_for(move |i| matches!(i, Input::Event(ContainerdEvent::TaskExit { container, exec_id, .. }) if *container == id2 && exec_id == id2.as_str()))
            .await
        {
            Input::Event(ContainerdEvent::TaskExit { exit_status, .. }) => exit_status,
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Creates, creates the task and starts a container running `cmd`; returns the pid.
    pub async fn run(&mut self, id: &ContainerId, cmd: &[&str]) -> u32 {
        self.run_with(id, busybox(cmd)).await
    }

    /// As [`Env::run`], with a config of the test's own.
    pub async fn run_with(&mut self, id: &ContainerId, config: ContainerConfig) -> u32 {
        assert_eq!(
            self.call(Call::CreateContainer {
                id: id.clone(),
                config: config.into()
            })
            .await,
            Ok(Done::Ok)
        );
        let pid = match self.call(Call::CreateTask { id: id.clone() }).await {
            Ok(Done::TaskCreated { pid }) => pid,
            other => panic!("create task: {other:?}"),
        };
        assert_eq!(
            self.call(Call::StartTask { id: id.clone() }).await,
            Ok(Done::Ok)
        );
        pid
    }

    /// Deletes task and container; both must succeed.
    pub async fn remove(&mut self, id: &ContainerId) {
        assert_eq!(
            self.call(Call::DeleteTask { id: id.clone() }).await,
            Ok(Done::Ok),
            "delete task {id}"
        );
        assert_eq!(
            self.call(Call::DeleteContainer { id: id.clone() }).await,
            Ok(Done::Ok),
            "delete container {id}"
        );
    }

    /// Containers, tasks and active (container) snapshots left in the namespace.
    pub async fn leftovers(&self) -> (Vec<String>, Vec<String>, Vec<String>) {
        let client = containerd_client::Client::from_path(self.ctrd.socket())
            .await
            .expect("connect");
        let ns = self.namespace.as_str();
        let containers = client
            .containers()
            .list(with_namespace!(
                ListContainersRequest { filters: vec![] },
                ns
            ))
            .await
            .expect("list containers")
            .into_inner()
            .containers
            .into_iter()
            .map(|c| c.id)
            .collect();
        let tasks = client
            .tasks()
            .list(with_namespace!(
                ListTasksRequest {
                    filter: String::new()
                },
                ns
            ))
            .await
            .expect("list tasks")
            .into_inner()
            .tasks
            .into_iter()
            .map(|t| t.id)
            .collect();
        let mut stream = client
            .snapshots()
            .list(with_namespace!(
                ListSnapshotsRequest {
                    snapshotter: "overlayfs".into(),
                    filters: vec![]
                },
                ns
            ))
            .await
            .expect("list snapshots")
            .into_inner();
        let mut active = Vec::new();
        while let Some(page) = stream.message().await.expect("snapshot page") {
            // Kind 2 is Active: a container's rootfs (image layers are Committed).
            active.extend(
                page.info
                    .into_iter()
                    .filter(|i| i.kind == 2)
                    .map(|i| i.name),
            );
        }
        (containers, tasks, active)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "==== inputs the test saw ({})\n{:#?}\n{}",
                self.seen.len(),
                self.seen,
                failure_report(&self.ctrd)
            );
        }
    }
}

/// Whether process `pid` catches signal `signo` (its `SigCgt` mask in
/// `/proc`): a shell's `trap` is installed once this holds.
pub fn catches(pid: u32, signo: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (signo - 1)) != 0)
}

/// Waits (up to [`WAIT`]) until process `pid` catches signal `signo`.
pub async fn until_catches(pid: u32, signo: u32) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !catches(pid, signo) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} did not catch signal {signo} within {WAIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn cid(s: &str) -> ContainerId {
    s.parse().expect("valid container id")
}

pub fn busybox(cmd: &[&str]) -> ContainerConfig {
    ContainerConfig {
        image: "busybox".into(),
        cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}
