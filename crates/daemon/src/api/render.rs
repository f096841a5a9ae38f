//! How dockerd writes times, durations and states, which clients parse.

use holdfast_core::WallTime;
use std::time::Duration;

/// Go's zero time, what dockerd shows for "never".
pub const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Go's `time.RFC3339Nano` in UTC: trailing zeros of the fraction dropped.
pub fn time(t: WallTime) -> String {
    let nanos = t.as_unix_nanos();
    let secs = nanos.div_euclid(1_000_000_000);
    let frac = nanos.rem_euclid(1_000_000_000);
    let (y, mo, d, h, mi, s) = civil(secs);
    let mut out = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if frac != 0 {
        let digits = format!("{frac:09}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// An optional time, or Go's zero time.
pub fn time_or_zero(t: Option<WallTime>) -> String {
    t.map_or_else(|| ZERO_TIME.to_owned(), time)
}

/// Unix seconds to (year, month, day, hour, minute, second), proleptic
/// Gregorian (Howard Hinnant's civil-from-days).
fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
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

/// `YYYY-MM-DDTHH:MM:SS[.frac]Z` (UTC only).
pub fn parse_rfc3339(text: &str) -> Option<WallTime> {
    let text = text.strip_suffix('Z')?;
    let (date, clock) = text.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut c = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (c.next()??, c.next()??, c.next()??);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&day) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let nanos: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    // days-from-civil
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s;
    Some(WallTime::from_unix_nanos(
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)?,
    ))
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
