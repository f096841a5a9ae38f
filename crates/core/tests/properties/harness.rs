//! The harness: a core and its world, driven one input at a time, every
//! property checked after every input.

use crate::calls::Call;
use crate::health::health_consistent;
use crate::resources::Resources;
use crate::steps::{Step, enabled, health_check, id, restart_policy, stop_signal};
use crate::support;
use crate::world::World;
use holdfast_core::*;
use holdfast_sim::check::resources::{exec_end_harmless, exec_end_of, told_once};
use holdfast_sim::model::Task;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Calls answered one after another in a healed world before the case is
/// taken to loop: far more than three containers' work (and their relists)
/// needs, even after 160 steps.
pub(crate) const CALLS_HEALED_MAX: u32 = 5_000;

/// What a kill, pause or unpause asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ask {
    Kill(Signal),
    Pause,
    Unpause,
}

/// A wait not answered yet: container, condition, and the exit recorded
/// (run, time) when it began.
pub(crate) type PendingWait = (ContainerId, WaitCondition, Option<(u64, WallTime)>);

/// What the harness read of the core just before an input: what the checks
/// after it compare the core's reaction with.
pub(crate) struct Before {
    /// Whether each container's start was wanted.
    pub(crate) start_wanted: BTreeMap<ContainerId, bool>,
    /// Restart counts, and whether a user's start or restart waits.
    pub(crate) restart_counts: BTreeMap<ContainerId, (u32, bool)>,
    /// Each run's known pid, and whether its exit is recorded.
    pub(crate) pids: BTreeMap<ContainerId, (u64, Option<u32>, bool)>,
    /// Whether each container's policy restart was owed, and whether its
    /// exit was recorded.
    pub(crate) policy_owed: BTreeMap<ContainerId, (bool, bool)>,
    /// Connected.
    pub(crate) ready: bool,
    pub(crate) retry_timers: BTreeMap<ContainerId, Instant>,
    /// Kills, pauses and unpauses not answered yet.
    pub(crate) asks: BTreeMap<RequestId, (ContainerId, Ask)>,
}

/// What the answers among an input's actions said, for the checks after
/// them.
#[derive(Default)]
pub(crate) struct Answered {
    /// Waits answered as waited, with what they waited for.
    pub(crate) waits: Vec<(RequestId, PendingWait)>,
    /// Kills, pauses and unpauses answered, with their answers.
    pub(crate) asks: Vec<(RequestId, (ContainerId, Ask), Answer)>,
    /// Updates answered, with their answers.
    pub(crate) updates: Vec<(RequestId, ContainerId, Answer)>,
}

