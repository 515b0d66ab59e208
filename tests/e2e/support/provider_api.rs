//! Local fakes of the providers' events APIs, which no test can reach:
//! each follows its provider's API reference (named on each handler;
//! Stripe's `/v2/core/events` in `provider_api/stripe_v2.rs`) in
//! what reconciliation meets: authentication, page sizes, cursors,
//! newest-first order, time and type filters, and 401, 429 and 5xx
//! answers. What the fake is told to fail next, it fails.
//!
//! GitHub's fake re-sends a delivery when asked, as GitHub does: a signed
//! POST to the webhook's URL (the gateway's route), recorded as a new
//! delivery of the same `guid`.
//!
//! Plaid's fake serves webhook verification keys (a signature scheme's
//! key endpoint, not an events API), with Plaid's credentials in the body
//! and Plaid's error bodies.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;

mod stripe_v2;

/// Signs a delivery as its provider does (PayPal's RSA key is the test's).
pub type Signer = Arc<dyn Fn(&mut idemgate_core::signature::Message) + Send + Sync>;

#[derive(Default)]
struct Fake {
    /// The bearer credential the API takes.
    key: String,
    /// Stripe's events, in creation order.
    stripe: Vec<Value>,
    /// Stripe's thin events (`/v2/core/events`), in creation order.
    stripe_v2: Vec<Value>,
    /// GitHub's deliveries of the hook, in delivery order.
    github: Vec<Value>,
    /// The body of each GitHub event (`guid`), as first delivered.
    github_bodies: Vec<(String, String)>,
    github_secret: String,
    /// Where GitHub's hook delivers.
    webhook_url: String,
    /// Paddle's notifications of the route's destination, oldest first.
    paddle: Vec<Value>,
    paddle_secret: String,
    /// Square's events, oldest first.
    square: Vec<Value>,
    /// PayPal: the REST app's `client_id:secret`, its events (oldest
    /// first), and how its deliveries are signed.
    paypal_client: String,
    paypal: Vec<Value>,
    paypal_signer: Option<Signer>,
    /// Plaid: the client id and secret the key endpoint takes, and its
    /// keys (JWKs as Plaid renders them).
    plaid_client: (String, String),
    plaid_keys: Vec<Value>,
    /// Statuses the next requests answer, first first.
    fail_next: Vec<u16>,
    /// Every request: method, path and query.
    requests: Vec<(String, String)>,
}

#[derive(Clone)]
pub struct ProviderApi {
    addr: SocketAddr,
    fake: Arc<Mutex<Fake>>,
}

