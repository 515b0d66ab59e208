//! Reconciliation (SPEC §11, v4): what the provider lists and never
//! delivered reaches the origin once, marked and signed as
//! reconciliation's; a live delivery and a reconciled one of the same
//! event are one delivery whichever comes first; the API's errors end a
//! run without ever showing its key. The providers' APIs are local fakes
//! (support/provider_api.rs); the gateway, its objects and the origin are
//! real.

use serde_json::{json, Value};

use crate::senders::{now, stripe_signature};
use crate::support::provider_api::ProviderApi;
use crate::support::{client, Gateway, Reply};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const STRIPE_SECRET: &str = "whsec_reconcile_stripe";
const GITHUB_SECRET: &str = "github-reconcile-secret";
const PADDLE_SECRET: &str = "pdl_ntfset_reconcile_secret";
const SQUARE_KEY: &str = "square-reconcile-signature-key";
const SQUARE_URL: &str = "https://hooks.example.com/square";
const PAYPAL_WEBHOOK_ID: &str = "4JH86294D6297924G";
const PAYPAL_CLIENT: &str = "AeE2eClientId:EE2eClientSecretValue";
/// The token the fake PayPal issues for the client (the fake's key).
const PAYPAL_TOKEN: &str = "A21AAFe2eAccessToken";
/// The API key: it must never appear in an answer or a log line.
const API_KEY: &str = "rk_test_51ReconcileKey0000SecretPart";

fn stripe_event(id: &str, event_type: &str, created: u64) -> Value {
    json!({
        "id": id, "object": "event", "api_version": "2024-06-20", "created": created,
        "type": event_type, "livemode": false, "pending_webhooks": 1,
        "request": {"id": null, "idempotency_key": null},
        "data": {"object": {"id": format!("pi_{id}"), "object": "payment_intent", "amount": 1000}}
    })
}

/// A gateway whose routes are under `/<tag>/`: each test's forwards are
/// its own at the shared origin.
async fn start(world: &World, api: &ProviderApi, delivery: &str, tag: &str) -> Gateway {
    let origin = world.origin.url();
    let routes = json!({
        "stripe": {
            "path": format!("/{tag}/stripe"), "signature": "stripe", "signing_secret": "RC_STRIPE_SECRET",
            "delivery": delivery,
            "reconcile": {
                "source": "stripe", "api_key": "RC_STRIPE_API_KEY",
                "types": ["payment_intent.*"], "every_seconds": 600,
                "lookback_seconds": 3600, "grace_seconds": 0, "api_base": api.url()
            }
        },
        "github": {
            "path": format!("/{tag}/github"), "signature": "github", "signing_secret": "RC_GITHUB_SECRET",
            "reconcile": {
                "source": "github", "api_key": "RC_GITHUB_TOKEN", "types": ["*"],
                "endpoint": "repos/acme/payments/hooks/7", "grace_seconds": 0,
                "lookback_seconds": 3600, "api_base": api.url()
            }
        },
        "paddle": {
            "path": format!("/{tag}/paddle"), "signature": "paddle", "signing_secret": "RC_PADDLE_SECRET",
            "reconcile": {
                "source": "paddle", "api_key": "RC_PADDLE_API_KEY", "types": ["transaction.*"],
                "endpoint": "ntfset_e2e", "grace_seconds": 0, "lookback_seconds": 3600, "api_base": api.url()
            }
        },
        "paypal": {
            "path": format!("/{tag}/paypal"), "signature": "paypal", "signing_secret": "RC_PAYPAL_WEBHOOK_ID",
            "signature_cert_hosts": origin,
            "reconcile": {
                "source": "paypal", "api_key": "RC_PAYPAL_CLIENT", "types": ["PAYMENT.CAPTURE.*"],
                "grace_seconds": 0, "lookback_seconds": 3600, "api_base": api.url()
            }
        },
        "square": {
            "path": format!("/{tag}/square"), "signature": "square", "signing_secret": "RC_SQUARE_KEY",
            "signature_url": SQUARE_URL,
            "reconcile": {
                "source": "square", "api_key": "RC_SQUARE_TOKEN", "types": ["payment.updated"],
                "grace_seconds": 0, "lookback_seconds": 3600, "api_base": api.url()
            }
        }
    })
    .to_string();
    Gateway::start(&[
        ("ROUTES", &routes),
        ("ORIGIN_URL", &origin),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("RC_STRIPE_SECRET", STRIPE_SECRET),
        ("RC_STRIPE_API_KEY", API_KEY),
        ("RC_GITHUB_SECRET", GITHUB_SECRET),
        ("RC_GITHUB_TOKEN", API_KEY),
        ("RC_PADDLE_SECRET", PADDLE_SECRET),
        ("RC_PADDLE_API_KEY", API_KEY),
        ("RC_SQUARE_KEY", SQUARE_KEY),
        ("RC_SQUARE_TOKEN", API_KEY),
        ("RC_PAYPAL_WEBHOOK_ID", PAYPAL_WEBHOOK_ID),
        ("RC_PAYPAL_CLIENT", PAYPAL_CLIENT),
    ])
    .await
}

