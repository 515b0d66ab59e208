//! Square: `POST /v2/events`, Search events
//! (https://developer.squareup.com/reference/square/events-api/search-events).
//!
//! - Authentication: `Authorization: Bearer <personal access token>` with
//!   `Square-Version`; OAuth tokens cannot search events, and the events
//!   API must have been enabled once (`PUT /v2/events/enable`): only
//!   events that happened while it was enabled are listed
//!   (https://developer.squareup.com/docs/events-api/overview).
//! - Pages of up to 100 (`limit`); the answer's `cursor` goes back with the
//!   same `query` for the next page, and is absent on the last.
//! - `query.filter.created_at {start_at, end_at}` (RFC 3339) and
//!   `event_types` (exact names); `query.sort` newest first.
//! - Events are searchable for 28 days. Errors are
//!   `{"errors": [{"category", "code", "detail"}]}` with 401, 403, 429 and
//!   5xx (https://developer.squareup.com/docs/build-basics/handling-errors).
//! - The webhook's body is `merchant_id`, `type`, `event_id`, `created_at`
//!   and `data` of the event (https://developer.squareup.com/reference/square/webhooks/order.updated):
//!   built from the listed event's own values, each as the API wrote it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::source::{Endpoint, Listed, SourceEntry, DAY};
use super::types::TypeFilter;
use super::wire::Window;
use super::wire::{bearer, ApiError, ApiRequest, ApiResponse, ListedEvent, Page};
use crate::time::{rfc3339, unix_seconds_or_utc};

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "square",
    scheme: "square",
    default_api_base: "https://connect.squareup.com",
    listed_for_seconds: 28 * DAY,
    // Retried for up to 72 hours after the event.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Events,
    retries_resends: false,
    resends_new_bytes: false,
    endpoint: Endpoint::Unused,
    error_text: &["/errors/0/detail", "/errors/0/code"],
    token: None,
    list: |config, key, window, cursor| list(&config.api_base, key, window, &config.types, cursor),
    read_page: |_, _, response| read_page(response),
    // The event is delivered as the list holds it.
    resend: None,
};

/// The Square API version the requests name.
const SQUARE_VERSION: &str = "2025-10-16";

pub(super) fn list(
    base: &str,
    token: &str,
    window: Window,
    types: &TypeFilter,
    cursor: Option<&str>,
) -> ApiRequest {
    let mut filter = serde_json::json!({
        "created_at": { "start_at": rfc3339(window.from), "end_at": rfc3339(window.to) }
    });
    if let Some(names) = types.exact() {
        filter["event_types"] = serde_json::json!(names);
    }
    let mut body = serde_json::json!({
        "limit": 100,
        "query": { "filter": filter, "sort": { "field": "DEFAULT", "order": "DESC" } }
    });
    if let Some(cursor) = cursor {
        body["cursor"] = serde_json::json!(cursor);
    }
    let mut headers = bearer(token);
    headers.push(("square-version".into(), SQUARE_VERSION.into()));
    headers.push(("content-type".into(), "application/json".into()));
    ApiRequest {
        method: "POST",
        url: format!("{base}/v2/events"),
        headers,
        body: Some(body.to_string()),
    }
}

#[derive(Deserialize)]
struct Search<'a> {
    #[serde(borrow, default)]
    events: Vec<Event<'a>>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(borrow)]
    merchant_id: Option<&'a RawValue>,
    #[serde(rename = "type")]
    event_type: String,
    event_id: String,
    created_at: String,
    #[serde(borrow)]
    data: &'a RawValue,
}

pub(super) fn read_page(response: &ApiResponse) -> Result<Page, ApiError> {
    if response.status != 200 {
        let message =
            super::wire::json_text(&response.body, &["/errors/0/detail", "/errors/0/code"]);
        return Err(ApiError::of(response, message));
    }
    let search: Search = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of events"))?;
    let mut events = Vec::with_capacity(search.events.len());
    for event in search.events {
        let created = unix_seconds_or_utc(&event.created_at)
            .ok_or_else(|| ApiError::unreadable("an event's created_at is not a time"))?;
        let text = |value: &str| serde_json::to_string(value).expect("a string serializes");
        let body = format!(
            "{{\"merchant_id\":{},\"type\":{},\"event_id\":{},\"created_at\":{},\"data\":{}}}",
            event.merchant_id.map_or("null", |raw| raw.get()),
            text(&event.event_type),
            text(&event.event_id),
            text(&event.created_at),
            event.data.get()
        );
        events.push(ListedEvent {
            id: event.event_id,
            event_type: event.event_type,
            created,
            body: body.into_bytes(),
            resend_id: None,
            delivered_per_provider: None,
            complete: true,
        });
    }
    let next = search.cursor.filter(|cursor| !cursor.is_empty());
    Ok(Page { events, next })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_sends_the_window_the_types_and_the_cursor() {
        let types = TypeFilter::parse(&["payment.updated".into()]).unwrap();
        let request = list(
            "https://connect.squareup.com",
            "EAAA",
            Window {
                from: 0,
                to: 86_400,
            },
            &types,
            Some("c1"),
        );
        assert_eq!(request.method, "POST");
        let body: serde_json::Value =
            serde_json::from_str(request.body.as_deref().unwrap()).unwrap();
        assert_eq!(
            body["query"]["filter"]["created_at"]["end_at"],
            "1970-01-02T00:00:00Z"
        );
        assert_eq!(body["query"]["filter"]["event_types"][0], "payment.updated");
        assert_eq!(body["cursor"], "c1");
    }

    #[test]
    fn the_webhook_body_is_rebuilt_from_the_events_own_values() {
        let body = br#"{"events":[{"merchant_id":"M1","location_id":"L1","type":"payment.updated","event_id":"e-1","created_at":"2022-04-26T10:08:40.454726","data":{"type":"payment","id":"p1","object":{"payment":{"amount_money":{"amount":100}}}}}],"cursor":""}"#;
        let page = read_page(&ApiResponse {
            status: 200,
            headers: vec![],
            body: body.to_vec(),
        })
        .unwrap();
        assert_eq!(page.next, None);
        let event = &page.events[0];
        assert_eq!(event.id, "e-1");
        assert_eq!(
            String::from_utf8_lossy(&event.body),
            r#"{"merchant_id":"M1","type":"payment.updated","event_id":"e-1","created_at":"2022-04-26T10:08:40.454726","data":{"type":"payment","id":"p1","object":{"payment":{"amount_money":{"amount":100}}}}}"#
        );
    }
}
