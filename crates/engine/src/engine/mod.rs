//! The engine: the one task that owns the [`Core`] and is the only reader of
//! the clock. API handlers reach it through an [`EngineHandle`]: a command
//! with a oneshot for its answer, or a read run against the core's views
//! inside the loop (so `ps` and `inspect` never read a copy that can drift).
//!
//! The loop feeds one input, then carries out every action in order: a
//! `Persist` is durable before the next action runs, a `Call` is spawned on
//! the adapter, an `Answer` goes to its waiting handler, a `Publish` to
//! `docker events`. Then it sleeps until the next input or the core's next
//! deadline.
//!
//! A record that cannot be written (disk full, read-only) is treated as a
//! crash of the engine, recovered in-process: nothing after the failed write
//! is carried out (so containerd is untouched by it), every waiting request is
//! answered 500, and a fresh core is rebuilt from what is on disk plus a
//! relist, exactly as after a restart of holdfastd.

mod handle;
mod services;

pub use handle::{EngineGone, EngineHandle, PendingAnswer};

use crate::events::{EventLog, EventMessage};
use crate::store::{Store, StoreError};
use handle::Request;
use holdfast_adapter_containerd::Adapter;
use holdfast_core::{
    Action, Answer, ConnectionState, ContainerId, Core, CoreConfig, Done, ErrorKind, Failure,
    FailureKind, Input, Instant, NetworkCall, Now, Record, RelistPart, RequestError, RequestId,
    Stored, UserEvent, UserEventKind, WallTime,
};
use services::Services;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The end-to-end crash tests' pause points: the names of calls (as
/// `call`, `network_call` and `volume_call` log them, comma-separated)
/// that this engine never carries out, so that a test can SIGKILL
/// holdfastd while one is in flight, at a point it chose. Never set
/// outside those tests.
const HOLD_CALLS_ENV: &str = "HOLDFAST_TEST_HOLD_CALLS";

/// How long after a container is removed its logs are deleted.
const LOG_REMOVAL_DELAY: Duration = Duration::from_secs(5);
/// Rotated log files looked for when deleting (the logger keeps at most 5).
const LOG_FILES_MAX: u32 = 16;

/// What holdfast knows about its own truth, for `docker info`.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub engine_started_at: WallTime,
    /// When the core last stopped being connected and relisted; `None` while it is.
    pub unready_since: Option<WallTime>,
    /// When the last complete relist ended.
    pub last_relist_at: Option<WallTime>,
    pub relists: u64,
    /// Exits learned from a relist (their event was lost or never came).
    pub exits_from_relists: u64,
    /// Exits learned from containerd's event stream.
    pub exits_from_events: u64,
    /// Times a record could not be written and the engine restarted from the store.
    pub store_failures: u64,
}

/// What a read sees: the core and the engine's own facts.
#[derive(Debug)]
pub struct View<'a> {
    pub core: &'a Core,
    pub facts: &'a Facts,
}

/// What a container's events say about it besides its id.
#[derive(Clone, Debug)]
struct EventActor {
    name: String,
    image: String,
    labels: Vec<(String, String)>,
}

/// How the engine is built.
#[derive(Debug)]
pub struct EngineParts {
    pub core_config: CoreConfig,
    pub seed: u64,
    pub store: Store,
    pub adapter: Adapter,
    pub network: crate::network::Network,
    pub events: Arc<EventLog>,
    /// The local volumes.
    pub volumes: crate::volumes::Volumes,
    /// The data root: where uploads, saves and layers are staged.
    pub data_root: PathBuf,
}