pub(crate) struct Harness {
    /// Runs whose OOM was announced (a user event), per daemon.
    pub(crate) oom_announced: std::collections::BTreeSet<(ContainerId, u64)>,
    /// The furthest each run's task got in the core's view (1 created,
    /// 2 running, 3 stopped), per daemon.
    pub(crate) task_progress: BTreeMap<(ContainerId, u64, Option<u32>), u8>,
    pub(crate) core: Core,
    /// The core's tuning, the same across daemon restarts.
    pub(crate) config: CoreConfig,
    pub(crate) now: Now,
    pub(crate) world: World,
    pub(crate) outstanding: Vec<(OpId, Call)>,
    /// Event streams the world holds open (an abandoned subscription may
    /// go live late, beside the current one).
    pub(crate) subscriptions: std::collections::BTreeSet<OpId>,
    pub(crate) past_events: Vec<ContainerdEvent>,
    pub(crate) next_req: u64,
    pub(crate) trace: Vec<Action>,
    /// First exit seen per (container, run).
    pub(crate) exits: BTreeMap<(ContainerId, u64), ExitRecord>,
    /// What holdfastd has on disk, as its Persist and Unpersist actions say.
    pub(crate) records: BTreeMap<ContainerId, Record>,
    /// Configs as created, for the expected stop signal; and each create
    /// request's, until it is answered (the one answered done is made).
    pub(crate) configs: BTreeMap<ContainerId, ContainerConfig>,
    pub(crate) create_configs: BTreeMap<RequestId, ContainerConfig>,
    /// Containers whose change the core could not see (an event lost, a
    /// shim that died), with the newest op id at the time: a relist asked
    /// for after it must come before the view can be expected to match.
    pub(crate) unseen: BTreeMap<ContainerId, u64>,
    pub(crate) last_op: u64,
    pub(crate) daemons: u64,
    /// The call being resolved takes effect, but its answer is lost.
    pub(crate) answer_lost: bool,
    pub(crate) relisting: bool,
    /// Consecutive failed calls per container, of any call and any kind
    /// (containerd going away too): zero means nothing failed since the
    /// last success. (`streaks` counts as the core counts retries.)
    pub(crate) failures: BTreeMap<ContainerId, u32>,
    /// Per container: the call refused in a row (a key), how many times,
    /// and whether one of those attempts may have taken effect.
    pub(crate) streaks: BTreeMap<ContainerId, (String, u32, bool)>,
    /// containerd's tasks when each relist was asked for.
    pub(crate) relist_snapshots: BTreeMap<OpId, BTreeMap<ContainerId, Task>>,
    /// The container whose call is being answered.
    pub(crate) answering: Option<ContainerId>,
    /// The call being answered.
    pub(crate) answering_call: Option<Call>,
    pub(crate) newest_relist: u64,
    /// When each stop's SIGKILL is due at the latest.
    pub(crate) kill_deadline: BTreeMap<ContainerId, Instant>,
    /// Start and restart requests, by container.
    pub(crate) starts: BTreeMap<RequestId, ContainerId>,
    /// The newest op id when each start or restart was asked.
    pub(crate) start_asked_at_op: BTreeMap<RequestId, u64>,
    /// Start requests (not restarts): when each was asked.
    pub(crate) starts_asked: BTreeMap<RequestId, Instant>,
    /// Create requests: when each was asked.
    pub(crate) creates_asked: BTreeMap<RequestId, Instant>,
    /// A relist listed a placeholder: another must be asked for by then.
    pub(crate) look_again_by: Option<Instant>,
    /// A call that can end, freeze or remove a task was refused or lost
    /// its answer while connected, or a task was deleted with no exit the
    /// core saw: what containerd has may differ from the view, so a relist
    /// asked for after it must come by then (once a relist already in
    /// flight ends).
    pub(crate) refresh_owed_by: Option<Instant>,
    /// Containers whose task a lost answer left in doubt: a create, or a
    /// created task's delete, may or may not have taken effect.
    pub(crate) doubts: BTreeSet<ContainerId>,
    /// A doubt with nothing of its container in flight and no relist
    /// under way: a relist that can settle it is owed by then.
    pub(crate) doubt_owed_by: BTreeMap<ContainerId, Instant>,
    /// The newest op when a call of each container was last sent or
    /// answered: only a relist asked for after it can settle a doubt.
    pub(crate) activity: BTreeMap<ContainerId, u64>,
    /// Stop requests: when they are due at the latest.
    pub(crate) stop_bounds: BTreeMap<RequestId, Instant>,
    pub(crate) answered: BTreeMap<RequestId, Instant>,
    /// Stop signals in flight, and when each container's was delivered.
    pub(crate) stop_signal_ops: BTreeMap<OpId, ContainerId>,
    pub(crate) signal_delivered: BTreeMap<ContainerId, Instant>,
    /// Every request but a wait, which may rightly wait for ever.
    pub(crate) must_answer: Vec<RequestId>,
    /// Waits not answered yet: container, condition, and its recorded exit
    /// (run, time) when the wait began.
    pub(crate) waits: BTreeMap<RequestId, PendingWait>,
    /// Kills, pauses and unpauses not answered yet: the end of their
    /// container's run answers them at once.
    pub(crate) asks: BTreeMap<RequestId, (ContainerId, Ask)>,
    /// Per container: starts asked for (the core's start intent turning
    /// on: a user's start or restart, a policy's restart) and tasks the
    /// world started. Each run needs a start of its own: one asked for
    /// once is not a promise to start again. (A start whose created task
    /// vanished before it began is tried again: no run.)
    pub(crate) start_ledger: BTreeMap<ContainerId, (u64, u64)>,
    /// Kill calls carrying a user's kill (not a stop's signal) whose
    /// results the core has not been given yet, by op.
    pub(crate) user_kill_ops: BTreeMap<OpId, (ContainerId, Signal)>,
    pub(crate) slack: Duration,
    /// Containers a user asked to pause (true) or unpause (false).
    pub(crate) pauses_asked: std::collections::BTreeSet<(ContainerId, bool)>,
    /// Containers a user asked to update.
    pub(crate) updates_asked: std::collections::BTreeSet<ContainerId>,
    /// Containers whose unpause was answered at its bound (it will be
    /// carried out when possible), until a pause is asked again.
    pub(crate) unpause_standing: std::collections::BTreeSet<ContainerId>,
    /// Updates not answered yet, by request.
    pub(crate) updates: BTreeMap<RequestId, ContainerId>,
    /// Connects asked for: container and network.
    pub(crate) connects: BTreeMap<RequestId, (ContainerId, String)>,
    /// Connects said done: container and network.
    pub(crate) connected: BTreeMap<RequestId, (ContainerId, String)>,
    /// Disconnects asked for: container and network.
    pub(crate) disconnects: Vec<(RequestId, ContainerId, String)>,
    /// Restart requests (a subset of `starts`).
    pub(crate) restarts: std::collections::BTreeSet<RequestId>,
    /// Every create asked, by request: one asked before the first
    /// connection waits for it, and the first of an id made is the one.
    pub(crate) creates: BTreeMap<RequestId, ContainerId>,
    /// The runs whose `start` event was announced.
    pub(crate) starts_announced: BTreeSet<(ContainerId, u64)>,
    /// The newest StartTask sent to each container.
    pub(crate) last_start_op: BTreeMap<ContainerId, u64>,
    /// Removes of a container shown when asked, not answered yet.
    pub(crate) removes: std::collections::BTreeSet<RequestId>,
    /// Signals announced (a `kill` event) and not delivered since, by
    /// container; and the kill calls in flight, by op.
    pub(crate) kills_announced: std::collections::BTreeSet<(ContainerId, Signal)>,
    pub(crate) kill_calls: BTreeMap<OpId, (ContainerId, Signal)>,
    /// Every health probe asked for, in order.
    pub(crate) probes: Vec<Probe>,
    /// Whether `Step::ProbeResult` feeds results (off: every result lost).
    pub(crate) probe_results: bool,
    /// The restart policy's next backoff per container, by dockerd's rule:
    /// `restart_initial`, doubling to `restart_max` with each restart,
    /// back to `restart_initial` after a run of `restart_reset_after`.
    pub(crate) restart_backoff: BTreeMap<ContainerId, Duration>,
    /// Start and restart requests whose start took effect in the world
    /// (a task started while they waited).
    pub(crate) starts_reached: std::collections::BTreeSet<RequestId>,
    /// Containers a "stay down" kill reached while they were shown
    /// restarting, before any start of the new run was sent: no new task
    /// is made for them until a user's start.
    pub(crate) kept_down: std::collections::BTreeSet<ContainerId>,
    /// Containers a user ever stopped, killed, restarted, removed or gave
    /// another restart policy: only the others are owed every restart
    /// their policy calls for (the user's word outlives any daemon).
    pub(crate) meddled: std::collections::BTreeSet<ContainerId>,
    /// Containers a "stay down" kill reached while shown restarting: no
    /// start is sent to them (again) until a user's start.
    pub(crate) start_not_again: std::collections::BTreeSet<ContainerId>,
    /// Containers connected back to their own network while stopped
    /// (`connects_back`), with no disconnect asked since: every run from
    /// then on has its own `eth0`, its ports published.
    pub(crate) connected_back: std::collections::BTreeSet<ContainerId>,
    /// Volumes, execs, commits and copies (`resources.rs`).
    pub(crate) res: Resources,
}

