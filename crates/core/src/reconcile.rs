//! Carrying out intents: for each container, the one next containerd call
//! that moves what containerd has towards what the user asked for, and what
//! its result means.
//!
//! This is the only place calls on a container are issued, and it issues
//! them only while the connection is ready. A kill here always has a user's
//! kill, stop or remove (or a passed stop deadline) behind it; a task delete
//! always has a recorded exit, or a task that never started; a start always
//! has a user's start or a policy restart after a recorded exit.

use crate::commands::own_network;
use crate::container::{Container, KillPurpose, Pending, Step, TaskState};
use crate::ids::{ContainerId, OpId};
use crate::input::{Done, Failure, FailureKind, WaitCondition};
use crate::record::{Endpoint, NetworkState, Presence, Record};
use crate::signal::Signal;
use crate::time::Instant;
use crate::{
    Answer, Call, Core, ErrorKind, NetworkCall, OpOwner, ResourceEventKind, TimerKind,
    UserEventKind, error,
};

/// What a network setup's refusal tells the user: a host port in use or
/// an address taken is a conflict; a network that is gone, not found.
fn refusal_kind(kind: FailureKind) -> ErrorKind {
    match kind {
        FailureKind::Invalid => ErrorKind::Invalid,
        FailureKind::AlreadyExists => ErrorKind::Conflict,
        FailureKind::NotFound => ErrorKind::NotFound,
        _ => ErrorKind::Internal,
    }
}

/// A call for one container, by who carries it out.
enum Issue {
    Containerd(Call),
    Network(NetworkCall),
    Volume(crate::volume::VolumeCall),
}

/// The next call of a create: the container, once the volumes it names
/// are made; then each of its volume mounts filled from the image.
fn next_create_step(c: &Container, volumes_ready: bool) -> Option<(Issue, Step)> {
    let id = c.rec.id.clone();
    if !c.made_in_containerd {
        let config = c.rec.config.clone();
        return volumes_ready.then_some((
            Issue::Containerd(Call::CreateContainer { id, config }),
            Step::CreateContainer,
        ));
    }
    let index = c.mounts_to_fill().nth(c.mounts_filled)?;
    let m = &c.rec.config.mounts[index];
    let call = crate::volume::VolumeCall::Fill {
        name: m.volume.clone()?,
        container: id,
        path: m.destination.clone(),
    };
    Some((
        Issue::Volume(call),
        Step::FillVolume(u8::try_from(index).ok()?),
    ))
}

