//! The connection to containerd: subscribe, wait for a live stream, relist,
//! and only then act; back off with jitter between attempts.
//!
//! A connection fact is never evidence about a container. All it does here is
//! decide whether the core may act, and trigger the relist that finds out
//! what really happened while it could not see.

use crate::ids::OpId;
use crate::input::{ConnectionFact, FailureKind};
use crate::relist::RelistRun;
use crate::time::Instant;
use crate::{Call, Core, OpOwner, TimerKind};
use std::time::Duration;

/// How soon to relist again after a relist that could not vouch for a task.
const RELIST_SOON: Duration = Duration::from_secs(1);

/// The connection as a user (or a test) sees it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ConnectionState {
    /// Waiting to retry after a failure (or before the first attempt).
    Down,
    /// A subscription was asked for; waiting for it to be live.
    Subscribing,
    /// Events flow; the relist that recovers what was missed is running.
    Relisting,
    /// Events flow and the state was relisted: the core acts.
    Ready,
}

#[derive(Debug, Default)]
pub(crate) struct Connection {
    pub(crate) phase: Phase,
    /// Consecutive failed attempts, for the backoff.
    attempts: u32,
}

#[derive(Debug, Default)]
pub(crate) enum Phase {
    #[default]
    Down,
    Subscribing {
        subscription: OpId,
    },
    Relisting {
        subscription: OpId,
        relist: RelistRun,
    },
    Ready {
        subscription: OpId,
        since: Instant,
        /// A relist asked for while ready (a call found the state other than
        /// believed), and whether another is wanted after it.
        refresh: Option<RelistRun>,
        refresh_again: bool,
    },
}

impl Connection {
    pub(crate) fn state(&self) -> ConnectionState {
        match self.phase {
            Phase::Down => ConnectionState::Down,
            Phase::Subscribing { .. } => ConnectionState::Subscribing,
            Phase::Relisting { .. } => ConnectionState::Relisting,
            Phase::Ready { .. } => ConnectionState::Ready,
        }
    }

    pub(crate) fn is_ready(&self) -> bool {
        matches!(self.phase, Phase::Ready { .. })
    }

    fn subscription(&self) -> Option<OpId> {
        match self.phase {
            Phase::Down => None,
            Phase::Subscribing { subscription }
            | Phase::Relisting { subscription, .. }
            | Phase::Ready { subscription, .. } => Some(subscription),
        }
    }
}

impl Core {
    pub(crate) fn connection_fact(&mut self, fact: ConnectionFact) {
        match fact {
            ConnectionFact::Connected => {
                // containerd answers again: do not sit out the backoff.
                if matches!(self.conn.phase, Phase::Down) {
                    self.out.timers.set(TimerKind::Reconnect, self.out.now.at);
                }
            }
            ConnectionFact::StreamLive(op) => {
                // Live answers the subscribe call, current or stale.
                self.out.ops.remove(&op);
                if let Phase::Subscribing { subscription } = self.conn.phase
                    && subscription == op
                {
                    if bug!(self.config, SkipRelistAfterReconnect) {
                        self.become_ready(op);
                    } else {
                        let relist = self.start_relist();
                        self.conn.phase = Phase::Relisting {
                            subscription: op,
                            relist,
                        };
                    }
                }
            }
            ConnectionFact::StreamBroken(op, _reason) => {
                if self.conn.subscription() == Some(op) {
                    self.out.ops.remove(&op);
                    if bug!(self.config, StreamErrorIsExit) {
                        self.record_exit_of_all_running_for_bug();
                    }
                    self.lose_connection();
                }
            }
            ConnectionFact::Unreachable(_reason) => self.lose_connection(),
        }
    }

    /// The subscription or the relist failed, a call found containerd away,
    /// or the stream broke: stop acting and try again after a backoff.
    pub(crate) fn lose_connection(&mut self) {
        match std::mem::take(&mut self.conn.phase) {
            Phase::Down => {
                // Already waiting; keep the armed retry.
                return;
            }
            Phase::Ready { since, .. } => {
                if self.out.now.at.saturating_since(since) >= self.config.reconnect_reset_after {
                    self.conn.attempts = 0;
                }
            }
            Phase::Subscribing { .. } | Phase::Relisting { .. } => {}
        }
        for c in self.containers.values_mut() {
            c.confirmed = false;
            if bug!(self.config, KillOnDisconnect)
                && c.is_running()
                && !c.rec.intents.kills.contains(&crate::Signal::SIGKILL)
            {
                c.rec.intents.kills.push(crate::Signal::SIGKILL);
            }
        }
        let delay = self.reconnect_delay();
        self.conn.attempts = self.conn.attempts.saturating_add(1);
        self.out
            .timers
            .set(TimerKind::Reconnect, self.out.now.at + delay);
    }

