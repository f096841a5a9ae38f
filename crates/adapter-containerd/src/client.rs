//! The adapter handle: a lazy channel, the namespace header, deadlines, and
//! the dispatch of core calls.

use crate::error::AdapterError;
use containerd_client::services::v1::{
    containers_client::ContainersClient, content_client::ContentClient, diff_client::DiffClient,
    events_client::EventsClient, images_client::ImagesClient, leases_client::LeasesClient,
    snapshots::snapshots_client::SnapshotsClient, tasks_client::TasksClient,
    version_client::VersionClient,
};
use containerd_client::tonic::metadata::AsciiMetadataValue;
use containerd_client::tonic::transport::{Channel, Endpoint};
use containerd_client::tonic::{self, Request};
use holdfast_core::{Call, ConnectionFact, ContainerId, Done, Failure, Input, OpId};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tracing::Instrument as _;

/// Where the adapter's inputs go: the daemon's loop that owns the core.
pub trait InputSink: Clone + Send + Sync + 'static {
    fn send(&self, input: Input);
}

impl InputSink for tokio::sync::mpsc::UnboundedSender<Input> {
    fn send(&self, input: Input) {
        // The loop is gone only when the daemon is shutting down.
        if tokio::sync::mpsc::UnboundedSender::send(self, input).is_err() {
            tracing::debug!("input sink closed; dropping input");
        }
    }
}

/// How to reach containerd and where task output goes.
#[derive(Clone, Debug)]
pub struct AdapterConfig {
    /// containerd's gRPC socket.
    pub socket: PathBuf,
    /// The containerd namespace holdfast keeps its containers in.
    pub namespace: String,
    /// The program containerd's shim starts as the `binary://` logger of each
    /// task (the daemon passes itself; it must call [`crate::logger::run_logger`]).
    pub logger_binary: PathBuf,
    /// Where the logger writes `<container id>.log`.
    pub log_dir: PathBuf,
    /// Where the stdin FIFOs of containers and execs run with `-i` live
    /// (best on a tmpfs: they mean nothing after a reboot).
    pub fifo_dir: PathBuf,
    /// Where a container's snapshot is mounted, as `<container id>`, for a
    /// copy or a volume fill (see [`Adapter::mount_rootfs`]).
    pub rootfs_dir: PathBuf,
    /// Where the network step keeps each bridge container's network
    /// namespace, as `<container id>` (see the daemon's network module).
    pub netns_dir: PathBuf,
    /// Deadline of every ordinary RPC.
    pub call_timeout: Duration,
    /// Deadline of each RPC of an image import (unpacking a big layer takes long).
    pub import_call_timeout: Duration,
    /// The deadline of a create's calls, which run on past `call_timeout`:
    /// every call of a container's create (its lease, snapshot and
    /// container record), which the adapter waits for, and containerd's
    /// own deadline for a task create, which it leaves running (see
    /// `Adapter::rpc_run_on`). Generous, so that a create slowed by load
    /// finishes rather than being cut halfway and failed; still bounded,
    /// so that a wedged one ends. The core's `create_run_on`.
    pub create_run_on: Duration,
    pub snapshotter: String,
    /// The OCI runtime containerd runs tasks with.
    pub runtime: String,
    /// Registries (`host[:port]`) pulled from over plain HTTP, besides
    /// those on loopback (dockerd's `--insecure-registry`).
    pub insecure_registries: Vec<String>,
}

impl AdapterConfig {
    pub fn new(
        socket: impl Into<PathBuf>,
        namespace: impl Into<String>,
        logger_binary: impl Into<PathBuf>,
        log_dir: impl Into<PathBuf>,
    ) -> AdapterConfig {
        let log_dir: PathBuf = log_dir.into();
        AdapterConfig {
            socket: socket.into(),
            namespace: namespace.into(),
            logger_binary: logger_binary.into(),
            fifo_dir: log_dir.join("fifo"),
            rootfs_dir: log_dir.join("rootfs"),
            netns_dir: log_dir.join("netns"),
            log_dir,
            call_timeout: Duration::from_secs(10),
            import_call_timeout: Duration::from_secs(600),
            create_run_on: Duration::from_secs(300),
            snapshotter: "overlayfs".to_owned(),
            runtime: "io.containerd.runc.v2".to_owned(),
            insecure_registries: Vec::new(),
        }
    }
}

