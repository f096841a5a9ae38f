//! Starts and restarts: what a start's answer says took place.

use crate::calls::Call;
use crate::harness::Harness;
use crate::world::WorldTask;
use holdfast_core::*;
use proptest::prelude::*;

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
        let runs = matches!(self.world.tasks.get(id), Some(WorldTask::Running(_)));
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
}
