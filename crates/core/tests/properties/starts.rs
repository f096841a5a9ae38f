//! Starts and restarts: what a start's answer says took place, no start
//! without one asked for, and a start's bounds (property 4).

use crate::calls::Call;
use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

impl Harness {
    /// A start or restart told "stopped before it started" (409) had no
    /// start of its own under way that may yet take effect, nor one that
    /// took effect and still runs: the container did not run for it.
    pub(crate) fn check_start_refusal(
        &self,
        req: RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        let Answer::Error(e) = answer else {
            return Ok(());
        };
        let Some(id) = self.starts.get(&req) else {
            return Ok(());
        };
        // Told it failed only where it will not be carried out: an error
        // while the start is still wanted is a lie its user acts on. (A
        // conflict refuses this request for a reason that holds, a pause,
        // a removal, beside a start asked before it.)
        prop_assert!(
            e.kind == ErrorKind::Conflict
                || !self
                    .core
                    .container(id)
                    .is_some_and(|c| c.record.intents.start),
            "{} (a start of {}) told {:?} while it is still to be carried out",
            req,
            id,
            e.message
        );
        if e.kind != ErrorKind::Conflict || !e.message.contains("stopped before it started") {
            return Ok(());
        }
        // (A StartTask sent before it was asked is an earlier start's.)
        let asked_at_op = self.start_asked_at_op.get(&req).copied().unwrap_or(0);
        let start_under_way = self.outstanding.iter().any(|(op, call)| {
            matches!(call, Call::StartTask { id: x } if x == id) && op.0 > asked_at_op
        });
        // (Once its task is gone unseen, its answer and events lost, the
        // core cannot know it ever ran.)
        let runs = self.world.running_pid(id).is_some();
        prop_assert!(
            !(start_under_way || runs && self.starts_reached.contains(&req)),
            "{} (a start of {}) told {:?}, but its start {}",
            req,
            id,
            e.message,
            if start_under_way {
                "was sent and is still under way"
            } else {
                "took effect"
            }
        );
        Ok(())
    }

    /// The world started a task of `id`: every start or restart of it still
    /// waiting is carried out, but a restart asked after this start was
    /// sent (it wants a run after this one).
    pub(crate) fn start_reached(&mut self, id: &ContainerId, op: OpId) {
        for (req, of) in &self.starts {
            let later_restart = self.restarts.contains(req)
                && self
                    .start_asked_at_op
                    .get(req)
                    .is_some_and(|asked| *asked >= op.0);
            if of == id && !self.answered.contains_key(req) && !later_restart {
                self.starts_reached.insert(*req);
            }
        }
    }

    /// Counts the starts asked for: the start intent turning on, and each
    /// restart (which asks for a start of its own, even while an earlier
    /// start is still wanted).
    pub(crate) fn count_starts_asked(
        &mut self,
        input: &Input,
        before: &BTreeMap<ContainerId, bool>,
    ) {
        for c in self.core.containers() {
            let was_wanted = before.get(&c.record.id).copied().unwrap_or(false);
            // A restart asks for a start of its own, even while an
            // earlier start is still wanted.
            let restart = matches!(&input, Input::Command(_, _, Command::Restart { id, .. })
                if *id == c.record.id && c.record.intents.start);
            let ledger = self.start_ledger.entry(c.record.id.clone()).or_default();
            ledger.0 += u64::from(c.record.intents.start && (!was_wanted || restart));
        }
    }

    /// A `start` event is announced once per run.
    pub(crate) fn check_start_announced_once(
        &mut self,
        input: &Input,
        event: &UserEvent,
    ) -> Result<(), TestCaseError> {
        let run = self
            .core
            .container(&event.container)
            .map_or(0, |v| v.record.run);
        prop_assert!(
            self.starts_announced.insert((event.container.clone(), run)),
            "{input:?} announced the start of {} run {run} twice",
            event.container
        );
        Ok(())
    }

    /// A start or restart said done was sent to the task its run ended or
    /// runs on (an attempt whose answer was lost counts: the core cannot
    /// know it failed), never one that no start reached; a restart said
    /// done sent a start of its own (one on its way when it was asked was
    /// an earlier start's).
    pub(crate) fn check_start_said_done(
        &mut self,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        if *answer == Answer::Done
            && let Some(id) = self.starts.get(req)
            && let Some(pid) = self.core.container(id).and_then(|c| c.record.pid)
            && let Some(inst) = self.world.seen_of(id, pid)
        {
            prop_assert!(
                inst.start_sent,
                "{} (a start of {}) said done, but no start was sent to pid {}",
                req,
                id,
                pid
            );
        }
        // A restart said done sent a start of its own: one
        // on its way when it was asked was an earlier start's.
        if *answer == Answer::Done
            && self.restarts.contains(req)
            && let Some(id) = self.starts.get(req)
        {
            let asked = self.start_asked_at_op.get(req).copied().unwrap_or(0);
            let sent = self.last_start_op.get(id).copied();
            prop_assert!(
                sent.is_some_and(|op| op > asked),
                "{} (a restart of {}) said done with no start sent since it was asked (op {}; newest start {:?})",
                req,
                id,
                asked,
                sent
            );
        }
        Ok(())
    }

    /// A start or restart still waiting for its answer is one the core
    /// still means to make, or one sent that may yet take effect: a start
    /// dropped (by a stop, a removal, a give-up) is answered then, not left
    /// to a bound that would say it is still to come.
    pub(crate) fn check_waiting_starts_still_meant(
        &self,
        input: &Input,
    ) -> Result<(), TestCaseError> {
        for (req, id) in &self.starts {
            if self.answered.contains_key(req) {
                continue;
            }
            if let Some(c) = self.core.container(id) {
                prop_assert!(
                    c.record.intents.start || c.record.start_sent,
                    "{} (a start of {}) waits for a start nobody means to make, after {:?}",
                    req,
                    id,
                    input
                );
                // Nor one whose run the view shows running: that start
                // took effect, and is answered done then.
                prop_assert!(
                    !(c.record.start_sent && matches!(c.task, TaskState::Running { .. })),
                    "{} (a start of {}) waits, its run shown running, after {:?}",
                    req,
                    id,
                    input
                );
            }
        }
        Ok(())
    }

    /// Property 4, checked as time passes: a start is answered within the
    /// answer bound, or later only while the start is still wanted (its
    /// client waits for the outcome; convergence sees that it comes).
    pub(crate) fn check_starts_answered_in_time(&self) -> Result<(), TestCaseError> {
        for (req, asked) in &self.starts_asked {
            let waited = self.now.at.saturating_since(*asked);
            if self.answered.contains_key(req) || waited <= self.config.request_answer_bound {
                continue;
            }
            let wanted = self.starts.get(req).is_some_and(|id| {
                self.core
                    .container(id)
                    .is_some_and(|c| c.record.intents.start)
            });
            prop_assert!(
                wanted,
                "start {} unanswered after {:?}, no longer wanted",
                req,
                waited
            );
        }
        Ok(())
    }
}