/// The loop's state. See the module docs.
pub struct Engine {
    core: Core,
    core_config: CoreConfig,
    seed: u64,
    store: Option<Store>,
    store_path: PathBuf,
    adapter: Adapter,
    network: crate::network::Network,
    volumes: Arc<crate::volumes::Volumes>,
    /// See [`HOLD_CALLS_ENV`].
    held_calls: Vec<String>,
    sink: mpsc::UnboundedSender<Input>,
    inputs: mpsc::UnboundedReceiver<Input>,
    requests: mpsc::UnboundedReceiver<Request>,
    replies: HashMap<RequestId, oneshot::Sender<Answer>>,
    events: Arc<EventLog>,
    actors: HashMap<ContainerId, EventActor>,
    facts: Facts,
    clock_origin: std::time::Instant,
    last_store_failure: Option<std::time::Instant>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("connection", &self.core.connection())
            .field("waiting", &self.replies.len())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Loads the records, restores them into a new core and returns the
    /// engine with its handle. Nothing runs until [`Engine::run`].
    pub fn new(parts: EngineParts) -> Result<(Engine, EngineHandle), StoreError> {
        let stored = parts.store.load()?;
        let volumes = Arc::new(parts.volumes);
        let clock_origin = std::time::Instant::now();
        let now = clock(clock_origin);
        let (sink, inputs) = mpsc::unbounded_channel();
        let (tx, requests) = mpsc::unbounded_channel();
        let core = Core::new(parts.core_config.clone(), parts.seed, now);
        let services = Services {
            adapter: parts.adapter.clone(),
            network: parts.network.clone(),
            events: Arc::clone(&parts.events),
            volumes: Arc::clone(&volumes),
            data_root: parts.data_root,
        };
        let mut engine = Engine {
            core,
            core_config: parts.core_config,
            seed: parts.seed,
            store_path: parts.store.path().to_owned(),
            store: Some(parts.store),
            adapter: parts.adapter,
            network: parts.network,
            volumes,
            held_calls: std::env::var(HOLD_CALLS_ENV)
                .map(|v| v.split(',').map(str::to_owned).collect())
                .unwrap_or_default(),
            sink,
            inputs,
            requests,
            replies: HashMap::new(),
            events: parts.events,
            actors: HashMap::new(),
            facts: Facts {
                engine_started_at: now.wall,
                unready_since: Some(now.wall),
                ..Facts::default()
            },
            clock_origin,
            last_store_failure: None,
        };
        engine.restore(stored);
        let handle = EngineHandle::new(tx, services);
        Ok((engine, handle))
    }

