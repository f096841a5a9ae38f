//! The fake containerd: a reference model of containerd 1.6 as measured in
//! `reference/containerd-notes.md`, plus the ground truth of every process
//! it ever ran. It only changes state and reports what follows (events to
//! publish, exits to schedule); the simulator schedules those in time.

use holdfast_core::{
    ContainerId, ContainerdEvent, Definition, Done, Failure, FailureKind, FoundNetwork, Instant,
    NetworkCall, Signal, TaskInfo, TaskStatus, VolumeCall, WallTime,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What a process does on SIGTERM (or SIGINT, SIGQUIT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTerm {
    /// PID 1 without a handler: SIGTERM does nothing.
    Ignore,
    /// Exits `after` the signal with `status` (a slow exit when `after` is long).
    Exit { after: Duration, status: u32 },
    /// Dies of the signal at once, as a process with no handler for it
    /// (and not PID 1) does: status 128 + the signal's number.
    Dies,
}

/// How the init process of a task behaves, drawn when it starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Behavior {
    /// Exits by itself after this long, with `status`.
    pub lifetime: Option<(Duration, u32)>,
    /// OOM-killed after this long (exit 137, after a TaskOOM event).
    pub oom_after: Option<Duration>,
    pub on_term: OnTerm,
    /// Exec processes started in the container, each running this long.
    pub execs: u32,
}

#[derive(Clone, Debug)]
pub struct Task {
    pub pid: u32,
    pub status: TaskStatus,
    pub exit_status: u32,
    pub exited_at: Option<WallTime>,
    pub behavior: Behavior,
    /// Exits (status, oom) that came due while the task was frozen: a
    /// frozen process does nothing until thawed, except die of SIGKILL.
    pub frozen_exits: Vec<(u32, bool)>,
}

/// The truth about one pid. When a later task reuses the pid, the earlier
/// truth moves to [`Containerd::past`].
#[derive(Clone, Debug)]
pub struct PidTruth {
    pub container: ContainerId,
    pub created_at: Instant,
    pub started: bool,
    /// The real exit status and time, once the process exited.
    pub exit: Option<(u32, WallTime)>,
    pub oom: bool,
    /// The shim died: containerd lost the task (and whatever it knew).
    pub shim_died: bool,
    /// The task was deleted from containerd.
    pub deleted: bool,
    /// How often the task was frozen.
    pub pauses: u32,
}

/// What a state change means for the rest of the world.
#[derive(Clone, Debug)]
pub enum Effect {
    Publish(ContainerdEvent),
    /// The init process `pid` will exit after `after`.
    Exit {
        pid: u32,
        after: Duration,
        status: u32,
        oom: bool,
    },
    /// A task started: the simulator draws its behaviour.
    Started {
        container: ContainerId,
        pid: u32,
    },
    /// A user's exec started: the simulator draws when it ends.
    ExecStarted {
        container: ContainerId,
        exec_id: String,
        pid: u32,
    },
    /// A user's exec was signalled: it dies of it (status 128 + signal)
    /// as soon as its task is not frozen.
    ExecSignalled {
        container: ContainerId,
        exec_id: String,
        pid: u32,
        status: u32,
    },
}

#[derive(Debug, Default)]
pub struct Containerd {
    pub up: bool,
    pub containers: BTreeSet<ContainerId>,
    pub tasks: BTreeMap<ContainerId, Task>,
    pub truth: BTreeMap<u32, PidTruth>,
    /// Truths of pids that a later task reused, oldest first.
    pub past: Vec<(u32, PidTruth)>,
    /// A cgroup v1 freezer: even SIGKILL waits for a thaw.
    pub frozen_holds_kill: bool,
    /// Exec processes by container and exec id: their pid, and their exit
    /// code once ended. They go with their task.
    pub execs: BTreeMap<(ContainerId, String), (u32, Option<i32>)>,
    /// How each exec that ended ended (kept after containerd forgets it).
    pub exec_truth: BTreeMap<(ContainerId, String), i32>,
    /// Snapshots mounted for a copy (`MountRootfs`), by container: gone
    /// with an unmount, or with the container (the adapter's delete
    /// unmounts what is left).
    pub mounted: BTreeSet<ContainerId>,
    /// The pid of each container's most recently deleted task (deleted by
    /// a call or with its dead shim): the pid of that container the kernel
    /// is the likeliest to hand out again.
    pub last_deleted: BTreeMap<ContainerId, u32>,
    /// Containers whose task create was cut halfway and left its bundle
    /// behind: every later create is refused as existing, and no task is
    /// listed, until containerd restarts (which clears what no shim
    /// holds) or the container is deleted. With when each was left.
    pub leftovers: BTreeMap<ContainerId, Instant>,
    /// When a task create of each container last went unanswered (cut by
    /// its deadline, or by the connection): containerd may be carrying it
    /// out for as long as the adapter lets it run on.
    pub lost_creates: BTreeMap<ContainerId, Instant>,
    last_pid: u32,
}

fn fail(kind: FailureKind, message: &str) -> Result<Done, Failure> {
    Err(Failure::new(kind, message))
}

/// Only SIGKILL (137, no OOM: a frozen process allocates nothing) ends a
/// frozen process, and under a v1 freezer not even that; anything else
/// happens once it is thawed.
fn holds_exit(frozen_holds_kill: bool, task: &Task, status: u32, oom: bool) -> bool {
    task.status == TaskStatus::Paused && (status != 137 || oom || frozen_holds_kill)
}

/// Whether the adapter can read the OOM count of `pid`'s cgroup (see
/// [`Containerd::oom_kills`]).
pub fn oom_count_readable(pid: u32) -> bool {
    !pid.is_multiple_of(5)
}

impl Containerd {
    pub fn new() -> Containerd {
        Containerd {
            up: true,
            last_pid: 100,
            ..Containerd::default()
        }
    }

    /// Runs an exec's process in the running task.
    pub fn start_exec(
        &mut self,
        id: &ContainerId,
        exec_id: &str,
        fx: &mut Vec<Effect>,
    ) -> Result<Done, Failure> {
        match self.tasks.get(id) {
            Some(t) if t.status == TaskStatus::Running => {}
            Some(_) => return fail(FailureKind::FailedPrecondition, "task is not running"),
            None => return fail(FailureKind::NotFound, "no such task"),
        }
        let key = (id.clone(), exec_id.to_owned());
        if self.execs.contains_key(&key) {
            return fail(FailureKind::AlreadyExists, "exec id already in use");
        }
        let pid = self.new_pid();
        self.execs.insert(key, (pid, None));
        fx.push(Effect::ExecStarted {
            container: id.clone(),
            exec_id: exec_id.to_owned(),
            pid,
        });
        Ok(Done::ExecStarted { pid })
    }

    /// A user's exec process exits with `status`, if it still runs in a
    /// task that is not frozen (`false`: it cannot, yet).
    pub fn exec_exits(&mut self, id: &ContainerId, exec_id: &str, pid: u32, status: i32) -> bool {
        if self
            .tasks
            .get(id)
            .is_some_and(|t| t.status == TaskStatus::Paused)
        {
            return false;
        }
        match self.execs.get_mut(&(id.clone(), exec_id.to_owned())) {
            Some((p, exit @ None)) if *p == pid => {
                *exit = Some(status);
                self.exec_truth
                    .insert((id.clone(), exec_id.to_owned()), status);
                true
            }
            _ => false,
        }
    }

    /// The init process of `id` died: the kernel kills every other
    /// process of its pid namespace. Returns the execs ended (id, pid).
    pub fn end_execs(&mut self, id: &ContainerId) -> Vec<(String, u32)> {
        let mut ended = Vec::new();
        for ((c, exec_id), (pid, exit)) in self.execs.iter_mut() {
            if c == id && exit.is_none() {
                *exit = Some(137);
                ended.push((exec_id.clone(), *pid));
            }
        }
        for (exec_id, _) in &ended {
            self.exec_truth.insert((id.clone(), exec_id.clone()), 137);
        }
        ended
    }

    /// containerd forgets a task's execs with the task.
    fn forget_execs(&mut self, id: &ContainerId) {
        self.execs.retain(|(c, _), _| c != id);
    }

    /// Signals an exec's process: one that ended, or that went with its
    /// task, is not found (containerd: "process already finished").
    pub fn kill_exec(
        &mut self,
        id: &ContainerId,
        exec_id: &str,
        signal: Signal,
        fx: &mut Vec<Effect>,
    ) -> Result<Done, Failure> {
        if !self.tasks.contains_key(id) {
            return fail(FailureKind::NotFound, "no such task");
        }
        match self.execs.get(&(id.clone(), exec_id.to_owned())) {
            Some(&(pid, None)) => {
                fx.push(Effect::ExecSignalled {
                    container: id.clone(),
                    exec_id: exec_id.to_owned(),
                    pid,
                    status: 128 + signal.number(),
                });
                Ok(Done::Ok)
            }
            Some((_, Some(_))) => fail(FailureKind::NotFound, "process already finished"),
            None => fail(FailureKind::NotFound, "no such process"),
        }
    }

    pub fn exec_state(&self, id: &ContainerId, exec_id: &str) -> Result<Done, Failure> {
        match self.execs.get(&(id.clone(), exec_id.to_owned())) {
            Some(&(pid, exit_code)) => Ok(Done::Process { pid, exit_code }),
            None => fail(FailureKind::NotFound, "no such process"),
        }
    }

    pub fn delete_exec(&mut self, id: &ContainerId, exec_id: &str) -> Result<Done, Failure> {
        let key = (id.clone(), exec_id.to_owned());
        match self.execs.get(&key) {
            Some((_, Some(_))) => {
                self.execs.remove(&key);
                Ok(Done::Ok)
            }
            Some((_, None)) => fail(FailureKind::FailedPrecondition, "process is running"),
            None => fail(FailureKind::NotFound, "no such process"),
        }
    }

    pub fn resize(&self, id: &ContainerId, exec_id: Option<&str>) -> Result<Done, Failure> {
        let running = match exec_id {
            None => self
                .tasks
                .get(id)
                .is_some_and(|t| t.status == TaskStatus::Running),
            Some(e) => self
                .execs
                .get(&(id.clone(), e.to_owned()))
                .is_some_and(|(_, exit)| exit.is_none()),
        };
        if running {
            Ok(Done::Ok)
        } else {
            fail(FailureKind::NotFound, "no such process")
        }
    }

    /// A commit's read of the container's changes, or a mount of its
    /// snapshot for a copy (and its unmount): its container must exist.
    pub fn snapshot_use(&mut self, call: &holdfast_core::Call) -> Result<Done, Failure> {
        use holdfast_core::Call;
        let (Call::ReadChanges { id, .. } | Call::MountRootfs { id } | Call::UnmountRootfs { id }) =
            call
        else {
            return fail(FailureKind::Invalid, "not a snapshot call");
        };
        if !self.containers.contains(id) {
            return fail(FailureKind::NotFound, "no such container");
        }
        match call {
            Call::MountRootfs { .. } => {
                self.mounted.insert(id.clone());
            }
            Call::UnmountRootfs { .. } => {
                self.mounted.remove(id);
            }
            _ => {}
        }
        Ok(Done::Ok)
    }

    /// A fresh pid, never reused.
    pub fn new_pid(&mut self) -> u32 {
        self.last_pid += 1;
        self.last_pid
    }

    pub fn relist(&self) -> Vec<TaskInfo> {
        self.tasks
            .iter()
            .map(|(id, t)| TaskInfo {
                container: id.clone(),
                pid: t.pid,
                status: t.status,
                exit_status: t.exit_status,
                exited_at: t.exited_at,
                oom_kills: (t.status == TaskStatus::Stopped)
                    .then(|| self.oom_kills(t.pid))
                    .flatten(),
            })
            .collect()
    }

    /// What the adapter reads from the cgroup of `pid`'s exited task: the
    /// OOM kills of its run. It cannot always (a task created before the
    /// adapter began, a cgroup already gone): one pid in five comes
    /// without the count, so that the core's fallback rule is exercised
    /// too.
    pub fn oom_kills(&self, pid: u32) -> Option<u64> {
        if !oom_count_readable(pid) {
            return None;
        }
        self.truth.get(&pid).map(|t| u64::from(t.oom))
    }

    pub fn create_container(&mut self, id: &ContainerId) -> Result<Done, Failure> {
        if !self.containers.insert(id.clone()) {
            return fail(FailureKind::AlreadyExists, "container already exists");
        }
        Ok(Done::Ok)
    }

    /// Pids whose process exited and whose task is gone: the kernel may
    /// hand them out again.
    pub fn reusable_pids(&self) -> Vec<u32> {
        self.truth
            .iter()
            .filter(|(pid, t)| {
                t.exit.is_some() && t.deleted && !self.tasks.values().any(|task| task.pid == **pid)
            })
            .map(|(pid, _)| *pid)
            .collect()
    }

    /// The truth of `pid` as `container`'s, if it was ever that
    /// container's: the current one, else the latest past one.
    pub fn truth_of(&self, container: &ContainerId, pid: u32) -> Option<&PidTruth> {
        self.truth
            .get(&pid)
            .filter(|t| &t.container == container)
            .or_else(|| {
                self.past
                    .iter()
                    .rev()
                    .find(|(p, t)| *p == pid && &t.container == container)
                    .map(|(_, t)| t)
            })
    }

    /// Creates the task of `id`; `reuse` is a pid from
    /// [`Containerd::reusable_pids`] to give it, else a fresh one.
    pub fn create_task(
        &mut self,
        id: &ContainerId,
        now: Instant,
        reuse: Option<u32>,
        fx: &mut Vec<Effect>,
    ) -> Result<Done, Failure> {
        if !self.containers.contains(id) {
            return fail(FailureKind::NotFound, "container not found");
        }
        if self.tasks.contains_key(id) {
            return fail(FailureKind::AlreadyExists, "task already exists");
        }
        if self.leftovers.contains_key(id) {
            return fail(FailureKind::AlreadyExists, "mkdir bundle: file exists");
        }
        let pid = match reuse {
            Some(pid) => {
                if let Some(old) = self.truth.remove(&pid) {
                    self.past.push((pid, old));
                }
                pid
            }
            None => self.new_pid(),
        };
        let behavior = Behavior {
            lifetime: None,
            oom_after: None,
            on_term: OnTerm::Ignore,
            execs: 0,
        };
        self.tasks.insert(
            id.clone(),
            Task {
                pid,
                status: TaskStatus::Created,
                exit_status: 0,
                exited_at: None,
                behavior,
                frozen_exits: Vec::new(),
            },
        );
        let truth = PidTruth {
            container: id.clone(),
            created_at: now,
            started: false,
            exit: None,
            oom: false,
            shim_died: false,
            deleted: false,
            pauses: 0,
        };
        self.truth.insert(pid, truth);
        fx.push(Effect::Publish(ContainerdEvent::TaskCreate {
            container: id.clone(),
            pid,
        }));
        Ok(Done::TaskCreated { pid })
    }

    pub fn start_task(&mut self, id: &ContainerId, fx: &mut Vec<Effect>) -> Result<Done, Failure> {
        let Some(task) = self.tasks.get_mut(id) else {
            return fail(FailureKind::NotFound, "task not found");
        };
        if task.status != TaskStatus::Created {
            return fail(
                FailureKind::FailedPrecondition,
                "task is not in created state",
            );
        }
        task.status = TaskStatus::Running;
        let pid = task.pid;
        if let Some(t) = self.truth.get_mut(&pid) {
            t.started = true;
        }
        fx.push(Effect::Publish(ContainerdEvent::TaskStart {
            container: id.clone(),
            pid,
            // Stamped by the shim when it publishes (Sim::publish).
            published_at: None,
        }));
        fx.push(Effect::Started {
            container: id.clone(),
            pid,
        });
        Ok(Done::Ok)
    }

    pub fn kill(
        &mut self,
        id: &ContainerId,
        signal: Signal,
        kill_ms: Duration,
        fx: &mut Vec<Effect>,
    ) -> Result<Done, Failure> {
        let Some(task) = self.tasks.get(id) else {
            return fail(FailureKind::NotFound, "task not found");
        };
        let pid = task.pid;
        match task.status {
            TaskStatus::Stopped => return fail(FailureKind::NotFound, "process already finished"),
            _ if signal == Signal::SIGKILL => {
                fx.push(Effect::Exit {
                    pid,
                    after: kill_ms,
                    status: 137,
                    oom: false,
                });
            }
            // SIGINT, SIGQUIT and SIGTERM are what programs handle to shut down.
            // A frozen process gets the signal when thawed: its exit, if
            // due meanwhile, waits (see `process_exit`).
            TaskStatus::Running | TaskStatus::Paused if matches!(signal.number(), 2 | 3 | 15) => {
                let exit = match task.behavior.on_term {
                    OnTerm::Ignore => None,
                    OnTerm::Exit { after, status } => Some((after, status)),
                    OnTerm::Dies => Some((Duration::ZERO, 128 + signal.number())),
                };
                if let Some((after, status)) = exit {
                    fx.push(Effect::Exit {
                        pid,
                        after,
                        status,
                        oom: false,
                    });
                }
            }
            // A created process (in runc init) and other signals: nothing.
            _ => {}
        }
        Ok(Done::Ok)
    }

    /// `Containers.Update` of the spec, and `Tasks.Update` of a running task.
    pub fn update_resources(&mut self, id: &ContainerId, running: bool) -> Result<Done, Failure> {
        if !self.containers.contains(id) {
            return fail(FailureKind::NotFound, "container not found");
        }
        if running
            && !self
                .tasks
                .get(id)
                .is_some_and(|t| t.status != TaskStatus::Stopped)
        {
            return fail(FailureKind::NotFound, "task not found");
        }
        Ok(Done::Ok)
    }

    /// `Tasks.Pause`: freezes a running task.
    pub fn pause(&mut self, id: &ContainerId, fx: &mut Vec<Effect>) -> Result<Done, Failure> {
        let Some(task) = self.tasks.get_mut(id) else {
            return fail(FailureKind::NotFound, "task not found");
        };
        if task.status != TaskStatus::Running {
            return fail(FailureKind::FailedPrecondition, "task is not running");
        }
        task.status = TaskStatus::Paused;
        if let Some(t) = self.truth.get_mut(&task.pid) {
            t.pauses += 1;
        }
        fx.push(Effect::Publish(ContainerdEvent::TaskPaused {
            container: id.clone(),
        }));
        Ok(Done::Ok)
    }

    /// `Tasks.Resume`: thaws a frozen task; what came due meanwhile happens.
    pub fn resume(&mut self, id: &ContainerId, fx: &mut Vec<Effect>) -> Result<Done, Failure> {
        let Some(task) = self.tasks.get_mut(id) else {
            return fail(FailureKind::NotFound, "task not found");
        };
        if task.status != TaskStatus::Paused {
            return fail(FailureKind::FailedPrecondition, "task is not paused");
        }
        task.status = TaskStatus::Running;
        let pid = task.pid;
        for (status, oom) in std::mem::take(&mut task.frozen_exits) {
            fx.push(Effect::Exit {
                pid,
                after: Duration::from_millis(1),
                status,
                oom,
            });
        }
        fx.push(Effect::Publish(ContainerdEvent::TaskResumed {
            container: id.clone(),
        }));
        Ok(Done::Ok)
    }

    pub fn delete_task(&mut self, id: &ContainerId, fx: &mut Vec<Effect>) -> Result<Done, Failure> {
        let Some(task) = self.tasks.get(id) else {
            return fail(FailureKind::NotFound, "task not found");
        };
        if matches!(task.status, TaskStatus::Running | TaskStatus::Paused) {
            return fail(
                FailureKind::FailedPrecondition,
                "cannot delete a running task",
            );
        }
        let pid = task.pid;
        self.tasks.remove(id);
        self.forget_execs(id);
        self.last_deleted.insert(id.clone(), pid);
        if let Some(t) = self.truth.get_mut(&pid) {
            t.deleted = true;
        }
        fx.push(Effect::Publish(ContainerdEvent::TaskDelete {
            container: id.clone(),
            pid,
        }));
        Ok(Done::Ok)
    }

    pub fn delete_container(&mut self, id: &ContainerId) -> Result<Done, Failure> {
        if !self.containers.contains(id) {
            return fail(FailureKind::NotFound, "container not found");
        }
        if self.tasks.contains_key(id) {
            return fail(FailureKind::FailedPrecondition, "container has a task");
        }
        self.containers.remove(id);
        self.mounted.remove(id);
        self.leftovers.remove(id);
        Ok(Done::Ok)
    }

    /// The init process `pid` exits now, if it still runs. Returns the
    /// container whose task it was.
    pub fn process_exit(
        &mut self,
        pid: u32,
        status: u32,
        oom: bool,
        wall: WallTime,
    ) -> Option<ContainerId> {
        let frozen_holds_kill = self.frozen_holds_kill;
        let (id, task) = self.tasks.iter_mut().find(|(_, t)| t.pid == pid)?;
        if task.status == TaskStatus::Stopped {
            return None;
        }
        if holds_exit(frozen_holds_kill, task, status, oom) {
            task.frozen_exits.push((status, oom));
            return None;
        }
        task.status = TaskStatus::Stopped;
        task.exit_status = status;
        task.exited_at = Some(wall);
        let id = id.clone();
        if let Some(t) = self.truth.get_mut(&pid) {
            t.exit = Some((status, wall));
            t.oom = oom;
        }
        Some(id)
    }

    /// The shim of `id`'s task dies: containerd forgets the task. Like
    /// containerd 1.6's `cleanupAfterDeadShim`, the shim's `delete` kills
    /// what still runs (status 128 + SIGKILL) and, if containerd is up,
    /// TaskExit and TaskDelete are published. Returns the pid and the events.
    pub fn shim_dies(
        &mut self,
        id: &ContainerId,
        wall: WallTime,
    ) -> Option<(u32, Vec<ContainerdEvent>)> {
        let task = self.tasks.remove(id)?;
        self.forget_execs(id);
        let pid = task.pid;
        self.last_deleted.insert(id.clone(), pid);
        let (status, exited_at) = match task.status {
            TaskStatus::Stopped => (task.exit_status, task.exited_at.unwrap_or(wall)),
            _ => (137, wall),
        };
        if let Some(t) = self.truth.get_mut(&pid) {
            t.shim_died = true;
            t.deleted = true;
            if t.exit.is_none() {
                t.exit = Some((status, exited_at));
            }
        }
        let events = vec![
            ContainerdEvent::TaskExit {
                container: id.clone(),
                exec_id: id.as_str().to_owned(),
                pid,
                exit_status: status,
                exited_at,
                // containerd publishes a dead shim's exit after its cleanup
                // removed the cgroup: nothing to read.
                oom_kills: None,
            },
            ContainerdEvent::TaskDelete {
                container: id.clone(),
                pid,
            },
        ];
        Some((pid, events))
    }

    /// Whether `task` is frozen and holds this exit of its process until it
    /// is thawed (see [`Containerd::process_exit`]).
    pub fn holds_exit(&self, task: &Task, status: u32, oom: bool) -> bool {
        holds_exit(self.frozen_holds_kill, task, status, oom)
    }

    /// Whether the task of `id` currently runs (or is created), by pid.
    pub fn live_pid(&self, id: &ContainerId) -> Option<u32> {
        self.tasks
            .get(id)
            .filter(|t| t.status != TaskStatus::Stopped)
            .map(|t| t.pid)
    }
}

/// The `n`th network's definition: a subnet of its own.
fn definition_of(n: usize) -> Definition {
    let octet = u8::try_from(20 + n).unwrap_or(u8::MAX);
    Definition {
        subnet: format!("172.{octet}.0.0/16"),
        gateway: std::net::Ipv4Addr::new(172, octet, 0, 1),
        bridge: format!("hf-{n}"),
    }
}

/// The volumes' directories on the host, as the volume executor makes and
/// removes them: like the network side, they do not depend on containerd.
#[derive(Debug, Default)]
pub struct HostVolumes {
    /// Volume directories that exist, and whether each was filled.
    pub dirs: BTreeMap<String, bool>,
}

impl HostVolumes {
    pub fn carry_out(&mut self, call: &VolumeCall) -> Result<Done, Failure> {
        match call {
            VolumeCall::Create { name, .. } => {
                self.dirs.entry(name.clone()).or_insert(false);
                Ok(Done::Ok)
            }
            VolumeCall::Fill { name, .. } => match self.dirs.get_mut(name) {
                Some(filled) => {
                    *filled = true;
                    Ok(Done::Ok)
                }
                None => fail(FailureKind::NotFound, "no such volume"),
            },
            VolumeCall::Remove { name } => {
                self.dirs.remove(name);
                Ok(Done::Ok)
            }
        }
    }
}

/// The host's network side, as the CNI plugins keep it: one attachment
/// (address, veth, port mappings, NAT rules) per container at most. It does
/// not depend on containerd: it stays up through containerd's outages.
#[derive(Debug, Default)]
pub struct HostNetwork {
    /// The user networks defined on the host, by name: their id and
    /// definition.
    pub defined: BTreeMap<String, (String, Definition)>,
    pub attached: BTreeSet<ContainerId>,
    /// Setups made while an attachment of the container already existed:
    /// a second address leaked under the same owner.
    pub doubled: Vec<ContainerId>,
    /// Endpoints made (`network connect`): container and slot.
    pub endpoints: BTreeSet<(ContainerId, u8)>,
    /// The `eth0` each container's own attachment made (slot 0 among the
    /// endpoints), with its published ports: gone with the attachment, or
    /// with the release of slot 0 once the container is disconnected from
    /// its own network.
    pub own_eth0: BTreeSet<ContainerId>,
    /// Endpoint setups made while that endpoint existed.
    pub endpoints_doubled: Vec<(ContainerId, u8)>,
    /// The address each interface (container, slot) holds, as host-local
    /// IPAM hands them out: round robin over a small pool, so that a
    /// released address soon goes to another container.
    pub addresses: BTreeMap<(ContainerId, u8), std::net::Ipv4Addr>,
    last_address: u8,
    /// Endpoint ids handed out, for each setup a new one.
    setups: u64,
}

/// The addresses host-local hands out: 10.88.0.2 to 10.88.0.254.
const ADDRESS_FIRST: u8 = 2;
const ADDRESS_LAST: u8 = 254;

impl HostNetwork {
    /// A host with these user networks defined.
    pub fn with_networks(names: &[&str]) -> HostNetwork {
        let mut net = HostNetwork::default();
        for (i, name) in names.iter().enumerate() {
            let id = format!("{i:064x}");
            net.defined
                .insert((*name).to_owned(), (id, definition_of(i)));
        }
        net
    }

    /// The definitions on the host, as the executor reports them.
    pub fn found(&self, at: WallTime) -> Vec<FoundNetwork> {
        self.defined
            .iter()
            .map(|(name, (id, definition))| FoundNetwork {
                name: name.clone(),
                id: id.clone(),
                labels: BTreeMap::new(),
                created_at: at,
                definition: definition.clone(),
            })
            .collect()
    }

    /// Carries out one network call of the core.
    pub fn carry_out(&mut self, call: &NetworkCall) -> Result<Done, Failure> {
        match call {
            NetworkCall::Define { name, id, .. } => {
                let n = self.defined.len();
                let (_, definition) = self
                    .defined
                    .entry(name.clone())
                    .or_insert_with(|| (id.clone(), definition_of(n)));
                Ok(Done::Defined(definition.clone()))
            }
            NetworkCall::Undefine { name, .. } => {
                self.defined.remove(name);
                Ok(Done::Ok)
            }
            NetworkCall::RefreshNames { .. } => Ok(Done::Ok),
            NetworkCall::Setup {
                id, own_interface, ..
            } => self.setup(id, *own_interface),
            NetworkCall::Teardown { id, .. } => self.teardown(id),
            NetworkCall::EndpointSetup { id, endpoint, .. } => {
                self.setup_endpoint(id, endpoint.slot)
            }
            NetworkCall::EndpointTeardown { id, endpoint, .. } => {
                self.teardown_endpoint(id, endpoint.slot)
            }
        }
    }

    /// The namespace and, with `eth0`, its interface on the container's
    /// own network: kept among the endpoints as slot 0, so that an
    /// endpoint made on top of it shows as doubled.
    pub fn setup(&mut self, id: &ContainerId, eth0: bool) -> Result<Done, Failure> {
        if !self.attached.insert(id.clone()) {
            self.doubled.push(id.clone());
        }
        if !eth0 {
            return Ok(Done::Attached(None));
        }
        if !self.endpoints.insert((id.clone(), 0)) {
            self.endpoints_doubled.push((id.clone(), 0));
        }
        self.own_eth0.insert(id.clone());
        self.allocate(id, 0)
    }

    /// An address for the interface, as the answer of its setup carries it.
    fn allocate(&mut self, id: &ContainerId, slot: u8) -> Result<Done, Failure> {
        let taken: BTreeSet<std::net::Ipv4Addr> = self.addresses.values().copied().collect();
        let pool = ADDRESS_LAST - ADDRESS_FIRST + 1;
        let free = (1..=pool)
            .map(|k| {
                let offset = (self.last_address.saturating_sub(ADDRESS_FIRST) + k) % pool;
                ADDRESS_FIRST + offset
            })
            .map(|last| (last, std::net::Ipv4Addr::new(10, 88, 0, last)))
            .find(|(_, ip)| !taken.contains(ip));
        let Some((last, ip)) = free else {
            return fail(FailureKind::Other, "no IP addresses available in range set");
        };
        self.last_address = last;
        self.addresses.insert((id.clone(), slot), ip);
        self.setups += 1;
        Ok(Done::Attached(Some(holdfast_core::Allocation {
            ip: Some(ip),
            prefix_len: 24,
            gateway: Some(std::net::Ipv4Addr::new(10, 88, 0, 1)),
            mac: None,
            endpoint_id: format!("ep{}", self.setups),
            ports: Vec::new(),
        })))
    }

    /// Idempotent, as CNI DEL is; its `eth0` goes with it.
    pub fn teardown(&mut self, id: &ContainerId) -> Result<Done, Failure> {
        self.attached.remove(id);
        self.endpoints.remove(&(id.clone(), 0));
        self.own_eth0.remove(id);
        self.addresses.remove(&(id.clone(), 0));
        Ok(Done::Ok)
    }

    /// In the namespace of the container's own attachment, which must exist.
    pub fn setup_endpoint(&mut self, id: &ContainerId, slot: u8) -> Result<Done, Failure> {
        if !self.attached.contains(id) {
            return Err(Failure::new(
                holdfast_core::FailureKind::Other,
                "the container's network namespace is missing",
            ));
        }
        if !self.endpoints.insert((id.clone(), slot)) {
            self.endpoints_doubled.push((id.clone(), slot));
        }
        self.allocate(id, slot)
    }

    pub fn teardown_endpoint(&mut self, id: &ContainerId, slot: u8) -> Result<Done, Failure> {
        self.endpoints.remove(&(id.clone(), slot));
        self.addresses.remove(&(id.clone(), slot));
        // Slot 0 takes the `eth0` its own attachment made with it.
        if slot == 0 {
            self.own_eth0.remove(id);
        }
        Ok(Done::Ok)
    }
}