impl ProviderApi {
    pub async fn start(key: &str) -> ProviderApi {
        let fake = Arc::new(Mutex::new(Fake {
            key: key.to_string(),
            ..Fake::default()
        }));
        let app = Router::new()
            .route("/v1/events", get(stripe_events))
            .route("/v2/core/events", get(stripe_v2::events))
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries",
                get(github_deliveries),
            )
            .route(
                "/repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}/attempts",
                post(github_redeliver),
            )
            .route("/notifications", get(paddle_notifications))
            .route("/notifications/{id}/replay", post(paddle_replay))
            .route("/v2/events", post(square_search))
            .route("/v1/oauth2/token", post(paypal_token))
            .route("/v1/notifications/webhooks-events", get(paypal_events))
            .route(
                "/v1/notifications/webhooks-events/{id}/resend",
                post(paypal_resend),
            )
            .route("/webhook_verification_key/get", post(plaid_key))
            .with_state(fake.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        ProviderApi { addr, fake }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.addr.port())
    }

    /// A Stripe event as the API renders it (https://docs.stripe.com/api/events/object).
    pub fn add_stripe_event(&self, event: Value) {
        self.fake.lock().unwrap().stripe.push(event);
    }

    /// A Stripe thin event as `/v2/core/events` lists it, `created` in
    /// RFC 3339 (https://docs.stripe.com/api/v2/core/events/object).
    pub fn add_stripe_v2_event(&self, event: Value) {
        self.fake.lock().unwrap().stripe_v2.push(event);
    }

    /// The next `statuses.len()` requests answer these statuses.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.fake.lock().unwrap().fail_next = statuses.to_vec();
    }

    pub fn requests(&self) -> Vec<(String, String)> {
        self.fake.lock().unwrap().requests.clone()
    }

    /// GitHub's hook: its secret and where it delivers.
    pub fn github_hook(&self, secret: &str, webhook_url: &str) {
        let mut fake = self.fake.lock().unwrap();
        fake.github_secret = secret.to_string();
        fake.webhook_url = webhook_url.to_string();
    }

    /// Paddle's destination: its endpoint secret and where it delivers.
    pub fn paddle_destination(&self, secret: &str, webhook_url: &str) {
        let mut fake = self.fake.lock().unwrap();
        fake.paddle_secret = secret.to_string();
        fake.webhook_url = webhook_url.to_string();
    }

    /// A Paddle notification of an event, as the API lists it
    /// (https://developer.paddle.com/api-reference/notifications/list-notifications).
    pub fn add_paddle_notification(&self, id: &str, status: &str, payload: Value) {
        let mut fake = self.fake.lock().unwrap();
        fake.paddle.push(json!({
            "id": id, "type": payload["event_type"], "status": status, "origin": "event",
            "occurred_at": payload["occurred_at"], "payload": payload,
            "notification_setting_id": "ntfset_e2e", "times_attempted": 1
        }));
    }

    /// A Square event as Search events returns it
    /// (https://developer.squareup.com/reference/square/events-api/search-events).
    pub fn add_square_event(&self, event: Value) {
        self.fake.lock().unwrap().square.push(event);
    }

    /// PayPal's REST app (`client_id:secret`, whose token is the fake's
    /// key) and its webhook: where it delivers and how it signs.
    pub fn paypal_webhook(&self, client: &str, webhook_url: &str, signer: Signer) {
        let mut fake = self.fake.lock().unwrap();
        fake.paypal_client = client.to_string();
        fake.webhook_url = webhook_url.to_string();
        fake.paypal_signer = Some(signer);
    }

    /// Plaid's API credentials (`client_id`, `secret`).
    pub fn plaid_client(&self, client_id: &str, secret: &str) {
        self.fake.lock().unwrap().plaid_client = (client_id.to_string(), secret.to_string());
    }

    /// A Plaid webhook verification key: an EC P-256 JWK (`x`, `y`
    /// base64url) under `kid`, expired at `expired_at` if given.
    pub fn add_plaid_key(&self, kid: &str, x: &str, y: &str, expired_at: Option<u64>) {
        self.fake.lock().unwrap().plaid_keys.push(json!({
            "alg": "ES256", "created_at": 1_560_466_150, "crv": "P-256",
            "expired_at": expired_at, "kid": kid, "kty": "EC", "use": "sig", "x": x, "y": y
        }));
    }

    /// A PayPal event as the API lists it (https://developer.paypal.com/docs/api/webhooks/v1/#webhooks-events_list).
    pub fn add_paypal_event(&self, event: Value) {
        self.fake.lock().unwrap().paypal.push(event);
    }

    /// A GitHub delivery GitHub recorded: `status_code` is what the
    /// webhook answered (0: no connection).
    pub fn add_github_delivery(
        &self,
        guid: &str,
        event: &str,
        body: &str,
        status_code: u16,
        delivered_at: &str,
    ) {
        let mut fake = self.fake.lock().unwrap();
        let id = fake.github.len() as u64 + 1;
        fake.github.push(json!({
            "id": id, "guid": guid, "delivered_at": delivered_at, "redelivery": false,
            "duration": 0.1, "status": if status_code == 0 { "failed to connect".to_string() } else { status_code.to_string() },
            "status_code": status_code, "event": event, "action": null,
            "installation_id": null, "repository_id": 1
        }));
        if !fake.github_bodies.iter().any(|(known, _)| known == guid) {
            fake.github_bodies
                .push((guid.to_string(), body.to_string()));
        }
    }
}

/// The fake's own checks, in the order a provider makes them: a failure
/// it was told to give, then the credential.
fn gate(
    fake: &Arc<Mutex<Fake>>,
    headers: &HeaderMap,
    method: &str,
    target: String,
    unauthorized: Value,
) -> Option<Response> {
    let mut fake = fake.lock().unwrap();
    fake.requests.push((method.to_string(), target));
    if !fake.fail_next.is_empty() {
        let status = fake.fail_next.remove(0);
        let body = match status {
            429 => {
                json!({"error": {"type": "rate_limit_error", "message": "Too many requests hit the API too quickly."}})
            }
            _ => json!({"error": {"type": "api_error", "message": "An unknown error occurred."}}),
        };
        return Some((StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response());
    }
    let expected = format!("Bearer {}", fake.key);
    let presented = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok());
    (presented != Some(expected.as_str()))
        .then(|| (StatusCode::UNAUTHORIZED, axum::Json(unauthorized)).into_response())
}

