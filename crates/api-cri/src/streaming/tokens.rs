//! The streaming server's requests in flight: what `Exec`, `Attach` and
//! `PortForward` asked, kept under a single-use token until kubelet (or
//! whoever it hands the URL to) connects, as kubelet's streaming contract
//! has it: a token is random, good once, and expires a minute after it was
//! given; at most a thousand wait at a time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a token waits for its connection (kubelet's request cache).
pub(crate) const TOKEN_TTL: Duration = Duration::from_secs(60);

/// How many tokens may wait at once; one more is refused.
pub(crate) const MAX_IN_FLIGHT: usize = 1000;

/// Why a token was not given.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// [`MAX_IN_FLIGHT`] tokens are waiting already.
    Full,
    /// The host gave no randomness.
    NoRandomness(String),
}

/// Tokens and what they stand for, each with its deadline.
#[derive(Debug)]
pub(crate) struct Tokens<T> {
    waiting: Mutex<HashMap<String, (T, Instant)>>,
}

impl<T> Default for Tokens<T> {
    fn default() -> Self {
        Tokens {
            waiting: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Tokens<T> {
    /// Keeps `request` under a new token, good until `now` + [`TOKEN_TTL`].
    pub(crate) fn insert(&self, request: T, now: Instant) -> Result<String, Refused> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| Refused::NoRandomness(e.to_string()))?;
        let token =
            base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes);
        let mut waiting = self.lock();
        waiting.retain(|_, (_, deadline)| *deadline > now);
        if waiting.len() >= MAX_IN_FLIGHT {
            return Err(Refused::Full);
        }
        waiting.insert(token.clone(), (request, now + TOKEN_TTL));
        Ok(token)
    }

    /// What `token` stands for, once: `None` when it was never given, has
    /// been used, or expired.
    pub(crate) fn take(&self, token: &str, now: Instant) -> Option<T> {
        let (request, deadline) = self.lock().remove(token)?;
        (deadline > now).then_some(request)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (T, Instant)>> {
        // A panic while held leaves nothing half-written: a map insert or
        // remove either happened or did not.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_token_is_good_once() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let t = tokens.insert("exec", now).unwrap();
        assert_eq!(tokens.take(&t, now), Some("exec"));
        assert_eq!(tokens.take(&t, now), None);
        assert_eq!(tokens.take("never-given", now), None);
    }

    #[test]
    fn a_token_expires() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let t = tokens.insert(1, now).unwrap();
        assert_eq!(tokens.take(&t, now + TOKEN_TTL), None);
        let t = tokens.insert(2, now).unwrap();
        assert_eq!(
            tokens.take(&t, now + TOKEN_TTL - Duration::from_millis(1)),
            Some(2)
        );
    }

    #[test]
    fn tokens_differ_and_are_url_safe() {
        let tokens = Tokens::default();
        let now = Instant::now();
        let a = tokens.insert((), now).unwrap();
        let b = tokens.insert((), now).unwrap();
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }

    #[test]
    fn at_most_so_many_wait_and_expired_ones_make_room() {
        let tokens = Tokens::default();
        let now = Instant::now();
        for i in 0..MAX_IN_FLIGHT {
            tokens.insert(i, now).unwrap();
        }
        assert_eq!(tokens.insert(0, now), Err(Refused::Full));
        assert!(tokens.insert(0, now + TOKEN_TTL).is_ok());
    }
}