/// The next call for `c`, if any. Pure: a function of the container, of
/// whether the volumes it names are made, and of `now`.
fn next_step(c: &Container, volumes_ready: bool, now: Instant) -> Option<(Issue, Step)> {
    let id = c.rec.id.clone();
    let network = c.rec.network;
    let teardown = || {
        let config = c.rec.config.clone();
        Some((
            Issue::Network(NetworkCall::Teardown {
                id: c.rec.id.clone(),
                config,
            }),
            Step::NetworkTeardown,
        ))
    };
    let endpoint = |e: &Endpoint, setup: bool| {
        let (id, config, endpoint) = (c.rec.id.clone(), c.rec.config.clone(), e.clone());
        Some(if setup {
            let step = Step::EndpointSetup(e.slot);
            (
                Issue::Network(NetworkCall::EndpointSetup {
                    id,
                    config,
                    endpoint,
                }),
                step,
            )
        } else {
            let step = Step::EndpointTeardown(e.slot);
            (
                Issue::Network(NetworkCall::EndpointTeardown {
                    id,
                    config,
                    endpoint,
                }),
                step,
            )
        })
    };
    let endpoints = &c.rec.endpoints;
    // An endpoint released while its task runs: one disconnected, or one
    // in doubt (then set up again).
    let hot_release = endpoints.iter().find(|e| {
        e.state == NetworkState::Attaching || (e.state == NetworkState::Attached && !e.wanted)
    });
    // One wanted and not made: made in the namespace the container's own
    // attachment made, so only once that one is.
    let wanted_setup = endpoints
        .iter()
        .find(|e| e.wanted && e.state == NetworkState::Detached)
        .filter(|_| network == NetworkState::Attached);
    match c.rec.presence {
        Presence::Creating => return next_create_step(c, volumes_ready),
        // Endpoints go before the attachment whose namespace they are in.
        Presence::Discarding
            if let Some(e) = endpoints.iter().find(|e| e.state != NetworkState::Detached) =>
        {
            return endpoint(e, false);
        }
        Presence::Discarding if network != NetworkState::Detached => return teardown(),
        // (A snapshot mounted for a copy is unmounted first.)
        Presence::Discarding => {
            if let Some((call, step)) = c.snapshot_step() {
                return Some((Issue::Containerd(call), step));
            }
            if c.deleted_early && c.delete_not_before.is_some_and(|at| now < at) {
                return None;
            }
            return Some((
                Issue::Containerd(Call::DeleteContainer { id }),
                Step::DeleteContainer,
            ));
        }
        Presence::Created => {}
    }
    let intents = &c.rec.intents;
    let update = |running: bool| {
        let config = c.update_wanted.clone()?;
        Some((
            Issue::Containerd(Call::UpdateResources {
                id: id.clone(),
                config,
                running,
            }),
            Step::UpdateResources,
        ))
    };
    let kill = |signal: Signal, purpose: KillPurpose| {
        let all = signal == Signal::SIGKILL;
        Some((
            Issue::Containerd(Call::Kill {
                id: id.clone(),
                signal,
                all,
            }),
            Step::Kill { signal, purpose },
        ))
    };
    match c.task {
        // A task may exist that the view does not show (a create whose
        // answer was lost): nothing goes ahead, not the release of its
        // attachment nor the container's delete, until a relist has looked.
        // (An absent task is never in doubt: a lost create makes it
        // unknown, and a delete answered done, or a relist, ends a doubt.)
        TaskState::Unknown => None,
        TaskState::Created { .. } | TaskState::Running { .. } => {
            if let Some(&signal) = intents.kills.first() {
                return kill(signal, KillPurpose::User);
            }
            let resume = Some((
                Issue::Containerd(Call::Resume { id: id.clone() }),
                Step::Resume,
            ));
            let frozen = c.paused && matches!(c.task, TaskState::Running { .. });
            if let Some(stop) = intents.stop {
                return match c.stop_deadline {
                    None => kill(stop.signal, KillPurpose::Stop),
                    Some(deadline) if now >= deadline && !c.stop_escalated => {
                        kill(Signal::SIGKILL, KillPurpose::Escalate)
                    }
                    // The stop signal is out; a frozen process acts on it
                    // only once thawed.
                    Some(_) if frozen => resume,
                    Some(_) => None,
                };
            }
            // An exec asked for, or one to look at or release: only while
            // the run is up (its task running, not on its way down).
            if let TaskState::Running { .. } = c.task
                && !intents.remove
                && let Some(step) = c.exec_step()
            {
                return exec_call(c, step);
            }
            // A commit's freeze, read and thaw.
            if let Some((call, step)) = c.snapshot_step() {
                return Some((Issue::Containerd(call), step));
            }
            // Renamed: its peers learn its new name.
            if intents.refresh_names && !intents.remove {
                let call = NetworkCall::RefreshNames {
                    id,
                    name: c.rec.name.clone(),
                };
                return Some((Issue::Network(call), Step::RefreshNames));
            }
            match c.task {
                // Removal was recorded while the task looked gone; it runs.
                TaskState::Running { .. } if intents.remove && !c.stop_escalated => {
                    kill(Signal::SIGKILL, KillPurpose::Escalate)
                }
                // A kill that means "stay down" was delivered, or the
                // removal's SIGKILL: thaw, so that it takes effect.
                TaskState::Running { .. } if frozen && (c.thaw_due || intents.remove) => resume,
                // Connected or disconnected while it runs.
                _ if !intents.remove && hot_release.is_some() => {
                    hot_release.and_then(|e| endpoint(e, false))
                }
                _ if !intents.remove && wanted_setup.is_some() => {
                    wanted_setup.and_then(|e| endpoint(e, true))
                }
                TaskState::Running { .. } if c.update_wanted.is_some() => update(true),
                TaskState::Running { .. } if c.pause_wanted == Some(true) && !c.paused => {
                    Some((Issue::Containerd(Call::Pause { id }), Step::Pause))
                }
                TaskState::Running { .. } if c.pause_wanted == Some(false) && c.paused => resume,
                // Its delete's answer was lost: the task may be gone, and a
                // start sent to it now could only be taken for a run that
                // vanished. A relist says first (seed 6123).
                TaskState::Created { .. } if c.task_in_doubt => None,
                // Killed to stay down after its start was sent: that start
                // is not sent again; a relist says whether it took effect.
                TaskState::Created { .. } if c.start_only_if_taken() => None,
                TaskState::Created { .. } if intents.start && !intents.remove => {
                    Some((Issue::Containerd(Call::StartTask { id }), Step::StartTask))
                }
                // A created task nobody wants started (its start failed or
                // was cancelled): it never ran, so deleting it ends nothing.
                TaskState::Created { .. } => {
                    Some((Issue::Containerd(Call::DeleteTask { id }), Step::DeleteTask))
                }
                _ => None,
            }
        }
        // The shim keeps an exec's status until the task is deleted: an
        // exec whose end was not heard is asked about first.
        // A commit's read, a copy's mount or unmount (the snapshot outlives
        // the task).
        TaskState::Stopped | TaskState::Absent if let Some((call, step)) = c.snapshot_step() => {
            Some((Issue::Containerd(call), step))
        }
        TaskState::Stopped => match c.exec_look_before_delete() {
            Some(step) => exec_call(c, step),
            None => Some((Issue::Containerd(Call::DeleteTask { id }), Step::DeleteTask)),
        },
        // No task: an attachment nobody will use, or one in doubt (a setup
        // or release that failed, lost its answer or was cut by a crash), is
        // released before anything else; endpoints first.
        TaskState::Absent
            if let Some(e) = endpoints.iter().find(|e| {
                e.state == NetworkState::Attaching
                    || (e.state == NetworkState::Attached
                        && (intents.remove || !intents.start || !e.wanted))
            }) =>
        {
            endpoint(e, false)
        }
        TaskState::Absent
            if (network == NetworkState::Attaching
                || (network == NetworkState::Attached && (intents.remove || !intents.start))) =>
        {
            teardown()
        }
        // A copy works on the mounted snapshot: no task is made of it, and
        // it is not deleted, until the copy is done.
        TaskState::Absent if c.rec.rootfs_mounted || c.rootfs_leases > 0 => None,
        TaskState::Absent if intents.remove => Some((
            Issue::Containerd(Call::DeleteContainer { id }),
            Step::DeleteContainer,
        )),
        // Before a start: the new run is created from the updated spec.
        TaskState::Absent if c.update_wanted.is_some() => update(false),
        TaskState::Absent
            if intents.start
                && network == NetworkState::Detached
                && c.rec.config.network.needs_attachment() =>
        {
            let config = c.rec.config.clone();
            let own_interface = !c.rec.own_disconnected;
            Some((
                Issue::Network(NetworkCall::Setup {
                    id,
                    config,
                    own_interface,
                }),
                Step::NetworkSetup,
            ))
        }
        TaskState::Absent if intents.start && wanted_setup.is_some() => {
            wanted_setup.and_then(|e| endpoint(e, true))
        }
        TaskState::Absent if intents.start => {
            Some((Issue::Containerd(Call::CreateTask { id }), Step::CreateTask))
        }
        TaskState::Absent => None,
    }
}

/// `connect` (or `disconnect`) of container `id` on network `name`.
fn connected_event(
    networks: &crate::Map<String, crate::networks::Network>,
    id: &ContainerId,
    name: String,
    connected: bool,
) -> ResourceEventKind {
    // The default `bridge` is the executor's: its id too.
    let network_id = networks.get(&name).map(|n| n.rec.id.clone());
    let container = id.clone();
    if connected {
        ResourceEventKind::NetworkConnected {
            name,
            id: network_id,
            container,
        }
    } else {
        ResourceEventKind::NetworkDisconnected {
            name,
            id: network_id,
            container,
        }
    }
}

/// What a setup's answer says it gave.
fn allocation_of(done: Done) -> Option<crate::record::Allocation> {
    match done {
        Done::Attached(allocation) => allocation,
        _ => None,
    }
}

