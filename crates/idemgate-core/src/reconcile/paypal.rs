//! PayPal: `GET /v1/notifications/webhooks-events` and
//! `POST /v1/notifications/webhooks-events/{id}/resend`
//! (https://developer.paypal.com/docs/api/webhooks/v1/, as the OpenAPI file
//! https://github.com/paypal/paypal-rest-api-specifications/blob/main/openapi/notifications_webhooks_v1.json
//! describes them).
//!
//! - Authentication: OAuth client credentials: `POST /v1/oauth2/token`
//!   with Basic `client_id:secret` and `grant_type=client_credentials`
//!   gives a bearer `access_token`
//!   (https://developer.paypal.com/api/rest/authentication/). The route's
//!   `api_key` secret holds `client_id:secret`.
//! - `page_size`, `start_time` and `end_time` (RFC 3339, both inclusive),
//!   `event_type` (one name: sent only when the route names exactly one);
//!   the next page is the `links` entry with `rel` `next`, followed only on
//!   the API's own origin.
//! - An event is `{id, event_type, create_time, resource, ...}`, the
//!   webhook's body; `id` is the key. A resend (202) names the route's
//!   webhook id, so only its endpoint gets the delivery again, signed.
//! - Errors: `{name, message, debug_id}`; 401 `AUTHENTICATION_FAILURE`,
//!   429 `RATE_LIMIT_REACHED` (https://developer.paypal.com/api/rest/responses/).

use base64::Engine as _;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::source::{Endpoint, Listed, SourceEntry, TokenExchange, DAY};
use super::types::TypeFilter;
use super::wire::Window;
use super::wire::{
    bearer, is_id, on_base, query_value, ApiError, ApiRequest, ApiResponse, ListedEvent, Page,
};
use crate::time::{rfc3339, unix_seconds_or_utc};

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "paypal",
    scheme: "paypal",
    default_api_base: "https://api-m.paypal.com",
    // PayPal's dashboard keeps 30 days; its API states none.
    listed_for_seconds: 30 * DAY,
    // Up to 25 retries over three days.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Events,
    // A resend is retried like the first delivery, with the same bytes.
    retries_resends: true,
    resends_new_bytes: false,
    // The route's signing secret is the webhook id.
    endpoint: Endpoint::OrSigningSecret {
        wrong: "must be the id of the route's PayPal webhook (letters, digits, - and _), or left out to take the route's signing secret",
        valid: is_id,
    },
    error_text: &["/message", "/error_description", "/name"],
    token: Some(TokenExchange {
        request: token_request,
        read: read_token,
    }),
    list: |config, token, window, cursor| {
        list(&config.api_base, token, window, &config.types, cursor)
    },
    read_page: |config, _, response| read_page(response, &config.api_base),
    resend: Some(|config, token, event| {
        resend(&config.api_base, token, event, config.endpoint.as_deref())
    }),
};

pub(super) fn token_request(base: &str, client: &str) -> ApiRequest {
    let basic = base64::engine::general_purpose::STANDARD.encode(client);
    ApiRequest {
        method: "POST",
        url: format!("{base}/v1/oauth2/token"),
        headers: vec![
            ("authorization".into(), format!("Basic {basic}")),
            (
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
            ("accept".into(), "application/json".into()),
        ],
        body: Some("grant_type=client_credentials".into()),
    }
}

pub(super) fn read_token(response: &ApiResponse) -> Result<String, ApiError> {
    #[derive(Deserialize)]
    struct Token {
        access_token: String,
    }
    if response.status != 200 {
        let message = super::wire::json_text(
            &response.body,
            &["/error_description", "/message", "/error"],
        );
        return Err(ApiError::of(response, message));
    }
    serde_json::from_slice::<Token>(&response.body)
        .map(|token| token.access_token)
        .map_err(|_| ApiError::unreadable("no access_token"))
}

pub(super) fn list(
    base: &str,
    token: &str,
    window: Window,
    types: &TypeFilter,
    cursor: Option<&str>,
) -> ApiRequest {
    let url = cursor.map(str::to_string).unwrap_or_else(|| {
        let mut url = format!(
            "{base}/v1/notifications/webhooks-events?page_size=100&start_time={}&end_time={}",
            query_value(&rfc3339(window.from)),
            query_value(&rfc3339(window.to))
        );
        if let Some([only]) = types.exact() {
            url.push_str("&event_type=");
            url.push_str(&query_value(only));
        }
        url
    });
    ApiRequest::get(url, bearer(token))
}

#[derive(Deserialize)]
struct List<'a> {
    #[serde(borrow, default)]
    events: Vec<&'a RawValue>,
    #[serde(default)]
    links: Vec<Link>,
}

