//! `docker pause` and `unpause`, and freezes from outside.

use crate::calls::Call;
use crate::harness::{Ask, Harness};
use crate::steps::id;
use holdfast_core::*;
use proptest::prelude::*;

impl Harness {
    /// A user's pause or unpause whose call failed is answered then: it is
    /// not retried (it may have taken effect; a relist finds out). Told
    /// why: containerd gone (503, it may have taken effect), or refused
    /// (500), in words that name what was asked.
    pub(crate) fn check_failed_pause_answered(
        &self,
        input: &Input,
        answered_call: &Option<Call>,
        asked_then: &[(RequestId, (ContainerId, Ask), Answer)],
    ) -> Result<(), TestCaseError> {
        if let (Input::ActionResult(_, Err(_)), Some(Call::Pause { id } | Call::Resume { id })) =
            (&input, &answered_call)
            // (Not a commit's freeze or thaw.)
            && !self.res.commit_failed_now.contains(id)
            && !self.res.commits.values().any(|c| c == id)
        {
            let ask = if matches!(answered_call, Some(Call::Pause { .. })) {
                Ask::Pause
            } else {
                Ask::Unpause
            };
            prop_assert!(
                !self.asks.values().any(|(i, a)| i == id && *a == ask),
                "{:?} of {} failed, and the user's {:?} still waits",
                answered_call,
                id,
                ask
            );
            // Told why: containerd gone (503, it may have taken effect),
            // or refused (500), in words that name what was asked.
            if let Input::ActionResult(_, Err(failure)) = &input {
                let (verb, not) = match ask {
                    Ask::Pause => ("pause", Some("unpause")),
                    _ => ("unpause", None),
                };
                for (req, _, answer) in asked_then
                    .iter()
                    .filter(|(_, (of, a), _)| of == id && *a == ask)
                {
                    let Answer::Error(e) = answer else {
                        continue;
                    };
                    prop_assert!(
                        (e.kind == ErrorKind::Unavailable)
                            == (failure.kind == FailureKind::Unavailable)
                            && e.message.contains(verb)
                            && not.is_none_or(|n| !e.message.contains(n)),
                        "{} ({:?} of {}) failed with {:?}, told {:?}",
                        req,
                        ask,
                        id,
                        failure.kind,
                        e
                    );
                }
            }
        }
        Ok(())
    }

    /// `docker pause` or `unpause`, refused as dockerd refuses them.
    pub(crate) fn pause_or_unpause(
        &mut self,
        i: &usize,
        freeze: &bool,
    ) -> Result<(), TestCaseError> {
        self.pauses_asked.insert((id(i), *freeze));
        // dockerd's refusals (each a conflict): not running (or on
        // its way down, or a start pending), restarting, already in
        // that state, a pause while a stop is under way.
        let refused = self.core.container(&id(i)).map(|c| {
            let running = matches!(c.task, TaskState::Running { .. })
                && c.current_exit().is_none()
                && c.status == Status::Running;
            let i = &c.record.intents;
            !running || i.remove || i.start || *freeze == c.paused || *freeze && i.stop.is_some()
        });
        let command = if *freeze {
            Command::Pause { id: id(i) }
        } else {
            Command::Unpause { id: id(i) }
        };
        let req = self.command(command)?;
        let answer = self.answer_of(req);
        let conflict = matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict);
        // Else only one already in progress is refused, and only
        // an outage keeps it from being taken.
        let in_progress = matches!(&answer, Some(Answer::Error(e))
            if e.kind == ErrorKind::Conflict && e.message.contains("in progress"));
        let ready = self.core.connection() == ConnectionState::Ready;
        let unavailable =
            matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Unavailable);
        prop_assert!(
            match refused {
                Some(true) => conflict,
                Some(false) => in_progress || if ready { answer.is_none() } else { unavailable },
                None => true,
            },
            "{} pause {} of {}: {:?} (refusal due: {:?})",
            req,
            freeze,
            id(i),
            answer,
            refused
        );
        Ok(())
    }

    /// Someone else freezes or thaws the running task (`ctr tasks pause`):
    /// containerd's event tells the core.
    pub(crate) fn freeze_from_outside(
        &mut self,
        i: &usize,
        freeze: &bool,
    ) -> Result<(), TestCaseError> {
        let id = id(i);
        if let Some(pid) = self.world.running_pid(&id) {
            let frozen = self.world.frozen_pid(&id) == Some(pid);
            if frozen != *freeze {
                let mut fx = Vec::new();
                if *freeze {
                    if self.world.stay_down_sent.contains(&(id.clone(), pid)) {
                        self.world.stay_down_frozen.insert(id.clone());
                    }
                    let _ = self.world.containerd.pause(&id, &mut fx);
                    // (Someone's freeze, as a user's pause: it may stand.
                    // A user's pause asked before it stands as it was.)
                    if !self.res.paused_by_user.contains_key(&id) {
                        let asked = RequestId(self.next_req);
                        self.res.paused_by_user.insert(id.clone(), asked);
                        self.res.frozen_outside.insert(id.clone());
                    }
                } else {
                    let _ = self.world.containerd.resume(&id, &mut fx);
                    // Their thaw undoes their freeze, not a user's pause
                    // asked since (found by fresh generation: a pause asked
                    // just after the freeze had the id that marked it).
                    if self.res.frozen_outside.remove(&id) {
                        self.res.paused_by_user.remove(&id);
                    }
                }
                // containerd's event first; a SIGKILL held by a v1
                // freezer lands at the thaw.
                self.publish(&fx)?;
                self.exits(&id, &fx)?;
            }
        }
        Ok(())
    }
}
