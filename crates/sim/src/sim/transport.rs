//! The calls between holdfastd and containerd (and its network side): each
//! issued with a latency, refused, cut by containerd going away, or timed
//! out, before or after it took effect; its answer, and what the adapter
//! then says of containerd's reachability.

use super::{Ev, Sim, SimFailure};
use crate::faults::FaultKind;
use holdfast_core::{
    Call, ConnectionFact, ContainerId, Done, Failure, FailureKind, Input, NetworkCall, OpId,
    RelistPart, TaskInfo, VolumeCall,
};
use std::time::Duration;

/// A call the core issued, by who carries it out in the world.
#[derive(Clone, Debug)]
pub(super) enum WorldCall {
    Containerd(Call),
    Network(NetworkCall),
    Volume(VolumeCall),
}

impl WorldCall {
    /// Carried out by the daemon's own executors (network, volumes), not
    /// by containerd: they work through containerd's outages.
    pub(super) fn is_network(&self) -> bool {
        matches!(self, WorldCall::Network(_) | WorldCall::Volume(_))
    }
}

#[derive(Debug)]
pub(super) struct PendingCall {
    pub(super) call: WorldCall,
    pub(super) generation: u32,
    /// The daemon that issued it crashed: its effect may still land, its
    /// result goes nowhere.
    pub(super) orphan: bool,
    pub(super) result: Option<Result<Done, Failure>>,
    pub(super) relist: Option<Vec<TaskInfo>>,
    /// Deliver part of the relist, then fail it.
    pub(super) relist_breaks: bool,
    /// The reply is already scheduled (a deadline or an early failure).
    pub(super) reply_fixed: bool,
}

impl Sim {
    pub(super) fn take_fault(&mut self, kind: FaultKind) -> bool {
        if let Some(n) = self.armed.get_mut(&kind)
            && *n > 0
        {
            *n -= 1;
            self.stats.faults.add(kind);
            return true;
        }
        let hit = self.rng_fault.chance(self.profile.permille(kind));
        if hit {
            self.stats.faults.add(kind);
        }
        hit
    }

