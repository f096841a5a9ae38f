//! What the liveness phase must come to once faults are healed: connected,
//! no call or answer outstanding, no intent left, the view equal to
//! containerd's truth, every exit recorded, every owed restart made.

use super::{Checker, UserKind};
use crate::model::Containerd;
use holdfast_core::{ConnectionState, Core, Presence, Status, WaitCondition};

impl Checker {
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
        // (One cut by a crash waits until the create it rolls back can no
        // longer land in containerd.)
        if core.rollbacks_pending() > 0 {
            return Some(format!(
                "{} creates being rolled back",
                core.rollbacks_pending()
            ));
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
            // A policy's restarts of a container whose creates containerd
            // refuses for good (a leftover only its restart clears) go on
            // with their backoff, each start failing: waiting, not stuck.
            let policy_waits = (truth_only || cd.leftovers.contains_key(id))
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
        // A pod's sandbox whose create was answered done was started
        // (whatever came of it: a refused start is its create's failure),
        // unless a user stopped or removed it first: none is left made and
        // never started, whatever crashed between its create and its start.
        for view in core.containers() {
            let id = &view.record.id;
            let sandbox = view
                .record
                .config
                .pod
                .as_ref()
                .is_some_and(|p| p.role == holdfast_core::PodRole::Sandbox);
            if let Some(asked) = self.asked.get(id)
                && sandbox
                && asked.create_done
                && !asked.start_attempted
                && !asked.stayed_down
                && !asked.remove
            {
                return Some(format!("{id}: a pod's sandbox made and never started"));
            }
        }
        // An exec a user asked to kill (the CRI's ExecSync past its
        // timeout) does not run on: the kill was delivered, whatever
        // happened to containerd or holdfastd since it was asked (a frozen
        // one acts on it once a user thaws it).
        for ((id, exec_id), (pid, exit)) in &cd.execs {
            let frozen = cd
                .tasks
                .get(id)
                .is_some_and(|t| t.status == holdfast_core::TaskStatus::Paused);
            if exit.is_none() && !frozen && self.exec_kills_asked.contains(exec_id) {
                return Some(format!(
                    "{id}: exec {exec_id} (pid {pid}) was asked killed, still runs"
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
