//! Stripe: `GET /v1/events` (https://docs.stripe.com/api/events/list).
//!
//! - Authentication: `Authorization: Bearer <key>`; a restricted key
//!   (`rk_…`) with read access to Events and nothing else is enough.
//! - Pages of up to 100 (`limit`), newest first; the next page is
//!   `starting_after=<the last event's id>` while `has_more`
//!   (https://docs.stripe.com/api/pagination).
//! - Time: `created[gte]` and `created[lte]`, Unix seconds, both inclusive.
//! - Types: `types[]`, up to 20 exact names; a wildcard is filtered here.
//! - Events are listed for 30 days. Errors are
//!   `{"error": {"type", "message", ...}}`: 401 for a bad key, 403 for a
//!   key without permission, 429 when rate limited, 5xx
//!   (https://docs.stripe.com/api/errors).
//! - The webhook's body is the Event object itself
//!   (https://docs.stripe.com/api/events/object): the event is delivered
//!   byte for byte as the list holds it. Its `pending_webhooks` counts
//!   what Stripe has yet to deliver, and an endpoint pinned to another API
//!   version gets `data` in that version's shape: the origin sees the
//!   event as the API renders it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::source::{Endpoint, Listed, SourceEntry, DAY};
use super::types::TypeFilter;
use super::wire::Window;
use super::wire::{bearer, query_value, ApiError, ApiRequest, ApiResponse, ListedEvent, Page};

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "stripe",
    scheme: "stripe",
    default_api_base: "https://api.stripe.com",
    listed_for_seconds: 30 * DAY,
    // Live-mode deliveries are retried for up to three days.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Events,
    retries_resends: false,
    resends_new_bytes: false,
    endpoint: Endpoint::Unused,
    error_text: &["/error/message"],
    token: None,
    list: |config, key, window, cursor| list(&config.api_base, key, window, &config.types, cursor),
    read_page: |_, _, response| read_page(response),
    // The event is delivered as the list holds it.
    resend: None,
};

/// Stripe's most per page.
const PAGE_SIZE: u32 = 100;
/// Stripe's most exact names in `types[]`.
const MOST_TYPES: usize = 20;

pub(super) fn list(
    base: &str,
    key: &str,
    window: Window,
    types: &TypeFilter,
    cursor: Option<&str>,
) -> ApiRequest {
    let mut url = format!(
        "{base}/v1/events?limit={PAGE_SIZE}&created%5Bgte%5D={}&created%5Blte%5D={}",
        window.from, window.to
    );
    if let Some(names) = types.exact().filter(|names| names.len() <= MOST_TYPES) {
        for name in names {
            url.push_str("&types%5B%5D=");
            url.push_str(&query_value(name));
        }
    }
    if let Some(after) = cursor {
        url.push_str("&starting_after=");
        url.push_str(&query_value(after));
    }
    ApiRequest::get(url, bearer(key))
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    has_more: bool,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    created: u64,
}

pub(super) fn read_page(response: &ApiResponse) -> Result<Page, ApiError> {
    if response.status != 200 {
        let message = super::wire::json_text(&response.body, &["/error/message"]);
        return Err(ApiError::of(response, message));
    }
    let list: List = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of events"))?;
    let mut events = Vec::with_capacity(list.data.len());
    for raw in list.data {
        let event: Event = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::unreadable("an event without id, type or created"))?;
        events.push(ListedEvent {
            id: event.id,
            event_type: event.event_type,
            created: event.created,
            body: raw.get().as_bytes().to_vec(),
            resend_id: None,
            delivered_per_provider: None,
            complete: true,
        });
    }
    let next = match list.has_more {
        true => events.last().map(|event| event.id.clone()),
        false => None,
    };
    Ok(Page { events, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(names: &[&str]) -> TypeFilter {
        TypeFilter::parse(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_list_asks_for_the_window_and_exact_types() {
        let window = Window { from: 10, to: 20 };
        let request = list(
            "https://api.stripe.com",
            "rk_test",
            window,
            &types(&["charge.refunded"]),
            Some("evt_9"),
        );
        assert_eq!(
            request.url,
            "https://api.stripe.com/v1/events?limit=100&created%5Bgte%5D=10&created%5Blte%5D=20&types%5B%5D=charge.refunded&starting_after=evt_9"
        );
        assert_eq!(
            request.headers[0],
            ("authorization".into(), "Bearer rk_test".into())
        );
        let wildcard = list(
            "https://api.stripe.com",
            "k",
            window,
            &types(&["charge.*"]),
            None,
        );
        assert!(!wildcard.url.contains("types"));
    }

    #[test]
    fn a_page_keeps_each_event_byte_for_byte_and_its_last_id_as_the_cursor() {
        let body = br#"{"object":"list","data":[{"id":"evt_2","type":"charge.refunded","created":15,"data":{"object":{"id":"ch_1"}}},
            {"created":12, "id":"evt_1","type":"payment_intent.succeeded"}],"has_more":true}"#;
        let page = read_page(&ApiResponse {
            status: 200,
            headers: vec![],
            body: body.to_vec(),
        })
        .unwrap();
        assert_eq!(page.events.len(), 2);
        assert_eq!(
            page.events[1].body,
            br#"{"created":12, "id":"evt_1","type":"payment_intent.succeeded"}"#
        );
        assert_eq!(page.events[0].created, 15);
        assert_eq!(page.next.as_deref(), Some("evt_1"));
        let last = br#"{"data":[],"has_more":false}"#;
        let page = read_page(&ApiResponse {
            status: 200,
            headers: vec![],
            body: last.to_vec(),
        })
        .unwrap();
        assert_eq!(page.next, None);
    }

    #[test]
    fn an_error_says_stripes_message() {
        let body = br#"{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: rk_test_****1234"}}"#;
        let error = read_page(&ApiResponse {
            status: 401,
            headers: vec![],
            body: body.to_vec(),
        })
        .unwrap_err();
        assert_eq!(error.status, 401);
        assert!(error.problem.starts_with("Invalid API Key"));
    }
}