    pub(super) fn issue(&mut self, op: OpId, call: WorldCall) {
        let key = (self.daemon, op);
        let mut pending = PendingCall {
            call,
            generation: 0,
            orphan: false,
            result: None,
            relist: None,
            relist_breaks: false,
            reply_fixed: false,
        };
        let network = pending.call.is_network();
        if !self.cd.up && !network {
            pending.result = Some(Err(Failure::new(
                FailureKind::Unavailable,
                "connection refused",
            )));
            pending.reply_fixed = true;
            self.calls.insert(key, pending);
            self.schedule(self.now, Ev::CallReply { key, generation: 0 });
            return;
        }
        let latency = match &pending.call {
            // A loaded containerd is slow to create now and then, past a
            // request's answer bound (the create runs on). Derived, not
            // drawn, so every seed's streams stay as they were.
            WorldCall::Containerd(Call::CreateContainer { .. }) if key.1.0 % 16 == 5 => {
                let max = super::ms_of(crate::check::CREATE_ANSWER_MAX);
                self.rng_world.ms(max / 2, max)
            }
            WorldCall::Containerd(Call::CreateContainer { .. }) => self.rng_world.ms(5, 30),
            WorldCall::Containerd(Call::CreateTask { .. }) => self.rng_world.ms(35, 58),
            WorldCall::Containerd(Call::StartTask { .. }) => self.rng_world.ms(6, 9),
            WorldCall::Network(NetworkCall::Setup { .. } | NetworkCall::EndpointSetup { .. }) => {
                self.rng_world.ms(20, 60)
            }
            // A commit writes the container's changes out: a while.
            WorldCall::Containerd(Call::ReadChanges { .. }) => {
                let max = super::ms_of(crate::check::COMMIT_READ_MAX);
                self.rng_world.ms(50, max)
            }
            // A fill copies the image's files into the volume.
            WorldCall::Volume(VolumeCall::Fill { .. }) => self.rng_world.ms(5, 500),
            // A busy containerd lists slowly now and then: calls made and
            // answered meanwhile overtake the listing, and a listing of a
            // connection already given up arrives during the next one's.
            WorldCall::Containerd(Call::Relist) if self.rng_world.chance(150) => {
                self.rng_world.ms(20, 1500)
            }
            _ => self.rng_world.ms(0, 3),
        };
        if !network && self.take_fault(FaultKind::RpcUnavailable) {
            if matches!(pending.call, WorldCall::Containerd(Call::Relist))
                && self.rng_fault.chance(500)
            {
                // Fails midway: part of the list, then the failure.
                pending.relist_breaks = true;
                self.calls.insert(key, pending);
                self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
                return;
            }
            // Half the time the call reached containerd before the
            // connection broke: it takes effect, and the caller only hears
            // that containerd went away.
            let failure = Failure::new(FailureKind::Unavailable, "injected: unavailable");
            self.note_lost_create(&pending.call);
            self.fail_maybe_after_effect(key, pending, failure, latency, true);
            let at = self.now + self.rng_world.ms(0, 2);
            self.schedule(at, Ev::CallReply { key, generation: 0 });
            return;
        }
        if self.take_fault(FaultKind::RpcRefused) {
            use FailureKind as K;
            let kinds: &[FailureKind] = match &pending.call {
                WorldCall::Containerd(Call::Subscribe | Call::Relist) => &[K::Other],
                WorldCall::Containerd(Call::CreateContainer { .. }) => &[
                    K::NotFound,
                    K::AlreadyExists,
                    K::Invalid,
                    K::FailedPrecondition,
                    K::Other,
                ],
                WorldCall::Containerd(Call::CreateTask { .. }) => &[
                    K::AlreadyExists,
                    K::Invalid,
                    K::FailedPrecondition,
                    K::Other,
                ],
                // A host port in use; a plugin that fails.
                WorldCall::Network(NetworkCall::Setup { .. }) => &[K::AlreadyExists, K::Other],
                WorldCall::Network(
                    NetworkCall::Teardown { .. } | NetworkCall::EndpointTeardown { .. },
                ) => &[K::Other],
                // An address taken; a network removed meanwhile.
                WorldCall::Network(NetworkCall::EndpointSetup { .. }) => {
                    &[K::AlreadyExists, K::NotFound, K::Other]
                }
                // A subnet that overlaps; a plugin or rule that fails.
                WorldCall::Network(NetworkCall::Define { .. }) => &[K::AlreadyExists, K::Other],
                WorldCall::Network(
                    NetworkCall::Undefine { .. } | NetworkCall::RefreshNames { .. },
                ) => &[K::Other],
                WorldCall::Containerd(_) => &[K::FailedPrecondition, K::Other],
                WorldCall::Volume(_) => &[K::Other],
            };
            let kind = self.rng_fault.pick(kinds);
            pending.result = Some(Err(Failure::new(kind, "injected: refused")));
            pending.reply_fixed = true;
            self.calls.insert(key, pending);
            self.schedule(self.now + latency, Ev::CallReply { key, generation: 0 });
            return;
        }
        if self.take_fault(FaultKind::RpcDeadline) {
            let failure = Failure::new(FailureKind::Deadline, "injected: deadline exceeded");
            self.note_lost_create(&pending.call);
            // One task create in two cut by its deadline is cut halfway in
            // containerd and leaves its bundle behind (seen under load): no
            // task, and every later create refused as existing. Derived,
            // not drawn, so every seed's streams stay as they were.
            let leftover = match &pending.call {
                WorldCall::Containerd(Call::CreateTask { id }) if key.1.0.is_multiple_of(2) => {
                    Some(id.clone())
                }
                _ => None,
            };
            let may_take_effect = leftover.is_none();
            self.fail_maybe_after_effect(key, pending, failure, latency, may_take_effect);
            if let Some(id) = leftover {
                self.cd.leftovers.insert(id, self.now);
            }
            let max = super::ms_of(crate::check::CALL_ANSWER_MAX);
            let at = self.now + self.rng_fault.ms(2000, max);
            self.schedule(at, Ev::CallReply { key, generation: 0 });
            return;
        }
        self.calls.insert(key, pending);
        self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
    }

    /// An injected failure whose answer is fixed: half the time the call
    /// still takes effect (it reached containerd before the failure), the
    /// caller schedules when the failure is heard.
    fn fail_maybe_after_effect(
        &mut self,
        key: (u64, OpId),
        mut pending: PendingCall,
        failure: Failure,
        latency: Duration,
        may_take_effect: bool,
    ) {
        pending.result = Some(Err(failure));
        pending.reply_fixed = true;
        let takes_effect = self.rng_fault.chance(500) && may_take_effect;
        self.calls.insert(key, pending);
        if takes_effect {
            self.schedule(self.now + latency, Ev::CallArrive { key, generation: 0 });
        }
    }

