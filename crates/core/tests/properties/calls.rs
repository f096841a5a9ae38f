//! The calls the core issues, containerd's and the network side's, as the
//! harness follows them.

use holdfast_core::*;

/// Every call the core issues, containerd's and the network side's, in
/// one flat list: the harness's world models both, and follows every
/// call the same way (who owns it, what its answer did).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    Subscribe,
    Relist,
    CreateContainer {
        id: ContainerId,
    },
    CreateTask {
        id: ContainerId,
    },
    StartTask {
        id: ContainerId,
    },
    Kill {
        id: ContainerId,
        signal: Signal,
        all: bool,
    },
    Pause {
        id: ContainerId,
    },
    Resume {
        id: ContainerId,
    },
    UpdateResources {
        id: ContainerId,
        running: bool,
    },
    DeleteTask {
        id: ContainerId,
    },
    DeleteContainer {
        id: ContainerId,
    },
    /// A network definition's call: the harness's users make none, so
    /// none is ever issued.
    Unasked {
        id: Option<ContainerId>,
    },
    /// An exec's calls (start, state, delete), a terminal's resize (of
    /// the init when `exec_id` is `None`).
    StartExec {
        id: ContainerId,
        exec_id: String,
    },
    ExecState {
        id: ContainerId,
        exec_id: String,
    },
    DeleteExec {
        id: ContainerId,
        exec_id: String,
    },
    ResizePty {
        id: ContainerId,
        exec_id: Option<String>,
    },
    /// A signal to an exec's process (the CRI's ExecSync timeout): the
    /// harness's users ask none, so none may be issued.
    KillExec {
        id: ContainerId,
        exec_id: String,
    },
    /// A commit's read, a copy's mount and unmount.
    Snapshot(holdfast_core::Call),
    /// A volume's directory made, filled or removed (by the volume
    /// executor, inside holdfastd).
    Volume(VolumeCall),
    /// A renamed container's peers learn its name.
    RefreshNames {
        id: ContainerId,
    },
    NetworkSetup {
        id: ContainerId,
        own_interface: bool,
    },
    NetworkTeardown {
        id: ContainerId,
    },
    EndpointSetup {
        id: ContainerId,
        endpoint: Endpoint,
    },
    EndpointTeardown {
        id: ContainerId,
        endpoint: Endpoint,
    },
}

impl Call {
    pub(crate) fn container_id(&self) -> Option<&ContainerId> {
        match self {
            Call::Subscribe | Call::Relist => None,
            Call::Unasked { id } => id.as_ref(),
            Call::Snapshot(call) => call.container_id(),
            Call::Volume(_) => None,
            Call::CreateContainer { id }
            | Call::CreateTask { id }
            | Call::StartTask { id }
            | Call::Kill { id, .. }
            | Call::Pause { id }
            | Call::Resume { id }
            | Call::UpdateResources { id, .. }
            | Call::DeleteTask { id }
            | Call::DeleteContainer { id }
            | Call::StartExec { id, .. }
            | Call::ExecState { id, .. }
            | Call::DeleteExec { id, .. }
            | Call::ResizePty { id, .. }
            | Call::KillExec { id, .. }
            | Call::RefreshNames { id }
            | Call::NetworkSetup { id, .. }
            | Call::NetworkTeardown { id }
            | Call::EndpointSetup { id, .. }
            | Call::EndpointTeardown { id, .. } => Some(id),
        }
    }

    /// The calls among `actions`, in order.
    pub(crate) fn all(actions: &[Action]) -> Vec<Call> {
        actions
            .iter()
            .filter_map(Call::of)
            .map(|(_, c)| c)
            .collect()
    }

    /// The call an action issues, if it issues one.
    pub(crate) fn of(action: &Action) -> Option<(OpId, Call)> {
        use holdfast_core::Call as C;
        let call = match action {
            Action::Call { op, call } => (
                *op,
                match call.clone() {
                    C::Subscribe => Call::Subscribe,
                    C::Relist => Call::Relist,
                    C::CreateContainer { id, .. } => Call::CreateContainer { id },
                    C::CreateTask { id } => Call::CreateTask { id },
                    C::StartTask { id } => Call::StartTask { id },
                    C::Kill { id, signal, all } => Call::Kill { id, signal, all },
                    C::Pause { id } => Call::Pause { id },
                    C::Resume { id } => Call::Resume { id },
                    C::UpdateResources { id, running, .. } => Call::UpdateResources { id, running },
                    C::DeleteTask { id } => Call::DeleteTask { id },
                    C::DeleteContainer { id } => Call::DeleteContainer { id },
                    C::StartExec { id, exec_id, .. } => Call::StartExec { id, exec_id },
                    C::ExecState { id, exec_id } => Call::ExecState { id, exec_id },
                    C::DeleteExec { id, exec_id } => Call::DeleteExec { id, exec_id },
                    C::ResizePty { id, exec_id, .. } => Call::ResizePty { id, exec_id },
                    C::KillExec { id, exec_id, .. } => Call::KillExec { id, exec_id },
                    call @ (C::ReadChanges { .. }
                    | C::MountRootfs { .. }
                    | C::UnmountRootfs { .. }) => Call::Snapshot(call),
                },
            ),
            Action::Network { op, call } => (
                *op,
                match call.clone() {
                    NetworkCall::Setup {
                        id, own_interface, ..
                    } => Call::NetworkSetup { id, own_interface },
                    NetworkCall::Teardown { id, .. } => Call::NetworkTeardown { id },
                    NetworkCall::EndpointSetup { id, endpoint, .. } => {
                        Call::EndpointSetup { id, endpoint }
                    }
                    NetworkCall::EndpointTeardown { id, endpoint, .. } => {
                        Call::EndpointTeardown { id, endpoint }
                    }
                    NetworkCall::RefreshNames { id, .. } => Call::RefreshNames { id },
                    NetworkCall::Define { .. } | NetworkCall::Undefine { .. } => {
                        Call::Unasked { id: None }
                    }
                },
            ),
            Action::Volume { op, call } => (*op, Call::Volume(call.clone())),
            _ => return None,
        };
        Some(call)
    }
}
