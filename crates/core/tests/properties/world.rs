//! The world: containerd and the host's network as these properties need
//! them, and the truth of every process it ran.

use crate::harness::Harness;
use crate::steps::{Pick, id};
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum WorldTask {
    Created(u32),
    Running(u32),
    Stopped(u32, u32, WallTime),
}

pub(crate) fn oom_count_unread(pid: u32) -> bool {
    pid.is_multiple_of(5)
}

/// One process the world ran: the truth a recorded exit is checked against.
#[derive(Clone, Debug)]
pub(crate) struct Instance {
    pub(crate) pid: u32,
    pub(crate) exit: Option<u32>,
    /// The OOM killer ended it.
    pub(crate) oom: bool,
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
    /// Deleted by the core's own task delete before it ever ran (its
    /// answer may have been lost, but the core knows it sent it).
    pub(crate) deleted_unstarted: bool,
    /// A StartTask set it running.
    pub(crate) ran: bool,
}

/// containerd as far as these properties need it.
#[derive(Default)]
pub(crate) struct World {
    pub(crate) up: bool,
    pub(crate) containers: BTreeMap<ContainerId, ()>,
    /// When each container's latest CreateTask was sent.
    pub(crate) create_asked: BTreeMap<ContainerId, WallTime>,
    pub(crate) tasks: BTreeMap<ContainerId, WorldTask>,
    pub(crate) next_pid: u32,
    pub(crate) instances: Vec<Instance>,
    /// The newest instance of each (container, pid): pids are reused.
    pub(crate) latest: BTreeMap<(ContainerId, u32), usize>,
    /// Pids of each container's deleted tasks, newest last.
    pub(crate) deleted_pids: BTreeMap<ContainerId, Vec<u32>>,
    /// Running tasks that are frozen, by container: their pid.
    pub(crate) paused: BTreeMap<ContainerId, u32>,
    /// Swarm bit 7, a cgroup v1 freezer: a frozen process does not act
    /// even on SIGKILL until it is thawed (under v2 it dies at once).
    pub(crate) frozen_holds_kill: bool,
    /// Frozen tasks SIGKILLed under such a freezer, by container: their
    /// pid, which dies when thawed.
    pub(crate) kill_on_thaw: BTreeMap<ContainerId, u32>,
    /// Frozen tasks a user's "stay down" kill reached (SIGKILL, the stop
    /// signal, or any signal when none is configured): dockerd thaws
    /// them so that the signal lands. Until the core freezes one again.
    pub(crate) stay_down_frozen: std::collections::BTreeSet<ContainerId>,
    /// Tasks (container, pid) a user's "stay down" kill reached: frozen
    /// from outside afterwards, the core thaws them too (it cannot tell
    /// whether the freeze came first and holds the signal).
    pub(crate) stay_down_sent: std::collections::BTreeSet<(ContainerId, u32)>,
    /// When each container's last process exited.
    pub(crate) last_exit: BTreeMap<ContainerId, WallTime>,
    /// Containers attached to the network (the CNI plugins' state).
    pub(crate) attached: std::collections::BTreeSet<ContainerId>,
    /// Endpoints made (`network connect`): container and slot.
    pub(crate) endpoints: std::collections::BTreeSet<(ContainerId, u8)>,
    /// The `eth0` each container's own attachment made, with its
    /// published ports (the portmap plugin's rules): gone with the
    /// attachment, or with the release of slot 0 once disconnected.
    pub(crate) own_eth0: std::collections::BTreeSet<ContainerId>,
}

impl World {
    pub(crate) fn instance(&mut self, id: &ContainerId, pid: u32) -> Option<&mut Instance> {
        let i = *self.latest.get(&(id.clone(), pid))?;
        self.instances.get_mut(i)
    }