    /// A task create went unanswered: for the checker, when (see
    /// `Containerd::lost_creates`).
    fn note_lost_create(&mut self, call: &WorldCall) {
        if let WorldCall::Containerd(Call::CreateTask { id }) = call {
            self.cd.lost_creates.insert(id.clone(), self.now);
        }
    }

    pub(super) fn call_arrive(&mut self, key: (u64, OpId), generation: u32) {
        let Some(pending) = self.calls.get(&key) else {
            return;
        };
        if pending.generation != generation || (!self.cd.up && !pending.call.is_network()) {
            return;
        }
        let call = pending.call.clone();
        let mut fx = Vec::new();
        let result = match &call {
            WorldCall::Network(net) => self.net.carry_out(net),
            WorldCall::Volume(call) => self.carry_out_volume(call),
            WorldCall::Containerd(call) => match call {
                Call::Subscribe => Ok(Done::Ok),
                Call::Relist => {
                    let list = self.cd.relist();
                    if let Some(p) = self.calls.get_mut(&key) {
                        p.relist = Some(list);
                    }
                    Ok(Done::Ok)
                }
                Call::CreateContainer { id, .. } => self.cd.create_container(id),
                Call::CreateTask { id } => {
                    let reuse = self.pick_reused_pid();
                    self.cd.create_task(id, self.now, reuse, &mut fx)
                }
                Call::StartTask { id } => self.cd.start_task(id, &mut fx),
                Call::Kill { id, signal, .. } => {
                    let kill_delay = self.rng_world.ms(5, 15);
                    self.cd.kill(id, *signal, kill_delay, &mut fx)
                }
                Call::UpdateResources { id, running, .. } => self.cd.update_resources(id, *running),
                Call::Pause { id } => self.cd.pause(id, &mut fx),
                Call::Resume { id } => self.cd.resume(id, &mut fx),
                Call::DeleteTask { id } => self.cd.delete_task(id, &mut fx),
                Call::DeleteContainer { id } => self.cd.delete_container(id),
                Call::StartExec { id, exec_id, .. } => self.cd.start_exec(id, exec_id, &mut fx),
                Call::KillExec {
                    id,
                    exec_id,
                    signal,
                } => self.cd.kill_exec(id, exec_id, *signal, &mut fx),
                Call::ExecState { id, exec_id } => self.cd.exec_state(id, exec_id),
                Call::DeleteExec { id, exec_id } => self.cd.delete_exec(id, exec_id),
                Call::ResizePty { id, exec_id, .. } => self.cd.resize(id, exec_id.as_deref()),
                Call::ReadChanges { .. }
                | Call::MountRootfs { .. }
                | Call::UnmountRootfs { .. } => self.cd.snapshot_use(call),
            },
        };
        self.effects(fx);
        let Some(pending) = self.calls.get_mut(&key) else {
            return;
        };
        if pending.reply_fixed {
            return;
        }
        pending.result = Some(result);
        let delay = match call {
            // The first event (our ping) arrives ~23 ms after subscribing.
            WorldCall::Containerd(Call::Subscribe) => self.rng_world.ms(15, 30),
            _ => self.rng_world.ms(0, 2),
        };
        self.schedule(self.now + delay, Ev::CallReply { key, generation });
    }

    /// A pid to hand out again, now and then: one whose exit holdfast has
    /// recorded (or whose container is gone), so the truth the checker
    /// compares with stays reachable.
    ///
    /// The same container's pid too: a new run that reuses it, with the
    /// CreateTask answer lost, must still be told from the old one.
    fn pick_reused_pid(&mut self) -> Option<u32> {
        let candidates: Vec<u32> = self
            .cd
            .reusable_pids()
            .into_iter()
            .filter(|pid| {
                self.cd.truth.get(pid).is_some_and(|t| {
                    self.checker.exit_verified(&t.container, *pid, t.created_at)
                        || !self.cd.containers.contains(&t.container)
                })
            })
            .collect();
        if candidates.is_empty() || !self.take_fault(FaultKind::PidReuse) {
            return None;
        }
        let pid = self.rng_fault.pick(&candidates);
        self.note(format!("FAULT pid {pid} is reused"));
        Some(pid)
    }

