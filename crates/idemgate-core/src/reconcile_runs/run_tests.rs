//! A run against fakes of each provider's API that page as the provider
//! does, and a fake of the keys' objects: what it lists, counts, delivers
//! or asks to re-send, where it stops and goes on, and how it backs off.
//! Routes are built from ROUTES JSON, so the real key derivation runs.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};

use futures::executor::block_on;

use super::*;
use crate::canonical::{sha256_hex, Fingerprint};
use crate::config::Config;
use crate::reconcile::KEPT_RUNS;
use crate::reconcile_runs::route_runs::*;
use crate::time::rfc3339;

const NOW_MS: u64 = 1_700_000_000_000;
const NOW: u64 = NOW_MS / 1_000;
/// The API key's value: no request but the API's own may carry it.
const API_KEY: &str = "rk_live_51HxRunTestKeyValue6789";
/// The route's signing secret (PayPal's: its webhook id).
const WEBHOOK_SECRET: &str = "WH8PT597110X687430LKGECATA";
/// PayPal's `client_id:secret`, and the access token its OAuth answers.
const PAYPAL_CLIENT: &str = "AeClientId42:EKClientSecretValue99";
const PAYPAL_TOKEN: &str = "A21AAFaccesstoken";

type Api = Box<dyn FnMut(&ApiRequest) -> Result<ApiResponse, String>>;

/// The world a run sees: a provider's API, the keys' objects and a clock.
struct Fake {
    now: Cell<u64>,
    /// How far the clock moves during each API call.
    call_ms: Cell<u64>,
    api: RefCell<Api>,
    requests: RefCell<Vec<ApiRequest>>,
    /// Keys whose object holds a receipt of a delivery that arrived.
    received: RefCell<HashSet<String>>,
    /// Keys whose object holds a sync receipt whose forward failed.
    failed_here: RefCell<HashSet<String>>,
    /// Every delivery handed to a key's object, in order.
    handed: RefCell<Vec<Delivery>>,
    /// Every identity whose object was asked for a receipt.
    asked: RefCell<Vec<Identity>>,
    lines: RefCell<Vec<ReconcileLine>>,
}

impl Fake {
    fn new(api: impl FnMut(&ApiRequest) -> Result<ApiResponse, String> + 'static) -> Fake {
        Fake {
            now: Cell::new(NOW_MS),
            call_ms: Cell::new(0),
            api: RefCell::new(Box::new(api)),
            requests: RefCell::default(),
            received: RefCell::default(),
            failed_here: RefCell::default(),
            handed: RefCell::default(),
            asked: RefCell::default(),
            lines: RefCell::default(),
        }
    }

    fn answer_with(&self, api: impl FnMut(&ApiRequest) -> Result<ApiResponse, String> + 'static) {
        *self.api.borrow_mut() = Box::new(api);
    }

    fn receive(&self, keys: impl IntoIterator<Item = String>) {
        self.received.borrow_mut().extend(keys);
    }

    fn handed_keys(&self) -> Vec<String> {
        self.handed
            .borrow()
            .iter()
            .map(|delivery| delivery.identity.key.as_str().to_string())
            .collect()
    }

    fn decisions(&self, decision: &str) -> usize {
        self.lines
            .borrow()
            .iter()
            .filter(|line| line.decision == decision)
            .count()
    }

    /// Everything the run said or sent but the API's own requests: its
    /// log lines, as JSON.
    fn said(&self) -> String {
        serde_json::to_string(&*self.lines.borrow()).unwrap()
    }
}

impl RunBackend for Fake {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    async fn call_api(&self, request: ApiRequest) -> Result<ApiResponse, String> {
        self.now.set(self.now.get() + self.call_ms.get());
        self.requests.borrow_mut().push(request.clone());
        (self.api.borrow_mut())(&request)
    }

    /// A key's object: delivers only if it holds no receipt.
    async fn deliver(&self, delivery: Delivery) -> Result<KeyAnswer, String> {
        let key = delivery.identity.key.as_str().to_string();
        self.handed.borrow_mut().push(delivery);
        match self.received.borrow_mut().insert(key) {
            true => Ok(KeyAnswer::Filled),
            false => Ok(KeyAnswer::AlreadyReceived),
        }
    }

    async fn presence(&self, identity: &Identity) -> Result<Presence, String> {
        self.asked.borrow_mut().push(identity.clone());
        let key = identity.key.as_str();
        Ok(if self.received.borrow().contains(key) {
            Presence::Arrived
        } else if self.failed_here.borrow().contains(key) {
            Presence::Failed
        } else {
            Presence::Absent
        })
    }

    fn log(&self, line: &ReconcileLine) {
        self.lines.borrow_mut().push(line.clone());
    }
}

/// The one route `ROUTES` names, with its secrets set.
fn route(routes: &str) -> RouteConfig {
    let env: HashMap<&str, &str> = [
        ("ORIGIN_URL", "https://pay.internal"),
        ("ROUTES", routes),
        ("WEBHOOK_SECRET", WEBHOOK_SECRET),
        ("RECONCILE_KEY", API_KEY),
        ("PAYPAL_CLIENT", PAYPAL_CLIENT),
        ("FORWARD_SECRET", "forward-secret"),
    ]
    .into_iter()
    .collect();
    let config = Config::from_lookup(|name| env.get(name).map(|value| value.to_string())).unwrap();
    assert_eq!(config.broken, [], "the route is configured right");
    config.routes[0].clone()
}

/// A route reconciled from Paddle's notifications of its destination.
fn paddle_route() -> RouteConfig {
    route(
        r#"{"paddle":{"path":"/webhooks/paddle","signature":"paddle","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"paddle","api_key":"RECONCILE_KEY","types":["transaction.*"],"endpoint":"ntfset_01route"}}}"#,
    )
}

fn stripe_route() -> RouteConfig {
    stripe_route_with("")
}

/// A Stripe route with `fields` (each after a comma) added to its table.
fn stripe_route_with(fields: &str) -> RouteConfig {
    route(&format!(
        r#"{{"stripe":{{"path":"/webhooks/stripe","signature":"stripe","signing_secret":"WEBHOOK_SECRET"{fields},
            "reconcile":{{"source":"stripe","api_key":"RECONCILE_KEY","types":["payment_intent.*","charge.refunded"]}}}}}}"#
    ))
}

fn run_with(fake: &Fake, route: &RouteConfig, cursor: Option<Cursor>, limits: Limits) -> Ended {
    run_asked(fake, route, cursor, &Asked::new(), limits)
}

fn run_asked(
    fake: &Fake,
    route: &RouteConfig,
    cursor: Option<Cursor>,
    asked: &Asked,
    limits: Limits,
) -> Ended {
    let config = route.reconcile.as_ref().expect("a reconciled route");
    block_on(run(
        fake,
        route,
        config,
        Remembered { cursor, asked },
        format!("run-{}", fake.now_ms()),
        Trigger::Schedule,
        limits,
    ))
}

fn run_once(fake: &Fake, route: &RouteConfig) -> Ended {
    run_with(fake, route, None, RUN_LIMITS)
}

fn json(status: u16, body: impl Into<String>) -> Result<ApiResponse, String> {
    Ok(ApiResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.into().into_bytes(),
    })
}

fn authorization(request: &ApiRequest) -> Option<&str> {
    crate::headers::get(&request.headers, "authorization")
}

/// The query parameters of `url`, decoded.
fn query(url: &str) -> Vec<(String, String)> {
    let decode = |text: &str| {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    url.split_once('?')
        .map(|(_, query)| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .map(|(name, value)| (decode(name), decode(value)))
                .collect()
        })
        .unwrap_or_default()
}

fn param(url: &str, name: &str) -> Option<String> {
    query(url)
        .into_iter()
        .find(|(found, _)| found == name)
        .map(|(_, value)| value)
}

// --- Stripe: GET /v1/events, newest first, `starting_after` ---

#[derive(Clone)]
struct StripeEvent {
    id: String,
    event_type: String,
    created: u64,
    /// As the API renders it (pretty-printed): what must be delivered.
    json: String,
}

fn stripe_event(i: usize, event_type: &str, created: u64) -> StripeEvent {
    let id = format!("evt_{i:04}");
    let json = format!(
        "{{\n  \"id\": \"{id}\",\n  \"object\": \"event\",\n  \"api_version\": \"2024-06-20\",\n  \"created\": {created},\n  \"data\": {{\n    \"object\": {{\n      \"id\": \"pi_{i}\",\n      \"object\": \"payment_intent\"\n    }}\n  }},\n  \"pending_webhooks\": 0,\n  \"type\": \"{event_type}\"\n}}"
    );
    StripeEvent {
        id,
        event_type: event_type.into(),
        created,
        json,
    }
}

/// `count` events, newest first, one a second, all inside the window.
fn stripe_events(count: usize, event_type: impl Fn(usize) -> &'static str) -> Vec<StripeEvent> {
    (0..count)
        .map(|i| stripe_event(i, event_type(i), NOW - 700 - i as u64))
        .collect()
}