    /// Backoff doubling from `reconnect_initial` to `reconnect_max`, with
    /// jitter of ±`reconnect_jitter_percent` from the seeded RNG.
    fn reconnect_delay(&mut self) -> Duration {
        let base = self
            .config
            .reconnect_initial
            .saturating_mul(1u32 << self.conn.attempts.min(20))
            .min(self.config.reconnect_max);
        let base_ns = u64::try_from(base.as_nanos()).unwrap_or(u64::MAX);
        let spread = base_ns / 100 * u64::from(self.config.reconnect_jitter_percent.min(100));
        let jittered = base_ns - spread + self.rng.below_inclusive(spread.saturating_mul(2));
        Duration::from_nanos(jittered)
    }

    pub(crate) fn reconnect_due(&mut self) {
        if !matches!(self.conn.phase, Phase::Down) {
            return;
        }
        let subscription = self.out.call(OpOwner::Connection, Call::Subscribe);
        self.conn.phase = Phase::Subscribing { subscription };
    }

    pub(crate) fn start_relist(&mut self) -> RelistRun {
        RelistRun::new(self.out.call(OpOwner::Connection, Call::Relist))
    }

    /// Asks for a relist while ready: a call found containerd's state other
    /// than the core believed (NotFound, an ambiguous timeout).
    pub(crate) fn request_refresh(&mut self) {
        let need_new = match &mut self.conn.phase {
            Phase::Ready {
                refresh: Some(_),
                refresh_again,
                ..
            } => {
                *refresh_again = true;
                false
            }
            Phase::Ready { refresh: None, .. } => true,
            // A relist is coming anyway.
            _ => false,
        };
        if need_new {
            let run = self.start_relist();
            if let Phase::Ready { refresh, .. } = &mut self.conn.phase {
                *refresh = Some(run);
            }
        }
    }

    pub(crate) fn become_ready(&mut self, subscription: OpId) {
        self.conn.phase = Phase::Ready {
            subscription,
            since: self.out.now.at,
            refresh: None,
            refresh_again: false,
        };
        self.arm_periodic_relist();
        self.reconcile_all();
        self.ever_ready = true;
        // The creates that waited for the first connection go ahead.
        // Each keeps the bound it was given when asked: the wait counts.
        for (req, id, name, config) in std::mem::take(&mut self.held_creates) {
            let bound = TimerKind::AnswerBound(req);
            let deadline = self
                .out
                .timers
                .iter()
                .find(|(_, kind)| *kind == bound)
                .map(|(at, _)| *at);
            self.out.timers.cancel(&bound);
            self.create(req, id, name, config);
            if let Some(at) = deadline
                && self.out.request_owner.contains_key(&req)
            {
                self.out.timers.set(bound, at);
            }
        }
    }

    fn arm_periodic_relist(&mut self) {
        if let Some(interval) = self.config.relist_interval {
            let at = self.out.now.at + interval;
            self.out.timers.set(TimerKind::PeriodicRelist, at);
        }
    }

    /// A relist left something unknown (a shim that did not answer): look
    /// again shortly, not only at the next periodic relist.
    pub(crate) fn relist_soon(&mut self) {
        let at = self.out.now.at + RELIST_SOON;
        self.out.timers.set(TimerKind::PeriodicRelist, at);
    }

    pub(crate) fn periodic_relist_due(&mut self) {
        // Down, the reconnect relists anyway; it re-arms this when ready.
        if self.conn.is_ready() {
            self.request_refresh();
            self.arm_periodic_relist();
        }
    }

    /// A failed subscribe or relist call. A relist that found no answer
    /// within its deadline is asked again on the live subscription: it
    /// read nothing, containerd is there but slow (under load, or past a
    /// shim that does not answer), and dropping the connection for it
    /// would only relist again behind a backoff, answering meanwhile every
    /// request as if containerd were away. Any other failure drops it.
    pub(crate) fn connection_call_failed(&mut self, op: OpId, kind: FailureKind) {
        let slow = kind == FailureKind::Deadline;
        match &self.conn.phase {
            Phase::Subscribing { subscription } if *subscription == op => {}
            Phase::Relisting { relist, .. } if relist.op == op => {
                if slow {
                    let again = self.start_relist();
                    if let Phase::Relisting { relist, .. } = &mut self.conn.phase {
                        *relist = again;
                    }
                    return;
                }
            }
            Phase::Ready {
                refresh: Some(run), ..
            } if run.op == op => {
                if slow {
                    if let Phase::Ready { refresh, .. } = &mut self.conn.phase {
                        *refresh = None;
                    }
                    self.request_refresh();
                    return;
                }
            }
            _ => return,
        }
        self.lose_connection();
    }
}
