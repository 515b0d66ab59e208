//! Sets of HTTP statuses configuration names (`RETRYABLE_STATUSES`).

/// `RETRYABLE_STATUSES`: origin statuses that mean the forward failed (and
/// is retried) rather than completed (and replayed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryableStatuses(Vec<(u16, u16)>);

impl Default for RetryableStatuses {
    fn default() -> RetryableStatuses {
        RetryableStatuses::parse("408,425,429,500-599").expect("the default parses")
    }
}

impl RetryableStatuses {
    /// `408,425,429,500-599`: statuses and inclusive ranges, 100 to 599.
    pub fn parse(text: &str) -> Result<RetryableStatuses, String> {
        let status = |text: &str| {
            text.trim()
                .parse::<u16>()
                .ok()
                .filter(|status| (100..=599).contains(status))
                .ok_or_else(|| format!("{:?} is not a status from 100 to 599", text.trim()))
        };
        text.split(',')
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
            .map(RetryableStatuses)
    }

    pub fn contains(&self, status: u16) -> bool {
        self.0
            .iter()
            .any(|(low, high)| (*low..=*high).contains(&status))
    }

    /// Whether an origin answer of `status` completes a receipt (SPEC §2).
    pub fn completes(&self, status: u16) -> bool {
        !self.contains(status)
    }
}
