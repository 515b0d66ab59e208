//! Placeholders a fixture carries where a real sender puts fresh values:
//! ids and times of one event. Every value comes from the event's seed and
//! time alone, so the same event (`--same-event`) renders byte for byte the
//! same, and a new event renders new ids.
//!
//! | placeholder | value |
//! | --- | --- |
//! | `{{alnum:NAME[:LEN]}}` | `A-Za-z0-9`, 24 by default |
//! | `{{lower:NAME[:LEN]}}` | `a-z0-9`, 26 by default |
//! | `{{upper:NAME[:LEN]}}` | `A-Z0-9`, 17 by default |
//! | `{{hex:NAME[:LEN]}}` | `0-9a-f`, 40 by default |
//! | `{{digits:NAME[:LEN]}}` | digits, the first not 0, 13 by default |
//! | `{{uuid:NAME}}` | a version 4 UUID |
//! | `{{unix}}`, `{{unix_ms}}` | the event's time, Unix seconds or milliseconds |
//! | `{{rfc3339}}`, `{{rfc3339_ms}}` | the same, `2026-12-02T10:00:00Z` or `...00.123Z` |
//! | `{{date}}` | the same, `2026-12-02` |
//!
//! The same `NAME` gives the same value throughout one event. A time takes
//! an offset: `{{rfc3339-5s}}`, `{{date+30d}}` (`s`, `m`, `h`, `d`).

use sha2::{Digest, Sha256};

/// One event: what its ids and times are made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub seed: String,
    /// When the event happened, Unix milliseconds.
    pub created_ms: u64,
}

impl Event {
    /// A new event at `now_ms`, with a seed no other event has.
    pub fn new(now_ms: u64) -> Event {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let local = 0u8;
        let entropy = format!(
            "{nanos}:{}:{}:{:p}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            &local
        );
        Event {
            seed: hex::encode(&Sha256::digest(entropy.as_bytes())[..10]),
            created_ms: now_ms,
        }
    }

    /// `len` characters of `alphabet`, the same for the same `name`.
    fn characters(&self, name: &str, alphabet: &[u8], len: usize) -> String {
        let mut out = String::with_capacity(len);
        let mut block = 0u32;
        while out.len() < len {
            let digest = Sha256::digest(format!("{}:{name}:{block}", self.seed).as_bytes());
            for byte in digest {
                if out.len() == len {
                    break;
                }
                out.push(alphabet[usize::from(byte) % alphabet.len()] as char);
            }
            block += 1;
        }
        out
    }

    fn uuid(&self, name: &str) -> String {
        let digest = Sha256::digest(format!("{}:{name}:uuid", self.seed).as_bytes());
        let mut bytes: [u8; 16] = digest[..16].try_into().expect("16 of 32 bytes");
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        let hex = hex::encode(bytes);
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }
}

const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const HEX: &[u8] = b"0123456789abcdef";
const DIGITS: &[u8] = b"0123456789";

