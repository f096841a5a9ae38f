//! After every step: the core's books match the world's (calls, requests
//! and their bounds), a connected core shows no dead process running, and
//! every recorded exit is the truth, recorded once; a complete relist
//! leaves nothing shown running that it did not list.

use super::{Checker, health_consistent};
use crate::model::Containerd;
use holdfast_core::{ConnectionState, ContainerId, Core, Instant, Status};
use std::time::Duration;

/// How long, once connected, a container may still be shown running after
/// its process exited: an event arrives in milliseconds; an exit missed in
/// an outage needs the reconnect's relist, which an injected deadline can
/// delay by a retry. Measured: no false alarm in 10,000 seeds at 12 s; 2 s
/// was too tight (a relist hit by an injected deadline).
pub(super) const STALE_VIEW_BOUND: Duration = Duration::from_secs(12);

impl Checker {
    /// After every step: the core's books match the world's, and every
    /// recorded exit is the truth, recorded once.
    pub fn after_step(
        &mut self,
        core: Option<&Core>,
        cd: &Containerd,
        world_calls: usize,
        now: Instant,
    ) -> Result<(), String> {
        self.checks += 1;
        let Some(core) = core else { return Ok(()) };
        self.start_not_stuck_on_a_leftover(core, cd, now)?;
        if core.calls_in_flight() != world_calls {
            return Err(format!(
                "the core waits on {} calls, the world has {world_calls} unanswered: an action left without a result",
                core.calls_in_flight()
            ));
        }
        if core.requests_pending() != self.outstanding.len() {
            return Err(format!(
                "the core holds {} requests, {} are unanswered: a request lost",
                core.requests_pending(),
                self.outstanding.len()
            ));
        }
        for (req, r) in &self.outstanding {
            let waited = now.saturating_since(r.issued);
            // A start still wanted waits for its outcome past its bound,
            // connected or not (that it comes is convergence's to check).
            let start_waits = r.waits_for_outcome
                && core
                    .container(&r.container)
                    .is_some_and(|v| v.record.intents.start);
            if let Some(bound) = r.bound
                && waited > bound
                && !start_waits
            {
                return Err(format!(
                    "{req} ({:?} of {}) unanswered after {waited:?} (bound {bound:?})",
                    r.kind, r.container
                ));
            }
        }
        // Safety, not just liveness: a connected core does not go on showing
        // a dead process as running (the bug dockerd 20.10 shipped).
        if core.connection() == ConnectionState::Ready {
            let since = *self.ready_since.get_or_insert(now);
            for view in core.containers() {
                let (Status::Running, Some(pid)) = (view.status, view.record.pid) else {
                    continue;
                };
                let id = &view.record.id;
                let Some(truth) = cd.truth_of(id, pid) else {
                    continue;
                };
                let Some((_, exited_at)) = truth.exit else {
                    continue;
                };
                let mut known_since = crate::sim::wall(since).max(exited_at);
                // An exit whose event was lost on a live stream waits for
                // the periodic relist: that is what it is for. Unless the
                // task's delete was seen: that is a reason to look at once.
                let key = (id.clone(), pid);
                // (Seen after this exit: a stale delete of an earlier
                // process with the pid says nothing of it.)
                let delete_seen = self
                    .deletes_seen
                    .get(&key)
                    .filter(|at| crate::sim::wall(**at) >= exited_at);
                let bound = match delete_seen {
                    _ if !self.lost_exits.contains(&key) => STALE_VIEW_BOUND,
                    Some(seen) => {
                        known_since = known_since.max(crate::sim::wall(*seen));
                        STALE_VIEW_BOUND
                    }
                    None => {
                        STALE_VIEW_BOUND + self.config.relist_interval.unwrap_or(Duration::MAX / 4)
                    }
                };
                if crate::sim::wall(now).saturating_since(known_since) > bound {
                    return Err(format!(
                        "{} shown running (pid {pid}) although it exited at {exited_at:?}; connected since {since:?}",
                        view.record.id
                    ));
                }
            }
        } else {
            self.ready_since = None;
        }
        for view in core.containers() {
            let Some(exit) = view.current_exit() else {
                continue;
            };
            let id = &view.record.id;
            let Some(pid) = view.record.pid else {
                return Err(format!("{id} has an exit recorded with no pid: {exit:?}"));
            };
            let key = (id.clone(), pid, exit.run);
            if let Some(first) = self.exits.get(&key) {
                if first != exit {
                    return Err(format!(
                        "the exit of {id} pid {pid} changed from {first:?} to {exit:?}"
                    ));
                }
                continue;
            }
            let Some(truth) = cd.truth_of(id, pid) else {
                return Err(format!(
                    "{id} has an exit for pid {pid}, which containerd never had"
                ));
            };
            let real = truth.exit.is_some_and(|(status, at)| {
                i64::from(status) == i64::from(exit.exit_code)
                    && at == exit.finished_at
                    && exit.error.is_none()
            });
            let vanished = truth.shim_died && exit.exit_code == 255 && exit.error.is_some();
            if !(real || vanished) || (exit.oom_killed && !truth.oom) {
                return Err(format!(
                    "{id} recorded exit {exit:?} for pid {pid}, but the truth is {truth:?}"
                ));
            }
            // An OOM kill whose cgroup count came with its exit (the shim
            // alive to report it) is recorded as one, whatever the order.
            if truth.oom
                && !truth.shim_died
                && crate::model::oom_count_readable(pid)
                && exit.error.is_none()
                && !exit.oom_killed
            {
                return Err(format!(
                    "{id} pid {pid} was OOM-killed and its cgroup counted it, but the exit is recorded without OOM: {exit:?}"
                ));
            }
            // Without the count, an OOM kill is recorded as one when its
            // evidence reached the core in order: the OOM event after the process began, no exit
            // of another pid of the container after it (the core takes that
            // as the OOM's run ending: the event names no pid), the core not
            // restarted since (it keeps the OOM in memory), and no SIGKILL of
            // ours to explain the 137. An OOM that comes after the exit
            // does not count: the first recorded exit is final.
            let asked = self.asked.entry(id.clone()).or_default();
            let oom_in_order = self.oom_delivered.get(id).is_some_and(|(at, other_exit)| {
                *at >= crate::sim::wall(truth.created_at) && !other_exit
            });
            let our_sigkill = asked
                .sigkill_sent_at
                .is_some_and(|at| at >= truth.created_at);
            if truth.oom
                && exit.exit_code == 137
                && exit.error.is_none()
                && oom_in_order
                && !our_sigkill
                && !exit.oom_killed
            {
                return Err(format!(
                    "{id} pid {pid} was OOM-killed and the OOM event came before its exit, but the exit is recorded without OOM: {exit:?}"
                ));
            }
            // A run the restart policy must follow with another: the user
            // never touched the container, and the policy calls for it.
            if let Some(config) = &asked.config
                && !asked.meddled
                && !asked.remove
                && !config.auto_remove
                && config.restart_policy.wants_restart(
                    exit.exit_code,
                    view.record.restart_count,
                    false,
                )
            {
                self.restart_owed.insert((id.clone(), exit.run));
            }
            self.verified.insert((id.clone(), pid, truth.created_at));
            self.exits.insert(key, exit.clone());
            if let Some(asked) = self.asked.get_mut(id) {
                asked.stop_grace = None;
                asked.stop_signal_sent = None;
                asked.permits.clear();
            }
        }
        for view in core.containers() {
            health_consistent(core, &view)?;
        }
        Ok(())
    }