/// https://docs.stripe.com/api/events/list: `limit` 1 to 100 (default
/// 10), `starting_after` an event id, `created[gte|lte]`, `types[]` (up to
/// 20 exact names), newest first, `has_more`.
async fn stripe_events(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let target = logged("/v1/events", &query);
    let unauthorized = json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided: rk_****"}});
    if let Some(refused) = gate(&fake, &headers, "GET", target, unauthorized) {
        return refused;
    }
    let value = |name: &str| param(&query, name);
    let limit: usize = value("limit").map_or(10, |limit| limit.parse().unwrap());
    if !(1..=100).contains(&limit) {
        let error = json!({"error": {"type": "invalid_request_error", "message": "This value must be less than or equal to 100."}});
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    }
    let types: Vec<String> = query
        .iter()
        .filter(|(key, _)| key == "types[]")
        .map(|(_, value)| value.clone())
        .collect();
    let gte: Option<u64> = value("created[gte]").map(|at| at.parse().unwrap());
    let lte: Option<u64> = value("created[lte]").map(|at| at.parse().unwrap());
    let fake = fake.lock().unwrap();
    let mut events: Vec<&Value> = fake
        .stripe
        .iter()
        .filter(|event| {
            let created = event["created"].as_u64().unwrap();
            gte.is_none_or(|gte| created >= gte)
                && lte.is_none_or(|lte| created <= lte)
                && (types.is_empty() || types.iter().any(|name| event["type"] == name.as_str()))
        })
        .collect();
    // Newest first; of one second, the later created first.
    events.reverse();
    events.sort_by_key(|event| std::cmp::Reverse(event["created"].as_u64().unwrap()));
    if let Some(after) = value("starting_after") {
        let at = events
            .iter()
            .position(|event| event["id"] == after.as_str())
            .map_or(events.len(), |at| at + 1);
        events.drain(..at);
    }
    let has_more = events.len() > limit;
    events.truncate(limit);
    axum::Json(json!({"object": "list", "url": "/v1/events", "has_more": has_more, "data": events}))
        .into_response()
}

/// https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook:
/// `per_page` up to 100 (default 30), `cursor`, newest first, the next
/// page in `Link`.
async fn github_deliveries(
    State(fake): State<Arc<Mutex<Fake>>>,
    Path((owner, repo, hook)): Path<(String, String, String)>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let path = format!("/repos/{owner}/{repo}/hooks/{hook}/deliveries");
    let unauthorized =
        json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"});
    if let Some(refused) = gate(&fake, &headers, "GET", path.clone(), unauthorized) {
        return refused;
    }
    let value = |name: &str| param(&query, name);
    let per_page: usize = value("per_page").map_or(30, |n| n.parse::<usize>().unwrap().min(100));
    let from: usize = value("cursor").map_or(0, |cursor| {
        cursor.trim_start_matches("v1_").parse().unwrap()
    });
    let fake = fake.lock().unwrap();
    let newest_first: Vec<&Value> = fake.github.iter().rev().collect();
    let page: Vec<&Value> = newest_first
        .iter()
        .skip(from)
        .take(per_page)
        .copied()
        .collect();
    let mut response = axum::Json(json!(page)).into_response();
    if from + per_page < newest_first.len() {
        let host = headers
            .get("host")
            .and_then(|host| host.to_str().ok())
            .unwrap_or("127.0.0.1");
        let next = format!(
            "<http://{host}{path}?per_page={per_page}&cursor=v1_{}>; rel=\"next\"",
            from + per_page
        );
        response.headers_mut().insert("link", next.parse().unwrap());
    }
    response
}

