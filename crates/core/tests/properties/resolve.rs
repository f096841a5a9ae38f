//! The world answers the core's calls: carried out, refused, or carried
//! out with the answer lost, as the step says.

use crate::calls::Call;
use crate::harness::Harness;
use crate::world::{Instance, WorldTask};
use holdfast_core::*;
use proptest::prelude::*;
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
            && self.world.up
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
        let connection_call = matches!(call, Call::Subscribe | Call::Relist);
        self.answer_lost = failure == 9 && !connection_call;
        let kind = match failure {
            _ if !self.world.up => Some(FailureKind::Unavailable),
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
            if kind == FailureKind::Unavailable {
                self.subscriptions.remove(&op);
            }
            // A start containerd refuses outright, with no attempt before it
            // that may have taken effect, is answered at once: it is not
            // retried as if it might have worked.
            if let Call::CreateTask { id } | Call::StartTask { id } = &call
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
            // when it is gone (deleted by an attempt whose answer was lost).
            if kind == FailureKind::NotFound {
                match &call {
                    Call::DeleteContainer { id } if !self.world.tasks.contains_key(id) => {
                        self.world.containers.remove(id);
                    }
                    Call::DeleteTask { id }
                        if !matches!(self.world.tasks.get(id), Some(WorldTask::Running(_))) =>
                    {
                        self.world.delete_by_call(id);
                    }
                    _ => {}
                }
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        let freeze = matches!(call, Call::Pause { .. });
        let done = match call {
            Call::Subscribe => {
                self.subscriptions.insert(op);
                return self.feed(Input::Connection(ConnectionFact::StreamLive(op)));
            }
            Call::Relist => {
                // The relist's call is open until its end.
                self.relisting = true;
                self.feed(Input::Relist(op, RelistPart::Begin))?;
                // containerd reads its tasks at some moment after the call:
                // now, or (7) as early as when it was asked for, so that
                // what happened since (an exit the core has seen, a call
                // it made) is not in it.
                let snapshot = self.relist_snapshots.remove(&op);
                let read = match snapshot {
                    Some(tasks) if failure == 7 => tasks,
                    _ => self.world.tasks.clone(),
                };
                let tasks: Vec<TaskInfo> = read
                    .iter()
                    .map(|(id, t)| {
                        let (pid, status, exit_status, exited_at) = match *t {
                            WorldTask::Created(pid) => (pid, TaskStatus::Created, 0, None),
                            WorldTask::Running(pid) if self.world.paused.get(id) == Some(&pid) => {
                                (pid, TaskStatus::Paused, 0, None)
                            }
                            WorldTask::Running(pid) => (pid, TaskStatus::Running, 0, None),
                            WorldTask::Stopped(pid, s, at) => {
                                (pid, TaskStatus::Stopped, s, Some(at))
                            }
                        };
                        TaskInfo {
                            container: id.clone(),
                            pid,
                            status,
                            exit_status,
                            exited_at,
                            oom_kills: (status == TaskStatus::Stopped)
                                .then(|| self.world.oom_kills(id, pid))
                                .flatten(),
                        }
                    })
                    .collect();
                // A shim that does not answer: its task is listed as a
                // placeholder (status unknown, pid 0), which proves nothing.
                let placeholder = (failure == 8 && !tasks.is_empty())
                    .then(|| tasks[n % tasks.len()].container.clone());
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
                return Ok(());
            }
            Call::CreateContainer { id, .. } => {
                if self.world.containers.insert(id, ()).is_some() {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::AlreadyExists, "exists")),
                    ));
                }
                Done::Ok
            }
            Call::CreateTask { id } => {
                if self.world.tasks.contains_key(&id) {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::AlreadyExists, "exists")),
                    ));
                }
                // The kernel may hand the new task a pid this container's
                // earlier, deleted task had.
                let reused = self
                    .world
                    .deleted_pids
                    .get(&id)
                    .and_then(|p| p.last().copied())
                    .filter(|pid| matches!(failure, 8 | 9) && !self.world.tasks.values().any(|t| matches!(t, WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..) if p == pid)));
                let pid = reused.unwrap_or_else(|| {
                    self.world.next_pid += 1;
                    self.world.next_pid
                });
                self.world
                    .latest
                    .insert((id.clone(), pid), self.world.instances.len());
                let after = self.world.last_exit.get(&id).copied();
                let asked_at = self
                    .world
                    .create_asked
                    .get(&id)
                    .copied()
                    .unwrap_or(self.now.wall);
                self.world.tasks.insert(id, WorldTask::Created(pid));
                self.world.instances.push(Instance {
                    pid,
                    exit: None,
                    oom: false,
                    oom_in_order: false,
                    sigkilled: false,
                    after,
                    oom_event_in_run: false,
                    start_sent: false,
                    asked_at,
                    deleted_unstarted: false,
                    ran: false,
                });
                Done::TaskCreated { pid }
            }
            Call::StartTask { id } => match self.world.tasks.get_mut(&id) {
                Some(t @ WorldTask::Created(_)) => {
                    let WorldTask::Created(pid) = *t else {
                        unreachable!()
                    };
                    *t = WorldTask::Running(pid);
                    if let Some(inst) = self.world.instance(&id, pid) {
                        inst.ran = true;
                    }
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
                    self.start_reached(&id, op);
                    // The shim publishes the start: before the answer (7),
                    // or after it (also when the answer is lost).
                    let event = ContainerdEvent::TaskStart {
                        container: id.clone(),
                        pid,
                        published_at: Some(self.now.wall),
                    };
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
                    return self.event(event);
                }
                _ => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "not created")),
                    ));
                }
            },
            Call::Kill { id, signal, .. } => {
                // A user's "stay down" kill that reaches a frozen task: the
                // core may thaw it now, whether or not the task dies frozen
                // (it cannot know).
                if let Some(WorldTask::Running(pid) | WorldTask::Created(pid)) =
                    self.world.tasks.get(&id)
                    && self.user_kill_ops.contains_key(&op)
                    && self.stays_down(&id, signal)
                {
                    self.world.stay_down_sent.insert((id.clone(), *pid));
                    // (Frozen, or shown so: a thaw by someone else that the
                    // core has not yet seen makes its thaw a harmless one.)
                    let shown_paused = self.core.container(&id).is_some_and(|c| c.paused);
                    if self.world.paused.get(&id) == Some(pid) || shown_paused {
                        self.world.stay_down_frozen.insert(id.clone());
                    }
                }
                match self.world.tasks.get(&id).cloned() {
                    // A frozen process dies of SIGKILL only, and under a v1
                    // freezer only once thawed; other signals wait for a thaw
                    // (and this world's processes forget them).
                    Some(WorldTask::Running(pid))
                        if self.world.paused.get(&id) == Some(&pid)
                            && (signal != Signal::SIGKILL || self.world.frozen_holds_kill) =>
                    {
                        if signal == Signal::SIGKILL {
                            if let Some(inst) = self.world.instance(&id, pid) {
                                inst.sigkilled = true;
                            }
                            self.world.kill_on_thaw.insert(id, pid);
                        }
                        Done::Ok
                    }
                    Some(WorldTask::Running(pid)) | Some(WorldTask::Created(pid)) => {
                        // Every other run is PID 1 without a handler: it ignores
                        // SIGTERM, SIGINT and SIGQUIT (what stop signals are).
                        let ignores_term = pid % 2 == 1;
                        let stops = matches!(signal.number(), 2 | 3 | 15) && !ignores_term;
                        if signal == Signal::SIGKILL || stops {
                            if signal == Signal::SIGKILL
                                && let Some(inst) = self.world.instance(&id, pid)
                            {
                                inst.sigkilled = true;
                            }
                            let status = 128 + signal.number();
                            if failure == 7 {
                                self.world_exit(&id, pid, status, false)?;
                                return self.reply(op, Done::Ok);
                            }
                            self.reply(op, Done::Ok)?;
                            return self.world_exit(&id, pid, status, false);
                        }
                        Done::Ok
                    }
                    _ => {
                        return self.feed(Input::ActionResult(
                            op,
                            Err(Failure::new(FailureKind::NotFound, "no task")),
                        ));
                    }
                }
            }
            Call::DeleteTask { id } => match self.world.tasks.get(&id) {
                Some(WorldTask::Stopped(..)) | Some(WorldTask::Created(_)) => {
                    self.world.delete_by_call(&id);
                    Done::Ok
                }
                Some(WorldTask::Running(pid)) => {
                    // The core deletes a task only once it knows its run
                    // ended or it never started: one a start may have
                    // started waits for the evidence (a relist, the start's
                    // event), never guessed away.
                    prop_assert!(false, "{} deleted while running (pid {})", id, pid);
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "running")),
                    ));
                }
                None => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "no task")),
                    ));
                }
            },
            Call::UpdateResources { id, running, .. } => {
                let task_runs = matches!(
                    self.world.tasks.get(&id),
                    Some(WorldTask::Running(_) | WorldTask::Created(_))
                );
                if !self.world.containers.contains_key(&id) || running && !task_runs {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "not found")),
                    ));
                }
                Done::Ok
            }
            Call::Pause { id } | Call::Resume { id } => match self.world.tasks.get(&id) {
                Some(WorldTask::Running(pid)) => {
                    let pid = *pid;
                    let frozen = self.world.paused.get(&id) == Some(&pid);
                    if frozen == freeze {
                        return self.feed(Input::ActionResult(
                            op,
                            Err(Failure::new(FailureKind::FailedPrecondition, "already so")),
                        ));
                    }
                    if freeze {
                        self.world.stay_down_frozen.remove(&id);
                        self.world.paused.insert(id, pid);
                    } else {
                        self.world.paused.remove(&id);
                        if self.world.kill_on_thaw.remove(&id) == Some(pid) {
                            self.reply(op, Done::Ok)?;
                            return self.world_exit(&id, pid, 137, false);
                        }
                    }
                    Done::Ok
                }
                Some(_) => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "not running")),
                    ));
                }
                None => {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "no task")),
                    ));
                }
            },
            Call::NetworkSetup { .. }
            | Call::NetworkTeardown { .. }
            | Call::EndpointSetup { .. }
            | Call::EndpointTeardown { .. } => Done::Ok,
            Call::DeleteContainer { id } => {
                if self.world.tasks.contains_key(&id) {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::FailedPrecondition, "has task")),
                    ));
                }
                if self.world.containers.remove(&id).is_none() {
                    return self.feed(Input::ActionResult(
                        op,
                        Err(Failure::new(FailureKind::NotFound, "none")),
                    ));
                }
                Done::Ok
            }
        };
        self.reply(op, done)
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
            let key = (id.clone(), endpoint.slot);
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
                // A refused setup may still have made part of it.
                if failure >= 5 && setup {
                    self.world.endpoints.insert(key);
                }
                if setup {
                    let network = Some(endpoint.network.clone());
                    return self.feed_refusal(op, &id, network, kind);
                }
                return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
            }
            if setup {
                prop_assert!(
                    self.world.attached.contains(&id),
                    "{} endpoint eth{} set up with no namespace of its own attachment",
                    id,
                    endpoint.slot
                );
                prop_assert!(
                    self.world.endpoints.insert(key),
                    "{} endpoint eth{} made twice: a leaked address",
                    id,
                    endpoint.slot
                );
            } else {
                self.world.endpoints.remove(&key);
                // Slot 0 takes the `eth0` its own attachment made with it.
                if endpoint.slot == 0 {
                    self.world.own_eth0.remove(&id);
                }
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
                self.world.attached.insert(id.clone());
                if eth0 {
                    self.world.endpoints.insert((id.clone(), 0));
                    self.world.own_eth0.insert(id.clone());
                }
            }
            if setup {
                return self.feed_refusal(op, &id, None, kind);
            }
            return self.feed(Input::ActionResult(op, Err(Failure::new(kind, "injected"))));
        }
        if matches!(call, Call::NetworkSetup { .. }) {
            prop_assert!(
                self.world.attached.insert(id.clone()),
                "{} attached twice: a leaked address",
                id
            );
            if eth0 {
                prop_assert!(
                    self.world.endpoints.insert((id.clone(), 0)),
                    "{} eth0 made twice: a leaked address",
                    id
                );
                self.world.own_eth0.insert(id.clone());
            }
        } else {
            self.world.attached.remove(&id);
            self.world.endpoints.remove(&(id.clone(), 0));
            self.world.own_eth0.remove(&id);
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
}

impl Harness {
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