/// Stripe's list as its API reference describes it: the `created` range
/// and exact `types[]` filter, pages of `limit` newest first, the next one
/// after `starting_after`, `has_more` while there is one.
fn stripe_api(events: Vec<StripeEvent>) -> impl FnMut(&ApiRequest) -> Result<ApiResponse, String> {
    move |request| {
        assert_eq!(request.method, "GET");
        assert!(
            request.url.starts_with("https://api.stripe.com/v1/events?"),
            "{}",
            request.url
        );
        if authorization(request) != Some(&format!("Bearer {API_KEY}")) {
            return json(
                401,
                r#"{"error":{"message":"Invalid API Key provided: rk_live_****6789","type":"invalid_request_error"}}"#,
            );
        }
        let url = &request.url;
        let number = |name: &str| param(url, name).map(|value| value.parse::<u64>().unwrap());
        let (from, to) = (
            number("created[gte]").unwrap(),
            number("created[lte]").unwrap(),
        );
        let limit = number("limit").unwrap_or(10) as usize;
        let types: Vec<String> = query(url)
            .into_iter()
            .filter(|(name, _)| name == "types[]")
            .map(|(_, value)| value)
            .collect();
        let listed: Vec<&StripeEvent> = events
            .iter()
            .filter(|event| (from..=to).contains(&event.created))
            .filter(|event| types.is_empty() || types.contains(&event.event_type))
            .collect();
        let start = match param(url, "starting_after") {
            Some(after) => {
                listed
                    .iter()
                    .position(|event| event.id == after)
                    .expect("a cursor the API gave")
                    + 1
            }
            None => 0,
        };
        let end = (start + limit).min(listed.len());
        let page: Vec<&str> = listed[start..end]
            .iter()
            .map(|event| event.json.as_str())
            .collect();
        json(
            200,
            format!(
                "{{\n  \"object\": \"list\",\n  \"data\": [{}],\n  \"has_more\": {},\n  \"url\": \"/v1/events\"\n}}",
                page.join(", "),
                end < listed.len()
            ),
        )
    }
}

#[test]
fn a_stripe_window_is_counted_exactly_and_only_what_never_arrived_is_delivered() {
    // 250 events: every fifth of a type the route does not take; of the
    // others, every tenth event already arrived live.
    let kind = |i: usize| match i {
        i if i % 5 == 4 => "customer.created",
        i if i % 2 == 0 => "payment_intent.succeeded",
        _ => "charge.refunded",
    };
    let mut events = stripe_events(250, kind);
    // Younger than the grace, and older than the lookback: not listed.
    events.insert(0, stripe_event(9_001, "charge.refunded", NOW - 599));
    events.push(stripe_event(9_002, "charge.refunded", NOW - 172_801));
    let fake = Fake::new(stripe_api(events.clone()));
    fake.receive(
        (0..250)
            .filter(|i| i % 10 == 0)
            .map(|i| format!("evt_{i:04}")),
    );
    let route = stripe_route();

    let ended = run_once(&fake, &route);
    let record = &ended.record;
    assert_eq!(record.error, None);
    assert!(record.complete);
    assert!(ended.cursor.is_none());
    assert_eq!(
        (
            record.listed,
            record.already_received,
            record.filled,
            record.failed,
            record.other_types
        ),
        (200, 25, 175, 0, 50)
    );
    assert_eq!(
        record.window,
        Window {
            from: NOW - 172_800,
            to: NOW - 600
        }
    );

    // Three pages, each asking for the window; a wildcard type is
    // filtered here, so no types[] is sent.
    let requests = fake.requests.borrow();
    assert_eq!(requests.len(), 3);
    for request in requests.iter() {
        assert_eq!(authorization(request), Some(&*format!("Bearer {API_KEY}")));
        assert_eq!(
            param(&request.url, "created[gte]"),
            Some((NOW - 172_800).to_string())
        );
        assert_eq!(
            param(&request.url, "created[lte]"),
            Some((NOW - 600).to_string())
        );
        assert!(!request.url.contains("types"), "{}", request.url);
    }
    assert_eq!(param(&requests[0].url, "starting_after"), None);
    assert_eq!(
        param(&requests[1].url, "starting_after").as_deref(),
        Some("evt_0099")
    );
    assert_eq!(
        param(&requests[2].url, "starting_after").as_deref(),
        Some("evt_0199")
    );

    // Each event of the route's types went to its key's object once (it
    // is the object that says whether it arrived); no other type did.
    let handed = fake.handed.borrow();
    assert_eq!(handed.len(), 200);
    let by_id: HashMap<&str, &StripeEvent> = events.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut seen = HashSet::new();
    for delivery in handed.iter() {
        let id = delivery.identity.key.as_str();
        assert!(seen.insert(id.to_string()), "{id} handed twice");
        let event = by_id[id];
        assert_ne!(event.event_type, "customer.created");
        assert!(delivery.if_absent, "only if no delivery arrived");
        assert!(!delivery.if_known);
        assert_eq!(delivery.request.source.as_deref(), Some("reconciliation"));
        assert_eq!(delivery.fingerprint, Fingerprint::of_event(id));
        assert_eq!(delivery.identity.route, "stripe");
        // Byte for byte as the API rendered it, to the route's own path.
        assert_eq!(delivery.request.body, event.json.as_bytes());
        assert_eq!(
            delivery.request.raw_body_sha256,
            sha256_hex(event.json.as_bytes())
        );
        assert_eq!(delivery.request.method, "POST");
        assert_eq!(delivery.request.url, "https://pay.internal/webhooks/stripe");
    }
    assert_eq!(fake.decisions("reconciled"), 175);
    assert_eq!(fake.decisions("reconcile-failed"), 0);
    assert!(!fake.said().contains(API_KEY));
}

#[test]
fn exact_types_are_asked_of_stripe_and_other_types_are_never_delivered() {
    let route = route(
        r#"{"stripe":{"path":"/s","signature":"stripe","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"stripe","api_key":"RECONCILE_KEY","types":["charge.refunded"]}}}"#,
    );
    let kind = |i: usize| match i % 2 {
        0 => "charge.refunded",
        _ => "charge.succeeded",
    };
    let fake = Fake::new(stripe_api(stripe_events(10, kind)));
    let ended = run_once(&fake, &route);
    assert_eq!(
        param(&fake.requests.borrow()[0].url, "types[]").as_deref(),
        Some("charge.refunded")
    );
    assert_eq!((ended.record.listed, ended.record.filled), (5, 5));
    assert_eq!(ended.record.other_types, 0, "the API filtered them");
    assert_eq!(
        fake.handed_keys(),
        ["evt_0000", "evt_0002", "evt_0004", "evt_0006", "evt_0008"]
    );
}

#[test]
fn a_run_stops_before_its_subrequests_run_out_and_the_next_goes_on_from_its_cursor() {
    let fake = Fake::new(stripe_api(stripe_events(1_000, |_| {
        "payment_intent.succeeded"
    })));
    let route = stripe_route();
    let config = route.reconcile.clone().unwrap();
    let limits = Limits {
        subrequests: 450,
        duration_ms: 25_000,
    };
    let first = run_with(&fake, &route, None, limits);
    assert_eq!(first.record.error, None);
    assert!(!first.record.complete);
    // A page may cost 201 (its list, and per event a call to the key's
    // object and a re-send): a fourth would pass 450.
    let cursor = first.cursor.clone().expect("the window goes on");
    assert_eq!(cursor.window, first.record.window);
    assert_eq!(cursor.page.as_deref(), Some("evt_0299"));
    assert_eq!(fake.handed.borrow().len(), 300);
    let spent = fake.requests.borrow().len() + fake.handed.borrow().len();
    assert!(spent <= 450, "{spent} subrequests");

    let mut runs = RouteRuns::default();
    runs.lock(first.record.started_at);
    let ended_at = first.record.ended_at;
    runs.finish(first.record.clone(), first.cursor.clone(), None, &config);
    assert_eq!(runs.cursor, Some(cursor.clone()));
    assert_eq!(runs.next_run_at, ended_at + CONTINUE_AFTER_MS);

    // A minute later: the window is the cursor's, not one from the clock.
    fake.now.set(fake.now.get() + 61_000);
    let second = run_with(&fake, &route, runs.cursor.clone(), RUN_LIMITS);
    assert_eq!(second.record.error, None);
    assert!(second.record.complete, "seven pages fit in 900");
    assert!(second.cursor.is_none());
    assert_eq!(second.record.window, first.record.window);
    assert_eq!(second.record.listed, 700);
    assert_eq!(
        param(&fake.requests.borrow()[3].url, "starting_after").as_deref(),
        Some("evt_0299")
    );
    // Across both runs, each event went to its object once: none skipped
    // or repeated at the page where the first run stopped.
    let handed = fake.handed_keys();
    assert_eq!(handed.len(), 1_000);
    let unique: HashSet<&String> = handed.iter().collect();
    assert_eq!(unique.len(), 1_000);
    assert_eq!(first.record.filled + second.record.filled, 1_000);

    runs.finish(second.record.clone(), None, None, &config);
    assert_eq!(runs.cursor, None);
    assert_eq!(
        runs.next_run_at,
        second.record.started_at + 600_000,
        "a finished window waits every_seconds from its run's start"
    );
}

#[test]
fn a_run_stops_at_its_time_limit_with_a_cursor() {
    let fake = Fake::new(stripe_api(stripe_events(1_000, |_| {
        "payment_intent.succeeded"
    })));
    // Each list call takes 10 s: after the third, 25 s have passed.
    fake.call_ms.set(10_000);
    let route = stripe_route();
    let ended = run_with(
        &fake,
        &route,
        None,
        Limits {
            subrequests: 100_000,
            duration_ms: 25_000,
        },
    );
    assert_eq!(ended.record.error, None);
    assert!(!ended.record.complete);
    // The third page came back after the deadline: none of its events is
    // settled, and the next run lists it again.
    assert_eq!(fake.requests.borrow().len(), 3);
    assert_eq!(ended.record.listed, 200);
    let cursor = ended.cursor.unwrap();
    assert_eq!(cursor.page.as_deref(), Some("evt_0199"));
    assert_eq!(cursor.settled.len(), 200);
    assert_eq!(ended.record.ended_at, NOW_MS + 30_000);
}