/// https://docs.github.com/en/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook:
/// 202, and the delivery goes out again, signed, with its `guid`.
async fn github_redeliver(
    State(fake): State<Arc<Mutex<Fake>>>,
    Path((owner, repo, hook, id)): Path<(String, String, String, u64)>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/repos/{owner}/{repo}/hooks/{hook}/deliveries/{id}/attempts");
    let unauthorized = json!({"message": "Bad credentials"});
    if let Some(refused) = gate(&fake, &headers, "POST", path, unauthorized) {
        return refused;
    }
    let (guid, event, body, secret, url) = {
        let fake = fake.lock().unwrap();
        let Some(delivery) = fake.github.iter().find(|delivery| delivery["id"] == id) else {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"message": "Not Found"})),
            )
                .into_response();
        };
        let guid = delivery["guid"].as_str().unwrap().to_string();
        let body = fake
            .github_bodies
            .iter()
            .find(|(known, _)| *known == guid)
            .unwrap()
            .1
            .clone();
        (
            guid,
            delivery["event"].as_str().unwrap().to_string(),
            body,
            fake.github_secret.clone(),
            fake.webhook_url.clone(),
        )
    };
    let fake = fake.clone();
    tokio::spawn(async move {
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(body.as_bytes());
        let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        let headers = vec![
            ("x-github-delivery".to_string(), guid.clone()),
            ("x-github-event".to_string(), event.clone()),
            ("x-hub-signature-256".to_string(), signature),
        ];
        let status = deliver(&url, headers, body).await;
        let mut fake = fake.lock().unwrap();
        let id = fake.github.len() as u64 + 1;
        fake.github.push(json!({
            "id": id, "guid": guid, "delivered_at": rfc3339_now(), "redelivery": true,
            "status": status.to_string(), "status_code": status, "event": event, "action": null
        }));
    });
    (StatusCode::ACCEPTED, axum::Json(json!({}))).into_response()
}

fn rfc3339_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    idemgate_core::time::rfc3339(now.as_secs())
}

/// https://developer.paddle.com/api-reference/notifications/list-notifications:
/// `notification_setting_id`, `from`/`to` (RFC 3339), `per_page` (most
/// 200), `order_by=id[DESC]` and `after`; `meta.pagination.next` is the
/// whole next URL. A bad key is 403 `invalid_token`
/// (https://developer.paddle.com/errors/shared/invalid_token).
async fn paddle_notifications(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let target = logged("/notifications", &query);
    let refused = json!({"error": {"type": "request_error", "code": "invalid_token", "detail": "Authentication token passed is invalid."}});
    if let Some(mut refused) = gate(&fake, &headers, "GET", target, refused) {
        if refused.status() == StatusCode::UNAUTHORIZED {
            *refused.status_mut() = StatusCode::FORBIDDEN;
        }
        return refused;
    }
    let value = |name: &str| param(&query, name);
    let per_page: usize = value("per_page").map_or(50, |n| n.parse::<usize>().unwrap().min(200));
    let from = value("from").and_then(|at| unix(&at));
    let to = value("to").and_then(|at| unix(&at));
    let destination = value("notification_setting_id");
    let fake = fake.lock().unwrap();
    let mut listed: Vec<&Value> = fake
        .paddle
        .iter()
        .filter(|notification| {
            let at = unix(notification["occurred_at"].as_str().unwrap()).unwrap();
            from.is_none_or(|from| at >= from)
                && to.is_none_or(|to| at <= to)
                && destination
                    .as_ref()
                    .is_none_or(|id| notification["notification_setting_id"] == id.as_str())
        })
        .collect();
    listed.reverse();
    if let Some(after) = value("after") {
        let at = listed
            .iter()
            .position(|n| n["id"] == after.as_str())
            .map_or(listed.len(), |at| at + 1);
        listed.drain(..at);
    }
    let has_more = listed.len() > per_page;
    listed.truncate(per_page);
    let host = headers
        .get("host")
        .and_then(|host| host.to_str().ok())
        .unwrap_or("127.0.0.1")
        .to_string();
    let next = listed.last().filter(|_| has_more).map(|last| {
        let kept: Vec<String> = query
            .iter()
            .filter(|(key, _)| key != "after")
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        format!(
            "http://{host}/notifications?{}&after={}",
            kept.join("&"),
            last["id"].as_str().unwrap()
        )
    });
    axum::Json(json!({
        "data": listed,
        "meta": {"request_id": "req_e2e", "pagination": {"per_page": per_page, "next": next, "has_more": has_more, "estimated_total": fake.paddle.len()}}
    }))
    .into_response()
}

