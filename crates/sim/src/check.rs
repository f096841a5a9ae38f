//! The invariants, checked against the fake containerd's ground truth after
//! every step, and the convergence that the liveness phase must reach.

use crate::model::Containerd;
use holdfast_core::{
    Action, Answer, Call, Command, ConnectionState, ContainerConfig, ContainerId, Core, CoreConfig,
    ExitRecord, Instant, Presence, RequestId, RestartPolicy, Status, UserEventKind, WaitCondition,
};
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UserKind {
    Create,
    Start,
    Stop,
    Kill,
    Restart,
    Remove,
    Wait(WaitCondition),
    /// A record edit: rename, restart policy update.
    Edit,
    Pause,
    Unpause,
    /// `docker exec` create, start, or a terminal's resize.
    Exec,
    /// `docker volume` create, rm, prune.
    Volume,
    /// `docker commit`, `cp`: a hold on the container's snapshot.
    Snapshot,
}

/// The container a request for an unknown exec is counted against.
const UNKNOWN_CONTAINER: &str = "no-such-container";

#[derive(Debug)]
struct Request {
    kind: UserKind,
    container: ContainerId,
    issued: Instant,
    /// When it must have been answered by (none for a wait).
    bound: Option<Duration>,
    /// A start may wait past `bound` for its outcome, up to this, while
    /// the core stays connected and the start is still wanted.
    final_bound: Option<Duration>,
}

/// What the user asked of a container, which is what may cause a kill,
/// delete or start.
#[derive(Debug, Default)]
struct Asked {
    /// Last stop, kill, restart or remove.
    kill_at: Option<Instant>,
    start: bool,
    remove: bool,
    create_done: bool,
    config: Option<ContainerConfig>,
    /// Last user SIGKILL or remove: a SIGKILL without a grace period.
    sigkill_at: Option<Instant>,
    /// The shortest grace period of the stops asked for since the last exit.
    stop_grace: Option<Duration>,
    /// When the first signal other than SIGKILL went out after that stop.
    stop_signal_sent: Option<Instant>,
    /// A stop (or a kill that means "stay down", by dockerd's rule) came
    /// after the last user start: no restart policy may start it again.
    stayed_down: bool,
    /// A user start or restart not yet carried out (no start sent since).
    start_wanted: bool,
    /// The kill that set `stayed_down`: refused (not running), it did not.
    stayed_down_by: Option<RequestId>,
    /// Signals the user asked for and the current run has not ended: each
    /// with the request that asked (a refused request takes its permit
    /// back). A stop permits its resolved signal and SIGKILL after the grace
    /// period; a forced remove, SIGKILL.
    permits: Vec<(RequestId, holdfast_core::Signal, Instant)>,
    /// The user stopped, killed, removed or restarted it at some point
    /// (`unless-stopped` and dockerd's stay-down rule may then rule out a
    /// policy restart; only untouched containers are demanded one).
    meddled: bool,
    /// A forced remove that was not refused: the container must be gone
    /// from both sides once the world heals.
    force_removed: bool,
    /// When a SIGKILL was last sent: a 137 after it is ours, not the OOM
    /// killer's.
    sigkill_sent_at: Option<Instant>,
    /// The last user pause and unpause: what may freeze or thaw a task
    /// (a stop, kill or remove may thaw one too).
    pause_at: Option<Instant>,
    unpause_at: Option<Instant>,
    /// A user asked for a resource update.
    update_asked: bool,
}

#[derive(Debug)]
pub struct Checker {
    config: CoreConfig,
    pub checks: u64,
    outstanding: BTreeMap<RequestId, Request>,
    asked: BTreeMap<ContainerId, Asked>,
    /// The container of each exec a user created.
    exec_containers: BTreeMap<String, ContainerId>,
    /// Recorded exits by container, pid and run (pids are reused).
    exits: BTreeMap<(ContainerId, u32, u64), ExitRecord>,
    /// Processes (container, pid, created) whose exit was recorded.
    verified: std::collections::BTreeSet<(ContainerId, u32, Instant)>,
    dies: BTreeMap<(ContainerId, u32, u64), u32>,
    /// Since when the core has been connected without a break.
    ready_since: Option<Instant>,
    /// Exits whose event was lost on a live stream, by container and pid:
    /// only a relist (the periodic one at the latest) can tell them.
    lost_exits: std::collections::BTreeSet<(ContainerId, u32)>,
    /// Tasks whose TaskDelete reached the core: the core has a reason to
    /// look (a relist) even if the exit before it was lost.
    deletes_seen: BTreeMap<(ContainerId, u32), Instant>,
    /// The last OOM event delivered to this daemon, per container, and
    /// whether an exit of another pid came after it (which the core takes
    /// as the OOM's run ending).
    oom_delivered: BTreeMap<ContainerId, (Instant, bool)>,
    /// Runs whose recorded exit their restart policy calls for: a start
    /// must follow once the world heals.
    restart_owed: std::collections::BTreeSet<(ContainerId, u64)>,
    /// The core may not act on containers: since it (re)started, or lost
    /// its connection, no complete relist ended that was asked for after a
    /// subscription went live. `blind_mark` is the last op issued when it
    /// went blind; `live_after` the subscription that went live since.
    blind: bool,
    blind_mark: u64,
    live_after: Option<u64>,
    last_op: u64,
    /// The latest Subscribe and Relist calls issued.
    latest_sub: u64,
    latest_relist: u64,
}

