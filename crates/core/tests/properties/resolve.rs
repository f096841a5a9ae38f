//! The world answers the core's calls: carried out, refused, or carried
//! out with the answer lost, as the step says.

use crate::calls::Call;
use crate::harness::Harness;
use holdfast_core::*;
use holdfast_sim::model::{Effect, Task};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

impl Harness {
    /// Carries out (or fails) one outstanding call, as containerd would.
    pub(crate) fn resolve(&mut self, n: usize, failure: u8) -> Result<(), TestCaseError> {
        if self.outstanding.is_empty() {
            return Ok(());
        }
        let (op, call) = self.outstanding.remove(n % self.outstanding.len());
        self.answering_call = Some(call.clone());
        if let Some(id) = self.stop_signal_ops.remove(&op)
            && self.world.containerd.up
            && matches!(failure, 0 | 7 | 8)
        {
            let grace = self
                .core
                .container(&id)
                .and_then(|c| c.record.intents.stop)
                .filter(|s| s.signal != Signal::SIGKILL)
                .map(|s| s.grace);
            if let Some(grace) = grace {
                self.kill_deadline.insert(id.clone(), self.now.at + grace);
            }
            self.signal_delivered.insert(id, self.now.at);
        }
        if let Call::NetworkSetup { id, .. }
        | Call::NetworkTeardown { id, .. }
        | Call::EndpointSetup { id, .. }
        | Call::EndpointTeardown { id, .. } = &call
        {
            return self.resolve_network(op, &call, id.clone(), failure);
        }
        if matches!(
            call,
            Call::StartExec { .. }
                | Call::ExecState { .. }
                | Call::DeleteExec { .. }
                | Call::ResizePty { .. }
                | Call::KillExec { .. }
                | Call::Snapshot(_)
                | Call::Volume(_)
        ) {
            return self.resolve_resource(op, &call, failure);
        }
        let connection_call = matches!(call, Call::Subscribe | Call::Relist);
        self.answer_lost = failure == 9 && !connection_call;
        let kind = match failure {
            _ if !self.world.containerd.up => Some(FailureKind::Unavailable),
            0 | 7 | 8 => None,
            9 if !connection_call => None,
            1 => Some(FailureKind::Unavailable),
            2 => Some(FailureKind::Deadline),
            3 => Some(FailureKind::NotFound),
            4 => Some(FailureKind::FailedPrecondition),
            5 => Some(FailureKind::AlreadyExists),
            // The runtime rejects the spec (a missing binary, a bad
            // working directory), or the resources (a memory limit below
            // what the container uses).
            6 if matches!(call, Call::CreateTask { .. } | Call::UpdateResources { .. }) => {
                Some(FailureKind::Invalid)
            }
            _ => Some(FailureKind::Other),
        };
        self.answering = call.container_id().cloned();
        if let Some(kind) = kind {
            return self.refuse(op, &call, kind);
        }
        self.carry_out(op, call, n, failure)
    }