/// The call of an exec step of `c`.
fn exec_call(c: &Container, step: Step) -> Option<(Issue, Step)> {
    let (Step::StartExec(serial)
    | Step::KillExec(serial)
    | Step::ExecState(serial)
    | Step::DeleteExec(serial)) = step
    else {
        return None;
    };
    let e = c.rec.execs.iter().find(|e| e.serial == serial)?;
    let (id, exec_id) = (c.rec.id.clone(), e.id.clone());
    let call = match step {
        Step::StartExec(_) => Call::StartExec {
            id,
            exec_id,
            spec: e.spec.clone(),
            stdin: e.stdin,
        },
        Step::KillExec(_) => Call::KillExec {
            id,
            exec_id,
            signal: e.kill?,
        },
        Step::ExecState(_) => Call::ExecState { id, exec_id },
        _ => Call::DeleteExec { id, exec_id },
    };
    Some((Issue::Containerd(call), step))
}

impl Core {
    /// Issues the next call for `id` if the core may act and nothing is in flight.
    pub(crate) fn reconcile(&mut self, id: &ContainerId) {
        self.settle_connects(id);
        self.settle_exec_kills(id);
        if !self.conn.is_ready() {
            return;
        }
        let volumes_ready = self
            .containers
            .get(id)
            .is_some_and(|c| self.volumes_ready(&c.rec.config));
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.in_flight.is_some() || c.retry_waiting {
            return;
        }
        if c.pause_wanted == Some(c.paused) {
            // Already so (a relist found it done by an answer we lost, or
            // a commit's freeze did it). A freeze the user now wants is
            // the user's: the commit that made it owes no thaw (it would
            // undo the pause the user was told is done).
            if c.paused && c.rec.intents.commit_thaw {
                c.rec.intents.commit_thaw = false;
                self.out.persist(&c.rec);
            }
            self.pause_over(id, Answer::Done);
            return self.reconcile(id);
        }
        if c.commit_thaw_moot() {
            c.rec.intents.commit_thaw = false;
            self.out.persist(&c.rec);
        }
        let Some((call, step)) = next_step(c, volumes_ready, self.out.now.at) else {
            if let Some(at) = c.delete_not_before.filter(|at| self.out.now.at < *at) {
                self.out.timers.set(TimerKind::RollbackDue(id.clone()), at);
            }
            return;
        };
        if matches!(
            step,
            Step::Kill {
                signal: Signal::SIGKILL,
                ..
            }
        ) {
            // From now on a 137 may be ours, even if the exit overtakes the
            // kill's answer: it is no evidence of the OOM killer.
            c.sigkill_sent = true;
        }
        if step == Step::Pause && c.freeze_of_ours_goes_out() {
            self.out.persist(&c.rec);
        }
        if let Step::Kill { signal, .. } = step
            && c.kill_announced != Some(signal)
        {
            // Announced when first sent (dockerd's order: kill, die, stop),
            // not again for each retry of the same delivery.
            c.kill_announced = Some(signal);
            self.out.publish(id, UserEventKind::Kill { signal });
        }
        match step {
            // Persisted: after a crash, a task a relist finds with the last
            // run's pid (reused) is told from that run by when it was made.
            Step::CreateTask => {
                c.rec.create_sent_at = Some(self.out.now.wall);
                self.out.persist(&c.rec);
            }
            Step::StartTask => {
                c.rec.start_sent = true;
                c.starts_sent += 1;
                self.out.persist(&c.rec);
            }
            // Owned before it is made: a crash from here on leaves a record
            // that releases whatever part of it exists.
            Step::NetworkSetup => {
                c.rec.network = NetworkState::Attaching;
                self.out.persist(&c.rec);
            }
            // A release cut short leaves any part of the attachment: until it
            // is answered, the attachment is in doubt, and a start must set
            // it up anew (after another release), never use what is left.
            Step::NetworkTeardown if c.rec.network == NetworkState::Attached => {
                c.rec.network = NetworkState::Attaching;
                self.out.persist(&c.rec);
            }
            // An endpoint is owned before it is made, and in doubt while
            // its release is in flight, as the container's own attachment.
            Step::EndpointSetup(slot) | Step::EndpointTeardown(slot) => {
                if let Some(e) = c.rec.endpoints.iter_mut().find(|e| e.slot == slot)
                    && e.state != NetworkState::Attaching
                {
                    e.state = NetworkState::Attaching;
                    self.out.persist(&c.rec);
                }
            }
            // Only a task believed never started is deleted while created.
            Step::DeleteTask if matches!(c.task, TaskState::Created { .. }) => {
                c.rec.start_sent = false;
            }
            // Owned before it is made: from here on its process may run, and
            // a restarted daemon asks how it ended.
            Step::StartExec(serial) => {
                if let Some(e) = c.exec_mut(serial) {
                    e.state = crate::exec::ExecState::Starting;
                }
                self.out.persist(&c.rec);
            }
            // A freeze, or a mount, of ours is owned before it is made: a
            // restarted daemon thaws or unmounts it.
            Step::CommitFreeze => {
                c.rec.intents.commit_thaw = true;
                c.freeze_of_ours_goes_out();
                self.out.persist(&c.rec);
            }
            Step::MountRootfs => {
                c.rec.rootfs_mounted = true;
                self.out.persist(&c.rec);
            }
            _ => {}
        }
        let owner = OpOwner::Container(id.clone());
        let op = match call {
            Issue::Containerd(call) => self.out.call(owner, call),
            Issue::Network(call) => self.out.network_call(owner, call),
            Issue::Volume(call) => self.out.volume_call(owner, call),
        };
        c.in_flight = Some((op, step));
        c.activity_before_call = c.last_activity;
        c.last_activity = op;
    }

    /// A hot connect that will not be made while this run lasts is
    /// answered at once: done, if the run ended first (it is made at the
    /// next start, as a connect of a stopped container); refused, if a
    /// disconnect came first.
    fn settle_connects(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        let ended = matches!(c.task, TaskState::Absent | TaskState::Stopped);
        let settled: Vec<(u8, bool)> = c
            .requests
            .iter()
            .filter_map(|(_, p)| match p {
                Pending::Connect(slot) => Some(*slot),
                _ => None,
            })
            .filter_map(|slot| {
                let e = c.rec.endpoints.iter().find(|e| e.slot == slot);
                match e {
                    Some(e) if e.wanted && e.state == NetworkState::Detached && ended => {
                        Some((slot, true))
                    }
                    Some(e) if e.wanted => None,
                    _ => Some((slot, false)),
                }
            })
            .collect();
        for (slot, done) in settled {
            let answer = if done {
                Answer::Done
            } else {
                error(
                    ErrorKind::Conflict,
                    format!("container {id} was disconnected before the connect was made"),
                )
            };
            self.answer_pending_where(id, |p| p == Pending::Connect(slot), || answer.clone());
        }
    }

