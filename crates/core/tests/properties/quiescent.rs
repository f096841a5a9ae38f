//! Property 3: at every quiescent point the view matches the world.

use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;
use std::time::Duration;

impl Harness {
    /// Property 3, at every quiescent point: connected, no call open.
    /// A container whose change could not be seen (see `unseen`) waits for
    /// the relist that learns it.
    pub(crate) fn check_quiescent(&self) -> Result<(), TestCaseError> {
        if self.core.connection() != ConnectionState::Ready
            || !self.outstanding.is_empty()
            || self.relisting
        {
            return Ok(());
        }
        // Nothing stays unknown while connected: a task the core cannot
        // know (a lost create, a placeholder, a listing older than a call's
        // answer) has a relist coming at once, not the periodic one.
        let relist_soon = self.core.timers().any(|(at, kind)| {
            *kind == TimerKind::PeriodicRelist && at <= self.now.at + Duration::from_secs(2)
        });
        for c in self.core.containers() {
            prop_assert!(
                c.task != TaskState::Unknown || relist_soon,
                "{} unknown while connected and idle, no relist coming",
                c.record.id
            );
        }
        // A hot connect whose run is over before it was made is answered
        // done (made at the next start); one disconnected meanwhile,
        // refused. Neither waits for a run that will not come.
        for (req, (id, network)) in &self.connects {
            let Some(c) = self.core.container(id) else {
                continue;
            };
            if self.answered.contains_key(req) || self.unseen.contains_key(id) {
                continue;
            }
            let e = c.record.endpoints.iter().find(|e| &e.network == network);
            let ended = matches!(c.task, TaskState::Absent | TaskState::Stopped);
            let settled = match e {
                None => true,
                Some(e) => !e.wanted || e.state == NetworkState::Detached && ended,
            };
            prop_assert!(
                !settled,
                "{} (a connect of {} to {}) still waits: {:?}, task {:?}",
                req,
                id,
                network,
                e,
                c.task
            );
        }
        for c in self.core.containers() {
            let id = &c.record.id;
            if self.unseen.contains_key(id) {
                continue;
            }
            let task = self
                .world
                .containerd
                .tasks
                .get(id)
                .map(|t| (t.status, t.pid));
            match task {
                Some((status, pid)) if status != TaskStatus::Stopped => {
                    // (A container being removed shows as removing, not
                    // paused, whatever its task is.)
                    let frozen = status == TaskStatus::Paused;
                    if c.status != Status::Removing {
                        prop_assert_eq!(c.paused, frozen, "{} paused as containerd says", id);
                    }
                    // Created or started, as containerd has it.
                    let want = match status {
                        TaskStatus::Created => TaskState::Created { pid },
                        _ => TaskState::Running { pid },
                    };
                    prop_assert!(
                        c.current_exit().is_none() && c.task == want,
                        "{} should run pid {}: {:?}, exit {:?}",
                        id,
                        pid,
                        c.task,
                        c.current_exit()
                    );
                }
                Some(_) => {
                    prop_assert!(c.status != Status::Running, "{} should not run", id);
                }
                // No task: none is shown, not even a created one (a view in
                // doubt, a delete's answer lost, is settled by a relist at
                // once, not the periodic one).
                None => {
                    prop_assert!(
                        !matches!(
                            c.task,
                            TaskState::Created { .. } | TaskState::Running { .. }
                        ),
                        "{} has no task, shown {:?} ({:?})",
                        id,
                        c.task,
                        c.status
                    );
                }
            }
        }
        Ok(())
    }
}
