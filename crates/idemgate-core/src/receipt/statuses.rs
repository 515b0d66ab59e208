//! Sets of HTTP statuses that configuration names: `RETRYABLE_STATUSES`
//! (sync) and `GIVE_UP_STATUSES` (async).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Statuses and inclusive ranges, 100 to 599, as `408,425,429,500-599`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatusSet(Vec<(u16, u16)>);

impl StatusSet {
    /// Parses a list; a 2xx in it is refused: a success never means that
    /// a delivery failed.
    pub fn parse(text: &str) -> Result<StatusSet, String> {
        let status = |text: &str| {
            text.trim()
                .parse::<u16>()
                .ok()
                .filter(|status| (100..=599).contains(status))
                .ok_or_else(|| format!("{:?} is not a status from 100 to 599", text.trim()))
        };
        let set = text
            .split(',')
            .map(|entry| match entry.split_once('-') {
                Some((low, high)) => {
                    let (low, high) = (status(low)?, status(high)?);
                    if low > high {
                        return Err(format!("{:?} is an empty range", entry.trim()));
                    }
                    Ok((low, high))
                }
                None => status(entry).map(|status| (status, status)),
            })
            .collect::<Result<Vec<_>, String>>()
            .map(StatusSet)?;
        if let Some(success) = (200..=299).find(|status| set.contains(*status)) {
            return Err(format!(
                "names {success}, a success: a 2xx always means the origin took the delivery"
            ));
        }
        Ok(set)
    }

    pub fn contains(&self, status: u16) -> bool {
        self.0
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&status))
    }
}

impl fmt::Display for StatusSet {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, (low, high)) in self.0.iter().enumerate() {
            if index > 0 {
                formatter.write_str(",")?;
            }
            if low == high {
                write!(formatter, "{low}")?;
            } else {
                write!(formatter, "{low}-{high}")?;
            }
        }
        Ok(())
    }
}

/// Kept in a receipt as its configured text.
impl Serialize for StatusSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for StatusSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StatusSet, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.is_empty() {
            return Ok(StatusSet::default());
        }
        StatusSet::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `RETRYABLE_STATUSES` (sync delivery): origin statuses that mean the
/// forward failed (and is retried) rather than completed (and replayed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryableStatuses(StatusSet);

impl Default for RetryableStatuses {
    fn default() -> RetryableStatuses {
        RetryableStatuses::parse("408,425,429,500-599").expect("the default parses")
    }
}

impl RetryableStatuses {
    pub fn parse(text: &str) -> Result<RetryableStatuses, String> {
        StatusSet::parse(text).map(RetryableStatuses)
    }

    pub fn contains(&self, status: u16) -> bool {
        self.0.contains(status)
    }

    /// Whether an origin answer of `status` completes a sync receipt (SPEC §2).
    pub fn completes(&self, status: u16) -> bool {
        !self.contains(status)
    }
}

/// Whether an async attempt answered `status` delivered it (SPEC §2b, v3):
/// only a success does; anything else is retried, or ends the receipt
/// when `GIVE_UP_STATUSES` names it.
pub fn delivered(status: u16) -> bool {
    (200..=299).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_retries_every_5xx_and_the_temporary_4xx() {
        let retryable = RetryableStatuses::default();
        for status in (500..=599).chain([408, 425, 429]) {
            assert!(!retryable.completes(status), "{status}");
        }
        for status in (100..=499).filter(|status| ![408, 425, 429].contains(status)) {
            assert!(retryable.completes(status), "{status}");
        }
    }

    #[test]
    fn a_success_is_never_a_failure() {
        for text in ["200", "500,204", "100-300", "299"] {
            let error = StatusSet::parse(text).unwrap_err();
            assert!(error.contains("a success"), "{text}: {error}");
        }
        assert!(StatusSet::parse("199,300-599").is_ok());
    }

    #[test]
    fn only_a_2xx_delivers_an_async_attempt() {
        assert!((200..=299).all(delivered));
        assert!(!(100..=199).chain(300..=599).any(delivered));
    }

    #[test]
    fn sets_round_trip_through_their_text() {
        let set = StatusSet::parse(" 410 , 451,500-503").unwrap();
        assert_eq!(set.to_string(), "410,451,500-503");
        let json = serde_json::to_string(&set).unwrap();
        assert_eq!(json, r#""410,451,500-503""#);
        assert_eq!(serde_json::from_str::<StatusSet>(&json).unwrap(), set);
        assert_eq!(
            serde_json::from_str::<StatusSet>(r#""""#).unwrap(),
            StatusSet::default()
        );
        for bad in ["", "99", "600", "x", "500-400"] {
            assert!(StatusSet::parse(bad).is_err(), "{bad}");
        }
    }
}
