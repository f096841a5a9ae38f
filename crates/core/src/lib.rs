//! # holdfast-core
//!
//! The pure, deterministic heart of holdfast: a state machine that keeps a
//! truthful record of containers run by containerd, whatever happens to the
//! connection, the event stream or the daemon itself.
//!
//! It does no I/O and reads no clock: every input carries [`Now`], every effect
//! leaves as an [`Action`]. Same inputs, same actions, bit for bit.
//!
//! ## Using it
//! Construct with [`Core::new`], feed one [`Input`] with [`Core::handle_input`],
//! then drain [`Core::poll_action`] until it returns `None`, and sleep until
//! [`Core::poll_timeout`] (or the next input), when you feed [`Input::Timeout`].
//!
//! ```
//! use holdfast_core::{Action, Core, CoreConfig, Input, Now, Instant, WallTime};
//!
//! let now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(1_700_000_000_000_000_000));
//! let mut core = Core::new(CoreConfig::default(), 7, now);
//! core.handle_input(now, Input::Restore(Default::default()));
//! // The daemon's loop: feed the timeout when it is due...
//! let (deadline, _reason) = core.poll_timeout().expect("the first connect is due");
//! let now = Now::new(deadline, now.wall);
//! core.handle_input(now, Input::Timeout);
//! // ...and carry out every action, in order.
//! while let Some(action) = core.poll_action() {
//!     match action {
//!         Action::Call { op, call } => { /* spawn the RPC; feed its result with `op` */ }
//!         Action::Network { op, call } => { /* run the CNI plugins; likewise */ }
//!         Action::Volume { op, call } => { /* make or remove its directory; likewise */ }
//!         Action::Persist(_) | Action::Unpersist(_) => { /* write before going on */ }
//!         Action::PersistVolume(_) | Action::UnpersistVolume(_) => { /* likewise */ }
//!         Action::PersistNetwork(_) | Action::UnpersistNetwork(_) => { /* likewise */ }
//!         Action::Answer(_, _) | Action::Publish(_) | Action::PublishResource(_) => {}
//!         Action::RunProbe(_) => { /* run it as an exec; feed its result */ }
//!     }
//! }
//! ```
//!
//! ## The guarantee, as this crate keeps it
//! - Only evidence records an exit: a `TaskExit` of the init process with the
//!   current pid, or a complete relist showing the task stopped or gone.
//! - Connection facts and failed calls never lead to a kill, a delete, a
//!   restart or an exit: kills come only from user intents and stop deadlines,
//!   deletes only after a recorded exit or a user's remove, restarts only after
//!   a recorded exit.
//! - The first recorded exit of a run is final.
//! - Every (re)connect subscribes, waits for the stream to be live, relists and
//!   only then acts again.
//! - User intents are persisted in the record and carried out once containerd
//!   is back; every request is answered exactly once, within a bound.
//!
//! Methods are grouped as: construction, `handle_input`, `poll_*`, getters.

/// Whether a deliberate bug is on; constant false without the feature.
macro_rules! bug {
    ($config:expr, $bug:ident) => {{
        #[cfg(feature = "deliberate-bugs")]
        let on = $config.has_bug($crate::config::DeliberateBug::$bug);
        #[cfg(not(feature = "deliberate-bugs"))]
        let on = false;
        on
    }};
}

pub mod action;
pub mod config;
pub mod ids;
pub mod input;
pub mod record;
pub mod signal;
pub mod time;

mod commands;
mod connection;
mod container;
mod events;
pub mod exec;
pub mod health;
pub mod networks;
mod reconcile;
mod relist;
mod rng;
mod snapshot;
mod timers;
pub mod volume;