    pub(crate) fn reconcile_all(&mut self) {
        let ids: Vec<ContainerId> = self.containers.keys().cloned().collect();
        for id in ids {
            if let Some(c) = self.containers.get_mut(&id) {
                c.retry_waiting = false;
            }
            self.reconcile(&id);
        }
    }

    pub(crate) fn restore(&mut self, records: Vec<Record>) {
        let restored_any = !records.is_empty();
        for mut rec in records {
            if self.containers.contains_key(&rec.id) {
                continue;
            }
            if rec.presence == Presence::Creating {
                // The daemon stopped mid-create: roll back, leave nothing.
                rec.presence = if bug!(self.config, HalfCreatedKeptAfterCrash) {
                    Presence::Created
                } else {
                    Presence::Discarding
                };
            }
            if bug!(self.config, StoppedRestartedAtStartup)
                && rec.presence == Presence::Created
                && let Some(exit) = &rec.exit
                && exit.run == rec.run
                && rec
                    .config
                    .restart_policy
                    .wants_restart(exit.exit_code, rec.restart_count, false)
            {
                rec.intents.policy_restart = true;
            }
            if bug!(self.config, AttachingForgottenAfterCrash)
                && rec.network == NetworkState::Attaching
            {
                rec.network = NetworkState::Detached;
            }
            if bug!(self.config, CommitThawNotRecorded) {
                rec.intents.commit_thaw = false;
            }
            let id = rec.id.clone();
            for e in &rec.execs {
                self.exec_owner.insert(e.id.clone(), id.clone());
            }
            let cut_mid_create = rec.presence == Presence::Discarding;
            let mut c = Container::new(rec, TaskState::Unknown, self.config.restart_initial);
            // A create the daemon before had with containerd may still
            // land (containerd does not always end a call whose client
            // went away): deleted now, and again once it no longer can
            // (found by the simulator: a slow create landed after the
            // delete, and the container was left behind in containerd).
            if cut_mid_create {
                c.delete_not_before = Some(self.out.now.at + self.config.create_run_on);
            }
            if c.visible() && !self.names.contains_key(&c.rec.name) {
                self.names.insert(c.rec.name.clone(), id.clone());
            }
            if c.rec.intents.policy_restart {
                self.out.timers.set(
                    TimerKind::RestartBackoff(id.clone()),
                    self.out.now.at + self.config.restart_initial,
                );
            }
            self.containers.insert(id, c);
        }
        // Restored late, while connected: their tasks are unknown until a relist.
        if restored_any && self.conn.is_ready() {
            self.request_refresh();
        }
    }

    /// Attachments found on the host that no record owns (the core never
    /// makes one without a record first, but a store restored from an
    /// older copy would leave them): each is owned now by a record of a
    /// container being discarded (never shown) whose attachment, and
    /// endpoints, are in doubt, persisted first; it is released, then
    /// forgotten.
    pub(crate) fn attachments_found(&mut self, found: Vec<(ContainerId, Vec<u8>)>) {
        for (id, slots) in found {
            if self.containers.contains_key(&id) {
                continue;
            }
            let endpoints = slots
                .into_iter()
                .map(|slot| Endpoint {
                    // Not known here: the release finds it by what exists.
                    network: String::new(),
                    aliases: Vec::new(),
                    ip: None,
                    slot,
                    wanted: false,
                    state: NetworkState::Attaching,
                    allocation: None,
                })
                .collect();
            let rec = Record {
                name: format!("orphan-{id}"),
                config: std::sync::Arc::new(crate::ContainerConfig {
                    network: crate::NetworkMode::Bridge,
                    ..Default::default()
                }),
                presence: Presence::Discarding,
                network: NetworkState::Attaching,
                endpoints,
                ..Record::new(id.clone(), self.out.now.wall)
            };
            self.out.persist(&rec);
            let c = Container::new(rec, TaskState::Absent, self.config.restart_initial);
            self.containers.insert(id.clone(), c);
            self.reconcile(&id);
        }
    }

    pub(crate) fn action_result(&mut self, op: OpId, result: Result<Done, Failure>) {
        let Some(owner) = self.out.ops.remove(&op) else {
            return;
        };
        let id = match owner {
            OpOwner::Connection => {
                if let Err(failure) = result {
                    self.connection_call_failed(op, failure.kind);
                }
                return;
            }
            OpOwner::Container(id) => id,
            OpOwner::Volume(name) => return self.volume_result(op, &name, result),
            OpOwner::Network(name) => return self.network_result(op, &name, result),
            OpOwner::Request(req) => {
                let answer = match result {
                    Ok(_) => Answer::Done,
                    Err(f) => {
                        let kind = match f.kind {
                            FailureKind::NotFound => ErrorKind::NotFound,
                            FailureKind::Invalid => ErrorKind::Invalid,
                            FailureKind::Unavailable => ErrorKind::Unavailable,
                            FailureKind::FailedPrecondition => ErrorKind::Conflict,
                            _ => ErrorKind::Internal,
                        };
                        if f.kind == FailureKind::Unavailable {
                            self.lose_connection();
                        }
                        error(kind, f.message)
                    }
                };
                self.out.answer_now(req, answer);
                return;
            }
        };
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        let Some((in_flight, step)) = c.in_flight else {
            return;
        };
        if in_flight != op {
            return;
        }
        c.in_flight = None;
        let changed_nothing = matches!(&result, Err(f) if f.kind == FailureKind::NotFound);
        c.last_activity = if changed_nothing {
            c.activity_before_call
        } else {
            OpId(self.out.last_op)
        };
        if std::mem::take(&mut c.look_again) {
            self.request_refresh();
        }
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        match result {
            Ok(done) => {
                c.attempts = 0;
                c.uncertain_step = None;
                self.step_done(&id, step, done);
            }
            Err(failure) => self.step_failed(&id, step, failure),
        }
        self.reconcile(&id);
    }