async fn reconcile(gateway: &Gateway, method: reqwest::Method, route: &str) -> Reply {
    crate::support::reconcile(gateway, ADMIN_TOKEN, method, route).await
}

async fn send_stripe(gateway: &Gateway, tag: &str, body: &str) -> Reply {
    let response = client()
        .post(gateway.url(&format!("/{tag}/stripe/events")))
        .header("content-type", "application/json")
        .header(
            "stripe-signature",
            stripe_signature(STRIPE_SECRET, now(), body),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

fn counts(run: &Value) -> [u64; 4] {
    ["listed", "already_received", "filled", "failed"].map(|name| run[name].as_u64().unwrap())
}

/// The gap: an event Stripe lists and never delivered is delivered once,
/// marked `Idempotency-Source: reconciliation` and signed so; one that
/// arrived is not delivered again; another type is left out; the late
/// live delivery of the reconciled event is replayed, not forwarded and
/// not 422, although its bytes differ; a second run fills nothing.
pub async fn a_stripe_event_never_delivered_reaches_the_origin_once(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc1").await;
    let t = now() - 60;
    let arrived = stripe_event("evt_rc_arrived", "payment_intent.succeeded", t);
    let missed = stripe_event("evt_rc_missed", "payment_intent.succeeded", t + 1);
    let other = stripe_event("evt_rc_other", "customer.created", t + 2);
    for event in [&arrived, &missed, &other] {
        api.add_stripe_event(event.clone());
    }
    assert_eq!(
        send_stripe(&gateway, "rc1", &arrived.to_string())
            .await
            .status,
        201
    );

    let run = reconcile(&gateway, reqwest::Method::POST, "stripe").await;
    assert_eq!(run.status, 200, "{}", run.json());
    let run = run.json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    assert_eq!(run["other_types"], 1);
    assert_eq!(run["complete"], true);

    let forwards = world.origin.received("/rc1/stripe");
    let reconciled: Vec<_> = forwards
        .iter()
        .filter(|forward| forward.body.as_ref() == missed.to_string().as_bytes())
        .collect();
    assert_eq!(
        reconciled.len(),
        1,
        "the missed event reached the origin once"
    );
    let forward = reconciled[0];
    assert_eq!(forward.header("idempotency-source"), Some("reconciliation"));
    assert_eq!(forward.header("idempotency-key"), Some("\"evt_rc_missed\""));
    let verified = forward
        .verify(FORWARD_SECRET)
        .expect("the forward verifies");
    assert_eq!(verified.key, "evt_rc_missed");
    assert_eq!(
        verified.source.as_deref(),
        Some("reconciliation"),
        "the verifier exposes it"
    );
    assert!(forward.header("idempotency-signature-v2").is_some());
    assert_eq!(
        forwards.len(),
        2,
        "the arrived event was not forwarded again"
    );

    // Stripe's own late delivery of the same event: other bytes.
    let mut late = missed.clone();
    late["pending_webhooks"] = json!(0);
    let replay = send_stripe(&gateway, "rc1", &late.to_string()).await;
    assert_eq!(replay.status, 201, "answered from the reconciled receipt");
    assert!(replay.replayed());
    assert_eq!(world.origin.received("/rc1/stripe").len(), 2);

    let again = reconcile(&gateway, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(counts(&again), [2, 2, 0, 0], "{again}");
    let listing = reconcile(&gateway, reqwest::Method::GET, "stripe").await;
    assert_eq!(listing.status, 200);
    let listing = listing.json();
    assert_eq!(listing["runs"].as_array().unwrap().len(), 2);
    assert_eq!(listing["last_day"]["filled"], 1);
    assert!(api
        .requests()
        .iter()
        .all(|(_, target)| target.contains("created[gte]=")));
    let health = crate::support::get(&gateway, "/__idemgate/health").await;
    assert_eq!(
        health.json()["configuration"]["reconcile"],
        "ok",
        "the binding is there"
    );
}

/// A live delivery that comes while the run is listing, and a run over a
/// receipt whose forward failed: the run forwards what failed, and never
/// what arrived.
pub async fn a_failed_live_forward_is_forwarded_by_the_run(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc2").await;
    world.origin.fail("/rc2/stripe/", true);
    let event = stripe_event("evt_rc_failed_live", "payment_intent.created", now() - 30);
    api.add_stripe_event(event.clone());
    assert_eq!(
        send_stripe(&gateway, "rc2", &event.to_string())
            .await
            .status,
        503
    );
    world.origin.fail("/rc2/stripe/", false);
    let run = reconcile(&gateway, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(counts(&run), [1, 0, 1, 0], "{run}");
    let epochs = world.origin.rising_epochs("/rc2/stripe");
    assert_eq!(
        epochs.len(),
        2,
        "the failed forward and the run's, at a higher epoch"
    );
}

/// The API's errors: a wrong key (401) and a rate limit (429) end the run
/// with the status and Stripe's message, never the key; a 429 backs off;
/// the next run after the API recovers goes on. The Cron Trigger starts a
/// run of a route that is due.
pub async fn the_apis_errors_end_a_run_and_never_show_its_key(world: &'static World) {
    let api = ProviderApi::start("rk_test_another_key").await;
    let gateway = start(world, &api, "async", "rc3").await;
    api.add_stripe_event(stripe_event(
        "evt_rc_err",
        "payment_intent.succeeded",
        now() - 10,
    ));
    let refused = reconcile(&gateway, reqwest::Method::POST, "stripe").await;
    let refused_text = String::from_utf8_lossy(&refused.body).to_string();
    let run = refused.json();
    assert_eq!(run["error"]["status"], 401, "{run}");
    assert_eq!(counts(&run), [0, 0, 0, 0]);
    assert!(!refused_text.contains(API_KEY));

    let api_ok = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api_ok, "async", "rc3").await;
    api_ok.add_stripe_event(stripe_event(
        "evt_rc_limited",
        "payment_intent.succeeded",
        now() - 10,
    ));
    api_ok.fail_next(&[429]);
    let limited = reconcile(&gateway, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(limited["error"]["status"], 429, "{limited}");
    let status = reconcile(&gateway, reqwest::Method::GET, "stripe")
        .await
        .json();
    let backoff = status["next_run_at"].as_u64().unwrap() - limited["ended_at"].as_u64().unwrap();
    assert!(
        backoff >= 60_000,
        "a 429 backs off a minute at least: {backoff} ms"
    );

    // The Cron Trigger ticks the route, which is not due yet: no run.
    let tick = client()
        .get(gateway.url("/__scheduled"))
        .send()
        .await
        .unwrap();
    assert!(tick.status().is_success());
    let status = reconcile(&gateway, reqwest::Method::GET, "stripe")
        .await
        .json();
    assert_eq!(status["runs"].as_array().unwrap().len(), 1);

    // The operator starts one now: the async route accepts the event.
    let run = reconcile(&gateway, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(counts(&run), [1, 0, 1, 0], "{run}");
    crate::support::eventually(10, "the accepted event was delivered", || async {
        world
            .origin
            .received("/rc3/stripe")
            .iter()
            .any(|forward| forward.header("idempotency-key") == Some("\"evt_rc_limited\""))
    })
    .await;
    // Log lines reach wrangler's output a moment after the run answers.
    crate::support::eventually(
        10,
        "the failed run and the filled event are logged",
        || async {
            let log = gateway.log();
            log.contains("\"reconcile-failed\"") && log.contains("\"reconciled\"")
        },
    )
    .await;
    assert!(!gateway.log().contains(API_KEY), "the key is never logged");
    let summary = crate::support::read_summary(&gateway, ADMIN_TOKEN).await;
    let route = summary["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|route| route["route"] == "stripe")
        .unwrap()
        .clone();
    assert_eq!(route["reconcile"]["last_day"]["filled"], 1, "{route}");
    assert_eq!(route["reconcile"]["last_day"]["failed_runs"], 1, "{route}");
}

/// GitHub: the hook's deliveries say which event never got a 2xx; the run
/// asks GitHub to redeliver it, and the redelivery comes through the
/// route, signed, and reaches the origin once.
pub async fn a_github_delivery_that_failed_is_redelivered_through_the_route(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc4").await;
    api.github_hook(GITHUB_SECRET, &gateway.url("/rc4/github/hook"));
    let at = idemgate_core::time::rfc3339(now() - 120);
    let body_ok = r#"{"action":null,"ref":"refs/heads/main","after":"aaa"}"#;
    let body_lost = r#"{"action":null,"ref":"refs/heads/main","after":"bbb"}"#;
    api.add_github_delivery("guid-ok", "push", body_ok, 200, &at);
    api.add_github_delivery("guid-lost", "push", body_lost, 0, &at);
    let run = reconcile(&gateway, reqwest::Method::POST, "github")
        .await
        .json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    crate::support::eventually(10, "the redelivery reached the origin", || async {
        world
            .origin
            .received("/rc4/github")
            .iter()
            .any(|forward| forward.body.as_ref() == body_lost.as_bytes())
    })
    .await;
    let again = reconcile(&gateway, reqwest::Method::POST, "github")
        .await
        .json();
    assert_eq!(counts(&again), [2, 2, 0, 0], "{again}");
    assert_eq!(world.origin.received("/rc4/github").len(), 1);
}

/// Signs `body` as the route's sender does, with the core's own signer.
fn signed(scheme: &str, secret: &str, url: Option<&str>, body: &str) -> Vec<(String, String)> {
    let settings = idemgate_core::signature::SchemeSettings {
        secret: Some(secret.to_string()),
        url: url.map(str::to_string),
        ..Default::default()
    };
    let signer = idemgate_core::signature::SignatureScheme::configure(scheme, &settings).unwrap();
    let mut message = idemgate_core::signature::Message {
        headers: Vec::new(),
        body: body.as_bytes().to_vec(),
    };
    signer.sign(&mut message, now());
    message.headers
}

async fn send_signed(
    gateway: &Gateway,
    path: &str,
    headers: Vec<(String, String)>,
    body: &str,
) -> Reply {
    let mut request = client()
        .post(gateway.url(path))
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    Reply::read(request.body(body.to_string()).send().await.unwrap()).await
}

fn paddle_payload(event_id: &str, at: u64) -> Value {
    json!({
        "event_id": event_id, "event_type": "transaction.completed",
        "occurred_at": idemgate_core::time::rfc3339(at),
        "notification_id": format!("ntf_{event_id}"),
        "data": {"id": format!("txn_{event_id}"), "status": "completed"}
    })
}

/// Paddle: the run asks each event's object whether it arrived (the
/// notification's payload gives the key), and replays the notification of
/// the one that did not; Paddle sends it again, signed, through the route.
pub async fn a_paddle_notification_that_never_arrived_is_replayed(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc5").await;
    api.paddle_destination(PADDLE_SECRET, &gateway.url("/rc5/paddle/hook"));
    let arrived = paddle_payload("evt_rc_paddle_arrived", now() - 60);
    let missed = paddle_payload("evt_rc_paddle_missed", now() - 50);
    api.add_paddle_notification("ntf_1", "delivered", arrived.clone());
    api.add_paddle_notification("ntf_2", "failed", missed.clone());
    let body = arrived.to_string();
    let live = send_signed(
        &gateway,
        "/rc5/paddle/hook",
        signed("paddle", PADDLE_SECRET, None, &body),
        &body,
    )
    .await;
    assert_eq!(live.status, 201);
    let run = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    assert!(api
        .requests()
        .iter()
        .any(|(method, target)| method == "POST" && target == "/notifications/ntf_2/replay"));
    crate::support::eventually(10, "the replay reached the origin", || async {
        world
            .origin
            .received("/rc5/paddle")
            .iter()
            .any(|forward| forward.header("idempotency-key") == Some("\"evt_rc_paddle_missed\""))
    })
    .await;
    let again = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(
        counts(&again),
        [2, 2, 0, 0],
        "the replay's own notification is not listed again: {again}"
    );
    assert_eq!(world.origin.received("/rc5/paddle").len(), 2);
}

/// Square: the event idemgate delivers is the webhook's body rebuilt from
/// the API's event; the late live delivery of it is replayed.
pub async fn a_square_event_never_delivered_reaches_the_origin_once(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc6").await;
    let event = |id: &str, at: u64| {
        json!({
            "merchant_id": "MERCHANT1", "location_id": "LOC1", "type": "payment.updated", "event_id": id,
            "created_at": idemgate_core::time::rfc3339(at),
            "data": {"type": "payment", "id": format!("pay_{id}"), "object": {"payment": {"amount_money": {"amount": 100}}}}
        })
    };
    let webhook = |event: &Value| {
        json!({"merchant_id": event["merchant_id"], "type": event["type"], "event_id": event["event_id"],
               "created_at": event["created_at"], "data": event["data"]})
        .to_string()
    };
    let arrived = event("sq-rc-arrived", now() - 60);
    let missed = event("sq-rc-missed", now() - 50);
    api.add_square_event(arrived.clone());
    api.add_square_event(missed.clone());
    let body = webhook(&arrived);
    let live = send_signed(
        &gateway,
        "/rc6/square",
        signed("square", SQUARE_KEY, Some(SQUARE_URL), &body),
        &body,
    )
    .await;
    assert_eq!(live.status, 201);
    let run = reconcile(&gateway, reqwest::Method::POST, "square")
        .await
        .json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    let forwards = world.origin.received("/rc6/square");
    assert_eq!(forwards.len(), 2);
    let reconciled = forwards
        .iter()
        .find(|forward| forward.header("idempotency-source").is_some())
        .unwrap();
    let delivered: Value = serde_json::from_slice(&reconciled.body).unwrap();
    assert_eq!(
        delivered,
        serde_json::from_str::<Value>(&webhook(&missed)).unwrap(),
        "the webhook's body"
    );
    assert!(
        reconciled
            .body
            .starts_with(br#"{"merchant_id":"MERCHANT1","type":"payment.updated""#),
        "in the webhook's order"
    );
    assert_eq!(
        reconciled.verify(FORWARD_SECRET).unwrap().key,
        "sq-rc-missed"
    );
    let late = webhook(&missed).replace("\"amount\":100}", "\"amount\":100,\"note\":\"late\"}");
    let replay = send_signed(
        &gateway,
        "/rc6/square",
        signed("square", SQUARE_KEY, Some(SQUARE_URL), &late),
        &late,
    )
    .await;
    assert!(replay.replayed(), "{}", replay.status);
    assert_eq!(world.origin.received("/rc6/square").len(), 2);
}

/// PayPal: a token from the REST app's credentials first, then the events
/// list; the run asks each event's object, and has PayPal resend the one
/// that never arrived to the route's webhook id; it comes through the
/// route, verified by PayPal's signature.
pub async fn a_paypal_event_that_never_arrived_is_resent(world: &'static World) {
    let api = ProviderApi::start(PAYPAL_TOKEN).await;
    let gateway = start(world, &api, "sync", "rc7").await;
    let origin = world.origin.url();
    let signer_origin = origin.clone();
    api.paypal_webhook(
        PAYPAL_CLIENT,
        &gateway.url("/rc7/paypal/hook"),
        std::sync::Arc::new(move |message| {
            crate::providers::sign_paypal(message, &signer_origin, PAYPAL_WEBHOOK_ID, now())
        }),
    );
    let event = |id: &str, at: u64| {
        json!({"id": id, "event_version": "1.0", "create_time": idemgate_core::time::rfc3339(at),
               "resource_type": "capture", "event_type": "PAYMENT.CAPTURE.COMPLETED",
               "summary": "Payment completed", "resource": {"id": format!("cap_{id}"), "amount": {"value": "10.00", "currency_code": "EUR"}}})
    };
    let arrived = event("WH-RC-ARRIVED-1", now() - 60);
    let missed = event("WH-RC-MISSED-2", now() - 50);
    api.add_paypal_event(arrived.clone());
    api.add_paypal_event(missed.clone());
    let mut live = idemgate_core::signature::Message {
        headers: Vec::new(),
        body: arrived.to_string().into_bytes(),
    };
    crate::providers::sign_paypal(&mut live, &origin, PAYPAL_WEBHOOK_ID, now());
    let body = arrived.to_string();
    assert_eq!(
        send_signed(&gateway, "/rc7/paypal/hook", live.headers, &body)
            .await
            .status,
        201
    );
    let run = reconcile(&gateway, reqwest::Method::POST, "paypal")
        .await
        .json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    let requests = api.requests();
    assert_eq!(
        requests[0],
        ("POST".to_string(), "/v1/oauth2/token".to_string()),
        "a token first"
    );
    assert!(requests.iter().any(|(method, target)| method == "POST"
        && target.starts_with("/v1/notifications/webhooks-events/WH-RC-MISSED-2/resend")
        && target.contains(PAYPAL_WEBHOOK_ID)));
    crate::support::eventually(10, "the resent event reached the origin", || async {
        world
            .origin
            .received("/rc7/paypal")
            .iter()
            .any(|forward| forward.body.as_ref() == missed.to_string().as_bytes())
    })
    .await;
    let again = reconcile(&gateway, reqwest::Method::POST, "paypal")
        .await
        .json();
    assert_eq!(counts(&again), [2, 2, 0, 0], "{again}");
    assert_eq!(world.origin.received("/rc7/paypal").len(), 2);
}

/// A window longer than a run's limits: the first run stops at its
/// subrequest budget (seven pages of a hundred events, each a call to its
/// key's object) with a cursor, and the route's object starts the next
/// run from it by itself (its alarm), which delivers the rest; every event
/// reaches the origin once.
pub async fn a_window_longer_than_a_run_is_finished_by_the_next_run(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc8").await;
    let t = now() - 3_000;
    for index in 0..800 {
        api.add_stripe_event(stripe_event(
            &format!("evt_rc_long_{index:03}"),
            "payment_intent.succeeded",
            t + index,
        ));
    }
    let first = reconcile(&gateway, reqwest::Method::POST, "stripe")
        .await
        .json();
    assert_eq!(first["complete"], false, "{first}");
    assert_eq!(counts(&first), [700, 0, 700, 0]);
    crate::support::eventually(30, "the next run finished the window", || async {
        let status = reconcile(&gateway, reqwest::Method::GET, "stripe")
            .await
            .json();
        status["runs"][0]["complete"] == true
    })
    .await;
    let status = reconcile(&gateway, reqwest::Method::GET, "stripe")
        .await
        .json();
    let next = &status["runs"][0];
    assert_eq!(next["trigger"], "schedule");
    assert_eq!(
        next["window"], first["window"],
        "the same window, from the cursor"
    );
    assert_eq!(counts(next), [100, 0, 100, 0], "{next}");
    let mut keys: Vec<String> = world
        .origin
        .received("/rc8/stripe")
        .iter()
        .map(|forward| forward.header("idempotency-key").unwrap().to_string())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 800);
    assert_eq!(world.origin.received("/rc8/stripe").len(), 800, "each once");
}

/// Paddle, the review's case: the live delivery came and the origin
/// failed it; Paddle gave up. A replay would be a new notification (a new
/// `notification_id` in the body) and refused as another payload, so the
/// run forwards the listed event itself, and the origin gets it once.
pub async fn a_paddle_event_whose_live_forward_failed_is_forwarded_by_the_run(
    world: &'static World,
) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc9").await;
    api.paddle_destination(PADDLE_SECRET, &gateway.url("/rc9/paddle/hook"));
    let event = paddle_payload("evt_rc_paddle_failed", now() - 60);
    api.add_paddle_notification("ntf_9", "failed", event.clone());
    world.origin.fail("/rc9/paddle/", true);
    let body = event.to_string();
    let live = send_signed(
        &gateway,
        "/rc9/paddle/hook",
        signed("paddle", PADDLE_SECRET, None, &body),
        &body,
    )
    .await;
    assert_eq!(live.status, 503);
    world.origin.fail("/rc9/paddle/", false);
    let run = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(counts(&run), [1, 0, 1, 0], "{run}");
    assert!(
        !api.requests().iter().any(|(method, _)| method == "POST"),
        "no replay asked for"
    );
    let forwards = world.origin.received("/rc9/paddle");
    assert_eq!(forwards.len(), 2, "the failed live forward and the run's");
    assert_eq!(
        forwards[1].header("idempotency-source"),
        Some("reconciliation")
    );
    let again = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(counts(&again), [1, 1, 0, 0], "{again}");
}

/// The review's item 1 (round 5): while the route's endpoint is broken,
/// every run asked Paddle to replay the event again (up to 288 times over
/// two days), each replay a new notification with a new
/// `notification_id`, and once the endpoint worked the second to land was
/// refused 422. Now the event is asked for once within the lookback, and
/// any later notification of it is a replay of its receipt.
pub async fn a_paddle_event_is_asked_for_once_and_a_second_notification_of_it_is_replayed(
    world: &'static World,
) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start(world, &api, "sync", "rc10").await;
    // Paddle's deliveries go nowhere while the endpoint is broken.
    let broken = format!(
        "http://127.0.0.1:{}/rc10/paddle/hook",
        crate::support::closed_port()
    );
    api.paddle_destination(PADDLE_SECRET, &broken);
    let event = paddle_payload("evt_rc_paddle_broken", now() - 60);
    api.add_paddle_notification("ntf_10", "failed", event.clone());
    let first = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(counts(&first), [1, 0, 1, 0], "{first}");
    let second = reconcile(&gateway, reqwest::Method::POST, "paddle")
        .await
        .json();
    assert_eq!(counts(&second), [1, 0, 0, 0], "{second}");
    assert_eq!(second["already_asked"], 1, "{second}");
    let replays = api
        .requests()
        .iter()
        .filter(|(method, target)| method == "POST" && target.ends_with("/replay"))
        .count();
    assert_eq!(replays, 1, "asked once, not once per run");
    // The endpoint works again: Paddle's retry of the original and the
    // replay both land, each its own notification of the one event.
    let original = event.to_string();
    let mut replay = event.clone();
    replay["notification_id"] = json!("ntf_replay_rc10");
    let replay = replay.to_string();
    let path = "/rc10/paddle/hook";
    let landed = send_signed(
        &gateway,
        path,
        signed("paddle", PADDLE_SECRET, None, &original),
        &original,
    )
    .await;
    assert_eq!(
        landed.status,
        201,
        "{}",
        String::from_utf8_lossy(&landed.body)
    );
    let again = send_signed(
        &gateway,
        path,
        signed("paddle", PADDLE_SECRET, None, &replay),
        &replay,
    )
    .await;
    assert_eq!(
        again.status,
        201,
        "a replay, not 422: {}",
        String::from_utf8_lossy(&again.body)
    );
    assert!(again.replayed());
    assert_eq!(world.origin.received("/rc10/paddle").len(), 1);
}

const STRIPE_V2_SECRET: &str = "whsec_reconcile_thin_destination";

/// A thin event as `/v2/core/events` lists it (https://docs.stripe.com/api/v2/core/events/object):
/// `created` in RFC 3339 with milliseconds, and the `data` only the API
/// renders.
fn thin_event(id: &str, event_type: &str, created_ms: u64) -> Value {
    let created = format!(
        "{}.{:03}Z",
        &idemgate_core::time::rfc3339(created_ms / 1_000)[..19],
        created_ms % 1_000
    );
    let meter = format!("mtr_test_61{}", id.trim_start_matches("evt_"));
    json!({
        "id": id, "object": "v2.core.event", "context": null, "created": created,
        "data": {"developer_message_summary": "There is 1 invalid event", "reason": {"error_count": 1}},
        "livemode": false, "reason": null,
        "related_object": {"id": meter, "type": "billing.meter", "url": format!("/v1/billing/meters/{meter}")},
        "type": event_type
    })
}

/// The thin event its destination posts: the listed one without `data`.
fn posted(listed: &Value) -> Value {
    let mut event = listed.clone();
    event
        .as_object_mut()
        .unwrap()
        .retain(|name, _| name != "data");
    event
}

/// A gateway with one route of thin events, reconciled from Stripe's
/// `/v2/core/events` (`source = "stripe-v2"`), under `/<tag>/thin`.
async fn start_thin(world: &World, api: &ProviderApi, tag: &str) -> Gateway {
    let routes = json!({
        "thin": {
            "path": format!("/{tag}/thin"), "signature": "stripe", "signing_secret": "RC_STRIPE_V2_SECRET",
            "reconcile": {
                "source": "stripe-v2", "api_key": "RC_STRIPE_API_KEY",
                "types": ["v1.billing.meter.*"], "every_seconds": 600,
                "lookback_seconds": 3600, "grace_seconds": 0, "api_base": api.url()
            }
        }
    })
    .to_string();
    Gateway::start(&[
        ("ROUTES", &routes),
        ("ORIGIN_URL", &world.origin.url()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("RC_STRIPE_V2_SECRET", STRIPE_V2_SECRET),
        ("RC_STRIPE_API_KEY", API_KEY),
    ])
    .await
}

async fn send_thin(gateway: &Gateway, tag: &str, body: &str) -> Reply {
    let response = client()
        .post(gateway.url(&format!("/{tag}/thin/events")))
        .header("content-type", "application/json; charset=utf-8")
        .header(
            "stripe-signature",
            stripe_signature(STRIPE_V2_SECRET, now(), body),
        )
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    Reply::read(response).await
}

/// Stripe's thin events (SPEC v5 §11, `stripe-v2`): a thin event
/// `/v2/core/events` lists and its destination never delivered reaches
/// the origin once, as the destination posts it (without the API's
/// `data`), marked and signed as reconciliation's; one that arrived is not
/// delivered again; another type is left out; the destination's late
/// delivery of the reconciled event is replayed, not forwarded and not
/// 422, although its bytes differ; a second run fills nothing.
pub async fn a_stripe_thin_event_never_delivered_reaches_the_origin_once(world: &'static World) {
    let api = ProviderApi::start(API_KEY).await;
    let gateway = start_thin(world, &api, "rc9").await;
    let t = (now() - 60) * 1_000;
    let arrived = thin_event(
        "evt_test_rc_arrived",
        "v1.billing.meter.error_report_triggered",
        t + 125,
    );
    let missed = thin_event(
        "evt_test_rc_missed",
        "v1.billing.meter.error_report_triggered",
        t + 1_250,
    );
    let other = thin_event(
        "evt_test_rc_ping",
        "v2.core.event_destination.ping",
        t + 2_500,
    );
    for event in [&arrived, &missed, &other] {
        api.add_stripe_v2_event(event.clone());
    }
    let live = send_thin(&gateway, "rc9", &posted(&arrived).to_string()).await;
    assert_eq!(live.status, 201);

    let run = reconcile(&gateway, reqwest::Method::POST, "thin").await;
    assert_eq!(run.status, 200, "{}", run.json());
    let run = run.json();
    assert_eq!(counts(&run), [2, 1, 1, 0], "{run}");
    assert_eq!(run["other_types"], 1);
    assert_eq!(run["complete"], true);

    let forwards = world.origin.received("/rc9/thin");
    let body = posted(&missed).to_string();
    let reconciled: Vec<_> = forwards
        .iter()
        .filter(|forward| forward.body.as_ref() == body.as_bytes())
        .collect();
    assert_eq!(
        reconciled.len(),
        1,
        "the missed thin event reached the origin once, without the API's data"
    );
    let forward = reconciled[0];
    assert_eq!(forward.header("idempotency-source"), Some("reconciliation"));
    assert_eq!(
        forward.header("idempotency-key"),
        Some("\"evt_test_rc_missed\"")
    );
    assert_eq!(
        forward.header("stripe-signature"),
        None,
        "idemgate cannot sign as Stripe"
    );
    let verified = forward
        .verify(FORWARD_SECRET)
        .expect("the forward verifies");
    assert_eq!(verified.key, "evt_test_rc_missed");
    assert_eq!(verified.source.as_deref(), Some("reconciliation"));
    assert_eq!(
        forwards.len(),
        2,
        "the arrived event was not forwarded again"
    );

    // The destination's own late delivery of the same event: other bytes.
    let late = serde_json::to_string_pretty(&posted(&missed)).unwrap();
    let replay = send_thin(&gateway, "rc9", &late).await;
    assert_eq!(replay.status, 201, "answered from the reconciled receipt");
    assert!(replay.replayed());
    assert_eq!(world.origin.received("/rc9/thin").len(), 2);

    let again = reconcile(&gateway, reqwest::Method::POST, "thin")
        .await
        .json();
    assert_eq!(counts(&again), [2, 2, 0, 0], "{again}");
    // Each run asked for the window by created[gte] and created[lt], in
    // RFC 3339; the route's wildcard type is filtered by the run.
    let requests = api.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for (method, target) in &requests {
        assert_eq!(method, "GET");
        assert!(
            target.starts_with("/v2/core/events?limit=20&created[gte]=")
                && target.contains("&created[lt]=")
                && !target.contains("types="),
            "{target}"
        );
    }
    let listing = reconcile(&gateway, reqwest::Method::GET, "thin")
        .await
        .json();
    assert_eq!(listing["last_day"]["filled"], 1, "{listing}");
}
