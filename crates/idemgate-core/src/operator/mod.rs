//! The operator API's pure decisions (SPEC §7): who may call it, which
//! receipt a query names, and what a listing asks for.

pub mod page;
pub mod redrive_filter;
pub mod view;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::canonical::is_sha256_hex;
use crate::config::{Config, RouteConfig, Tenant};
pub use crate::form::pairs as query_pairs;
use crate::index::{Cursor, LISTABLE_STATES};
use crate::key::{IdempotencyKey, KeyScope, Scope};
use crate::problem::Problem;
use crate::routes::normalize_path;
use crate::signature::Secret;

/// `Authorization: Bearer <token>` against the configured token. Both are
/// hashed first and the hashes compared in constant time, so neither the
/// token's content nor its length shows in the timing. With no token
/// configured the routes do not exist (404).
pub fn authorize(admin_token: Option<&Secret>, authorization: Option<&str>) -> Result<(), Problem> {
    let Some(expected) = admin_token else {
        return Err(Problem::NotFound);
    };
    let presented = authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    let presented = Sha256::digest(presented.as_bytes());
    let expected = Sha256::digest(expected.expose().as_bytes());
    if bool::from(presented.ct_eq(&expected)) {
        Ok(())
    } else {
        Err(Problem::Unauthorized)
    }
}

fn param<'a>(query: &'a [(String, String)], name: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

fn bad_query(reason: impl Into<String>) -> Problem {
    Problem::InvalidKey {
        source: "query".into(),
        reason: reason.into(),
    }
}

/// The route a query names: `route=R`, which may be left out when there is
/// no `ROUTES` (the one route is `default`).
pub fn route_of<'a>(
    config: &'a Config,
    query: &[(String, String)],
) -> Result<&'a RouteConfig, Problem> {
    match param(query, "route") {
        Some(name) => config.route(name).ok_or_else(|| {
            // A broken route's receipts cannot be addressed: its key scope
            // and tenant are what is broken.
            config
                .broken_route(name)
                .cloned()
                .unwrap_or(Problem::NotFound)
        }),
        None if !config.explicit_routes => Ok(&config.routes[0]),
        None => Err(bad_query("route= is required: ROUTES names several")),
    }
}

/// One receipt, as `route`, `key`, `path` (under path scope) and
/// `tenant_sha256` (when the route has a `TENANT_HEADER`: the hex SHA-256
/// of the header's value, so the raw tenant secret never goes in a URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptAddress {
    pub route: String,
    pub object_name: String,
    /// What an audit entry names of it: the hashes of the key and path as
    /// they were read (a key with spaces around it addresses the key
    /// without them), the tenant hash, in a fixed order.
    pub target: String,
}

impl ReceiptAddress {
    /// The audit target of an act on this receipt, and on the life
    /// `receipt_id` names, if any.
    pub fn audit_target(&self, receipt_id: Option<&str>) -> String {
        match receipt_id {
            Some(id) => format!("{}&receipt_id={id}", self.target),
            None => self.target.clone(),
        }
    }
}

