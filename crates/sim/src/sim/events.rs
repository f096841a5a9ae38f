//! The event bus: containerd publishes to the live stream, where an event
//! may be lost, delayed out of order, duplicated or delivered stale; a
//! shim retries an event while containerd is away; a second source
//! reports an exit again.

use super::{Ev, Sim, SimFailure, wall};
use crate::faults::FaultKind;
use holdfast_core::{ContainerdEvent, Input, Instant, OpId, WallTime};
use std::time::Duration;

/// When a shim retries publishing an exit while containerd is away; after
/// the last attempt (about 21 s) the event is dropped.
const SHIM_RETRY_SECS: [u64; 6] = [0, 1, 3, 6, 10, 15];

impl Sim {
    /// containerd publishes an event to its subscribers.
    pub(super) fn publish(&mut self, mut event: ContainerdEvent) {
        if !self.cd.up {
            return;
        }
        // The shim stamps the envelope when it first publishes.
        if let ContainerdEvent::TaskStart { published_at, .. } = &mut event {
            published_at.get_or_insert(wall(self.now));
        }
        let Some(op) = self.stream else { return };
        let target = Some((self.daemon, op));
        if self.take_fault(FaultKind::EventLost) {
            self.note(format!("FAULT event lost on a live stream: {event:?}"));
            self.checker.event_lost(&event, self.now);
            return;
        }
        let is_oom = matches!(event, ContainerdEvent::TaskOom { .. });
        let mut delay = self.rng_world.ms(0, 1).max(Duration::from_micros(300));
        // An OOM event carries no pid: delayed into a later run it would be
        // taken for that run's (see the report); keep it in order.
        if !is_oom && self.take_fault(FaultKind::EventReorder) {
            delay += self.rng_fault.ms(1, 500);
        }
        self.schedule(
            self.now + delay,
            Ev::Deliver {
                target,
                event: event.clone(),
            },
        );
        if self.take_fault(FaultKind::EventDuplicate) {
            let again = delay + self.rng_fault.ms(0, 50);
            self.schedule(
                self.now + again,
                Ev::Deliver {
                    target,
                    event: event.clone(),
                },
            );
        }
        if !is_oom && self.take_fault(FaultKind::EventStale) {
            let later = self.rng_fault.ms(5000, 60_000);
            self.schedule(
                self.now + later,
                Ev::Deliver {
                    target: None,
                    event,
                },
            );
        }
    }

    pub(super) fn deliver(
        &mut self,
        target: Option<(u64, OpId)>,
        event: ContainerdEvent,
    ) -> Result<(), SimFailure> {
        let Some(op) = self.stream else { return Ok(()) };
        if target.is_some_and(|t| t != (self.daemon, op)) {
            return Ok(());
        }
        self.checker.delivered(&event, &self.cd, self.now);
        self.feed(Input::Event(event.clone()))?;
        // A second source reports the exit again, differently: another
        // status, a later time. The first recorded must stand.
        if let ContainerdEvent::TaskExit {
            container,
            exec_id,
            pid,
            exit_status,
            exited_at,
            oom_kills,
        } = event
            && exec_id == container.as_str()
            && self.core.as_ref().is_some_and(|core| {
                core.container(&container)
                    .is_some_and(|v| v.record.pid == Some(pid) && v.current_exit().is_some())
            })
            // Only of the exit as it happened: a report again of a report
            // again would drift later each time, past the next task of a
            // reused pid (seeds 25076 and 43804 once did).
            && self
                .cd
                .truth
                .get(&pid)
                .and_then(|t| t.exit)
                .is_some_and(|(_, at)| at == exited_at)
            && self.take_fault(FaultKind::ExitReportedAgain)
        {
            let room_ns = u64::try_from(
                wall(self.now)
                    .as_unix_nanos()
                    .saturating_sub(exited_at.as_unix_nanos())
                    .saturating_sub(1),
            )
            .unwrap_or(0)
            .max(1);
            let later = self.rng_fault.ms(1, 3000);
            let other = if exit_status == 137 { 0 } else { 137 };
            let event = ContainerdEvent::TaskExit {
                container,
                exec_id,
                pid,
                exit_status: other,
                // Seen a little later by the other source, but before this
                // first report arrived: the death happened before it was
                // reported, so before any later task could reuse the pid.
                exited_at: WallTime::from_unix_nanos(exited_at.as_unix_nanos().saturating_add(
                    i64::try_from(self.rng_fault.below(room_ns.min(1_000_000))).unwrap_or(0) + 1,
                )),
                oom_kills,
            };
            self.schedule(
                self.now + later,
                Ev::Deliver {
                    target: None,
                    event,
                },
            );
        }
        Ok(())
    }

    /// The shim publishes through containerd, retrying while it is away.
    pub(super) fn shim_publish(
        &mut self,
        pid: u32,
        event: ContainerdEvent,
        exited: Instant,
        attempt: usize,
    ) {
        if self.cd.truth.get(&pid).is_some_and(|t| t.shim_died) {
            return;
        }
        if self.cd.up {
            self.publish(event);
            return;
        }
        match SHIM_RETRY_SECS.get(attempt + 1) {
            Some(secs) => {
                let at = exited + Duration::from_secs(*secs);
                self.schedule(
                    at,
                    Ev::ShimPublish {
                        pid,
                        event,
                        exited,
                        attempt: attempt + 1,
                    },
                );
            }
            None => self.note(format!("shim of pid {pid} drops {event:?}")),
        }
    }
}