/// How long, once connected, a container may still be shown running after
/// its process exited: an event arrives in milliseconds; an exit missed in
/// an outage needs the reconnect's relist, which an injected deadline can
/// delay by a retry. Measured: no false alarm in 10,000 seeds at 12 s; 2 s
/// was too tight (a relist hit by an injected deadline).
const STALE_VIEW_BOUND: Duration = Duration::from_secs(12);

impl Checker {
    pub fn new(config: CoreConfig) -> Checker {
        Checker {
            config,
            checks: 0,
            outstanding: BTreeMap::new(),
            asked: BTreeMap::new(),
            exec_containers: BTreeMap::new(),
            exits: BTreeMap::new(),
            dies: BTreeMap::new(),
            ready_since: None,
            verified: std::collections::BTreeSet::new(),
            lost_exits: std::collections::BTreeSet::new(),
            deletes_seen: BTreeMap::new(),
            oom_delivered: BTreeMap::new(),
            restart_owed: std::collections::BTreeSet::new(),
            blind: true,
            blind_mark: 0,
            live_after: None,
            last_op: 0,
            latest_sub: 0,
            latest_relist: 0,
        }
    }

    pub fn daemon_started(&mut self) {
        self.blind = true;
        self.blind_mark = 0;
        self.live_after = None;
        self.last_op = 0;
        self.latest_sub = 0;
        self.latest_relist = 0;
    }

    /// Requests waiting on a crashed daemon die with it (the client sees
    /// its connection reset): by design, not a lost request.
    pub fn daemon_crashed(&mut self) {
        self.ready_since = None;
        self.outstanding.clear();
        // What the core knew of OOM events is not persisted.
        self.oom_delivered.clear();
    }

    /// Whether the exit of `pid`, as `container`'s current process, was
    /// recorded (and checked against the truth).
    pub fn exit_verified(&self, container: &ContainerId, pid: u32, created: Instant) -> bool {
        self.verified.contains(&(container.clone(), pid, created))
    }

