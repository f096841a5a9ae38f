//! Wall-clock times as the Docker API writes them (RFC 3339 with
//! nanoseconds) and as the CLI takes them (`<seconds>.<nanoseconds>`).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in Unix nanoseconds.
pub fn now_unix_nanos() -> i128 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    d.as_nanos() as i128
}

/// Parses `2024-05-01T12:34:56.123456789Z` (any fraction length, `Z` or a
/// `+hh:mm`/`-hh:mm` offset) into Unix nanoseconds. `None` when malformed.
pub fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    holdfast_rfc3339::parse_nanos(s.trim())
}

/// A time as the CLI's `--since`/`--until` take it: `<seconds>.<nanos>`.
pub fn unix_nanos_arg(nanos: i128) -> String {
    format!(
        "{}.{:09}",
        nanos.div_euclid(1_000_000_000),
        nanos.rem_euclid(1_000_000_000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_docker_times() {
        assert_eq!(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339_nanos("2024-05-01T12:34:56.123456789Z"),
            Some(1_714_566_896_123_456_789)
        );
        assert_eq!(
            parse_rfc3339_nanos("2024-05-01T14:34:56.5+02:00"),
            Some(1_714_566_896_500_000_000)
        );
        assert_eq!(
            parse_rfc3339_nanos("0001-01-01T00:00:00Z"),
            Some(-62_135_596_800 * 1_000_000_000)
        );
        assert_eq!(parse_rfc3339_nanos("yesterday"), None);
    }

    #[test]
    fn formats_cli_times() {
        assert_eq!(
            unix_nanos_arg(1_714_566_896_000_000_042),
            "1714566896.000000042"
        );
    }
}
