//! Everything the core wants done leaves as an [`Action`].

use crate::config::ContainerConfig;
use crate::ids::{ContainerId, OpId, RequestId};
use crate::record::{Endpoint, Record};
use crate::signal::Signal;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Actions are drained with [`crate::Core::poll_action`] and carried out in
/// order. Persisting comes before the containerd call that depends on it, so
/// a crash between the two leaves a record that explains what may exist.
// `Persist` carries the whole record, as the store writes it: boxing it
// would add an allocation to every persist, for a queue that holds a
// handful of actions at a time.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Action {
    /// Call containerd. The result comes back as `Input::ActionResult(op, ..)`
    /// (or, for `Subscribe` and `Relist`, as connection facts and relist parts).
    /// Every call must get exactly one result, whatever happens to the connection.
    Call { op: OpId, call: Call },
    /// Set up or release part of a container's network on the host. The
    /// result comes back as `Input::ActionResult(op, ..)`, exactly once, as
    /// for a containerd call.
    Network { op: OpId, call: NetworkCall },
    /// Make, fill or remove a volume's directory. The result comes back as
    /// `Input::ActionResult(op, ..)`, exactly once.
    Volume {
        op: OpId,
        call: crate::volume::VolumeCall,
    },
    /// Write the container's record to disk, replacing the previous one, before
    /// carrying out any later action. Without it a daemon restart would forget
    /// a container or an intent the user was promised.
    Persist(Record),
    /// Delete the container's record: containerd no longer has anything of it.
    Unpersist(ContainerId),
    /// Write a volume's record, as `Persist` a container's: before its
    /// directory is made or removed.
    PersistVolume(crate::volume::VolumeRecord),
    /// Delete a volume's record: its directory is gone.
    UnpersistVolume(String),
    /// Write a user network's record, as `Persist` a container's: before
    /// it is defined or removed.
    PersistNetwork(crate::networks::NetworkRecord),
    /// Delete a user network's record: it is removed.
    UnpersistNetwork(String),
    /// Answer a user request. Each request is answered exactly once.
    Answer(RequestId, Answer),
    /// Tell `docker events` subscribers.
    Publish(UserEvent),
    /// Tell `docker events` subscribers of a volume's or a network's life.
    PublishResource(ResourceEvent),
    /// Run a health probe in the container; its result comes back as
    /// `Input::ProbeResult`, exactly once. Without it the health status
    /// the user asked for would never be known.
    RunProbe(crate::health::Probe),
}

/// Calls into containerd, one per action.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Call {
    /// Open the event subscription for the namespace; report
    /// `ConnectionFact::StreamLive(op)` once events flow, or a failure result.
    /// Without a live stream exits would be missed.
    Subscribe,
    /// List every task in the namespace; deliver `Input::Relist(op, ..)`.
    /// Events are not replayed after a reconnect: only a relist recovers them.
    Relist,
    /// Resolve the image, prepare the rootfs snapshot and create the
    /// containerd container. On failure the adapter undoes what it did.
    CreateContainer {
        id: ContainerId,
        config: Arc<ContainerConfig>,
    },
    /// Create the init task (spawns the shim); answers `Done::TaskCreated`.
    CreateTask {
        id: ContainerId,
    },
    StartTask {
        id: ContainerId,
    },
    /// Signal the init process (`all`: every process of the container).
    Kill {
        id: ContainerId,
        signal: Signal,
        all: bool,
    },
    /// Freeze the task's processes (`Tasks.Pause`): the user paused it.
    Pause {
        id: ContainerId,
    },
    /// Thaw the task (`Tasks.Resume`): the user unpaused it, or a stop or
    /// a kill that means "stay down" was delivered to a frozen process,
    /// which cannot act on it until thawed (dockerd resumes then too).
    Resume {
        id: ContainerId,
    },
    /// Change the resources in the container's stored spec (what later runs
    /// get) and, when `running`, of its task's cgroup (`Tasks.Update`): the
    /// user updated them. Recorded only once this succeeded.
    UpdateResources {
        id: ContainerId,
        config: Arc<ContainerConfig>,
        running: bool,
    },
    /// Delete the stopped task: containerd keeps it, and its exit, until then.
    DeleteTask {
        id: ContainerId,
    },
    /// Delete the container and its snapshot. NotFound counts as done.
    DeleteContainer {
        id: ContainerId,
    },
    /// Run an exec's process in the container's running task (its output
    /// through the logger, like the init's); answers `Done::ExecStarted`.
    /// The user asked for it (`docker exec`).
    StartExec {
        id: ContainerId,
        exec_id: String,
        spec: Arc<crate::exec::ExecSpec>,
        /// Give it a stdin to write to (an attached start that asked for it).
        stdin: bool,
    },
    /// Signal an exec's process (`Tasks.Kill` naming the exec): the user
    /// asked for it (`Command::KillExec`). NotFound: the process is gone.
    KillExec {
        id: ContainerId,
        exec_id: String,
        signal: Signal,
    },
    /// Ask containerd about an exec's process: answers `Done::Process`
    /// (its exit code once ended), or `NotFound`. Its `exec_die` may have
    /// been lost (an outage, a crash, a start whose answer was lost).
    ExecState {
        id: ContainerId,
        exec_id: String,
    },
    /// Delete an ended exec's process from containerd (the shim keeps it,
    /// and its status, until then). NotFound counts as done.
    DeleteExec {
        id: ContainerId,
        exec_id: String,
    },
    /// Write what the container changed (its snapshot's upper layer, as
    /// `docker diff` reads it) to `layer` as a tar: the user committed it.
    ReadChanges {
        id: ContainerId,
        layer: String,
    },
    /// Mount the container's snapshot where the daemon's copies find it
    /// (idempotent). The record already says it may be mounted.
    MountRootfs {
        id: ContainerId,
    },
    /// Unmount it (nothing mounted is done).
    UnmountRootfs {
        id: ContainerId,
    },
    /// Resize the terminal of the init (`exec_id` `None`) or of an exec:
    /// the user resized the window they attached from.
    ResizePty {
        id: ContainerId,
        exec_id: Option<String>,
        width: u32,
        height: u32,
    },
}