/// `receipt_id=`, when given: the life of the key an act is meant for
/// (SPEC §7, v4). A receipt id is a UUID, in its hyphenated form.
pub fn receipt_id(query: &[(String, String)]) -> Result<Option<String>, Problem> {
    let Some(id) = param(query, "receipt_id") else {
        return Ok(None);
    };
    let uuid_shaped = id.len() == 36
        && id.char_indices().all(|(at, c)| match at {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    match uuid_shaped {
        true => Ok(Some(id.to_ascii_lowercase())),
        false => Err(bad_query(
            "receipt_id= is a receipt's id (a hyphenated UUID)",
        )),
    }
}

pub fn receipt_address(
    route: &RouteConfig,
    query: &[(String, String)],
) -> Result<ReceiptAddress, Problem> {
    let key = IdempotencyKey::parse(param(query, "key").unwrap_or(""), "key=")?;
    let path = match (route.key_scope, param(query, "path")) {
        (KeyScope::Path, Some(path)) => Some(normalize_path(path)?),
        (KeyScope::Path, None) => {
            return Err(bad_query(
                "path= is required: this route scopes keys by path",
            ))
        }
        // What a route does not use is refused, not ignored: an act must
        // not be recorded against what it did not address.
        (KeyScope::Route, Some(_)) => {
            return Err(bad_query(
                "path= is not used: this route scopes keys by route, not by path",
            ))
        }
        (KeyScope::Route, None) => None,
    };
    let tenant = match (&route.tenant, param(query, "tenant_sha256")) {
        (Tenant::Header { .. }, Some(hash)) if !is_sha256_hex(hash) => {
            return Err(bad_query("tenant_sha256= is 64 lowercase hex digits"))
        }
        (Tenant::Header { .. }, Some(hash)) => Some(hash),
        // An anonymous caller's receipt (api mode, no Authorization).
        (
            Tenant::Header {
                required: false, ..
            },
            None,
        ) => None,
        (Tenant::Header { name, .. }, None) => {
            return Err(Problem::MissingTenant {
                header: format!("{name} (as tenant_sha256=)"),
            })
        }
        (Tenant::Shared, Some(_)) => {
            return Err(bad_query(
                "tenant_sha256= is not used: this route has no TENANT_HEADER",
            ))
        }
        (Tenant::Shared, None) => None,
    };
    let mut target = vec![format!(
        "key_sha256={}",
        crate::audit::key_sha256(key.as_str())
    )];
    if let Some(path) = &path {
        target.push(format!("path_sha256={}", crate::audit::key_sha256(path)));
    }
    if let Some(tenant) = tenant {
        target.push(format!("tenant_sha256={tenant}"));
    }
    let scope = Scope::new(&route.name, path.as_deref(), tenant);
    Ok(ReceiptAddress {
        route: route.name.clone(),
        object_name: scope.object_name(&key),
        target: target.join("&"),
    })
}

/// A listing: receipts of one route in one state, newest first, paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub route: String,
    pub state: String,
    pub cursor: Option<Cursor>,
}

pub fn listing(route: &RouteConfig, query: &[(String, String)]) -> Result<Listing, Problem> {
    let state = param(query, "state").unwrap_or_default();
    if !LISTABLE_STATES.contains(&state) {
        return Err(bad_query(format!(
            "state= is one of {}",
            LISTABLE_STATES.join(", ")
        )));
    }
    let cursor = match param(query, "cursor") {
        Some(text) => Some(
            Cursor::decode(text).ok_or_else(|| bad_query("cursor= is not one this API gave"))?,
        ),
        None => None,
    };
    Ok(Listing {
        route: route.name.clone(),
        state: state.to_string(),
        cursor,
    })
}

// A bulk re-drive's question (v4: state, since, until, dry run) is
// `redrive_filter::bulk_filter`.

/// How many receipts of one route are in one state, from the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateCount<'a> {
    pub route: &'a str,
    pub state: &'a str,
    pub count: u64,
    pub oldest_accepted_at: Option<u64>,
}

/// The summary (SPEC §7, v3): for each of `routes`, its receipts by
/// listable state, and how long the oldest pending one (queued, in flight
/// or failed) has waited since it was accepted.
pub fn summary<'a>(
    routes: impl Iterator<Item = &'a str>,
    counts: impl Iterator<Item = StateCount<'a>> + Clone,
    now: u64,
) -> serde_json::Value {
    let routes: Vec<serde_json::Value> = routes
        .map(|route| {
            let of_route = counts.clone().filter(|count| count.route == route);
            let mut entry = serde_json::json!({ "route": route });
            for state in LISTABLE_STATES {
                let count: u64 = of_route
                    .clone()
                    .filter(|count| count.state == *state)
                    .map(|count| count.count)
                    .sum();
                entry[*state] = count.into();
            }
            let oldest = of_route
                .filter(|count| crate::index::PENDING_STATES.contains(&count.state))
                .filter_map(|count| count.oldest_accepted_at)
                .min();
            entry["oldest_pending_age_ms"] = oldest.map(|at| now.saturating_sub(at)).into();
            entry
        })
        .collect();
    serde_json::json!({ "routes": routes, "at": now })
}