    /// A complete relist listed these containers' tasks (placeholders
    /// included); `settled` are the containers no call touched since it was
    /// asked for. A settled container whose task it did not list is not
    /// running any more: the run it had is over.
    pub fn relist_complete(
        &self,
        core: Option<&Core>,
        relist: holdfast_core::OpId,
        listed: &std::collections::BTreeSet<ContainerId>,
        settled: impl Fn(&ContainerId) -> bool,
    ) -> Result<(), String> {
        let Some(core) = core else { return Ok(()) };
        // A relist of a connection given up since proves nothing.
        if relist.0 < self.latest_sub || core.connection() != ConnectionState::Ready {
            return Ok(());
        }
        for view in core.containers() {
            let id = &view.record.id;
            if listed.contains(id) || !settled(id) {
                continue;
            }
            if view.status == Status::Running {
                return Err(format!(
                    "{id} is shown running (pid {:?}) after a complete relist that did not list its task",
                    view.record.pid
                ));
            }
        }
        Ok(())
    }
}

impl Checker {
    /// A start is not wanted on and on against a leftover in containerd (a
    /// bundle a create cut halfway left: every create refused as
    /// existing): once no create of ours can be under way any more, it is
    /// given up within the retry bound, its requester told why.
    fn start_not_stuck_on_a_leftover(
        &mut self,
        core: &Core,
        cd: &Containerd,
        now: Instant,
    ) -> Result<(), String> {
        for view in core.containers() {
            let id = &view.record.id;
            // (A start waiting for a copy's mount to go is timed from when
            // it went.)
            if !view.record.intents.start || cd.mounted.contains(id) {
                self.start_wanted_since.remove(id);
                continue;
            }
            let since = *self.start_wanted_since.entry(id.clone()).or_insert(now);
            let past = |at: Instant| now.saturating_since(at) > super::LEFTOVER_GIVEN_UP;
            if past(since)
                && cd.up
                && core.connection() == holdfast_core::ConnectionState::Ready
                && cd.leftovers.get(id).is_some_and(|at| past(*at))
                && cd.lost_creates.get(id).is_none_or(|at| past(*at))
            {
                return Err(format!(
                    "the start of {id} is still wanted {:?} on, after containerd was left refusing its every create",
                    now.saturating_since(since)
                ));
            }
        }
        Ok(())
    }
}
