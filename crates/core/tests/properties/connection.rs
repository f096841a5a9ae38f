//! A connection fact is taken for no more than it is: containerd's refusal
//! keeps the connection, and "unreachable" is said only when it is so.

use crate::calls::Call;
use crate::harness::Harness;
use holdfast_core::*;
use proptest::prelude::*;

impl Harness {
    /// containerd's refusal of a call on a container is an answer: the
    /// connection it came over is fine, and is kept.
    pub(crate) fn check_refusal_keeps_the_connection(
        &self,
        input: &Input,
        answered_call: &Option<Call>,
        ready_before: bool,
    ) -> Result<(), TestCaseError> {
        if let (Input::ActionResult(_, Err(failure)), Some(call)) = (&input, &answered_call)
            && failure.kind != FailureKind::Unavailable
            && call.container_id().is_some()
            && ready_before
        {
            prop_assert!(
                self.core.connection() == ConnectionState::Ready,
                "{:?} refused ({:?}) dropped the connection",
                call,
                failure.kind
            );
        }
        Ok(())
    }

    /// "containerd is unreachable" is never said while connected.
    pub(crate) fn check_unavailable_only_when_away(
        &self,
        req: &RequestId,
        answer: &Answer,
    ) -> Result<(), TestCaseError> {
        prop_assert!(
            !matches!(answer, Answer::Error(e) if e.kind == ErrorKind::Unavailable)
                || self.core.connection() != ConnectionState::Ready,
            "{req} answered {answer:?} while connected"
        );
        Ok(())
    }

    /// Every event stream breaks.
    pub(crate) fn stream_breaks(&mut self) -> Result<(), TestCaseError> {
        for sub in std::mem::take(&mut self.subscriptions) {
            self.feed(Input::Connection(ConnectionFact::StreamBroken(
                sub,
                "eof".into(),
            )))?;
        }
        Ok(())
    }

    /// containerd goes away: its streams break, it is unreachable.
    pub(crate) fn containerd_down(&mut self) -> Result<(), TestCaseError> {
        self.world.containerd.up = false;
        for sub in std::mem::take(&mut self.subscriptions) {
            self.feed(Input::Connection(ConnectionFact::StreamBroken(
                sub,
                "transport is closing".into(),
            )))?;
        }
        self.feed(Input::Connection(ConnectionFact::Unreachable(
            "connection refused".into(),
        )))?;
        Ok(())
    }

    /// containerd is back.
    pub(crate) fn containerd_up(&mut self) -> Result<(), TestCaseError> {
        self.world.containerd.up = true;
        self.feed(Input::Connection(ConnectionFact::Connected))?;
        Ok(())
    }
}
