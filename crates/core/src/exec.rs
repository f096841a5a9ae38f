//! Exec processes (`docker exec`): extra processes run in a container's
//! running task. The core decides when one may be created and started,
//! records how each ended, and makes sure an exec's exit never changes its
//! container: the container's run ends only with its init process.
//!
//! An exec's record lives in its container's [`Record`](crate::Record), so
//! a restarted daemon still knows an exec that may run and learns its exit:
//! from its `exec_die` event (a `TaskExit` naming the exec), or, when that
//! event may have been lost (an outage, a crash, a start whose answer was
//! lost), by asking containerd (`Call::ExecState`).

use crate::container::{Container, Pending, Step, TaskState};
use crate::ids::{ContainerId, RequestId};
use crate::input::{Done, Failure, FailureKind};
use crate::{Answer, Core, ErrorKind, RequestError, UserEventKind, error};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Execs a container keeps: every one that may still run, and the latest
/// ended ones (for `exec inspect`), oldest forgotten first.
pub const EXECS_KEPT: usize = 32;

/// What `docker exec` asked for.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct ExecSpec {
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    pub tty: bool,
    pub attach_stdin: bool,
    pub attach_stdout: bool,
    pub attach_stderr: bool,
    /// The keys that detach an attached client (the API's concern; kept
    /// so that `exec start` uses what `exec create` was given).
    pub detach_keys: Option<String>,
}

/// One exec of a container.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct ExecRecord {
    /// 64 hex digits, unique among every container's execs.
    pub id: String,
    /// Names the exec in the core's steps; unique within its container.
    pub serial: u32,
    pub spec: Arc<ExecSpec>,
    /// The container's run it was created in (execs die with their run).
    pub run: u64,
    pub state: ExecState,
    /// containerd's record of the ended process was deleted (or went with
    /// its task): nothing of it is left to release.
    #[serde(default)]
    pub released: bool,
    /// Started with a stdin (attached, and asked for one).
    #[serde(default)]
    pub stdin: bool,
    /// A signal the user asked its process sent, not yet delivered: kept
    /// (across a containerd outage, and a restart of the daemon) until
    /// delivered or the process has ended.
    #[serde(default)]
    pub kill: Option<crate::Signal>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum ExecState {
    /// Created, not started: nothing of it exists in containerd.
    Created,
    /// Its start was sent and not answered: the process may run.
    Starting,
    Running {
        pid: u32,
    },
    /// Ended. `None`: its exit status is nowhere to be read (its task went
    /// first, or it never started after a start whose answer was lost).
    Exited {
        code: Option<i32>,
    },
}

impl ExecState {
    /// Whether its process may exist.
    pub fn may_run(self) -> bool {
        matches!(self, ExecState::Starting | ExecState::Running { .. })
    }
}

impl ExecRecord {
    /// `docker exec inspect`'s `Running`.
    pub fn running(&self) -> bool {
        self.state.may_run()
    }

    /// `docker exec inspect`'s `ExitCode` (`None` before it ends).
    pub fn exit_code(&self) -> Option<i32> {
        match self.state {
            ExecState::Exited { code } => code,
            _ => None,
        }
    }
}

impl Container {
    pub(crate) fn exec_mut(&mut self, serial: u32) -> Option<&mut ExecRecord> {
        self.rec.execs.iter_mut().find(|e| e.serial == serial)
    }

    /// The next exec call this container's running task owes, if any: a
    /// start asked for, a look at an exec whose end may have been missed,
    /// or the release of an ended one.
    pub(crate) fn exec_step(&self) -> Option<Step> {
        let run = self.rec.run;
        let current = || self.rec.execs.iter().filter(move |e| e.run == run);
        if let Some(e) = current().find(|e| self.exec_start_wanted(e.serial)) {
            return Some(Step::StartExec(e.serial));
        }
        if let Some(e) =
            current().find(|e| e.kill.is_some() && matches!(e.state, ExecState::Running { .. }))
        {
            return Some(Step::KillExec(e.serial));
        }
        if let Some(e) = current().find(|e| self.exec_looks.contains(&e.serial)) {
            return Some(Step::ExecState(e.serial));
        }
        current()
            .find(|e| matches!(e.state, ExecState::Exited { .. }) && !e.released)
            .map(|e| Step::DeleteExec(e.serial))
    }

