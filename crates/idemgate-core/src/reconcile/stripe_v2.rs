//! Stripe's thin events: `GET /v2/core/events`
//! (https://docs.stripe.com/api/v2/core/events/list), the list of what an
//! event destination with the thin payload delivers. `stripe` lists
//! `/v1/events`, the snapshot events of webhook endpoints; both kinds are
//! signed with the same `Stripe-Signature`, so a route reconciled from
//! either verifies `signature = "stripe"`.
//!
//! - Authentication: `Authorization: Bearer <key>`, with `Stripe-Version`
//!   as the reference's examples of the v2 namespace send it; that
//!   namespace takes secret keys only, not restricted ones
//!   (https://docs.stripe.com/api-v2-overview).
//! - Pages: `limit` (the reference states no most page size; a run asks
//!   for 20), newest first. The answer's `next_page_url` is the next
//!   page: a path on the API holding its `page` token, followed as given
//!   (stripe-node's list iterator follows it so, adding nothing), and
//!   `null` on the last.
//! - Time: `created[gte]` and `created[lt]`, RFC 3339 (the v2 namespace's
//!   timestamps, to the millisecond): the window's last second is listed
//!   whole by asking for what is older than the second after it.
//! - Types: `types`, up to 20 exact names, repeated
//!   (`types=a&types=b`, as stripe-python sends an array to the v2
//!   namespace); a wildcard is filtered here.
//! - Events are listed for 30 days. Errors are
//!   `{"error": {"type", "code", "message"}}`: 401 for a bad key, 403, 429
//!   when rate limited, 5xx (https://docs.stripe.com/api/errors).
//! - The list holds more than the delivery: `data` and `changes` are
//!   fetched attributes, which only the API renders
//!   (https://docs.stripe.com/api/v2/core/events/event-types). The body a
//!   run delivers is the listed event without them: every other member as
//!   the API wrote it, in its order, which is the thin event the
//!   destination posts.

use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::source::{Endpoint, Listed, SourceEntry, DAY};
use super::types::TypeFilter;
use super::wire::Window;
use super::wire::{
    bearer, json_text, on_base, query_value, ApiError, ApiRequest, ApiResponse, ListedEvent, Page,
};
use crate::time::{rfc3339, unix_seconds};

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "stripe-v2",
    // An event destination's thin events are signed as webhooks are.
    scheme: "stripe",
    default_api_base: "https://api.stripe.com",
    listed_for_seconds: 30 * DAY,
    // An event destination retries for up to three days, as a webhook
    // endpoint does.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Events,
    retries_resends: false,
    resends_new_bytes: false,
    endpoint: Endpoint::Unused,
    error_text: ERROR_TEXT,
    token: None,
    list: |config, key, window, cursor| list(&config.api_base, key, window, &config.types, cursor),
    read_page: |config, _, response| read_page(response, &config.api_base),
    // The event is delivered as its destination posts it.
    resend: None,
};

/// The API version the requests name: the one stripe-node 23.1.0 (the
/// official-library test's) pins, whose `/v2/core/events` takes
/// `created`, `types` and `limit`.
pub(super) const STRIPE_VERSION: &str = "2026-10-28.endive";
/// Events a page asks for.
const PAGE_SIZE: u32 = 20;
/// Stripe's most exact names in `types`.
const MOST_TYPES: usize = 20;
/// The members only the API renders: not in the destination's body.
const FETCHED_ONLY: &[&str] = &["data", "changes"];
const ERROR_TEXT: &[&str] = &["/error/message", "/error/code"];

