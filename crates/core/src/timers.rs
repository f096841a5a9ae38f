//! Every timer of the core in one table; the next deadline is its minimum.

use crate::Map;
use crate::ids::{ContainerId, RequestId};
use crate::time::Instant;
use std::collections::BTreeSet;

/// Why the core wants to be woken. Returned with the deadline by
/// [`crate::Core::poll_timeout`] so a caller can log the reason.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum TimerKind {
    /// Try to (re)connect: subscribe, then relist.
    Reconnect,
    /// The periodic relist while connected is due.
    PeriodicRelist,
    /// A stop's grace period ends: SIGKILL if the exit was not observed.
    StopDeadline(ContainerId),
    /// A restart policy's backoff ends: start the container again.
    RestartBackoff(ContainerId),
    /// Retry a failed action on this container.
    Retry(ContainerId),
    /// A create rolled back after a restart may be deleted: the create
    /// the daemon before had under way can no longer land.
    RollbackDue(ContainerId),
    /// Retry a failed make or removal of this volume.
    VolumeRetry(String),
    /// Retry a failed definition or removal of this user network.
    NetworkRetry(String),
    /// A request's answer is due even if what it asked for is not done yet.
    AnswerBound(RequestId),
    /// The container's next health probe is due (or its probe in flight is
    /// overdue).
    Probe(ContainerId),
}

#[derive(Debug, Default)]
pub(crate) struct Timers {
    by_deadline: BTreeSet<(Instant, TimerKind)>,
    by_kind: Map<TimerKind, Instant>,
}

impl Timers {
    /// Arms `kind` at `at`, replacing an earlier arming of the same kind.
    pub(crate) fn set(&mut self, kind: TimerKind, at: Instant) {
        if let Some(old) = self.by_kind.insert(kind.clone(), at) {
            self.by_deadline.remove(&(old, kind.clone()));
        }
        self.by_deadline.insert((at, kind));
    }

    pub(crate) fn cancel(&mut self, kind: &TimerKind) {
        if let Some(old) = self.by_kind.remove(kind) {
            self.by_deadline.remove(&(old, kind.clone()));
        }
    }

    pub(crate) fn next(&self) -> Option<&(Instant, TimerKind)> {
        self.by_deadline.first()
    }

    /// Every armed timer, earliest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &(Instant, TimerKind)> {
        self.by_deadline.iter()
    }

    /// Removes and returns the earliest timer due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<TimerKind> {
        let (at, _) = self.by_deadline.first()?;
        if *at > now {
            return None;
        }
        let (_, kind) = self.by_deadline.pop_first()?;
        self.by_kind.remove(&kind);
        Some(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rearming_replaces_and_due_timers_pop_in_order() {
        let mut timers = Timers::default();
        let t = Instant::from_nanos;
        timers.set(TimerKind::Reconnect, t(50));
        timers.set(TimerKind::AnswerBound(RequestId(1)), t(20));
        timers.set(TimerKind::Reconnect, t(10));
        assert_eq!(timers.next(), Some(&(t(10), TimerKind::Reconnect)));
        assert_eq!(timers.pop_due(t(5)), None);
        assert_eq!(timers.pop_due(t(30)), Some(TimerKind::Reconnect));
        assert_eq!(
            timers.pop_due(t(30)),
            Some(TimerKind::AnswerBound(RequestId(1)))
        );
        assert_eq!(timers.pop_due(t(100)), None);
        timers.set(TimerKind::Reconnect, t(1));
        timers.cancel(&TimerKind::Reconnect);
        assert!(timers.next().is_none());
    }
}