    /// Before the stopped task of a run is deleted: a look at each exec of
    /// that run whose end was not heard (the shim keeps its status until
    /// then).
    pub(crate) fn exec_look_before_delete(&self) -> Option<Step> {
        let run = self.rec.run;
        self.rec
            .execs
            .iter()
            .find(|e| e.run == run && e.state.may_run())
            .map(|e| Step::ExecState(e.serial))
    }

    fn exec_start_wanted(&self, serial: u32) -> bool {
        self.requests
            .iter()
            .any(|(_, p)| *p == Pending::ExecStart(serial))
            && self
                .rec
                .execs
                .iter()
                .any(|e| e.serial == serial && e.state == ExecState::Created)
    }

    /// The run is over with its task: what none of its execs said of its
    /// end is not known, and nothing of them is left to release.
    pub(crate) fn execs_end_with_run(&mut self) -> bool {
        let run = self.rec.run;
        let mut changed = false;
        for e in self.rec.execs.iter_mut().filter(|e| e.run <= run) {
            if e.state.may_run() || e.state == ExecState::Created {
                e.state = ExecState::Exited { code: None };
                changed = true;
            }
            if !e.released {
                e.released = true;
                changed = true;
            }
        }
        self.exec_looks.clear();
        changed
    }

    /// Forgets the oldest ended execs beyond [`EXECS_KEPT`]; returns their ids.
    fn forget_old_execs(&mut self) -> Vec<String> {
        let mut forgotten = Vec::new();
        while self.rec.execs.len() > EXECS_KEPT {
            let Some(pos) = self
                .rec
                .execs
                .iter()
                .position(|e| matches!(e.state, ExecState::Exited { .. }) && e.released)
            else {
                break;
            };
            forgotten.push(self.rec.execs.remove(pos).id);
        }
        forgotten
    }
}

