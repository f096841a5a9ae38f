//! Relist: the only way to learn what happened while events could not be
//! seen. Like kube-runtime's watcher, only a complete relist proves anything:
//! what it shows stopped is stopped, and what it does not show is gone.

use crate::connection::Phase;
use crate::container::TaskState;
use crate::ids::{ContainerId, OpId};
use crate::input::{RelistPart, TaskInfo, TaskStatus};
use crate::{Core, Map};

#[derive(Debug)]
pub(crate) struct RelistRun {
    pub(crate) op: OpId,
    begun: bool,
    tasks: Map<ContainerId, TaskInfo>,
}

impl RelistRun {
    pub(crate) fn new(op: OpId) -> RelistRun {
        RelistRun {
            op,
            begun: false,
            tasks: Map::default(),
        }
    }

    /// Whether a task was listed as a placeholder (its shim did not answer:
    /// status unknown, pid 0): the relist says nothing about it.
    fn has_placeholders(&self) -> bool {
        self.tasks.values().any(is_placeholder)
    }
}

fn is_placeholder(task: &TaskInfo) -> bool {
    task.status == TaskStatus::Unknown || task.pid == 0
}

/// The message a recorded exit carries when the task vanished without one.
pub const VANISHED: &str = "task vanished from containerd: exit status unknown";

/// The exit code recorded for a vanished task, as dockerd records for a task
/// it cannot find.
pub const VANISHED_EXIT_CODE: i32 = 255;

impl Core {
    pub(crate) fn relist_part(&mut self, op: OpId, part: RelistPart) {
        if part == RelistPart::End {
            // End answers the relist call, current or abandoned.
            self.out.ops.remove(&op);
        }
        let run = match &mut self.conn.phase {
            Phase::Relisting { relist, .. } if relist.op == op => relist,
            Phase::Ready {
                refresh: Some(relist),
                ..
            } if relist.op == op => relist,
            // A relist of a connection we already gave up: proves nothing now.
            _ => return,
        };
        match part {
            RelistPart::Begin => {
                run.begun = true;
                run.tasks.clear();
            }
            RelistPart::Task(task) => {
                if run.begun {
                    run.tasks.insert(task.container.clone(), task);
                }
            }
            RelistPart::End => {
                if !run.begun {
                    // An end with no beginning is no complete relist.
                    return self.lose_connection();
                }
                let relist = match std::mem::take(&mut self.conn.phase) {
                    Phase::Relisting {
                        subscription,
                        relist,
                    } => {
                        self.conn.phase = Phase::Relisting {
                            subscription,
                            relist: RelistRun::new(op),
                        };
                        let placeholders = relist.has_placeholders();
                        let (_, look_now) = self.apply_relist(relist);
                        self.become_ready(subscription);
                        if look_now {
                            self.request_refresh();
                        } else if placeholders {
                            self.relist_soon();
                        }
                        return;
                    }
                    Phase::Ready {
                        subscription,
                        since,
                        refresh,
                        refresh_again,
                    } => {
                        self.conn.phase = Phase::Ready {
                            subscription,
                            since,
                            refresh: None,
                            refresh_again: false,
                        };
                        if refresh_again {
                            self.request_refresh();
                        }
                        refresh
                    }
                    other => {
                        self.conn.phase = other;
                        None
                    }
                };
                if let Some(relist) = relist {
                    if relist.has_placeholders() {
                        self.relist_soon();
                    }
                    let (touched, look_now) = self.apply_relist(relist);
                    if look_now {
                        self.request_refresh();
                    }
                    for id in touched {
                        self.reconcile(&id);
                    }
                }
            }
        }
    }

