//! Re-drive by filter (SPEC §7, v4): a route's receipts of one state,
//! accepted within `since` and `until`, a page at a time, or counted
//! (`dry_run=true`) with nothing changed.

use crate::operator::{listing, Listing};
use crate::problem::Problem;

/// A bulk re-drive's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkFilter {
    pub listing: Listing,
    /// Acceptance time, Unix milliseconds, inclusive.
    pub since: Option<u64>,
    /// Acceptance time, Unix milliseconds, exclusive.
    pub until: Option<u64>,
    pub dry_run: bool,
}

impl BulkFilter {
    /// How the audit log names the act: the state and the bounds, never a
    /// key.
    pub fn target(&self) -> String {
        let mut parts = vec![format!("state={}", self.listing.state)];
        if let Some(since) = self.since {
            parts.push(format!("since={since}"));
        }
        if let Some(until) = self.until {
            parts.push(format!("until={until}"));
        }
        if let Some(cursor) = &self.listing.cursor {
            parts.push(format!("cursor={}", cursor.encode()));
        }
        parts.join("&")
    }
}

fn bad_query(reason: impl Into<String>) -> Problem {
    Problem::InvalidKey {
        source: "query".into(),
        reason: reason.into(),
    }
}

/// A time bound: Unix milliseconds (digits only), or an RFC 3339 time
/// (`2026-12-03T14:45:00Z`, `2026-12-03T15:45:00.250+01:00`).
pub fn time_bound(name: &str, text: &str) -> Result<u64, Problem> {
    let reason = || bad_query(format!("{name}= is Unix milliseconds or an RFC 3339 time"));
    if !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit()) {
        return text.parse().map_err(|_| reason());
    }
    // Whole seconds from the RFC 3339 reader, then the fraction's
    // milliseconds (digits after the first three are dropped).
    let seconds = crate::signature::paypal::unix_seconds(text).ok_or_else(reason)?;
    let fraction = text
        .get(19..)
        .and_then(|rest| rest.strip_prefix('.'))
        .map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            format!("{digits:0<3}")[..3].parse::<u64>().unwrap_or(0)
        })
        .unwrap_or(0);
    seconds
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(fraction))
        .ok_or_else(reason)
}

/// `state=S[&since=T][&until=T][&dry_run=true][&cursor=C]` (any listable
/// state; only `dead`, `failed` and `queued` receipts are re-driven, the
/// others answer 409 one by one).
pub fn bulk_filter(
    route: &crate::config::RouteConfig,
    query: &[(String, String)],
) -> Result<BulkFilter, Problem> {
    let find = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    if !matches!(find("state"), Some("dead" | "failed" | "queued")) {
        return Err(bad_query(
            "state= is dead, failed or queued: the states a re-drive takes",
        ));
    }
    let listing = listing(route, query)?;
    let since = find("since")
        .map(|text| time_bound("since", text))
        .transpose()?;
    let until = find("until")
        .map(|text| time_bound("until", text))
        .transpose()?;
    if let (Some(since), Some(until)) = (since, until) {
        if since >= until {
            return Err(bad_query("since= is before until="));
        }
    }
    let dry_run = match find("dry_run") {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(bad_query("dry_run= is true or false")),
    };
    Ok(BulkFilter {
        listing,
        since,
        until,
        dry_run,
    })
}
