//! Property 1: every kill, delete or (re)start is backed by a user's or
//! policy's intent: none is caused by a connection fact or a failed call;
//! a signal is one a user asked for (a kill, the stop signal by precedence,
//! SIGKILL).

use crate::calls::Call;
use crate::harness::{Ask, Harness};
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

impl Harness {
    /// Every call that can end or start a process is backed by an intent a
    /// user (or a policy, after a recorded exit) made, never by the input
    /// at hand; a connection fact or a failed call can at most let an
    /// already recorded intent proceed.
    pub(crate) fn check_calls_justified(
        &self,
        input: &Input,
        actions: &[Action],
        asks_before: &BTreeMap<RequestId, (ContainerId, Ask)>,
    ) -> Result<(), TestCaseError> {
        for call in Call::all(actions) {
            let view = call.container_id().and_then(|id| self.core.container(id));
            let justified = self.intent_behind(&call, view, asks_before);
            prop_assert!(
                justified,
                "{input:?} issued {call:?} with no intent behind it"
            );
            // SIGKILL goes to every process of the container (one outside
            // its init's pid namespace, as with a shared one, would outlive
            // it); any other signal to its init process only, as `docker
            // kill -s` and `docker stop` deliver it (an exec'd process is
            // not sent the stop signal).
            if let Call::Kill { signal, all, .. } = &call {
                prop_assert_eq!(
                    *all,
                    *signal == Signal::SIGKILL,
                    "{:?} issued {:?}: the wrong processes signalled",
                    input,
                    call
                );
            }
            // A thaw goes only to a container shown paused (or being
            // removed, which shows as removing whatever its task is): one
            // of a task that is not frozen is refused, and retried, and
            // holds up what should follow (a stop's SIGKILL).
            if let (Call::Resume { .. }, Some(c)) = (&call, view) {
                prop_assert!(
                    c.paused || c.status == Status::Removing,
                    "{:?} issued {:?} to a container not paused ({:?})",
                    input,
                    call,
                    c.status
                );
            }
            // No second task: a task create goes out only when containerd
            // has none for the container (one a lost create may have made
            // is looked for first), and a container delete only when its
            // task is gone (containerd would refuse it, and the core would
            // have mistaken what it has).
            if let Call::CreateTask { id } | Call::DeleteContainer { id } = &call {
                prop_assert!(
                    !self.world.containerd.tasks.contains_key(id),
                    "{:?} issued {:?} while containerd has {:?}",
                    input,
                    call,
                    self.world
                        .containerd
                        .tasks
                        .get(id)
                        .map(|t| (t.pid, t.status))
                );
            }
            // A task is created with every network its container was
            // connected to while stopped already made: dockerd connects
            // them before it starts, so that a refusal refuses the start
            // (and the process finds its interfaces from the first).
            if let (Call::CreateTask { id }, Some(c)) = (&call, view) {
                for e in c.record.endpoints.iter().filter(|e| e.wanted) {
                    prop_assert!(
                        self.world.network.endpoints.contains(&(id.clone(), e.slot)),
                        "{:?} issued {:?} before {} endpoint eth{} ({}) was made",
                        input,
                        call,
                        id,
                        e.slot,
                        e.network
                    );
                }
            }
            // dockerd's baseline: a run after a connect back to its own
            // network has its own `eth0` there, its ports published, as a
            // run of the container as created (not one more endpoint).
            if let Call::CreateTask { id } = &call {
                prop_assert!(
                    !self.connected_back.contains(id) || self.world.network.own_eth0.contains(id),
                    "{:?} issued {:?}: {} was connected back to its own network, and its run has no eth0 of its own (no published ports)",
                    input,
                    call,
                    id
                );
            }
            if matches!(
                input,
                Input::Connection(
                    ConnectionFact::StreamBroken(..) | ConnectionFact::Unreachable(_)
                )
            ) {
                prop_assert!(false, "{input:?} issued {call:?}");
            }
        }
        Ok(())
    }