    /// Converges every container to a complete relist. Returns the containers
    /// whose view changed, and whether another relist must look at once: a
    /// container this one could not settle, with no call in flight, so the
    /// next listing will.
    fn apply_relist(&mut self, relist: RelistRun) -> (Vec<ContainerId>, bool) {
        let now = self.out.now.wall;
        let mut exits = Vec::new();
        let mut never_ran = Vec::new();
        let mut touched = Vec::new();
        let mut started = Vec::new();
        let mut killed_before_start = Vec::new();
        let mut look_now = false;
        let mut execs_ended = Vec::new();
        for (id, c) in self.containers.iter_mut() {
            // A call that was running at any time since the relist was
            // issued may have changed the task after it was listed: only a
            // stopped task with the current pid is evidence regardless.
            let listed = relist.tasks.get(id);
            // A placeholder for a task whose shim did not answer (status
            // unknown, pid 0) is no fact about it.
            let placeholder = listed.is_some_and(is_placeholder);
            let settled = c.in_flight.is_none() && c.last_activity < relist.op && !placeholder;
            let before = (c.task, c.paused);
            // A listing this relist cannot apply (a call was in flight) but
            // that contradicts the view is looked at again after the call:
            // otherwise only the periodic relist would learn it.
            let believed_live = matches!(
                c.task,
                TaskState::Created { .. } | TaskState::Running { .. }
            );
            let disagrees = match listed {
                // (A placeholder asks for a relist soon anyway.)
                Some(t) if is_placeholder(t) => false,
                // Anything listed, or nothing, is news about a task the
                // core cannot know.
                _ if c.task == TaskState::Unknown => true,
                Some(t) if t.status == TaskStatus::Stopped => believed_live,
                // Another task, a start the view has not seen take effect
                // (its answer lost), or another freeze.
                Some(t) => {
                    let listed_started = t.status != TaskStatus::Created;
                    let view = match c.task {
                        TaskState::Created { pid } => Some((pid, false)),
                        TaskState::Running { pid } => Some((pid, true)),
                        _ => None,
                    };
                    view != Some((t.pid, listed_started))
                        || (t.status == TaskStatus::Paused) != c.paused
                }
                None => believed_live,
            };
            // A view in doubt (an answer lost) waits for a relist that
            // settles it: one that cannot is as good as none. (A
            // placeholder asks for a relist soon anyway.)
            // (So is a commit's thaw owed after a freeze whose answer was
            // lost: found by the properties, it waited for the periodic
            // relist.)
            // (So is a start a user's kill came after, which stands only if
            // a settled listing shows it took effect: found by the
            // properties, a kill answered after the relist went out left
            // the start wanted, unsent and undecided for good.)
            let start_undecided =
                c.start_only_if_taken() && matches!(c.task, TaskState::Created { .. });
            let doubted =
                (c.task_in_doubt || c.commit_thaw_in_doubt() || start_undecided) && !placeholder;
            // With no call in flight, the listing predates the last call's
            // answer: the next relist will settle it, so ask for it now.
            let stale = !settled && (disagrees || doubted);
            c.look_again = stale && c.in_flight.is_some();
            look_now |= stale && c.in_flight.is_none();
            // Still, a placeholder is a task containerd has: one believed
            // gone (a create whose answer was lost) may exist after all,
            // and nothing that needs it gone (a container delete) may go
            // ahead until a later relist says what it is.
            if placeholder && c.task == TaskState::Absent {
                c.task = TaskState::Unknown;
            }
            match listed.filter(|_| !placeholder) {
                Some(task) if task.status == TaskStatus::Stopped => {
                    // (The same pid in a listing older than the run, as an
                    // exit event's, is an earlier run's: the pid was reused.)
                    let current = c.rec.pid.is_none_or(|pid| pid == task.pid)
                        && !task.exited_at.is_some_and(|at| c.predates_run(at));
                    if current
                        && (settled || c.rec.pid.is_some())
                        && !bug!(self.config, StoppedListingIgnored)
                    {
                        if bug!(self.config, ExitFoundAtStartupIsUserStop)
                            && before.0 == TaskState::Unknown
                        {
                            c.rec.intents.exit_on_next = true;
                        }
                        c.rec.pid = Some(task.pid);
                        c.oom_kills = task.oom_kills;
                        let code = i32::try_from(task.exit_status).unwrap_or(i32::MAX);
                        exits.push((id.clone(), code, task.exited_at.unwrap_or(now), None));
                    }
                    // Unless a create whose answer was lost may have made a
                    // new task since (the listing may be of the old one),
                    // or the core has deleted the task since (the listing
                    // is older than that delete: never bring a task back).
                    if settled || current && !c.task_in_doubt && c.task != TaskState::Absent {
                        c.task = TaskState::Stopped;
                    }
                }
                // Never resurrect: once this run's exit is recorded, a
                // listing that predates it changes nothing. A new run is a
                // task our CreateTask made although its answer was lost:
                // another pid, or the same pid (the kernel reused it) where
                // the old task is known deleted or gone (absent), or was
                // ended before this daemon began (unknown). A task listed
                // after that cannot be the old one.
                Some(task)
                    if settled
                        && (c.current_exit().is_none()
                            || c.rec.pid != Some(task.pid)
                            || matches!(c.task, TaskState::Absent | TaskState::Unknown)) =>
                {
                    if c.current_exit().is_some() {
                        c.begin_run(task.pid);
                    }
                    if c.rec.pid != Some(task.pid) || c.rec.began_at.is_none() {
                        c.rec.began_at = c.rec.create_sent_at;
                    }
                    c.rec.pid = Some(task.pid);
                    c.task = match task.status {
                        TaskStatus::Created => TaskState::Created { pid: task.pid },
                        _ => TaskState::Running { pid: task.pid },
                    };
                    c.paused = task.status == TaskStatus::Paused;
                    // Frozen by someone else after a "stay down" kill of
                    // this run went out: the kill waits for a thaw, as when
                    // the core knew of the freeze before it sent the kill.
                    // (A freeze the view knew already is no news, nor one
                    // ours since the kill: the user's pause after it stands.)
                    // A SIGKILL of this run that went out counts even when
                    // a start asked after it cleared "stay down": the
                    // signal is on its way all the same.
                    let stay_down_delivered = c.sigkill_sent
                        || c.rec.intents.exit_on_next && c.rec.intents.kills.is_empty();
                    let newly_frozen = c.paused && !before.1 && !c.rec.intents.froze_since_kill;
                    c.thaw_due = c.paused && (c.thaw_due || stay_down_delivered && newly_frozen);
                    // A start whose answer was lost took effect (also one a
                    // stop came after: the run began, and its start time is
                    // the truth about it).
                    let intents = &c.rec.intents;
                    let began = matches!(task.status, TaskStatus::Running | TaskStatus::Paused);
                    let start_pending = c.rec.start_sent || intents.start && intents.stop.is_none();
                    if began && start_pending {
                        started.push(id.clone());
                    } else if !began && c.start_only_if_taken() && c.in_flight.is_none() {
                        // Still created, no StartTask on its way: the start
                        // the user's kill came after never took effect.
                        killed_before_start.push(id.clone());
                    }
                }
                Some(_) => {}
                None if settled && !bug!(self.config, VanishedTaskStaysRunning) => {
                    let unexited = c.rec.pid.is_some() && c.current_exit().is_none();
                    // It ran (or its start was sent and may have taken
                    // effect) and is gone: an exit, status unknown.
                    if unexited && (c.rec.started_at.is_some() || c.rec.start_sent) {
                        if bug!(self.config, ExitFoundAtStartupIsUserStop)
                            && before.0 == TaskState::Unknown
                        {
                            c.rec.intents.exit_on_next = true;
                        }
                        exits.push((
                            id.clone(),
                            VANISHED_EXIT_CODE,
                            now,
                            Some(VANISHED.to_owned()),
                        ));
                    } else if unexited {
                        // Created, never known to start, now gone (we deleted
                        // it and lost the answer, or crashed): no run, no exit.
                        never_ran.push(id.clone());
                    }
                    c.task = TaskState::Absent;
                    if c.execs_end_with_run() {
                        execs_ended.push(id.clone());
                    }
                }
                None => {}
            }
            let doubt_settled = settled && c.task_in_doubt;
            if settled {
                c.confirmed = true;
                c.task_in_doubt = false;
                // Events are not replayed: an exec's end during an outage
                // is learned by asking.
                if matches!(c.task, TaskState::Running { .. }) {
                    let looks = c.exec_looks.len();
                    Core::look_at_execs(c);
                    if c.exec_looks.len() != looks {
                        touched.push(id.clone());
                    }
                }
            }
            // (A commit's thaw owed after a freeze whose answer was lost
            // is settled by this listing too: found by the properties.)
            if (c.task, c.paused) != before || doubt_settled || c.commit_thaw_moot() {
                touched.push(id.clone());
            }
        }
        for id in execs_ended {
            if let Some(c) = self.containers.get(&id) {
                self.out.persist(&c.rec);
            }
        }
        for (id, code, at, error) in exits {
            self.record_exit(&id, code, at, error);
        }
        for id in never_ran {
            self.never_ran(&id);
        }
        for id in started {
            self.start_took_effect(&id);
        }
        // Its created task is now nobody's to start: reconciled, it is
        // deleted (else it stayed in containerd for ever when the listing
        // changed nothing of its view: seed 30464).
        for id in killed_before_start {
            self.start_ruled_out(&id);
            if !touched.contains(&id) {
                touched.push(id);
            }
        }
        (touched, look_now)
    }
}