impl Harness {
    /// A fresh core and world. Swarm bit 6: relist every 40 s while
    /// connected (instead of every 300 s), so that periodic relists are
    /// often in flight when a late answer of an abandoned one arrives.
    /// Swarm bit 7: a cgroup v1 freezer, where even SIGKILL waits for a
    /// thaw, so a kill of a paused container takes effect only if the
    /// core thaws it.
    pub(crate) fn new(swarm: u8) -> Harness {
        let now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(support::WALL0));
        let mut config = CoreConfig::default();
        with_bug_asked(&mut config);
        if swarm & (1 << 6) != 0 {
            config.relist_interval = Some(Duration::from_secs(40));
        }
        let frozen_holds_kill = swarm & (1 << 7) != 0;
        let slack = config.stop_answer_slack;
        Harness {
            task_progress: BTreeMap::new(),
            oom_announced: Default::default(),
            core: Core::new(config.clone(), 9, now),
            config,
            now,
            world: World::new(frozen_holds_kill),
            outstanding: Vec::new(),
            subscriptions: Default::default(),
            past_events: Vec::new(),
            next_req: 0,
            trace: Vec::new(),
            exits: BTreeMap::new(),
            records: BTreeMap::new(),
            configs: BTreeMap::new(),
            create_configs: BTreeMap::new(),
            unseen: BTreeMap::new(),
            last_op: 0,
            daemons: 1,
            answer_lost: false,
            relisting: false,
            failures: BTreeMap::new(),
            streaks: BTreeMap::new(),
            answering: None,
            answering_call: None,
            relist_snapshots: BTreeMap::new(),
            newest_relist: 0,
            kill_deadline: BTreeMap::new(),
            starts: BTreeMap::new(),
            start_asked_at_op: BTreeMap::new(),
            starts_asked: BTreeMap::new(),
            creates_asked: BTreeMap::new(),
            look_again_by: None,
            refresh_owed_by: None,
            doubts: BTreeSet::new(),
            doubt_owed_by: BTreeMap::new(),
            activity: BTreeMap::new(),
            stop_bounds: BTreeMap::new(),
            answered: BTreeMap::new(),
            stop_signal_ops: BTreeMap::new(),
            signal_delivered: BTreeMap::new(),
            must_answer: Vec::new(),
            asks: BTreeMap::new(),
            start_ledger: BTreeMap::new(),
            user_kill_ops: BTreeMap::new(),
            waits: BTreeMap::new(),
            slack,
            pauses_asked: Default::default(),
            updates_asked: Default::default(),
            updates: BTreeMap::new(),
            unpause_standing: Default::default(),
            connects: BTreeMap::new(),
            connected: BTreeMap::new(),
            disconnects: Vec::new(),
            restarts: Default::default(),
            creates: BTreeMap::new(),
            last_start_op: BTreeMap::new(),
            starts_announced: BTreeSet::new(),
            removes: Default::default(),
            kills_announced: Default::default(),
            kill_calls: BTreeMap::new(),
            probes: Vec::new(),
            probe_results: true,
            restart_backoff: BTreeMap::new(),
            starts_reached: Default::default(),
            kept_down: Default::default(),
            meddled: Default::default(),
            start_not_again: Default::default(),
            connected_back: Default::default(),
            res: Resources::default(),
        }
    }

    /// A harness whose containers mount volumes, and whose users exec,
    /// commit, copy and manage volumes too.
    pub(crate) fn with_resources(swarm: u8) -> Harness {
        let mut harness = Harness::new(swarm);
        harness.res.on = true;
        harness
    }

    /// Feeds one input and checks the per-step properties.
    pub(crate) fn feed(&mut self, input: Input) -> Result<(), TestCaseError> {
        self.event_fed(&input);
        self.res.commit_failed_now.clear();
        let answered_call = self.answering_call.take();
        self.note_answered_call(&input, &answered_call);
        let user_kill = self.note_kill_answered(&input);
        self.count_failures(&input);
        let before = self.before_input();
        self.forget_oom_of_an_earlier_run(&input);
        // An exec's end changes nothing of its container.
        let state_read = match &answered_call {
            Some(Call::ExecState { id, .. }) => Some(id.clone()),
            _ => None,
        };
        let exec_end = exec_end_of(&input, state_read)
            .map(|(id, shown)| (shown(Some(&self.core), &id), id, shown));
        self.core.handle_input(self.now, input.clone());
        let actions = self.core.drain_actions();
        if let Some((before, id, shown)) = exec_end {
            exec_end_harmless(&id, before, shown(Some(&self.core), &id))
                .map_err(TestCaseError::fail)?;
        }
        self.check_refusal_keeps_the_connection(&input, &answered_call, before.ready)?;
        // A policy restart newly owed waits out dockerd's backoff.
        if !matches!(input, Input::Restore(_)) {
            self.check_restart_backoff(&before.policy_owed)?;
        }
        self.check_policy_followed(&input, &before.policy_owed)?;
        self.forget_removed();
        self.check_an_exit_keeps_its_pid(&input, &before.pids)?;
        self.check_restart_count(&input, &before.restart_counts)?;
        self.count_starts_asked(&input, &before.start_wanted);
        // HF_TRACE=1: every input and what it produced, to read a failure.
        if std::env::var_os("HF_TRACE").is_some() {
            eprintln!("IN  {:?} @{:?}\n    -> {:?}", input, self.now.at, actions);
        }
        let mut answered = Answered::default();
        for action in &actions {
            self.follow_action(&input, &answered_call, action, &mut answered)?;
        }
        self.check_failed_pause_answered(&input, &answered_call, &answered.asks)?;
        self.check_failed_update_answered(&input, &answered_call, &answered.updates)?;
        if let (Input::ActionResult(_, result), Some(call)) = (&input, &answered_call) {
            let start_wanted = call
                .container_id()
                .is_some_and(|id| before.start_wanted.get(id).copied().unwrap_or(false));
            self.check_retries(
                call,
                result,
                user_kill.is_some(),
                start_wanted,
                &answered.asks,
            )?;
        }
        self.check_retry_backoff(&before.retry_timers)?;
        self.check_calls_justified(&input, &actions, &before.asks)?;
        self.check_waiting_starts_still_meant(&input)?;
        self.check_task_progress(&input)?;
        let new_exits = self.note_new_exits()?;
        for (id, pid, exit) in &new_exits {
            self.check_exit_is_the_truth(id, *pid, exit)?;
        }
        self.check_run_end_answers(&new_exits, &before.asks, &answered.asks)?;
        self.check_quiescent()?;
        self.check_waits_met(&input, answered.waits)?;
        self.check_names()?;
        self.check_network()?;
        self.check_taken_requests_stand()?;
        self.check_resources()?;
        for c in self.core.containers() {
            health_consistent(&self.core, &c)?;
        }
        self.trace.extend(actions);
        self.note_doubts_owed();
        Ok(())
    }

    /// What the checks after an input compare the core's reaction with.
    fn before_input(&self) -> Before {
        Before {
            start_wanted: self
                .core
                .containers()
                .map(|c| (c.record.id.clone(), c.record.intents.start))
                .collect(),
            restart_counts: self
                .core
                .containers()
                .map(|c| {
                    let id = &c.record.id;
                    let user_start = self
                        .starts
                        .iter()
                        .any(|(r, s)| s == id && !self.answered.contains_key(r));
                    (id.clone(), (c.record.restart_count, user_start))
                })
                .collect(),
            pids: self
                .core
                .containers()
                .map(|c| {
                    let r = c.record;
                    (r.id.clone(), (r.run, r.pid, c.current_exit().is_some()))
                })
                .collect(),
            policy_owed: self
                .core
                .containers()
                .map(|c| {
                    let owed = c.record.intents.policy_restart;
                    (c.record.id.clone(), (owed, c.current_exit().is_some()))
                })
                .collect(),
            ready: self.core.connection() == ConnectionState::Ready,
            retry_timers: self.retry_timers(),
            asks: self.asks.clone(),
        }
    }

    /// Follows one of the core's actions, and checks what it says.
    fn follow_action(
        &mut self,
        input: &Input,
        answered_call: &Option<Call>,
        action: &Action,
        answered: &mut Answered,
    ) -> Result<(), TestCaseError> {
        if let Some((op, call)) = Call::of(action) {
            return self.follow_call(input, &op, &call);
        }
        match action {
            Action::Call { .. } | Action::Network { .. } => {}
            // The user networks are the test world's, defined from the start.
            Action::PersistNetwork(_) | Action::UnpersistNetwork(_) => {}
            Action::Volume { .. } => {}
            Action::PersistVolume(_) | Action::UnpersistVolume(_) => {
                self.follow_volume_record(action)?;
            }
            Action::RunProbe(probe) => self.check_probe_asked(input, probe)?,
            Action::PublishResource(event) => {
                told_once(&mut self.res.told, event).map_err(TestCaseError::fail)?;
            }
            Action::Publish(event) if event.kind == UserEventKind::Oom => {
                self.check_oom_announced(input, event)?;
            }
            Action::Publish(event) => match event.kind {
                UserEventKind::Kill { signal } => {
                    self.kills_announced
                        .insert((event.container.clone(), signal));
                }
                UserEventKind::Start => self.check_start_announced_once(input, event)?,
                UserEventKind::Restart => self.check_restart_announced(input, event)?,
                _ => {}
            },
            Action::Persist(rec) => {
                self.records.insert(rec.id.clone(), rec.clone());
            }
            Action::Unpersist(id) => {
                self.records.remove(id);
            }
            Action::Answer(req, answer) => {
                self.follow_answer(input, answered_call, req, answer, answered)?;
            }
        }
        Ok(())
    }

    /// Follows a call the core issued: who owns it, what it may make the
    /// world do.
    fn follow_call(&mut self, input: &Input, op: &OpId, call: &Call) -> Result<(), TestCaseError> {
        self.last_op = self.last_op.max(op.0);
        // Once our SIGKILL is on its way a 137 may be ours.
        if let Call::Kill {
            id,
            signal: Signal::SIGKILL,
            ..
        } = call
        {
            self.kill_deadline.remove(id);
            if let Some(inst) = self.world.current_mut(id) {
                inst.sigkilled = true;
            }
        }
        // (To the container's newest task, even one gone
        // meanwhile: the core cannot know it was.)
        if let Call::StartTask { id } = call {
            self.last_start_op.insert(id.clone(), op.0);
        }
        if let Call::StartTask { id } = call
            && let Some(pid) = self
                .world
                .task_pid(id)
                .or_else(|| self.world.containerd.last_deleted.get(id).copied())
            && let Some(seen) = self.world.seen_mut(id, pid)
        {
            seen.start_sent = true;
        }
        self.check_kept_down(input, call)?;
        if let Call::CreateTask { id } = call {
            self.world.create_asked.insert(id.clone(), self.now.wall);
        }
        self.check_kill_announced(input, op, call)?;
        if matches!(call, Call::Relist) {
            self.look_again_by = None;
            self.refresh_owed_by = None;
            self.newest_relist = op.0;
            let tasks = self.world.containerd.tasks.clone();
            self.relist_snapshots.insert(*op, tasks);
        }
        // The core sends a user's kill before any stop signal.
        if let Call::Kill { id, signal, .. } = call
            && self
                .core
                .container(id)
                .is_some_and(|c| c.record.intents.kills.first() == Some(signal))
        {
            self.user_kill_ops.insert(*op, (id.clone(), *signal));
        }
        self.outstanding.push((*op, call.clone()));
        self.check_escalation(*op, call)?;
        Ok(())
    }

    /// Follows an answer to a request, and checks what it says.
    fn follow_answer(
        &mut self,
        input: &Input,
        answered_call: &Option<Call>,
        req: &RequestId,
        answer: &Answer,
        answered: &mut Answered,
    ) -> Result<(), TestCaseError> {
        self.check_wait_answer(input, req, answer)?;
        self.check_resource_answer(req, answer)?;
        // Of two creates of one id held before the first connection, the
        // first may be told it failed and the second be the one made
        // (found at 30,000 cases).
        if let Some(config) = self.create_configs.remove(req)
            && *answer == Answer::Done
            && let Some(id) = self.creates.get(req)
        {
            self.configs.insert(id.clone(), config);
        }
        self.follow_connect_answer(input, answered_call, req, answer)?;
        self.check_remove_answer(req, answer)?;
        if let Some(wait) = self.waits.remove(req)
            && matches!(answer, Answer::Waited { .. })
        {
            answered.waits.push((*req, wait));
        }
        if let Some(ask) = self.asks.remove(req) {
            // Past its bound, an unpause is still carried out.
            if let (Ask::Unpause, Answer::Error(e)) = (&ask.1, answer)
                && e.message.contains("carried out when possible")
            {
                self.unpause_standing.insert(ask.0.clone());
            }
            answered.asks.push((*req, ask, answer.clone()));
        }
        if let Some(of) = self.updates.remove(req) {
            answered.updates.push((*req, of, answer.clone()));
        }
        prop_assert!(
            self.answered.insert(*req, self.now.at).is_none(),
            "{req} answered twice"
        );
        self.check_start_said_done(req, answer)?;
        self.check_start_refusal(*req, answer)?;
        self.check_unavailable_only_when_away(req, answer)
    }
    /// A container made again under the same id starts afresh: its runs
    /// count from the first again.
    pub(crate) fn forget_removed(&mut self) {
        let core = &self.core;
        self.restart_backoff
            .retain(|id, _| core.container(id).is_some());
        self.task_progress
            .retain(|(id, ..), _| core.container(id).is_some());
        self.oom_announced
            .retain(|(id, _)| core.container(id).is_some());
        self.starts_announced
            .retain(|(id, _)| core.container(id).is_some());
    }

    pub(crate) fn req(&mut self) -> RequestId {
        self.next_req += 1;
        RequestId(self.next_req)
    }

    pub(crate) fn command(&mut self, command: Command) -> Result<RequestId, TestCaseError> {
        let req = self.req();
        if !matches!(command, Command::Wait { .. }) {
            self.must_answer.push(req);
        }
        let name_free = match &command {
            Command::Create { name, .. } => !self.core.containers().any(|c| &c.record.name == name),
            _ => false,
        };
        if let Command::Start { id } | Command::Restart { id, .. } = &command {
            self.starts.insert(req, id.clone());
            self.start_asked_at_op.insert(req, self.last_op);
        }
        // A user's start (or a container made anew) may start it again.
        if let Command::Start { id } | Command::Restart { id, .. } | Command::Create { id, .. } =
            &command
        {
            self.kept_down.remove(id);
            self.start_not_again.remove(id);
        }
        if let Command::Restart { .. } = &command {
            self.restarts.insert(req);
        }
        if let Command::Stop { id, .. }
        | Command::Kill { id, .. }
        | Command::Restart { id, .. }
        | Command::Remove { id, .. }
        | Command::UpdateRestartPolicy { id, .. } = &command
        {
            self.meddled.insert(id.clone());
        }
        if let Command::Create { id, .. } = &command {
            self.creates.insert(req, id.clone());
            self.creates_asked.insert(req, self.now.at);
        }
        let ask = match &command {
            Command::Kill { id, signal } => Some((id.clone(), Ask::Kill(*signal))),
            Command::Pause { id } => {
                self.unpause_standing.remove(id);
                Some((id.clone(), Ask::Pause))
            }
            Command::Unpause { id } => Some((id.clone(), Ask::Unpause)),
            _ => None,
        };
        if let Some(ask) = ask {
            self.asks.insert(req, ask);
        }
        if let Command::Start { .. } = &command {
            self.starts_asked.insert(req, self.now.at);
        }
        let creating = !matches!(command, Command::Create { .. })
            && command
                .container_id()
                .and_then(|id| self.core.container(id))
                .is_some_and(|c| c.record.presence == Presence::Creating);
        self.note_resource_command(req, &command);
        let is_wait = matches!(command, Command::Wait { .. });
        if let Command::Wait { id, condition } = &command {
            let exit = self
                .core
                .container(id)
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            self.waits.insert(req, (id.clone(), *condition, exit));
        }
        self.feed(Input::Command(req, Api::Docker, command))?;
        // A name no container shows is free: a removed container's too.
        let answer = self.trace.iter().rev().find_map(|a| match a {
            Action::Answer(r, answer) if *r == req => Some(answer),
            _ => None,
        });
        // While its create is on its way a container takes only waits.
        let conflict = matches!(answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict);
        prop_assert!(
            !creating || conflict != is_wait,
            "{} to a container being created: {:?}",
            req,
            answer
        );
        if name_free && let Some(Answer::Error(e)) = answer {
            prop_assert!(
                !(e.kind == ErrorKind::Conflict && e.message.contains("name")),
                "{} refused a free name: {}",
                req,
                e.message
            );
        }
        Ok(req)
    }

    pub(crate) fn advance(&mut self, d: Duration) -> Result<(), TestCaseError> {
        let target = self.now.at + d;
        while let Some((at, _)) = self.core.poll_timeout() {
            if at > target {
                break;
            }
            self.set_time(at);
            self.feed(Input::Timeout)?;
        }
        self.check_killed_at_grace_end(target)?;
        self.set_time(target);
        self.check_relists_owed_came()?;
        self.check_stops_answered_by_their_bound()?;
        self.check_starts_answered_in_time()?;
        self.check_creates_answered_in_time()
    }

    pub(crate) fn set_time(&mut self, at: Instant) {
        let delta = at.saturating_since(self.now.at);
        let wall = self.now.wall.as_unix_nanos() + i64::try_from(delta.as_nanos()).unwrap_or(0);
        self.now = Now::new(at.max(self.now.at), WallTime::from_unix_nanos(wall));
    }

    pub(crate) fn answer_of(&self, req: RequestId) -> Option<Answer> {
        self.trace.iter().rev().find_map(|a| match a {
            Action::Answer(r, answer) if *r == req => Some(answer.clone()),
            _ => None,
        })
    }

    /// Resolves every call and lets due timers pass.
    /// The next timer but a health check's: a probed run's probe timer is
    /// always armed, so waiting for "no timer" looks past it.
    pub(crate) fn next_timer_but_probes(&self) -> Option<(Instant, TimerKind)> {
        self.core
            .timers()
            .find(|(_, k)| !matches!(k, TimerKind::Probe(_)))
            .map(|(at, k)| (at, k.clone()))
    }

    /// Answers every call, each as it comes, in a healed world: the calls
    /// come to an end (a core that answers each result with another call
    /// of the same kind, for ever, would hang the case instead).
    pub(crate) fn resolve_all(&mut self) -> Result<(), TestCaseError> {
        let mut answered = 0u32;
        while let Some((_, call)) = self.outstanding.first() {
            answered += 1;
            prop_assert!(
                answered <= CALLS_HEALED_MAX,
                "the calls never end in a healed world: {:?} after {} answered",
                call,
                CALLS_HEALED_MAX
            );
            self.resolve(0, 0)?;
        }
        Ok(())
    }

    pub(crate) fn settle(&mut self) -> Result<(), TestCaseError> {
        for _ in 0..50 {
            self.resolve_all()?;
            // (A relist due this soon is one asked for after a placeholder,
            // not the periodic one, and may hide later timers behind it.)
            match self.next_timer_but_probes() {
                Some((at, _)) if at <= self.now.at + Duration::from_secs(2) => {
                    self.advance(Duration::from_secs(2))?
                }
                _ => break,
            }
        }
        Ok(())
    }

    /// holdfastd restarts from the records it persisted. Calls in flight
    /// never land; requests waiting die with it (their clients see the
    /// connection reset), so they are owed no answer.
    pub(crate) fn daemon_restart(&mut self) -> Result<(), TestCaseError> {
        self.oom_announced.clear();
        let answered = &self.answered;
        self.must_answer.retain(|r| answered.contains_key(r));
        self.stop_bounds.retain(|r, _| answered.contains_key(r));
        self.starts.retain(|r, _| answered.contains_key(r));
        self.starts_asked.retain(|r, _| answered.contains_key(r));
        self.creates_asked.retain(|r, _| answered.contains_key(r));
        self.connects.retain(|r, _| answered.contains_key(r));
        // A create the daemon held (or had not answered) died with it: the
        // next create of that id is the one made.
        self.creates.retain(|r, _| answered.contains_key(r));
        self.failures.clear();
        self.streaks.clear();
        self.waits.clear();
        self.asks.clear();
        self.updates.clear();
        self.user_kill_ops.clear();
        self.removes.clear();
        self.kills_announced.clear();
        self.res.told.clear();
        self.kill_calls.clear();
        self.relist_snapshots.clear();
        self.newest_relist = 0;
        self.look_again_by = None;
        self.refresh_owed_by = None;
        self.doubts.clear();
        self.doubt_owed_by.clear();
        self.restart_backoff.clear();
        self.kept_down.clear();
        self.start_not_again.clear();
        self.task_progress.clear();
        self.outstanding.clear();
        self.subscriptions.clear();
        self.stop_signal_ops.clear();
        self.signal_delivered.clear();
        self.kill_deadline.clear();
        self.volume_work_dies()?;
        self.daemons += 1;
        self.core = Core::new(self.config.clone(), 9 + self.daemons, self.now);
        self.last_op = 0;
        // Op ids start again: the new daemon's first relist sees it all.
        for mark in self.unseen.values_mut() {
            *mark = 0;
        }
        // What the core knew of OOM events was in memory only.
        for seen in self.world.seen.values_mut() {
            seen.oom_in_order = false;
        }
        let stored = Stored {
            containers: self.records.values().cloned().collect(),
            volumes: self.res.records.values().cloned().collect(),
            networks: Vec::new(),
        };
        self.feed(Input::Restore(stored))?;
        self.restore_volumes()?;
        self.feed(Input::NetworksFound(crate::support::found_networks(
            self.now.wall,
        )))
    }

    pub(crate) fn run(&mut self, steps: &[Step], swarm: u8) -> Result<(), TestCaseError> {
        self.feed(Input::Restore(Vec::new().into()))?;
        self.restore_volumes()?;
        self.feed(Input::NetworksFound(crate::support::found_networks(
            self.now.wall,
        )))?;
        self.advance(Duration::ZERO)?;
        if self.res.on {
            self.opening()?;
        }
        for step in steps.iter().filter(|s| enabled(s, swarm)) {
            self.step(step)?;
        }
        self.heal()?;
        self.check_resources_healed()?;
        self.check_healed()
    }

    /// Heals the world: containerd is back and connected; every call is
    /// answered and every timer passes (but the periodic relist, which is
    /// always armed while connected).
    pub(crate) fn heal(&mut self) -> Result<(), TestCaseError> {
        self.world.containerd.up = true;
        self.feed(Input::Connection(ConnectionFact::Connected))?;
        for _ in 0..200 {
            self.resolve_all()?;
            // What could not be seen waits for the periodic relist. (A
            // relist due soon, after a placeholder, may hide later timers
            // behind it, such as a stop's deadline; and a far one may hide
            // a request's answer bound: let them pass.)
            let behind = self
                .core
                .timers()
                .any(|(_, k)| !matches!(k, TimerKind::Probe(_) | TimerKind::PeriodicRelist));
            match self.next_timer_but_probes() {
                None => break,
                Some((at, TimerKind::PeriodicRelist))
                    if !behind
                        && self.unseen.is_empty()
                        && at > self.now.at + Duration::from_secs(30) =>
                {
                    break;
                }
                Some(_) => self.advance(Duration::from_secs(30))?,
            }
        }
        Ok(())
    }

    pub(crate) fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        // Clocks move: no two things happen in the same nanosecond (an
        // exit is later than the exit of the run before it).
        self.set_time(self.now.at + Duration::from_micros(1));
        match step {
            Step::Create(i, policy, signals) => self.create(i, policy, signals)?,
            Step::Start(i) => {
                self.command(Command::Start { id: id(i) })?;
            }
            Step::Cancel(n) => self.cancel_wait(n)?,
            Step::Edit(i, arg) => self.edit_chosen(i, arg)?,
            Step::Update(i, mib) => self.update_memory(i, mib)?,
            Step::Network(i, arg) => self.connect_or_disconnect(i, arg)?,
            Step::Pause(i, freeze) => self.pause_or_unpause(i, freeze)?,
            Step::OutsidePause(i, freeze) => self.freeze_from_outside(i, freeze)?,
            Step::Stop(i, timeout, signal) => self.stop(i, timeout, signal)?,
            Step::Kill(i, sigkill) => self.kill(i, sigkill)?,
            Step::Restart(i) => {
                self.command(Command::Restart {
                    id: id(i),
                    timeout: Some(Duration::from_secs(1)),
                    signal: None,
                })?;
            }
            Step::Remove(i, force) => self.remove(i, force, false)?,
            Step::Wait(i, condition) => {
                let condition = [
                    WaitCondition::NotRunning,
                    WaitCondition::NextExit,
                    WaitCondition::Removed,
                ][usize::from(*condition) % 3];
                self.command(Command::Wait {
                    id: id(i),
                    condition,
                })?;
            }
            Step::Resolve(n, failure) => self.resolve(*n, *failure)?,
            Step::LateRelist => self.late_relist()?,
            Step::WorldExit(i, status, lost) => self.exit_on_its_own(i, status, lost)?,
            Step::ExitReportedAgain(n) => self.exit_reported_again(n)?,
            Step::ReplayEvent(n) => self.replay_event(n)?,
            Step::WorldOom(i, lost) => self.oom_kill(i, lost)?,
            Step::DaemonRestart => self.daemon_restart()?,
            Step::ExecExit(i) => self.exec_exit(i)?,
            Step::Oom(i) => self.event(ContainerdEvent::TaskOom {
                container: id(i),
                published_at: Some(self.now.wall),
            })?,
            Step::ShimDies(i) => self.shim_dies(i)?,
            Step::StreamBreaks => self.stream_breaks()?,
            Step::ContainerdDown => self.containerd_down()?,
            Step::ContainerdUp => self.containerd_up()?,
            Step::Advance(ms) => self.advance(Duration::from_millis(u64::from(*ms)))?,
            Step::ProbeResult(index, outcome) => self.probe_result(index, outcome)?,
            Step::Exec(i, arg) => self.exec(i, arg)?,
            Step::ExecEnds(i, status, lost) => self.exec_ends(i, status, lost)?,
            Step::Commit(i, pause) => self.commit(i, pause)?,
            Step::Copy(i, hold) => self.copy(i, hold)?,
            Step::Volume(arg) => self.volume(arg)?,
            Step::RemoveVolumes(i, force) => self.remove(i, force, true)?,
        }
        Ok(())
    }

    /// `docker create` of the step's container, with the configuration its
    /// arguments draw.
    pub(crate) fn create(
        &mut self,
        i: &usize,
        policy: &u8,
        signals: &u8,
    ) -> Result<(), TestCaseError> {
        let config = ContainerConfig {
            restart_policy: restart_policy(*policy),
            // `--rm` (the API takes it with no restart policy only).
            auto_remove: *policy == 0 && signals & 0x10 != 0,
            // The default bridge, a user network (the same
            // step), none or the host's (the policy's bit 2),
            // another's namespace (no step).
            network: match i % 4 {
                0 | 2 => NetworkMode::Bridge,
                1 if policy & 4 != 0 => NetworkMode::Host,
                1 => NetworkMode::None,
                _ => NetworkMode::Container,
            },
            network_name: (i % 4 == 2).then(|| "app".to_owned()),
            network_container: (i % 4 == 3).then(|| holdfast_core::SharedNetwork {
                id: "donor".into(),
                pid: 1,
            }),
            stop_signal: stop_signal(*signals),
            image_stop_signal: stop_signal(*signals >> 2),
            healthcheck: health_check(*signals),
            mounts: self.mounts_of(*i),
            ..Default::default()
        };
        // (A create of it still waiting is the one made, if any.)
        let waiting = self
            .creates
            .iter()
            .any(|(r, c)| *c == id(i) && !self.answered.contains_key(r));
        if self.core.container(&id(i)).is_none() && !waiting {
            self.configs.insert(id(i), config.clone());
            // The model reuses ids (the daemon never does): a new
            // container of a removed one's id starts its runs anew.
            self.exits.retain(|(cid, _), _| *cid != id(i));
            self.connected_back.remove(&id(i));
        }
        let req = RequestId(self.next_req + 1);
        self.create_configs.insert(req, config.clone());
        self.command(Command::Create {
            id: id(i),
            name: format!("n{i}"),
            config: config.into(),
        })?;
        Ok(())
    }
}

/// `HF_BUG=<name>` runs the properties against a deliberate bug of the
/// core (the catalogue's script does, built with `--features
/// deliberate-bugs`); a name it cannot switch on is an error, never
/// ignored.
fn with_bug_asked(config: &mut CoreConfig) {
    let Ok(name) = std::env::var("HF_BUG") else {
        return;
    };
    #[cfg(feature = "deliberate-bugs")]
    {
        let bug = holdfast_core::DeliberateBug::from_name(&name);
        assert!(bug.is_some(), "HF_BUG={name}: no such deliberate bug");
        config.deliberate_bug = bug;
    }
    #[cfg(not(feature = "deliberate-bugs"))]
    {
        let _ = config;
        panic!(
            "HF_BUG={name} needs the deliberate-bugs feature: cargo test -p holdfast-core --features deliberate-bugs"
        );
    }
}
