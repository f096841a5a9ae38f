//! What users ask and how they are answered: each request's bound, the
//! signals it permits, what it rules out (a stop, a kill that means "stay
//! down"), and every answer and user event the core gives.

use super::{Checker, Request, UNKNOWN_CONTAINER, UserKind};
use crate::model::Containerd;
use holdfast_core::{
    Action, Answer, Command, ConnectionState, ContainerConfig, Core, Instant, RequestId, Status,
    UserEventKind,
};
use std::time::Duration;

impl Checker {
    pub fn command(&mut self, req: RequestId, command: &Command, now: Instant) {
        if let Command::CreateExec { id, exec_id, .. } = command {
            self.exec_containers.insert(exec_id.clone(), id.clone());
        }
        if let Command::KillExec { exec_id, .. } = command {
            self.exec_kill_requests.insert(req, exec_id.clone());
            self.exec_kills_asked.insert(exec_id.clone());
        }
        let id = match command {
            Command::StartExec { exec_id, .. } | Command::KillExec { exec_id, .. } => {
                self.exec_containers.get(exec_id).cloned()
            }
            command => command.container_id().cloned(),
        };
        // Not a container's (a volume's, a network's, an exec no user
        // created): counted against a container that never exists.
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
                // A pod's sandbox is created to run: its create is its
                // start too (kubelet's RunPodSandbox).
                if config
                    .pod
                    .as_ref()
                    .is_some_and(|p| p.role == holdfast_core::PodRole::Sandbox)
                {
                    asked.start = true;
                    asked.start_wanted = true;
                }
                // Still with containerd at its bound, it is given as
                // long again as a create's calls may take.
                Some(self.config.request_answer_bound + super::CREATE_ANSWER_MAX + slack)
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
            Command::ReadChanges { .. } => {
                Some(self.config.request_answer_bound + super::CALL_ANSWER_MAX + slack)
            }
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
                // Refused (a create not done, a pod's container through
                // the Docker API), it did not.
                asked.stayed_down_by = Some(req);
                asked.start_wanted_before = asked.start_wanted;
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
                    asked.start_wanted_before = asked.start_wanted;
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
            Command::ReadChanges { pause: true, .. } => asked.commit_at = Some(now),
            Command::Create { .. }
            | Command::CreateVolume { .. }
            | Command::RemoveVolume { .. }
            | Command::PruneVolumes { .. }
            | Command::CreateNetwork { .. }
            | Command::RemoveNetwork { .. }
            | Command::PruneNetworks { .. }
            | Command::CreateExec { .. }
            | Command::ReadChanges { pause: false, .. }
            | Command::MountRootfs { .. }
            | Command::UnmountRootfs { .. }
            | Command::StartExec { .. }
            | Command::KillExec { .. }
            | Command::Resize { .. }
            | Command::Wait { .. }
            | Command::Rename { .. }
            | Command::Connect { .. }
            | Command::Disconnect { .. } => {}
        }
        let kind = crate::sim::user_kind(command);
        self.outstanding.insert(
            req,
            Request {
                kind,
                container: id,
                issued: now,
                bound,
                waits_for_outcome: matches!(
                    command,
                    Command::Start { .. } | Command::Restart { .. }
                ),
            },
        );
    }

    /// What a user's command implies for another container, as a request
    /// of its own that nobody waits on (a pod's stop stops its containers):
    /// what it permits and rules out, without an answer to expect.
    pub fn implied(&mut self, req: RequestId, command: &Command, now: Instant) {
        self.command(req, command, now);
        self.outstanding.remove(&req);
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
                if let holdfast_core::NetworkCall::Setup { id, .. } = call {
                    self.asked.entry(id.clone()).or_default().start_attempted = true;
                }
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
                // Refused with nothing done (not running, not made yet, not
                // the Docker API's to change): it did not keep it down.
                if matches!(request.kind, UserKind::Kill | UserKind::Stop)
                    && matches!(answer, Answer::Error(e) if matches!(
                        e.kind,
                        holdfast_core::ErrorKind::Conflict | holdfast_core::ErrorKind::NotFound
                    ))
                {
                    let asked = self.asked.entry(id.clone()).or_default();
                    if asked.stayed_down_by == Some(*req) {
                        asked.stayed_down = false;
                        asked.stayed_down_by = None;
                        asked.start_wanted |= asked.start_wanted_before;
                    }
                }
                // A start is told it failed only where it will not be
                // carried out: an error while the core still means to start
                // it is a lie its user acts on (`docker run` exits 125, a
                // script makes the container again, and it starts anyway).
                // (A conflict refuses this request for a reason that holds,
                // beside a start asked before it.)
                if matches!(request.kind, UserKind::Start | UserKind::Restart)
                    && let Answer::Error(e) = answer
                    && e.kind != holdfast_core::ErrorKind::Conflict
                    && core
                        .and_then(|c| c.container(id))
                        .is_some_and(|v| v.record.intents.start)
                {
                    return Err(format!(
                        "{req}: the start of {id} was answered an error ({}) while it is still to be carried out",
                        e.message
                    ));
                }
                // A kill refused (no such exec, never started) asks nothing.
                if let Some(exec_id) = self.exec_kill_requests.remove(req)
                    && matches!(answer, Answer::Error(e) if matches!(
                        e.kind,
                        holdfast_core::ErrorKind::Conflict | holdfast_core::ErrorKind::NotFound
                    ))
                {
                    self.exec_kills_asked.remove(&exec_id);
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
                    self.asked.entry(id.clone()).or_default().pause_done_at = Some(now);
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
            Action::PublishResource(event) => {
                super::resources::told_once(&mut self.resource_events, event)
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
}