impl Core {
    /// `docker exec` (create): recorded for a running container, as dockerd
    /// refuses one for a container that is not running, restarting or paused.
    pub(crate) fn create_exec(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        exec_id: String,
        spec: Arc<ExecSpec>,
    ) {
        if self.exec_owner.contains_key(&exec_id) {
            let message = format!("exec id {exec_id} is already in use");
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if let Some(message) = exec_refusal(c) {
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        let serial = c.rec.execs.iter().map(|e| e.serial + 1).max().unwrap_or(0);
        c.rec.execs.push(ExecRecord {
            id: exec_id.clone(),
            serial,
            spec,
            run: c.rec.run,
            state: ExecState::Created,
            released: false,
            stdin: false,
            kill: None,
        });
        let forgotten = c.forget_old_execs();
        self.out.persist(&c.rec);
        for old in forgotten {
            self.exec_owner.remove(&old);
        }
        self.exec_owner.insert(exec_id, id.clone());
        self.out.answer_now(req, Answer::Done);
    }

    /// `docker exec` (start): answered once containerd runs the process.
    pub(crate) fn start_exec(&mut self, req: RequestId, exec_id: &str, detach: bool) {
        if let Some(refusal) = self.exec_start_refusal(exec_id) {
            return self.out.answer_now(req, Answer::Error(refusal));
        }
        let Some((id, serial)) = self.exec_by_id(exec_id) else {
            return;
        };
        let Some(e) = self
            .containers
            .get_mut(&id)
            .and_then(|c| c.exec_mut(serial))
        else {
            return;
        };
        e.stdin = e.spec.attach_stdin && !detach;
        let bound = Some(self.config.request_answer_bound);
        self.add_pending(&id, req, Pending::ExecStart(serial), bound);
        self.reconcile(&id);
    }

    /// A kill of an exec's process: recorded, sent once it runs (a start
    /// whose answer is not in yet waits for it), answered once delivered
    /// or once the process has ended. An exec that has ended is killed
    /// already; one never started cannot be.
    pub(crate) fn kill_exec(&mut self, req: RequestId, exec_id: &str, signal: crate::Signal) {
        let Some((id, serial)) = self.exec_by_id(exec_id) else {
            let message = format!("No such exec instance: {exec_id}");
            return self
                .out
                .answer_now(req, error(ErrorKind::NotFound, message));
        };
        let Some(c) = self.containers.get_mut(&id) else {
            return;
        };
        // A start accepted and not yet sent counts as under way: the kill
        // follows it (the start goes first).
        let start_wanted = c.exec_start_wanted(serial);
        let Some(e) = c.exec_mut(serial) else {
            return;
        };
        match e.state {
            ExecState::Exited { .. } => return self.out.answer_now(req, Answer::Done),
            ExecState::Created if start_wanted => {}
            ExecState::Created => {
                let message = format!("Exec {exec_id} is not running");
                return self
                    .out
                    .answer_now(req, error(ErrorKind::Conflict, message));
            }
            ExecState::Starting | ExecState::Running { .. } => {}
        }
        e.kill = Some(signal);
        self.out.persist(&c.rec);
        let bound = Some(self.config.request_answer_bound);
        self.add_pending(&id, req, Pending::ExecKill(serial), bound);
        self.reconcile(&id);
    }

    /// Answers the kills of execs that were delivered or whose process
    /// ended (and forgets a kill that an end made moot).
    pub(crate) fn settle_exec_kills(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        // Nothing to settle (the common case: it runs on every reconcile).
        if !c.rec.execs.iter().any(|e| e.kill.is_some())
            && !c
                .requests
                .iter()
                .any(|(_, p)| matches!(p, Pending::ExecKill(_)))
        {
            return;
        }
        // (One whose start is accepted and not yet sent will run: its
        // kill waits for it.)
        let starting: Vec<u32> = c
            .rec
            .execs
            .iter()
            .filter(|e| c.exec_start_wanted(e.serial))
            .map(|e| e.serial)
            .collect();
        let mut settled = Vec::new();
        let mut changed = false;
        for e in &mut c.rec.execs {
            if !e.state.may_run() && !starting.contains(&e.serial) && e.kill.take().is_some() {
                changed = true;
            }
            if e.kill.is_none() {
                settled.push(e.serial);
            }
        }
        if changed {
            self.out.persist(&c.rec);
        }
        self.answer_pending_where(
            id,
            |p| matches!(p, Pending::ExecKill(s) if settled.contains(&s)),
            || Answer::Done,
        );
    }

    /// The kill of exec `serial` is over (delivered, or its process gone):
    /// forgotten, and its requests answered.
    fn exec_kill_over(&mut self, id: &ContainerId, serial: u32) {
        if let Some(c) = self.containers.get_mut(id)
            && let Some(e) = c.exec_mut(serial)
        {
            e.kill = None;
            self.out.persist(&c.rec);
        }
        self.settle_exec_kills(id);
    }

    /// Why a start of the exec would be refused now, if it would: no such
    /// exec, started already, its container not running (or paused), or
    /// containerd unreachable. The one rule, asked by `StartExec` and by an
    /// API that must choose, before it starts, how a refusal is told.
    pub fn exec_start_refusal(&self, exec_id: &str) -> Option<RequestError> {
        let refused = |kind, message: String| Some(RequestError::new(kind, message));
        let Some((id, serial)) = self.exec_by_id(exec_id) else {
            return refused(
                ErrorKind::NotFound,
                format!("No such exec instance: {exec_id}"),
            );
        };
        let c = self.containers.get(&id)?;
        let e = c.rec.execs.iter().find(|e| e.serial == serial)?;
        let conflict = if e.state != ExecState::Created
            || c.requests
                .iter()
                .any(|(_, p)| *p == Pending::ExecStart(serial))
        {
            Some(format!(
                "Exec command {exec_id} has already run or is running"
            ))
        } else if e.run != c.rec.run {
            Some(format!("Container {id} is not running"))
        } else {
            exec_refusal(c)
        };
        if let Some(message) = conflict {
            return refused(ErrorKind::Conflict, message);
        }
        if !self.conn.is_ready() {
            let message = "containerd is unreachable: the exec was not started; try again";
            return refused(ErrorKind::Unavailable, message.to_owned());
        }
        None
    }

    /// `docker exec` resize, and the init's terminal's (`exec_id` `None`):
    /// for a process that runs, one call, answered with its result.
    pub(crate) fn resize(
        &mut self,
        req: RequestId,
        id: &ContainerId,
        exec_id: Option<&str>,
        width: u32,
        height: u32,
    ) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        let running = match exec_id {
            None => c.status() == crate::Status::Running,
            Some(exec_id) => c
                .rec
                .execs
                .iter()
                .any(|e| e.id == exec_id && e.run == c.rec.run && e.state.may_run()),
        };
        if !running {
            let message = match exec_id {
                None => format!("Container {id} is not running"),
                Some(exec_id) => format!("Exec {exec_id} is not running"),
            };
            return self
                .out
                .answer_now(req, error(ErrorKind::Conflict, message));
        }
        if !self.conn.is_ready() {
            let message = "containerd is unreachable: the terminal was not resized; try again";
            return self
                .out
                .answer_now(req, error(ErrorKind::Unavailable, message));
        }
        let call = crate::Call::ResizePty {
            id: id.clone(),
            exec_id: exec_id.map(str::to_owned),
            width,
            height,
        };
        self.out.call(crate::OpOwner::Request(req), call);
    }

    /// The container and serial of an exec, by its id.
    pub(crate) fn exec_by_id(&self, exec_id: &str) -> Option<(ContainerId, u32)> {
        let id = self.exec_owner.get(exec_id)?;
        let c = self.containers.get(id).filter(|c| c.visible())?;
        let e = c.rec.execs.iter().find(|e| e.id == exec_id)?;
        Some((id.clone(), e.serial))
    }

    /// An exec process ended (its `exec_die`): recorded once, with its code;
    /// its container's run goes on.
    pub(crate) fn exec_exited(&mut self, id: &ContainerId, exec_id: &str, pid: u32, code: i32) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let Some(e) = c.rec.execs.iter_mut().find(|e| e.id == exec_id) else {
            return;
        };
        let this_process = match e.state {
            ExecState::Running { pid: p } => p == pid,
            ExecState::Starting => true,
            ExecState::Created | ExecState::Exited { .. } => false,
        };
        if !this_process {
            return;
        }
        let serial = e.serial;
        e.state = ExecState::Exited { code: Some(code) };
        c.exec_looks.remove(&serial);
        self.out.persist(&c.rec);
        // An exit that overtook its start's answer answers the start.
        self.answer_pending_where(id, |p| p == Pending::ExecStart(serial), || Answer::Done);
        self.reconcile(id);
    }