pub(super) fn list(
    base: &str,
    key: &str,
    window: Window,
    types: &TypeFilter,
    cursor: Option<&str>,
) -> ApiRequest {
    // The cursor is the `next_page_url` Stripe gave, made whole on `base`.
    let url = cursor.map(str::to_string).unwrap_or_else(|| {
        let mut url = format!(
            "{base}/v2/core/events?limit={PAGE_SIZE}&created%5Bgte%5D={}&created%5Blt%5D={}",
            query_value(&rfc3339(window.from)),
            query_value(&rfc3339(window.to.saturating_add(1)))
        );
        if let Some(names) = types.exact().filter(|names| names.len() <= MOST_TYPES) {
            for name in names {
                url.push_str("&types=");
                url.push_str(&query_value(name));
            }
        }
        url
    });
    let mut headers = bearer(key);
    headers.push(("stripe-version".into(), STRIPE_VERSION.into()));
    ApiRequest::get(url, headers)
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    #[serde(default)]
    next_page_url: Option<String>,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    created: String,
}

pub(super) fn read_page(response: &ApiResponse, base: &str) -> Result<Page, ApiError> {
    if response.status != 200 {
        return Err(ApiError::of(
            response,
            json_text(&response.body, ERROR_TEXT),
        ));
    }
    let list: List = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of events"))?;
    let mut events = Vec::with_capacity(list.data.len());
    for raw in list.data {
        let event: Event = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::unreadable("an event without id, type or created"))?;
        let created = unix_seconds(&event.created)
            .ok_or_else(|| ApiError::unreadable("an event's created is not a time"))?;
        events.push(ListedEvent {
            id: event.id,
            event_type: event.event_type,
            created,
            body: delivered_body(raw)?.into_bytes(),
            resend_id: None,
            delivered_per_provider: None,
            complete: true,
        });
    }
    let next = match list.next_page_url.filter(|url| !url.is_empty()) {
        Some(url) => Some(
            next_page(&url, base)
                .ok_or_else(|| ApiError::unreadable("a next page on another origin"))?,
        ),
        None => None,
    };
    Ok(Page { events, next })
}

/// The next page's whole URL: `next_page_url` is a path on the API (a
/// whole URL is taken only on `base`: the key goes nowhere else).
fn next_page(url: &str, base: &str) -> Option<String> {
    match url.strip_prefix('/') {
        Some(rest) if !rest.starts_with('/') => Some(format!("{base}{url}")),
        Some(_) => None,
        None => on_base(url, base),
    }
}

/// The thin event the destination posts: the listed event without the
/// members only the API renders, the others byte for byte in their order.
fn delivered_body(event: &RawValue) -> Result<String, ApiError> {
    let Members(members) = serde_json::from_str(event.get())
        .map_err(|_| ApiError::unreadable("an event is not an object"))?;
    let kept: Vec<String> = members
        .into_iter()
        .filter(|(name, _)| !FETCHED_ONLY.contains(&name.as_str()))
        .map(|(name, value)| {
            let name = serde_json::to_string(&name).expect("a string serializes");
            format!("{name}:{}", value.get())
        })
        .collect();
    Ok(format!("{{{}}}", kept.join(",")))
}

