//! Every call that can end, freeze, start or delete something is backed by
//! what a user (or a restart policy) asked, and sent while the core can see:
//! never while blind after a (re)connect.

use super::Checker;
use crate::model::Containerd;
use holdfast_core::{Call, Instant, RestartPolicy};

impl Checker {
    pub(super) fn call(
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
            Call::KillExec { exec_id, .. } if !self.exec_kills_asked.contains(exec_id) => {
                return Err(format!(
                    "{op}: kill of exec {exec_id} of {id} that no user asked for"
                ));
            }
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
                // A user's pause stands until an unpause after it.
                let user_paused = since(asked.pause_done_at)
                    && asked.pause_done_at > asked.unpause_at.filter(|at| *at >= created);
                let why = if matches!(call, Call::Pause { .. }) {
                    since(asked.pause_at) || since(asked.commit_at)
                } else {
                    since(asked.unpause_at)
                        || since(asked.kill_at)
                        || since(asked.commit_at) && !user_paused
                };
                if !why {
                    return Err(format!(
                        "{op}: {call:?} of {id} (pid {pid}) that no user asked for (pause {:?}, unpause {:?}, stop/kill/remove {:?}, commit {:?})",
                        asked.pause_at, asked.unpause_at, asked.kill_at, asked.commit_at
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
                asked.start_attempted = true;
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
}
