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
    crate::time::rfc3339_ms(text).ok_or_else(reason)
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
    if !matches!(
        find("state"),
        Some("dead" | "superseded" | "failed" | "queued")
    ) {
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

/// The filtered listing's statement: rows of a route in a state accepted
/// in `[since, until)`, newest first, after a cursor. Parameters: route,
/// state, since, until, then the cursor's two.
pub fn list_sql(filter: &BulkFilter) -> String {
    let after = if filter.listing.cursor.is_some() {
        " AND (updated_at < ?5 OR (updated_at = ?5 AND object < ?6))"
    } else {
        ""
    };
    format!(
        "SELECT {} FROM receipt_index WHERE route = ?1 AND state = ?2 \
         AND accepted_at >= ?3 AND accepted_at < ?4{after} \
         ORDER BY updated_at DESC, object DESC LIMIT {}",
        crate::index::sql::COLUMNS,
        crate::index::PAGE_SIZE
    )
}

/// How many rows the filter names (a dry run's count). Parameters: route,
/// state, since, until.
pub const COUNT_SQL: &str = "SELECT COUNT(*) AS count FROM receipt_index \
     WHERE route = ?1 AND state = ?2 AND accepted_at >= ?3 AND accepted_at < ?4";

/// The largest bound D1 takes as a number (2^53 - 1): "no `until`".
pub const NO_UNTIL: u64 = (1 << 53) - 1;

/// The parameters of [`list_sql`] (cursor last) and, without the cursor,
/// of [`COUNT_SQL`].
pub fn params(filter: &BulkFilter) -> Vec<crate::index::sql::Param<'_>> {
    use crate::index::sql::Param;
    let mut params = vec![
        Param::Text(&filter.listing.route),
        Param::Text(&filter.listing.state),
        Param::Integer(filter.since.unwrap_or(0)),
        Param::Integer(filter.until.unwrap_or(NO_UNTIL).min(NO_UNTIL)),
    ];
    if let Some(cursor) = &filter.listing.cursor {
        params.push(Param::Integer(cursor.updated_at));
        params.push(Param::Text(&cursor.object));
    }
    params
}

/// A dry run's sample: at most this many rows.
pub const SAMPLE: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::sql::Param;

    fn route() -> crate::config::RouteConfig {
        let config = crate::config::Config::from_lookup(|name| match name {
            "ORIGIN_URL" => Some("https://origin.example".to_string()),
            "DELIVERY" => Some("async".to_string()),
            _ => None,
        })
        .expect("a configuration");
        config.routes[0].clone()
    }

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect()
    }

    #[test]
    fn a_filter_reads_state_bounds_and_dry_run() {
        let filter = bulk_filter(
            &route(),
            &query(&[
                ("state", "failed"),
                ("since", "2025-12-03T14:00:00Z"),
                ("until", "1764780000000"),
                ("dry_run", "true"),
            ]),
        )
        .unwrap();
        assert_eq!(filter.listing.state, "failed");
        assert_eq!(filter.since, Some(1_764_770_400_000));
        assert_eq!(filter.until, Some(1_764_780_000_000));
        assert!(filter.dry_run);
        assert_eq!(
            filter.target(),
            "state=failed&since=1764770400000&until=1764780000000"
        );
        assert_eq!(params(&filter).len(), 4);
        assert!(matches!(
            params(&filter)[2],
            Param::Integer(1_764_770_400_000)
        ));
    }

    #[test]
    fn a_filter_refuses_what_it_cannot_mean() {
        for wrong in [
            vec![("state", "in_flight")],
            vec![("state", "dead"), ("since", "5"), ("until", "5")],
            vec![("state", "dead"), ("dry_run", "yes")],
            vec![("state", "dead"), ("until", "tomorrow")],
        ] {
            assert!(bulk_filter(&route(), &query(&wrong)).is_err(), "{wrong:?}");
        }
    }

    /// The statements against SQLite (which D1 is): rows of the route and
    /// state accepted in `[since, until)`, counted and listed.
    #[test]
    fn the_filters_sql_takes_its_window_in_sqlite() {
        let connection = rusqlite::Connection::open_in_memory().unwrap();
        for statement in crate::index::sql::schema() {
            connection.execute(&statement, []).unwrap();
        }
        for (object, state, accepted_at) in [
            ("a", "dead", 1_000),
            ("b", "dead", 2_000),
            ("c", "dead", 3_000),
            ("d", "failed", 2_000),
        ] {
            connection
                .execute(
                    "INSERT INTO receipt_index (object, route, scope, key, receipt_id, state, attempts, accepted_at, updated_at, version) \
                     VALUES (?1, 'default', 's', ?1, 'r', ?2, 1, ?3, ?3, 1)",
                    rusqlite::params![object, state, accepted_at],
                )
                .unwrap();
        }
        let filter = bulk_filter(
            &route(),
            &query(&[("state", "dead"), ("since", "2000"), ("until", "3000")]),
        )
        .unwrap();
        let count: i64 = connection
            .query_row(
                COUNT_SQL,
                rusqlite::params_from_iter(params(&filter)),
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(count, 1);
        let mut listed = connection.prepare(&list_sql(&filter)).unwrap();
        let objects: Vec<String> = listed
            .query_map(rusqlite::params_from_iter(params(&filter)), |row| {
                row.get(0)
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(objects, ["b"]);
        let open = bulk_filter(&route(), &query(&[("state", "dead")])).unwrap();
        let count: i64 = connection
            .query_row(
                COUNT_SQL,
                rusqlite::params_from_iter(params(&open)),
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(count, 3);
    }

    #[test]
    fn without_bounds_the_filter_takes_every_acceptance_time() {
        let filter = bulk_filter(&route(), &query(&[("state", "dead")])).unwrap();
        assert!(!filter.dry_run);
        assert!(matches!(params(&filter)[2], Param::Integer(0)));
        assert!(matches!(params(&filter)[3], Param::Integer(NO_UNTIL)));
        assert!(list_sql(&filter).contains("accepted_at >= ?3 AND accepted_at < ?4"));
    }
}