pub use action::{
    Action, Answer, Call, ErrorKind, NetworkCall, RequestError, ResourceEvent, ResourceEventKind,
    UserEvent, UserEventKind,
};
pub use commands::NAME_TAKEN;
pub use config::{
    AsGiven, BindMount, CgroupnsMode, ContainerConfig, CoreConfig, DeviceCgroupRule, DeviceMapping,
    LogDriver, MountSpec, NamespaceMode, Namespaces, NetworkMode, PodMember, PodRole, PortBinding,
    Privileges, ResourceUpdate, Resources, RestartPolicy, Security, SharedNetwork, SpecExtras,
    Ulimit,
};
pub use connection::ConnectionState;
pub use container::{ContainerView, Status, TaskState};
pub use exec::{ExecRecord, ExecSpec, ExecState};
pub use health::{
    Health, HealthConfig, HealthRecord, HealthStatus, Probe, ProbeLog, ProbeOutcome, ProbeResult,
};
pub use ids::{ContainerId, OpId, RequestId};
pub use input::{
    Api, Command, ConnectionFact, ContainerdEvent, Done, Failure, FailureKind, Input, RelistPart,
    Stored, TaskInfo, TaskStatus, WaitCondition,
};
pub use networks::{Definition, FoundNetwork, NetworkRecord};
pub use record::{
    Allocation, Endpoint, ExitRecord, Intents, NetworkState, Presence, Record, StopIntent,
};
pub use signal::Signal;
pub use time::{Instant, Now, WallTime};
pub use timers::TimerKind;
pub use volume::{FoundVolume, ResourceState, VolumeCall, VolumeRecord};

#[cfg(feature = "deliberate-bugs")]
pub use config::DeliberateBug;

use connection::Connection;
use container::{Container, Pending};
use rng::Rng;
use std::collections::{HashMap, VecDeque};
use timers::Timers;

/// Maps with a fixed, documented hash function (FxHash): lookups stay fast,
/// and iteration order depends only on the inputs, never on process
/// randomness or the toolchain, so a simulator seed replays anywhere.
pub(crate) type Map<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// The state machine. See the crate documentation for the loop that drives it.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    rng: Rng,
    out: Outbox,
    containers: Map<ContainerId, Container>,
    /// Names of visible containers (a discarded create frees its name at once).
    names: Map<String, ContainerId>,
    /// Whether the core was ever ready since it began.
    ever_ready: bool,
    /// Creates asked before the first connection, waiting for it.
    held_creates: Vec<(
        RequestId,
        ContainerId,
        String,
        std::sync::Arc<ContainerConfig>,
    )>,
    /// Which container each exec id belongs to.
    exec_owner: Map<String, ContainerId>,
    volumes: Map<String, volume::Volume>,
    networks: Map<String, networks::Network>,
    conn: Connection,
    health: health::Monitors,
}

/// Who is waiting for the result of an op.
#[derive(Clone, Debug, PartialEq, Eq)]
enum OpOwner {
    Connection,
    Container(ContainerId),
    /// A call whose result is the answer to a request, and nothing else
    /// (a resize): it changes nothing the core records.
    Request(RequestId),
    Volume(String),
    Network(String),
}

/// Everything the core emits, plus the bookkeeping that goes with emitting:
/// op ids, timers and who owns each request. Kept apart from the containers
/// so a handler can hold a container and emit at the same time.
#[derive(Debug, Default)]
struct Outbox {
    now: Now,
    actions: VecDeque<Action>,
    last_op: u64,
    ops: Map<OpId, OpOwner>,
    timers: Timers,
    request_owner: Map<RequestId, ContainerId>,
    /// Starts still wanted at their answer bound: answered by their
    /// outcome, or when a stop or a removal takes the start back.
    starts_past_bound: std::collections::BTreeSet<RequestId>,
    /// Creates whose calls were under way at their answer bound: given
    /// until `create_run_on` more (see `answer_bound_due`).
    creates_past_bound: std::collections::BTreeSet<RequestId>,
    /// Requests waiting on a volume being made or removed.
    request_volume: Map<RequestId, String>,
    /// Requests waiting on a user network being defined or removed.
    request_network: Map<RequestId, String>,
    /// Prunes waiting for their volumes or networks to be gone.
    prunes: std::collections::BTreeMap<RequestId, volume::Prune>,
    /// The last request the core made itself ([`RequestId::is_internal`]).
    last_internal: u64,
}

