//! `docker pause` and `unpause`, and freezes from outside.

use crate::calls::Call;
use crate::harness::{Ask, Harness};
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
}
