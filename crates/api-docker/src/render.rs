//! How dockerd writes times, durations and states, which clients parse.

use holdfast_core::WallTime;
use std::time::Duration;

/// Go's zero time, what dockerd shows for "never".
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Go's `time.RFC3339Nano` in UTC: trailing zeros of the fraction dropped
/// (the logger writes all nine digits; dockerd's API does not).
pub fn time(t: WallTime) -> String {
    holdfast_rfc3339::format_nanos_go(t.as_unix_nanos())
}

/// An optional time, or Go's zero time.
pub fn time_or_zero(t: Option<WallTime>) -> String {
    t.map_or_else(|| ZERO_TIME.to_owned(), time)
}

/// go-units' `HumanDuration`, which `docker ps` shows.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 1 {
        return "Less than a second".to_owned();
    }
    if seconds == 1 {
        return "1 second".to_owned();
    }
    if seconds < 60 {
        return format!("{seconds} seconds");
    }
    let minutes = seconds / 60;
    if minutes == 1 {
        return "About a minute".to_owned();
    }
    if minutes < 60 {
        return format!("{minutes} minutes");
    }
    let hours = (d.as_secs_f64() / 3600.0 + 0.5) as u64;
    if hours == 1 {
        return "About an hour".to_owned();
    }
    if hours < 48 {
        return format!("{hours} hours");
    }
    if hours < 24 * 7 * 2 {
        return format!("{} days", hours / 24);
    }
    if hours < 24 * 30 * 2 {
        return format!("{} weeks", hours / 24 / 7);
    }
    if hours < 24 * 365 * 2 {
        return format!("{} months", hours / 24 / 30);
    }
    format!("{} years", seconds / 3600 / 24 / 365)
}

/// A time given by a client (`since`, `until`): Unix seconds with an
/// optional fraction (`1700000000.5`), as the CLI sends them, or RFC 3339.
pub fn parse_client_time(text: &str) -> Option<WallTime> {
    if let Some(t) = parse_unix(text) {
        return Some(t);
    }
    parse_rfc3339(text)
}

fn parse_unix(text: &str) -> Option<WallTime> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) || secs.len() > 12 {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: i64 = secs.parse().ok()?;
    let nanos: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    Some(WallTime::from_unix_nanos(
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)?,
    ))
}

/// `YYYY-MM-DDTHH:MM:SS[.frac]Z`, as the log records carry it.
pub fn parse_rfc3339(text: &str) -> Option<WallTime> {
    let nanos = holdfast_rfc3339::parse_nanos(text)?;
    i64::try_from(nanos).ok().map(WallTime::from_unix_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_render_like_go() {
        assert_eq!(time(WallTime::from_unix_nanos(0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            time(WallTime::from_unix_nanos(1_700_000_000_120_000_000)),
            "2023-11-14T22:13:20.12Z"
        );
        assert_eq!(
            time(WallTime::from_unix_nanos(951_782_400_000_000_001)),
            "2000-02-29T00:00:00.000000001Z"
        );
        assert_eq!(time_or_zero(None), ZERO_TIME);
    }

    #[test]
    fn times_round_trip() {
        for n in [0, 1_700_000_000_120_000_000, 951_782_400_000_000_001] {
            let t = WallTime::from_unix_nanos(n);
            assert_eq!(parse_rfc3339(&time(t)), Some(t));
        }
    }

    #[test]
    fn client_times() {
        assert_eq!(
            parse_client_time("1700000000.5"),
            Some(WallTime::from_unix_nanos(1_700_000_000_500_000_000))
        );
        assert_eq!(
            parse_client_time("12"),
            Some(WallTime::from_unix_nanos(12_000_000_000))
        );
        assert_eq!(parse_client_time("10m"), None);
        assert_eq!(parse_client_time("1.1234567890"), None);
        assert_eq!(parse_client_time("99999999999999999999"), None);
    }

    #[test]
    fn durations_as_docker_ps_shows_them() {
        assert_eq!(
            human_duration(Duration::from_millis(300)),
            "Less than a second"
        );
        assert_eq!(human_duration(Duration::from_secs(1)), "1 second");
        assert_eq!(human_duration(Duration::from_secs(59)), "59 seconds");
        assert_eq!(human_duration(Duration::from_secs(61)), "About a minute");
        assert_eq!(human_duration(Duration::from_secs(180)), "3 minutes");
        assert_eq!(human_duration(Duration::from_secs(3600)), "About an hour");
        assert_eq!(human_duration(Duration::from_secs(5 * 3600)), "5 hours");
        assert_eq!(human_duration(Duration::from_secs(3 * 86_400)), "3 days");
    }
}
