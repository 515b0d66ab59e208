//! GitHub: a hook's deliveries
//! (https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook,
//! the same under `orgs/ORG/hooks/ID` and `app/hook`), and their
//! redelivery (`POST …/deliveries/{id}/attempts`, 202).
//!
//! - Authentication: `Authorization: Bearer <token>`: a fine-grained token
//!   with the repository's (or organisation's) Webhooks permission, write
//!   (redelivery needs it); an app's own hook takes the app's JWT.
//! - Pages of up to 100 (`per_page`), newest first, the next one in the
//!   `Link` header's `rel="next"`, followed only on the API's own origin
//!   (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api).
//! - No time filter: a run pages back until a delivery is older than its
//!   window. No type filter: the type is the delivery's `event`, then `.`
//!   and its `action` when it has one (`pull_request.opened`).
//! - Deliveries are kept, and can be redelivered, for 3 days.
//! - An event's deliveries may span pages (a redelivery by hand on the
//!   first, its first delivery on the third): an event listed only by its
//!   redeliveries is held by the run until its first delivery is listed,
//!   and is then settled by all of them and placed in the window by its
//!   first delivery's time. One whose first delivery is not listed in the
//!   window is not the window's.
//! - What a run cannot see: the list has no body, and a GitHub route's key
//!   is the hash of the raw body, so no receipt can be looked up. GitHub's
//!   own record answers instead: an event (`guid`, shared by its
//!   redeliveries) with a delivery idemgate answered 2xx (or a 4xx a
//!   redelivery would get again) arrived; one without is redelivered, and arrives through the route, where a body
//!   that did arrive after all is a duplicate, answered from its receipt.

use serde::Deserialize;

use super::source::{Endpoint, Listed, ReconcileConfig, SourceEntry, DAY};
use super::wire::Window;
use super::wire::{on_base, ApiError, ApiRequest, ApiResponse, ListedEvent, Page};
use crate::time::unix_seconds_or_utc;

pub(super) const SOURCE: SourceEntry = SourceEntry {
    name: "github",
    scheme: "github",
    default_api_base: "https://api.github.com",
    listed_for_seconds: 3 * DAY,
    // GitHub retries nothing itself, but a delivery can be redelivered by
    // hand while it is listed: three days.
    retry_horizon_seconds: 3 * DAY,
    lists: Listed::Deliveries,
    // A redelivery is one attempt: each run asks again while none reached
    // the route.
    retries_resends: false,
    resends_new_bytes: false,
    endpoint: Endpoint::Required {
        what: "the hook, as repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app/hook",
        valid: is_hook_path,
    },
    error_text: &["/message"],
    token: None,
    list: |config, token, _, cursor| list(&config.api_base, token, hook(config), cursor),
    read_page: |config, window, response| read_page(response, window, &config.api_base),
    resend: Some(|config, token, delivery| resend(&config.api_base, token, hook(config), delivery)),
};

/// The route's hook (`endpoint`, which its configuration requires).
fn hook(config: &ReconcileConfig) -> &str {
    config.endpoint.as_deref().unwrap_or_default()
}

/// `repos/OWNER/REPO/hooks/ID`, `orgs/ORG/hooks/ID` or `app/hook`.
fn is_hook_path(text: &str) -> bool {
    let parts: Vec<&str> = text.split('/').collect();
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit());
    let name = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
            && part != "."
            && part != ".."
    };
    match parts.as_slice() {
        ["repos", owner, repo, "hooks", id] => name(owner) && name(repo) && numeric(id),
        ["orgs", org, "hooks", id] => name(org) && numeric(id),
        ["app", "hook"] => true,
        _ => false,
    }
}

fn headers(token: &str) -> Vec<(String, String)> {
    vec![
        ("authorization".into(), format!("Bearer {token}")),
        ("accept".into(), "application/vnd.github+json".into()),
        ("x-github-api-version".into(), "2022-11-28".into()),
        ("user-agent".into(), "idemgate-reconcile".into()),
    ]
}

pub(super) fn list(base: &str, token: &str, hook: &str, cursor: Option<&str>) -> ApiRequest {
    let url = cursor
        .map(str::to_string)
        .unwrap_or_else(|| format!("{base}/{hook}/deliveries?per_page=100"));
    ApiRequest::get(url, headers(token))
}

#[derive(Deserialize)]
struct Delivery {
    id: u64,
    guid: String,
    delivered_at: String,
    status_code: u16,
    event: String,
    #[serde(default)]
    action: Option<String>,
    /// A redelivery (by hand, or a run's): not the event's first delivery.
    #[serde(default)]
    redelivery: bool,
}