/// An object's members in the order written, each value as written.
struct Members<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InOrder;
        impl<'de> Visitor<'de> for InOrder {
            type Value = Members<'de>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Members<'de>, M::Error> {
                let mut members = Vec::new();
                while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(Members(members))
            }
        }
        deserializer.deserialize_map(InOrder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "https://api.stripe.com";

    fn types(names: &[&str]) -> TypeFilter {
        TypeFilter::parse(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn ok(body: &str) -> ApiResponse {
        ApiResponse {
            status: 200,
            headers: vec![],
            body: body.as_bytes().to_vec(),
        }
    }

    /// A listed thin event, as the reference's example renders it.
    fn listed(id: &str, created: &str) -> String {
        format!(
            r#"{{"id":"{id}","object":"v2.core.event","context":null,"created":"{created}","data":{{"developer_message_summary":"There is 1 invalid event","reason":{{"error_count":1}}}},"livemode":false,"reason":null,"related_object":{{"id":"mtr_test_61RCjiqdTDC91zgip41IqPCzPnxqqSVc","type":"billing.meter","url":"/v1/billing/meters/mtr_test_61RCjiqdTDC91zgip41IqPCzPnxqqSVc"}},"type":"v1.billing.meter.error_report_triggered"}}"#
        )
    }

    #[test]
    fn the_first_page_asks_for_the_window_in_rfc_3339_and_the_exact_types() {
        let window = Window {
            from: 1_796_464_800,
            to: 1_796_468_400,
        };
        let request = list(
            BASE,
            "sk_test_v2",
            window,
            &types(&[
                "v1.billing.meter.error_report_triggered",
                "v2.core.event_destination.ping",
            ]),
            None,
        );
        assert_eq!(request.method, "GET");
        assert_eq!(
            request.url,
            "https://api.stripe.com/v2/core/events?limit=20&created%5Bgte%5D=2026-12-05T10%3A00%3A00Z&created%5Blt%5D=2026-12-05T11%3A00%3A01Z&types=v1.billing.meter.error_report_triggered&types=v2.core.event_destination.ping"
        );
        assert_eq!(
            request.headers,
            [
                ("authorization".to_string(), "Bearer sk_test_v2".to_string()),
                ("accept".to_string(), "application/json".to_string()),
                ("stripe-version".to_string(), STRIPE_VERSION.to_string()),
            ]
        );
        // A wildcard, or more than 20 names, is filtered here, not asked.
        let wildcard = list(BASE, "k", window, &types(&["v1.billing.*"]), None);
        assert!(!wildcard.url.contains("types"), "{}", wildcard.url);
        let names: Vec<String> = (0..21).map(|i| format!("v2.core.t{i}")).collect();
        let many = TypeFilter::parse(&names).unwrap();
        assert!(!list(BASE, "k", window, &many, None).url.contains("types"));
    }

    #[test]
    fn a_later_page_is_the_next_page_url_as_given_with_the_same_headers() {
        let window = Window { from: 0, to: 60 };
        let next = "https://api.stripe.com/v2/core/events?limit=20&page=page_3nxpUhI0cLvyM";
        let request = list(BASE, "sk_test_v2", window, &types(&["*"]), Some(next));
        assert_eq!(request.url, next);
        assert_eq!(request.headers[2].0, "stripe-version");
    }

    #[test]
    fn a_page_delivers_each_listed_event_as_its_destination_posts_it() {
        let body = format!(
            r#"{{"data":[{},{}],"next_page_url":"/v2/core/events?limit=20&page=page_3nxpUhI0cLvyM","previous_page_url":null}}"#,
            listed("evt_test_2", "2026-12-05T10:00:01.999Z"),
            listed("evt_test_1", "2026-12-05T10:00:00.000Z"),
        );
        let page = read_page(&ok(&body), BASE).unwrap();
        assert_eq!(page.events.len(), 2);
        let event = &page.events[0];
        assert_eq!(event.id, "evt_test_2");
        assert_eq!(event.event_type, "v1.billing.meter.error_report_triggered");
        assert_eq!(
            event.created, 1_796_464_801,
            "its second, the fraction dropped"
        );
        assert_eq!(event.resend_id, None);
        // The fetched `data` is gone; the rest is byte for byte, in order.
        assert_eq!(
            String::from_utf8_lossy(&event.body),
            r#"{"id":"evt_test_2","object":"v2.core.event","context":null,"created":"2026-12-05T10:00:01.999Z","livemode":false,"reason":null,"related_object":{"id":"mtr_test_61RCjiqdTDC91zgip41IqPCzPnxqqSVc","type":"billing.meter","url":"/v1/billing/meters/mtr_test_61RCjiqdTDC91zgip41IqPCzPnxqqSVc"},"type":"v1.billing.meter.error_report_triggered"}"#
        );
        assert_eq!(
            page.next.as_deref(),
            Some("https://api.stripe.com/v2/core/events?limit=20&page=page_3nxpUhI0cLvyM")
        );
        // The last page.
        let last = read_page(
            &ok(
                r#"{"data":[],"next_page_url":null,"previous_page_url":"/v2/core/events?page=p1"}"#,
            ),
            BASE,
        )
        .unwrap();
        assert_eq!(last, Page::default());
    }

    #[test]
    fn changes_and_a_member_with_escapes_are_handled_as_the_api_wrote_them() {
        let event = r#"{"id":"evt_test_3","object":"v2.core.event","changes":{"before":{"x":1},"after":{"x":2}},"created":"2026-12-05T10:00:00Z","type":"v2.core.account.updated","related_object":{"id":"acct_1","type":"v2.core.account","url":"/v2/core/accounts/acct_1"},"context":"acct_1\u00e9","reason":{"type":"request","request":{"id":"req_v2x","idempotency_key":"k \"q\""}}}"#;
        let page = read_page(&ok(&format!(r#"{{"data":[{event}]}}"#)), BASE).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&page.events[0].body),
            r#"{"id":"evt_test_3","object":"v2.core.event","created":"2026-12-05T10:00:00Z","type":"v2.core.account.updated","related_object":{"id":"acct_1","type":"v2.core.account","url":"/v2/core/accounts/acct_1"},"context":"acct_1\u00e9","reason":{"type":"request","request":{"id":"req_v2x","idempotency_key":"k \"q\""}}}"#
        );
        assert_eq!(page.next, None, "no next_page_url: the last page");
    }

    #[test]
    fn a_next_page_off_the_api_is_refused_before_the_key_goes_there() {
        for next in [
            "https://evil.example/v2/core/events?page=p2",
            "//evil.example/v2/core/events?page=p2",
            "https://api.stripe.com.evil.example/v2/core/events",
        ] {
            let body = format!(r#"{{"data":[],"next_page_url":"{next}"}}"#);
            let error = read_page(&ok(&body), BASE).unwrap_err();
            assert_eq!(error.status, 200, "{next}");
            assert!(error.problem.contains("another origin"), "{next}");
        }
        let whole =
            r#"{"data":[],"next_page_url":"https://api.stripe.com/v2/core/events?page=p2"}"#;
        assert_eq!(
            read_page(&ok(whole), BASE).unwrap().next.as_deref(),
            Some("https://api.stripe.com/v2/core/events?page=p2")
        );
    }

    #[test]
    fn an_error_says_stripes_message_or_its_code() {
        let refused = ApiResponse {
            status: 401,
            headers: vec![],
            body: br#"{"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Invalid API Key provided: sk_test_****1234"}}"#.to_vec(),
        };
        let error = read_page(&refused, BASE).unwrap_err();
        assert_eq!(error.status, 401);
        assert!(error.problem.starts_with("Invalid API Key"));
        assert!(!error.backs_off());
        let busy = ApiResponse {
            status: 429,
            headers: vec![("retry-after".into(), "30".into())],
            body: br#"{"error":{"type":"rate_limit_error","code":"rate_limited"}}"#.to_vec(),
        };
        let error = read_page(&busy, BASE).unwrap_err();
        assert_eq!(error.problem, "rate_limited");
        assert!(error.backs_off());
    }

    #[test]
    fn an_event_without_a_readable_created_is_unreadable_not_skipped() {
        for event in [
            r#"{"id":"evt_1","type":"t","created":1796464800}"#,
            r#"{"id":"evt_1","type":"t","created":"yesterday"}"#,
            r#"{"type":"t","created":"2026-12-05T10:00:00Z"}"#,
        ] {
            let error = read_page(&ok(&format!(r#"{{"data":[{event}]}}"#)), BASE).unwrap_err();
            assert!(error.problem.contains("could not be read"), "{event}");
        }
        assert!(read_page(&ok(r#"{"object":"list"}"#), BASE).is_err());
    }
}