    /// What the adapter reads from the cgroup of `pid`'s exited task: its
    /// OOM kills. Not always (a task created before the adapter began, a
    /// cgroup gone): one pid in five comes without the count, so that the
    /// core's fallback rule is exercised too.
    pub(crate) fn oom_kills(&self, id: &ContainerId, pid: u32) -> Option<u64> {
        if oom_count_unread(pid) {
            return None;
        }
        let i = *self.latest.get(&(id.clone(), pid))?;
        self.instances.get(i).map(|inst| u64::from(inst.oom))
    }

    pub(crate) fn current(&mut self, id: &ContainerId) -> Option<&mut Instance> {
        let pid = match self.tasks.get(id)? {
            WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..) => *p,
        };
        self.instance(id, pid)
    }

    /// The core's task delete: a created task's process never ran.
    pub(crate) fn delete_by_call(&mut self, id: &ContainerId) {
        if let Some(WorldTask::Created(pid)) = self.tasks.get(id).cloned()
            && let Some(inst) = self.instance(id, pid)
        {
            inst.deleted_unstarted = true;
        }
        self.delete_task(id);
    }

    pub(crate) fn delete_task(&mut self, id: &ContainerId) {
        self.paused.remove(id);
        self.kill_on_thaw.remove(id);
        if let Some(task) = self.tasks.remove(id) {
            let (WorldTask::Created(pid) | WorldTask::Running(pid) | WorldTask::Stopped(pid, ..)) =
                task;
            self.deleted_pids.entry(id.clone()).or_default().push(pid);
        }
    }
}

impl Harness {
    pub(crate) fn event(&mut self, event: ContainerdEvent) -> Result<(), TestCaseError> {
        self.past_events.push(event.clone());
        if self.world.up && !self.subscriptions.is_empty() {
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

    pub(crate) fn world_exit(
        &mut self,
        id: &ContainerId,
        pid: u32,
        status: u32,
        lost: bool,
    ) -> Result<(), TestCaseError> {
        let at = self.now.wall;
        self.world.paused.remove(id);
        self.world.kill_on_thaw.remove(id);
        self.world.last_exit.insert(id.clone(), at);
        self.world
            .tasks
            .insert(id.clone(), WorldTask::Stopped(pid, status, at));
        if let Some(inst) = self.world.instance(id, pid) {
            inst.exit = Some(status);
        }
        let event = ContainerdEvent::TaskExit {
            container: id.clone(),
            exec_id: id.to_string(),
            pid,
            exit_status: status,
            exited_at: at,
            oom_kills: self.world.oom_kills(id, pid),
        };
        if lost {
            self.lost(&event);
            self.past_events.push(event);
            Ok(())
        } else {
            self.event(event)
        }
    }
}

impl Harness {
    /// A running task exits on its own; its event may be lost.
    pub(crate) fn exit_on_its_own(
        &mut self,
        i: &usize,
        status: &u8,
        lost: &bool,
    ) -> Result<(), TestCaseError> {
        if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id(i)).cloned() {
            // 2: SIGKILLed from outside (an administrator's kill -9).
            let status = if *status == 2 {
                137
            } else {
                u32::from(*status)
            };
            self.world_exit(&id(i), pid, status, *lost)?;
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
        if let Some(WorldTask::Running(pid)) = self.world.tasks.get(&id(i)).cloned() {
            if let Some(inst) = self.world.instance(&id(i), pid) {
                inst.oom = true;
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
            self.world_exit(&id(i), pid, 137, *lost)?;
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
        let pid = match self.world.tasks.get(&id(i)) {
            Some(WorldTask::Created(p) | WorldTask::Running(p) | WorldTask::Stopped(p, ..)) => *p,
            None => return Ok(()),
        };
        self.world.delete_task(&id(i));
        self.unseen.insert(id(i), self.last_op);
        // Every other pid: containerd cleans the dead shim's task
        // up and says so (TaskDelete); its exit died with the shim.
        // The core, with no exit of that task and no call of its
        // own to learn from, owes a relist at once.
        if pid.is_multiple_of(2) {
            let owed = self.core.connection() == ConnectionState::Ready
                && self.world.up
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
            self.event(ContainerdEvent::TaskDelete {
                container: id(i),
                pid,
            })?;
        }
        Ok(())
    }
}