pub(super) fn read_page(
    response: &ApiResponse,
    window: Window,
    base: &str,
) -> Result<Page, ApiError> {
    if response.status != 200 {
        let message = super::wire::json_text(&response.body, &["/message"]);
        return Err(ApiError::of(response, message));
    }
    let deliveries: Vec<Delivery> = serde_json::from_slice(&response.body)
        .map_err(|_| ApiError::unreadable("not a list of deliveries"))?;
    let mut events: Vec<ListedEvent> = Vec::new();
    let mut past_window = false;
    for delivery in deliveries {
        let created = unix_seconds_or_utc(&delivery.delivered_at)
            .ok_or_else(|| ApiError::unreadable("a delivery's delivered_at is not a time"))?;
        past_window |= created < window.from;
        let answered = reached_the_route(delivery.status_code);
        // The newest delivery of each event is the one to redeliver; any
        // delivery the route answered marks it arrived; its first
        // delivery's time places it in the window, so that redeliveries
        // never keep an event in it past its receipt.
        match events.iter_mut().find(|event| event.id == delivery.guid) {
            Some(event) => {
                event.delivered_per_provider =
                    Some(event.delivered_per_provider == Some(true) || answered);
                event.created = event.created.min(created);
                event.complete |= !delivery.redelivery;
            }
            None => events.push(ListedEvent {
                id: delivery.guid,
                event_type: match delivery.action {
                    Some(action) => format!("{}.{action}", delivery.event),
                    None => delivery.event,
                },
                created,
                body: Vec::new(),
                resend_id: Some(delivery.id.to_string()),
                delivered_per_provider: Some(answered),
                complete: !delivery.redelivery,
            }),
        }
    }
    let next = match (past_window, next_link(response)) {
        (false, Some(next)) => Some(
            on_base(&next, base)
                .ok_or_else(|| ApiError::unreadable("a next page on another origin"))?,
        ),
        _ => None,
    };
    Ok(Page { events, next })
}

/// Whether an answer GitHub recorded means the delivery reached the route
/// and was settled there: a 2xx, or a 4xx a redelivery of the same body
/// would get again (the origin's own refusal, a payload the route
/// refuses). Not: no connection (0), a 5xx, or a 401, 403, 404, 408 or
/// 429, which a wrong secret, a wrong URL or a busy gateway answer, and
/// which a redelivery may get past.
fn reached_the_route(status: u16) -> bool {
    match status {
        200..=299 => true,
        401 | 403 | 404 | 408 | 429 => false,
        400..=499 => true,
        _ => false,
    }
}

/// The `rel="next"` target of a `Link` header.
fn next_link(response: &ApiResponse) -> Option<String> {
    response.header("link")?.split(',').find_map(|link| {
        let (target, params) = link.split_once(';')?;
        params
            .split(';')
            .any(|param| param.trim() == "rel=\"next\"")
            .then(|| {
                target
                    .trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

pub(super) fn resend(base: &str, token: &str, hook: &str, delivery: &str) -> ApiRequest {
    ApiRequest {
        method: "POST",
        url: format!("{base}/{hook}/deliveries/{delivery}/attempts"),
        headers: headers(token),
        body: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(body: &str, link: Option<&str>, window: Window) -> Page {
        let headers = link
            .map(|link| vec![("link".to_string(), link.to_string())])
            .unwrap_or_default();
        read_page(
            &ApiResponse {
                status: 200,
                headers,
                body: body.as_bytes().to_vec(),
            },
            window,
            "https://api.github.com",
        )
        .unwrap()
    }

    #[test]
    fn deliveries_of_one_event_are_one_event_arrived_if_any_was_answered() {
        let body = r#"[
            {"id":3,"guid":"g1","delivered_at":"2024-01-01T00:00:30Z","redelivery":true,"status":"OK","status_code":200,"event":"issues","action":"opened"},
            {"id":2,"guid":"g2","delivered_at":"2024-01-01T00:00:20Z","redelivery":false,"status":"failed to connect","status_code":0,"event":"push","action":null},
            {"id":1,"guid":"g1","delivered_at":"2024-01-01T00:00:10Z","redelivery":false,"status":"Service Unavailable","status_code":503,"event":"issues","action":"opened"}]"#;
        let link = r#"<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_1>; rel="next""#;
        let all = Window {
            from: 0,
            to: u64::MAX,
        };
        let page = page(body, Some(link), all);
        assert_eq!(page.events.len(), 2);
        assert_eq!(
            (
                page.events[0].event_type.as_str(),
                page.events[0].delivered_per_provider
            ),
            ("issues.opened", Some(true))
        );
        assert_eq!(
            (
                page.events[1].event_type.as_str(),
                page.events[1].delivered_per_provider
            ),
            ("push", Some(false))
        );
        assert_eq!(page.events[1].resend_id.as_deref(), Some("2"));
        assert!(page.next.unwrap().ends_with("cursor=v1_1"));
    }

    #[test]
    fn paging_stops_past_the_window() {
        let body = r#"[{"id":1,"guid":"g1","delivered_at":"2024-01-01T00:00:10Z","status":"OK","status_code":200,"event":"push"}]"#;
        let link = r#"<https://api.github.com/x?cursor=2>; rel="next""#;
        let later = Window {
            from: unix_seconds_or_utc("2024-01-02T00:00:00Z").unwrap(),
            to: u64::MAX,
        };
        assert_eq!(page(body, Some(link), later).next, None);
    }
}
