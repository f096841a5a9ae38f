//! A stream's idle clock: kubelet closes a streaming connection that has
//! carried nothing either way for its `--streaming-connection-idle-timeout`
//! (4 h by default), so that a forgotten `kubectl exec` or port-forward
//! does not hold its process and its connection for ever. Every byte
//! either way touches the clock; [`Idle::expired`] completes once the
//! limit has passed untouched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// See the module docs. `None` as a limit: never idle.
#[derive(Debug)]
pub(super) struct Idle {
    limit: Option<Duration>,
    /// When the clock was made; `last` counts from it.
    base: Instant,
    /// Nanoseconds after `base` of the last touch (an atomic: the
    /// session's futures are `Send`, and share the clock by reference).
    last: AtomicU64,
}

impl Idle {
    pub(super) fn new(limit: Option<Duration>) -> Idle {
        Idle {
            limit,
            base: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    /// Something went either way.
    pub(super) fn touch(&self) {
        let since = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last.fetch_max(since, Ordering::Relaxed);
    }

    fn last(&self) -> Instant {
        self.base + Duration::from_nanos(self.last.load(Ordering::Relaxed))
    }

    /// Completes once `limit` has passed since the last touch; never
    /// without a limit.
    pub(super) async fn expired(&self) {
        let Some(limit) = self.limit else {
            return std::future::pending().await;
        };
        loop {
            let due = self.last() + limit;
            if Instant::now() >= due {
                return;
            }
            tokio::time::sleep_until(due).await;
        }
    }

    /// What a client is told of a stream closed for being idle.
    pub(super) fn reason(&self) -> String {
        match self.limit {
            Some(limit) => format!("the stream was idle for {}s", limit.as_secs()),
            None => "the stream was idle".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn expires_only_once_the_limit_passes_untouched() {
        let idle = Idle::new(Some(Duration::from_secs(10)));
        tokio::time::sleep(Duration::from_secs(8)).await;
        idle.touch();
        let started = Instant::now();
        idle.expired().await;
        // ten seconds after the touch, not after the start
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_limit_it_never_expires() {
        let idle = Idle::new(None);
        let expired = tokio::time::timeout(Duration::from_secs(86_400), idle.expired()).await;
        assert!(expired.is_err());
    }
}
