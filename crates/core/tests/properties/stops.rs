//! Stops: SIGKILL when the grace period ends, the answer in time.

use crate::calls::Call;
use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;

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
}
