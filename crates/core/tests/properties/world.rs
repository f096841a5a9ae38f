//! The world: containerd and the host's network as the simulator models
//! them (`holdfast_sim::model`: one model of containerd for the simulator
//! and these properties), and what the harness saw of each process there.
//! Where the simulator draws from its seed, a step chooses: which pid a new
//! task gets, how a process takes a stop signal, when it exits or is
//! OOM-killed, whose shim dies, which answers and events are lost.

use crate::harness::Harness;
use crate::steps::{Pick, id};
use holdfast_core::*;
use holdfast_sim::model::{
    Behavior, Containerd, Effect, HostNetwork, HostVolumes, OnTerm, PidTruth,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What the harness saw of one process (the newest of its container with
/// its pid): the calls the core sent to it, the events it was told of. What
/// became of the process itself is containerd's truth ([`PidTruth`]).
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The OOM killer struck it: its TaskOom may come before its exit.
    pub(crate) oom_struck: bool,
    /// Its OOM event reached this holdfastd, and no exit of another pid of
    /// the container came after it (the core takes that as a new run).
    pub(crate) oom_in_order: bool,
    /// We sent SIGKILL to it: a 137 may be ours, not the OOM killer's.
    pub(crate) sigkilled: bool,
    /// When the container's previous process exited, in the world.
    pub(crate) after: Option<WallTime>,
    /// An OOM event published after `after` reached the core while this
    /// was the container's process: without a cgroup count, the core
    /// cannot tell it from this process's own (the event names no pid).
    pub(crate) oom_event_in_run: bool,
    /// A StartTask was sent while this was the container's newest task
    /// (whatever became of it: an attempt whose answer was lost, or one
    /// sent as its shim died, may have worked).
    pub(crate) start_sent: bool,
    /// When the CreateTask that made it was sent: nothing of this process
    /// happened before.
    pub(crate) asked_at: WallTime,
    /// Its shim died while it was live: containerd's cleanup killed it,
    /// and its exit reached no one (the event died with the shim), so the
    /// world never had an exit of it to tell.
    pub(crate) vanished: bool,
}

/// containerd and the host's network, with what the harness saw of them.
pub(crate) struct World {
    /// containerd, and the truth of every process it ran.
    pub(crate) containerd: Containerd,
    /// The CNI plugins' state: attachments and endpoints.
    pub(crate) network: HostNetwork,
    /// The volumes' directories.
    pub(crate) volumes: HostVolumes,
    /// What the harness saw of the newest process of each (container,
    /// pid): pids are reused.
    pub(crate) seen: BTreeMap<(ContainerId, u32), Seen>,
    /// When each container's latest CreateTask was sent.
    pub(crate) create_asked: BTreeMap<ContainerId, WallTime>,
    /// When each container's last process exited, as the world told it
    /// (not one that vanished with its shim).
    pub(crate) last_exit: BTreeMap<ContainerId, WallTime>,
    /// Frozen tasks a user's "stay down" kill reached (SIGKILL, the stop
    /// signal, or any signal when none is configured): dockerd thaws
    /// them so that the signal lands. Until the core freezes one again.
    pub(crate) stay_down_frozen: BTreeSet<ContainerId>,
    /// Tasks (container, pid) a user's "stay down" kill reached: frozen
    /// from outside afterwards, the core thaws them too (it cannot tell
    /// whether the freeze came first and holds the signal).
    pub(crate) stay_down_sent: BTreeSet<(ContainerId, u32)>,
}

impl World {
    /// containerd up with nothing in it. `frozen_holds_kill`: a cgroup v1
    /// freezer, where a frozen process does not act even on SIGKILL until
    /// it is thawed (under v2 it dies at once).
    pub(crate) fn new(frozen_holds_kill: bool) -> World {
        let mut containerd = Containerd::new();
        containerd.frozen_holds_kill = frozen_holds_kill;
        World {
            containerd,
            network: HostNetwork::default(),
            volumes: HostVolumes::default(),
            seen: BTreeMap::new(),
            create_asked: BTreeMap::new(),
            last_exit: BTreeMap::new(),
            stay_down_frozen: BTreeSet::new(),
            stay_down_sent: BTreeSet::new(),
        }
    }

    /// The pid of `id`'s task, whatever its state.
    pub(crate) fn task_pid(&self, id: &ContainerId) -> Option<u32> {
        self.containerd.tasks.get(id).map(|t| t.pid)
    }

    /// The pid of `id`'s task if it runs, frozen or not.
    pub(crate) fn running_pid(&self, id: &ContainerId) -> Option<u32> {
        self.containerd
            .tasks
            .get(id)
            .filter(|t| matches!(t.status, TaskStatus::Running | TaskStatus::Paused))
            .map(|t| t.pid)
    }

    /// The pid of `id`'s task if it is frozen.
    pub(crate) fn frozen_pid(&self, id: &ContainerId) -> Option<u32> {
        self.containerd
            .tasks
            .get(id)
            .filter(|t| t.status == TaskStatus::Paused)
            .map(|t| t.pid)
    }

    /// Frozen tasks that hold a SIGKILL (under a v1 freezer) until they
    /// are thawed, by container: their pid.
    pub(crate) fn held_kills(&self) -> BTreeMap<ContainerId, u32> {
        self.containerd
            .tasks
            .iter()
            .filter(|(_, t)| t.frozen_exits.contains(&(137, false)))
            .map(|(id, t)| (id.clone(), t.pid))
            .collect()
    }

    /// The truth of `id`'s process `pid` (the newest with that pid).
    pub(crate) fn truth(&self, id: &ContainerId, pid: u32) -> Option<&PidTruth> {
        self.containerd.truth_of(id, pid)
    }

    /// What the harness saw of `id`'s process `pid`.
    pub(crate) fn seen_of(&self, id: &ContainerId, pid: u32) -> Option<&Seen> {
        self.seen.get(&(id.clone(), pid))
    }

    pub(crate) fn seen_mut(&mut self, id: &ContainerId, pid: u32) -> Option<&mut Seen> {
        self.seen.get_mut(&(id.clone(), pid))
    }

    /// What the harness saw of `id`'s current task's process.
    pub(crate) fn current_mut(&mut self, id: &ContainerId) -> Option<&mut Seen> {
        let pid = self.task_pid(id)?;
        self.seen_mut(id, pid)
    }

    /// The exit the world had of `id`'s process `pid`: none while it runs,
    /// and none for one that vanished with its shim.
    pub(crate) fn exit_of(&self, id: &ContainerId, pid: u32) -> Option<u32> {
        let vanished = self.seen_of(id, pid).is_some_and(|s| s.vanished);
        let exit = self.truth(id, pid).and_then(|t| t.exit);
        exit.filter(|_| !vanished).map(|(status, _)| status)
    }

    /// Deleted by the core's own task delete before it ever ran (its
    /// answer may have been lost, but the core knows it sent it).
    pub(crate) fn deleted_unstarted(&self, id: &ContainerId, pid: u32) -> bool {
        self.truth(id, pid)
            .is_some_and(|t| t.deleted && !t.started && !t.shim_died && t.exit.is_none())
    }

    /// What the adapter reads from the cgroup of `pid`'s exited task: its
    /// OOM kills, or none, for one pid in five (see the model).
    pub(crate) fn oom_kills(&self, pid: u32) -> Option<u64> {
        self.containerd.oom_kills(pid)
    }

    /// A new process of `id` (`pid`), created now: nothing of it seen yet.
    pub(crate) fn created(&mut self, id: &ContainerId, pid: u32, now: WallTime) {
        let seen = Seen {
            oom_struck: false,
            oom_in_order: false,
            sigkilled: false,
            after: self.last_exit.get(id).copied(),
            oom_event_in_run: false,
            start_sent: false,
            asked_at: self.create_asked.get(id).copied().unwrap_or(now),
            vanished: false,
        };
        self.seen.insert((id.clone(), pid), seen);
    }

    /// A task started: its process takes a stop signal as the harness's
    /// world has it. Every other run is PID 1 without a handler: it
    /// ignores SIGTERM, SIGINT and SIGQUIT (what stop signals are); the
    /// others die of them.
    pub(crate) fn started(&mut self, id: &ContainerId, pid: u32) {
        let on_term = if pid % 2 == 1 {
            OnTerm::Ignore
        } else {
            OnTerm::Dies
        };
        if let Some(task) = self.containerd.tasks.get_mut(id) {
            task.behavior = Behavior {
                lifetime: None,
                oom_after: None,
                on_term,
                execs: 0,
            };
        }
    }
}

impl Harness {
    pub(crate) fn event(&mut self, event: ContainerdEvent) -> Result<(), TestCaseError> {
        self.past_events.push(event.clone());
        if self.world.containerd.up && !self.subscriptions.is_empty() {
            self.feed(Input::Event(event))?;
        } else {
            self.lost(&event);
        }
        Ok(())
    }

    /// `event` never reached the core: until a relist asked for after now
    /// ends, the core cannot know what it said.
    pub(crate) fn lost(&mut self, event: &ContainerdEvent) {
        let id = match event {
            ContainerdEvent::TaskCreate { container, .. }
            | ContainerdEvent::TaskStart { container, .. }
            | ContainerdEvent::TaskExit { container, .. }
            | ContainerdEvent::TaskOom { container, .. }
            | ContainerdEvent::TaskDelete { container, .. }
            | ContainerdEvent::TaskPaused { container }
            | ContainerdEvent::TaskResumed { container } => container,
        };
        self.unseen.insert(id.clone(), self.last_op);
    }

    /// The process `pid` of `id` exits (or is killed) now, unless its task
    /// is frozen and holds the exit until it is thawed; its shim publishes
    /// the exit (`lost`: it never reaches the core).
    pub(crate) fn world_exit(
        &mut self,
        id: &ContainerId,
        pid: u32,
        status: u32,
        oom: bool,
        lost: bool,
    ) -> Result<(), TestCaseError> {
        let at = self.now.wall;
        if self
            .world
            .containerd
            .process_exit(pid, status, oom, at)
            .is_none()
        {
            return Ok(());
        }
        self.world.last_exit.insert(id.clone(), at);
        let event = ContainerdEvent::TaskExit {
            container: id.clone(),
            exec_id: id.to_string(),
            pid,
            exit_status: status,
            exited_at: at,
            oom_kills: self.world.oom_kills(pid),
        };
        if lost {
            self.lost(&event);
            self.past_events.push(event);
        } else {
            self.event(event)?;
        }
        // The execs still running die with it, killed by the kernel.
        for (exec_id, exec_pid) in self.world.containerd.end_execs(id) {
            self.exec_exit_event(id, exec_id, exec_pid, 137, lost)?;
        }
        Ok(())
    }

    /// The exits a change of containerd's state set going happen now (the
    /// simulator schedules them; here a step's answer orders them).
    pub(crate) fn exits(&mut self, id: &ContainerId, fx: &[Effect]) -> Result<(), TestCaseError> {
        for effect in fx {
            if let Effect::Exit {
                pid, status, oom, ..
            } = *effect
            {
                self.world_exit(id, pid, status, oom, false)?;
            }
        }
        Ok(())
    }

    /// The events a change of containerd's state publishes reach the core
    /// (what someone else does to a task: the core's own calls' events are
    /// not followed).
    pub(crate) fn publish(&mut self, fx: &[Effect]) -> Result<(), TestCaseError> {
        for effect in fx {
            if let Effect::Publish(event) = effect {
                self.event(event.clone())?;
            }
        }
        Ok(())
    }

    /// The pid of `id`'s process if it exits now of `status`: it runs, not
    /// frozen, or its freezer lets it die. A frozen process does nothing
    /// by itself and allocates nothing; only SIGKILL ends it, and under a
    /// v1 freezer not even that until it is thawed: then the step that
    /// would end it does nothing.
    fn exits_now(&self, id: &ContainerId, status: u32, oom: bool) -> Option<u32> {
        let task = self.world.containerd.tasks.get(id)?;
        let pid = self.world.running_pid(id)?;
        (!self.world.containerd.holds_exit(task, status, oom)).then_some(pid)
    }

    /// A running task exits on its own; its event may be lost.
    pub(crate) fn exit_on_its_own(
        &mut self,
        i: &usize,
        status: &u8,
        lost: &bool,
    ) -> Result<(), TestCaseError> {
        // 2: SIGKILLed from outside (an administrator's kill -9).
        let status = if *status == 2 {
            137
        } else {
            u32::from(*status)
        };
        if let Some(pid) = self.exits_now(&id(i), status, false) {
            self.world_exit(&id(i), pid, status, false, *lost)?;
        }
        Ok(())
    }

    /// Any earlier event is delivered again.
    pub(crate) fn replay_event(&mut self, n: &Pick) -> Result<(), TestCaseError> {
        if !self.past_events.is_empty() {
            let event = self.past_events[n.of(self.past_events.len())].clone();
            self.event(event)?;
        }
        Ok(())
    }

    /// The OOM killer kills a running task: TaskOom, then its exit (137);
    /// both events may be lost.
    pub(crate) fn oom_kill(&mut self, i: &usize, lost: &bool) -> Result<(), TestCaseError> {
        if let Some(pid) = self.exits_now(&id(i), 137, true) {
            if let Some(seen) = self.world.seen_mut(&id(i), pid) {
                seen.oom_struck = true;
            }
            let oom = ContainerdEvent::TaskOom {
                container: id(i),
                published_at: Some(self.now.wall),
            };
            if *lost {
                self.lost(&oom);
                self.past_events.push(oom);
            } else {
                self.event(oom)?;
            }
            self.world_exit(&id(i), pid, 137, true, *lost)?;
        }
        Ok(())
    }

    /// An exec in the container exits.
    pub(crate) fn exec_exit(&mut self, i: &usize) -> Result<(), TestCaseError> {
        let exited_at = self.now.wall;
        self.event(ContainerdEvent::TaskExit {
            container: id(i),
            exec_id: "exec1".into(),
            pid: 1,
            exit_status: 1,
            exited_at,
            oom_kills: None,
        })?;
        Ok(())
    }

    /// The task's shim dies: containerd loses the task.
    pub(crate) fn shim_dies(&mut self, i: &usize) -> Result<(), TestCaseError> {
        let live = self.world.containerd.live_pid(&id(i));
        let Some((pid, events)) = self.world.containerd.shim_dies(&id(i), self.now.wall) else {
            return Ok(());
        };
        if live.is_some()
            && let Some(seen) = self.world.seen_mut(&id(i), pid)
        {
            seen.vanished = true;
        }
        self.unseen.insert(id(i), self.last_op);
        // Every other pid: containerd cleans the dead shim's task
        // up and says so (TaskDelete); its exit died with the shim.
        // The core, with no exit of that task and no call of its
        // own to learn from, owes a relist at once.
        if pid.is_multiple_of(2) {
            let owed = self.core.connection() == ConnectionState::Ready
                && self.world.containerd.up
                && !self.subscriptions.is_empty()
                && self
                    .core
                    .container(&id(i))
                    .is_some_and(|c| c.record.pid == Some(pid) && c.current_exit().is_none())
                && !self
                    .outstanding
                    .iter()
                    .any(|(_, c)| c.container_id() == Some(&id(i)));
            if owed && self.refresh_owed_by.is_none() {
                self.refresh_owed_by = Some(self.now.at + Duration::from_secs(2));
            }
            for event in events {
                if let ContainerdEvent::TaskDelete { .. } = event {
                    self.event(event)?;
                }
            }
        }
        Ok(())
    }
}