tokio::task_local! {
    /// The deadline of every call made in its scope, in place of the
    /// config's `call_timeout` (see [`Adapter::call_timeout`]): set by
    /// [`Adapter::patiently`] for a create, whose calls run on.
    static CALL_DEADLINE: Duration;
}

/// What the adapter last saw of containerd's reachability.
const REACH_UNKNOWN: u8 = 0;
const REACH_OK: u8 = 1;
const REACH_DOWN: u8 = 2;

/// A cheap, cloneable handle. Create it inside a tokio runtime.
#[derive(Clone, Debug)]
pub struct Adapter {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: AdapterConfig,
    channel: Channel,
    namespace: AsciiMetadataValue,
    reach: AtomicU8,
    /// Cancels the current subscription when dropped or replaced.
    pub(crate) subscription: Mutex<Option<oneshot::Sender<()>>>,
    /// Each task's OOM kill count at its create.
    pub(crate) oom: crate::oom::OomCounts,
    /// What image targets resolved to.
    pub(crate) resolved: crate::image::ResolvedTargets,
    /// Admits a few task creates into containerd at a time (see
    /// [`task_creates_at_once`]).
    task_creates: tokio::sync::Semaphore,
}

/// How many `Tasks.Create` holdfast has with containerd at once: twice the
/// cores, at least 4. Each starts a shim and runs runc create, mostly CPU;
/// measured under load (bench/runs-under-load.sh), 200 at once made every
/// one of them slower than its 300 s deadline, and each create cut so was
/// work thrown away (and a bundle left behind), so that few containers
/// started at all. Queued here, a create waits without a deadline running
/// and containerd finishes the ones it has.
fn task_creates_at_once() -> usize {
    std::thread::available_parallelism().map_or(4, |n| (2 * n.get()).max(4))
}

