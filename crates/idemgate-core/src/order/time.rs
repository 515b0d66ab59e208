//! An event's own time (`order_time`, SPEC §12): RFC 3339, or Unix
//! seconds or milliseconds, as providers write them.

/// Below this, a whole number is Unix seconds (it is the year 5138 in
/// seconds, and March 1973 in milliseconds: no payment event is either).
const SECONDS_BELOW: u64 = 100_000_000_000;

/// From this many milliseconds on (the year 5138 again), a number is no
/// time: microseconds or nanoseconds, which no provider here writes, would
/// otherwise read as a time millennia ahead, newer than anything to come.
const MILLISECONDS_BELOW: u64 = SECONDS_BELOW * 1_000;

/// Milliseconds since the Unix epoch of `text`: `2026-12-03T14:45:00Z`
/// (fractions and offsets allowed), `1796395500` (seconds),
/// `1796395500.25` (seconds with a fraction) or `1796395500250`
/// (milliseconds, a fraction dropped). `None` for anything else, a time
/// before 1970, or a number past the year 5138.
pub fn order_time_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    let (whole, fraction) = match text.split_once('.') {
        Some((whole, fraction)) if digits(whole) && digits(fraction) => (whole, Some(fraction)),
        Some(_) => return crate::time::rfc3339_ms(text),
        None if digits(text) => (text, None),
        None => return crate::time::rfc3339_ms(text),
    };
    let number: u64 = whole.parse().ok()?;
    let millis = match number < SECONDS_BELOW {
        true => {
            let fraction = fraction.map_or(Ok(0), |digits| format!("{digits:0<3}")[..3].parse());
            number.checked_mul(1_000)?.checked_add(fraction.ok()?)?
        }
        false => number,
    };
    (millis < MILLISECONDS_BELOW).then_some(millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_milliseconds_and_rfc_3339_name_one_instant() {
        let instant = 1_796_395_500_000;
        for text in [
            "1796395500",
            "1796395500.000",
            "1796395500000",
            "2026-12-04T14:45:00Z",
            "2026-12-04T15:45:00+01:00",
            "2026-12-04T14:45:00.000Z",
        ] {
            assert_eq!(order_time_ms(text), Some(instant), "{text}");
        }
        assert_eq!(order_time_ms("1796395500.25"), Some(instant + 250));
        assert_eq!(order_time_ms("1796395500000.5"), Some(instant));
        assert_eq!(
            order_time_ms("2026-12-04T14:45:00.2509Z"),
            Some(instant + 250)
        );
    }

    #[test]
    fn anything_else_is_no_time() {
        for text in [
            "",
            "soon",
            "-5",
            "1.2.3",
            "12:00",
            "2026-12-05",
            "0x10",
            ".5",
            "5.",
            // Microseconds and nanoseconds: no time this reads.
            "1796395500000000",
            "1796395500000000000",
            "1796395500000000.5",
        ] {
            assert_eq!(order_time_ms(text), None, "{text:?}");
        }
    }
}