/// https://developer.paddle.com/api-reference/notifications/replay-notification:
/// 202 with a new notification id; Paddle sends the payload again to the
/// destination, signed (`Paddle-Signature: ts=..;h1=..`).
async fn paddle_replay(
    State(fake): State<Arc<Mutex<Fake>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let refused = json!({"error": {"type": "request_error", "code": "invalid_token", "detail": "Authentication token passed is invalid."}});
    if let Some(refused) = gate(
        &fake,
        &headers,
        "POST",
        format!("/notifications/{id}/replay"),
        refused,
    ) {
        return refused;
    }
    let (payload, secret, url, new_id) = {
        let mut fake = fake.lock().unwrap();
        let Some(original) = fake.paddle.iter().find(|n| n["id"] == id.as_str()).cloned() else {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": {"type": "request_error", "code": "not_found"}})),
            )
                .into_response();
        };
        let new_id = format!("ntf_replay_{}", fake.paddle.len() + 1);
        let mut replay = original.clone();
        replay["id"] = json!(new_id);
        replay["origin"] = json!("replay");
        replay["status"] = json!("delivered");
        fake.paddle.push(replay);
        (
            // The replay is a new notification of the same event: its
            // body names the new notification.
            {
                let mut payload = original["payload"].clone();
                payload["notification_id"] = json!(new_id);
                payload
            },
            fake.paddle_secret.clone(),
            fake.webhook_url.clone(),
            new_id,
        )
    };
    tokio::spawn(async move {
        let body = payload.to_string();
        let scheme = idemgate_core::signature::SignatureScheme::configure(
            "paddle",
            &idemgate_core::signature::SchemeSettings {
                secret: Some(secret),
                ..Default::default()
            },
        )
        .unwrap();
        let mut message = idemgate_core::signature::Message {
            headers: Vec::new(),
            body: body.clone().into_bytes(),
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        scheme.sign(&mut message, now);
        deliver(&url, message.headers, body).await;
    });
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({"data": {"notification_id": new_id}, "meta": {"request_id": "req_e2e"}})),
    )
        .into_response()
}

/// https://developer.squareup.com/reference/square/events-api/search-events:
/// `limit` up to 100, `cursor` with the same query, `query.filter`
/// `created_at` and `event_types`, `query.sort`; errors as
/// `{"errors": [{"category", "code", "detail"}]}`.
async fn square_search(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let refused = json!({"errors": [{"category": "AUTHENTICATION_ERROR", "code": "UNAUTHORIZED", "detail": "This request could not be authorized."}]});
    if let Some(refused) = gate(&fake, &headers, "POST", "/v2/events".into(), refused) {
        return refused;
    }
    let search: Value = serde_json::from_str(&body).unwrap();
    let limit = search["limit"].as_u64().unwrap_or(100).min(100) as usize;
    let filter = &search["query"]["filter"];
    let start = filter["created_at"]["start_at"].as_str().and_then(unix);
    let end = filter["created_at"]["end_at"].as_str().and_then(unix);
    let types: Vec<&str> = filter["event_types"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fake = fake.lock().unwrap();
    let mut events: Vec<&Value> = fake
        .square
        .iter()
        .filter(|event| {
            let at = unix(&format!(
                "{}Z",
                event["created_at"].as_str().unwrap().trim_end_matches('Z')
            ))
            .unwrap();
            start.is_none_or(|start| at >= start)
                && end.is_none_or(|end| at <= end)
                && (types.is_empty() || types.contains(&event["type"].as_str().unwrap()))
        })
        .collect();
    if search["query"]["sort"]["order"] == "DESC" {
        events.reverse();
    }
    let from: usize = search["cursor"]
        .as_str()
        .map_or(0, |cursor| cursor.parse().unwrap());
    let page: Vec<&Value> = events.iter().skip(from).take(limit).copied().collect();
    let cursor = (from + limit < events.len()).then(|| (from + limit).to_string());
    axum::Json(json!({"events": page, "metadata": [], "cursor": cursor})).into_response()
}

fn unix(text: &str) -> Option<u64> {
    idemgate_core::time::unix_seconds(text)
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// https://developer.paypal.com/api/rest/authentication/: Basic
/// `client_id:secret`, `grant_type=client_credentials`; the token is the
/// fake's key.
async fn paypal_token(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    use base64::Engine as _;
    let mut fake = fake.lock().unwrap();
    fake.requests
        .push(("POST".into(), "/v1/oauth2/token".into()));
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(&fake.paypal_client)
    );
    let presented = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok());
    if presented != Some(expected.as_str()) || body != "grant_type=client_credentials" {
        let refused =
            json!({"error": "invalid_client", "error_description": "Client Authentication failed"});
        return (StatusCode::UNAUTHORIZED, axum::Json(refused)).into_response();
    }
    axum::Json(json!({"scope": "https://uri.paypal.com/services/applications/webhooks", "access_token": fake.key, "token_type": "Bearer", "expires_in": 32400})).into_response()
}