    /// containerd published `event` and it never reached the subscriber.
    pub fn event_lost(&mut self, event: &holdfast_core::ContainerdEvent, _now: Instant) {
        if let holdfast_core::ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            ..
        } = event
            && exec_id == container.as_str()
        {
            self.lost_exits.insert((container.clone(), *pid));
        }
    }

    /// `event` is about to be fed to the core.
    pub fn delivered(
        &mut self,
        event: &holdfast_core::ContainerdEvent,
        cd: &Containerd,
        now: Instant,
    ) {
        use holdfast_core::ContainerdEvent as E;
        match event {
            E::TaskDelete { container, pid } => {
                self.deletes_seen.insert((container.clone(), *pid), now);
            }
            E::TaskOom { container, .. } => {
                self.oom_delivered.insert(container.clone(), (now, false));
            }
            E::TaskExit {
                container,
                exec_id,
                pid,
                ..
            } if exec_id == container.as_str() => {
                let current = cd.tasks.get(container).map(|t| t.pid);
                if current != Some(*pid)
                    && let Some(seen) = self.oom_delivered.get_mut(container)
                {
                    seen.1 = true;
                }
            }
            _ => {}
        }
    }

    /// An input is about to be fed to the core: follow whether it may act.
    pub fn input(&mut self, input: &holdfast_core::Input) {
        use holdfast_core::{ConnectionFact as F, FailureKind, Input, RelistPart};
        let go_blind = |me: &mut Checker| {
            me.blind = true;
            me.blind_mark = me.last_op;
            me.live_after = None;
        };
        match input {
            Input::Connection(F::Unreachable(_)) => go_blind(self),
            Input::Connection(F::StreamBroken(op, _)) if op.0 == self.latest_sub => go_blind(self),
            Input::Connection(F::StreamLive(op))
                if op.0 > self.blind_mark && op.0 == self.latest_sub =>
            {
                self.live_after = Some(op.0);
            }
            Input::ActionResult(_, Err(f)) if f.kind == FailureKind::Unavailable => go_blind(self),
            // A relist of a connection already given up (a subscription
            // came after it) failing changes nothing.
            Input::ActionResult(op, Err(_))
                if op.0 == self.latest_sub
                    || op.0 == self.latest_relist && op.0 > self.latest_sub =>
            {
                go_blind(self)
            }
            Input::Relist(op, RelistPart::End)
                if self.live_after.is_some_and(|live| op.0 > live) =>
            {
                self.blind = false;
            }
            _ => {}
        }
    }

    pub fn command(&mut self, req: RequestId, command: &Command, now: Instant) {
        if let Command::CreateExec { id, exec_id, .. } = command {
            self.exec_containers.insert(exec_id.clone(), id.clone());
        }
        let id = match command {
            Command::StartExec { exec_id, .. } => self.exec_containers.get(exec_id).cloned(),
            command => command.container_id().cloned(),
        };
        // An exec no user created: the core answers it "no such exec".
        let id = id.unwrap_or_else(|| UNKNOWN_CONTAINER.parse().expect("a valid id"));
        if matches!(
            command,
            Command::Start { .. }
                | Command::Stop { .. }
                | Command::Kill { .. }
                | Command::Restart { .. }
                | Command::Remove { .. }
                | Command::UpdateRestartPolicy { .. }
        ) {
            // A user who steps in after an exit may rule out the policy
            // restart it owed (a stop does, and so does `update --restart
            // no`, seed 57842): it is owed no longer. A user's start takes
            // the restart over; if it fails, the user is told, and, as
            // after any failed `docker start` in dockerd, no policy start
            // follows (seeds 22343, 51406).
            self.restart_owed.retain(|(c, _)| *c != id);
        }
        let asked = self.asked.entry(id.clone()).or_default();
        // A kill does not cancel a start or restart still to be carried out
        // (as with dockerd; it survives a daemon crash); a stop does.
        let start_in_progress = asked.start_wanted;
        let own = asked.config.as_ref().and_then(|c| c.stop_timeout);
        let default_grace = self.config.default_stop_timeout;
        let grace = |timeout: Option<Duration>| timeout.or(own).unwrap_or(default_grace);
        let slack = Duration::from_secs(1);
        let bound = match command {
            Command::Create { config, .. } => {
                asked.config = Some(ContainerConfig::clone(config));
                Some(self.config.request_answer_bound + slack)
            }
            Command::Stop { timeout, .. } => {
                Some(grace(*timeout) + self.config.stop_answer_slack + slack)
            }
            Command::Restart { timeout, .. } => Some(
                self.config.request_answer_bound
                    + grace(*timeout)
                    + self.config.stop_answer_slack
                    + slack,
            ),
            Command::Wait { .. } => None,
            _ => Some(self.config.request_answer_bound + slack),
        };
        let stop_signal = |requested: Option<holdfast_core::Signal>| {
            let config = asked.config.as_ref();
            requested
                .or(config.and_then(|c| c.stop_signal))
                .or(config.and_then(|c| c.image_stop_signal))
                .unwrap_or(holdfast_core::Signal::SIGTERM)
        };
        let sigkill = holdfast_core::Signal::SIGKILL;
        let new_permits: Vec<holdfast_core::Signal> = match command {
            Command::Stop { signal, .. } | Command::Restart { signal, .. } => {
                vec![stop_signal(*signal), sigkill]
            }
            Command::Kill { signal, .. } => vec![*signal],
            // Only a forced remove kills; `rm` of a running one is refused.
            Command::Remove { force: true, .. } => vec![sigkill],
            _ => Vec::new(),
        };
        asked
            .permits
            .extend(new_permits.into_iter().map(|s| (req, s, now)));
        if matches!(
            command,
            Command::Stop { .. }
                | Command::Kill { .. }
                | Command::Restart { .. }
                | Command::Remove { .. }
        ) {
            asked.meddled = true;
        }
        if let Command::Stop { signal, .. } | Command::Restart { signal, .. } = command
            && stop_signal(*signal) == sigkill
        {
            // SIGKILL is this stop's own signal: no grace before it.
            asked.sigkill_at = Some(now);
        }
        if let Command::Remove { force: true, .. } = command {
            asked.force_removed = true;
        }
        match command {
            Command::Stop { timeout, .. } => {
                asked.stayed_down = true;
                asked.stayed_down_by = None;
                asked.start_wanted = false;
                asked.kill_at = Some(now);
                let g = grace(*timeout);
                asked.stop_grace = Some(asked.stop_grace.map_or(g, |earlier| earlier.min(g)));
            }
            Command::Kill { signal, .. } => {
                let stop_signal = asked
                    .config
                    .as_ref()
                    .and_then(|c| c.stop_signal.or(c.image_stop_signal));
                if (*signal == holdfast_core::Signal::SIGKILL
                    || stop_signal.is_none_or(|s| s == *signal))
                    && !start_in_progress
                    && !asked.stayed_down
                {
                    asked.stayed_down = true;
                    asked.stayed_down_by = Some(req);
                }
                asked.kill_at = Some(now);
                if *signal == holdfast_core::Signal::SIGKILL {
                    asked.sigkill_at = Some(now);
                }
            }
            Command::Restart { timeout, .. } => {
                asked.kill_at = Some(now);
                asked.start = true;
                asked.stayed_down = false;
                asked.start_wanted = true;
                let g = grace(*timeout);
                asked.stop_grace = Some(asked.stop_grace.map_or(g, |earlier| earlier.min(g)));
            }
            Command::Remove { .. } => {
                asked.kill_at = Some(now);
                asked.sigkill_at = Some(now);
                asked.remove = true;
            }
            Command::Start { .. } => {
                asked.start = true;
                asked.stayed_down = false;
                asked.start_wanted = true;
            }
            Command::UpdateRestartPolicy { policy, .. } => {
                // The core refuses a policy for an auto-remove container.
                if let Some(config) = asked.config.as_mut()
                    && (!config.auto_remove || *policy == holdfast_core::RestartPolicy::No)
                {
                    config.restart_policy = *policy;
                }
            }
            Command::Pause { .. } => asked.pause_at = Some(now),
            Command::UpdateResources { .. } => asked.update_asked = true,
            Command::Unpause { .. } => asked.unpause_at = Some(now),
            Command::Create { .. }
            | Command::CreateVolume { .. }
            | Command::CreateNetwork { .. }
            | Command::RemoveNetwork { .. }
            | Command::PruneNetworks { .. }
            | Command::RemoveVolume { .. }
            | Command::PruneVolumes { .. }
            | Command::CreateExec { .. }
            | Command::ReadChanges { .. }
            | Command::MountRootfs { .. }
            | Command::UnmountRootfs { .. }
            | Command::StartExec { .. }
            | Command::Resize { .. }
            | Command::Wait { .. }
            | Command::Rename { .. }
            | Command::Connect { .. }
            | Command::Disconnect { .. } => {}
        }
        let kind = crate::sim::user_kind(command);
        let final_bound = matches!(command, Command::Start { .. })
            .then(|| self.config.start_answer_bound + slack);
        self.outstanding.insert(
            req,
            Request {
                kind,
                container: id,
                issued: now,
                bound,
                final_bound,
            },
        );
    }

    /// Checks one action as the core emits it.
    pub fn action(
        &mut self,
        action: &Action,
        core: Option<&Core>,
        cd: &Containerd,
        now: Instant,
    ) -> Result<(), String> {
        match action {
            Action::Call { op, call } => self.call(*op, call, cd, now),
            Action::Volume { op, .. } => {
                self.last_op = self.last_op.max(op.0);
                Ok(())
            }
            Action::PersistVolume(_)
            | Action::UnpersistVolume(_)
            | Action::PersistNetwork(_)
            | Action::UnpersistNetwork(_) => Ok(()),
            Action::Network { op, call } => {
                self.last_op = self.last_op.max(op.0);
                if self.blind {
                    return Err(format!(
                        "{op}: {call:?} while blind: after a (re)connect, before its relist ended"
                    ));
                }
                Ok(())
            }
            Action::Answer(req, answer) => {
                let Some(request) = self.outstanding.remove(req) else {
                    return Err(format!(
                        "{req} answered ({answer:?}) but nothing waits for it: answered twice or never asked"
                    ));
                };
                let id = &request.container;
                // "containerd is unreachable" is never said while connected.
                if let Answer::Error(e) = answer
                    && e.kind == holdfast_core::ErrorKind::Unavailable
                    && core.is_some_and(|c| c.connection() == ConnectionState::Ready)
                {
                    return Err(format!(
                        "{req} ({:?} of {id}) answered unavailable while connected: {answer:?}",
                        request.kind
                    ));
                }
                if let Answer::Error(e) = answer
                    && request.issued == now
                    && matches!(
                        e.kind,
                        holdfast_core::ErrorKind::Conflict
                            | holdfast_core::ErrorKind::NotFound
                            | holdfast_core::ErrorKind::Invalid
                    )
                {
                    // Refused at once: it asked for nothing. (An error
                    // later, e.g. a restart overtaken by a remove, leaves
                    // what it recorded in force.)
                    let asked = self.asked.entry(id.clone()).or_default();
                    asked.permits.retain(|(r, _, _)| r != req);
                    if request.kind == UserKind::Remove {
                        asked.force_removed = false;
                    }
                }
                if request.kind == UserKind::Kill
                    && matches!(answer, Answer::Error(e) if e.kind == holdfast_core::ErrorKind::Conflict)
                {
                    let asked = self.asked.entry(id.clone()).or_default();
                    if asked.stayed_down_by == Some(*req) {
                        asked.stayed_down = false;
                        asked.stayed_down_by = None;
                    }
                }
                if request.kind == UserKind::Create && *answer == Answer::Done {
                    self.asked.entry(id.clone()).or_default().create_done = true;
                }
                if request.kind == UserKind::Pause && *answer == Answer::Done {
                    let pid = core
                        .and_then(|c| c.container(id))
                        .and_then(|v| v.record.pid);
                    let frozen = pid
                        .and_then(|pid| cd.truth_of(id, pid))
                        .is_some_and(|t| t.pauses > 0);
                    if !frozen {
                        return Err(format!(
                            "pause of {id} answered done, but its task (pid {pid:?}) was never frozen"
                        ));
                    }
                }
                if request.kind == UserKind::Stop && *answer == Answer::Done {
                    let pid = core
                        .and_then(|c| c.container(id))
                        .and_then(|v| v.record.pid);
                    if let Some(pid) = pid
                        && cd.truth_of(id, pid).is_some_and(|t| {
                            t.started && t.exit.is_none() && !t.shim_died && !t.deleted
                        })
                    {
                        return Err(format!(
                            "stop of {id} answered done while its pid {pid} still runs"
                        ));
                    }
                }
                let _ = now;
                Ok(())
            }
            Action::Publish(event) => {
                if let UserEventKind::Die { .. } = event.kind {
                    let view = core.and_then(|c| c.container(&event.container));
                    let Some((pid, run)) = view.and_then(|v| Some((v.record.pid?, v.record.run)))
                    else {
                        return Err(format!(
                            "die of {} published with no pid recorded",
                            event.container
                        ));
                    };
                    let n = self
                        .dies
                        .entry((event.container.clone(), pid, run))
                        .or_insert(0);
                    *n += 1;
                    if *n > 1 {
                        return Err(format!(
                            "exit of {} pid {pid} recorded {n} times",
                            event.container
                        ));
                    }
                }
                Ok(())
            }
            Action::Persist(_) | Action::Unpersist(_) => Ok(()),
            Action::RunProbe(probe) => {
                let view = core.and_then(|c| c.container(&probe.container));
                let health = core.and_then(|c| c.health(&probe.container));
                match (view, health) {
                    (Some(v), Some(h))
                        if v.status == Status::Running
                            && !v.paused
                            && core.is_some_and(|c| c.connection() == ConnectionState::Ready)
                            && v.record.run == probe.run
                            && h.run == probe.run
                            && !h.ended =>
                    {
                        Ok(())
                    }
                    _ => Err(format!(
                        "a health probe of {} run {} asked for while it is not a running, probed run",
                        probe.container, probe.run
                    )),
                }
            }
        }
    }

    fn call(
        &mut self,
        op: holdfast_core::OpId,
        call: &Call,
        cd: &Containerd,
        now: Instant,
    ) -> Result<(), String> {
        self.last_op = self.last_op.max(op.0);
        match call {
            Call::Subscribe => self.latest_sub = op.0,
            Call::Relist => self.latest_relist = op.0,
            _ => {}
        }
        let id = match call.container_id() {
            Some(id) => id,
            None => return Ok(()),
        };
        if self.blind {
            return Err(format!(
                "{op}: {call:?} while blind: after a (re)connect, before its relist ended"
            ));
        }
        let asked = self.asked.entry(id.clone()).or_default();
        if let Call::Kill { signal, .. } = call
            && *signal == holdfast_core::Signal::SIGKILL
        {
            asked.sigkill_sent_at = Some(now);
        }
        let policy = asked
            .config
            .as_ref()
            .map_or(RestartPolicy::No, |c| c.restart_policy);
        let auto_remove = asked.config.as_ref().is_some_and(|c| c.auto_remove);
        match call {
            Call::Kill { signal, .. } => {
                let Some(pid) = cd.live_pid(id) else {
                    return Ok(());
                };
                let created = cd.truth.get(&pid).map_or(Instant::ZERO, |t| t.created_at);
                if asked.kill_at.is_none_or(|at| at < created) {
                    return Err(format!(
                        "{op}: kill {signal} of {id} (pid {pid}, created {created:?}) that no user asked for (last stop/kill/remove: {:?})",
                        asked.kill_at
                    ));
                }
                // The signal itself must be one a request still standing asked
                // for, and asked for while this process existed.
                if !asked
                    .permits
                    .iter()
                    .any(|(_, s, at)| s == signal && *at >= created)
                {
                    return Err(format!(
                        "{op}: kill {signal} of {id} (pid {pid}, created {created:?}) that no standing request asked for (asked: {:?})",
                        asked.permits
                    ));
                }
                if *signal != holdfast_core::Signal::SIGKILL {
                    if asked.stop_grace.is_some() && asked.stop_signal_sent.is_none() {
                        asked.stop_signal_sent = Some(now);
                    }
                } else if asked.sigkill_at.is_none_or(|at| at < created) {
                    // An escalation: only once the grace period has passed.
                    let due = match (asked.stop_grace, asked.stop_signal_sent) {
                        (Some(grace), Some(sent)) => Some(sent + grace),
                        (Some(_), None) => None,
                        (None, _) => None,
                    };
                    let early = match due {
                        Some(due) => now < due,
                        None => asked.stop_grace.is_none_or(|g| !g.is_zero()),
                    };
                    if early {
                        return Err(format!(
                            "{op}: SIGKILL of {id} (pid {pid}) before its stop's grace period ended (grace {:?}, stop signal sent {:?})",
                            asked.stop_grace, asked.stop_signal_sent
                        ));
                    }
                }
            }
            Call::UpdateResources { .. } if !asked.update_asked => {
                return Err(format!(
                    "{op}: update of {id}'s resources that no user asked for"
                ));
            }
            Call::Pause { .. } | Call::Resume { .. } => {
                let Some(pid) = cd.live_pid(id) else {
                    return Ok(());
                };
                let created = cd.truth.get(&pid).map_or(Instant::ZERO, |t| t.created_at);
                let since = |at: Option<Instant>| at.is_some_and(|at| at >= created);
                let why = if matches!(call, Call::Pause { .. }) {
                    since(asked.pause_at)
                } else {
                    since(asked.unpause_at) || since(asked.kill_at)
                };
                if !why {
                    return Err(format!(
                        "{op}: {call:?} of {id} (pid {pid}) that no user asked for (pause {:?}, unpause {:?}, stop/kill/remove {:?})",
                        asked.pause_at, asked.unpause_at, asked.kill_at
                    ));
                }
            }
            Call::DeleteTask { .. } => {
                if let Some(task) = cd.tasks.get(id)
                    && matches!(
                        task.status,
                        holdfast_core::TaskStatus::Running | holdfast_core::TaskStatus::Paused
                    )
                {
                    return Err(format!(
                        "{op}: delete of the running task of {id} (pid {})",
                        task.pid
                    ));
                }
            }
            Call::DeleteContainer { .. } if asked.create_done && !asked.remove && !auto_remove => {
                return Err(format!(
                    "{op}: delete of container {id} that no user asked to remove"
                ));
            }
            Call::CreateTask { .. } if asked.stayed_down && !asked.start_wanted => {
                return Err(format!(
                    "{op}: start of {id} after a user stop or kill, with no user start since (a policy restart the user ruled out)"
                ));
            }
            Call::CreateTask { .. } | Call::StartTask { .. } => {
                // Carried out once the start is sent (a created task a kill
                // ends before it starts does not settle it).
                if matches!(call, Call::StartTask { .. }) {
                    asked.start_wanted = false;
                }
                let ran_before = cd
                    .truth
                    .values()
                    .chain(cd.past.iter().map(|(_, t)| t))
                    .any(|t| &t.container == id && t.started);
                let policy_may = policy != RestartPolicy::No && ran_before;
                if !asked.start && !policy_may {
                    return Err(format!(
                        "{op}: start of {id} that neither a user nor its restart policy asked for"
                    ));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// After every step: the core's books match the world's, and every
    /// recorded exit is the truth, recorded once.
    pub fn after_step(
        &mut self,
        core: Option<&Core>,
        cd: &Containerd,
        world_calls: usize,
        now: Instant,
    ) -> Result<(), String> {
        self.checks += 1;
        let Some(core) = core else { return Ok(()) };
        if core.calls_in_flight() != world_calls {
            return Err(format!(
                "the core waits on {} calls, the world has {world_calls} unanswered: an action left without a result",
                core.calls_in_flight()
            ));
        }
        if core.requests_pending() != self.outstanding.len() {
            return Err(format!(
                "the core holds {} requests, {} are unanswered: a request lost",
                core.requests_pending(),
                self.outstanding.len()
            ));
        }
        for (req, r) in &self.outstanding {
            let waited = now.saturating_since(r.issued);
            // A start containerd is still working on waits for its outcome
            // past its bound, but only while the core is connected (a
            // disconnect answers it at once) and up to its final bound.
            let start_in_progress = r.final_bound.is_some_and(|b| waited <= b)
                && core.connection() == ConnectionState::Ready
                && core
                    .container(&r.container)
                    .is_some_and(|v| v.record.intents.start);
            if let Some(bound) = r.bound
                && waited > bound
                && !start_in_progress
            {
                return Err(format!(
                    "{req} ({:?} of {}) unanswered after {waited:?} (bound {bound:?}, final {:?})",
                    r.kind, r.container, r.final_bound
                ));
            }
        }
        // Safety, not just liveness: a connected core does not go on showing
        // a dead process as running (the bug dockerd 20.10 shipped).
        if core.connection() == ConnectionState::Ready {
            let since = *self.ready_since.get_or_insert(now);
            for view in core.containers() {
                let (Status::Running, Some(pid)) = (view.status, view.record.pid) else {
                    continue;
                };
                let id = &view.record.id;
                let Some(truth) = cd.truth_of(id, pid) else {
                    continue;
                };
                let Some((_, exited_at)) = truth.exit else {
                    continue;
                };
                let mut known_since = crate::sim::wall(since).max(exited_at);
                // An exit whose event was lost on a live stream waits for
                // the periodic relist: that is what it is for. Unless the
                // task's delete was seen: that is a reason to look at once.
                let key = (id.clone(), pid);
                // (Seen after this exit: a stale delete of an earlier
                // process with the pid says nothing of it.)
                let delete_seen = self
                    .deletes_seen
                    .get(&key)
                    .filter(|at| crate::sim::wall(**at) >= exited_at);
                let bound = match delete_seen {
                    _ if !self.lost_exits.contains(&key) => STALE_VIEW_BOUND,
                    Some(seen) => {
                        known_since = known_since.max(crate::sim::wall(*seen));
                        STALE_VIEW_BOUND
                    }
                    None => {
                        STALE_VIEW_BOUND + self.config.relist_interval.unwrap_or(Duration::MAX / 4)
                    }
                };
                if crate::sim::wall(now).saturating_since(known_since) > bound {
                    return Err(format!(
                        "{} shown running (pid {pid}) although it exited at {exited_at:?}; connected since {since:?}",
                        view.record.id
                    ));
                }
            }
        } else {
            self.ready_since = None;
        }
        for view in core.containers() {
            let Some(exit) = view.current_exit() else {
                continue;
            };
            let id = &view.record.id;
            let Some(pid) = view.record.pid else {
                return Err(format!("{id} has an exit recorded with no pid: {exit:?}"));
            };
            let key = (id.clone(), pid, exit.run);
            if let Some(first) = self.exits.get(&key) {
                if first != exit {
                    return Err(format!(
                        "the exit of {id} pid {pid} changed from {first:?} to {exit:?}"
                    ));
                }
                continue;
            }
            let Some(truth) = cd.truth_of(id, pid) else {
                return Err(format!(
                    "{id} has an exit for pid {pid}, which containerd never had"
                ));
            };
            let real = truth.exit.is_some_and(|(status, at)| {
                i64::from(status) == i64::from(exit.exit_code)
                    && at == exit.finished_at
                    && exit.error.is_none()
            });
            let vanished = truth.shim_died && exit.exit_code == 255 && exit.error.is_some();
            if !(real || vanished) || (exit.oom_killed && !truth.oom) {
                return Err(format!(
                    "{id} recorded exit {exit:?} for pid {pid}, but the truth is {truth:?}"
                ));
            }
            // An OOM kill whose cgroup count came with its exit (the shim
            // alive to report it) is recorded as one, whatever the order.
            if truth.oom
                && !truth.shim_died
                && crate::model::oom_count_readable(pid)
                && exit.error.is_none()
                && !exit.oom_killed
            {
                return Err(format!(
                    "{id} pid {pid} was OOM-killed and its cgroup counted it, but the exit is recorded without OOM: {exit:?}"
                ));
            }
            // Without the count, an OOM kill is recorded as one when its
            // evidence reached the core in order: the OOM event after the process began, no exit
            // of another pid of the container after it (the core takes that
            // as the OOM's run ending: the event names no pid), the core not
            // restarted since (it keeps the OOM in memory), and no SIGKILL of
            // ours to explain the 137. An OOM that comes after the exit
            // does not count: the first recorded exit is final.
            let asked = self.asked.entry(id.clone()).or_default();
            let oom_in_order = self
                .oom_delivered
                .get(id)
                .is_some_and(|(at, other_exit)| *at >= truth.created_at && !other_exit);
            let our_sigkill = asked
                .sigkill_sent_at
                .is_some_and(|at| at >= truth.created_at);
            if truth.oom
                && exit.exit_code == 137
                && exit.error.is_none()
                && oom_in_order
                && !our_sigkill
                && !exit.oom_killed
            {
                return Err(format!(
                    "{id} pid {pid} was OOM-killed and the OOM event came before its exit, but the exit is recorded without OOM: {exit:?}"
                ));
            }
            // A run the restart policy must follow with another: the user
            // never touched the container, and the policy calls for it.
            if let Some(config) = &asked.config
                && !asked.meddled
                && !asked.remove
                && !config.auto_remove
                && config.restart_policy.wants_restart(
                    exit.exit_code,
                    view.record.restart_count,
                    false,
                )
            {
                self.restart_owed.insert((id.clone(), exit.run));
            }
            self.verified.insert((id.clone(), pid, truth.created_at));
            self.exits.insert(key, exit.clone());
            if let Some(asked) = self.asked.get_mut(id) {
                asked.stop_grace = None;
                asked.stop_signal_sent = None;
                asked.permits.clear();
            }
        }
        for view in core.containers() {
            health_consistent(core, &view)?;
        }
        Ok(())
    }

    /// A complete relist listed these containers' tasks (placeholders
    /// included); `settled` are the containers no call touched since it was
    /// asked for. A settled container whose task it did not list is not
    /// running any more: the run it had is over.
    pub fn relist_complete(
        &self,
        core: Option<&Core>,
        relist: holdfast_core::OpId,
        listed: &std::collections::BTreeSet<ContainerId>,
        settled: impl Fn(&ContainerId) -> bool,
    ) -> Result<(), String> {
        let Some(core) = core else { return Ok(()) };
        // A relist of a connection given up since proves nothing.
        if relist.0 < self.latest_sub || core.connection() != ConnectionState::Ready {
            return Ok(());
        }
        for view in core.containers() {
            let id = &view.record.id;
            if listed.contains(id) || !settled(id) {
                continue;
            }
            if view.status == Status::Running {
                return Err(format!(
                    "{id} is shown running (pid {:?}) after a complete relist that did not list its task",
                    view.record.pid
                ));
            }
        }
        Ok(())
    }

    /// The network's books, after every step, against the store (what a
    /// restarted holdfastd would know), so they hold while it is down too.
    /// No allocation without an owner: every attachment on the host has a
    /// record that says it may exist. No owner without its allocation: every
    /// task of a container on a bridge network has its attachment. And no
    /// attachment is made twice.
    pub fn network(
        &self,
        _core: Option<&Core>,
        cd: &Containerd,
        net: &crate::model::HostNetwork,
        records: &BTreeMap<ContainerId, holdfast_core::Record>,
    ) -> Result<(), String> {
        if let Some(id) = net.doubled.first() {
            return Err(format!(
                "{id}: a network setup was made while its attachment existed (a leaked address)"
            ));
        }
        for id in &net.attached {
            let owned = records
                .get(id)
                .is_some_and(|r| r.network != holdfast_core::NetworkState::Detached);
            if !owned {
                return Err(format!(
                    "{id}: an attachment on the host that no record owns (leaked); record: {:?}",
                    records.get(id).map(|r| r.network)
                ));
            }
        }
        for id in cd.tasks.keys() {
            let bridged = records
                .get(id)
                .is_some_and(|r| r.config.network.needs_attachment());
            if bridged && !net.attached.contains(id) {
                return Err(format!(
                    "{id}: a task on the bridge network without its attachment"
                ));
            }
        }
        // The same books for the endpoints (`network connect`), by slot.
        if let Some((id, slot)) = net.endpoints_doubled.first() {
            return Err(format!(
                "{id}: endpoint eth{slot} was set up while it existed (a leaked address)"
            ));
        }
        for (id, slot) in &net.endpoints {
            // An `eth0` is also its own attachment's: released with it
            // when in doubt, and the container's until it is disconnected
            // from its own network (then slot 0's endpoint owns it).
            use holdfast_core::NetworkState as N;
            let owned = records.get(id).is_some_and(|r| {
                r.endpoints
                    .iter()
                    .any(|e| e.slot == *slot && e.state != N::Detached)
                    || *slot == 0
                        && (r.network == N::Attaching
                            || r.network == N::Attached && !r.own_disconnected)
            });
            if !owned {
                return Err(format!(
                    "{id}: endpoint eth{slot} on the host that no record owns (leaked); record: {:?}",
                    records.get(id).map(|r| &r.endpoints)
                ));
            }
        }
        for (id, r) in records {
            for e in &r.endpoints {
                let made = net.endpoints.contains(&(id.clone(), e.slot));
                if e.state == holdfast_core::NetworkState::Attached && !made {
                    return Err(format!(
                        "{id}: endpoint eth{} recorded attached and not on the host",
                        e.slot
                    ));
                }
            }
        }
        Ok(())
    }

    /// Why the world has not converged yet; `None` once it has. With
    /// `truth_only`, a restart policy's start still to come (its backoff)
    /// does not count: the view is true, the policy is merely waiting.
    pub fn converged(
        &self,
        core: Option<&Core>,
        cd: &Containerd,
        world_calls: usize,
        truth_only: bool,
    ) -> Option<String> {
        let Some(core) = core else {
            return Some("holdfastd is down".into());
        };
        if !cd.up {
            return Some("containerd is down".into());
        }
        if core.connection() != ConnectionState::Ready {
            return Some(format!("connection is {:?}", core.connection()));
        }
        if world_calls > 0 || core.calls_in_flight() > 0 {
            return Some(format!("{world_calls} calls in flight"));
        }
        for (req, r) in &self.outstanding {
            let view = core.container(&r.container);
            let due = match r.kind {
                UserKind::Wait(WaitCondition::NotRunning) => {
                    view.is_none_or(|v| v.status != Status::Running)
                }
                UserKind::Wait(_) => view.is_none(),
                _ => true,
            };
            if due {
                return Some(format!(
                    "{req} ({:?} of {}) is not answered",
                    r.kind, r.container
                ));
            }
        }
        for view in core.containers() {
            let id = &view.record.id;
            let intents = &view.record.intents;
            if view.record.presence != Presence::Created {
                return Some(format!("{id} is {:?}", view.record.presence));
            }
            let policy_waits = truth_only
                && (intents.policy_restart || intents.start && view.status == Status::Restarting);
            if !policy_waits && (intents.start || intents.policy_restart)
                || intents.stop.is_some()
                || !intents.kills.is_empty()
                || intents.remove
            {
                return Some(format!("{id} still has intents {intents:?}"));
            }
            if !cd.containers.contains(id) {
                return Some(format!("holdfast shows {id}, containerd does not have it"));
            }
            let live = cd.live_pid(id);
            let running = view.status == Status::Running;
            if running != live.is_some() || (running && view.record.pid != live) {
                return Some(format!(
                    "{id}: holdfast says {:?} pid {:?}, containerd's task is {:?}",
                    view.status,
                    view.record.pid,
                    cd.tasks.get(id).map(|t| (t.pid, t.status))
                ));
            }
            let frozen = cd
                .tasks
                .get(id)
                .is_some_and(|t| t.status == holdfast_core::TaskStatus::Paused);
            if running && view.paused != frozen {
                return Some(format!(
                    "{id}: holdfast says paused {}, containerd's task is {:?}",
                    view.paused,
                    cd.tasks.get(id).map(|t| (t.pid, t.status))
                ));
            }
            if cd
                .tasks
                .get(id)
                .is_some_and(|t| t.status == holdfast_core::TaskStatus::Stopped)
            {
                return Some(format!("{id}: a stopped task is left in containerd"));
            }
        }
        // Every process that ran and exited in a container still shown had
        // its exit recorded: none was lost, whatever the events did.
        for (pid, truth) in &cd.truth {
            if truth.started
                && truth.exit.is_some()
                && core.container(&truth.container).is_some()
                && !self
                    .verified
                    .contains(&(truth.container.clone(), *pid, truth.created_at))
            {
                return Some(format!(
                    "{}: the exit of pid {pid} ({:?}) was never recorded",
                    truth.container, truth.exit
                ));
            }
        }
        // A restart policy that was owed a start got it (its backoff is at
        // most `restart_max`, well inside the liveness bound).
        for view in core.containers() {
            let id = &view.record.id;
            if let Some(exit) = view.current_exit()
                && !truth_only
                && self.restart_owed.contains(&(id.clone(), exit.run))
            {
                return Some(format!(
                    "{id}: its restart policy calls for a start after the exit of run {}, none came",
                    exit.run
                ));
            }
        }
        // A forced remove that was not refused is carried out.
        for (id, asked) in &self.asked {
            if asked.force_removed && (core.container(id).is_some() || cd.containers.contains(id)) {
                return Some(format!(
                    "{id}: force-removed, still there (holdfast: {}, containerd: {})",
                    core.container(id).is_some(),
                    cd.containers.contains(id)
                ));
            }
        }
        for id in &cd.containers {
            if core.container(id).is_none() {
                return Some(format!(
                    "containerd has {id}, holdfast does not show it (left behind)"
                ));
            }
        }
        None
    }
}

/// Once healed and quiet, every attachment left belongs to a task: nothing
/// stays allocated for a container that has none.
pub fn network_converged(cd: &Containerd, net: &crate::model::HostNetwork) -> Option<String> {
    let attached = net.attached.iter().find(|id| !cd.tasks.contains_key(*id));
    let endpoint = net
        .endpoints
        .iter()
        .find(|(id, _)| !cd.tasks.contains_key(id));
    attached
        .map(|id| format!("{id}: still attached with no task (an allocation left behind)"))
        .or_else(|| {
            endpoint.map(|(id, slot)| {
                format!("{id}: endpoint eth{slot} still attached with no task (left behind)")
            })
        })
}

/// A container's health agrees with its run and with dockerd's rules: only
/// a running run is probed, the log is bounded, and the status follows the
/// streak (healthy: no failure since the last success; unhealthy: at least
/// `retries` failures in a row).
fn health_consistent(core: &Core, view: &holdfast_core::ContainerView<'_>) -> Result<(), String> {
    use holdfast_core::HealthStatus;
    use holdfast_core::health::{HEALTH_LOG_MAX, PROBE_OUTPUT_MAX_BYTES};
    let id = &view.record.id;
    let Some(h) = core.health(id) else {
        return Ok(());
    };
    let Some(config) = view.record.config.healthcheck.as_ref() else {
        return Err(format!("{id} has a health but no health check"));
    };
    if h.run > view.record.run {
        return Err(format!(
            "{id}'s health is of run {}, after its run {}",
            h.run, view.record.run
        ));
    }
    if !h.ended && (view.status != Status::Running || h.run != view.record.run) {
        return Err(format!(
            "{id} is probed (run {}) while {:?} in run {}",
            h.run, view.status, view.record.run
        ));
    }
    if h.log.len() > HEALTH_LOG_MAX
        || h.log
            .iter()
            .any(|l| l.output.len() > PROBE_OUTPUT_MAX_BYTES)
    {
        return Err(format!("{id}'s health log is beyond its bounds"));
    }
    let consistent = match h.status {
        HealthStatus::Healthy => {
            h.failing_streak < config.retries() && h.log.iter().any(|l| l.exit_code == 0)
        }
        HealthStatus::Starting => h.failing_streak < config.retries(),
        HealthStatus::Unhealthy => h.ended || h.failing_streak >= config.retries(),
    };
    if !consistent {
        return Err(format!(
            "{id}'s health is {:?} with a failing streak of {} (retries {}) and log {:?}",
            h.status,
            h.failing_streak,
            config.retries(),
            h.log
        ));
    }
    Ok(())
}
