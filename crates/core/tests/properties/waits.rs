//! `docker wait`: answered with what it waited for, only when it is so.

use crate::harness::{Harness, PendingWait};
use crate::steps::Pick;
use holdfast_core::*;
use proptest::prelude::*;

impl Harness {
    /// A wait ends with what it waited for (the removal, an exit: its
    /// code), never an error, but for a client that went away or a
    /// container unknown when asked.
    pub(crate) fn check_wait_answer(
        &self,
        input: &Input,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        if self.waits.contains_key(req)
            && let Answer::Error(e) = answer
        {
            let asked_now = matches!(&input, Input::Command(r, _, _) if r == req);
            prop_assert!(
                e.kind == ErrorKind::Cancelled || e.kind == ErrorKind::NotFound && asked_now,
                "{} (a wait) answered {:?}",
                req,
                answer
            );
        }
        Ok(())
    }

    /// A wait is answered only when what it waits for is true.
    pub(crate) fn check_waits_met(
        &self,
        input: &Input,
        waited: Vec<(RequestId, PendingWait)>,
    ) -> Result<(), TestCaseError> {
        for (req, (id, condition, exit_then)) in waited {
            let view = self.core.container(&id);
            let exit_now = view
                .as_ref()
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            let met = match condition {
                WaitCondition::Removed => view.is_none(),
                WaitCondition::NextExit => view.is_none() || exit_now != exit_then,
                // (At a run's end also while restarting, as dockerd; at
                // any other moment, only once the container is down.)
                WaitCondition::NotRunning => view.is_none_or(|c| {
                    c.status != Status::Running
                        && (c.status != Status::Restarting || !matches!(&input, Input::Command(..)))
                }),
            };
            prop_assert!(
                met,
                "{} (a wait {:?} of {}) answered, but it is not so: {:?}",
                req,
                condition,
                id,
                view.map(|c| c.status)
            );
        }
        Ok(())
    }

    /// The client of the n-th pending wait goes away: the wait is answered
    /// cancelled.
    pub(crate) fn cancel_wait(&mut self, n: &Pick) -> Result<(), TestCaseError> {
        let Some(req) = (!self.waits.is_empty())
            .then(|| self.waits.keys().nth(n.of(self.waits.len())).copied())
            .flatten()
        else {
            return Ok(());
        };
        self.feed(Input::Cancel(req))?;
        let answer = self.answer_of(req);
        prop_assert!(
            matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Cancelled),
            "{} cancelled, answered {:?}",
            req,
            answer
        );
        Ok(())
    }

    /// Once healed, a wait whose condition has come true is answered: the
    /// container is gone, it exited since, or nothing runs nor is about
    /// to.
    pub(crate) fn check_met_waits_answered(&self) -> Result<(), TestCaseError> {
        for (req, (id, condition, exit_then)) in &self.waits {
            let view = self.core.container(id);
            let exit_now = view
                .as_ref()
                .and_then(|c| c.record.exit.as_ref().map(|e| (e.run, e.finished_at)));
            let met = match condition {
                WaitCondition::Removed => view.is_none(),
                WaitCondition::NextExit => view.is_none() || exit_now != *exit_then,
                WaitCondition::NotRunning => view.is_none_or(|c| {
                    matches!(c.status, Status::Exited | Status::Created)
                        && !c.record.intents.start
                        && !c.record.intents.policy_restart
                }),
            };
            prop_assert!(
                !met,
                "{} (a wait {:?} of {}) never answered, although it is so: {:?}",
                req,
                condition,
                id,
                view.map(|c| c.status)
            );
        }
        Ok(())
    }
}
