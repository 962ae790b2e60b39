//! Instants and durations as `reqstate keys` reads and prints them:
//! `--now`/`--at` (RFC 3339 or unix seconds), `--propagation`/`--every`/
//! `--grace` (`90s`, `5m`, `2h`, `30d` or plain seconds), and "in 4m 59s".

use std::str::FromStr as _;

/// Parses a duration: a whole number of seconds, optionally followed by one
/// unit, `s`, `m`, `h` or `d` (`90s`, `5m`, `2h`, `30d`, `300`).
pub fn parse_duration(flag: &str, text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "{flag} {text:?}: expected a whole number with an optional unit s, m, h or d \
             (90s, 5m, 2h, 30d, or plain seconds)"
        )
    };
    let trimmed = text.trim();
    let (digits, unit) = match trimmed.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => trimmed.split_at(i),
        None => (trimmed, ""),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let scale: u64 = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(scale)
        .filter(|&s| s <= MAX_INSTANT)
        .ok_or_else(|| format!("{flag} {text:?}: too long"))
}

/// The last instant accepted: 9999-12-31T23:59:59Z, the last a TOML
/// date-time (and so a keyring file) can write.
pub const MAX_INSTANT: u64 = 253_402_300_799;

/// Parses an instant: unix seconds, or an RFC 3339 date-time with an offset
/// in whole seconds (`2026-12-01T12:05:00Z`, `2026-12-01T13:05:00+01:00`).
pub fn parse_instant(flag: &str, text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return trimmed
            .parse::<u64>()
            .ok()
            .filter(|&t| t <= MAX_INSTANT)
            .ok_or_else(|| format!("{flag} {text:?}: out of range"));
    }
    let bad = |why: &str| {
        format!(
            "{flag} {text:?}: {why}; expected unix seconds or an RFC 3339 date-time such as \
             2026-12-01T12:05:00Z"
        )
    };
    let datetime = toml_edit::Datetime::from_str(trimmed).map_err(|_| bad("not a date-time"))?;
    let (Some(date), Some(time), Some(offset)) = (datetime.date, datetime.time, datetime.offset)
    else {
        return Err(bad(
            "a date, a time and an offset (Z or ±hh:mm) are all needed",
        ));
    };
    if time.nanosecond.is_some_and(|n| n != 0) {
        return Err(bad("instants are whole seconds"));
    }
    let offset_seconds = match offset {
        toml_edit::Offset::Z => 0,
        toml_edit::Offset::Custom { minutes } => i64::from(minutes) * 60,
    };
    let days = reqstate::days_from_civil(
        i64::from(date.year),
        i64::from(date.month),
        i64::from(date.day),
    );
    let seconds = days * 86_400
        + i64::from(time.hour) * 3_600
        + i64::from(time.minute) * 60
        + i64::from(time.second.unwrap_or(0))
        - offset_seconds;
    u64::try_from(seconds)
        .ok()
        .filter(|&t| t <= MAX_INSTANT)
        .ok_or_else(|| bad("before 1970 or after 9999"))
}

/// `--now`, or the system clock.
pub fn now_or_clock(now: Option<&str>) -> Result<u64, String> {
    match now {
        Some(text) => parse_instant("--now", text),
        None => Ok(reqstate::Clock::now(&reqstate::SystemClock)),
    }
}

/// A duration as `29d 23h 59m 59s`, `4m 59s`, `0s`.
pub fn format_duration(seconds: u64) -> String {
    if seconds == 0 {
        return "0s".into();
    }
    let parts = [
        (seconds / 86_400, "d"),
        (seconds % 86_400 / 3_600, "h"),
        (seconds % 3_600 / 60, "m"),
        (seconds % 60, "s"),
    ];
    parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `in 4m 59s`, `now`, or `4m 59s ago`: an instant relative to `now`.
pub fn relative(at: u64, now: u64) -> String {
    match at.cmp(&now) {
        std::cmp::Ordering::Greater => format!("in {}", format_duration(at - now)),
        std::cmp::Ordering::Equal => "now".into(),
        std::cmp::Ordering::Less => format!("{} ago", format_duration(now - at)),
    }
}

/// An instant as a TOML offset date-time value, `2026-12-01T12:05:00Z`.
pub fn toml_instant(at: u64) -> Result<toml_edit::Datetime, String> {
    reqstate::rfc3339_utc(at)
        .parse()
        .map_err(|_| format!("the instant {at} cannot be written in a keyring file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_one_unit() {
        assert_eq!(parse_duration("--x", "90s"), Ok(90));
        assert_eq!(parse_duration("--x", "5m"), Ok(300));
        assert_eq!(parse_duration("--x", "2h"), Ok(7_200));
        assert_eq!(parse_duration("--x", "30d"), Ok(2_592_000));
        assert_eq!(parse_duration("--x", "300"), Ok(300));
        for bad in [
            "",
            "m",
            "5 m",
            "5min",
            "1.5h",
            "-5m",
            "5m3s",
            "99999999999999999999",
        ] {
            let e = parse_duration("--propagation", bad);
            assert!(
                e.as_ref().is_err_and(|e| e.starts_with("--propagation")),
                "{bad:?}: {e:?}"
            );
        }
    }

    #[test]
    fn instants_are_unix_seconds_or_rfc3339() {
        assert_eq!(parse_instant("--now", "1796040000"), Ok(1_796_040_000));
        assert_eq!(
            parse_instant("--now", "2026-11-30T12:00:00Z"),
            Ok(1_796_040_000)
        );
        assert_eq!(
            parse_instant("--now", "2026-11-30T13:00:00+01:00"),
            Ok(1_796_040_000)
        );
        for bad in [
            "2026-11-30",
            "2026-11-30T12:00:00",
            "2026-11-30T12:00:00.5Z",
            "tomorrow",
            "1969-12-31T23:59:59Z",
            "",
        ] {
            assert!(parse_instant("--at", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_print_their_nonzero_parts() {
        assert_eq!(format_duration(299), "4m 59s");
        assert_eq!(format_duration(2_592_000), "30d");
        assert_eq!(format_duration(90_061), "1d 1h 1m 1s");
        assert_eq!(relative(10, 5), "in 5s");
        assert_eq!(relative(5, 10), "5s ago");
        assert_eq!(relative(5, 5), "now");
    }
}