impl Adapter {
    /// Builds the adapter with a lazy channel: nothing is dialled until the
    /// first call, a refused dial fails that call only, and the same channel
    /// reconnects after containerd restarts.
    pub fn new(config: AdapterConfig) -> Result<Adapter, AdapterError> {
        let namespace: AsciiMetadataValue = config.namespace.parse().map_err(|_| {
            AdapterError::Invalid(format!("invalid namespace {:?}", config.namespace))
        })?;
        let socket = config.socket.clone();
        // The URI is required by tonic and ignored: the connector dials the socket.
        let endpoint = Endpoint::from_static("http://[::]:50051")
            .connect_timeout(config.call_timeout)
            .tcp_nodelay(true);
        let channel = endpoint.connect_with_connector_lazy(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }));
        Ok(Adapter {
            inner: Arc::new(Inner {
                config,
                channel,
                namespace,
                reach: AtomicU8::new(REACH_UNKNOWN),
                subscription: Mutex::new(None),
                oom: crate::oom::OomCounts::default(),
                resolved: crate::image::ResolvedTargets::default(),
                task_creates: tokio::sync::Semaphore::new(task_creates_at_once()),
            }),
        })
    }

    pub fn config(&self) -> &AdapterConfig {
        &self.inner.config
    }

    /// Where a container's init process logs (see [`crate::logger`]).
    pub fn log_path(&self, id: &ContainerId) -> PathBuf {
        self.inner.config.log_dir.join(format!("{id}.log"))
    }

    /// The file bound at the container's `/etc/hostname` (dockerd's
    /// `HostnamePath`), written at its create, kept with its log.
    pub fn hostname_path(&self, id: &ContainerId) -> PathBuf {
        self.inner.config.log_dir.join(format!("{id}.hostname"))
    }

    /// The FIFO a container started with `-i` reads its stdin from; write
    /// to it to reach the container (it exists once a task was created).
    pub fn stdin_path(&self, id: &ContainerId) -> PathBuf {
        self.inner.config.fifo_dir.join(format!("{id}.stdin"))
    }

    /// Carries out one call of the core; every input it produces goes to
    /// `sink`, ending with exactly one result for `op` (see the crate docs).
    /// The future is `'static`: spawn it. For `Subscribe` it runs as long as
    /// the stream does.
    pub fn execute<S: InputSink>(
        &self,
        op: OpId,
        call: Call,
        sink: S,
    ) -> impl Future<Output = ()> + Send + 'static {
        let this = self.clone();
        let container_id = call
            .container_id()
            .map(ToString::to_string)
            .unwrap_or_default();
        let span = tracing::info_span!("containerd_call", op_id = %op, container_id = %container_id, call = call_name(&call));
        async move {
            match call {
                Call::Subscribe => this.subscribe(op, sink).await,
                Call::Relist => this.relist(op, sink).await,
                call => {
                    let result = this.ordinary(call).await;
                    let result = this.settle(result, &sink);
                    if let Err(failure) = &result {
                        tracing::debug!(kind = ?failure.kind, message = %failure.message, "call failed");
                    }
                    sink.send(Input::ActionResult(op, result));
                }
            }
        }
        .instrument(span)
    }

    async fn ordinary(&self, call: Call) -> Result<Done, AdapterError> {
        match call {
            // Patient: under load a create's calls can take far longer
            // than the call deadline, and a create cut at it would be
            // failed (and rolled back) where, left to run on, it succeeds.
            // So are a task's create and start, and more than patient:
            // containerd passes the cut on to the shim, which kills the
            // runc it was running. A task create cut so leaves its bundle
            // behind (every retry then refused as "file exists"), a start
            // cut so kills the container's init (exit 1, "cannot start a
            // container that has stopped"): both measured under load.
            Call::CreateContainer { id, config } => self
                .patiently(self.create_container(&id, &config))
                .await
                .map(|()| Done::Ok),
            Call::CreateTask { id } => {
                // Never closed: the adapter holds it for its whole life.
                let _admitted = self
                    .inner
                    .task_creates
                    .acquire()
                    .await
                    .map_err(|e| AdapterError::Invalid(format!("task creates: {e}")))?;
                self.patiently(self.create_task(&id)).await.map(|pid| {
                    self.inner.oom.task_created(&id, pid);
                    Done::TaskCreated { pid }
                })
            }
            Call::StartTask { id } => self
                .patiently(self.start_task(&id))
                .await
                .map(|_pid| Done::Ok),
            Call::Kill { id, signal, all } => self
                .kill(&id, "", signal.number(), all)
                .await
                .map(|()| Done::Ok),
            Call::UpdateResources {
                id,
                config,
                running,
            } => self
                .update_resources(&id, &config, running)
                .await
                .map(|()| Done::Ok),
            Call::Pause { id } => self.pause_task(&id).await.map(|()| Done::Ok),
            Call::Resume { id } => self.resume_task(&id).await.map(|()| Done::Ok),
            Call::DeleteTask { id } => self.delete_task(&id).await.map(|_| {
                self.inner.oom.task_deleted(&id);
                Done::Ok
            }),
            Call::DeleteContainer { id } => self.delete_container(&id).await.map(|()| Done::Ok),
            Call::StartExec {
                id,
                exec_id,
                spec,
                stdin,
            } => {
                let request = crate::ExecRequest {
                    exec_id,
                    args: spec.cmd.clone(),
                    env: spec.env.clone(),
                    working_dir: spec.working_dir.clone(),
                    user: spec.user.clone(),
                    log_file: None,
                    tty: spec.tty,
                    stdin,
                };
                self.exec(&id, &request)
                    .await
                    .map(|pid| Done::ExecStarted { pid })
            }
            Call::ExecState { id, exec_id } => self
                .exec_process(&id, &exec_id)
                .await
                .map(|(pid, exit_code)| Done::Process { pid, exit_code }),
            Call::DeleteExec { id, exec_id } => {
                self.delete_exec(&id, &exec_id).await.map(|_| Done::Ok)
            }
            Call::ReadChanges { id, layer } => self
                .read_changes(&id, std::path::Path::new(&layer))
                .await
                .map(|()| Done::Ok),
            Call::MountRootfs { id } => self.mount_rootfs(&id).await.map(|()| Done::Ok),
            Call::UnmountRootfs { id } => self.unmount_rootfs(&id).map(|()| Done::Ok),
            Call::KillExec {
                id,
                exec_id,
                signal,
            } => self
                .kill_exec(&id, &exec_id, signal.number())
                .await
                .map(|()| Done::Ok),
            Call::ResizePty {
                id,
                exec_id,
                width,
                height,
            } => self
                .resize_terminal(&id, exec_id.as_deref().unwrap_or(""), width, height)
                .await
                .map(|()| Done::Ok),
            // The connection's own calls: see `execute`.
            Call::Subscribe | Call::Relist => {
                Err(AdapterError::Invalid("not an ordinary call".into()))
            }
        }
    }

    /// Turns a call's outcome into the core's result and reports what it
    /// showed about reachability.
    pub(crate) fn settle<T, S: InputSink>(
        &self,
        result: Result<T, AdapterError>,
        sink: &S,
    ) -> Result<T, Failure> {
        match result {
            Ok(v) => {
                self.note_reachable(sink);
                Ok(v)
            }
            Err(e) => {
                if e.is_unreachable() {
                    self.note_unreachable(sink, e.to_string());
                } else if !matches!(e, AdapterError::Deadline { .. }) {
                    // containerd answered, even if with an error.
                    self.note_reachable(sink);
                }
                Err(e.to_failure())
            }
        }
    }

    pub(crate) fn note_reachable<S: InputSink>(&self, sink: &S) {
        if self.inner.reach.swap(REACH_OK, Ordering::AcqRel) != REACH_OK {
            sink.send(Input::Connection(ConnectionFact::Connected));
        }
    }

    pub(crate) fn note_unreachable<S: InputSink>(&self, sink: &S, reason: String) {
        self.inner.reach.store(REACH_DOWN, Ordering::Release);
        tracing::info!(%reason, "containerd unreachable");
        sink.send(Input::Connection(ConnectionFact::Unreachable(reason)));
    }

    /// Asks containerd for its version, reporting what that shows of its
    /// reachability (`Connected` once it answers after being unreachable)
    /// and nothing else: used when something outside the core (the
    /// supervisor) saw containerd start again.
    pub async fn probe_reachable<S: InputSink>(&self, sink: &S) {
        self.probe(sink).await;
    }

    /// Asks containerd for its version: used after a stream broke to learn
    /// whether containerd itself is gone.
    pub(crate) async fn probe<S: InputSink>(&self, sink: &S) {
        let mut client = VersionClient::new(self.inner.channel.clone());
        let result = self
            .rpc("Version.Version", client.version(Request::new(())))
            .await;
        let _ = self.settle(result, sink);
    }

    /// containerd's version and the revision (commit) it was built from.
    pub async fn containerd_version(&self) -> Result<(String, String), AdapterError> {
        let mut client = VersionClient::new(self.inner.channel.clone());
        let answer = self
            .rpc("Version.Version", client.version(Request::new(())))
            .await?;
        Ok((answer.version, answer.revision))
    }

    // ---- plumbing shared by the service modules ----

    /// The deadline of an ordinary call: the config's `call_timeout`, or
    /// a create's run-on within one (`CALL_DEADLINE`).
    pub(crate) fn call_timeout(&self) -> Duration {
        CALL_DEADLINE
            .try_with(|deadline| *deadline)
            .unwrap_or(self.inner.config.call_timeout)
    }

    /// Runs `calls` with the deadline of a create's calls (`create_run_on`)
    /// in place of the ordinary one: for the steps of a create (resolving
    /// its image, making its container), which a loaded containerd can
    /// take long over, and which, cut at the ordinary deadline, would fail
    /// a `docker run` that, left to run on, succeeds (as with dockerd,
    /// which waits without a bound).
    pub async fn patiently<F: Future>(&self, calls: F) -> F::Output {
        CALL_DEADLINE.scope(self.create_run_on(), calls).await
    }

    /// A namespaced request with the call deadline.
    pub(crate) fn req<T>(&self, message: T) -> Request<T> {
        let mut req = self.stream_req(message);
        req.set_timeout(self.call_timeout());
        req
    }

    /// A namespaced request with a deadline of its own (`timeout`), for a
    /// call that may take longer than the call deadline.
    pub(crate) fn req_within<T>(&self, message: T, timeout: Duration) -> Request<T> {
        let mut req = self.stream_req(message);
        req.set_timeout(timeout);
        req
    }

    /// A namespaced request without a deadline: for the event stream, which
    /// must live until containerd or the adapter ends it (a `grpc-timeout`
    /// makes containerd cancel it).
    pub(crate) fn stream_req<T>(&self, message: T) -> Request<T> {
        let mut req = Request::new(message);
        req.metadata_mut()
            .insert("containerd-namespace", self.inner.namespace.clone());
        req
    }

    /// A namespaced request that holds `lease` (resources it creates are kept
    /// from garbage collection until the lease is deleted).
    pub(crate) fn leased<T>(
        &self,
        message: T,
        lease: &str,
        timeout: Duration,
    ) -> Result<Request<T>, AdapterError> {
        let mut req = self.req(message);
        let value: AsciiMetadataValue = lease
            .parse()
            .map_err(|_| AdapterError::Invalid(format!("invalid lease id {lease:?}")))?;
        req.metadata_mut().insert("containerd-lease", value);
        req.set_timeout(timeout);
        Ok(req)
    }

    /// Runs one unary RPC that containerd must be left to finish: past the
    /// call deadline the caller is told that its answer is lost
    /// (`Deadline`, which the core looks into with a relist), while the
    /// call runs on in containerd, never cancelled halfway. (A
    /// `Tasks.Create` cancelled halfway under load can leave its bundle
    /// behind, and containerd then refuses every later create of that
    /// container as existing.) `fut` carries a deadline of its own for
    /// containerd (`req_within`).
    pub(crate) async fn rpc_run_on<T: Send + 'static>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<tonic::Response<T>, tonic::Status>> + Send + 'static,
    ) -> Result<T, AdapterError> {
        // A task of its own: when the wait below ends, dropping its handle
        // leaves the call running.
        let call = tokio::spawn(fut);
        let answer = async move {
            call.await.unwrap_or_else(|e| {
                Err(tonic::Status::internal(format!(
                    "the call's task ended: {e}"
                )))
            })
        };
        self.rpc_within(what, self.call_timeout(), answer).await
    }

    /// Runs one unary RPC under the call deadline.
    pub(crate) async fn rpc<T>(
        &self,
        what: &'static str,
        fut: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, AdapterError> {
        self.rpc_within(what, self.call_timeout(), fut).await
    }

    pub(crate) async fn rpc_within<T>(
        &self,
        what: &'static str,
        timeout: Duration,
        fut: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, AdapterError> {
        match tokio::time::timeout(timeout, fut).await {
            Err(_) => Err(AdapterError::Deadline { what, timeout }),
            Ok(Err(status))
                if status.code() == tonic::Code::DeadlineExceeded
                    || crate::error::is_client_timeout(&status) =>
            {
                Err(AdapterError::Deadline { what, timeout })
            }
            Ok(Err(status)) => Err(AdapterError::rpc(what)(status)),
            Ok(Ok(resp)) => Ok(resp.into_inner()),
        }
    }

    pub(crate) fn create_run_on(&self) -> Duration {
        self.inner.config.create_run_on
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.inner.config.namespace
    }
    pub(crate) fn snapshotter(&self) -> &str {
        &self.inner.config.snapshotter
    }
    pub(crate) fn logger_binary(&self) -> &Path {
        &self.inner.config.logger_binary
    }

    pub(crate) fn containers(&self) -> ContainersClient<Channel> {
        ContainersClient::new(self.inner.channel.clone())
    }
    pub(crate) fn content(&self) -> ContentClient<Channel> {
        ContentClient::new(self.inner.channel.clone())
    }
    pub(crate) fn diff(&self) -> DiffClient<Channel> {
        DiffClient::new(self.inner.channel.clone())
    }
    pub(crate) fn events(&self) -> EventsClient<Channel> {
        EventsClient::new(self.inner.channel.clone())
    }
    pub(crate) fn images(&self) -> ImagesClient<Channel> {
        ImagesClient::new(self.inner.channel.clone())
    }
    pub(crate) fn leases(&self) -> LeasesClient<Channel> {
        LeasesClient::new(self.inner.channel.clone())
    }
    pub(crate) fn snapshots(&self) -> SnapshotsClient<Channel> {
        SnapshotsClient::new(self.inner.channel.clone())
    }
    pub(crate) fn tasks(&self) -> TasksClient<Channel> {
        TasksClient::new(self.inner.channel.clone())
    }
}

/// The name a call goes by in logs and traces.
pub fn call_name(call: &Call) -> &'static str {
    match call {
        Call::Subscribe => "subscribe",
        Call::Relist => "relist",
        Call::CreateContainer { .. } => "create_container",
        Call::CreateTask { .. } => "create_task",
        Call::StartTask { .. } => "start_task",
        Call::Kill { .. } => "kill",
        Call::Pause { .. } => "pause",
        Call::UpdateResources { .. } => "update_resources",
        Call::Resume { .. } => "resume",
        Call::DeleteTask { .. } => "delete_task",
        Call::DeleteContainer { .. } => "delete_container",
        Call::StartExec { .. } => "start_exec",
        Call::ExecState { .. } => "exec_state",
        Call::DeleteExec { .. } => "delete_exec",
        Call::KillExec { .. } => "kill_exec",
        Call::ResizePty { .. } => "resize_pty",
        Call::ReadChanges { .. } => "read_changes",
        Call::MountRootfs { .. } => "mount_rootfs",
        Call::UnmountRootfs { .. } => "unmount_rootfs",
    }
}
