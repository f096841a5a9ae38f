//! Everything that happens to the core arrives as an [`Input`].

use crate::config::ContainerConfig;
use crate::ids::{ContainerId, OpId, RequestId};
use crate::record::Record;
use crate::signal::Signal;
use crate::time::WallTime;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Input {
    /// Records read from disk at start-up. Containers are restored with their
    /// task state unknown until the first complete relist.
    Restore(Stored),
    /// The volumes the volume executor found on disk, after `Restore`: the
    /// volume side's relist.
    VolumesFound(Vec<crate::volume::FoundVolume>),
    /// The user networks the network executor found defined, after
    /// `Restore`: the network side's relist of its definitions.
    NetworksFound(Vec<crate::networks::FoundNetwork>),
    /// The containers the network executor found attachments of on the
    /// host, after `Restore`, with the slots of their endpoints: the
    /// network side's relist of its attachments.
    AttachmentsFound(Vec<(ContainerId, Vec<u8>)>),
    /// A user request through one of the APIs, answered exactly once by
    /// [`crate::Action::Answer`].
    Command(RequestId, Api, Command),
    /// An event from containerd's event stream.
    Event(ContainerdEvent),
    /// What the adapter knows about its connection to containerd.
    Connection(ConnectionFact),
    /// The result of a relist the core asked for (`Call::Relist`): one
    /// `Begin`, any number of `Task`, one `End`. A relist that fails midway
    /// ends with an `ActionResult` failure for its op instead of `End`, and
    /// proves nothing.
    Relist(OpId, RelistPart),
    /// The result of a containerd call the core asked for.
    ActionResult(OpId, Result<Done, Failure>),
    /// The deadline given by [`crate::Core::poll_timeout`] has come.
    Timeout,
    /// The requester went away (the CLI drops `wait` after `run -d` starts the
    /// container). A pending wait is answered `Cancelled` and forgotten; any
    /// other request goes on, because what it asked for was recorded.
    Cancel(RequestId),
    /// What became of a probe the core asked for (`Action::RunProbe`).
    ProbeResult(crate::health::ProbeResult),
}

/// Every record the store holds, as `Input::Restore` gives them back.
#[derive(Clone, PartialEq, Debug, Default, Serialize, Deserialize)]
pub struct Stored {
    pub containers: Vec<Record>,
    pub volumes: Vec<crate::volume::VolumeRecord>,
    pub networks: Vec<crate::networks::NetworkRecord>,
}

impl From<Vec<Record>> for Stored {
    fn from(containers: Vec<Record>) -> Stored {
        Stored {
            containers,
            ..Stored::default()
        }
    }
}

/// User commands, addressed by resolved container id (the API layer resolves
/// names and prefixes through [`crate::Core::resolve`]).
/// The API a command came through. What the CRI made (a pod's sandbox or
/// container, [`crate::PodMember`]) is changed only through the CRI, as
/// kubelet owns it: the Docker API sees it and may exec into it, but its
/// changes are refused; the CRI sees nothing else.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Api {
    Docker,
    Cri,
}

