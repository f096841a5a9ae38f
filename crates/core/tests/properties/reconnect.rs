//! Reconnects back off, start over when healthy, and are spread.

use crate::support;
use holdfast_core::*;
use std::time::Duration;

/// Drives a fresh core (seed `seed`) through `failures` failed connects,
/// then a good one, `healthy` of connected time and a broken stream;
/// returns the delay before its next connect attempt.
pub(crate) fn reconnect_delay_after(seed: u64, failures: u32, healthy: Duration) -> Duration {
    let mut now = Now::new(Instant::ZERO, WallTime::from_unix_nanos(support::WALL0));
    let mut core = Core::new(CoreConfig::default(), seed, now);
    core.handle_input(now, Input::Restore(Vec::new().into()));
    let subscribe = |core: &mut Core, now: &mut Now| -> Option<OpId> {
        let (at, _) = core.poll_timeout()?;
        *now = Now::new(at.max(now.at), now.wall);
        core.handle_input(*now, Input::Timeout);
        core.drain_actions().into_iter().find_map(|a| match a {
            Action::Call {
                op,
                call: holdfast_core::Call::Subscribe,
            } => Some(op),
            _ => None,
        })
    };
    for _ in 0..failures {
        let Some(op) = subscribe(&mut core, &mut now) else {
            return Duration::MAX;
        };
        let failure = Failure::new(FailureKind::Unavailable, "refused");
        core.handle_input(now, Input::ActionResult(op, Err(failure)));
    }
    let Some(op) = subscribe(&mut core, &mut now) else {
        return Duration::MAX;
    };
    core.handle_input(now, Input::Connection(ConnectionFact::StreamLive(op)));
    let relist = core.drain_actions().into_iter().find_map(|a| match a {
        Action::Call {
            op,
            call: holdfast_core::Call::Relist,
        } => Some(op),
        _ => None,
    });
    let Some(relist) = relist else {
        return Duration::MAX;
    };
    core.handle_input(now, Input::Relist(relist, RelistPart::Begin));
    core.handle_input(now, Input::Relist(relist, RelistPart::End));
    now = Now::new(now.at + healthy, now.wall);
    core.handle_input(
        now,
        Input::Connection(ConnectionFact::StreamBroken(op, "eof".into())),
    );
    core.poll_timeout()
        .filter(|(_, kind)| *kind == TimerKind::Reconnect)
        .map_or(Duration::MAX, |(at, _)| at.saturating_since(now.at))
}
