//! Property 2: an exit is recorded at most once per run, never changed,
//! and is the world's exit of that run's process (an OOM kill recorded as
//! one when its evidence came in order, and never a false one); the
//! world's second source, which reports an exit again.

use crate::harness::Harness;
use crate::steps::Pick;
use holdfast_core::*;
use holdfast_sim::model::oom_count_readable;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// How much later than the first an exit reported again says it was.
pub(crate) const REPORTED_AGAIN_LATER_NANOS: i64 = 1_000_000;

impl Harness {
    /// Follows what an input tells the core, for the OOM expectation.
    pub(crate) fn event_fed(&mut self, input: &Input) {
        match input {
            // Only an OOM event after the OOM killer struck is its event: a
            // bare one before (while the core rightly saw nothing running)
            // proves nothing about a later kill.
            Input::Event(ContainerdEvent::TaskOom {
                container,
                published_at,
            }) => {
                if let Some(inst) = self.world.current_mut(container) {
                    if inst.oom_struck {
                        inst.oom_in_order = true;
                    }
                    // Published before the previous process ended: an
                    // earlier run's for certain.
                    let earlier =
                        published_at.is_some_and(|at| inst.after.is_some_and(|e| at <= e));
                    inst.oom_event_in_run |= !earlier;
                }
            }
            Input::Event(ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                ..
            }) if exec_id == container.as_str() => {
                if self.world.task_pid(container).is_some_and(|p| p != *pid)
                    && let Some(inst) = self.world.current_mut(container)
                {
                    inst.oom_in_order = false;
                }
            }
            _ => {}
        }
    }

    /// Property 2, against the truth: a newly recorded exit is the world's
    /// exit of the newest process with that pid (pids are reused: an earlier
    /// run's exit taken for the current run's is caught here).
    pub(crate) fn check_exit_is_the_truth(
        &mut self,
        id: &ContainerId,
        pid: Option<u32>,
        exit: &ExitRecord,
    ) -> Result<(), TestCaseError> {
        let Some(pid) = pid else {
            prop_assert!(false, "{} has an exit with no pid: {:?}", id, exit);
            return Ok(());
        };
        let live = self.world.containerd.live_pid(id) == Some(pid);
        let (Some(truth), Some(seen)) = (self.world.truth(id, pid), self.world.seen_of(id, pid))
        else {
            prop_assert!(false, "{} has an exit for pid {}, never its", id, pid);
            return Ok(());
        };
        match self.world.exit_of(id, pid) {
            Some(status) if exit.error.is_none() => prop_assert_eq!(
                i64::from(status),
                i64::from(exit.exit_code),
                "exit of {} pid {} is not the truth",
                id,
                pid
            ),
            Some(_) => {}
            // Only a task that vanished may have an exit the world never
            // had; not one the core deleted itself before it ran (its
            // delete's answer lost, it may be gone: a start sent to it
            // could only end in such an exit, of a run that never began).
            None => prop_assert!(
                exit.error.is_some() && !live && !self.world.deleted_unstarted(id, pid),
                "{} has an exit that never happened: {:?}",
                id,
                exit
            ),
        }
        // A run that ran has a start time (`docker inspect`'s StartedAt,
        // and its `start` event), however its start's answer went.
        if truth.started && exit.error.is_none() {
            let started = self.core.container(id).and_then(|c| c.record.started_at);
            prop_assert!(
                started.is_some(),
                "{} pid {} ran and exited with no start recorded: {:?}",
                id,
                pid,
                exit
            );
        }
        // (Excused only where the core cannot know better: no cgroup count,
        // and an OOM event that may have been this process's.)
        prop_assert!(
            !exit.oom_killed || truth.oom || !oom_count_readable(pid) && seen.oom_event_in_run,
            "{} recorded an OOM kill that never happened: {:?}",
            id,
            exit
        );
        // An OOM kill whose cgroup count came with the exit is recorded as
        // one, whatever the order of the events and whoever sent SIGKILL.
        if truth.oom && oom_count_readable(pid) && exit.error.is_none() {
            prop_assert!(
                exit.oom_killed,
                "{} pid {} was OOM-killed, the count of its cgroup said so, and the exit says otherwise: {:?}",
                id,
                pid,
                exit
            );
        }
        // Without the count: an OOM kill whose event came in order.
        if truth.oom && seen.oom_in_order && !seen.sigkilled && exit.error.is_none() {
            prop_assert!(
                exit.oom_killed,
                "{} pid {} was OOM-killed, its OOM event came in order, and the exit says otherwise: {:?}",
                id,
                pid,
                exit
            );
        }
        Ok(())
    }

    /// A shim sends TaskOOM just before its TaskExit: an OOM followed by an
    /// earlier run's exit was that run's (late, after an outage), so the
    /// current run's next OOM is its first.
    pub(crate) fn forget_oom_of_an_earlier_run(&mut self, input: &Input) {
        if let Input::Event(ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            ..
        }) = &input
            && exec_id == container.as_str()
            && let Some(c) = self.core.container(container)
            && c.record.pid != Some(*pid)
            && c.current_exit().is_none()
        {
            self.oom_announced
                .remove(&(container.clone(), c.record.run));
        }
    }

    /// An exit recorded for a run whose pid was known is that process's: a
    /// listing of another pid (an earlier run's, read before this run's
    /// create) neither ends the run nor takes its pid.
    pub(crate) fn check_an_exit_keeps_its_pid(
        &self,
        input: &Input,
        pids_before: &BTreeMap<ContainerId, (u64, Option<u32>, bool)>,
    ) -> Result<(), TestCaseError> {
        for c in self.core.containers() {
            let r = c.record;
            if let Some((run, Some(pid), false)) = pids_before.get(&r.id)
                && *run == r.run
                && c.current_exit().is_some()
            {
                prop_assert_eq!(
                    r.pid,
                    Some(*pid),
                    "{} run {} ended by {:?} with another pid",
                    &r.id,
                    r.run,
                    input
                );
            }
        }
        Ok(())
    }

    /// An OOM is announced once per run, and only for a run that has not
    /// ended.
    pub(crate) fn check_oom_announced(
        &mut self,
        input: &Input,
        event: &UserEvent,
    ) -> Result<(), TestCaseError> {
        let view = self.core.container(&event.container);
        let run = view.map_or(0, |v| v.record.run);
        let ended = view.is_some_and(|v| v.record.exit.as_ref().is_some_and(|e| e.run == run));
        prop_assert!(
            !ended,
            "{input:?} announced an OOM of {} run {run}, which had ended",
            event.container
        );
        prop_assert!(
            self.oom_announced.insert((event.container.clone(), run)),
            "{input:?} announced the OOM of {} run {run} twice",
            event.container
        );
        Ok(())
    }

    /// Property 2: a run's exit is recorded once and never changed; returns
    /// the exits newly recorded for the current run.
    pub(crate) fn note_new_exits(
        &mut self,
    ) -> Result<Vec<(ContainerId, Option<u32>, ExitRecord)>, TestCaseError> {
        let mut new_exits = Vec::new();
        for c in self.core.containers() {
            if let Some(exit) = &c.record.exit {
                let key = (c.record.id.clone(), exit.run);
                match self.exits.get(&key) {
                    Some(first) => prop_assert_eq!(first, exit, "exit of {:?} changed", key),
                    None => {
                        self.exits.insert(key, exit.clone());
                        if c.current_exit().is_some() {
                            new_exits.push((c.record.id.clone(), c.record.pid, exit.clone()));
                        }
                    }
                }
            }
        }
        Ok(new_exits)
    }

    /// An exit already recorded is reported again, differently (another
    /// status and a later time for the same pid, as a second source gives).
    pub(crate) fn exit_reported_again(&mut self, n: &Pick) -> Result<(), TestCaseError> {
        // Only of an exit the core has recorded for that pid (or of
        // an earlier run): a first report that lies is no fault the
        // core could see through. Or one timed before the newest
        // process with that pid was asked for (its pid reused): the
        // core tells it from that process's by when its run began.
        // Never timed in the future, nor in the life of a later
        // process with that pid (no second source would say so).
        let now = self.now.wall.as_unix_nanos();
        let again_at = |exited_at: &WallTime| {
            (exited_at.as_unix_nanos() + REPORTED_AGAIN_LATER_NANOS).min(now)
        };
        let exits: Vec<ContainerdEvent> = self
            .past_events
            .iter()
            .filter(|e| match e {
                ContainerdEvent::TaskExit {
                    container,
                    exec_id,
                    pid,
                    exited_at,
                    ..
                } if exec_id == container.as_str() => {
                    let again = again_at(exited_at);
                    let newest_asked = self
                        .world
                        .seen_of(container, *pid)
                        .map(|seen| seen.asked_at.as_unix_nanos());
                    let exited = exited_at.as_unix_nanos();
                    let later_process = newest_asked.filter(|asked| *asked > exited);
                    // (Nor after a later create was asked for: the
                    // process it makes may reuse the pid.)
                    let create_asked = self
                        .world
                        .create_asked
                        .get(container)
                        .map(|at| at.as_unix_nanos())
                        .filter(|asked| *asked > exited);
                    let honest = again > exited
                        && later_process.is_none_or(|asked| again < asked)
                        && create_asked.is_none_or(|asked| again < asked);
                    let before_newest = later_process.is_some();
                    honest
                        && self.core.container(container).is_some_and(|v| {
                            v.record.pid != Some(*pid)
                                || before_newest
                                || v.record
                                    .exit
                                    .as_ref()
                                    .is_some_and(|x| x.run == v.record.run)
                        })
                }
                _ => false,
            })
            .cloned()
            .collect();
        if !exits.is_empty()
            && let ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                exit_status,
                exited_at,
                oom_kills,
            } = exits[n.of(exits.len())].clone()
        {
            self.event(ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                exit_status: exit_status + 1,
                exited_at: WallTime::from_unix_nanos(again_at(&exited_at)),
                oom_kills,
            })?;
        }
        Ok(())
    }
}