    pub(super) fn call_reply(
        &mut self,
        key: (u64, OpId),
        generation: u32,
    ) -> Result<(), SimFailure> {
        match self.calls.get(&key) {
            Some(p) if p.generation == generation => {}
            _ => return Ok(()),
        }
        let Some(pending) = self.calls.remove(&key) else {
            return Ok(());
        };
        if pending.orphan || key.0 != self.daemon || self.core.is_none() {
            return Ok(());
        }
        let op = key.1;
        let Some(result) = pending.result else {
            return Err(self.failure(format!("simulator bug: {op} replied without a result")));
        };
        // The adapter's `settle`: a call that found containerd away says
        // so first; an answer from containerd (even an error) after that,
        // or the first ever, says it is back. A deadline says neither.
        self.mid_relist = true;
        let noted = match &result {
            // The network calls never reach containerd: they say nothing of it.
            _ if pending.call.is_network() => Ok(()),
            Err(f) if f.kind == FailureKind::Unavailable => {
                self.note_unreachable(&f.message.clone())
            }
            Err(f) if f.kind == FailureKind::Deadline => Ok(()),
            _ => self.note_reachable(),
        };
        self.mid_relist = false;
        noted?;
        if self.core.is_none() {
            return Ok(());
        }
        match (pending.call, result) {
            (WorldCall::Containerd(Call::Subscribe), Ok(_)) => {
                self.stream = Some(op);
                self.feed(Input::Connection(ConnectionFact::StreamLive(op)))
            }
            (WorldCall::Containerd(Call::Relist), Ok(_)) => {
                let tasks = pending.relist.unwrap_or_default();
                self.mid_relist = true;
                self.feed(Input::Relist(op, RelistPart::Begin))?;
                let shown = if pending.relist_breaks {
                    tasks.len() / 2
                } else {
                    tasks.len()
                };
                let mut listed = Vec::new();
                for mut task in tasks.into_iter().take(shown) {
                    listed.push(task.container.clone());
                    // A shim that does not answer in time: containerd lists
                    // its task as UNKNOWN with pid 0, a placeholder that
                    // proves nothing.
                    if self.rng_fault.chance(20) {
                        // Status unknown; the pid is 0 or still the real one.
                        if self.rng_fault.chance(500) {
                            task.pid = 0;
                        }
                        task.status = holdfast_core::TaskStatus::Unknown;
                        task.exit_status = 0;
                        task.exited_at = None;
                    }
                    self.feed(Input::Relist(op, RelistPart::Task(task)))?;
                }
                self.mid_relist = false;
                if pending.relist_breaks {
                    let failure =
                        Failure::new(FailureKind::Unavailable, "injected: relist broke midway");
                    self.mid_relist = true;
                    let noted = self.note_unreachable("injected: relist broke midway");
                    self.mid_relist = false;
                    noted?;
                    self.feed(Input::ActionResult(op, Err(failure)))
                } else {
                    let listed: std::collections::BTreeSet<ContainerId> =
                        listed.into_iter().collect();
                    self.feed(Input::Relist(op, RelistPart::End))?;
                    let relist_op = op.0;
                    let activity = &self.activity;
                    let in_flight = &self.in_flight_for;
                    let settled = |id: &ContainerId| {
                        activity.get(id).is_none_or(|a| *a < relist_op)
                            && !in_flight.values().any(|c| c == id)
                    };
                    let result =
                        self.checker
                            .relist_complete(self.core.as_ref(), op, &listed, settled);
                    result.map_err(|m| self.failure(m))
                }
            }
            (call, result) => {
                if let WorldCall::Containerd(Call::ExecState { id, .. }) = call {
                    self.exec_news = Some(id);
                }
                self.feed(Input::ActionResult(op, result))
            }
        }
    }

    pub(super) fn note_reachable(&mut self) -> Result<(), SimFailure> {
        if self.reachable == Some(true) {
            return Ok(());
        }
        self.reachable = Some(true);
        self.feed(Input::Connection(ConnectionFact::Connected))
    }

    pub(super) fn note_unreachable(&mut self, reason: &str) -> Result<(), SimFailure> {
        self.reachable = Some(false);
        self.feed(Input::Connection(ConnectionFact::Unreachable(
            reason.to_owned(),
        )))
    }
}
