//! Failed calls are retried after a backoff, a bounded number of times.

use crate::calls::Call;
use crate::harness::{Ask, Harness};
use holdfast_core::*;
use proptest::prelude::*;
use std::collections::BTreeMap;

impl Harness {
    /// Property 4b: SIGKILL for a stop comes no earlier than the grace
    /// period after its signal was delivered.
    /// Each container's retry timer, if armed: when it is due.
    pub(crate) fn retry_timers(&self) -> BTreeMap<ContainerId, Instant> {
        self.core
            .timers()
            .filter_map(|(at, kind)| match kind {
                TimerKind::Retry(id) => Some((id.clone(), at)),
                _ => None,
            })
            .collect()
    }

    /// A failed call is retried after a backoff: never at once (a call
    /// refused again and again would hammer containerd), never later than
    /// `retry_max`.
    pub(crate) fn check_retry_backoff(
        &self,
        before: &BTreeMap<ContainerId, Instant>,
    ) -> Result<(), TestCaseError> {
        for (id, at) in self.retry_timers() {
            if before.get(&id) == Some(&at) {
                continue;
            }
            let delay = at.saturating_since(self.now.at);
            prop_assert!(
                delay >= self.config.retry_initial && delay <= self.config.retry_max,
                "a retry of {}'s call armed {:?} ahead (backoff {:?} to {:?})",
                id,
                delay,
                self.config.retry_initial,
                self.config.retry_max
            );
        }
        Ok(())
    }

    /// How many times a call was tried before it is given up. Refusals of
    /// one call in a row (a success of any call on the container, or a
    /// refusal of another, starts the count over; containerd going away
    /// counts for nothing) are counted as `streaks`, with whether one of
    /// them may have taken effect (its answer lost):
    /// - a user's kill is given up, with an error, at its
    ///   `retry_attempts_max`-th refusal in a row, not sooner, not later;
    /// - a start's task create or start refused after an attempt that may
    ///   have taken effect is looked for (a relist) and tried again, until
    ///   that call was refused `retry_attempts_max` times in a row before;
    ///   then the start is given up.
    pub(crate) fn check_retries(
        &mut self,
        call: &Call,
        result: &Result<Done, Failure>,
        user_kill: bool,
        start_wanted: bool,
        asked_then: &[(RequestId, (ContainerId, Ask), Answer)],
    ) -> Result<(), TestCaseError> {
        let Some(id) = call.container_id().cloned() else {
            return Ok(());
        };
        // A resize is its request's own call, none of its container's
        // steps: it counts neither way.
        if matches!(call, Call::ResizePty { .. }) {
            return Ok(());
        }
        let kind = match result {
            Ok(_) => {
                self.streaks.remove(&id);
                return Ok(());
            }
            Err(failure) => failure.kind,
        };
        let key = match call {
            Call::Kill { signal, .. } => format!("kill {signal:?} user {user_kill}"),
            Call::EndpointSetup { endpoint, .. } | Call::EndpointTeardown { endpoint, .. } => {
                format!("{:?} {}", std::mem::discriminant(call), endpoint.slot)
            }
            _ => format!("{:?}", std::mem::discriminant(call)),
        };
        let (before, uncertain) = match self.streaks.get(&id) {
            Some((k, n, u)) if *k == key => (*n, *u),
            _ => (0, false),
        };
        let lost = matches!(
            kind,
            FailureKind::Unavailable | FailureKind::Deadline | FailureKind::AlreadyExists
        );
        let max = self.config.retry_attempts_max;
        if kind == FailureKind::Unavailable {
            if let Some(streak) = self.streaks.get_mut(&id).filter(|s| s.0 == key) {
                streak.2 = true;
            }
            return Ok(());
        }
        self.streaks
            .insert(id.clone(), (key, before + 1, uncertain || lost));
        // (A kill whose run ended meanwhile was answered then: nothing is
        // left to give up.)
        let kill_waited = |signal: Signal| {
            let this = |(of, ask): &(ContainerId, Ask)| *of == id && *ask == Ask::Kill(signal);
            self.asks.values().any(this) || asked_then.iter().any(|(_, a, _)| this(a))
        };
        if let (Call::Kill { signal, .. }, true, false) = (call, user_kill, lost)
            && kill_waited(*signal)
        {
            let given_up = asked_then.iter().any(|(_, (of, ask), answer)| {
                *of == id && *ask == Ask::Kill(*signal) && matches!(answer, Answer::Error(_))
            });
            prop_assert_eq!(
                given_up,
                before + 1 >= max,
                "{}'s kill ({:?}) refused ({:?}) after {} refusals in a row: given up {}",
                id,
                signal,
                kind,
                before,
                given_up
            );
            if given_up {
                self.streaks.remove(&id);
            }
        }
        let start_call = matches!(call, Call::CreateTask { .. } | Call::StartTask { .. });
        let not_created =
            matches!(call, Call::StartTask { .. }) && kind == FailureKind::FailedPrecondition;
        // (A start a stop cancelled meanwhile is not given up.)
        if start_call && start_wanted && uncertain && !lost && !not_created {
            let looks = self
                .core
                .container(&id)
                .is_some_and(|c| c.record.intents.start);
            prop_assert_eq!(
                looks,
                before < max,
                "{}'s {:?} refused ({:?}) after {} attempts in a row, one of which may have taken effect: looked again {}",
                id,
                call,
                kind,
                before,
                looks
            );
            if !looks {
                self.streaks.remove(&id);
            }
        }
        Ok(())
    }

    /// Counts a container's failed answers in a row: any failed answer
    /// counts, the world's own refusals too (a start refused because a lost
    /// one took effect); a lost answer is a failure to the core: a deadline.
    pub(crate) fn count_failures(&mut self, input: &Input) {
        if let Input::ActionResult(_, result) = &input
            && let Some(id) = self.answering.take()
        {
            let failures = self.failures.entry(id).or_default();
            *failures = if result.is_err() { *failures + 1 } else { 0 };
        }
    }
}
