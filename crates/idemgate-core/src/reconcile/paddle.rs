//! Paddle Billing: notifications, not events. `GET /events` has no time
//! filter; `GET /notifications` has one, and a notification names the
//! destination it went to, so a run lists the route's own
//! (https://developer.paddle.com/api-reference/notifications/list-notifications)
//! and replays the one that never arrived
//! (https://developer.paddle.com/api-reference/notifications/replay-notification).
//!
//! - Authentication: `Authorization: Bearer <API key>`; a key with
//!   `notification.write` (which includes read) and nothing else. A bad key
//!   is a 403, not a 401 (https://developer.paddle.com/errors/shared/invalid_token).
//! - `notification_setting_id` (the route's destination, `endpoint`),
//!   `from` and `to` (RFC 3339), `per_page` (Paddle allows 200; a run asks
//!   for 100, the most its page budget counts), `order_by=id[DESC]`;
//!   the next page is `meta.pagination.next`, a whole URL, followed only on
//!   the API's own origin (https://developer.paddle.com/api-reference/about/pagination).
//! - A notification is `{id, type, status, payload, occurred_at, origin}`;
//!   `payload` is the webhook's body, whose `event_id` is the key. Only a
//!   notification of `origin` `event` whose status is `delivered` or
//!   `failed` can be replayed; one Paddle still retries (`needs_retry`,
//!   `not_attempted`) is left to Paddle. A replay answers 202 and sends a
//!   new notification of the same event, signed.
//! - Kept for 90 days. Errors: `{"error": {"type", "code", "detail"}}`;
//!   429 with `Retry-After`.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::source::{Endpoint, Listed, SourceEntry, DAY};
use super::wire::Window;
use super::wire::{
    bearer, is_id, on_base, query_value, ApiError, ApiRequest, ApiResponse, ListedEvent, Page,
};
use crate::time::{rfc3339, unix_seconds_or_utc};

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "paddle",
    scheme: "paddle",
    default_api_base: "https://api.paddle.com",
    listed_for_seconds: 90 * DAY,
    // A live account's notification is retried over three days.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Events,
    // A replay is a new notification, which Paddle retries as any other,
    // with its own `notification_id` in the body.
    retries_resends: true,
    resends_new_bytes: true,
    endpoint: Endpoint::Required {
        what: "the notification destination's id (ntfset_...)",
        valid: is_id,
    },
    error_text: &["/error/detail", "/error/code"],
    token: None,
    list: |config, key, window, cursor| {
        let destination = config.endpoint.as_deref().unwrap_or_default();
        list(&config.api_base, key, window, destination, cursor)
    },
    read_page: |config, _, response| read_page(response, &config.api_base),
    resend: Some(|config, key, notification| resend(&config.api_base, key, notification)),
};

pub(super) fn list(
    base: &str,
    key: &str,
    window: Window,
    destination: &str,
    cursor: Option<&str>,
) -> ApiRequest {
    // The cursor is the `next` link Paddle gave, checked to be on `base`.
    let url = cursor.map(str::to_string).unwrap_or_else(|| {
        format!(
            "{base}/notifications?notification_setting_id={}&from={}&to={}&per_page=100&order_by=id%5BDESC%5D",
            query_value(destination),
            query_value(&rfc3339(window.from)),
            query_value(&rfc3339(window.to))
        )
    });
    let mut headers = bearer(key);
    headers.push(("paddle-version".into(), "1".into()));
    ApiRequest::get(url, headers)
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow)]
    data: Vec<Notification<'a>>,
    meta: Meta,
}

#[derive(Deserialize)]
struct Meta {
    pagination: Pagination,
}

#[derive(Deserialize)]
struct Pagination {
    #[serde(default)]
    next: Option<String>,
    has_more: bool,
}

#[derive(Deserialize)]
struct Notification<'a> {
    id: String,
    #[serde(rename = "type")]
    event_type: String,
    status: String,
    origin: String,
    occurred_at: String,
    #[serde(borrow)]
    payload: &'a RawValue,
}