/// `text` with every placeholder of `event` filled in.
pub fn expand(text: &str, event: &Event) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("an unclosed {{{{ at {:?}", excerpt(&rest[start..])))?;
        out.push_str(&value(after[..end].trim(), event)?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

fn excerpt(text: &str) -> String {
    text.chars().take(24).collect()
}

fn value(placeholder: &str, event: &Event) -> Result<String, String> {
    let unknown = || {
        format!(
            "unknown placeholder {{{{{placeholder}}}}}: alnum, lower, upper, hex, digits or uuid:NAME[:LEN], or unix, unix_ms, rfc3339, rfc3339_ms, date[+-N(s|m|h|d)]"
        )
    };
    if let Some((kind, rest)) = placeholder.split_once(':') {
        let (name, len) = match rest.split_once(':') {
            Some((name, len)) => (
                name,
                Some(
                    len.parse::<usize>()
                        .ok()
                        .filter(|len| (1..=256).contains(len))
                        .ok_or_else(unknown)?,
                ),
            ),
            None => (rest, None),
        };
        if name.is_empty() {
            return Err(unknown());
        }
        return Ok(match kind {
            "alnum" => event.characters(name, ALNUM, len.unwrap_or(24)),
            "lower" => event.characters(name, LOWER, len.unwrap_or(26)),
            "upper" => event.characters(name, UPPER, len.unwrap_or(17)),
            "hex" => event.characters(name, HEX, len.unwrap_or(40)),
            "digits" => {
                let len = len.unwrap_or(13);
                let first = event.characters(&format!("{name}#first"), b"123456789", 1);
                first + &event.characters(name, DIGITS, len - 1)
            }
            "uuid" if len.is_none() => event.uuid(name),
            _ => return Err(unknown()),
        });
    }
    let split = placeholder.find(['+', '-']).unwrap_or(placeholder.len());
    let (kind, offset) = placeholder.split_at(split);
    let offset_ms = match offset {
        "" => 0,
        offset => parse_offset_ms(offset).ok_or_else(unknown)?,
    };
    let at_ms = event.created_ms.saturating_add_signed(offset_ms);
    Ok(match kind {
        "unix" => (at_ms / 1_000).to_string(),
        "unix_ms" => at_ms.to_string(),
        "rfc3339" => rfc3339(at_ms / 1_000),
        "rfc3339_ms" => {
            let seconds = rfc3339(at_ms / 1_000);
            format!("{}.{:03}Z", &seconds[..19], at_ms % 1_000)
        }
        "date" => rfc3339(at_ms / 1_000)[..10].to_string(),
        _ => return Err(unknown()),
    })
}

/// `+30d`, `-5s`, `+2h`, `+10` (seconds), in milliseconds.
fn parse_offset_ms(text: &str) -> Option<i64> {
    let (sign, rest) = match text.split_at(1) {
        ("+", rest) => (1, rest),
        ("-", rest) => (-1, rest),
        _ => return None,
    };
    let (digits, unit) = match rest.strip_suffix(['s', 'm', 'h', 'd']) {
        Some(digits) => (digits, &rest[digits.len()..]),
        None => (rest, "s"),
    };
    let amount: i64 = digits.parse().ok()?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        _ => 86_400,
    };
    amount.checked_mul(seconds * 1_000).map(|ms| ms * sign)
}

/// `2026-12-03T14:45:00Z` of Unix seconds: the core's, which the gateway
/// writes and reads.
pub use idemgate_core::time::rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seed: &str) -> Event {
        Event {
            seed: seed.into(),
            created_ms: 1_764_633_600_123,
        }
    }

    #[test]
    fn times_are_the_events() {
        let text = "{{unix}} {{unix_ms}} {{rfc3339}} {{rfc3339_ms}} {{date}} {{date+30d}} {{unix-5s}} {{rfc3339+1h}}";
        assert_eq!(
            expand(text, &event("a")).unwrap(),
            "1764633600 1764633600123 2025-12-02T00:00:00Z 2025-12-02T00:00:00.123Z 2025-12-02 2026-01-01 1764633595 2025-12-02T01:00:00Z"
        );
        // The core reads the times it writes back.
        assert_eq!(
            idemgate_core::time::unix_seconds(&rfc3339(1_764_633_600)),
            Some(1_764_633_600)
        );
    }

    #[test]
    fn ids_are_fixed_by_the_seed_and_name() {
        let text = "evt_{{alnum:event}} {{alnum:event}} {{lower:id:26}} {{upper:psp:16}} {{hex:sha}} {{digits:order:13}} {{uuid:delivery}}";
        let first = expand(text, &event("a")).unwrap();
        assert_eq!(first, expand(text, &event("a")).unwrap());
        assert_ne!(first, expand(text, &event("b")).unwrap());
        let parts: Vec<&str> = first.split(' ').collect();
        assert_eq!(parts[0], format!("evt_{}", parts[1]));
        assert_eq!(parts[1].len(), 24);
        assert!(parts[2].len() == 26 && parts[2].bytes().all(|b| LOWER.contains(&b)));
        assert!(parts[3].len() == 16 && parts[3].bytes().all(|b| UPPER.contains(&b)));
        assert!(parts[4].len() == 40 && parts[4].bytes().all(|b| HEX.contains(&b)));
        assert!(parts[5].len() == 13 && !parts[5].starts_with('0'));
        assert_eq!(parts[6].len(), 36);
        assert_eq!(&parts[6][14..15], "4");
    }

    #[test]
    fn new_events_differ() {
        assert_ne!(Event::new(1).seed, Event::new(1).seed);
    }

    #[test]
    fn unknown_or_unclosed_placeholders_are_errors() {
        for text in [
            "{{nope}}",
            "{{alnum:}}",
            "{{uuid:x:3}}",
            "{{hex:x:0}}",
            "{{date+3w}}",
            "{{unix",
        ] {
            assert!(expand(text, &event("a")).is_err(), "{text}");
        }
        assert_eq!(
            expand("no placeholder", &event("a")).unwrap(),
            "no placeholder"
        );
    }
}