    /// The loop. Returns when asked to shut down.
    pub async fn run(mut self) {
        loop {
            let wake = self.core.poll_timeout().map(|(at, _)| {
                tokio::time::Instant::from_std(
                    self.clock_origin + Duration::from_nanos(at.as_nanos()),
                )
            });
            let sleep = async {
                match wake {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                input = self.inputs.recv() => {
                    // The loop holds a sender, so the channel never closes.
                    if let Some(input) = input {
                        tracing::trace!(?input, "input");
                        self.feed(input);
                    }
                }
                request = self.requests.recv() => {
                    match request {
                        None | Some(Request::Shutdown) => break,
                        Some(request) => self.request(request),
                    }
                }
                () = sleep => self.feed(Input::Timeout),
            }
            if self.store.is_none() {
                self.recover_store().await;
            }
        }
        tracing::info!("engine stopped");
    }

    fn request(&mut self, request: Request) {
        match request {
            Request::Command {
                req,
                api,
                command,
                reply,
            } => {
                self.replies.insert(req, reply);
                self.feed(Input::Command(req, api, command));
            }
            Request::ContainerCommand {
                req,
                api,
                reference,
                make,
                accepted,
                reply,
            } => match self.core.resolve(&reference) {
                Err(e) => {
                    let _ = accepted.send(Err(e));
                }
                Ok(id) => {
                    let command = make(id.clone());
                    let _ = accepted.send(Ok(id));
                    self.replies.insert(req, reply);
                    self.feed(Input::Command(req, api, command));
                }
            },
            Request::Cancel(req) => {
                if self.replies.remove(&req).is_some() {
                    self.feed(Input::Cancel(req));
                }
            }
            Request::Read(read) => read(&View {
                core: &self.core,
                facts: &self.facts,
            }),
            Request::ProbeContainerd => {
                let adapter = self.adapter.clone();
                let sink = self.sink.clone();
                tokio::spawn(async move { adapter.probe_reachable(&sink).await });
            }
            Request::Shutdown => {}
        }
    }

    fn feed(&mut self, input: Input) {
        if self.store.is_none() {
            // Recovering from a failed write: the core is about to be rebuilt.
            if let Input::Command(req, ..) = input {
                self.answer(req, store_failed_answer("the store is being reopened"));
            }
            return;
        }
        let relist_end = matches!(input, Input::Relist(_, RelistPart::End));
        let from_event = matches!(input, Input::Event(_));
        let now = clock(self.clock_origin);
        self.core.handle_input(now, input);
        if relist_end {
            self.facts.last_relist_at = Some(now.wall);
            self.facts.relists += 1;
        }
        let mut unpersisted = Vec::new();
        while let Some(action) = self.core.poll_action() {
            match action {
                Action::Call { op, call } => {
                    tracing::debug!(%op, ?call, "call");
                    if self.held(holdfast_adapter_containerd::call_name(&call)) {
                        continue;
                    }
                    tokio::spawn(self.adapter.execute(op, call, self.sink.clone()));
                }
                Action::Network { op, call } => {
                    tracing::debug!(%op, ?call, "network call");
                    self.network_call(op, call);
                }
                Action::Volume { op, call } => {
                    tracing::debug!(%op, ?call, "volume call");
                    self.volume_call(op, call);
                }
                Action::PersistVolume(rec) => {
                    if let Err(e) = self.write(|s| s.put_volume(&rec)) {
                        return self.store_failed(e);
                    }
                }
                Action::UnpersistVolume(name) => {
                    if let Err(e) = self.write(|s| s.delete_volume(&name)) {
                        return self.store_failed(e);
                    }
                }
                Action::PersistNetwork(rec) => {
                    if let Err(e) = self.write(|s| s.put_network(&rec)) {
                        return self.store_failed(e);
                    }
                }
                Action::UnpersistNetwork(name) => {
                    if let Err(e) = self.write(|s| s.delete_network(&name)) {
                        return self.store_failed(e);
                    }
                }
                Action::Persist(rec) => {
                    if let Err(e) = self.write(|s| s.put(&rec)) {
                        return self.store_failed(e);
                    }
                    self.remember(&rec);
                }
                Action::Unpersist(id) => {
                    if let Err(e) = self.write(|s| s.delete(&id)) {
                        return self.store_failed(e);
                    }
                    unpersisted.push(id);
                }
                Action::Answer(req, answer) => self.answer(req, answer),
                Action::RunProbe(probe) => {
                    tokio::spawn(crate::health::run_probe(
                        self.adapter.clone(),
                        Arc::clone(&self.events),
                        self.sink.clone(),
                        probe,
                    ));
                }
                Action::Publish(event) => {
                    if let UserEventKind::Die { .. } = event.kind {
                        if relist_end {
                            self.facts.exits_from_relists += 1;
                        } else if from_event {
                            self.facts.exits_from_events += 1;
                        }
                    }
                    if event.kind == UserEventKind::Destroy {
                        self.remove_logs_soon(&event.container);
                    }
                    self.publish(event);
                }
                Action::PublishResource(event) => {
                    let bridge = self.network.default_network().map(|d| d.id);
                    let message =
                        EventMessage::of_resource(&event, bridge.as_deref().unwrap_or(""));
                    self.events.publish(message);
                }
            }
        }
        for id in unpersisted {
            self.actors.remove(&id);
        }
        let ready = self.core.connection() == ConnectionState::Ready;
        match (ready, self.facts.unready_since) {
            (true, Some(_)) => self.facts.unready_since = None,
            (false, None) => self.facts.unready_since = Some(now.wall),
            _ => {}
        }
    }

    /// The network side runs plugins (processes, iptables): off the loop.
    /// Exactly one result for `op`, whatever happens.
    fn network_call(&self, op: holdfast_core::OpId, call: NetworkCall) {
        let network = self.network.clone();
        // The name peers on a user network know it by, as it is now.
        let name = call
            .container_id()
            .and_then(|id| self.core.container(id))
            .map(|v| v.record.name.clone())
            .unwrap_or_default();
        let what = match &call {
            NetworkCall::Setup { .. } => "network_setup",
            NetworkCall::Teardown { .. } => "network_teardown",
            NetworkCall::EndpointSetup { .. } => "endpoint_setup",
            NetworkCall::EndpointTeardown { .. } => "endpoint_teardown",
            NetworkCall::RefreshNames { .. } => "refresh_names",
            NetworkCall::Define { .. } => "network_define",
            NetworkCall::Undefine { .. } => "network_undefine",
        };
        if self.held(what) {
            return;
        }
        self.spawn_blocking_call(op, what, move || match &call {
            NetworkCall::Setup {
                id,
                config,
                own_interface,
            } => network.setup(id, &name, config, *own_interface),
            NetworkCall::Teardown { id, config } => network.teardown(id, config),
            NetworkCall::EndpointSetup {
                id,
                config,
                endpoint,
            } => network.setup_endpoint(id, &name, config, endpoint),
            NetworkCall::EndpointTeardown {
                id,
                config,
                endpoint,
            } => network.teardown_endpoint(id, config, endpoint),
            NetworkCall::RefreshNames { id, name } => network
                .renamed(id, name)
                .map(|()| Done::Ok)
                .map_err(|m| Failure::new(FailureKind::Other, m)),
            NetworkCall::Define {
                name,
                id,
                subnet,
                gateway,
                labels,
                created_at,
            } => network.define(
                id,
                name,
                subnet.clone(),
                gateway.clone(),
                labels.clone(),
                *created_at,
            ),
            NetworkCall::Undefine { id, bridge, .. } => network.undefine(id, bridge.as_deref()),
        });
    }

    /// A volume's directory is made, filled or removed off the loop; a
    /// fill with its container's snapshot mounted for it (and unmounted
    /// after, whatever happened). Exactly one result for `op`.
    fn volume_call(&self, op: holdfast_core::OpId, call: holdfast_core::VolumeCall) {
        let what = match &call {
            holdfast_core::VolumeCall::Create { .. } => "volume_create",
            holdfast_core::VolumeCall::Fill { .. } => "volume_fill",
            holdfast_core::VolumeCall::Remove { .. } => "volume_remove",
        };
        if self.held(what) {
            return;
        }
        let volumes = Arc::clone(&self.volumes);
        let holdfast_core::VolumeCall::Fill {
            name,
            container,
            path,
        } = call
        else {
            return self.spawn_blocking_call(op, what, move || volumes.carry_out(&call));
        };
        let adapter = self.adapter.clone();
        let sink = self.sink.clone();
        tokio::spawn(async move {
            let filled = match adapter.mount_rootfs(&container).await {
                Ok(()) => {
                    let root = adapter.rootfs_dir(&container);
                    let filled = volumes.fill(&name, &root, &path).await;
                    match adapter.unmount_rootfs(&container) {
                        Ok(()) => filled,
                        Err(e) => filled.and(Err(e.to_failure())),
                    }
                }
                Err(e) => Err(e.to_failure()),
            };
            if let Err(f) = &filled {
                tracing::warn!(%op, volume = %name, kind = ?f.kind, message = %f.message, "volume fill failed");
            }
            let _ = sink.send(Input::ActionResult(op, filled));
        });
    }

    /// Whether the call named `what` is one a crash test holds (see
    /// [`HOLD_CALLS_ENV`]): it is never carried out nor answered.
    fn held(&self, what: &str) -> bool {
        let held = self.held_calls.iter().any(|h| h == what);
        if held {
            tracing::warn!(call = what, "held for a crash test: not carried out");
        }
        held
    }

    /// Runs `work` (blocking: processes, iptables, the filesystem) off the
    /// loop and feeds its result for `op`, exactly once, whatever happens.
    fn spawn_blocking_call(
        &self,
        op: holdfast_core::OpId,
        what: &'static str,
        work: impl FnOnce() -> Result<Done, Failure> + Send + 'static,
    ) {
        let sink = self.sink.clone();
        tokio::spawn(async move {
            let began = std::time::Instant::now();
            let result = tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
                Err(Failure::new(
                    FailureKind::Other,
                    format!("the {what} call panicked: {e}"),
                ))
            });
            if let Err(f) = &result {
                tracing::warn!(%op, call = what, kind = ?f.kind, message = %f.message, "call failed");
            }
            tracing::debug!(
                %op,
                call = what,
                elapsed_us = began.elapsed().as_micros() as u64,
                "call done"
            );
            let _ = sink.send(Input::ActionResult(op, result));
        });
    }

    fn write(
        &mut self,
        op: impl FnOnce(&Store) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        match &self.store {
            Some(store) => op(store),
            None => Ok(()),
        }
    }

    fn answer(&mut self, req: RequestId, answer: Answer) {
        match self.replies.remove(&req) {
            // The handler may have gone (client hung up): nobody to tell.
            Some(reply) => {
                let _ = reply.send(answer);
            }
            None => tracing::debug!(%req, ?answer, "answer for a request nobody waits on"),
        }
    }

    fn remember(&mut self, rec: &Record) {
        if let Some(actor) = self.actors.get_mut(&rec.id) {
            // The one thing of an actor that changes: a rename.
            if actor.name != rec.name {
                actor.name.clone_from(&rec.name);
            }
            return;
        }
        self.actors.insert(
            rec.id.clone(),
            EventActor {
                name: rec.name.clone(),
                image: rec.config.image.clone(),
                labels: rec
                    .config
                    .labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            },
        );
    }

    fn publish(&mut self, event: UserEvent) {
        let Some(actor) = self.actors.get(&event.container) else {
            tracing::debug!(container = %event.container, "event for an unknown container");
            return;
        };
        let mut attributes: Vec<(String, String)> = actor.labels.clone();
        attributes.push(("image".to_owned(), actor.image.clone()));
        attributes.push(("name".to_owned(), actor.name.clone()));
        let action = match &event.kind {
            UserEventKind::Create => "create".to_owned(),
            UserEventKind::Start => "start".to_owned(),
            UserEventKind::Kill { signal } => {
                attributes.push(("signal".to_owned(), signal.number().to_string()));
                "kill".to_owned()
            }
            UserEventKind::Oom => "oom".to_owned(),
            UserEventKind::Die { exit_code } => {
                attributes.push(("exitCode".to_owned(), exit_code.to_string()));
                "die".to_owned()
            }
            UserEventKind::Stop => "stop".to_owned(),
            UserEventKind::Restart => "restart".to_owned(),
            UserEventKind::Destroy => "destroy".to_owned(),
            UserEventKind::Rename { old_name } => {
                attributes.push(("oldName".to_owned(), format!("/{old_name}")));
                "rename".to_owned()
            }
            UserEventKind::Update => "update".to_owned(),
            UserEventKind::Pause => "pause".to_owned(),
            UserEventKind::Unpause => "unpause".to_owned(),
            UserEventKind::ExecDie { exec_id, exit_code } => {
                attributes.push(("execID".to_owned(), exec_id.clone()));
                attributes.push(("exitCode".to_owned(), exit_code.to_string()));
                "exec_die".to_owned()
            }
            UserEventKind::HealthStatus(status) => format!("health_status: {}", status.as_str()),
        };
        self.events.publish(EventMessage {
            kind: "container",
            action,
            actor_id: event.container.to_string(),
            from: Some(actor.image.clone()),
            attributes: attributes.into_iter().collect(),
            time_nanos: event.at.as_unix_nanos(),
        });
    }

    /// A removed container's logs go too, as with dockerd; a few seconds
    /// later, so that a reader still draining them (`docker run --rm`'s
    /// attach) gets every line first.
    fn remove_logs_soon(&self, id: &ContainerId) {
        let log = self.adapter.log_path(id);
        tokio::spawn(async move {
            tokio::time::sleep(LOG_REMOVAL_DELAY).await;
            let mut paths = vec![log.clone()];
            paths.extend(
                (1..=LOG_FILES_MAX)
                    .map(|n| holdfast_adapter_containerd::logger::rotated_path(&log, n)),
            );
            for path in paths {
                match tokio::fs::remove_file(&path).await {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => tracing::warn!(path = %path.display(), error = %e, "log not removed"),
                }
            }
        });
    }

    /// A write failed: stop carrying out this input's actions, answer every
    /// waiting request, and rebuild from the store (see the module docs).
    fn store_failed(&mut self, e: StoreError) {
        tracing::error!(error = %e, "a record could not be written; restarting the engine from the store");
        self.facts.store_failures += 1;
        let message = format!("the store could not be written ({e})");
        let waiting: Vec<RequestId> = self.replies.keys().copied().collect();
        for req in waiting {
            self.answer(req, store_failed_answer(&message));
        }
        // Drop the store and every queued action; results of calls already
        // spawned go to a channel nobody reads any more.
        self.store = None;
        while self.core.poll_action().is_some() {}
    }

    /// Reopens the store and rebuilds the core from it, retrying (at most
    /// once a second) until the store can be read and written again.
    async fn recover_store(&mut self) {
        if let Some(at) = self.last_store_failure
            && at.elapsed() < Duration::from_secs(1)
        {
            tokio::time::sleep(Duration::from_secs(1).saturating_sub(at.elapsed())).await;
        }
        self.last_store_failure = Some(std::time::Instant::now());
        let store = match Store::open(&self.store_path) {
            Ok(store) => store,
            Err(e) => {
                tracing::error!(error = %e, "the store cannot be reopened; retrying");
                return;
            }
        };
        let stored = match store.load() {
            Ok(stored) => stored,
            Err(e) => {
                tracing::error!(error = %e, "the store cannot be read; retrying");
                return;
            }
        };
        let now = clock(self.clock_origin);
        let (sink, inputs) = mpsc::unbounded_channel();
        self.sink = sink;
        self.inputs = inputs;
        self.seed = self.seed.wrapping_add(1);
        self.core = Core::new(self.core_config.clone(), self.seed, now);
        self.store = Some(store);
        self.facts.unready_since = Some(now.wall);
        tracing::info!("engine rebuilt from the store");
        self.restore(stored);
    }

    /// Gives a new core what the store holds, then what the executors find
    /// on the host (the volume and network sides' relists): the core
    /// adopts, finishes or releases whatever no record explains.
    fn restore(&mut self, stored: Stored) {
        tracing::info!(
            containers = stored.containers.len(),
            volumes = stored.volumes.len(),
            networks = stored.networks.len(),
            "restoring records"
        );
        for rec in &stored.containers {
            self.remember(rec);
        }
        self.feed(Input::Restore(stored));
        self.feed(Input::VolumesFound(self.volumes.found()));
        self.feed(Input::NetworksFound(self.network.found_definitions()));
        let attachments = self
            .network
            .found()
            .into_iter()
            .map(|id| {
                let slots = self.network.found_endpoints(&id);
                (id, slots)
            })
            .collect();
        self.feed(Input::AttachmentsFound(attachments));
    }
}

fn store_failed_answer(message: &str) -> Answer {
    Answer::Error(RequestError::new(
        ErrorKind::Internal,
        format!("{message}: nothing more was done; try again"),
    ))
}

/// Both clocks, read once: the only clock reads of holdfastd's decisions.
fn clock(origin: std::time::Instant) -> Now {
    let mono = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
    Now::new(Instant::from_nanos(mono), wall_now())
}

/// The wall clock as the core and the API show it.
pub fn wall_now() -> WallTime {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    WallTime::from_unix_nanos(nanos)
}