impl Call {
    pub fn container_id(&self) -> Option<&ContainerId> {
        match self {
            Call::Subscribe | Call::Relist => None,
            Call::CreateContainer { id, .. }
            | Call::CreateTask { id }
            | Call::StartTask { id }
            | Call::Kill { id, .. }
            | Call::Pause { id }
            | Call::Resume { id }
            | Call::UpdateResources { id, .. }
            | Call::DeleteTask { id }
            | Call::DeleteContainer { id }
            | Call::StartExec { id, .. }
            | Call::KillExec { id, .. }
            | Call::ExecState { id, .. }
            | Call::DeleteExec { id, .. }
            | Call::ResizePty { id, .. }
            | Call::ReadChanges { id, .. }
            | Call::MountRootfs { id }
            | Call::UnmountRootfs { id } => Some(id),
        }
    }
}

/// Calls into the host's network side (the CNI plugins, the bridge, NAT
/// rules and hosts files), one per action: a container's own attachment
/// and its endpoints on further networks. Carried out by the network
/// executor, never by containerd.
#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum NetworkCall {
    /// Attach the container to its network before its task is created: its
    /// network namespace, an address, the veth on the bridge, published
    /// ports and NAT. The record already says `NetworkState::Attaching`, so
    /// whatever a failure or a crash leaves is owned and torn down. A host
    /// port used by something else fails with `AlreadyExists`.
    Setup {
        id: ContainerId,
        config: Arc<ContainerConfig>,
        /// `false`: the user disconnected it from its own network
        /// (`Record::own_disconnected`), so only the namespace (loopback)
        /// and its hosts file are made: no `eth0`, no ports.
        own_interface: bool,
    },
    /// Release everything a setup of this container may have made (its
    /// endpoints are released before). Idempotent
    /// (nothing to release is done), so it is safe after any crash; issued
    /// only when no task of the container exists.
    Teardown {
        id: ContainerId,
        config: Arc<ContainerConfig>,
    },
    /// Connect the container to one more network: an address on it and
    /// the interface `endpoint.ifname()` in the namespace the container's
    /// own attachment made (before its task is created, or while it runs);
    /// through slot 0 (`eth0`) with the default route.
    /// The record already says the endpoint is `Attaching`. An address
    /// taken fails with `AlreadyExists`, a network that is gone with
    /// `NotFound`.
    EndpointSetup {
        id: ContainerId,
        config: Arc<ContainerConfig>,
        endpoint: Endpoint,
    },
    /// Release everything a setup of this endpoint may have made (its
    /// address, rules and interface). Idempotent, like `Teardown`;
    /// the user disconnected it, or the container's run is over. Slot 0
    /// also releases the `eth0` (and its published ports) that the
    /// container's own attachment made: the namespace stays.
    EndpointTeardown {
        id: ContainerId,
        config: Arc<ContainerConfig>,
        endpoint: Endpoint,
    },
    /// Rewrite the lines that name the container in the hosts files of its
    /// peers on user networks (and its own): it was renamed to `name`.
    /// Idempotent.
    RefreshNames { id: ContainerId, name: String },
    /// Define a user network: its bridge on `subnet` (one the executor
    /// chooses, free of the host's routes and the other networks, when
    /// `None`). Idempotent by `id`: a definition of it that exists is
    /// answered as made. Answers `Done::Defined`; a subnet that overlaps
    /// fails with `AlreadyExists`, a bad one with `Invalid`.
    Define {
        name: String,
        id: String,
        subnet: Option<String>,
        gateway: Option<String>,
        labels: std::collections::BTreeMap<String, String>,
        created_at: crate::time::WallTime,
    },
    /// Remove a user network: its bridge, rules and definition (nothing
    /// there is done). No container is on it.
    Undefine {
        name: String,
        id: String,
        /// Its bridge, when its definition was recorded.
        bridge: Option<String>,
    },
}