#[derive(Clone, PartialEq, Debug, Serialize, Deserialize)]
pub enum Command {
    Create {
        id: ContainerId,
        name: String,
        config: Arc<ContainerConfig>,
    },
    Start {
        id: ContainerId,
    },
    /// Stop: `signal`, then SIGKILL after `timeout` (both optional; see
    /// `Container::stop_signal` and `Container::stop_timeout`).
    Stop {
        id: ContainerId,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    },
    Kill {
        id: ContainerId,
        signal: Signal,
    },
    Restart {
        id: ContainerId,
        timeout: Option<Duration>,
        signal: Option<Signal>,
    },
    /// `docker rm`; `volumes`: its anonymous volumes go too (`-v`).
    Remove {
        id: ContainerId,
        force: bool,
        volumes: bool,
    },
    Wait {
        id: ContainerId,
        condition: WaitCondition,
    },
    /// A new name; the old one is free at once.
    Rename {
        id: ContainerId,
        name: String,
    },
    /// `docker update --restart`: the policy for every exit from now on.
    UpdateRestartPolicy {
        id: ContainerId,
        policy: crate::config::RestartPolicy,
    },
    /// `docker pause`: freeze every process of the running container.
    Pause {
        id: ContainerId,
    },
    /// `docker unpause`: thaw a paused container.
    Unpause {
        id: ContainerId,
    },
    /// `docker update --memory/--cpus/...`: recorded once containerd took
    /// it (the running task's cgroup and the spec of later runs).
    UpdateResources {
        id: ContainerId,
        update: crate::config::ResourceUpdate,
    },
    /// `docker network connect`: one more bridge network, by its resolved
    /// name. Made at the next start, or at once for a running container.
    Connect {
        id: ContainerId,
        network: String,
        aliases: Vec<String>,
        ip: Option<String>,
    },
    /// `docker network disconnect`: a network it was connected to, by its
    /// resolved name; released at once if attached.
    Disconnect {
        id: ContainerId,
        network: String,
    },
    /// `docker exec` (create): an exec of the running container, by the
    /// id the caller made for it (unique).
    CreateExec {
        id: ContainerId,
        exec_id: String,
        spec: Arc<crate::exec::ExecSpec>,
    },
    /// `docker exec` (start): answered once its process runs. `detach`:
    /// nobody attaches, so it gets no stdin whatever it was created with.
    StartExec {
        exec_id: String,
        detach: bool,
    },
    /// Signal an exec's process (the CRI's `ExecSync` past its timeout
    /// kills it, as containerd's plugin does): kept until delivered or the
    /// process has ended, so a kill asked while containerd is away is
    /// carried out once it is back. Answered once delivered (or when the
    /// process ended first).
    KillExec {
        exec_id: String,
        signal: crate::Signal,
    },
    /// `docker commit`: write what the container changed to `layer`, the
    /// container frozen meanwhile when `pause` (and running).
    ReadChanges {
        id: ContainerId,
        pause: bool,
        layer: String,
    },
    /// `docker cp`, `export`: reach the container's files (answered
    /// `Answer::Rootfs`), until `UnmountRootfs`.
    MountRootfs {
        id: ContainerId,
    },
    UnmountRootfs {
        id: ContainerId,
    },
    /// `docker volume create`.
    CreateVolume {
        name: String,
        labels: std::collections::BTreeMap<String, String>,
    },
    /// `docker volume rm` (`force`: a volume that is not there is no error).
    RemoveVolume {
        name: String,
        force: bool,
    },
    /// `docker volume prune`: of these volumes, those no container names.
    PruneVolumes {
        names: Vec<String>,
    },
    /// `docker network create` of a bridge network named `name`, with the
    /// id the caller made for it.
    CreateNetwork {
        name: String,
        id: String,
        subnet: Option<String>,
        gateway: Option<String>,
        labels: std::collections::BTreeMap<String, String>,
        /// `--attachable`: on a local bridge network any container may
        /// attach anyway; recorded to be shown as asked, as dockerd does.
        attachable: bool,
    },
    /// `docker network rm`, by its resolved name.
    RemoveNetwork {
        name: String,
    },
    /// `docker network prune`: of these networks, those no container is on.
    PruneNetworks {
        names: Vec<String>,
    },
    /// Resize the terminal of the container's init (`exec_id` `None`) or
    /// of one of its execs.
    Resize {
        id: ContainerId,
        exec_id: Option<String>,
        width: u32,
        height: u32,
    },
}

impl Command {
    /// Whether it changes the container it is addressed to (its run, its
    /// name, its policy, resources or networks), as opposed to reading it,
    /// waiting on it or running an exec in it.
    pub fn changes_container(&self) -> bool {
        match self {
            Command::Start { .. }
            | Command::Stop { .. }
            | Command::Kill { .. }
            | Command::Restart { .. }
            | Command::Remove { .. }
            | Command::Rename { .. }
            | Command::UpdateRestartPolicy { .. }
            | Command::Pause { .. }
            | Command::Unpause { .. }
            | Command::UpdateResources { .. }
            | Command::Connect { .. }
            | Command::Disconnect { .. } => true,
            Command::Create { .. }
            | Command::Wait { .. }
            | Command::CreateExec { .. }
            | Command::StartExec { .. }
            | Command::KillExec { .. }
            | Command::Resize { .. }
            | Command::ReadChanges { .. }
            | Command::MountRootfs { .. }
            | Command::UnmountRootfs { .. }
            | Command::CreateVolume { .. }
            | Command::RemoveVolume { .. }
            | Command::PruneVolumes { .. }
            | Command::CreateNetwork { .. }
            | Command::RemoveNetwork { .. }
            | Command::PruneNetworks { .. } => false,
        }
    }