impl Outbox {
    fn call(&mut self, owner: OpOwner, call: Call) -> OpId {
        let op = self.next_op(owner);
        self.actions.push_back(Action::Call { op, call });
        op
    }

    fn volume_call(&mut self, owner: OpOwner, call: VolumeCall) -> OpId {
        let op = self.next_op(owner);
        self.actions.push_back(Action::Volume { op, call });
        op
    }

    fn persist_volume(&mut self, rec: &VolumeRecord) {
        self.actions.push_back(Action::PersistVolume(rec.clone()));
    }

    fn unpersist_volume(&mut self, name: &str) {
        self.actions
            .push_back(Action::UnpersistVolume(name.to_owned()));
    }

    fn persist_network(&mut self, rec: &NetworkRecord) {
        self.actions.push_back(Action::PersistNetwork(rec.clone()));
    }

    fn unpersist_network(&mut self, name: &str) {
        self.actions
            .push_back(Action::UnpersistNetwork(name.to_owned()));
    }

    fn network_call(&mut self, owner: OpOwner, call: NetworkCall) -> OpId {
        let op = self.next_op(owner);
        self.actions.push_back(Action::Network { op, call });
        op
    }

    fn next_op(&mut self, owner: OpOwner) -> OpId {
        self.last_op += 1;
        let op = OpId(self.last_op);
        self.ops.insert(op, owner);
        op
    }

    fn persist(&mut self, rec: &Record) {
        self.actions.push_back(Action::Persist(rec.clone()));
    }

    fn publish(&mut self, container: &ContainerId, kind: UserEventKind) {
        let event = UserEvent {
            container: container.clone(),
            kind,
            at: self.now.wall,
        };
        self.actions.push_back(Action::Publish(event));
    }

    fn publish_resource(&mut self, kind: ResourceEventKind) {
        let event = ResourceEvent {
            kind,
            at: self.now.wall,
        };
        self.actions.push_back(Action::PublishResource(event));
    }

    /// Answers a request that was never registered as pending.
    fn answer_now(&mut self, req: RequestId, answer: Answer) {
        if !req.is_internal() {
            self.actions.push_back(Action::Answer(req, answer));
        }
    }

    /// A request of the core's own, answered to nobody.
    fn internal_request(&mut self) -> RequestId {
        self.last_internal += 1;
        RequestId(RequestId::FIRST_INTERNAL + self.last_internal)
    }

    /// Answers a pending request and forgets it.
    fn answer_pending(&mut self, req: RequestId, answer: Answer) {
        self.timers.cancel(&TimerKind::AnswerBound(req));
        self.request_owner.remove(&req);
        self.starts_past_bound.remove(&req);
        self.creates_past_bound.remove(&req);
        if !req.is_internal() {
            self.actions.push_back(Action::Answer(req, answer));
        }
    }
}

fn error(kind: ErrorKind, message: impl Into<String>) -> Answer {
    Answer::Error(RequestError::new(kind, message))
}

impl Core {
    /// A core with no containers, not connected; the first connect attempt is
    /// due at once. Feed [`Input::Restore`] first when records exist on disk.
    pub fn new(config: CoreConfig, seed: u64, now: Now) -> Core {
        let mut core = Core {
            config,
            rng: Rng::new(seed),
            out: Outbox {
                now,
                ..Outbox::default()
            },
            containers: Map::default(),
            names: Map::default(),
            exec_owner: Map::default(),
            ever_ready: false,
            held_creates: Vec::new(),
            volumes: Map::default(),
            networks: Map::default(),
            conn: Connection::default(),
            health: health::Monitors::default(),
        };
        core.out.timers.set(TimerKind::Reconnect, now.at);
        core
    }

