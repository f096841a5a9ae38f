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

/// A time as the CLI's `--since`/`--until` take it: `<seconds>.<nanos>`.
pub fn unix_nanos_arg(nanos: i128) -> String {
    format!(
        "{}.{:09}",
        nanos.div_euclid(1_000_000_000),
        nanos.rem_euclid(1_000_000_000)
    )
}

/// Parses `2024-05-01T12:34:56.123456789Z` (any fraction length, `Z` or a
/// `+hh:mm`/`-hh:mm` offset) into Unix nanoseconds. `None` when malformed.
pub fn parse_rfc3339_nanos(s: &str) -> Option<i128> {
    let s = s.trim();
    let (date, rest) = s.split_once('T')?;
    let mut d = date.split('-');
    let year: i64 = d.next()?.parse().ok()?;
    let month: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (clock, offset_secs) = if let Some(c) = rest.strip_suffix('Z') {
        (c, 0i64)
    } else {
        let at = rest.rfind(['+', '-'])?;
        let (c, off) = rest.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (h, m) = off[1..].split_once(':')?;
        let secs = h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60;
        (c, sign * secs)
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, f),
        None => (clock, ""),
    };
    let mut t = hms.split(':');
    let hour: i64 = t.next()?.parse().ok()?;
    let minute: i64 = t.next()?.parse().ok()?;
    let second: i64 = t.next()?.parse().ok()?;
    if t.next().is_some() || !fraction.chars().all(|c| c.is_ascii_digit()) || fraction.len() > 9 {
        return None;
    }
    let nanos: i64 = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<9}").parse().ok()?
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(secs as i128 * 1_000_000_000 + nanos as i128)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