#[test]
fn a_refused_key_ends_the_run_without_a_back_off_and_is_never_shown() {
    let fake = Fake::new(stripe_api(stripe_events(5, |_| "charge.refunded")));
    let route = stripe_route();
    let mut config = route.reconcile.clone().unwrap();
    config.api_key = crate::signature::Secret::new("rk_live_51HxRevokedKey000000".into());
    let ended = block_on(run(
        &fake,
        &route,
        &config,
        Remembered {
            cursor: None,
            asked: &Asked::new(),
        },
        "run-401".into(),
        Trigger::Operator,
        RUN_LIMITS,
    ));
    let error = ended.record.error.clone().expect("the run failed");
    assert_eq!(error.status, 401);
    assert!(
        error.problem.starts_with("Invalid API Key provided"),
        "{}",
        error.problem
    );
    assert!(!ended.record.complete);
    assert!(fake.handed.borrow().is_empty());
    for key in ["rk_live_51HxRevokedKey000000", API_KEY] {
        assert!(!error.problem.contains(key));
        assert!(!fake.said().contains(key), "{}", fake.said());
        // A request is only ever shown redacted.
        assert!(!format!("{:?}", fake.requests.borrow()[0]).contains(key));
    }
    assert_eq!(fake.decisions("reconcile-failed"), 1);
    assert_eq!(fake.lines.borrow()[0].status, Some(401));

    let mut runs = RouteRuns::default();
    let started = ended.record.started_at;
    runs.lock(started);
    runs.finish(
        ended.record.clone(),
        ended.cursor.clone(),
        ended.retry_after_ms,
        &config,
    );
    // No back-off: the next scheduled run tries again.
    assert_eq!(runs.backoff_ms, 0);
    assert_eq!(runs.next_run_at, started + 600_000);
    assert!(!runs.locked(started));
    let shown = runs.view("stripe", started).to_string();
    assert!(!shown.contains("rk_live_51HxRevokedKey000000"), "{shown}");
    assert!(shown.contains("Invalid API Key provided"), "{shown}");
}