    /// The container the command is addressed to; `None` for one addressed
    /// by an exec's id (the core knows its container).
    pub fn container_id(&self) -> Option<&ContainerId> {
        Some(match self {
            Command::StartExec { .. }
            | Command::KillExec { .. }
            | Command::CreateVolume { .. }
            | Command::RemoveVolume { .. }
            | Command::PruneVolumes { .. }
            | Command::CreateNetwork { .. }
            | Command::RemoveNetwork { .. }
            | Command::PruneNetworks { .. } => return None,
            Command::Create { id, .. }
            | Command::Start { id }
            | Command::Stop { id, .. }
            | Command::Kill { id, .. }
            | Command::Restart { id, .. }
            | Command::Remove { id, .. }
            | Command::Wait { id, .. }
            | Command::Rename { id, .. }
            | Command::UpdateRestartPolicy { id, .. }
            | Command::Pause { id }
            | Command::Unpause { id }
            | Command::UpdateResources { id, .. }
            | Command::Connect { id, .. }
            | Command::Disconnect { id, .. }
            | Command::CreateExec { id, .. }
            | Command::Resize { id, .. }
            | Command::ReadChanges { id, .. }
            | Command::MountRootfs { id }
            | Command::UnmountRootfs { id } => id,
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum WaitCondition {
    /// Answer now if the container is not running, else at its next exit.
    NotRunning,
    /// Answer at the next exit, even if the container is not running now.
    NextExit,
    /// Answer when the container has been removed.
    Removed,
}

/// Events from containerd's `/tasks/` topics, already decoded by the adapter.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ContainerdEvent {
    TaskCreate {
        container: ContainerId,
        pid: u32,
    },
    TaskStart {
        container: ContainerId,
        pid: u32,
        /// When the shim published it (the envelope's timestamp): a start
        /// of an earlier run whose pid the kernel gave again, delivered
        /// late, is told from this run's own by this. `None` when not known.
        published_at: Option<WallTime>,
    },
    /// `exec_id` equals the container id for the init process; anything else
    /// is an exec and never changes the container's state.
    TaskExit {
        container: ContainerId,
        exec_id: String,
        pid: u32,
        exit_status: u32,
        exited_at: WallTime,
        /// How many processes of the task the OOM killer killed in this run:
        /// its cgroup's memory `oom_kill` count when the adapter learned the
        /// exit, less the count when the task was created. `None` when that
        /// could not be read (an exec's exit, a cgroup already gone, a task
        /// created before the adapter began). Evidence for `OOMKilled`,
        /// where `TaskOom` (which names no pid) is only a hint.
        oom_kills: Option<u64>,
    },
    TaskOom {
        container: ContainerId,
        /// When the shim published it (the envelope's timestamp, kept
        /// through the shim's retries): an OOM event names no pid, and one
        /// delivered late, after the next run began, is told from that
        /// run's own by this. `None` when not known.
        published_at: Option<WallTime>,
    },
    TaskDelete {
        container: ContainerId,
        pid: u32,
    },
    /// The task was frozen (by us or by anyone with access to containerd).
    /// It names no pid, and may arrive after a later resume's answer: it is
    /// a reason to look (relist), never a fact to record.
    TaskPaused {
        container: ContainerId,
    },
    /// The task was thawed; like `TaskPaused`, only a reason to look.
    TaskResumed {
        container: ContainerId,
    },
}

/// Connection facts. None of them is ever evidence about a container.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ConnectionFact {
    /// containerd answered a call: it is reachable now.
    Connected,
    /// The subscription from `Call::Subscribe` is delivering events.
    StreamLive(OpId),
    /// The subscription from `Call::Subscribe` ended; events may be lost
    /// from here until the next relist.
    StreamBroken(OpId, String),
    /// containerd could not be reached (connection refused, transport closed).
    Unreachable(String),
}

#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum RelistPart {
    Begin,
    Task(TaskInfo),
    End,
}

/// One task as containerd's `Tasks.List` shows it.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct TaskInfo {
    pub container: ContainerId,
    pub pid: u32,
    pub status: TaskStatus,
    pub exit_status: u32,
    /// `None` for Go's zero time (a task that has not exited).
    pub exited_at: Option<WallTime>,
    /// For a stopped task: OOM kills in its run, as in
    /// [`ContainerdEvent::TaskExit`]; `None` when unknown.
    pub oom_kills: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum TaskStatus {
    Created,
    Running,
    Paused,
    Stopped,
    Unknown,
}

/// What a successful containerd call produced.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Done {
    Ok,
    /// `Call::CreateTask` succeeded; the init process has this pid.
    TaskCreated {
        pid: u32,
    },
    /// `NetworkCall::Define` succeeded and gave this.
    Defined(crate::networks::Definition),
    /// A network setup succeeded and gave this (`None`: a namespace with no
    /// interface).
    Attached(Option<crate::record::Allocation>),
    /// `Call::StartExec` succeeded; the exec's process has this pid.
    ExecStarted {
        pid: u32,
    },
    /// `Call::ExecState`: the exec's process, and its exit code once it
    /// has ended.
    Process {
        pid: u32,
        exit_code: Option<i32>,
    },
}

/// A failed call, classified by the adapter from the gRPC status or the
/// transport error.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum FailureKind {
    NotFound,
    AlreadyExists,
    /// containerd was not reachable; the call may be retried after reconnect.
    Unavailable,
    FailedPrecondition,
    /// No answer within the adapter's deadline: the call may or may not have
    /// taken effect.
    Deadline,
    /// Bad input that retrying cannot fix (a missing image, an invalid spec).
    Invalid,
    Other,
}
