//! Identifiers. Each is a newtype made once and validated at the boundary.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A container's id: 1 to 128 characters of `[A-Za-z0-9_.-]`, starting with an
/// alphanumeric. The daemon generates 64 lowercase hex digits, as dockerd does;
/// containerd uses the same string for the container and its init task.
/// Shared, so the many copies in timers, actions and events cost no allocation.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ContainerId(Arc<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid container id {0:?}: want 1 to 128 of [A-Za-z0-9_.-], starting alphanumeric")]
pub struct InvalidContainerId(pub String);

impl ContainerId {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ContainerId {
    type Err = InvalidContainerId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        let starts_alnum = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        if s.len() <= 128 && starts_alnum && s.chars().all(valid_char) {
            Ok(ContainerId(Arc::from(s)))
        } else {
            Err(InvalidContainerId(s.to_owned()))
        }
    }
}

impl TryFrom<String> for ContainerId {
    type Error = InvalidContainerId;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<ContainerId> for String {
    fn from(id: ContainerId) -> String {
        id.0.to_string()
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContainerId({})", self.0)
    }
}

macro_rules! numeric_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub u64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = std::num::ParseIntError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.strip_prefix($prefix).unwrap_or(s).parse().map($name)
            }
        }
    };
}

numeric_id!(
    /// Names one action the core issued; the caller echoes it with the result.
    /// Allocated by the core, strictly increasing, never reused within a core's life.
    OpId,
    "op"
);

numeric_id!(
    /// Names one user request; allocated by the caller (the API layer), answered
    /// by the core exactly once.
    RequestId,
    "req"
);

impl RequestId {
    /// The first id of the requests the core makes itself (a pod's stop
    /// asking each of its containers to stop): callers count up from 1 and
    /// never reach it. Their answers go to nobody.
    pub const FIRST_INTERNAL: u64 = 1 << 63;

    /// Made by the core for itself, not by a caller.
    pub fn is_internal(self) -> bool {
        self.0 >= Self::FIRST_INTERNAL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_id_validation() {
        assert!("abc".parse::<ContainerId>().is_ok());
        assert!("a-b_c.d9".parse::<ContainerId>().is_ok());
        assert!("".parse::<ContainerId>().is_err());
        assert!("-abc".parse::<ContainerId>().is_err());
        assert!("a/b".parse::<ContainerId>().is_err());
        assert!("x".repeat(129).parse::<ContainerId>().is_err());
    }

    #[test]
    fn numeric_ids_round_trip() {
        assert_eq!("op7".parse::<OpId>(), Ok(OpId(7)));
        assert_eq!(OpId(7).to_string(), "op7");
        assert_eq!("12".parse::<RequestId>(), Ok(RequestId(12)));
    }
}
