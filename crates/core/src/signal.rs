//! Linux signals as users name them (`SIGTERM`, `TERM`, `15`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A signal number, 1 to 64. Parsed once at the boundary.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u32", into = "u32")]
pub struct Signal(u8);

const NAMES: [(&str, u8); 31] = [
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

impl Signal {
    pub const SIGKILL: Signal = Signal(9);
    pub const SIGTERM: Signal = Signal(15);

    pub const fn number(self) -> u32 {
        self.0 as u32
    }

    /// `SIGTERM` for known signals, the number otherwise (real-time signals).
    pub fn name(self) -> Option<&'static str> {
        NAMES
            .iter()
            .find(|(_, n)| *n == self.0)
            .map(|(name, _)| *name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid signal {0:?}: want a name like SIGTERM or TERM, or a number 1 to 64")]
pub struct InvalidSignal(pub String);

impl FromStr for Signal {
    type Err = InvalidSignal;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidSignal(s.to_owned());
        if let Ok(n) = s.parse::<u32>() {
            return Signal::try_from(n).map_err(|_| invalid());
        }
        let upper = s.to_ascii_uppercase();
        let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
        NAMES
            .iter()
            .find(|(name, _)| *name == bare)
            .map(|(_, n)| Signal(*n))
            .ok_or_else(invalid)
    }
}

impl TryFrom<u32> for Signal {
    type Error = InvalidSignal;
    fn try_from(n: u32) -> Result<Self, Self::Error> {
        match u8::try_from(n) {
            Ok(n @ 1..=64) => Ok(Signal(n)),
            _ => Err(InvalidSignal(n.to_string())),
        }
    }
}

impl From<Signal> for u32 {
    fn from(s: Signal) -> u32 {
        s.number()
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "SIG{name}"),
            None => write!(f, "{}", self.0),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_numbers() {
        assert_eq!("SIGTERM".parse(), Ok(Signal::SIGTERM));
        assert_eq!("term".parse(), Ok(Signal::SIGTERM));
        assert_eq!("9".parse(), Ok(Signal::SIGKILL));
        assert_eq!("SIGRTMIN".parse::<Signal>().map(|s| s.number()).ok(), None);
        assert!("0".parse::<Signal>().is_err());
        assert!("65".parse::<Signal>().is_err());
        assert!("NOPE".parse::<Signal>().is_err());
        assert_eq!(Signal::SIGKILL.to_string(), "SIGKILL");
    }
}
