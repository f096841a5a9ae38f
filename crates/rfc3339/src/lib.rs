//! # holdfast-rfc3339
//!
//! RFC 3339 times in UTC, the one formatter and parser of holdfast: the
//! logger writes them in every record of the json-file log, the engine
//! reads them back to filter logs, the Docker API shows them, and the
//! end-to-end suites read what the API showed. Days and dates by Howard
//! Hinnant's algorithms; no clock is read here.

/// `seconds` and `nanos` since the epoch as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`,
/// all nine digits of the fraction: the form the logger writes (and Docker
/// prints with `--timestamps`).
pub fn format(seconds: i64, nanos: u32) -> String {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// Unix nanoseconds as [`format`] writes them.
pub fn format_nanos(unix_nanos: i64) -> String {
    format(
        unix_nanos.div_euclid(1_000_000_000),
        // Below 10^9: it fits.
        unix_nanos.rem_euclid(1_000_000_000) as u32,
    )
}

/// Unix nanoseconds as Go's `time.RFC3339Nano` writes them in UTC: the
/// trailing zeros of the fraction dropped, and the fraction with them when
/// nothing is left (the Docker API's form, which clients parse).
pub fn format_nanos_go(unix_nanos: i64) -> String {
    let full = format_nanos(unix_nanos);
    match full.strip_suffix('Z').and_then(|s| s.split_once('.')) {
        Some((whole, fraction)) => {
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                format!("{whole}Z")
            } else {
                format!("{whole}.{fraction}Z")
            }
        }
        None => full,
    }
}

/// Unix nanoseconds of an RFC 3339 time (`2024-01-02T03:04:05.123456789Z`,
/// any number of fraction digits, `Z` or a `±HH:MM` offset), or `None` when
/// it is not one. Wide enough for Go's zero time (`0001-01-01T00:00:00Z`).
pub fn parse_nanos(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let num = |from: usize, to: usize| -> Option<i64> {
        let digits = b.get(from..to)?;
        digits.iter().try_fold(0i64, |acc, d| {
            d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
        })
    };
    let sep = |at: usize, ok: &[u8]| b.get(at).is_some_and(|c| ok.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hour, minute, second) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(d - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if b.len() == i + 1 => 0,
        Some(sign @ (b'+' | b'-')) if b.len() == i + 6 && sep(i + 3, b":") => {
            let (h, m) = (num(i + 1, i + 3)?, num(i + 4, i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return None,
    };
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2024-01-02T03:04:05.123456789Z.
    const BASE: i128 = 1_704_164_645_123_456_789;

    #[test]
    fn times_format_with_every_digit() {
        assert_eq!(format(0, 0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(format(1_700_000_000, 5), "2023-11-14T22:13:20.000000005Z");
        assert_eq!(format(951_782_400, 0), "2000-02-29T00:00:00.000000000Z");
        assert_eq!(
            format_nanos(1_700_000_000_000_000_005),
            "2023-11-14T22:13:20.000000005Z"
        );
        assert_eq!(format_nanos(-1), "1969-12-31T23:59:59.999999999Z");
    }

    #[test]
    fn times_format_like_go() {
        assert_eq!(format_nanos_go(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_nanos_go(1_700_000_000_120_000_000),
            "2023-11-14T22:13:20.12Z"
        );
        assert_eq!(
            format_nanos_go(951_782_400_000_000_001),
            "2000-02-29T00:00:00.000000001Z"
        );
    }

    #[test]
    fn times_parse() {
        assert_eq!(parse_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_nanos("2024-01-02T03:04:05.123456789Z"), Some(BASE));
        assert_eq!(
            parse_nanos("2024-01-02T03:04:05.1234Z"),
            Some(BASE - 56_789)
        );
        assert_eq!(
            parse_nanos("2024-01-02T04:04:05.123456789+01:00"),
            Some(BASE)
        );
        assert_eq!(
            parse_nanos("2024-01-02T02:34:05.123456789-00:30"),
            Some(BASE)
        );
        assert_eq!(parse_nanos("1969-12-31T23:59:59.999999999Z"), Some(-1));
        assert_eq!(
            parse_nanos("2000-02-29T00:00:00.0000000001Z"),
            Some(951_782_400_000_000_000)
        );
        assert_eq!(
            parse_nanos("0001-01-01T00:00:00Z"),
            Some(-62_135_596_800 * 1_000_000_000)
        );
        for bad in [
            "",
            "yesterday",
            "2024-01-02",
            "2024-01-02T03:04:05",
            "2024-01-02T03:04:05.Z",
            "2024-13-02T03:04:05Z",
            "2023-02-29T03:04:05Z",
            "2024-01-02T24:04:05Z",
            "2024-01-02T03:04:05Zx",
            "2024-01-02T03:04:05+0100",
            "2024-01-0aT03:04:05Z",
            "２024-01-02T03:04:05Z",
        ] {
            assert_eq!(parse_nanos(bad), None, "{bad}");
        }
    }

    #[test]
    fn what_is_written_reads_back() {
        for t in [
            0,
            BASE as i64,
            -1,
            1_700_000_000_000_000_005,
            4_102_444_800_999_999_999,
        ] {
            assert_eq!(parse_nanos(&format_nanos(t)), Some(i128::from(t)));
            assert_eq!(parse_nanos(&format_nanos_go(t)), Some(i128::from(t)));
        }
    }
}
