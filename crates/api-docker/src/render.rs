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

/// A time given by a client (`since`, `until`), read as dockerd reads it
/// (its `timetypes.GetTimestamp`): a Go duration before `now` (`10m`,
/// `1h30m`), Unix seconds with an optional fraction (`1700000000.5`, what
/// the CLI sends), or RFC 3339 in full or cut short (`2024-01-02`,
/// `2024-01-02T15`, `2024-01-02T15:04`, with or without a zone; one
/// without a zone is read as UTC, the host's time in holdfast's setting).
pub fn parse_client_time(text: &str, now: WallTime) -> Option<WallTime> {
    if text != "0"
        && let Some(before) = parse_go_duration(text)
    {
        let at = i128::from(now.as_unix_nanos()) - before;
        return i64::try_from(at).ok().map(WallTime::from_unix_nanos);
    }
    if let Some(t) = parse_unix(text) {
        return Some(t);
    }
    parse_rfc3339(&completed_rfc3339(text)?)
}

/// A date or date-time cut short, completed into full RFC 3339 (midnight,
/// whole hours and minutes; UTC when it names no zone).
fn completed_rfc3339(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let zone_at = if b.last().is_some_and(|c| matches!(c, b'Z' | b'z')) {
        b.len() - 1
    } else if b.len() >= 16 && matches!(b[b.len() - 6], b'+' | b'-') && b[b.len() - 3] == b':' {
        b.len() - 6
    } else {
        b.len()
    };
    let (base, zone) = (text.get(..zone_at)?, text.get(zone_at..)?);
    let zone = if zone.is_empty() { "Z" } else { zone };
    let base = match base.len() {
        10 => format!("{base}T00:00:00"),
        13 => format!("{base}:00:00"),
        16 => format!("{base}:00"),
        _ => base.to_owned(),
    };
    Some(format!("{base}{zone}"))
}

/// Go's `time.ParseDuration`: `[-+]` then one or more of a decimal number
/// and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`); in nanoseconds.
fn parse_go_duration(text: &str) -> Option<i128> {
    let (sign, mut rest) = match text.as_bytes().first()? {
        b'-' => (-1, &text[1..]),
        b'+' => (1, &text[1..]),
        _ => (1, text),
    };
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return None;
        }
        let (unit, per_unit): (&str, i128) = [
            ("ns", 1),
            ("us", 1_000),
            ("µs", 1_000),
            ("ms", 1_000_000),
            ("s", 1_000_000_000),
            ("m", 60_000_000_000),
            ("h", 3_600_000_000_000),
        ]
        .into_iter()
        // `ms` before `m`: the longest unit that matches.
        .filter(|(u, _)| tail.starts_with(u))
        .max_by_key(|(u, _)| u.len())?;
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if !fraction.bytes().all(|d| d.is_ascii_digit()) {
            return None;
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut nanos = whole.checked_mul(per_unit)?;
        let mut scale = per_unit;
        for d in fraction.bytes() {
            scale /= 10;
            nanos = nanos.checked_add(i128::from(d - b'0') * scale)?;
        }
        total = total.checked_add(nanos)?;
        rest = &tail[unit.len()..];
    }
    Some(sign * total)
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
    fn client_times_read_as_dockerd_reads_them() {
        let now = WallTime::from_unix_nanos(1_700_000_000_000_000_000);
        let at = |text: &str| parse_client_time(text, now).map(WallTime::as_unix_nanos);
        let secs = |s: i64| Some(s * 1_000_000_000);
        assert_eq!(at("1700000000.5"), Some(1_700_000_000_500_000_000));
        assert_eq!(at("12"), secs(12));
        assert_eq!(at("0"), secs(0));
        // Go durations before now.
        assert_eq!(at("10m"), secs(1_700_000_000 - 600));
        assert_eq!(at("1h30m"), secs(1_700_000_000 - 5400));
        assert_eq!(at("1.5h"), secs(1_700_000_000 - 5400));
        assert_eq!(at("-1s"), secs(1_700_000_001));
        assert_eq!(at("250ms"), Some(1_699_999_999_750_000_000));
        // RFC 3339 in full and cut short; UTC without a zone.
        assert_eq!(at("2023-11-14T22:13:20Z"), secs(1_700_000_000));
        assert_eq!(at("2023-11-14T22:13:20+01:00"), secs(1_700_000_000 - 3600));
        assert_eq!(at("2023-11-14T22:13:20"), secs(1_700_000_000));
        assert_eq!(at("2023-11-14T22:13"), secs(1_700_000_000 - 20));
        assert_eq!(at("2023-11-14T22"), secs(1_700_000_000 - 13 * 60 - 20));
        assert_eq!(at("2023-11-14"), secs(1_699_920_000));
        for bad in [
            "soon",
            "1.1234567890",
            "99999999999999999999",
            "10x",
            "1.2.3s",
            "h",
            "-",
            "2023-13-01",
            "2023-11-14T",
            "ä",
        ] {
            assert_eq!(at(bad), None, "{bad}");
        }
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