    /// Every exec of a run whose task was listed, in a complete relist that
    /// settled it, as still running may have ended unheard (events are not
    /// replayed): look at each.
    pub(crate) fn look_at_execs(c: &mut Container) {
        let run = c.rec.run;
        let unsettled: Vec<u32> = c
            .rec
            .execs
            .iter()
            .filter(|e| e.run == run && e.state.may_run())
            .map(|e| e.serial)
            .collect();
        c.exec_looks.extend(unsettled);
    }

    pub(crate) fn exec_step_done(&mut self, id: &ContainerId, step: Step, done: Done) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        match step {
            Step::StartExec(serial) => {
                let Some(e) = c.exec_mut(serial) else {
                    return;
                };
                // An exit that overtook this answer stands.
                if e.state == ExecState::Starting {
                    e.state = match done {
                        Done::ExecStarted { pid } => ExecState::Running { pid },
                        _ => ExecState::Exited { code: None },
                    };
                    self.out.persist(&c.rec);
                }
                self.answer_pending_where(id, |p| p == Pending::ExecStart(serial), || Answer::Done);
            }
            Step::ExecState(serial) => {
                c.exec_looks.remove(&serial);
                let Some(e) = c.exec_mut(serial) else {
                    return;
                };
                match done {
                    Done::Process {
                        exit_code: Some(code),
                        ..
                    } if e.state.may_run() => {
                        e.state = ExecState::Exited { code: Some(code) };
                        let exec_id = e.id.clone();
                        self.out.persist(&c.rec);
                        self.out.publish(
                            id,
                            UserEventKind::ExecDie {
                                exec_id,
                                exit_code: code,
                            },
                        );
                    }
                    Done::Process {
                        pid,
                        exit_code: None,
                    } if e.state == ExecState::Starting => {
                        e.state = ExecState::Running { pid };
                        self.out.persist(&c.rec);
                    }
                    _ => {}
                }
                self.answer_pending_where(id, |p| p == Pending::ExecStart(serial), || Answer::Done);
            }
            Step::KillExec(serial) => self.exec_kill_over(id, serial),
            Step::DeleteExec(serial) => {
                if let Some(e) = c.exec_mut(serial) {
                    e.released = true;
                    self.out.persist(&c.rec);
                }
            }
            _ => {}
        }
    }

    /// A failed exec call. A start refused is over (as dockerd records a
    /// process that could not start: exit 126); one whose answer was lost
    /// may have started, and is looked at.
    pub(crate) fn exec_step_failed(&mut self, id: &ContainerId, step: Step, failure: Failure) {
        use FailureKind as K;
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        match (step, failure.kind) {
            (Step::StartExec(serial), K::Unavailable | K::Deadline) => {
                c.exec_looks.insert(serial);
                let message = format!(
                    "the start of exec {} may not have taken effect: {}",
                    c.exec_mut(serial).map(|e| e.id.clone()).unwrap_or_default(),
                    failure.message
                );
                let kind = if failure.kind == K::Unavailable {
                    ErrorKind::Unavailable
                } else {
                    ErrorKind::Internal
                };
                self.answer_pending_where(
                    id,
                    |p| p == Pending::ExecStart(serial),
                    || error(kind, message.clone()),
                );
                if failure.kind == K::Unavailable {
                    self.lose_connection();
                }
            }
            (Step::StartExec(serial), kind) => {
                if let Some(e) = c.exec_mut(serial) {
                    e.state = ExecState::Exited {
                        code: Some(EXEC_NOT_STARTED_CODE),
                    };
                    e.released = true;
                    self.out.persist(&c.rec);
                }
                let answer_kind = match kind {
                    K::NotFound => ErrorKind::NotFound,
                    K::FailedPrecondition => ErrorKind::Conflict,
                    K::Invalid => ErrorKind::Invalid,
                    _ => ErrorKind::Internal,
                };
                let message = format!("exec failed: {}", failure.message);
                self.answer_pending_where(
                    id,
                    |p| p == Pending::ExecStart(serial),
                    || error(answer_kind, message.clone()),
                );
            }
            // containerd has no such process (it never started, or went
            // with a task deleted since): it is over, its status unknown.
            (Step::ExecState(serial), K::NotFound) => {
                c.exec_looks.remove(&serial);
                if let Some(e) = c.exec_mut(serial)
                    && e.state.may_run()
                {
                    e.state = ExecState::Exited { code: None };
                    e.released = true;
                    self.out.persist(&c.rec);
                }
                self.answer_pending_where(
                    id,
                    |p| p == Pending::ExecStart(serial),
                    || {
                        error(
                            ErrorKind::Internal,
                            "the exec did not start: containerd has no such process",
                        )
                    },
                );
            }
            // The process is gone (its end may not be heard yet: looked at).
            (Step::KillExec(serial), K::NotFound) => {
                c.exec_looks.insert(serial);
                self.exec_kill_over(id, serial);
            }
            (Step::DeleteExec(serial), K::NotFound) => {
                if let Some(e) = c.exec_mut(serial) {
                    e.released = true;
                    self.out.persist(&c.rec);
                }
            }
            (_, K::Unavailable) => self.lose_connection(),
            // Looked at again, or released, after a backoff.
            _ => self.schedule_retry(id, step),
        }
    }
}

/// dockerd's exit code for an exec whose process could not be started.
pub const EXEC_NOT_STARTED_CODE: i32 = 126;

/// Why an exec may not be created or started in `c` now, as dockerd says.
fn exec_refusal(c: &Container) -> Option<String> {
    let id = &c.rec.id;
    let running =
        matches!(c.task, TaskState::Running { .. } | TaskState::Unknown) && c.is_running();
    match c.status() {
        crate::Status::Restarting => Some(format!(
            "Container {id} is restarting, wait until the container is running"
        )),
        _ if !running || c.status() != crate::Status::Running || c.rec.intents.remove => {
            Some(format!("Container {id} is not running"))
        }
        _ if c.is_paused() => Some(format!(
            "Container {id} is paused, unpause the container before exec"
        )),
        _ => None,
    }
}