    /// Whether a user's or policy's intent is behind `call` (`view`: its
    /// container, if shown).
    fn intent_behind(
        &self,
        call: &Call,
        view: Option<ContainerView<'_>>,
        asks_before: &BTreeMap<RequestId, (ContainerId, Ask)>,
    ) -> bool {
        match (call, view) {
            // The signal, too, is one asked for: a kill's, the stop's
            // own, or SIGKILL for a stop or a forced remove.
            (Call::Kill { signal, .. }, Some(c)) => {
                let i = &c.record.intents;
                i.kills.contains(signal)
                    || i.stop.is_some_and(|s| s.signal == *signal)
                    || *signal == Signal::SIGKILL && (i.stop.is_some() || i.remove)
            }
            (Call::CreateTask { .. } | Call::StartTask { .. }, Some(c)) => c.record.intents.start,
            (Call::DeleteTask { .. }, Some(c)) => {
                c.current_exit().is_some()
                    || matches!(c.task, TaskState::Created { .. }) && !c.record.intents.start
            }
            (Call::DeleteContainer { .. }, Some(c)) => c.record.intents.remove,
            // A freeze only for a user's pause; a thaw for an unpause,
            // or so that a stop, a "stay down" kill or a remove lands.
            (Call::Pause { id }, Some(_)) => {
                self.pauses_asked.contains(&(id.clone(), true))
                    || self.res.commits_freezing.contains(id)
            }
            (Call::UpdateResources { id, running, .. }, Some(c)) => {
                self.updates_asked.contains(id)
                    && *running == matches!(c.task, TaskState::Running { .. })
            }
            (Call::Resume { id }, Some(c)) => {
                let i = &c.record.intents;
                let unpause_waits = asks_before
                    .values()
                    .chain(self.asks.values())
                    .any(|(of, a)| of == id && *a == Ask::Unpause);
                unpause_waits
                    || self.unpause_standing.contains(id)
                    || i.stop.is_some()
                    || i.remove
                    || self.world.stay_down_frozen.contains(id)
                    // A commit's own freeze undone.
                    || i.commit_thaw
            }
            (Call::NetworkSetup { own_interface, .. }, Some(c)) => {
                c.record.intents.start
                    && c.task == TaskState::Absent
                    && *own_interface != c.record.own_disconnected
            }
            // A release: only with no task that could be using it.
            (Call::NetworkTeardown { .. }, Some(c)) => c.task == TaskState::Absent,
            // An endpoint the user wants: before a start, or while
            // the task is up (a hot connect).
            (Call::EndpointSetup { endpoint, .. }, Some(c)) => {
                let wanted = c
                    .record
                    .endpoints
                    .iter()
                    .any(|e| e.slot == endpoint.slot && e.wanted);
                wanted
                    && c.record.network == NetworkState::Attached
                    && (c.record.intents.start || c.task != TaskState::Absent)
            }
            // Released: disconnected, in doubt, or its task gone.
            (Call::EndpointTeardown { endpoint, .. }, Some(c)) => {
                let e = c.record.endpoints.iter().find(|e| e.slot == endpoint.slot);
                c.task == TaskState::Absent
                    || e.is_some_and(|e| !e.wanted || e.state == NetworkState::Attaching)
            }
            // Invisible: a discarded create being rolled back.
            (Call::DeleteContainer { .. }, None) => true,
            (Call::Subscribe | Call::Relist | Call::CreateContainer { .. }, _) => true,
            // A rename's, of a container that was attached.
            (Call::RefreshNames { .. }, Some(c)) => c.record.intents.refresh_names,
            // No user of the harness makes a network.
            (Call::Unasked { .. }, _) => false,
            // An exec's start only when a user started it; its state read
            // and its process deleted while the container is known.
            (Call::StartExec { exec_id, .. }, Some(_)) => self.res.starts_asked.contains(exec_id),
            (Call::ExecState { .. } | Call::DeleteExec { .. }, Some(_)) => true,
            (Call::ResizePty { id, .. }, Some(_)) => self.res.resizes_asked.contains(id),
            // No user of the harness signals an exec.
            (Call::KillExec { .. }, _) => false,
            // A read for a commit; a mount for a copy or a volume's fill;
            // an unmount whenever (it undoes).
            (Call::Snapshot(holdfast_core::Call::ReadChanges { id, .. }), Some(_)) => {
                self.res.commits_asked.contains(id)
            }
            (Call::Snapshot(holdfast_core::Call::MountRootfs { id }), Some(c)) => {
                self.res.copies_asked.contains(id) || !c.record.config.mounts.is_empty()
            }
            (Call::Snapshot(_), Some(_)) => true,
            // Judged by the volume oracles (`resources.rs`).
            (Call::Volume(_), _) => true,
            (_, None) => false,
        }
    }
}
