//! Stops (property 4): the signal by precedence, SIGKILL when the grace
//! period ends (not before, not later), the answer by its bound.

use crate::calls::Call;
use crate::harness::Harness;
use crate::steps::{id, stop_signal};
use holdfast_core::*;
use proptest::prelude::*;
use std::time::Duration;

impl Harness {
    pub(crate) fn check_escalation(&mut self, op: OpId, call: &Call) -> Result<(), TestCaseError> {
        let Call::Kill { id, signal, .. } = call else {
            return Ok(());
        };
        let Some(c) = self.core.container(id) else {
            return Ok(());
        };
        let intents = &c.record.intents;
        let Some(stop) = intents.stop else {
            self.signal_delivered.remove(id);
            return Ok(());
        };
        if *signal == stop.signal && stop.signal != Signal::SIGKILL {
            self.stop_signal_ops.insert(op, id.clone());
        } else if *signal == Signal::SIGKILL
            && stop.signal != Signal::SIGKILL
            && intents.kills.is_empty()
            && !intents.remove
        {
            // A later stop may have shortened the grace: the one in force counts.
            let grace_end = self.signal_delivered.get(id).map(|at| *at + stop.grace);
            prop_assert!(
                grace_end.is_some_and(|end| end <= self.now.at),
                "SIGKILL of {} at {:?} before its grace period ended ({:?})",
                id,
                self.now.at,
                grace_end
            );
        }
        Ok(())
    }

    /// Property 4 at the end: every stop was answered in time.
    pub(crate) fn check_stops_answered_in_time(&self) -> Result<(), TestCaseError> {
        for (req, bound) in &self.stop_bounds {
            let at = self.answered.get(req);
            prop_assert!(
                at.is_some_and(|at| at <= bound),
                "stop {} answered at {:?}, bound {:?}",
                req,
                at,
                bound
            );
        }
        Ok(())
    }

    /// `docker stop`: answered at once only when it changed nothing or
    /// cancelled a start; its signal by precedence; its answer due by grace
    /// and slack.
    pub(crate) fn stop(
        &mut self,
        i: &usize,
        timeout: &Option<u8>,
        signal: &Option<u8>,
    ) -> Result<(), TestCaseError> {
        let timeout = timeout.map(|t| Duration::from_secs(u64::from(t)));
        let signal = signal.and_then(stop_signal);
        let stopping = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.record.intents.stop.is_some());
        let start_pending = self
            .core
            .container(&id(i))
            .is_some_and(|c| c.record.intents.start || c.record.intents.policy_restart);
        let grace = self.core.container(&id(i)).map(|c| {
            c.record
                .intents
                .stop
                .map(|s| s.grace)
                .unwrap_or(Duration::MAX)
        });
        let req = self.command(Command::Stop {
            id: id(i),
            timeout,
            signal,
        })?;
        if let Some(deadline) = self.kill_deadline.get_mut(&id(i)) {
            let own = self.configs.get(&id(i)).and_then(|c| c.stop_timeout);
            let grace = timeout.or(own).unwrap_or(Duration::from_secs(10));
            *deadline = (*deadline).min(self.now.at + grace);
        }
        // Answered at once, a stop says whether it changed anything:
        // done when it cancelled a start to come, else not modified.
        let answer = self.trace.iter().rev().find_map(|a| match a {
            Action::Answer(r, answer) if *r == req => Some(answer.clone()),
            _ => None,
        });
        if let Some(answer @ (Answer::Done | Answer::NotModified)) = &answer
            && !stopping
        {
            let cancelled = *answer == Answer::Done;
            prop_assert_eq!(cancelled, start_pending, "stop answered {:?}", answer);
        }
        // The signal by precedence: request > container > image > SIGTERM.
        if !stopping
            && let Some(stop) = self
                .core
                .container(&id(i))
                .and_then(|c| c.record.intents.stop)
        {
            let config = self.configs.get(&id(i));
            let expected = signal
                .or(config.and_then(|c| c.stop_signal))
                .or(config.and_then(|c| c.image_stop_signal))
                .unwrap_or(Signal::SIGTERM);
            prop_assert_eq!(stop.signal, expected, "stop signal of {}", id(i));
        }
        if !self.answered.contains_key(&req) {
            let grace = timeout
                .unwrap_or(Duration::from_secs(10))
                .min(grace.unwrap_or(Duration::MAX));
            self.stop_bounds
                .insert(req, self.now.at + grace + self.slack);
        }
        Ok(())
    }

    /// SIGKILL comes when the grace period ends: no later than the
    /// shortest grace a stop asked for (counted as the core counts it).
    pub(crate) fn check_killed_at_grace_end(&self, target: Instant) -> Result<(), TestCaseError> {
        let ready = self.core.connection() == ConnectionState::Ready;
        for (id, deadline) in &self.kill_deadline {
            let view = self.core.container(id);
            let stopping = view.is_some_and(|c| {
                c.record.intents.stop.is_some()
                    && c.record.intents.kills.is_empty()
                    && c.current_exit().is_none()
            });
            let busy = self
                .outstanding
                .iter()
                .any(|(_, c)| c.container_id() == Some(id));
            prop_assert!(
                *deadline > target || !ready || !stopping || busy,
                "{} not killed at the end of its grace period ({:?}), now {:?}",
                id,
                deadline,
                target
            );
        }
        Ok(())
    }

    /// Property 4, checked as time passes: every stop is answered by its
    /// bound.
    pub(crate) fn check_stops_answered_by_their_bound(&self) -> Result<(), TestCaseError> {
        for (req, bound) in &self.stop_bounds {
            if *bound < self.now.at {
                let at = self.answered.get(req);
                prop_assert!(
                    at.is_some_and(|at| at <= bound),
                    "stop {req} not answered by {bound:?}"
                );
            }
        }
        Ok(())
    }
}
