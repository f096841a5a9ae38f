//! Time enters the core only as input. Two clocks, because they answer
//! different questions:
//! - [`Instant`]: monotonic, for deadlines and backoff; never goes back.
//! - [`WallTime`]: what a user reads (`StartedAt`, `FinishedAt`) and what
//!   containerd reports (`exited_at`); it may jump, so no deadline uses it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, Sub};
use std::time::Duration;

/// A monotonic point in time, in nanoseconds from an origin the caller chose
/// (the daemon: its start; the simulator: zero).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);

    pub const fn from_nanos(nanos: u64) -> Instant {
        Instant(nanos)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{:.3}s", self.0 as f64 / 1e9)
    }
}

/// Wall-clock time as nanoseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct WallTime(i64);

impl WallTime {
    /// The Unix epoch; also what a record shows for "never".
    pub const UNIX_EPOCH: WallTime = WallTime(0);

    pub const fn from_unix_nanos(nanos: i64) -> WallTime {
        WallTime(nanos)
    }

    pub const fn as_unix_nanos(self) -> i64 {
        self.0
    }

    /// The time from `earlier` to `self`, zero if the wall clock went back.
    pub fn saturating_since(self, earlier: WallTime) -> Duration {
        Duration::from_nanos(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

impl fmt::Debug for WallTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wall:{}", self.0)
    }
}

/// What every input carries: both clocks, read once by the caller.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Now {
    pub at: Instant,
    pub wall: WallTime,
}

impl Now {
    pub const fn new(at: Instant, wall: WallTime) -> Now {
        Now { at, wall }
    }
}
