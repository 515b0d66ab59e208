//! RFC 3339 times, read and written in one place: PayPal's transmission
//! time, the providers' event times in reconciliation, an order time, a
//! re-drive's bounds, and the times idemgate writes (alerts, checkpoints,
//! reconciliation windows). Proleptic Gregorian arithmetic on Unix
//! seconds, with no calendar crate in the wasm.

/// Unix seconds of an RFC 3339 time (`2015-05-18T15:45:13Z`, fractions and
/// offsets allowed).
pub fn unix_seconds(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    let number = |from: usize, to: usize| -> Option<i64> {
        let digits = text.get(from..to)?;
        digits
            .bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| digits.parse().ok())?
    };
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (number(0, 4)?, number(5, 7)?, number(8, 10)?);
    let (hour, minute, second) = (number(11, 13)?, number(14, 16)?, number(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut at = 19;
    if bytes.get(at) == Some(&b'.') {
        at += 1;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
    }
    let offset = match bytes.get(at)? {
        b'Z' | b'z' if at + 1 == bytes.len() => 0,
        sign @ (b'+' | b'-') if at + 6 == bytes.len() && bytes[at + 3] == b':' => {
            let minutes = number(at + 1, at + 3)? * 60 + number(at + 4, at + 6)?;
            if *sign == b'+' {
                minutes * 60
            } else {
                -minutes * 60
            }
        }
        _ => return None,
    };
    // Days since 1970-01-01 of a proleptic Gregorian date.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * m + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset;
    u64::try_from(seconds).ok()
}

/// Unix seconds of an RFC 3339 time; one without an offset (as Square's
/// API reference shows them) is read as UTC.
pub fn unix_seconds_or_utc(text: &str) -> Option<u64> {
    unix_seconds(text).or_else(|| {
        let zoned = format!("{text}Z");
        unix_seconds(&zoned)
    })
}

/// Milliseconds of an RFC 3339 time; digits of the fraction after the
/// third are dropped.
pub fn rfc3339_ms(text: &str) -> Option<u64> {
    let seconds = unix_seconds(text)?;
    let fraction = text
        .get(19..)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            format!("{digits:0<3}")[..3].parse::<u64>().unwrap_or(0)
        })
        .unwrap_or(0);
    seconds.checked_mul(1000)?.checked_add(fraction)
}

/// `2026-12-03T14:45:00Z` of Unix seconds.
pub fn rfc3339(unix_seconds: u64) -> String {
    let days = (unix_seconds / 86_400) as i64;
    let of_day = unix_seconds % 86_400;
    // Civil date of a day count since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3_600,
        of_day % 3_600 / 60,
        of_day % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc_3339() {
        assert_eq!(unix_seconds("2015-05-18T15:45:13Z"), Some(1_431_963_913));
        assert_eq!(
            unix_seconds("2015-05-18T15:45:13.250Z"),
            Some(1_431_963_913)
        );
        assert_eq!(
            unix_seconds("2015-05-18T17:45:13+02:00"),
            Some(1_431_963_913)
        );
        assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(unix_seconds("2024-02-29T00:00:00Z"), Some(1_709_164_800));
        for bad in [
            "",
            "2015-05-18",
            "2015-13-18T15:45:13Z",
            "2015-05-18T15:45:13",
            "2015-05-18 15:45:13Z",
            "yesterday",
            // One separator wrong at a time: each is checked on its own.
            "2015/05-18T15:45:13Z",
            "2015-05/18T15:45:13Z",
            "2015-05-18X15:45:13Z",
            "2015-05-18T15.45:13Z",
            "2015-05-18T15:45.13Z",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }

    /// Each field's range is checked at both ends, and an offset is only
    /// `+hh:mm` or `-hh:mm` at the very end.
    #[test]
    fn every_field_of_a_time_has_its_range() {
        assert_eq!(unix_seconds("2015-05-01T00:00:00Z"), Some(1_430_438_400));
        assert_eq!(unix_seconds("2015-05-31T23:59:59Z"), Some(1_433_116_799));
        // A leap second, as RFC 3339 allows.
        assert_eq!(unix_seconds("2015-05-31T23:59:60Z"), Some(1_433_116_800));
        assert_eq!(
            unix_seconds("2015-05-18T15:45:13-02:00"),
            Some(1_431_971_113)
        );
        // An offset's minutes count too (India is +05:30).
        assert_eq!(
            unix_seconds("2015-05-18T21:15:13+05:30"),
            Some(1_431_963_913)
        );
        for bad in [
            "2015-00-18T15:45:13Z",
            "2015-05-00T15:45:13Z",
            "2015-05-32T15:45:13Z",
            "2015-05-18T24:45:13Z",
            "2015-05-18T15:60:13Z",
            "2015-05-18T15:45:61Z",
            "2015-05-18T17:45:13+02:00Z",
            "2015-05-18T17:45:13+02-00",
            "2015-05-18T17:45:13+0200",
            "2015-05-18T15:45:13Zjunk",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
    }

    #[test]
    fn rfc3339_and_unix_seconds_read_each_other() {
        for unix in [0, 951_782_400, 1_700_000_000, 1_796_300_000, 4_102_444_800] {
            assert_eq!(
                unix_seconds_or_utc(&rfc3339(unix)),
                Some(unix),
                "{}",
                rfc3339(unix)
            );
        }
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(
            unix_seconds_or_utc("2022-04-26T10:08:40.454726"),
            unix_seconds_or_utc("2022-04-26T10:08:40Z")
        );
    }
}