/// A limited route's flow control in the summary: its limits, and its
/// coordinator's permits in use and deliveries waiting (`unreachable`
/// when the coordinator did not answer).
pub fn flow_summary(
    limits: &crate::flow::FlowLimits,
    status: Option<&crate::flow::FlowStatus>,
) -> serde_json::Value {
    let mut flow = serde_json::json!({
        "max_in_flight": limits.max_in_flight,
        "rate_per_second": limits.rate_thousandths.map(|rate| rate as f64 / 1000.0),
    });
    match status {
        Some(status) => {
            flow["permits_in_use"] = status.permits_in_use.into();
            flow["waiting"] = status.waiting.into();
            flow["oldest_wait_ms"] = status.oldest_wait_ms.into();
        }
        None => flow["unreachable"] = true.into(),
    }
    flow
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::sha256_hex;
    use std::collections::HashMap;

    #[test]
    fn receipt_id_is_a_hyphenated_uuid_or_absent() {
        let query = |value: &str| vec![("receipt_id".to_string(), value.to_string())];
        assert_eq!(receipt_id(&[]), Ok(None));
        assert_eq!(
            receipt_id(&query("0190B4C2-7E00-7000-8000-00000000000A")),
            Ok(Some("0190b4c2-7e00-7000-8000-00000000000a".into()))
        );
        for bad in [
            "",
            "x",
            "0190b4c27e0070008000000000000000",
            "0190b4c2-7e00-7000-8000-00000000000g",
        ] {
            assert_eq!(receipt_id(&query(bad)).unwrap_err().status(), 400, "{bad}");
        }
    }

    fn secret(value: &str) -> Secret {
        Secret::new(value.into())
    }

    #[test]
    fn query_strings_decode_as_forms() {
        assert_eq!(
            query_pairs("key=order%2D1&path=%2Fpay&route=stripe&x&tenant_sha256=ab+c&&%zz=1"),
            [
                ("key", "order-1"),
                ("path", "/pay"),
                ("route", "stripe"),
                ("x", ""),
                ("tenant_sha256", "ab c"),
                ("%zz", "1"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert!(query_pairs("").is_empty());
    }

    #[test]
    fn no_token_configured_hides_the_routes() {
        assert_eq!(authorize(None, Some("Bearer x")), Err(Problem::NotFound));
    }

    #[test]
    fn wrong_or_missing_token_is_401_and_right_one_passes() {
        let token = secret("s3cret");
        for presented in [
            None,
            Some("Bearer nope"),
            Some("s3cret"),
            Some("Bearer s3cre"),
            Some("Bearer s3cret "),
        ] {
            assert_eq!(
                authorize(Some(&token), presented),
                Err(Problem::Unauthorized),
                "{presented:?}"
            );
        }
        assert_eq!(authorize(Some(&token), Some("Bearer s3cret")), Ok(()));
    }

    fn config(vars: &[(&str, &str)]) -> Config {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|name| map.get(name).cloned()).unwrap()
    }

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The target names the key's hash, never the key (moved from the
    /// audit module's `receipt_target`, which read the query as written).
    #[test]
    fn a_receipt_target_names_the_keys_hash_never_the_key() {
        let config = config(&[("ORIGIN_URL", "http://o"), ("KEY_SCOPE", "route")]);
        let route = route_of(&config, &[]).unwrap();
        let address = receipt_address(route, &query(&[("key", "evt_secretish")])).unwrap();
        let target = address.audit_target(Some("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"));
        assert!(!target.contains("evt_secretish"));
        assert_eq!(
            target,
            format!(
                "key_sha256={}&receipt_id=0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
                crate::audit::key_sha256("evt_secretish")
            )
        );
    }

    /// The review's item 15 (round 5): the audit target was the query as
    /// written. `key=%20K%20` purged `K` and recorded the hash of " K ";
    /// `tenant_sha256=%26key_sha256%3Dffff` on a shared-tenant route was
    /// recorded raw, naming a second key. Now the target is what was
    /// addressed, and what a route does not use is refused.
    #[test]
    fn the_audit_target_names_what_was_addressed() {
        let shared = config(&[("ORIGIN_URL", "http://o"), ("KEY_SCOPE", "route")]);
        let route = route_of(&shared, &[]).unwrap();
        let padded = receipt_address(route, &query(&[("key", " K ")])).unwrap();
        let plain = receipt_address(route, &query(&[("key", "K")])).unwrap();
        assert_eq!(padded.object_name, plain.object_name, "the same receipt");
        assert_eq!(
            padded.target,
            format!("key_sha256={}", crate::audit::key_sha256("K"))
        );
        for unused in [
            query(&[("key", "K"), ("tenant_sha256", "&key_sha256=ffff")]),
            query(&[("key", "K"), ("tenant_sha256", &sha256_hex(b"t"))]),
            query(&[("key", "K"), ("path", "/pay")]),
        ] {
            let refused = receipt_address(route, &unused).unwrap_err();
            assert!(
                refused.detail().contains("is not used"),
                "{}",
                refused.detail()
            );
        }
        // Under path scope the path is recorded as normalised.
        let by_path = config(&[("ORIGIN_URL", "http://o")]);
        let route = route_of(&by_path, &[]).unwrap();
        let written = receipt_address(route, &query(&[("key", "K"), ("path", "//pay/")])).unwrap();
        assert!(
            written
                .target
                .ends_with(&format!("path_sha256={}", crate::audit::key_sha256("/pay"))),
            "{}",
            written.target
        );
    }

    #[test]
    fn a_receipt_is_addressed_as_the_pipeline_scopes_it() {
        let config = config(&[
            ("ORIGIN_URL", "http://o"),
            ("TENANT_HEADER", "Authorization"),
        ]);
        let route = route_of(&config, &[]).unwrap();
        let tenant = sha256_hex(b"Bearer alice");
        let address = receipt_address(
            route,
            &query(&[("key", "k"), ("path", "//pay/"), ("tenant_sha256", &tenant)]),
        )
        .unwrap();
        let key = IdempotencyKey::parse("k", "test").unwrap();
        assert_eq!(
            address.object_name,
            Scope::new("default", Some("/pay"), Some(&tenant)).object_name(&key)
        );
        for missing in [
            query(&[("path", "/pay"), ("tenant_sha256", &tenant)]),
            query(&[("key", "k"), ("tenant_sha256", &tenant)]),
            query(&[("key", "k"), ("path", "/pay")]),
            query(&[
                ("key", "k"),
                ("path", "/pay"),
                ("tenant_sha256", "Bearer alice"),
            ]),
        ] {
            assert_eq!(receipt_address(route, &missing).unwrap_err().status(), 400);
        }
    }

    #[test]
    fn routes_are_named_when_there_are_several() {
        let config = config(&[
            ("ORIGIN_URL", "http://o"),
            ("ROUTES", r#"{"a":{"path":"/a"},"b":{"path":"/b"}}"#),
        ]);
        assert_eq!(
            route_of(&config, &query(&[("route", "b")])).unwrap().name,
            "b"
        );
        assert_eq!(
            route_of(&config, &query(&[("route", "c")])).unwrap_err(),
            Problem::NotFound
        );
        assert_eq!(route_of(&config, &[]).unwrap_err().status(), 400);
    }

    #[test]
    fn listings_take_a_listable_state_and_a_cursor_they_gave() {
        let config = config(&[("ORIGIN_URL", "http://o")]);
        let route = &config.routes[0];
        assert_eq!(
            listing(route, &query(&[("state", "dead")])).unwrap().state,
            "dead"
        );
        for bad in [
            query(&[("state", "completed")]),
            query(&[]),
            query(&[("state", "dead"), ("cursor", "x")]),
        ] {
            assert_eq!(listing(route, &bad).unwrap_err().status(), 400);
        }
    }

    #[test]
    fn the_summary_counts_each_route_and_ages_its_oldest_pending_receipt() {
        let counts = [
            StateCount {
                route: "stripe",
                state: "queued",
                count: 2,
                oldest_accepted_at: Some(900),
            },
            StateCount {
                route: "stripe",
                state: "failed",
                count: 1,
                oldest_accepted_at: Some(400),
            },
            StateCount {
                route: "stripe",
                state: "dead",
                count: 5,
                oldest_accepted_at: Some(1),
            },
            StateCount {
                route: "hidden",
                state: "dead",
                count: 9,
                oldest_accepted_at: Some(1),
            },
        ];
        let summary = summary(
            ["stripe", "adyen"].into_iter(),
            counts.iter().copied(),
            1_000,
        );
        assert_eq!(
            summary["routes"],
            serde_json::json!([
                {"route": "stripe", "queued": 2, "in_flight": 0, "failed": 1, "dead": 5,
                 "superseded": 0, "oldest_pending_age_ms": 600},
                {"route": "adyen", "queued": 0, "in_flight": 0, "failed": 0, "dead": 0,
                 "superseded": 0, "oldest_pending_age_ms": null}
            ]),
            "a route the token does not see is left out"
        );
    }
}