/// An API that answers every request with `status`, and a `Retry-After`
/// when given one.
fn failing_api(
    status: u16,
    retry_after: Option<&'static str>,
) -> impl FnMut(&ApiRequest) -> Result<ApiResponse, String> {
    move |_| {
        let mut response = json(status, r#"{"error":{"message":"slow down"}}"#)?;
        if let Some(seconds) = retry_after {
            response
                .headers
                .push(("Retry-After".into(), seconds.into()));
        }
        Ok(response)
    }
}

/// Runs once against the fake, and records the run: the delay before the
/// next one.
fn run_and_finish(fake: &Fake, route: &RouteConfig, runs: &mut RouteRuns) -> (Ended, u64) {
    runs.lock(fake.now_ms());
    let ended = run_with(fake, route, runs.cursor.clone(), RUN_LIMITS);
    let ended_at = ended.record.ended_at;
    runs.finish(
        ended.record.clone(),
        ended.cursor.clone(),
        ended.retry_after_ms,
        route.reconcile.as_ref().unwrap(),
    );
    (ended, runs.next_run_at - ended_at)
}

#[test]
fn a_429_backs_off_at_least_as_long_as_retry_after_asks() {
    let fake = Fake::new(failing_api(429, Some("120")));
    let route = stripe_route();
    let mut runs = RouteRuns::default();
    let (ended, delay) = run_and_finish(&fake, &route, &mut runs);
    assert_eq!(ended.record.error.as_ref().unwrap().status, 429);
    assert_eq!(ended.retry_after_ms, Some(120_000));
    assert_eq!(delay, 120_000);
    assert!(!runs.due(ended.record.ended_at + 119_999));
    assert!(runs.due(ended.record.ended_at + 120_000));
    // A Retry-After of two hours still waits an hour at most.
    fake.answer_with(failing_api(429, Some("7200")));
    let (_, delay) = run_and_finish(&fake, &route, &mut runs);
    assert_eq!(delay, 3_600_000);
}

#[test]
fn a_5xx_backs_off_a_minute_then_doubles_to_an_hour_and_a_success_resets_it() {
    let fake = Fake::new(failing_api(503, None));
    let route = stripe_route();
    let mut runs = RouteRuns::default();
    let mut delays = Vec::new();
    for _ in 0..8 {
        let (ended, delay) = run_and_finish(&fake, &route, &mut runs);
        assert_eq!(ended.record.error.as_ref().unwrap().status, 503);
        assert!(!ended.record.complete);
        delays.push(delay);
        fake.now.set(runs.next_run_at);
    }
    assert_eq!(
        delays,
        [60_000, 120_000, 240_000, 480_000, 960_000, 1_920_000, 3_600_000, 3_600_000]
    );
    assert_eq!(runs.last_day(fake.now_ms()).failed_runs, 8);
    // The API is back after hours: the window it failed in is older than
    // its receipts may be, so a new window starts.
    fake.answer_with(stripe_api(stripe_events(3, |_| "charge.refunded")));
    let failed_window = runs.cursor.as_ref().unwrap().window;
    let (ended, _) = run_and_finish(&fake, &route, &mut runs);
    assert!(ended.record.complete);
    assert_ne!(ended.record.window, failed_window);
    assert!(ended.record.window.from > failed_window.from);
    assert_eq!(runs.backoff_ms, 0);
    assert_eq!(runs.next_run_at, ended.record.started_at + 600_000);
}

#[test]
fn an_unreachable_api_is_status_0_and_backs_off() {
    let fake = Fake::new(|_| Err("connection refused".into()));
    let route = stripe_route();
    let mut runs = RouteRuns::default();
    let (ended, delay) = run_and_finish(&fake, &route, &mut runs);
    let error = ended.record.error.unwrap();
    assert_eq!(error.status, 0);
    assert!(error.backs_off());
    assert_eq!(delay, 60_000);
}

#[test]
fn events_whose_key_is_not_their_event_id_are_failed_and_never_delivered() {
    // A live delivery of these would have another key: delivering them
    // under it would make two receipts of one event.
    for key_sources in ["json:/data/object/id", "json:/request/idempotency_key"] {
        let route = stripe_route_with(&format!(r#","key_sources":"{key_sources}""#));
        let fake = Fake::new(stripe_api(stripe_events(120, |_| "charge.refunded")));
        let ended = run_once(&fake, &route);
        let record = &ended.record;
        assert_eq!(record.error, None, "{key_sources}");
        assert!(record.complete, "the run goes on: {key_sources}");
        assert_eq!(
            (record.listed, record.failed, record.filled),
            (120, 120, 0),
            "{key_sources}"
        );
        assert!(fake.handed.borrow().is_empty(), "{key_sources}");
        assert_eq!(fake.decisions("reconcile-event-failed"), 120);
        assert_eq!(fake.decisions("reconciled"), 0);
    }
}

// --- GitHub: a hook's deliveries, the next page in `Link` ---

#[derive(Clone)]
struct GitHubDelivery {
    id: u64,
    guid: &'static str,
    age_seconds: u64,
    status_code: u16,
    event: &'static str,
    action: Option<&'static str>,
    redelivery: bool,
}

const HOOK: &str = "https://api.github.com/repos/o/r/hooks/1";

fn github_route() -> RouteConfig {
    route(
        r#"{"github":{"path":"/webhooks/github","signature":"github","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"github","api_key":"RECONCILE_KEY","types":["issues.*","push"],"endpoint":"repos/o/r/hooks/1"}}}"#,
    )
}

/// GitHub's list of a hook's deliveries in `pages`, newest first, and its
/// answer to each redelivery by delivery id (202 unless named).
fn github_api(
    pages: Vec<Vec<GitHubDelivery>>,
    resends: HashMap<u64, u16>,
) -> impl FnMut(&ApiRequest) -> Result<ApiResponse, String> {
    move |request| {
        assert_eq!(authorization(request), Some(&*format!("Bearer {API_KEY}")));
        if request.method == "POST" {
            let id: u64 = request
                .url
                .strip_prefix(&format!("{HOOK}/deliveries/"))
                .and_then(|rest| rest.strip_suffix("/attempts"))
                .expect("a redelivery")
                .parse()
                .unwrap();
            return match resends.get(&id).copied().unwrap_or(202) {
                202 => json(202, "{}"),
                status => json(status, r#"{"message":"Not Found"}"#),
            };
        }
        let page = match param(&request.url, "cursor") {
            None => {
                assert_eq!(request.url, format!("{HOOK}/deliveries?per_page=100"));
                0
            }
            Some(cursor) => cursor.parse().unwrap(),
        };
        let body: Vec<String> = pages[page]
            .iter()
            .map(|d| {
                format!(
                    r#"{{"id":{},"guid":"{}","delivered_at":"{}","redelivery":{},"duration":0.1,"status":"x","status_code":{},"event":"{}","action":{},"installation_id":null,"repository_id":1}}"#,
                    d.id,
                    d.guid,
                    rfc3339(NOW - d.age_seconds),
                    d.redelivery,
                    d.status_code,
                    d.event,
                    d.action
                        .map_or("null".to_string(), |action| format!("\"{action}\""))
                )
            })
            .collect();
        let mut response = json(200, format!("[{}]", body.join(",")))?;
        if page + 1 < pages.len() {
            response.headers.push((
                "link".into(),
                format!(
                    r#"<{HOOK}/deliveries?per_page=100&cursor={}>; rel="next""#,
                    page + 1
                ),
            ));
        }
        Ok(response)
    }
}

fn delivery_of(
    id: u64,
    guid: &'static str,
    age_seconds: u64,
    status_code: u16,
    event: &'static str,
    action: Option<&'static str>,
) -> GitHubDelivery {
    GitHubDelivery {
        id,
        guid,
        age_seconds,
        status_code,
        event,
        action,
        redelivery: false,
    }
}

/// A redelivery (by hand, or a run's) of `guid`: not its first delivery.
fn redelivery_of(
    id: u64,
    guid: &'static str,
    age_seconds: u64,
    status_code: u16,
) -> GitHubDelivery {
    GitHubDelivery {
        redelivery: true,
        ..delivery_of(id, guid, age_seconds, status_code, "push", None)
    }
}

#[test]
fn github_redelivers_what_it_never_got_a_2xx_for_and_one_refusal_fails_that_event_alone() {
    let pages = vec![
        vec![
            // Inside the grace: left to GitHub.
            delivery_of(107, "g-new", 60, 0, "push", None),
            delivery_of(106, "g-ping", 1_000, 200, "ping", None),
            delivery_of(105, "g1", 1_100, 200, "issues", Some("opened")),
            delivery_of(104, "g2", 1_200, 503, "push", None),
            // Gone from GitHub's side: 404 fails it, the run goes on.
            delivery_of(103, "g3", 1_300, 0, "push", None),
        ],
        vec![
            delivery_of(102, "g4", 1_400, 500, "issues", Some("closed")),
            // Older than the window: paging stops here.
            delivery_of(101, "g-old", 200_000, 500, "push", None),
        ],
    ];
    let fake = Fake::new(github_api(pages, HashMap::from([(103, 404)])));
    let route = github_route();
    let ended = run_once(&fake, &route);
    let record = &ended.record;
    assert_eq!(record.error, None);
    assert!(record.complete);
    assert_eq!(
        (
            record.listed,
            record.already_received,
            record.filled,
            record.failed,
            record.other_types
        ),
        (4, 1, 2, 1, 1)
    );
    let sent: Vec<(&str, String)> = fake
        .requests
        .borrow()
        .iter()
        .map(|request| (request.method, request.url.clone()))
        .collect();
    assert_eq!(
        sent,
        [
            ("GET", format!("{HOOK}/deliveries?per_page=100")),
            ("POST", format!("{HOOK}/deliveries/104/attempts")),
            ("POST", format!("{HOOK}/deliveries/103/attempts")),
            ("GET", format!("{HOOK}/deliveries?per_page=100&cursor=1")),
            ("POST", format!("{HOOK}/deliveries/102/attempts")),
        ]
    );
    // GitHub's record answers; no key's object is asked, nothing delivered.
    assert!(fake.asked.borrow().is_empty());
    assert!(fake.handed.borrow().is_empty());
    let failed: Vec<Option<String>> = fake
        .lines
        .borrow()
        .iter()
        .filter(|line| line.decision == "reconcile-event-failed")
        .map(|line| line.event_id.clone())
        .collect();
    assert_eq!(failed, [Some("g3".to_string())]);
}

#[test]
fn a_github_redelivery_answered_500_ends_the_run_and_backs_off() {
    let pages = vec![vec![
        delivery_of(3, "g1", 1_000, 503, "push", None),
        delivery_of(2, "g2", 1_100, 503, "push", None),
    ]];
    let fake = Fake::new(github_api(pages, HashMap::from([(3, 500)])));
    let route = github_route();
    let mut runs = RouteRuns::default();
    let (ended, delay) = run_and_finish(&fake, &route, &mut runs);
    let error = ended.record.error.clone().unwrap();
    assert_eq!(error.status, 500);
    assert!(!ended.record.complete);
    // g2 was never asked for: the API's own trouble ends the run there.
    assert_eq!(fake.requests.borrow().len(), 2);
    assert_eq!((ended.record.filled, ended.record.failed), (0, 0));
    // The page is listed again by the next run.
    assert_eq!(ended.cursor.as_ref().unwrap().page, None);
    assert_eq!(delay, 60_000);
}

// --- Paddle: the route's notifications, replayed ---

fn paddle_notification(ntf: &str, event_id: &str, event_type: &str, status: &str) -> String {
    format!(
        r#"{{"id":"{ntf}","type":"{event_type}","status":"{status}","origin":"event","occurred_at":"{}","delivered_at":null,"replayed_at":null,"retry_at":null,"times_attempted":3,"notification_setting_id":"ntfset_01route",
            "payload":{{"event_id":"{event_id}","event_type":"{event_type}","occurred_at":"{}","notification_id":"{ntf}","data":{{"id":"txn_1"}}}}}}"#,
        rfc3339(NOW - 1_000),
        rfc3339(NOW - 1_000)
    )
}

#[test]
fn paddle_replays_a_notification_whose_event_has_no_receipt() {
    let route = paddle_route();
    let next =
        "https://api.paddle.com/notifications?notification_setting_id=ntfset_01route&after=ntf_3";
    let fake = Fake::new(move |request: &ApiRequest| {
        assert_eq!(authorization(request), Some(&*format!("Bearer {API_KEY}")));
        if request.method == "POST" {
            return json(202, r#"{"data":{"notification_id":"ntf_new"}}"#);
        }
        let (data, more) = match request.url.as_str() {
            url if url == next => (
                vec![paddle_notification(
                    "ntf_4",
                    "evt_4",
                    "transaction.paid",
                    "failed",
                )],
                false,
            ),
            url => {
                assert_eq!(
                    param(url, "notification_setting_id").as_deref(),
                    Some("ntfset_01route")
                );
                assert_eq!(param(url, "from"), Some(rfc3339(NOW - 172_800)));
                assert_eq!(param(url, "to"), Some(rfc3339(NOW - 600)));
                (
                    vec![
                        paddle_notification("ntf_1", "evt_1", "transaction.completed", "delivered"),
                        paddle_notification("ntf_2", "evt_2", "transaction.completed", "failed"),
                        paddle_notification("ntf_3", "evt_3", "subscription.created", "failed"),
                    ],
                    true,
                )
            }
        };
        json(
            200,
            format!(
                r#"{{"data":[{}],"meta":{{"request_id":"r","pagination":{{"per_page":200,"next":"{next}","has_more":{more},"estimated_total":4}}}}}}"#,
                data.join(",")
            ),
        )
    });
    fake.receive(["evt_1".to_string()]);
    let ended = run_once(&fake, &route);
    let record = &ended.record;
    assert_eq!(record.error, None);
    assert!(record.complete);
    assert_eq!(
        (
            record.listed,
            record.already_received,
            record.filled,
            record.other_types
        ),
        (3, 1, 2, 1)
    );
    // Each event's own object was asked, under the key a live delivery
    // of it has (its payload's event_id).
    let asked: Vec<String> = fake
        .asked
        .borrow()
        .iter()
        .map(|identity| {
            assert_eq!(identity.route, "paddle");
            identity.key.as_str().to_string()
        })
        .collect();
    assert_eq!(asked, ["evt_1", "evt_2", "evt_4"]);
    let replays: Vec<String> = fake
        .requests
        .borrow()
        .iter()
        .filter(|request| request.method == "POST")
        .map(|request| request.url.clone())
        .collect();
    assert_eq!(
        replays,
        [
            "https://api.paddle.com/notifications/ntf_2/replay",
            "https://api.paddle.com/notifications/ntf_4/replay",
        ]
    );
    assert!(
        fake.handed.borrow().is_empty(),
        "Paddle re-sends it, signed"
    );
}

// --- PayPal: an OAuth token, then the list and the resends ---

#[test]
fn paypal_asks_for_a_token_first_and_sends_only_the_token_after() {
    let route = route(
        r#"{"paypal":{"path":"/webhooks/paypal","signature":"paypal","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"paypal","api_key":"PAYPAL_CLIENT","types":["PAYMENT.CAPTURE.*"]}}}"#,
    );
    let event = |id: &str, event_type: &str| {
        format!(
            r#"{{"id":"{id}","create_time":"{}","resource_type":"capture","event_type":"{event_type}","summary":"s","resource":{{"id":"cap_1"}}}}"#,
            rfc3339(NOW - 2_000)
        )
    };
    let events = [
        event("WH-1", "PAYMENT.CAPTURE.COMPLETED"),
        event("WH-2", "PAYMENT.CAPTURE.REFUNDED"),
        event("WH-3", "CHECKOUT.ORDER.APPROVED"),
    ]
    .join(",");
    let fake = Fake::new(move |request: &ApiRequest| {
        let bearer = format!("Bearer {PAYPAL_TOKEN}");
        match (request.method, request.url.as_str()) {
            ("POST", "https://api-m.paypal.com/v1/oauth2/token") => {
                use base64::Engine as _;
                let basic = base64::engine::general_purpose::STANDARD.encode(PAYPAL_CLIENT);
                assert_eq!(authorization(request), Some(&*format!("Basic {basic}")));
                assert_eq!(
                    request.body.as_deref(),
                    Some("grant_type=client_credentials")
                );
                json(
                    200,
                    format!(
                        r#"{{"scope":"s","access_token":"{PAYPAL_TOKEN}","token_type":"Bearer","expires_in":32400}}"#
                    ),
                )
            }
            _ if authorization(request) != Some(&bearer) => json(
                401,
                r#"{"name":"AUTHENTICATION_FAILURE","message":"Authentication failed due to invalid authentication credentials or a missing Authorization header."}"#,
            ),
            ("GET", url) => {
                assert!(url.starts_with(
                    "https://api-m.paypal.com/v1/notifications/webhooks-events?page_size=100&start_time="
                ));
                json(
                    200,
                    format!(r#"{{"events":[{events}],"count":3,"links":[]}}"#),
                )
            }
            ("POST", url) => {
                assert_eq!(
                    url,
                    "https://api-m.paypal.com/v1/notifications/webhooks-events/WH-2/resend"
                );
                json(202, r#"{"id":"WH-2"}"#)
            }
            other => panic!("{other:?}"),
        }
    });
    fake.receive(["WH-1".to_string()]);
    let ended = run_once(&fake, &route);
    let record = &ended.record;
    assert_eq!(record.error, None);
    assert_eq!(
        (
            record.listed,
            record.already_received,
            record.filled,
            record.other_types
        ),
        (2, 1, 1, 1)
    );
    let requests = fake.requests.borrow();
    assert_eq!(requests.len(), 3);
    assert!(requests[0].url.ends_with("/v1/oauth2/token"));
    // After the token, the client's secret goes nowhere.
    for request in &requests[1..] {
        assert_eq!(
            authorization(request),
            Some(&*format!("Bearer {PAYPAL_TOKEN}"))
        );
        let everything = format!(
            "{} {:?} {}",
            request.url,
            request.headers,
            request.body.as_deref().unwrap_or("")
        );
        assert!(!everything.contains("EKClientSecretValue99"));
        assert!(!everything.contains(PAYPAL_CLIENT));
    }
    // The resend names the route's webhook (its signing secret's value).
    assert_eq!(
        requests[2].body.as_deref(),
        Some(&*format!(r#"{{"webhook_ids":["{WEBHOOK_SECRET}"]}}"#))
    );
}

#[test]
fn a_paypal_token_refused_ends_the_run_before_anything_is_listed() {
    let route = route(
        r#"{"paypal":{"path":"/webhooks/paypal","signature":"paypal","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"paypal","api_key":"PAYPAL_CLIENT","types":["*"]}}}"#,
    );
    let fake = Fake::new(|_: &ApiRequest| {
        json(
            401,
            r#"{"error":"invalid_client","error_description":"Client Authentication failed"}"#,
        )
    });
    let ended = run_once(&fake, &route);
    let error = ended.record.error.unwrap();
    assert_eq!(
        (error.status, error.problem.as_str()),
        (401, "Client Authentication failed")
    );
    assert_eq!(fake.requests.borrow().len(), 1);
    assert!(!fake.said().contains("EKClientSecretValue99"));
}

/// PayPal's key is `client_id:secret`; a token endpoint whose refusal
/// repeats the secret alone (not the pair) must not show it in the run's
/// record or its log line.
#[test]
fn a_paypal_refusal_echoing_the_secret_alone_is_scrubbed() {
    let route = route(
        r#"{"paypal":{"path":"/webhooks/paypal","signature":"paypal","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"paypal","api_key":"PAYPAL_CLIENT","types":["*"]}}}"#,
    );
    let fake = Fake::new(|_: &ApiRequest| {
        json(
            401,
            r#"{"error":"invalid_client","error_description":"Client secret EKClientSecretValue99 does not match client AeClientId42"}"#,
        )
    });
    let ended = run_once(&fake, &route);
    let record = serde_json::to_string(&ended.record).unwrap();
    assert!(record.contains("[redacted]"), "{record}");
    for shown in [record, fake.said()] {
        assert!(!shown.contains("EKClientSecretValue99"), "{shown}");
        assert!(!shown.contains("AeClientId42"), "{shown}");
    }
}

/// The review's item 16 (round 5): a provider's refusal of one event's
/// re-send was logged as it came, credential and all; only a run's error
/// was scrubbed.
#[test]
fn a_refused_resend_is_logged_without_the_credential() {
    let route = route(
        r#"{"paypal":{"path":"/webhooks/paypal","signature":"paypal","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"paypal","api_key":"PAYPAL_CLIENT","types":["*"]}}}"#,
    );
    let event = format!(
        r#"{{"id":"WH-9","create_time":"{}","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"s","resource":{{"id":"cap_9"}}}}"#,
        rfc3339(NOW - 2_000)
    );
    let fake = Fake::new(move |request: &ApiRequest| match request.method {
        "POST" if request.url.ends_with("/v1/oauth2/token") => json(
            200,
            format!(
                r#"{{"access_token":"{PAYPAL_TOKEN}","token_type":"Bearer","expires_in":32400}}"#
            ),
        ),
        "GET" => json(200, format!(r#"{{"events":[{event}],"links":[]}}"#)),
        _ => json(
            404,
            format!(
                r#"{{"name":"RESOURCE_NOT_FOUND","message":"no event for {PAYPAL_TOKEN} of EKClientSecretValue99"}}"#
            ),
        ),
    });
    let ended = run_once(&fake, &route);
    assert_eq!((ended.record.failed, ended.record.error.clone()), (1, None));
    let said = fake.said();
    assert!(
        said.contains("reconcile-event-failed") && said.contains("[redacted]"),
        "{said}"
    );
    assert!(
        !said.contains("EKClientSecretValue99") && !said.contains(PAYPAL_TOKEN),
        "{said}"
    );
}

// --- Square: the search, delivered as the webhook's body ---

#[test]
fn square_delivers_the_webhook_body_rebuilt_from_the_listed_event_under_its_event_id() {
    let route = route(
        r#"{"square":{"path":"/webhooks/square","signature":"square","signing_secret":"WEBHOOK_SECRET","signature_url":"https://hooks.example/square",
            "reconcile":{"source":"square","api_key":"RECONCILE_KEY","types":["payment.updated"]}}}"#,
    );
    let created = rfc3339(NOW - 3_000);
    let event = |id: &str| {
        format!(
            r#"{{"merchant_id":"M1","location_id":"L1","type":"payment.updated","event_id":"{id}","created_at":"{created}","data":{{"type":"payment","id":"p1","object":{{"payment":{{"id":"p1"}}}}}}}}"#
        )
    };
    let pages = [
        format!(r#"{{"events":[{}],"cursor":"c2"}}"#, event("e-1")),
        format!(r#"{{"events":[{}]}}"#, event("e-2")),
    ];
    let fake = Fake::new(move |request: &ApiRequest| {
        assert_eq!(request.url, "https://connect.squareup.com/v2/events");
        let body: serde_json::Value =
            serde_json::from_str(request.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["query"]["filter"]["event_types"][0], "payment.updated");
        match body["cursor"].as_str() {
            None => json(200, pages[0].clone()),
            Some("c2") => json(200, pages[1].clone()),
            other => panic!("{other:?}"),
        }
    });
    let ended = run_once(&fake, &route);
    assert_eq!((ended.record.listed, ended.record.filled), (2, 2));
    let handed = fake.handed.borrow();
    assert_eq!(fake.handed_keys(), ["e-1", "e-2"]);
    assert_eq!(
        String::from_utf8_lossy(&handed[0].request.body),
        format!(
            r#"{{"merchant_id":"M1","type":"payment.updated","event_id":"e-1","created_at":"{created}","data":{{"type":"payment","id":"p1","object":{{"payment":{{"id":"p1"}}}}}}}}"#
        )
    );
    assert_eq!(handed[0].fingerprint, Fingerprint::of_event("e-1"));
}

// --- Stripe's thin events: GET /v2/core/events, next_page_url ---

/// A listed thin event (`created` to the millisecond) with the `data`
/// only the API renders, and the body its destination posts.
fn thin_event(id: &str, event_type: &str, created_ms: u64) -> (String, String) {
    let created = format!(
        "{}.{:03}Z",
        &rfc3339(created_ms / 1_000)[..19],
        created_ms % 1_000
    );
    let head =
        format!(r#"{{"id":"{id}","object":"v2.core.event","context":null,"created":"{created}""#);
    let tail = format!(
        r#""livemode":false,"reason":null,"related_object":{{"id":"mtr_{id}","type":"billing.meter","url":"/v1/billing/meters/mtr_{id}"}},"type":"{event_type}"}}"#
    );
    (
        format!(
            r#"{head},"data":{{"developer_message_summary":"There is 1 invalid event"}},{tail}"#
        ),
        format!("{head},{tail}"),
    )
}

/// Stripe's `/v2/core/events` as its reference describes it: the
/// `created[gte]`/`created[lt]` range in RFC 3339, repeated `types`,
/// `limit`, newest first, and `next_page_url` with an opaque `page` token
/// that carries the first request's filters.
fn stripe_v2_api(
    events: Vec<(String, String, u64)>,
) -> impl FnMut(&ApiRequest) -> Result<ApiResponse, String> {
    let mut filters: Option<(u64, u64, Vec<String>)> = None;
    move |request| {
        assert_eq!(request.method, "GET");
        assert!(
            request
                .url
                .starts_with("https://api.stripe.com/v2/core/events?"),
            "{}",
            request.url
        );
        assert_eq!(
            crate::headers::get(&request.headers, "stripe-version"),
            Some("2026-10-28.endive")
        );
        if authorization(request) != Some(&format!("Bearer {API_KEY}")) {
            return json(
                401,
                r#"{"error":{"type":"invalid_request_error","code":"invalid_api_key","message":"Invalid API Key provided: rk_live_****6789"}}"#,
            );
        }
        let url = &request.url;
        let limit: usize = param(url, "limit").unwrap().parse().unwrap();
        let offset = match param(url, "page") {
            Some(page) => {
                assert_eq!(param(url, "created[gte]"), None, "the token carries them");
                page.strip_prefix("page_").unwrap().parse().unwrap()
            }
            None => {
                let at =
                    |name: &str| crate::time::rfc3339_ms(&param(url, name).expect(name)).unwrap();
                let types = query(url)
                    .into_iter()
                    .filter(|(name, _)| name == "types")
                    .map(|(_, value)| value)
                    .collect();
                filters = Some((at("created[gte]"), at("created[lt]"), types));
                0
            }
        };
        let (gte, lt, types) = filters.clone().expect("a first page first");
        let listed: Vec<&(String, String, u64)> = events
            .iter()
            .filter(|(_, _, created)| (gte..lt).contains(created))
            .filter(|(_, kind, _)| types.is_empty() || types.contains(kind))
            .collect();
        let end = (offset + limit).min(listed.len());
        let page: Vec<String> = listed[offset..end]
            .iter()
            .map(|(id, kind, created)| thin_event(id, kind, *created).0)
            .collect();
        let next = match end < listed.len() {
            true => format!(r#""/v2/core/events?limit={limit}&page=page_{end}""#),
            false => "null".into(),
        };
        json(
            200,
            format!(
                r#"{{"data":[{}],"next_page_url":{next},"previous_page_url":null}}"#,
                page.join(",")
            ),
        )
    }
}

#[test]
fn stripe_v2_pages_thin_events_by_next_page_url_and_delivers_each_as_its_destination_posts_it() {
    let route = route(
        r#"{"thin":{"path":"/webhooks/thin","signature":"stripe","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"stripe-v2","api_key":"RECONCILE_KEY","types":["v1.billing.meter.*"]}}}"#,
    );
    let window = route.reconcile.as_ref().unwrap().window(NOW);
    // 50 events newest first, one a second, every tenth a type the route
    // does not take; the newest is in the window's last second, to the
    // millisecond; one is younger than the grace, one older than the
    // lookback.
    let mut events: Vec<(String, String, u64)> = (0..50)
        .map(|i| {
            let kind = match i % 10 {
                9 => "v2.core.event_destination.ping",
                _ => "v1.billing.meter.error_report_triggered",
            };
            let created = (window.to - i) * 1_000 + 999;
            (format!("evt_test_{i:03}"), kind.to_string(), created)
        })
        .collect();
    events.insert(
        0,
        (
            "evt_test_young".into(),
            events[0].1.clone(),
            (window.to + 1) * 1_000,
        ),
    );
    events.push((
        "evt_test_old".into(),
        events[0].1.clone(),
        window.from * 1_000 - 1,
    ));
    let fake = Fake::new(stripe_v2_api(events));
    fake.receive(["evt_test_000".to_string(), "evt_test_021".to_string()]);

    let ended = run_once(&fake, &route);
    let record = &ended.record;
    assert_eq!(record.error, None);
    assert!(record.complete);
    assert_eq!(
        (
            record.listed,
            record.already_received,
            record.filled,
            record.other_types
        ),
        (45, 2, 43, 5)
    );
    // Three pages of 20: the first with the window, then next_page_url.
    let requests = fake.requests.borrow();
    let urls: Vec<&str> = requests
        .iter()
        .map(|request| request.url.as_str())
        .collect();
    assert_eq!(
        urls,
        [
            format!(
                "https://api.stripe.com/v2/core/events?limit=20&created%5Bgte%5D={}&created%5Blt%5D={}",
                rfc3339(window.from).replace(':', "%3A"),
                rfc3339(window.to + 1).replace(':', "%3A")
            )
            .as_str(),
            "https://api.stripe.com/v2/core/events?limit=20&page=page_20",
            "https://api.stripe.com/v2/core/events?limit=20&page=page_40",
        ]
    );
    // Each event of the route's types went to its key's object once, as the
    // thin event its destination posts: without the API's `data`.
    let handed = fake.handed.borrow();
    assert_eq!(handed.len(), 45);
    for delivery in handed.iter() {
        let id = delivery.identity.key.as_str();
        assert_eq!(delivery.fingerprint, Fingerprint::of_event(id));
        assert_eq!(delivery.request.source.as_deref(), Some("reconciliation"));
        assert_eq!(delivery.request.url, "https://pay.internal/webhooks/thin");
        let body = String::from_utf8(delivery.request.body.clone()).unwrap();
        assert!(!body.contains("\"data\""), "{body}");
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["id"], id);
        assert_eq!(parsed["object"], "v2.core.event");
        assert_eq!(parsed["related_object"]["id"], format!("mtr_{id}"));
    }
    let first = &handed[0];
    assert_eq!(first.identity.key.as_str(), "evt_test_000");
    assert_eq!(
        first.request.body,
        thin_event(
            "evt_test_000",
            "v1.billing.meter.error_report_triggered",
            window.to * 1_000 + 999
        )
        .1
        .into_bytes()
    );
    assert_eq!(fake.decisions("reconciled"), 43);
    assert!(!fake.said().contains(API_KEY));
}

#[test]
fn a_stripe_v2_run_stopped_inside_the_window_goes_on_from_the_next_page_url() {
    let route = route(
        r#"{"thin":{"path":"/webhooks/thin","signature":"stripe","signing_secret":"WEBHOOK_SECRET",
            "reconcile":{"source":"stripe-v2","api_key":"RECONCILE_KEY","types":["v1.billing.meter.error_report_triggered"]}}}"#,
    );
    let window = route.reconcile.as_ref().unwrap().window(NOW);
    let events: Vec<(String, String, u64)> = (0..100)
        .map(|i| {
            let kind = "v1.billing.meter.error_report_triggered".to_string();
            (format!("evt_test_{i:03}"), kind, (window.to - i) * 1_000)
        })
        .collect();
    let fake = Fake::new(stripe_v2_api(events));
    // Room for three pages of 20 (a page may cost 201: its list, and per
    // event a call and a re-send), not a fourth.
    let limits = Limits {
        subrequests: 243,
        duration_ms: 25_000,
    };
    let first = run_with(&fake, &route, None, limits);
    assert!(!first.record.complete);
    assert_eq!(first.record.filled, 60);
    let cursor = first.cursor.clone().expect("the window goes on");
    assert_eq!(
        cursor.page.as_deref(),
        Some("https://api.stripe.com/v2/core/events?limit=20&page=page_60"),
        "the next_page_url, whole on the API's origin"
    );
    // The exact type went to the API, repeated as a v2 array is.
    assert_eq!(
        param(&fake.requests.borrow()[0].url, "types").as_deref(),
        Some("v1.billing.meter.error_report_triggered")
    );
    let second = run_with(&fake, &route, Some(cursor), RUN_LIMITS);
    assert!(second.record.complete);
    assert_eq!(second.record.window, first.record.window);
    let handed = fake.handed_keys();
    let unique: HashSet<&String> = handed.iter().collect();
    assert_eq!(
        (handed.len(), unique.len()),
        (100, 100),
        "none twice, none skipped"
    );
}

// --- What a route's object keeps between runs ---

fn record(id: usize, started_at: u64, error: Option<u16>) -> RunRecord {
    RunRecord {
        id: format!("run-{id}"),
        trigger: Trigger::Schedule,
        started_at,
        ended_at: started_at + 1_000,
        window: Window { from: 0, to: 1 },
        listed: 10,
        already_received: 6,
        filled: 3,
        failed: 1,
        other_types: 2,
        already_asked: 0,
        complete: error.is_none(),
        error: error.map(|status| ApiError {
            status,
            problem: "p".into(),
        }),
    }
}

fn stripe_config() -> ReconcileConfig {
    stripe_route().reconcile.unwrap()
}

#[test]
fn a_route_keeps_its_last_50_runs_newest_first() {
    let config = stripe_config();
    let mut runs = RouteRuns::default();
    for id in 0..60 {
        runs.finish(record(id, NOW_MS + id as u64, None), None, None, &config);
    }
    assert_eq!(runs.runs.len(), KEPT_RUNS);
    assert_eq!(runs.runs.front().unwrap().id, "run-59");
    assert_eq!(runs.runs.back().unwrap().id, "run-10");
    assert!(runs
        .runs
        .iter()
        .zip(runs.runs.iter().skip(1))
        .all(|(newer, older)| newer.started_at > older.started_at));
}

#[test]
fn a_lock_keeps_a_second_run_out_until_it_is_freed_or_expires() {
    let config = stripe_config();
    let mut runs = RouteRuns::default();
    assert!(runs.due(NOW_MS));
    assert!(!runs.locked(NOW_MS));
    runs.lock(NOW_MS);
    assert!(runs.locked(NOW_MS));
    assert!(!runs.due(NOW_MS + 1));
    // A run whose object was evicted never frees it: it expires.
    assert!(runs.locked(NOW_MS + LOCK_MS - 1));
    assert!(!runs.locked(NOW_MS + LOCK_MS));
    assert!(runs.due(NOW_MS + LOCK_MS));
    // An ended run frees it at once, and the next is due every_seconds
    // after its start.
    runs.lock(NOW_MS);
    runs.finish(record(1, NOW_MS, None), None, None, &config);
    assert!(!runs.locked(NOW_MS + 1_000));
    assert!(!runs.due(NOW_MS + 599_999));
    assert!(runs.due(NOW_MS + 600_000));
    // Due, but locked by a run under way: not due.
    runs.lock(NOW_MS + 600_000);
    assert!(!runs.due(NOW_MS + 600_001));
}

/// The reconciliation object through its host: a tick starts a run only
/// when one is due, the operator whenever none runs, and the lock is
/// stored before the run begins; the finished run sets the next alarm.
#[test]
fn the_reconcile_object_begins_and_finishes_runs_through_its_host() {
    use crate::host::value::{MemoryValues, ValueStore};
    use crate::host::Host;
    let config = stripe_config();
    let host: Host<RouteRuns, ValueStore<MemoryValues>> = Host::new(ValueStore {
        storage: MemoryValues::default(),
        key: "runs",
    });
    let (begun, _) = block_on(host.call(&ReconcileCall::Tick, NOW_MS)).unwrap();
    assert_eq!(begun, Begun::Run(Trigger::Schedule));
    let stored: RouteRuns =
        serde_json::from_str(host.store().storage.values.borrow().get("runs").unwrap()).unwrap();
    assert!(stored.locked(NOW_MS), "locked before the run begins");
    let (second, _) = block_on(host.call(&ReconcileCall::RunNow, NOW_MS + 1)).unwrap();
    assert_eq!(second, Begun::NotNow { running: true });
    block_on(host.step(NOW_MS + 2_000, |runs| {
        runs.finish(record(1, NOW_MS, None), None, None, &config)
    }))
    .unwrap();
    assert_eq!(host.store().storage.alarm.get(), Some(NOW_MS + 600_000));
    let (tick, _) = block_on(host.call(&ReconcileCall::Tick, NOW_MS + 3_000)).unwrap();
    assert_eq!(tick, Begun::NotNow { running: false }, "not due yet");
    let (now, _) = block_on(host.call(&ReconcileCall::RunNow, NOW_MS + 3_001)).unwrap();
    assert_eq!(now, Begun::Run(Trigger::Operator));
    let view = block_on(host.read(|runs| runs.view("stripe", NOW_MS + 3_002))).unwrap();
    assert_eq!(view["running"], true);
}

#[test]
fn the_last_day_sums_only_runs_started_in_the_last_24_hours_and_counts_failed_runs() {
    // More runs than the 50 kept records still count: see below.
    let config = stripe_config();
    let day = 86_400_000;
    let now = NOW_MS + 2 * day;
    let mut runs = RouteRuns::default();
    for (id, started_at, error) in [
        (1, now - day - 1, None),
        (2, now - day - 1, Some(503)),
        // Counted by the hour: the current one and the 23 before it.
        (3, now - day + 3_600_000, None),
        (4, now - 60_000, Some(401)),
        (5, now - 1_000, None),
    ] {
        runs.finish(record(id, started_at, error), None, None, &config);
    }
    let counts = runs.last_day(now);
    assert_eq!(
        counts,
        DayCounts {
            runs: 3,
            listed: 30,
            already_received: 18,
            filled: 9,
            failed: 3,
            failed_runs: 1,
        }
    );
    let summary = runs.summary(now);
    assert_eq!(summary["last_run"]["id"], "run-5");
    assert_eq!(summary["last_day"]["failed_runs"], 1);
}

/// A redelivery that got a 2xx is on an earlier page than the failed
/// original it stands for: the event is one event, counted once and
/// never redelivered again.
#[test]
fn a_github_event_on_two_pages_is_settled_once() {
    let pages = vec![
        vec![delivery_of(9, "g1", 1_000, 200, "push", None)],
        vec![delivery_of(5, "g1", 2_000, 0, "push", None)],
    ];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let ended = run_once(&fake, &github_route());
    assert_eq!(
        (
            ended.record.listed,
            ended.record.already_received,
            ended.record.filled
        ),
        (1, 1, 0)
    );
    assert!(fake
        .requests
        .borrow()
        .iter()
        .all(|request| request.method == "GET"));
}

/// The review's item 3 (round 5): a failed redelivery by hand on page 1,
/// the event's first delivery answered 200 on page 2. The event arrived
/// (GitHub recorded a 2xx): nothing is redelivered.
#[test]
fn a_github_event_is_settled_by_its_deliveries_on_every_page() {
    let pages = vec![
        vec![redelivery_of(9, "g1", 1_000, 0)],
        vec![delivery_of(8, "g2", 1_500, 503, "push", None)],
        vec![delivery_of(5, "g1", 2_000, 200, "push", None)],
    ];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let ended = run_once(&fake, &github_route());
    assert_eq!(
        (
            ended.record.listed,
            ended.record.already_received,
            ended.record.filled
        ),
        (2, 1, 1)
    );
    let posts: Vec<String> = fake
        .requests
        .borrow()
        .iter()
        .filter(|request| request.method == "POST")
        .map(|request| request.url.clone())
        .collect();
    assert_eq!(posts, [format!("{HOOK}/deliveries/8/attempts")], "g2 alone");
}

/// An event is placed in the window by its first delivery: one whose
/// redeliveries are in the window and whose first delivery is older is
/// not the window's, and is not redelivered again.
#[test]
fn a_github_event_is_placed_by_its_first_delivery_across_pages() {
    let lookback = 172_800;
    let pages = vec![
        vec![redelivery_of(9, "g1", 1_000, 500)],
        vec![delivery_of(5, "g1", lookback + 600, 500, "push", None)],
    ];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let ended = run_once(&fake, &github_route());
    assert_eq!((ended.record.listed, ended.record.filled), (0, 0));
    assert!(fake
        .requests
        .borrow()
        .iter()
        .all(|request| request.method == "GET"));
}

/// A run out of time inside a page stops there; the next lists the page
/// again and settles only what the first did not: every event is handed
/// to its object once.
#[test]
fn a_page_listed_again_after_a_stop_inside_it_settles_each_event_once() {
    let fake = Fake::new(stripe_api(stripe_events(150, |_| {
        "payment_intent.succeeded"
    })));
    let route = stripe_route();
    // The deadline passes while the second page is being settled.
    let limits = Limits {
        subrequests: 100_000,
        duration_ms: 25_000,
    };
    let first = {
        let config = route.reconcile.as_ref().unwrap();
        // Each call to a key's object takes 200 ms: 25 s cover 125.
        let slow = SlowObjects {
            inner: &fake,
            step_ms: 200,
        };
        block_on(run(
            &slow,
            &route,
            config,
            Remembered {
                cursor: None,
                asked: &Asked::new(),
            },
            "first".into(),
            Trigger::Schedule,
            limits,
        ))
    };
    assert!(!first.record.complete);
    let settled_first = first.record.listed;
    assert!(
        settled_first > 100 && settled_first < 150,
        "{settled_first}"
    );
    let second = run_with(&fake, &route, first.cursor, RUN_LIMITS);
    assert!(second.record.complete);
    assert_eq!(settled_first + second.record.listed, 150);
    let mut keys = fake.handed_keys();
    let handed = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!((handed, keys.len()), (150, 150), "each event handed once");
}

/// A key's object whose every call takes `step_ms` of the run's clock.
struct SlowObjects<'a> {
    inner: &'a Fake,
    step_ms: u64,
}

impl RunBackend for SlowObjects<'_> {
    fn now_ms(&self) -> u64 {
        self.inner.now_ms()
    }
    async fn call_api(&self, request: ApiRequest) -> Result<ApiResponse, String> {
        self.inner.call_api(request).await
    }
    async fn deliver(&self, delivery: Delivery) -> Result<KeyAnswer, String> {
        self.inner.now.set(self.inner.now.get() + self.step_ms);
        self.inner.deliver(delivery).await
    }
    async fn presence(&self, identity: &Identity) -> Result<Presence, String> {
        self.inner.presence(identity).await
    }
    fn log(&self, line: &ReconcileLine) {
        self.inner.log(line)
    }
}

/// After a 401 that lasted two days, the window the run stopped in is
/// older than its receipts may be: a new window starts, and nothing older
/// than the lookback is listed (it would be delivered a second time).
#[test]
fn a_cursor_older_than_an_hour_is_dropped_for_a_new_window() {
    let fake = Fake::new(stripe_api(stripe_events(3, |_| "payment_intent.succeeded")));
    let route = stripe_route();
    let config = route.reconcile.as_ref().unwrap();
    let stale = Cursor {
        made_for: config.cursor_scope(),
        window: config.window(NOW - 2 * 86_400),
        page: Some("evt_0001".into()),
        settled: vec!["evt_0000".into()],
    };
    let ended = run_with(&fake, &route, Some(stale), RUN_LIMITS);
    assert_eq!(ended.record.window, config.window(NOW));
    assert!(param(&fake.requests.borrow()[0].url, "starting_after").is_none());
    // Within the hour, a cursor is followed.
    let recent = Cursor {
        made_for: config.cursor_scope(),
        window: config.window(NOW - 1_800),
        page: None,
        settled: vec![],
    };
    let ended = run_with(&fake, &route, Some(recent.clone()), RUN_LIMITS);
    assert_eq!(ended.record.window, recent.window);
}

/// The bound is 50 minutes, not the hour: the run's own time and its last
/// forward's must still fall inside the hour of receipts the route keeps
/// beyond its lookback. A cursor 55 minutes old starts a new window; one
/// 49 minutes old is followed.
#[test]
fn a_cursor_55_minutes_old_is_dropped_and_one_49_minutes_old_is_followed() {
    let fake = Fake::new(stripe_api(stripe_events(3, |_| "payment_intent.succeeded")));
    let route = stripe_route();
    let config = route.reconcile.as_ref().unwrap();
    let cursor_of_age = |seconds: u64| Cursor {
        made_for: config.cursor_scope(),
        window: config.window(NOW - seconds),
        page: None,
        settled: vec![],
    };
    let ended = run_with(&fake, &route, Some(cursor_of_age(55 * 60)), RUN_LIMITS);
    assert_eq!(ended.record.window, config.window(NOW));
    let followed = cursor_of_age(49 * 60);
    let ended = run_with(&fake, &route, Some(followed.clone()), RUN_LIMITS);
    assert_eq!(ended.record.window, followed.window);
}

/// The review's item 1 (round 5): an event whose endpoint is still broken
/// was asked for a replay by every run in the lookback (up to 288 asks),
/// each replay a new notification. Asked once, it is not asked again
/// while the lookback lasts; GitHub, whose redelivery is one attempt, is.
#[test]
fn a_paddle_event_asked_for_once_is_not_asked_again_within_the_lookback() {
    let route = paddle_route();
    let replays = std::rc::Rc::new(Cell::new(0));
    let counted = replays.clone();
    let fake = Fake::new(move |request: &ApiRequest| {
        if request.method == "POST" {
            counted.set(counted.get() + 1);
            return json(202, r#"{"data":{"notification_id":"ntf_new"}}"#);
        }
        json(
            200,
            format!(
                r#"{{"data":[{}],"meta":{{"request_id":"r","pagination":{{"per_page":200,"next":"x","has_more":false,"estimated_total":1}}}}}}"#,
                paddle_notification("ntf_1", "evt_1", "transaction.paid", "failed")
            ),
        )
    });
    let config = route.reconcile.clone().unwrap();
    let mut runs = RouteRuns::default();
    let first = run_asked(&fake, &route, None, &runs.asked, RUN_LIMITS);
    assert_eq!(
        (first.record.filled, first.asked.clone()),
        (1, vec!["evt_1".to_string()])
    );
    runs.remember_asked(&first.asked, NOW * 1_000, &config);
    let second = run_asked(&fake, &route, None, &runs.asked, RUN_LIMITS);
    assert_eq!(
        (
            second.record.listed,
            second.record.filled,
            second.record.already_asked
        ),
        (1, 0, 1)
    );
    assert_eq!(replays.get(), 1, "one replay asked, not one per run");
    // Past the lookback, the memory goes.
    runs.remember_asked(
        &[],
        NOW * 1_000 + config.lookback_seconds * 1_000 + 1,
        &config,
    );
    assert!(runs.asked.is_empty());
    // GitHub's redelivery is a single attempt: asked again by each run.
    let pages = vec![vec![delivery_of(5, "g1", 1_000, 503, "push", None)]];
    let github = Fake::new(github_api(pages, HashMap::new()));
    let mut asked = Asked::new();
    asked.insert("g1".into(), NOW * 1_000);
    let again = run_asked(&github, &github_route(), None, &asked, RUN_LIMITS);
    assert_eq!((again.record.filled, again.record.already_asked), (1, 0));
}

/// The asked memory is bounded: the oldest go first.
#[test]
fn the_asked_memory_keeps_the_newest_events() {
    let config = stripe_config();
    let mut runs = RouteRuns::default();
    let ids: Vec<String> = (0..MAX_ASKED + 10).map(|n| format!("evt_{n:05}")).collect();
    for (n, id) in ids.iter().enumerate() {
        runs.remember_asked(std::slice::from_ref(id), NOW * 1_000 + n as u64, &config);
    }
    assert_eq!(runs.asked.len(), MAX_ASKED);
    assert!(!runs.asked.contains_key("evt_00009"));
    assert!(runs.asked.contains_key("evt_00010"));
}

/// A next-page link kept from another `api_base` is not followed (it
/// would send the new key to the old host).
#[test]
fn a_cursor_link_off_the_apis_origin_is_dropped() {
    let pages = vec![vec![delivery_of(1, "g1", 1_000, 200, "push", None)]];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let route = github_route();
    let config = route.reconcile.as_ref().unwrap();
    let elsewhere = Cursor {
        made_for: config.cursor_scope(),
        window: config.window(NOW),
        page: Some("https://old-api.example/repos/o/r/hooks/1/deliveries?cursor=7".into()),
        settled: vec![],
    };
    run_with(&fake, &route, Some(elsewhere), RUN_LIMITS);
    assert_eq!(
        fake.requests.borrow()[0].url,
        format!("{HOOK}/deliveries?per_page=100")
    );
}

/// Paddle: an event whose live delivery came and whose forward failed is
/// forwarded by the run itself, compared by event id; a replay would carry
/// a new notification id and be refused as another payload.
#[test]
fn a_paddle_event_whose_forward_failed_is_forwarded_by_the_run_not_replayed() {
    let route = paddle_route();
    let fake = Fake::new(move |request: &ApiRequest| {
        assert_eq!(request.method, "GET", "no replay is asked for");
        json(
            200,
            format!(
                r#"{{"data":[{}],"meta":{{"request_id":"r","pagination":{{"per_page":100,"next":null,"has_more":false,"estimated_total":1}}}}}}"#,
                paddle_notification("ntf_1", "evt_1", "transaction.completed", "failed")
            ),
        )
    });
    fake.failed_here.borrow_mut().insert("evt_1".to_string());
    let ended = run_once(&fake, &route);
    assert_eq!((ended.record.listed, ended.record.filled), (1, 1));
    let handed = fake.handed.borrow();
    assert_eq!(handed.len(), 1);
    assert!(handed[0].if_absent);
    assert_eq!(
        handed[0].fingerprint,
        crate::canonical::Fingerprint::of_event("evt_1")
    );
}

/// GitHub: a delivery the route answered with a 4xx a redelivery would
/// get again (the origin's refusal) arrived; a 401 (a wrong secret) did
/// not; an event's first delivery places it in the window, whatever its
/// redeliveries' times.
#[test]
fn github_counts_a_settled_4xx_as_arrived_and_places_an_event_by_its_first_delivery() {
    let pages = vec![vec![
        delivery_of(4, "g-refused", 1_000, 400, "push", None),
        delivery_of(3, "g-wrong-secret", 1_100, 401, "push", None),
        // A redelivery inside the window of an event first delivered
        // before it: not listed.
        delivery_of(2, "g-old", 1_200, 503, "push", None),
        delivery_of(1, "g-old", 200_000, 503, "push", None),
    ]];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let ended = run_once(&fake, &github_route());
    assert_eq!(
        (
            ended.record.listed,
            ended.record.already_received,
            ended.record.filled
        ),
        (2, 1, 1)
    );
    let posts: Vec<String> = fake
        .requests
        .borrow()
        .iter()
        .filter(|request| request.method == "POST")
        .map(|request| request.url.clone())
        .collect();
    assert_eq!(posts, [format!("{HOOK}/deliveries/3/attempts")]);
}

/// A cursor made for another endpoint (the route's hook changed) is not
/// followed.
#[test]
fn a_cursor_of_another_endpoint_is_dropped() {
    let pages = vec![vec![delivery_of(1, "g1", 1_000, 200, "push", None)]];
    let fake = Fake::new(github_api(pages, HashMap::new()));
    let route = github_route();
    let config = route.reconcile.as_ref().unwrap();
    let other = Cursor {
        made_for: "another hook".into(),
        window: config.window(NOW),
        page: Some(format!("{HOOK}/deliveries?per_page=100&cursor=0")),
        settled: vec![],
    };
    run_with(&fake, &route, Some(other), RUN_LIMITS);
    assert_eq!(
        fake.requests.borrow()[0].url,
        format!("{HOOK}/deliveries?per_page=100")
    );
}

/// A re-send the API refused with a 5xx ends the run, and the event is
/// not settled: the next run asks again.
#[test]
fn an_event_whose_resend_ended_the_run_is_tried_again_by_the_next() {
    let pages = vec![vec![delivery_of(7, "g1", 1_000, 503, "push", None)]];
    let fake = Fake::new(github_api(pages.clone(), HashMap::from([(7, 500)])));
    let route = github_route();
    let first = run_once(&fake, &route);
    assert_eq!(first.record.error.as_ref().unwrap().status, 500);
    assert_eq!(first.record.listed, 0);
    let cursor = first.cursor.unwrap();
    assert!(cursor.settled.is_empty());
    fake.answer_with(github_api(pages, HashMap::new()));
    let second = run_with(&fake, &route, Some(cursor), RUN_LIMITS);
    assert_eq!((second.record.listed, second.record.filled), (1, 1));
}

/// A provider's error message that repeats the credential is shown
/// without it.
#[test]
fn an_api_error_that_repeats_the_key_is_shown_without_it() {
    let fake = Fake::new(|_: &ApiRequest| {
        json(
            401,
            format!(r#"{{"error":{{"message":"Invalid API Key provided: {API_KEY}"}}}}"#),
        )
    });
    let ended = run_once(&fake, &stripe_route());
    let problem = &ended.record.error.as_ref().unwrap().problem;
    assert!(!problem.contains(API_KEY), "{problem}");
    assert!(problem.contains("[redacted]"));
}

/// A day holds more runs than the 50 records kept: the day's counts are
/// kept by the hour, apart from the records.
#[test]
fn the_last_day_counts_more_runs_than_the_records_kept() {
    let config = stripe_config();
    let mut runs = RouteRuns::default();
    for id in 0..200 {
        runs.finish(
            record(id, NOW_MS + id as u64 * 60_000, None),
            None,
            None,
            &config,
        );
    }
    assert_eq!(runs.runs.len(), 50);
    assert_eq!(runs.last_day(NOW_MS + 200 * 60_000).runs, 200);
    assert!(runs.hours.len() <= 24);
}
