//! `docker kill`, and the kills that mean "stay down".

use crate::calls::Call;
use crate::harness::Harness;
use crate::steps::id;
use holdfast_core::*;
use proptest::prelude::*;

impl Harness {
    /// dockerd's rule: SIGKILL, the configured stop signal, or any signal
    /// when none is configured, means the user wants the container down.
    pub(crate) fn stays_down(&self, id: &ContainerId, signal: Signal) -> bool {
        let config = self.configs.get(id);
        let stop_signal = config.and_then(|c| c.stop_signal.or(c.image_stop_signal));
        signal == Signal::SIGKILL || stop_signal.is_none_or(|s| s == signal)
    }

    /// A container a "stay down" kill reached while restarting (no start of
    /// its new run sent yet) gets no new task until a user's start or
    /// restart (or a new daemon) says so.
    pub(crate) fn check_kept_down(&self, input: &Input, call: &Call) -> Result<(), TestCaseError> {
        if let Call::StartTask { id } = call {
            prop_assert!(
                !self.start_not_again.contains(id),
                "{:?} sent a start to {} again after a kill that means stay down ended its restart",
                input,
                id
            );
        }
        if let Call::CreateTask { id } = call {
            prop_assert!(
                !self.kept_down.contains(id),
                "{:?} created a task of {} after a kill that means stay down ended its restart",
                input,
                id
            );
        }
        Ok(())
    }

    /// `docker kill`, answered as dockerd answers it by what the container
    /// shows: a container neither running nor restarting is refused (409,
    /// not running); one restarting with no process (between runs) is
    /// answered done at once, no signal sent. A kill that means "stay
    /// down" (SIGKILL, the stop signal, any signal when none is configured)
    /// ends a restart: the container shows restarting no more, and no new
    /// task is made for it; any other kill leaves the restart as it was.
    pub(crate) fn kill_checked(
        &mut self,
        id: &ContainerId,
        signal: Signal,
    ) -> Result<(), TestCaseError> {
        let before = self.core.container(id).map(|c| {
            let process = matches!(
                c.task,
                TaskState::Created { .. } | TaskState::Running { .. } | TaskState::Unknown
            ) && c.current_exit().is_none();
            (c.status, process, c.record.presence == Presence::Creating)
        });
        // (A start already sent to a task of the new run may have taken
        // effect: it stays, and the kill follows it.)
        let start_sent = self.core.container(id).is_some_and(|c| c.record.start_sent);
        let stay_down = self.stays_down(id, signal);
        if stay_down && !start_sent && before.is_some_and(|(s, _, _)| s == Status::Restarting) {
            // (Known before it is fed: the kill's own effects follow it.)
            self.kept_down.insert(id.clone());
        }
        // A start already sent may take effect, but it is not sent again.
        if stay_down && before.is_some_and(|(s, _, _)| s == Status::Restarting) {
            self.start_not_again.insert(id.clone());
        }
        let calls_before = self.trace.len();
        let req = self.command(Command::Kill {
            id: id.clone(),
            signal,
        })?;
        let Some((status, process, creating)) = before else {
            return Ok(());
        };
        if creating {
            return Ok(());
        }
        let answer = self.answer_of(req);
        let after = self.core.container(id).map(|c| c.status);
        match status {
            Status::Exited | Status::Created if !process => prop_assert!(
                matches!(&answer, Some(Answer::Error(e)) if e.kind == ErrorKind::Conflict
                    && e.message.contains("is not running")),
                "{} kill of {} ({:?}): {:?}, expected not running",
                req,
                id,
                status,
                answer
            ),
            Status::Restarting if !process => {
                let signalled = self.trace[calls_before..].iter().any(
                    |a| matches!(Call::of(a), Some((_, Call::Kill { id: x, .. })) if &x == id),
                );
                prop_assert!(
                    answer == Some(Answer::Done) && !signalled,
                    "{} kill of {} between runs: {:?} (signalled: {})",
                    req,
                    id,
                    answer,
                    signalled
                );
            }
            _ => {}
        }
        if status == Status::Restarting {
            prop_assert!(
                (after == Some(Status::Restarting)) != stay_down,
                "{} kill of {} with {:?} (stay down: {}) while restarting: now {:?}",
                req,
                id,
                signal,
                stay_down,
                after
            );
        }
        Ok(())
    }

    /// A kill's answer: whose signal it carried (a user's, or a stop's),
    /// and, delivered, its next delivery is announced anew.
    pub(crate) fn note_kill_answered(&mut self, input: &Input) -> Option<(ContainerId, Signal)> {
        let user_kill = match &input {
            Input::ActionResult(op, _) => self.user_kill_ops.get(op).cloned(),
            _ => None,
        };
        if let Input::ActionResult(op, _) = &input {
            self.user_kill_ops.remove(op);
        }
        // A signal delivered: its next delivery is announced anew.
        if let Input::ActionResult(op, result) = &input
            && let Some(kill) = self.kill_calls.remove(op)
            && result.is_ok()
        {
            self.kills_announced.remove(&kill);
        }
        user_kill
    }

    /// Every signal sent was announced (a `kill` event, as dockerd's), once
    /// per delivery, retries included.
    pub(crate) fn check_kill_announced(
        &mut self,
        input: &Input,
        op: &OpId,
        call: &Call,
    ) -> Result<(), TestCaseError> {
        if let Call::Kill { id, signal, .. } = call {
            prop_assert!(
                self.kills_announced.contains(&(id.clone(), *signal)),
                "{:?} sent {:?} to {} with no kill event",
                input,
                signal,
                id
            );
            self.kill_calls.insert(*op, (id.clone(), *signal));
        }
        Ok(())
    }

    /// `docker kill` with SIGKILL or SIGHUP.
    pub(crate) fn kill(&mut self, i: &usize, sigkill: &bool) -> Result<(), TestCaseError> {
        let signal = if *sigkill {
            Signal::SIGKILL
        } else {
            Signal::try_from(1).map_err(|e| TestCaseError::fail(e.to_string()))?
        };
        self.kill_checked(&id(i), signal)?;
        Ok(())
    }
}
