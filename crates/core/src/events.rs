//! containerd's events, and recording an exit: the one place a container
//! becomes exited, whatever the evidence was.

use crate::container::{KillPurpose, Pending, Step, TaskState};
use crate::ids::ContainerId;
use crate::input::{ContainerdEvent, WaitCondition};
use crate::record::ExitRecord;
use crate::time::WallTime;
use crate::{Answer, Core, ErrorKind, TimerKind, UserEventKind, error};

impl Core {
    pub(crate) fn event(&mut self, event: ContainerdEvent) {
        match event {
            ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                exit_status,
                exited_at,
                oom_kills,
            } => {
                let code = i32::try_from(exit_status).unwrap_or(i32::MAX);
                let exec_as_init =
                    exec_id != container.as_str() && bug!(self.config, ExecExitIsContainerExit);
                let pid = if exec_as_init {
                    let init = self.containers.get(&container).and_then(|c| c.rec.pid);
                    init.unwrap_or(pid)
                } else {
                    pid
                };
                if exec_id != container.as_str() && !exec_as_init {
                    if bug!(self.config, ExecExitErasesOom)
                        && let Some(c) = self.containers.get_mut(&container)
                        && c.current_exit().is_none()
                    {
                        c.oom = false;
                    }
                    if self.containers.contains_key(&container) {
                        self.out.publish(
                            &container,
                            UserEventKind::ExecDie {
                                exec_id: exec_id.clone(),
                                exit_code: code,
                            },
                        );
                        self.exec_exited(&container, &exec_id, pid, code);
                    }
                    return;
                }
                let Some(c) = self.containers.get_mut(&container) else {
                    return;
                };
                // A shim publishes TaskOOM (which names no pid) just before
                // its TaskExit, in order, also when retrying late: an OOM
                // followed by an older run's exit was that run's.
                if c.rec.pid != Some(pid) && c.current_exit().is_none() {
                    c.oom = false;
                }
                // Evidence only for the current run's init pid; a stale or
                // unknown pid proves nothing about this run, nor does an
                // exit from before the run began (its pid was reused), or no
                // later than the previous run's recorded exit.
                if c.rec.pid != Some(pid)
                    || c.predates_run(exited_at) && !bug!(self.config, ReusedPidExitAccepted)
                    || c.current_exit().is_some() && !bug!(self.config, LateExitOverwrites)
                {
                    return;
                }
                if matches!(
                    c.task,
                    TaskState::Running { .. } | TaskState::Created { .. } | TaskState::Unknown
                ) {
                    c.task = TaskState::Stopped;
                }
                c.oom_kills = oom_kills;
                let exited_at = if bug!(self.config, FinishedAtIsNow) {
                    self.out.now.wall
                } else {
                    exited_at
                };
                self.record_exit(&container, code, exited_at, None);
                self.reconcile(&container);
            }
            ContainerdEvent::TaskOom {
                container,
                published_at,
            } => {
                let Some(c) = self.containers.get_mut(&container) else {
                    return;
                };
                // Published before this run began: an earlier run's OOM,
                // delivered late (a shim retrying through an outage).
                let earlier_run = published_at.is_some_and(|at| c.predates_run(at))
                    && !bug!(self.config, EarlierRunOomCounted);
                if c.is_running() && !c.oom && !earlier_run {
                    c.oom = true;
                    self.out.publish(&container, UserEventKind::Oom);
                } else if !c.is_running()
                    && c.current_exit().is_none()
                    && matches!(c.in_flight, Some((_, Step::CreateTask)))
                    && c.unplaced_oom.is_none()
                    && let Some(at) = published_at
                {
                    // The task being created was OOM-killed before its
                    // create was answered (no run is known yet): kept for
                    // the exit that the answer or a relist will bring, and
                    // announced once (a replayed event is the same OOM).
                    c.unplaced_oom = Some(at);
                    self.out.publish(&container, UserEventKind::Oom);
                }
            }
            ContainerdEvent::TaskDelete { container, pid } => {
                // The task is gone; its exit should have come first. If we do
                // not have it, a relist finds out what happened.
                let Some(c) = self.containers.get_mut(&container) else {
                    return;
                };
                if c.rec.pid != Some(pid) || c.current_exit().is_some() {
                    return;
                }
                // A call in flight may be why (our own delete): look once
                // it is answered, not never (the exit may have been lost
                // with its shim while a call of another kind was out).
                if c.in_flight.is_some() {
                    c.look_again = true;
                } else {
                    self.request_refresh();
                }
            }
            // The current run's process started: evidence even when the
            // start's own answer is lost. Only once this run's start was
            // sent, and only if published since this run began: otherwise
            // a start event naming its pid is an earlier run's, delivered
            // late, whose pid the kernel gave again.
            ContainerdEvent::TaskStart {
                container,
                pid,
                published_at,
            } => {
                if bug!(self.config, StartEventResurrects)
                    && let Some(c) = self.containers.get_mut(&container)
                    && c.rec.pid == Some(pid)
                    && c.rec.exit.as_ref().is_some_and(|e| e.run == c.rec.run)
                {
                    c.rec.exit = None;
                    c.task = TaskState::Running { pid };
                    return;
                }
                let Some(c) = self.containers.get(&container) else {
                    return;
                };
                let earlier_run = published_at.is_some_and(|at| c.predates_run(at));
                if c.rec.pid == Some(pid)
                    && c.rec.start_sent
                    && !earlier_run
                    && matches!(c.task, TaskState::Created { .. })
                {
                    self.start_took_effect(&container);
                }
            }
            // Someone else may have frozen or thawed the task, or this is
            // the echo of our own call, possibly late (after a later call's
            // answer): when it disagrees with what we know, look.
            ContainerdEvent::TaskPaused { container } => self.pause_event(&container, true),
            ContainerdEvent::TaskResumed { container } => self.pause_event(&container, false),
            // Pids are learned from our own CreateTask result and relists; a
            // late create event of an earlier run must not set them.
            ContainerdEvent::TaskCreate { .. } => {}
        }
    }

    /// Someone else may have frozen or thawed the task, or this is the echo
    /// of our own call, possibly late (after a later call's answer): when
    /// it disagrees with what we know, look.
    fn pause_event(&mut self, id: &ContainerId, frozen: bool) {
        let Some(c) = self.containers.get(id) else {
            return;
        };
        let ours = matches!(
            c.in_flight,
            Some((
                _,
                Step::Pause | Step::Resume | Step::CommitFreeze | Step::CommitThaw
            ))
        );
        if c.is_running() && c.paused != frozen && !ours {
            self.request_refresh();
        }
    }

    /// The current run is over: the stop is done, the undelivered signals
    /// have nothing left to signal. State only: the caller persists, then
    /// publishes and answers ([`Core::answer_run_over`]), so that a crash in
    /// between can lose an event but never record an exit twice. Returns
    /// whether a stop was pending, and whether the user wanted it down.
    fn end_run(&mut self, id: &ContainerId) -> (bool, bool) {
        let Some(c) = self.containers.get_mut(id) else {
            return (false, false);
        };
        let stopped = c.rec.intents.stop.take().is_some();
        let stopped_by_user = stopped | std::mem::take(&mut c.rec.intents.exit_on_next);
        c.stop_deadline = None;
        c.stop_escalated = false;
        if !bug!(self.config, KillsOutliveRun) {
            c.rec.intents.kills.clear();
        }
        c.kill_announced = None;
        c.paused = false;
        c.pause_wanted = None;
        c.thaw_due = false;
        c.rec.intents.froze_since_kill = false;
        self.out.timers.cancel(&TimerKind::StopDeadline(id.clone()));
        (stopped, stopped_by_user)
    }

    /// Answers what waited for the run that just ended: it exited with
    /// `exit_code`, or (`None`) it never ran.
    fn answer_run_over(&mut self, id: &ContainerId, exit_code: Option<i32>) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        let last_exit_code = c.last_exit_code();
        // A user's signal in flight when the run ended reached it (or found it
        // gone): dockerd answers such a kill with success.
        let delivering = match c.in_flight {
            Some((
                _,
                Step::Kill {
                    signal,
                    purpose: KillPurpose::User,
                },
            )) => Some(signal),
            _ => None,
        };
        let exec_starting = match c.in_flight {
            Some((_, Step::StartExec(serial))) => Some(serial),
            _ => None,
        };
        let mut answers = Vec::new();
        c.requests.retain(|(req, pending)| {
            let answer = match (pending, exit_code) {
                (Pending::Stop, _) => Answer::Done,
                // A start on its way is answered by its result.
                (Pending::ExecStart(serial), _) if Some(*serial) == exec_starting => {
                    return true;
                }
                (Pending::ExecStart(_), _) => error(
                    ErrorKind::Conflict,
                    format!("Container {id} is not running"),
                ),
                (Pending::Kill(s), _) if Some(*s) == delivering => Answer::Done,
                (Pending::Kill(_) | Pending::Pause | Pending::Unpause, _) => error(
                    ErrorKind::Conflict,
                    format!("Container {id} is not running"),
                ),
                (Pending::Wait(WaitCondition::NotRunning), _) => Answer::Waited {
                    exit_code: exit_code.unwrap_or(last_exit_code),
                    error: None,
                },
                (Pending::Wait(WaitCondition::NextExit), Some(exit_code)) => Answer::Waited {
                    exit_code,
                    error: None,
                },
                _ => return true,
            };
            answers.push((*req, answer));
            false
        });
        for (req, answer) in answers {
            self.out.answer_pending(req, answer);
        }
    }

    /// The current run never started (created, then gone or deleted before
    /// any start took effect): no exit, and nothing of it remains to do.
    pub(crate) fn never_ran(&mut self, id: &ContainerId) {
        if let Some(c) = self.containers.get_mut(id) {
            c.rec.pid = None;
        }
        self.end_run(id);
        if let Some(c) = self.containers.get(id) {
            self.out.persist(&c.rec);
        }
        self.answer_run_over(id, None);
    }

    /// Records the exit of the current run, once: the first evidence wins.
    /// Decides what comes next (policy restart, auto-remove), persists, and
    /// only then publishes and answers. Reconciling is left to the caller.
    pub(crate) fn record_exit(
        &mut self,
        id: &ContainerId,
        exit_code: i32,
        finished_at: WallTime,
        error_text: Option<String>,
    ) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if c.current_exit().is_some() && !bug!(self.config, LateExitOverwrites) {
            return;
        }
        if matches!(c.in_flight, Some((_, Step::StartTask))) || c.rec.start_sent {
            // The exit overtook the start's answer, or the answer was lost:
            // the start was carried out on this run, which is now over. A
            // start asked for is not a promise to start again (a restart's,
            // wanted beside its stop, stays: it is due after this exit).
            self.start_took_effect(id);
        }
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        c.rec.exit = Some(ExitRecord {
            run: c.rec.run,
            exit_code,
            finished_at,
            oom_killed: c.oom_killed(exit_code, finished_at)
                || bug!(self.config, Exit137IsOom) && c.oom_kills.is_none() && exit_code == 137,
            error: error_text,
        });
        c.unplaced_oom = None;
        let (stopped, stopped_by_user) = self.end_run(id);
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };

        // What comes next: the user's restart or remove, else auto-remove,
        // else the restart policy: never after a user stop, and only for a
        // run that was started. A task created but never started (its start
        // cancelled by a stop before the create's lost answer was settled)
        // ran nothing of the user's: nobody asked for it to run again.
        let was_started = c.rec.started_at.is_some();
        let intents = &mut c.rec.intents;
        if !intents.remove && !intents.start {
            if c.rec.config.auto_remove {
                intents.remove = true;
            } else {
                let ran_for = finished_at.saturating_since(c.rec.started_at.unwrap_or(finished_at));
                let policy = c.rec.config.restart_policy;
                if !stopped_by_user
                    && was_started
                    && policy.wants_restart(exit_code, c.rec.restart_count, intents.user_stopped)
                {
                    if ran_for >= self.config.restart_reset_after {
                        c.restart_delay = self.config.restart_initial;
                    }
                    let delay = c.restart_delay;
                    c.restart_delay = delay.saturating_mul(2).min(self.config.restart_max);
                    intents.policy_restart = true;
                    self.out.timers.set(
                        TimerKind::RestartBackoff(id.clone()),
                        self.out.now.at + delay,
                    );
                }
            }
        }
        self.out.persist(&c.rec);
        self.out.publish(id, UserEventKind::Die { exit_code });
        // The run that mounted its volumes (its `start`) is over.
        if was_started {
            for m in &c.rec.config.mounts {
                if let Some(name) = &m.volume {
                    self.out
                        .publish_resource(crate::ResourceEventKind::VolumeUnmounted {
                            name: name.clone(),
                            container: id.clone(),
                            destination: m.destination.clone(),
                        });
                }
            }
        }
        if stopped {
            self.out.publish(id, UserEventKind::Stop);
        }
        self.answer_run_over(id, Some(exit_code));
    }

    /// A restart policy's backoff has passed: start again.
    pub(crate) fn restart_due(&mut self, id: &ContainerId) {
        let Some(c) = self.containers.get_mut(id) else {
            return;
        };
        if !c.rec.intents.policy_restart {
            return;
        }
        c.rec.intents.policy_restart = false;
        c.rec.intents.start = true;
        c.rec.intents.policy_start = true;
        c.rec.restart_count = c.rec.restart_count.saturating_add(1);
        self.out.persist(&c.rec);
        self.reconcile(id);
    }

    /// [`crate::DeliberateBug::StreamErrorIsExit`]: the pouch bug, on purpose.
    pub(crate) fn record_exit_of_all_running_for_bug(&mut self) {
        let running: Vec<ContainerId> = self
            .containers
            .values()
            .filter(|c| c.is_running())
            .map(|c| c.rec.id.clone())
            .collect();
        let at = self.out.now.wall;
        for id in running {
            if let Some(c) = self.containers.get_mut(&id) {
                c.task = TaskState::Stopped;
            }
            self.record_exit(&id, 255, at, None);
        }
    }
}