/// https://developer.paypal.com/docs/api/webhooks/v1/#webhooks-events_list:
/// `page_size` (default 10), `start_time`/`end_time` inclusive, one
/// `event_type`; the next page in `links` (`rel` `next`).
async fn paypal_events(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let target = logged("/v1/notifications/webhooks-events", &query);
    let refused = json!({"name": "AUTHENTICATION_FAILURE", "message": "Authentication failed due to invalid authentication credentials or a missing Authorization header.", "debug_id": "e2e"});
    if let Some(refused) = gate(&fake, &headers, "GET", target, refused) {
        return refused;
    }
    let value = |name: &str| param(&query, name);
    let page_size: usize = value("page_size").map_or(10, |n| n.parse().unwrap());
    let start = value("start_time").and_then(|at| unix(&at));
    let end = value("end_time").and_then(|at| unix(&at));
    let event_type = value("event_type");
    let from: usize = value("page").map_or(0, |page| page.parse().unwrap());
    let fake = fake.lock().unwrap();
    let mut events: Vec<&Value> = fake
        .paypal
        .iter()
        .filter(|event| {
            let at = unix(event["create_time"].as_str().unwrap()).unwrap();
            start.is_none_or(|start| at >= start)
                && end.is_none_or(|end| at <= end)
                && event_type
                    .as_ref()
                    .is_none_or(|name| event["event_type"] == name.as_str())
        })
        .collect();
    events.reverse();
    let page: Vec<&Value> = events.iter().skip(from).take(page_size).copied().collect();
    let mut links = vec![];
    if from + page_size < events.len() {
        let host = headers
            .get("host")
            .and_then(|host| host.to_str().ok())
            .unwrap_or("127.0.0.1");
        let kept: Vec<String> = query
            .iter()
            .filter(|(key, _)| key != "page")
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        links.push(json!({"href": format!("http://{host}/v1/notifications/webhooks-events?{}&page={}", kept.join("&"), from + page_size), "rel": "next", "method": "GET"}));
    }
    axum::Json(json!({"events": page, "count": page.len(), "links": links})).into_response()
}

/// https://developer.paypal.com/docs/api/webhooks/v1/#webhooks-events_resend:
/// 202 with the event; PayPal delivers it again to the webhooks named,
/// signed, under a new transmission id.
async fn paypal_resend(
    State(fake): State<Arc<Mutex<Fake>>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let refused = json!({"name": "AUTHENTICATION_FAILURE", "message": "Authentication failed.", "debug_id": "e2e"});
    if let Some(refused) = gate(
        &fake,
        &headers,
        "POST",
        format!("/v1/notifications/webhooks-events/{id}/resend?{body}"),
        refused,
    ) {
        return refused;
    }
    let (event, url, signer) = {
        let fake = fake.lock().unwrap();
        let Some(event) = fake
            .paypal
            .iter()
            .find(|event| event["id"] == id.as_str())
            .cloned()
        else {
            return (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"name": "RESOURCE_NOT_FOUND"})),
            )
                .into_response();
        };
        (
            event,
            fake.webhook_url.clone(),
            fake.paypal_signer.clone().unwrap(),
        )
    };
    let delivered = event.clone();
    tokio::spawn(async move {
        let body = delivered.to_string();
        let mut message = idemgate_core::signature::Message {
            headers: Vec::new(),
            body: body.clone().into_bytes(),
        };
        signer(&mut message);
        deliver(&url, message.headers, body).await;
    });
    (StatusCode::ACCEPTED, axum::Json(event)).into_response()
}