    fn step_done(&mut self, id: &ContainerId, step: Step, done: Done) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        match step {
            // Given up on at its answer bound: the rollback goes on.
            Step::CreateContainer if c.rec.presence == Presence::Discarding => {}
            Step::CreateContainer => {
                c.made_in_containerd = true;
                if c.mounts_to_fill().next().is_none() {
                    self.create_complete(id);
                }
            }
            Step::FillVolume(_) if c.rec.presence == Presence::Discarding => {}
            Step::FillVolume(_) => {
                c.mounts_filled += 1;
                if c.mounts_to_fill().nth(c.mounts_filled).is_none() {
                    self.create_complete(id);
                }
            }
            Step::CreateTask => {
                let Done::TaskCreated { pid } = done else {
                    let failure =
                        Failure::new(FailureKind::Other, "create task answered without a pid");
                    return self.step_failed(id, step, failure);
                };
                c.begin_run(pid);
                c.task_in_doubt = false;
                c.exists_refused_since = None;
                c.rec.began_at = Some(self.out.now.wall);
                c.task = TaskState::Created { pid };
                self.out.persist(&c.rec);
            }
            // Already handled if the exit overtook this answer.
            Step::StartTask => self.start_took_effect(id),
            Step::Kill { signal, purpose } => {
                c.kill_announced = None;
                self.kill_delivered(id, signal, purpose);
            }
            Step::DeleteTask => {
                // Whatever the doubt was (a create or a delete whose answer
                // was lost), containerd now has no task for it.
                c.task = TaskState::Absent;
                c.task_in_doubt = false;
                if c.execs_end_with_run() {
                    self.out.persist(&c.rec);
                }
                let Some(c) = self.containers.get_mut(id) else {
                    return;
                };
                if c.current_exit().is_none() {
                    // The task never ran (its start failed or was cancelled).
                    self.never_ran(id);
                }
            }
            // Deleted at once, and again once the create the daemon
            // before had under way can no longer land (nothing is left
            // behind meanwhile in the common case).
            Step::DeleteContainer if c.delete_not_before.is_some_and(|at| self.out.now.at < at) => {
                c.deleted_early = true;
            }
            Step::DeleteContainer => self.finish_removal(id),
            Step::UpdateResources => {
                if let Some(config) = c.update_wanted.take() {
                    c.rec.config = config;
                    self.out.persist(&c.rec);
                    self.out.publish(id, UserEventKind::Update);
                }
                self.answer_pending_where(id, |p| p == Pending::Update, || Answer::Done);
            }
            Step::Pause | Step::Resume => {
                let frozen = step == Step::Pause;
                c.thaw_due = false;
                // An exit may have overtaken this answer: the run is over.
                if c.current_exit().is_none() {
                    c.paused = frozen;
                    let kind = if frozen {
                        UserEventKind::Pause
                    } else {
                        UserEventKind::Unpause
                    };
                    self.out.publish(id, kind);
                }
                if c.pause_wanted == Some(frozen) {
                    self.pause_over(id, Answer::Done);
                }
            }
            // An interface made (an allocation given) is a `connect`; its
            // release (the allocation recorded goes) a `disconnect`.
            Step::NetworkSetup => {
                c.rec.network = NetworkState::Attached;
                let given = allocation_of(done);
                let connected = given.is_some();
                c.rec.allocation = if bug!(self.config, StaleAllocation) {
                    c.rec.allocation.take().or(given)
                } else {
                    given
                };
                self.out.persist(&c.rec);
                if connected {
                    let name = own_network(&c.rec.config).to_owned();
                    let event = connected_event(&self.networks, id, name, true);
                    self.out.publish_resource(event);
                }
            }
            Step::NetworkTeardown => {
                c.rec.network = NetworkState::Detached;
                let released = c.rec.allocation.is_some();
                if !bug!(self.config, StaleAllocation) {
                    c.rec.allocation = None;
                }
                self.out.persist(&c.rec);
                if released {
                    let name = own_network(&c.rec.config).to_owned();
                    let event = connected_event(&self.networks, id, name, false);
                    self.out.publish_resource(event);
                }
            }
            Step::EndpointSetup(slot) => {
                let mut connected = None;
                if let Some(e) = c.rec.endpoints.iter_mut().find(|e| e.slot == slot) {
                    e.state = NetworkState::Attached;
                    e.allocation = allocation_of(done);
                    connected = e.allocation.is_some().then(|| e.network.clone());
                }
                self.out.persist(&c.rec);
                if let Some(name) = connected {
                    let event = connected_event(&self.networks, id, name, true);
                    self.out.publish_resource(event);
                }
                self.answer_pending_where(id, |p| p == Pending::Connect(slot), || Answer::Done);
            }
            Step::EndpointTeardown(slot) => {
                let mut released = None;
                if let Some(e) = c.rec.endpoints.iter_mut().find(|e| e.slot == slot) {
                    e.state = NetworkState::Detached;
                    if e.allocation.take().is_some() {
                        released = Some(e.network.clone());
                    }
                }
                if let Some(name) = released {
                    let event = connected_event(&self.networks, id, name, false);
                    self.out.publish_resource(event);
                }
                // A disconnected endpoint is forgotten once nothing of it is left.
                c.rec
                    .endpoints
                    .retain(|e| e.wanted || e.state != NetworkState::Detached);
                self.out.persist(&c.rec);
                self.answer_pending_where(id, |p| p == Pending::Disconnect(slot), || Answer::Done);
            }
            Step::StartExec(_) | Step::KillExec(_) | Step::ExecState(_) | Step::DeleteExec(_) => {
                self.exec_step_done(id, step, done);
            }
            Step::CommitFreeze
            | Step::CommitThaw
            | Step::ReadChanges(_)
            | Step::MountRootfs
            | Step::UnmountRootfs => self.snapshot_step_done(id, step),
            Step::RefreshNames => {
                c.rec.intents.refresh_names = false;
                self.out.persist(&c.rec);
            }
        }
    }

    /// The create is done: containerd has the container and its volumes
    /// are filled. From here on it is the user's, with its volumes.
    fn create_complete(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.presence = Presence::Created;
        self.out.persist(&c.rec);
        self.create_done_for_volumes(id);
        self.out.publish(id, UserEventKind::Create);
        self.answer_pending_where(id, |p| p == Pending::Create, || Answer::Done);
    }

    /// The create cannot complete: rolled back (whatever was made of it
    /// goes), and its requester is told `why`.
    pub(crate) fn create_failed(&mut self, id: &ContainerId, why: Answer) {
        self.discard(id);
        self.answer_pending_where(id, |p| p == Pending::Create, || why.clone());
    }

    fn kill_delivered(&mut self, id: &ContainerId, signal: Signal, purpose: KillPurpose) {
        let now = self.out.now;
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if signal == Signal::SIGKILL {
            c.sigkill_sent = true;
        }
        match purpose {
            KillPurpose::User => {
                // A signal that means "stay down", to a frozen task: thaw
                // it next (dockerd's order: the kill, then the resume).
                let stay_down = signal == Signal::SIGKILL || c.rec.intents.exit_on_next;
                c.thaw_due = c.paused && stay_down && !bug!(self.config, PausedKillNeverThawed);
                c.rec.intents.froze_since_kill &= !stay_down;
                if let Some(pos) = c.rec.intents.kills.iter().position(|s| *s == signal) {
                    c.rec.intents.kills.remove(pos);
                }
                let look = c.start_only_if_taken() && matches!(c.task, TaskState::Created { .. });
                self.out.persist(&c.rec);
                self.answer_kills(id, signal, Answer::Done);
                if look {
                    // Did the start sent before it take effect? A relist
                    // says; until then the start is not sent again.
                    self.request_refresh();
                }
            }
            KillPurpose::Stop => {
                // The exit may have been observed before this answer: the
                // stop is over, and no deadline may outlive it.
                let Some(stop) = c.rec.intents.stop else {
                    return;
                };
                let early = bug!(self.config, KillBeforeStopDeadline);
                let never = bug!(self.config, StopNeverEscalates);
                let grace = match (early, never) {
                    (true, _) => stop.grace / 2,
                    (_, true) => std::time::Duration::from_secs(100 * 365 * 86_400),
                    _ => stop.grace,
                };
                let deadline = now.at + grace;
                c.stop_deadline = Some(deadline);
                c.stop_escalated = signal == Signal::SIGKILL;
                self.out
                    .timers
                    .set(TimerKind::StopDeadline(id.clone()), deadline);
            }
            KillPurpose::Escalate => c.stop_escalated = c.current_exit().is_none(),
        }
    }

    fn step_failed(&mut self, id: &ContainerId, step: Step, failure: Failure) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        use FailureKind as K;
        // A create or start whose answer was lost may have taken effect:
        // a later refusal of it proves nothing until a relist has looked.
        if matches!(step, Step::CreateTask | Step::StartTask)
            && matches!(
                failure.kind,
                K::Unavailable | K::Deadline | K::AlreadyExists
            )
        {
            c.uncertain_step = Some(step);
            if step == Step::CreateTask {
                c.task_in_doubt = true;
                if failure.kind == K::AlreadyExists {
                    c.exists_refused_since.get_or_insert(self.out.now.at);
                } else {
                    c.lost_create_at = Some(self.out.now.at);
                }
                // A task it may have made is no longer known absent: nothing
                // that needs it gone (a container delete) and no second create
                // goes ahead before a relist has said what there is.
                if c.task == TaskState::Absent {
                    c.task = TaskState::Unknown;
                }
            }
        }
        // A freeze of ours that containerd refused did not happen: a freeze
        // a relist shows is someone else's, and a "stay down" kill waits
        // for a thaw (found by the properties: a commit's freeze refused
        // on a task frozen from outside left a SIGKILL held for ever).
        if matches!(step, Step::Pause | Step::CommitFreeze)
            && !matches!(failure.kind, K::Unavailable | K::Deadline)
            && c.rec.intents.froze_since_kill != c.froze_since_kill_before
        {
            c.rec.intents.froze_since_kill = c.froze_since_kill_before;
            self.out.persist(&c.rec);
        }
        // A created task's delete whose answer was lost may have taken
        // effect: until a relist has looked, it is not started.
        if step == Step::DeleteTask
            && matches!(failure.kind, K::Unavailable | K::Deadline)
            && matches!(c.task, TaskState::Created { .. })
        {
            c.task_in_doubt = true;
        }
        match (step, failure.kind) {
            (
                Step::StartExec(_) | Step::KillExec(_) | Step::ExecState(_) | Step::DeleteExec(_),
                _,
            ) => self.exec_step_failed(id, step, failure),
            (
                Step::CommitFreeze
                | Step::CommitThaw
                | Step::ReadChanges(_)
                | Step::MountRootfs
                | Step::UnmountRootfs,
                _,
            ) => self.snapshot_step_failed(id, step, failure),
            // Tried again after a backoff, never given up.
            (Step::RefreshNames, _) => self.schedule_retry(id, step),
            // Gone already is what a delete wanted.
            (Step::DeleteTask | Step::DeleteContainer, K::NotFound) => {
                self.step_done(id, step, Done::Ok)
            }
            // A fill cut by a lost answer or an outage is finished by the
            // next (the executor keeps its progress).
            (Step::FillVolume(_), K::Deadline | K::Unavailable) => self.schedule_retry(id, step),
            (Step::FillVolume(index), kind) => {
                let answer_kind = if kind == K::Invalid {
                    ErrorKind::Invalid
                } else {
                    ErrorKind::Internal
                };
                let volume = c
                    .rec
                    .config
                    .mounts
                    .get(usize::from(index))
                    .and_then(|m| m.volume.clone())
                    .unwrap_or_default();
                let message = format!(
                    "filling volume {volume} from the image: {}",
                    failure.message
                );
                self.create_failed(id, error(answer_kind, message));
            }
            (Step::CreateContainer, kind) => {
                let answer_kind = match kind {
                    K::NotFound => ErrorKind::NotFound,
                    K::AlreadyExists => ErrorKind::Conflict,
                    K::Invalid => ErrorKind::Invalid,
                    K::Unavailable => ErrorKind::Unavailable,
                    K::FailedPrecondition | K::Deadline | K::Other => ErrorKind::Internal,
                };
                self.discard(id);
                let message = failure.message.clone();
                self.answer_pending_where(
                    id,
                    |p| p == Pending::Create,
                    || error(answer_kind, message.clone()),
                );
                if kind == K::Unavailable {
                    self.lose_connection();
                }
            }
            // A user's pause or unpause is not retried: it may or may not
            // have taken effect (a relist finds out), and the user is told.
            (Step::Pause | Step::Resume, kind) if c.pause_wanted == Some(step == Step::Pause) => {
                let what = if step == Step::Pause {
                    "pause"
                } else {
                    "unpause"
                };
                let answer = match kind {
                    K::Unavailable => error(
                        ErrorKind::Unavailable,
                        format!(
                            "containerd became unreachable: the {what} of container {id} may not have taken effect"
                        ),
                    ),
                    _ => error(
                        ErrorKind::Internal,
                        format!("Cannot {what} container {id}: {}", failure.message),
                    ),
                };
                if kind == K::Unavailable {
                    self.lose_connection();
                } else {
                    self.request_refresh();
                }
                self.pause_over(id, answer);
            }
            // An update is the user's to retry: nothing is recorded (what
            // containerd did of it before failing shows at the next run).
            (Step::UpdateResources, kind) => {
                c.update_wanted = None;
                let answer = match kind {
                    K::Unavailable => error(
                        ErrorKind::Unavailable,
                        format!("containerd became unreachable: container {id} was not updated"),
                    ),
                    K::Invalid => error(
                        ErrorKind::Invalid,
                        format!("Cannot update container {id}: {}", failure.message),
                    ),
                    _ => error(
                        ErrorKind::Internal,
                        format!("Cannot update container {id}: {}", failure.message),
                    ),
                };
                // Not found: the task (or container) the view holds is not
                // there, whatever the events said: look.
                match kind {
                    K::Unavailable => self.lose_connection(),
                    K::NotFound => self.request_refresh(),
                    _ => {}
                }
                self.answer_pending_where(id, |p| p == Pending::Update, || answer.clone());
            }
            // The setup may have taken effect in part: the record still
            // says Attaching, so it is torn down, then tried again.
            (Step::NetworkSetup, K::Deadline | K::Unavailable) => self.schedule_retry(id, step),
            // Refused (a host port in use, a bad address): retrying cannot
            // help. The start is given up; what the setup made is torn down.
            (Step::NetworkSetup, _) => self.give_up_start(id, step, failure),
            (Step::NetworkTeardown, _) if bug!(self.config, TeardownGivenUp) => {
                c.rec.network = NetworkState::Detached;
                self.out.persist(&c.rec);
                self.reconcile(id);
            }
            // A release is never given up.
            (Step::NetworkTeardown | Step::EndpointTeardown(_), _) => self.schedule_retry(id, step),
            (Step::EndpointSetup(_), K::Deadline | K::Unavailable) => self.schedule_retry(id, step),
            // Refused while the task runs (an address taken, a network
            // gone): the connect is given up and what it made released.
            (Step::EndpointSetup(slot), kind) if c.task != TaskState::Absent => {
                if let Some(e) = c.rec.endpoints.iter_mut().find(|e| e.slot == slot) {
                    e.wanted = false;
                }
                self.out.persist(&c.rec);
                let message = format!("failed to connect container {id}: {}", failure.message);
                let answer = error(refusal_kind(kind), message);
                self.answer_pending_where(id, |p| p == Pending::Connect(slot), || answer.clone());
            }
            // Refused before a start: the start is given up, as for the
            // container's own attachment; the endpoint stays connected.
            (Step::EndpointSetup(_), _) => self.give_up_start(id, step, failure),
            (_, K::Unavailable) => {
                // containerd went away: the intent stays, and the reconnect's
                // relist decides what is still to do.
                self.lose_connection();
            }
            // A create refused as existing again and again, each time after
            // a relist that found no task, with no create of ours that may
            // still be under way in containerd: what exists is a leftover
            // of containerd's (a bundle a create cut halfway left behind),
            // which no retry gets past. The start fails with containerd's
            // words rather than being retried for ever.
            // (A refusal that lasts less than half a request's bound may
            // be containerd still cleaning up: it is retried too. Half, so
            // that its requester hears why within its bound.)
            (Step::CreateTask, K::AlreadyExists)
                if c.attempts_of(step) + 1 >= self.config.retry_attempts_max
                    && c.lost_create_at
                        .is_none_or(|at| self.out.now.at >= at + self.config.create_run_on)
                    && c.exists_refused_since.is_some_and(|since| {
                        self.out.now.at >= since + self.config.request_answer_bound / 2
                    })
                    && !bug!(self.config, LeftoverRetriedForEver) =>
            {
                let refused_for = c
                    .exists_refused_since
                    .take()
                    .map(|since| self.out.now.at.saturating_since(since))
                    .unwrap_or_default();
                c.uncertain_step = None;
                c.attempts = 0;
                self.request_refresh();
                let failure = Failure::new(
                    failure.kind,
                    format!(
                        "{} (refused as existing for {} s, with no task found: a leftover in containerd, cleared by its restart)",
                        failure.message,
                        refused_for.as_secs()
                    ),
                );
                self.give_up_start(id, step, failure);
            }
            // A start refused as "not in created state" follows a start
            // whose answer was lost: the task may run. Look, do not give up.
            (_, K::Deadline | K::AlreadyExists) | (Step::StartTask, K::FailedPrecondition) => {
                // The call may have taken effect: look before trying again.
                self.request_refresh();
                self.schedule_retry(id, step);
            }
            // A refusal after an attempt whose answer was lost proves
            // nothing: that attempt may have created or started the task.
            // Look (a bounded number of times) before giving the start up.
            (Step::CreateTask | Step::StartTask, _)
                if c.uncertain_step == Some(step)
                    && c.attempts_of(step) < self.config.retry_attempts_max =>
            {
                self.request_refresh();
                self.schedule_retry(id, step);
            }
            (Step::CreateTask | Step::StartTask, _) => {
                if c.uncertain_step.take().is_some() {
                    // Given up after an attempt that may have taken effect:
                    // a relist finds what it made, so it is cleaned up.
                    c.attempts = 0;
                    self.request_refresh();
                }
                self.give_up_start(id, step, failure);
            }
            (
                Step::Kill {
                    signal,
                    purpose: KillPurpose::User,
                },
                _,
            ) => {
                // Not running any more, most likely: find out, retry a bounded
                // number of times, then give the kill up with an answer.
                if c.attempts_of(step) + 1 >= self.config.retry_attempts_max {
                    c.attempts = 0;
                    if let Some(pos) = c.rec.intents.kills.iter().position(|s| *s == signal) {
                        c.rec.intents.kills.remove(pos);
                    }
                    self.out.persist(&c.rec);
                    let answer = error(
                        ErrorKind::Internal,
                        format!("cannot kill container {id}: {}", failure.message),
                    );
                    self.answer_kills(id, signal, answer);
                } else {
                    self.schedule_retry(id, step);
                }
                self.request_refresh();
            }
            // A stop, a discard or a removal is never given up: retry with a
            // capped backoff (after a relist, in case the task is gone).
            (Step::Kill { .. }, _) => {
                self.request_refresh();
                self.schedule_retry(id, step);
            }
            // A thaw for a stop or a kill is never given up, like the stop;
            // a relist first, in case the task is not frozen (or gone).
            (Step::Pause | Step::Resume, _) => {
                self.request_refresh();
                self.schedule_retry(id, step);
            }
            // containerd refuses: look again (a task we thought deleted may
            // still be there) and retry.
            (Step::DeleteTask | Step::DeleteContainer, _) => {
                self.request_refresh();
                self.schedule_retry(id, step);
            }
        }
    }

    /// Starting cannot succeed by retrying (a bad command, a missing binary,
    /// a host port in use): drop the start and say why. An auto-remove
    /// container goes, as with dockerd.
    fn give_up_start(&mut self, id: &ContainerId, step: Step, failure: Failure) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.intents.start = false;
        c.rec.start_sent = false;
        c.exists_refused_since = None;
        if c.rec.intents.policy_start {
            // Nobody asked who could be told: the policy's restart
            // is not dropped, it is tried again after its backoff.
            c.rec.intents.policy_start = false;
            c.rec.intents.policy_restart = true;
            let delay = c.restart_delay;
            c.restart_delay = delay.saturating_mul(2).min(self.config.restart_max);
            self.out.timers.set(
                TimerKind::RestartBackoff(id.clone()),
                self.out.now.at + delay,
            );
        } else if c.rec.config.auto_remove {
            c.rec.intents.remove = true;
        }
        self.out.persist(&c.rec);
        let message = format!("failed to start container {id}: {}", failure.message);
        let kind = match (step, failure.kind) {
            (Step::NetworkSetup | Step::EndpointSetup(_), kind) => refusal_kind(kind),
            (_, FailureKind::Invalid) => ErrorKind::Invalid,
            _ => ErrorKind::Internal,
        };
        self.start_abandoned(id, error(kind, message));
    }

    /// The task's start took effect (its answer, its event, an exit that
    /// overtook it, or a relist showing it running): the run's start time
    /// and `start` event are recorded, and the starts it carried out are
    /// answered, also when a stop came after it was sent.
    pub(crate) fn start_took_effect(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        // Already known (its event and its answer each say so).
        if c.rec.started_at.is_some() && !matches!(c.task, TaskState::Created { .. }) {
            return;
        }
        // A start wanted beside a stop is a restart's, due after this run
        // (a plain stop drops the start): this run began, that start stays
        // wanted, and the restart is answered when it takes effect.
        let restart_after = c.rec.intents.start && c.rec.intents.stop.is_some();
        if !restart_after {
            c.rec.intents.start = false;
            c.rec.intents.policy_start = false;
        }
        c.rec.start_sent = false;
        c.rec.started_at.get_or_insert(self.out.now.wall);
        if let TaskState::Created { pid } = c.task {
            c.task = TaskState::Running { pid };
        }
        self.out.persist(&c.rec);
        // As dockerd: each volume's `mount`, then the container's `start`.
        for m in &c.rec.config.mounts {
            if let Some(name) = &m.volume {
                self.out.publish_resource(ResourceEventKind::VolumeMounted {
                    name: name.clone(),
                    container: id.clone(),
                    destination: m.destination.clone(),
                    read_only: m.read_only,
                });
            }
        }
        self.out.publish(id, UserEventKind::Start);
        // (A restart asked after this start was sent wants the next one.)
        let sent = c.starts_sent;
        let answered = move |p: Pending| match p {
            Pending::Start => true,
            Pending::Restart { .. } => !p.restart_unsent(sent),
            _ => false,
        };
        if c.requests
            .iter()
            .any(|(_, p)| matches!(p, Pending::Restart { .. }) && answered(*p))
        {
            self.out.publish(id, UserEventKind::Restart);
        }
        self.answer_pending_where(id, answered, || Answer::Done);
    }

    /// Rolls a create back: whatever containerd may have made is deleted,
    /// then the record. The name is free at once.
    pub(crate) fn discard(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.presence = Presence::Discarding;
        self.out.persist(&c.rec);
        if self.names.get(&c.rec.name) == Some(id) {
            self.names.remove(&c.rec.name);
        }
    }

    pub(crate) fn schedule_retry(&mut self, id: &ContainerId, step: Step) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.retried_step != Some(step) {
            c.retried_step = Some(step);
            c.attempts = 0;
        }
        let attempts = c.attempts;
        c.attempts = c.attempts.saturating_add(1);
        c.retry_waiting = true;
        let delay = self.backoff(attempts);
        self.out
            .timers
            .set(TimerKind::Retry(id.clone()), self.out.now.at + delay);
    }

    /// Answers every pending kill with `signal`: they share one delivery.
    fn answer_kills(&mut self, id: &ContainerId, signal: Signal, answer: Answer) {
        self.answer_pending_where(id, |p| p == Pending::Kill(signal), || answer.clone());
    }

    /// containerd has nothing of the container any more: forget it.
    fn finish_removal(&mut self, id: &ContainerId) {
        // Its volumes that go with it are marked first (see there).
        self.volumes_of_removed(id);
        let Some(c) = self.containers.remove(id) else {
            return;
        };
        self.out
            .actions
            .push_back(crate::Action::Unpersist(id.clone()));
        let was_visible = c.visible();
        if self.names.get(&c.rec.name) == Some(id) {
            self.names.remove(&c.rec.name);
        }
        for e in &c.rec.execs {
            self.exec_owner.remove(&e.id);
        }
        for kind in [
            TimerKind::StopDeadline(id.clone()),
            TimerKind::Retry(id.clone()),
            TimerKind::RestartBackoff(id.clone()),
        ] {
            self.out.timers.cancel(&kind);
        }
        if was_visible {
            self.out.publish(id, UserEventKind::Destroy);
        }
        let exit_code = c.last_exit_code();
        for (req, pending) in c.requests {
            let answer = match pending {
                Pending::Remove => Answer::Done,
                Pending::Wait(
                    WaitCondition::Removed | WaitCondition::NextExit | WaitCondition::NotRunning,
                ) => Answer::Waited {
                    exit_code,
                    error: None,
                },
                _ => error(
                    ErrorKind::NotFound,
                    format!("No such container: {id} (it was removed)"),
                ),
            };
            self.out.answer_pending(req, answer);
        }
        self.reconcile_volumes();
    }
}