impl NetworkCall {
    /// The container whose attachment it is; `None` for a network's own.
    pub fn container_id(&self) -> Option<&ContainerId> {
        match self {
            NetworkCall::Setup { id, .. }
            | NetworkCall::Teardown { id, .. }
            | NetworkCall::EndpointSetup { id, .. }
            | NetworkCall::EndpointTeardown { id, .. }
            | NetworkCall::RefreshNames { id, .. } => Some(id),
            NetworkCall::Define { .. } | NetworkCall::Undefine { .. } => None,
        }
    }
}

/// The answer to a user request.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Answer {
    /// The request did what it asked (create, start, stop, kill, restart, remove).
    Done,
    /// Nothing to do: start of a running container, stop of a stopped one
    /// (HTTP 304 in the Docker API).
    NotModified,
    /// A wait's condition was met.
    Waited {
        exit_code: i32,
        error: Option<String>,
    },
    /// A prune's answer: what it removed.
    Pruned(Vec<String>),
    /// Where a copy finds the container's files: `/proc/{pid}/root` of its
    /// running process, or (`None`) its snapshot mounted by the daemon.
    Rootfs {
        pid: Option<u32>,
    },
    Error(RequestError),
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub kind: ErrorKind,
    pub message: String,
}

impl RequestError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> RequestError {
        RequestError {
            kind,
            message: message.into(),
        }
    }
}

/// Maps onto HTTP statuses in the API layer.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ErrorKind {
    /// 400
    Invalid,
    /// 404
    NotFound,
    /// 409
    Conflict,
    /// 403: never allowed in this state (dockerd's "forbidden").
    Forbidden,
    /// 501: holdfast does not do this yet; the message says what.
    NotImplemented,
    /// 503: containerd is unreachable; what was recorded will be carried out.
    Unavailable,
    /// 500
    Internal,
    /// The requester cancelled (went away); nobody reads this answer.
    Cancelled,
}

/// `docker events`, in dockerd's vocabulary.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct UserEvent {
    pub container: ContainerId,
    pub kind: UserEventKind,
    pub at: WallTime,
}

/// `docker events` of volumes and networks, in dockerd's vocabulary: each
/// says a fact the core has just recorded (a volume made or gone, an
/// interface on a network made or released), once.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ResourceEvent {
    pub kind: ResourceEventKind,
    pub at: WallTime,
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ResourceEventKind {
    /// Volume `name` is made (`create`) or gone (`destroy`).
    VolumeCreated {
        name: String,
    },
    VolumeDestroyed {
        name: String,
    },
    /// A run of `container` began with volume `name` at `destination`
    /// (`mount`), or is over (`unmount`).
    VolumeMounted {
        name: String,
        container: ContainerId,
        destination: String,
        read_only: bool,
    },
    VolumeUnmounted {
        name: String,
        container: ContainerId,
        destination: String,
    },
    /// User network `name` (its id) is defined (`create`) or removed
    /// (`destroy`).
    NetworkCreated {
        name: String,
        id: String,
    },
    NetworkDestroyed {
        name: String,
        id: String,
    },
    /// `container` has an interface on network `name` (`connect`), or has
    /// it no more (`disconnect`). `id` is `None` for the default `bridge`,
    /// whose id is the network executor's.
    NetworkConnected {
        name: String,
        id: Option<String>,
        container: ContainerId,
    },
    NetworkDisconnected {
        name: String,
        id: Option<String>,
        container: ContainerId,
    },
}

impl ResourceEventKind {
    /// What the event is about (a volume, a network, a run's mount of a
    /// volume at a path, a container's interface on a network) and whether
    /// it says that began (`true`) or ended. Each such subject's events
    /// alternate: a fact is told once.
    pub fn subject(&self) -> (String, bool) {
        use ResourceEventKind as K;
        match self {
            K::VolumeCreated { name } => (format!("volume {name}"), true),
            K::VolumeDestroyed { name } => (format!("volume {name}"), false),
            K::VolumeMounted {
                name,
                container,
                destination,
                ..
            } => (
                format!("{container}'s mount of {name} at {destination}"),
                true,
            ),
            K::VolumeUnmounted {
                name,
                container,
                destination,
            } => (
                format!("{container}'s mount of {name} at {destination}"),
                false,
            ),
            K::NetworkCreated { name, .. } => (format!("network {name}"), true),
            K::NetworkDestroyed { name, .. } => (format!("network {name}"), false),
            K::NetworkConnected {
                name, container, ..
            } => (format!("{container} on network {name}"), true),
            K::NetworkDisconnected {
                name, container, ..
            } => (format!("{container} on network {name}"), false),
        }
    }
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum UserEventKind {
    Create,
    Start,
    Kill {
        signal: Signal,
    },
    Oom,
    Die {
        exit_code: i32,
    },
    Stop,
    Restart,
    Destroy,
    /// Renamed; `old_name` is the name it had.
    Rename {
        old_name: String,
    },
    /// Its restart policy was changed.
    Update,
    /// Its processes were frozen.
    Pause,
    /// Its processes were thawed.
    Unpause,
    /// An exec process exited; the container's state is unchanged.
    ExecDie {
        exec_id: String,
        exit_code: i32,
    },
    /// The health status of its run changed (`health_status: healthy`).
    HealthStatus(crate::health::HealthStatus),
}