/// https://plaid.com/docs/api/webhooks/webhook-verification/ (`POST
/// /webhook_verification_key/get`): a JSON body of `client_id`, `secret`
/// (or the `PLAID-CLIENT-ID` and `PLAID-SECRET` headers) and `key_id`;
/// 200 `{"key": JWK, "request_id"}`. Errors as
/// https://plaid.com/docs/errors/ renders them, each HTTP 400 with
/// `error_type` and `error_code`: a body that is not JSON
/// (`INVALID_REQUEST`/`INVALID_BODY`), a missing field
/// (`INVALID_REQUEST`/`MISSING_FIELDS`), wrong credentials
/// (`INVALID_INPUT`/`INVALID_API_KEYS`), an unknown key
/// (`INVALID_INPUT`/`INVALID_WEBHOOK_VERIFICATION_KEY_ID`); a failure it
/// was told to give is 429 `RATE_LIMIT_EXCEEDED` or a 5xx `API_ERROR`.
async fn plaid_key(
    State(fake): State<Arc<Mutex<Fake>>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let error = |status: u16, error_type: &str, error_code: &str, message: &str| {
        let body = json!({
            "display_message": null, "error_code": error_code, "error_message": message,
            "error_type": error_type, "request_id": "e2eRequestId01"
        });
        (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
    };
    let request: Option<Value> = serde_json::from_str(&body).ok();
    let field = |name: &str, header: Option<&str>| {
        request
            .as_ref()
            .and_then(|request| request[name].as_str().map(str::to_string))
            .or_else(|| {
                headers
                    .get(header?)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_string)
            })
    };
    let key_id = field("key_id", None);
    let mut fake = fake.lock().unwrap();
    fake.requests.push((
        "POST".into(),
        format!(
            "/webhook_verification_key/get?key_id={}",
            key_id.clone().unwrap_or_default()
        ),
    ));
    if !fake.fail_next.is_empty() {
        return match fake.fail_next.remove(0) {
            429 => error(
                429,
                "RATE_LIMIT_EXCEEDED",
                "RATE_LIMIT",
                "rate limit exceeded",
            ),
            503 => error(
                503,
                "API_ERROR",
                "PLANNED_MAINTENANCE",
                "the Plaid API is temporarily unavailable due to planned maintenance",
            ),
            status => error(
                status,
                "API_ERROR",
                "INTERNAL_SERVER_ERROR",
                "an unexpected error occurred",
            ),
        };
    }
    if !request.as_ref().is_some_and(Value::is_object) {
        return error(
            400,
            "INVALID_REQUEST",
            "INVALID_BODY",
            "body could not be parsed as JSON",
        );
    }
    let (client_id, secret) = (
        field("client_id", Some("plaid-client-id")),
        field("secret", Some("plaid-secret")),
    );
    let missing: Vec<&str> = [
        ("client_id", &client_id),
        ("secret", &secret),
        ("key_id", &key_id),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_none())
    .map(|(name, _)| name)
    .collect();
    if !missing.is_empty() {
        let message = format!(
            "the following required fields are missing: {}",
            missing.join(", ")
        );
        return error(400, "INVALID_REQUEST", "MISSING_FIELDS", &message);
    }
    if (client_id.unwrap(), secret.unwrap()) != fake.plaid_client {
        return error(
            400,
            "INVALID_INPUT",
            "INVALID_API_KEYS",
            "invalid client_id or secret provided",
        );
    }
    let key_id = key_id.unwrap();
    match fake
        .plaid_keys
        .iter()
        .find(|key| key["kid"] == key_id.as_str())
    {
        Some(key) => {
            axum::Json(json!({"key": key, "request_id": "e2eRequestId02"})).into_response()
        }
        None => error(
            400,
            "INVALID_INPUT",
            "INVALID_WEBHOOK_VERIFICATION_KEY_ID",
            "invalid key_id provided",
        ),
    }
}

/// A query parameter's (decoded) value.
fn param(query: &[(String, String)], name: &str) -> Option<String> {
    query
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.clone())
}

/// A request as the fake records it: its path and decoded query.
fn logged(path: &str, query: &[(String, String)]) -> String {
    let pairs: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{path}?{}", pairs.join("&"))
}

/// A provider's webhook delivery: a JSON POST with its signature headers;
/// the status the webhook answered (0 when nothing answered).
async fn deliver(url: &str, headers: Vec<(String, String)>, body: String) -> u16 {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    match request.body(body).send().await {
        Ok(answer) => answer.status().as_u16(),
        Err(_) => 0,
    }
}