#[derive(Deserialize)]
struct Payload {
    event_id: String,
}

pub(super) fn read_page(response: &ApiResponse, base: &str) -> Result<Page, ApiError> {
    if response.status != 200 {
        let message = super::wire::json_text(&response.body, &["/error/detail", "/error/code"]);
        return Err(ApiError::of(response, message));
    }
    let list: List = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of notifications"))?;
    let mut events = Vec::new();
    for notification in list.data {
        let replayable = notification.origin == "event"
            && matches!(notification.status.as_str(), "delivered" | "failed");
        if !replayable {
            continue;
        }
        let payload: Payload = serde_json::from_str(notification.payload.get())
            .map_err(|_| ApiError::unreadable("a notification's payload has no event_id"))?;
        let created = unix_seconds_or_utc(&notification.occurred_at)
            .ok_or_else(|| ApiError::unreadable("a notification's occurred_at is not a time"))?;
        events.push(ListedEvent {
            id: payload.event_id,
            event_type: notification.event_type,
            created,
            body: notification.payload.get().as_bytes().to_vec(),
            resend_id: Some(notification.id),
            delivered_per_provider: None,
            complete: true,
        });
    }
    let next = match list.meta.pagination.has_more {
        true => match list.meta.pagination.next {
            Some(next) => Some(
                on_base(&next, base)
                    .ok_or_else(|| ApiError::unreadable("a next page on another origin"))?,
            ),
            None => None,
        },
        false => None,
    };
    Ok(Page { events, next })
}

pub(super) fn resend(base: &str, key: &str, notification: &str) -> ApiRequest {
    ApiRequest {
        method: "POST",
        url: format!("{base}/notifications/{}/replay", query_value(notification)),
        headers: bearer(key),
        body: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_replayable_notifications_of_events_are_listed() {
        let body = br#"{"data":[
            {"id":"ntf_1","type":"transaction.completed","status":"failed","origin":"event","occurred_at":"2024-01-01T00:00:10Z","payload":{"event_id":"evt_1","event_type":"transaction.completed","data":{}}},
            {"id":"ntf_2","type":"transaction.completed","status":"delivered","origin":"replay","occurred_at":"2024-01-01T00:00:10Z","payload":{"event_id":"evt_1"}},
            {"id":"ntf_3","type":"transaction.paid","status":"needs_retry","origin":"event","occurred_at":"2024-01-01T00:00:10Z","payload":{"event_id":"evt_3"}}
        ],"meta":{"pagination":{"per_page":200,"next":"https://api.paddle.com/notifications?after=ntf_3","has_more":true}}}"#;
        let page = read_page(
            &ApiResponse {
                status: 200,
                headers: vec![],
                body: body.to_vec(),
            },
            "https://api.paddle.com",
        )
        .unwrap();
        assert_eq!(page.events.len(), 1);
        assert_eq!(page.events[0].id, "evt_1");
        assert_eq!(page.events[0].resend_id.as_deref(), Some("ntf_1"));
        assert_eq!(
            page.next.as_deref(),
            Some("https://api.paddle.com/notifications?after=ntf_3")
        );
        let elsewhere = String::from_utf8_lossy(body)
            .replace("https://api.paddle.com/", "https://evil.example/");
        assert!(read_page(
            &ApiResponse {
                status: 200,
                headers: vec![],
                body: elsewhere.into_bytes()
            },
            "https://api.paddle.com"
        )
        .is_err());
    }

    #[test]
    fn the_first_page_names_the_destination_and_the_window() {
        let request = list(
            "https://api.paddle.com",
            "pdl_key",
            Window { from: 0, to: 60 },
            "ntfset_1",
            None,
        );
        assert!(request.url.contains("notification_setting_id=ntfset_1&from=1970-01-01T00%3A00%3A00Z&to=1970-01-01T00%3A01%3A00Z"));
        assert_eq!(
            resend("https://api.paddle.com", "k", "ntf_1").url,
            "https://api.paddle.com/notifications/ntf_1/replay"
        );
    }
}