#[derive(Deserialize)]
struct Link {
    href: String,
    rel: String,
}

#[derive(Deserialize)]
struct Event {
    id: String,
    event_type: String,
    create_time: String,
}

pub(super) fn read_page(response: &ApiResponse, base: &str) -> Result<Page, ApiError> {
    if response.status != 200 {
        let message = super::wire::json_text(&response.body, &["/message", "/name"]);
        return Err(ApiError::of(response, message));
    }
    let list: List = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of events"))?;
    let mut events = Vec::with_capacity(list.events.len());
    for raw in list.events {
        let event: Event = serde_json::from_str(raw.get())
            .map_err(|_| ApiError::unreadable("an event without id, event_type or create_time"))?;
        let created = unix_seconds_or_utc(&event.create_time)
            .ok_or_else(|| ApiError::unreadable("an event's create_time is not a time"))?;
        events.push(ListedEvent {
            resend_id: Some(event.id.clone()),
            id: event.id,
            event_type: event.event_type,
            created,
            body: raw.get().as_bytes().to_vec(),
            delivered_per_provider: None,
            complete: true,
        });
    }
    let next = match list.links.into_iter().find(|link| link.rel == "next") {
        Some(link) => Some(
            on_base(&link.href, base)
                .ok_or_else(|| ApiError::unreadable("a next page on another origin"))?,
        ),
        None => None,
    };
    Ok(Page { events, next })
}

pub(super) fn resend(base: &str, token: &str, event: &str, webhook: Option<&str>) -> ApiRequest {
    let mut headers = bearer(token);
    headers.push(("content-type".into(), "application/json".into()));
    let body = serde_json::json!({ "webhook_ids": webhook.into_iter().collect::<Vec<_>>() });
    ApiRequest {
        method: "POST",
        url: format!(
            "{base}/v1/notifications/webhooks-events/{}/resend",
            query_value(event)
        ),
        headers,
        body: Some(body.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_asked_for_with_the_client_credentials() {
        let request = token_request("https://api-m.paypal.com", "id:secret");
        assert_eq!(request.headers[0].1, "Basic aWQ6c2VjcmV0");
        let token = read_token(&ApiResponse {
            status: 200,
            headers: vec![],
            body: br#"{"access_token":"A21","expires_in":32400}"#.to_vec(),
        });
        assert_eq!(token.unwrap(), "A21");
    }

    #[test]
    fn a_page_follows_the_next_link_and_resends_to_the_routes_webhook() {
        let body = br#"{"events":[{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED","create_time":"2024-01-01T00:00:00Z","resource":{}}],"count":1,
            "links":[{"href":"https://api-m.paypal.com/v1/notifications/webhooks-events?page=2","rel":"next","method":"GET"}]}"#;
        let page = read_page(
            &ApiResponse {
                status: 200,
                headers: vec![],
                body: body.to_vec(),
            },
            "https://api-m.paypal.com",
        )
        .unwrap();
        assert_eq!(page.events[0].resend_id.as_deref(), Some("WH-1"));
        assert!(page.next.unwrap().ends_with("page=2"));
        let resend = resend("https://api-m.paypal.com", "A21", "WH-1", Some("8PT"));
        assert!(resend.url.ends_with("/webhooks-events/WH-1/resend"));
        assert_eq!(resend.body.as_deref(), Some(r#"{"webhook_ids":["8PT"]}"#));
    }

    fn page_with_links(links: &str) -> Page {
        let body = format!(
            r#"{{"events":[{{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED","create_time":"2024-01-01T00:00:00Z","resource":{{}}}}],"count":1,"links":{links}}}"#
        );
        let response = ApiResponse {
            status: 200,
            headers: vec![],
            body: body.into_bytes(),
        };
        read_page(&response, "https://api-m.paypal.com").unwrap()
    }

    /// PayPal's pages carry `self` (and others) beside `next`, in any
    /// order: only `next` is followed, and a page with only `self` is
    /// the last (List event notifications, "links" in the response).
    #[test]
    fn only_the_next_link_is_followed_whatever_else_the_page_links() {
        let page = page_with_links(
            r#"[{"href":"https://api-m.paypal.com/v1/notifications/webhooks-events?page=2","rel":"next","method":"GET"},
                {"href":"https://api-m.paypal.com/v1/notifications/webhooks-events?page=1","rel":"self","method":"GET"}]"#,
        );
        assert!(page.next.unwrap().ends_with("page=2"));
        let last = page_with_links(
            r#"[{"href":"https://api-m.paypal.com/v1/notifications/webhooks-events?page=3","rel":"self","method":"GET"}]"#,
        );
        assert_eq!(last.next, None);
    }
}