    /// The call fails with `kind`: containerd went away, the call ran out
    /// of time, or containerd refused it.
    fn refuse(&mut self, op: OpId, call: &Call, kind: FailureKind) -> Result<(), TestCaseError> {
        if kind == FailureKind::Unavailable {
            self.subscriptions.remove(&op);
        }
        // A start containerd refuses outright, with no attempt before it
        // that may have taken effect, is answered at once: it is not
        // retried as if it might have worked.
        if let Call::CreateTask { id } | Call::StartTask { id } = call
            && matches!(
                kind,
                FailureKind::Other | FailureKind::NotFound | FailureKind::Invalid
            )
            && self.failures.get(id).is_none_or(|n| *n == 0)
        {
            let id = id.clone();
            let from = self.trace.len();
            self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))?;
            for (req, c) in &self.starts {
                prop_assert!(
                    *c != id || self.answered.contains_key(req),
                    "{} (a start of {}) waits although containerd refused it outright",
                    req,
                    id
                );
            }
            // With dockerd's status: a spec the runtime rejects is the
            // user's to fix (400), anything else a server error (500).
            let status = if kind == FailureKind::Invalid {
                ErrorKind::Invalid
            } else {
                ErrorKind::Internal
            };
            for action in &self.trace[from..] {
                if let Action::Answer(req, Answer::Error(e)) = action
                    && self.starts.get(req) == Some(&id)
                {
                    prop_assert!(
                        e.kind == status,
                        "{} (a start of {}) refused ({:?}) told {:?}, not {:?}",
                        req,
                        id,
                        kind,
                        e.kind,
                        status
                    );
                }
            }
            return Ok(());
        }
        // containerd says "not found" of what a delete wanted gone only
        // when it is gone (deleted by an attempt whose answer was lost):
        // the delete took effect, where containerd lets it (not while the
        // container has a task, nor of a running task).
        if kind == FailureKind::NotFound {
            match call {
                Call::DeleteContainer { id } => {
                    let _ = self.world.containerd.delete_container(id);
                }
                Call::DeleteTask { id } => {
                    let _ = self.world.containerd.delete_task(id, &mut Vec::new());
                }
                _ => {}
            }
        }
        self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))
    }

    /// containerd carries the call out; its answer may yet be lost.
    fn carry_out(
        &mut self,
        op: OpId,
        call: Call,
        n: usize,
        failure: u8,
    ) -> Result<(), TestCaseError> {
        let done = match call {
            // Rewriting hosts files: nothing the world models.
            Call::RefreshNames { .. } => Ok(Done::Ok),
            Call::Unasked { .. }
            | Call::StartExec { .. }
            | Call::ExecState { .. }
            | Call::DeleteExec { .. }
            | Call::ResizePty { .. }
            | Call::KillExec { .. }
            | Call::Snapshot(_)
            | Call::Volume(_) => {
                return Err(TestCaseError::fail(format!(
                    "{op}: a call nobody asked for: {call:?}"
                )));
            }
            Call::Subscribe => {
                self.subscriptions.insert(op);
                return self.feed(Input::Connection(ConnectionFact::StreamLive(op)));
            }
            Call::Relist => return self.answer_relist(op, n, failure),
            Call::CreateContainer { id, .. } => self.world.containerd.create_container(&id),
            Call::CreateTask { id } => self.create_task(&id, failure),
            Call::StartTask { id } => return self.start_task(op, &id, failure),
            Call::Kill { id, signal, .. } => return self.kill_task(op, &id, signal, failure),
            Call::DeleteTask { id } => {
                // The core deletes a task only once it knows its run
                // ended or it never started: one a start may have
                // started waits for the evidence (a relist, the start's
                // event), never guessed away.
                if let Some(pid) = self.world.running_pid(&id) {
                    prop_assert!(false, "{} deleted while running (pid {})", id, pid);
                }
                self.world.containerd.delete_task(&id, &mut Vec::new())
            }
            Call::UpdateResources { id, running, .. } => {
                self.world.containerd.update_resources(&id, running)
            }
            Call::Pause { id } => {
                let frozen = self.world.containerd.pause(&id, &mut Vec::new());
                if frozen.is_ok() {
                    self.world.stay_down_frozen.remove(&id);
                }
                frozen
            }
            Call::Resume { id } => return self.resume_task(op, &id),
            Call::NetworkSetup { .. }
            | Call::NetworkTeardown { .. }
            | Call::EndpointSetup { .. }
            | Call::EndpointTeardown { .. } => Ok(Done::Ok),
            Call::DeleteContainer { id } => self.world.containerd.delete_container(&id),
        };
        match done {
            Ok(done) => self.reply(op, done),
            Err(refusal) => self.feed(Input::ActionResult(op, Err(refusal))),
        }
    }

    /// containerd lists its tasks. It reads them at some moment after the
    /// call: now, or (7) as early as when it was asked for, so that what
    /// happened since (an exit the core has seen, a call it made) is not
    /// in it.
    fn answer_relist(&mut self, op: OpId, n: usize, failure: u8) -> Result<(), TestCaseError> {
        // The relist's call is open until its end.
        self.relisting = true;
        self.feed(Input::Relist(op, RelistPart::Begin))?;
        // containerd reads its tasks at some moment after the call:
        // now, or (7) as early as when it was asked for, so that
        // what happened since (an exit the core has seen, a call
        // it made) is not in it.
        let snapshot = self.relist_snapshots.remove(&op);
        let tasks = match snapshot {
            Some(tasks) if failure == 7 => self.late_listing(&tasks),
            _ => self.world.containerd.relist(),
        };
        // A shim that does not answer: its task is listed as a
        // placeholder (status unknown, pid 0), which proves nothing.
        let placeholder =
            (failure == 8 && !tasks.is_empty()).then(|| tasks[n % tasks.len()].container.clone());
        for mut task in tasks {
            if placeholder.as_ref() == Some(&task.container) {
                // Status unknown; the pid is 0 or still the real one.
                if n.is_multiple_of(2) {
                    task.pid = 0;
                }
                task.status = TaskStatus::Unknown;
                task.exit_status = 0;
                task.exited_at = None;
            }
            self.feed(Input::Relist(op, RelistPart::Task(task)))?;
        }
        // What was unseen before this relist was asked for is seen
        // now (checked after the end, with the relist applied).
        self.unseen
            .retain(|id, mark| *mark >= op.0 || placeholder.as_ref() == Some(id));
        if let Some(id) = &placeholder {
            self.unseen.insert(id.clone(), op.0);
        }
        self.relisting = false;
        self.settle_doubts(op, placeholder.as_ref());
        self.feed(Input::Relist(op, RelistPart::End))?;
        // What a relist could not see is looked at again soon, not
        // only at the next periodic relist.
        let asked_again = self
            .outstanding
            .iter()
            .any(|(o, c)| matches!(c, Call::Relist) && *o > op);
        // (Only of the core's newest relist: an older one's end is
        // of a connection given up, and proves nothing to it.)
        if placeholder.is_some()
            && !asked_again
            && op.0 >= self.newest_relist
            && self.core.connection() == ConnectionState::Ready
        {
            self.look_again_by = Some(self.now.at + Duration::from_secs(2));
        }
        Ok(())
    }

    /// A listing read when the relist was asked for, of `tasks` as they were
    /// then: stale in the tasks it lists (which, their pids and states, an
    /// exit's status), not in their freeze or cgroup count, which are as
    /// they are now.
    ///
    /// (Stale in its freeze too, such a listing makes the core show a
    /// thawed container paused: a relist asked before a thaw from outside
    /// and answered after the core applied its TaskResumed overrides it,
    /// the core's relist rules counting the calls since the ask, not the
    /// events. That is the core's to fix; until then this world does not
    /// make such a listing.)
    fn late_listing(&self, tasks: &BTreeMap<ContainerId, Task>) -> Vec<TaskInfo> {
        tasks
            .iter()
            .map(|(id, task)| {
                let frozen = self.world.frozen_pid(id) == Some(task.pid);
                let status = match task.status {
                    TaskStatus::Running | TaskStatus::Paused if frozen => TaskStatus::Paused,
                    TaskStatus::Paused => TaskStatus::Running,
                    status => status,
                };
                TaskInfo {
                    container: id.clone(),
                    pid: task.pid,
                    status,
                    exit_status: task.exit_status,
                    exited_at: task.exited_at,
                    oom_kills: (status == TaskStatus::Stopped)
                        .then(|| self.world.oom_kills(task.pid))
                        .flatten(),
                }
            })
            .collect()
    }

    /// containerd creates the task. The kernel may hand the new task a pid
    /// this container's earlier, deleted task had (when the step also
    /// loses the answer, or lists a placeholder: 9, 8).
    fn create_task(&mut self, id: &ContainerId, failure: u8) -> Result<Done, Failure> {
        let containerd = &self.world.containerd;
        let reused = containerd.last_deleted.get(id).copied().filter(|pid| {
            matches!(failure, 8 | 9) && !containerd.tasks.values().any(|t| t.pid == *pid)
        });
        let created = self
            .world
            .containerd
            .create_task(id, self.now.at, reused, &mut Vec::new());
        if let Ok(Done::TaskCreated { pid }) = created {
            self.world.created(id, pid, self.now.wall);
        }
        created
    }

    /// containerd starts the task, which no start but one asked for may
    /// do; the shim publishes the start, before the answer (7) or after it
    /// (also when the answer is lost).
    fn start_task(&mut self, op: OpId, id: &ContainerId, failure: u8) -> Result<(), TestCaseError> {
        let mut fx = Vec::new();
        if let Err(refusal) = self.world.containerd.start_task(id, &mut fx) {
            return self.feed(Input::ActionResult(op, Err(refusal)));
        }
        let started = fx.iter().find_map(|effect| match effect {
            Effect::Started { pid, .. } => Some(*pid),
            _ => None,
        });
        let published = fx.into_iter().find_map(|effect| match effect {
            Effect::Publish(event @ ContainerdEvent::TaskStart { .. }) => Some(event),
            _ => None,
        });
        let (Some(pid), Some(mut event)) = (started, published) else {
            return Err(TestCaseError::fail(format!(
                "the model started {id} with no start to publish"
            )));
        };
        self.world.started(id, pid);
        let ledger = self.start_ledger.entry(id.clone()).or_default();
        ledger.1 += 1;
        prop_assert!(
            ledger.1 <= ledger.0,
            "{} started (pid {}) with no start asked for it ({} asked, {} started)",
            id,
            pid,
            ledger.0,
            ledger.1
        );
        self.start_reached(id, op);
        // The shim publishes the start: before the answer (7),
        // or after it (also when the answer is lost).
        // The shim stamps the envelope when it publishes.
        if let ContainerdEvent::TaskStart { published_at, .. } = &mut event {
            published_at.get_or_insert(self.now.wall);
        }
        if failure == 7 {
            self.event(event)?;
            return self.reply(op, Done::Ok);
        }
        // With its answer lost, the event is lost too for every
        // other pid (a stream that broke, or an event dropped on
        // a live one): only a relist tells the start apart.
        let event_lost = self.answer_lost && pid % 2 == 0;
        self.reply(op, Done::Ok)?;
        if event_lost {
            self.lost(&event);
            self.past_events.push(event);
            return Ok(());
        }
        self.event(event)
    }

    /// containerd delivers a signal. A process that dies of it dies now,
    /// before the answer when the step says so (7); a frozen one holds it
    /// until it is thawed.
    fn kill_task(
        &mut self,
        op: OpId,
        id: &ContainerId,
        signal: Signal,
        failure: u8,
    ) -> Result<(), TestCaseError> {
        // A user's "stay down" kill that reaches a frozen task: the
        // core may thaw it now, whether or not the task dies frozen
        // (it cannot know).
        if let Some(pid) = self.world.containerd.live_pid(id)
            && self.user_kill_ops.contains_key(&op)
            && self.stays_down(id, signal)
        {
            self.world.stay_down_sent.insert((id.clone(), pid));
            // (Frozen, or shown so: a thaw by someone else that the
            // core has not yet seen makes its thaw a harmless one.)
            let shown_paused = self.core.container(id).is_some_and(|c| c.paused);
            if self.world.frozen_pid(id) == Some(pid) || shown_paused {
                self.world.stay_down_frozen.insert(id.clone());
            }
        }
        let mut fx = Vec::new();
        if let Err(refusal) = self
            .world
            .containerd
            .kill(id, signal, Duration::ZERO, &mut fx)
        {
            // A stop signal that found its process gone (its exit not yet
            // seen) starts no grace period: the core looks (a relist)
            // rather than escalate against a process that is no more
            // (found at 30,000 cases).
            if refusal.kind == FailureKind::NotFound {
                self.kill_deadline.remove(id);
            }
            return self.feed(Input::ActionResult(op, Err(refusal)));
        }
        // Once our SIGKILL reached the task, a 137 may be ours.
        if signal == Signal::SIGKILL
            && let Some(seen) = self.world.current_mut(id)
        {
            seen.sigkilled = true;
        }
        if failure == 7 || self.held(id, &fx) {
            self.exits(id, &fx)?;
            return self.reply(op, Done::Ok);
        }
        self.reply(op, Done::Ok)?;
        self.exits(id, &fx)
    }

    /// Whether `id`'s frozen task holds the exits `fx` sets going.
    fn held(&self, id: &ContainerId, fx: &[Effect]) -> bool {
        let Some(task) = self.world.containerd.tasks.get(id) else {
            return false;
        };
        fx.iter().any(|effect| {
            matches!(*effect, Effect::Exit { status, oom, .. }
                if self.world.containerd.holds_exit(task, status, oom))
        })
    }

    /// containerd thaws the task: what it held (a SIGKILL under a v1
    /// freezer) happens after the answer. (The core's own thaw's event is
    /// not followed.)
    fn resume_task(&mut self, op: OpId, id: &ContainerId) -> Result<(), TestCaseError> {
        let mut fx = Vec::new();
        match self.world.containerd.resume(id, &mut fx) {
            Ok(done) => {
                self.reply(op, done)?;
                self.exits(id, &fx)
            }
            Err(refusal) => self.feed(Input::ActionResult(op, Err(refusal))),
        }
    }

    /// A network call, carried out by the daemon's CNI side (up whatever
    /// containerd does): refused (a host port in use, a plugin failing), or
    /// done with its answer lost, or done.
    pub(crate) fn resolve_network(
        &mut self,
        op: OpId,
        call: &Call,
        id: ContainerId,
        failure: u8,
    ) -> Result<(), TestCaseError> {
        // A host port in use or an address taken, a configuration the
        // plugin rejects (a bad address), a plugin failing.
        let kind = match failure {
            3 | 5 => Some(FailureKind::AlreadyExists),
            4 => Some(FailureKind::Invalid),
            6 => Some(FailureKind::Other),
            _ => None,
        };
        if let Call::EndpointSetup { endpoint, .. } | Call::EndpointTeardown { endpoint, .. } = call
        {
            let setup = matches!(call, Call::EndpointSetup { .. });
            // An address taken, a network gone, a bad address, a plugin
            // failing.
            let kind = match failure {
                3 => Some(FailureKind::AlreadyExists),
                5 => Some(FailureKind::NotFound),
                4 => Some(FailureKind::Invalid),
                6 => Some(FailureKind::Other),
                _ => None,
            };
            if let Some(kind) = kind {
                // A refused setup may still have made part of it (in the
                // namespace of the container's own attachment).
                if failure >= 5 && setup {
                    let _ = self.world.network.setup_endpoint(&id, endpoint.slot);
                }
                if setup {
                    let network = Some(endpoint.network.clone());
                    return self.feed_refusal(op, &id, network, kind);
                }
                return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
            }
            if setup {
                prop_assert!(
                    self.world.network.attached.contains(&id),
                    "{} endpoint eth{} set up with no namespace of its own attachment",
                    id,
                    endpoint.slot
                );
                let doubled = self.world.network.endpoints_doubled.len();
                let _ = self.world.network.setup_endpoint(&id, endpoint.slot);
                prop_assert!(
                    self.world.network.endpoints_doubled.len() == doubled,
                    "{} endpoint eth{} made twice: a leaked address",
                    id,
                    endpoint.slot
                );
            } else {
                let _ = self.world.network.teardown_endpoint(&id, endpoint.slot);
            }
            self.answer_lost = matches!(failure, 2 | 9);
            return self.reply(op, Done::Ok);
        }
        // The `eth0` a setup makes with the namespace, unless the container
        // was disconnected from its own network: an endpoint of slot 0 in
        // the world, so that one made on top of it shows as doubled.
        let eth0 = matches!(
            call,
            Call::NetworkSetup {
                own_interface: true,
                ..
            }
        );
        if let Some(kind) = kind {
            // A refused setup may still have made part of the attachment.
            let setup = matches!(call, Call::NetworkSetup { .. });
            if failure >= 5 && setup {
                let _ = self.world.network.setup(&id, eth0);
            }
            if setup {
                return self.feed_refusal(op, &id, None, kind);
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        if matches!(call, Call::NetworkSetup { .. }) {
            let network = &mut self.world.network;
            let (doubled, eth0_doubled) = (network.doubled.len(), network.endpoints_doubled.len());
            let _ = network.setup(&id, eth0);
            prop_assert!(
                self.world.network.doubled.len() == doubled,
                "{} attached twice: a leaked address",
                id
            );
            prop_assert!(
                self.world.network.endpoints_doubled.len() == eth0_doubled,
                "{} eth0 made twice: a leaked address",
                id
            );
        } else {
            let _ = self.world.network.teardown(&id);
        }
        self.answer_lost = matches!(failure, 2 | 9);
        self.reply(op, Done::Ok)
    }

    /// A network setup refused: the start it was for (or, for an
    /// endpoint's, the connect of `network` waiting for it) is told why
    /// with the status dockerd gives: a host port in use or an address
    /// taken is a conflict (409), a network gone not found (404), a bad
    /// address invalid (400), a plugin's failure an internal error (500).
    pub(crate) fn feed_refusal(
        &mut self,
        op: OpId,
        id: &ContainerId,
        network: Option<String>,
        kind: FailureKind,
    ) -> Result<(), TestCaseError> {
        // A connect waiting for this setup while the task is up (a hot
        // connect) is answered with the refusal at once.
        let hot = self
            .core
            .container(id)
            .is_some_and(|c| c.task != TaskState::Absent);
        let waiting: Vec<RequestId> = self
            .connects
            .iter()
            .filter(|(r, (i, n))| {
                hot && i == id && Some(n) == network.as_ref() && !self.answered.contains_key(r)
            })
            .map(|(r, _)| *r)
            .collect();
        // Before a start (no task), the start waiting for it is given up
        // and told why at once.
        let starting: Vec<RequestId> = self
            .starts
            .iter()
            .filter(|(r, i)| !hot && *i == id && !self.answered.contains_key(r))
            .map(|(r, _)| *r)
            .collect();
        let from = self.trace.len();
        self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))))?;
        for req in starting {
            prop_assert!(
                self.answered.contains_key(&req),
                "{} (a start of {}) still waits, its network refused ({:?})",
                req,
                id,
                kind
            );
        }
        for req in waiting {
            prop_assert!(
                self.answered.contains_key(&req),
                "{} (a connect of {}) refused by the network ({:?}) still waits",
                req,
                id,
                kind
            );
        }
        let status = match kind {
            FailureKind::AlreadyExists => ErrorKind::Conflict,
            FailureKind::NotFound => ErrorKind::NotFound,
            FailureKind::Invalid => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        };
        for action in &self.trace[from..] {
            let Action::Answer(req, Answer::Error(e)) = action else {
                continue;
            };
            let told = self.starts.get(req) == Some(id)
                || network
                    .as_ref()
                    .is_some_and(|n| self.connects.get(req) == Some(&(id.clone(), n.clone())));
            prop_assert!(
                !told || e.kind == status,
                "{} refused by the network ({:?}): {} told {:?}, not {:?}",
                id,
                kind,
                req,
                e.kind,
                status
            );
        }
        Ok(())
    }

    /// The answer to a call that took effect; lost (a deadline) when the
    /// step said so.
    pub(crate) fn reply(&mut self, op: OpId, done: Done) -> Result<(), TestCaseError> {
        let result = if std::mem::take(&mut self.answer_lost) {
            Err(Failure::new(FailureKind::Deadline, "injected: answer lost"))
        } else {
            Ok(done)
        };
        self.feed(Input::ActionResult(op, result))
    }

    /// The oldest relist of a connection given up answers late, with the
    /// tasks as they were when it was asked for.
    pub(crate) fn late_relist(&mut self) -> Result<(), TestCaseError> {
        let newest = self.newest_relist;
        let late = self
            .outstanding
            .iter()
            .position(|(op, call)| matches!(call, Call::Relist) && op.0 < newest);
        if let Some(n) = late {
            self.resolve(n, 7)?;
        }
        Ok(())
    }
}