    /// Feeds one input. `now.at` never goes back: an earlier value is taken as
    /// the latest one seen.
    pub fn handle_input(&mut self, now: Now, input: Input) {
        let at = now.at.max(self.out.now.at);
        self.out.now = Now::new(at, now.wall);
        match input {
            Input::Restore(stored) => {
                self.restore_volumes(stored.volumes);
                self.restore_networks(stored.networks);
                self.restore(stored.containers);
                self.keep_volumes_of_created();
                self.reconcile_volumes();
                self.reconcile_networks();
            }
            Input::VolumesFound(found) => self.volumes_found(found),
            Input::NetworksFound(found) => self.networks_found(found),
            Input::AttachmentsFound(found) => self.attachments_found(found),
            Input::Command(req, api, command) => self.command(req, api, command),
            Input::Event(event) => self.event(event),
            Input::Connection(fact) => self.connection_fact(fact),
            Input::Relist(op, part) => self.relist_part(op, part),
            Input::ActionResult(op, result) => self.action_result(op, result),
            Input::Timeout => self.timeout(),
            Input::Cancel(req) => self.cancel(req),
            Input::ProbeResult(result) => {
                let ready = self.conn.is_ready();
                self.health
                    .result(result, ready, &mut self.containers, &mut self.out);
            }
        }
        self.health.sync(&self.containers, &mut self.out);
    }

    /// The next action to carry out, in order; `None` when drained.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.out.actions.pop_front()
    }

    /// Drains every pending action (for tests and simulators).
    pub fn drain_actions(&mut self) -> Vec<Action> {
        self.out.actions.drain(..).collect()
    }

    /// Every armed timer, earliest first (for tests and simulators: a
    /// health check's probe timer is armed for as long as its run is up).
    pub fn timers(&self) -> impl Iterator<Item = (Instant, &TimerKind)> {
        self.out.timers.iter().map(|(at, kind)| (*at, kind))
    }

    /// When to feed [`Input::Timeout`] next, and why.
    pub fn poll_timeout(&self) -> Option<(Instant, TimerKind)> {
        self.out.timers.next().cloned()
    }

    /// One container by id.
    pub fn container(&self, id: &ContainerId) -> Option<ContainerView<'_>> {
        self.containers
            .get(id)
            .filter(|c| c.visible())
            .map(ContainerView::of)
    }

    /// Every visible container, in no particular (but deterministic) order.
    pub fn containers(&self) -> impl Iterator<Item = ContainerView<'_>> {
        self.containers
            .values()
            .filter(|c| c.visible())
            .map(ContainerView::of)
    }

    /// Resolves what a user typed: a full id, a name (with or without the
    /// leading `/`), or a unique id prefix, in that order (as dockerd does).
    pub fn resolve(&self, reference: &str) -> Result<ContainerId, RequestError> {
        let not_found = || {
            RequestError::new(
                ErrorKind::NotFound,
                format!("No such container: {reference}"),
            )
        };
        if reference.is_empty() {
            return Err(not_found());
        }
        if let Ok(id) = reference.parse::<ContainerId>()
            && self.containers.get(&id).is_some_and(Container::visible)
        {
            return Ok(id);
        }
        if let Some(id) = self
            .names
            .get(reference.strip_prefix('/').unwrap_or(reference))
        {
            return Ok(id.clone());
        }
        let mut matches = self
            .containers
            .values()
            .filter(|c| c.visible() && c.rec.id.as_str().starts_with(reference));
        match (matches.next(), matches.next()) {
            (Some(c), None) => Ok(c.rec.id.clone()),
            (Some(_), Some(_)) => Err(RequestError::new(
                ErrorKind::NotFound,
                format!("multiple IDs found with provided prefix: {reference}"),
            )),
            (None, _) => Err(not_found()),
        }
    }

    /// An exec (`docker exec inspect`), with its container.
    pub fn exec(&self, exec_id: &str) -> Option<(ContainerView<'_>, &ExecRecord)> {
        let (id, serial) = self.exec_by_id(exec_id)?;
        let c = self.containers.get(&id)?;
        let e = c.rec.execs.iter().find(|e| e.serial == serial)?;
        Some((ContainerView::of(c), e))
    }

    /// The health of a container's current or last run, if it has a
    /// health check and has run since this core began, or its record kept
    /// the health of its current run.
    pub fn health(&self, id: &ContainerId) -> Option<&Health> {
        self.health.get(id)
    }

    /// The connection as the core sees it.
    pub fn connection(&self) -> ConnectionState {
        self.conn.state()
    }

    /// Calls issued and not yet answered (for simulators' invariants).
    pub fn calls_in_flight(&self) -> usize {
        self.out.ops.len()
    }

    /// Creates being rolled back, not shown and not yet gone from
    /// containerd (for simulators' invariants).
    pub fn rollbacks_pending(&self) -> usize {
        self.containers.values().filter(|c| !c.visible()).count()
    }

    /// Requests accepted and not yet answered (for simulators' invariants).
    pub fn requests_pending(&self) -> usize {
        // The core's own requests (a pod's stop of its containers) are
        // nobody's to wait on.
        self.out
            .request_owner
            .keys()
            .filter(|r| !r.is_internal())
            .count()
            + self.held_creates.len()
            + self.out.request_volume.len()
            + self.out.request_network.len()
            + self.out.prunes.len()
            // A resize waits for its one call.
            + self
                .out
                .ops
                .values()
                .filter(|o| matches!(o, OpOwner::Request(_)))
                .count()
    }

    fn timeout(&mut self) {
        while let Some(kind) = self.out.timers.pop_due(self.out.now.at) {
            match kind {
                TimerKind::Reconnect => self.reconnect_due(),
                TimerKind::PeriodicRelist => self.periodic_relist_due(),
                TimerKind::StopDeadline(id) => self.reconcile(&id),
                TimerKind::Retry(id) => {
                    if let Some(c) = self.containers.get_mut(&id) {
                        c.retry_waiting = false;
                    }
                    self.reconcile(&id);
                }
                TimerKind::RestartBackoff(id) => self.restart_due(&id),
                TimerKind::RollbackDue(id) => self.reconcile(&id),
                TimerKind::AnswerBound(req) => self.answer_bound_due(req),
                TimerKind::VolumeRetry(name) => self.volume_retry_due(&name),
                TimerKind::NetworkRetry(name) => self.network_retry_due(&name),
                TimerKind::Probe(id) => {
                    let ready = self.conn.is_ready();
                    self.health
                        .probe_due(&id, ready, &mut self.containers, &mut self.out);
                }
            }
        }
    }

    /// A request's bound passed before what it asked for was done: answer it
    /// with an error that says the intent is kept. Not a start (or a
    /// restart) still wanted: its client is kept waiting for its outcome, however long a
    /// loaded or absent containerd takes, as dockerd keeps a start's
    /// request open until the start is done. An error would be a lie the
    /// client acts on (`docker run` reports a failed run, a script makes the
    /// container again) while the start is carried out later; so a start
    /// is answered an error only where it will not run (a stop or a
    /// removal took it back, or it failed).
    fn answer_bound_due(&mut self, req: RequestId) {
        if let Some(pos) = self.held_creates.iter().position(|(r, ..)| *r == req) {
            self.held_creates.remove(pos);
            let message = "containerd is unreachable: the container was not created; try again";
            return self
                .out
                .answer_now(req, error(ErrorKind::Unavailable, message));
        }
        let Some(id) = self.out.request_owner.get(&req).cloned() else {
            return;
        };
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        let Some(pos) = c.requests.iter().position(|(r, _)| *r == req) else {
            return;
        };
        let a_start = matches!(c.requests[pos].1, Pending::Start | Pending::Restart { .. });
        if a_start && c.rec.intents.start {
            // Looked at again at each bound: what takes the start back
            // answers it at once (`recheck_starts_past_bound`); this is
            // the backstop.
            self.out.starts_past_bound.insert(req);
            let at = self.out.now.at + self.config.request_answer_bound;
            self.out.timers.set(TimerKind::AnswerBound(req), at);
            return;
        }
        let pending = c.requests[pos].1;
        // An exec start not begun is not begun later: nobody would read
        // what it says. Its exec stays as made, to be started again.
        let exec_not_begun = matches!(pending, Pending::ExecStart(serial)
            if c.rec.execs.iter().any(|e| e.serial == serial && e.state == ExecState::Created));
        match pending {
            // A create whose call containerd is still carrying out (slowed
            // by load, it runs on: the adapter's `create_run_on`) is given
            // that long again, once: told it failed now, it would be
            // rolled back where it was about to succeed.
            Pending::Create
                if c.create_under_way()
                    && self.conn.is_ready()
                    && self.out.creates_past_bound.insert(req) =>
            {
                let at = self.out.now.at + self.config.create_run_on;
                return self.out.timers.set(TimerKind::AnswerBound(req), at);
            }
            Pending::Commit(serial) if c.commit_under_way(serial) => {
                let at = self.out.now.at + self.config.request_answer_bound;
                return self.out.timers.set(TimerKind::AnswerBound(req), at);
            }
            // Not begun: it never will be (nobody waits for its layer).
            Pending::Commit(serial) => c.commits.retain(|w| w.serial != serial),
            // The copy that waited is told it failed: its hold goes.
            Pending::Mount => c.rootfs_leases = c.rootfs_leases.saturating_sub(1),
            _ => {}
        }
        c.requests.remove(pos);
        if pending == Pending::Create {
            // The user is told it failed, so it must not appear later.
            self.discard(&id);
        }
        let why = if self.conn.is_ready() {
            "it has not completed yet"
        } else {
            "containerd is unreachable"
        };
        let message = match pending {
            Pending::Create => {
                format!("create of {id} did not complete ({why}): it is rolled back")
            }
            Pending::Commit(_) => {
                format!("commit of {id} did not begin ({why}): nothing was committed; try again")
            }
            Pending::Mount => {
                format!("the files of container {id} could not be reached ({why}); try again")
            }
            Pending::ExecStart(_) if exec_not_begun => {
                format!("the exec in {id} did not start ({why}): it was not started; try again")
            }
            _ => format!(
                "{why}: the request for container {id} is recorded and will be carried out when possible"
            ),
        };
        let kind = if self.conn.is_ready() {
            ErrorKind::Internal
        } else {
            ErrorKind::Unavailable
        };
        self.out.answer_pending(req, error(kind, message));
        if matches!(
            pending,
            Pending::Create | Pending::Commit(_) | Pending::Mount
        ) {
            // A freeze or a mount nobody waits for is not made (or
            // undone); a create rolled back is rolled back now, also one
            // with nothing in flight (waiting for its volumes to be made:
            // found by the properties).
            self.reconcile(&id);
        }
    }

    /// How long to wait before trying a failed call again, after
    /// `attempts` failed tries of it: doubling from `retry_initial`,
    /// capped at `retry_max`.
    pub(crate) fn backoff(&self, attempts: u32) -> std::time::Duration {
        self.config
            .retry_initial
            .saturating_mul(1u32 << attempts.min(20))
            .min(self.config.retry_max)
    }

    /// A start of `id` that waited past its bound may no longer be wanted
    /// (a stop took it back): nothing is left to wait for, so it is
    /// answered now, as it would have been at its bound.
    pub(crate) fn recheck_starts_past_bound(&mut self, id: &ContainerId) {
        if self.containers.get(id).is_some_and(|c| c.rec.intents.start) {
            return;
        }
        let owner = &self.out.request_owner;
        let waiting: Vec<RequestId> = self
            .out
            .starts_past_bound
            .iter()
            .filter(|r| owner.get(r) == Some(id))
            .copied()
            .collect();
        for req in waiting {
            self.answer_bound_due(req);
        }
    }
}
