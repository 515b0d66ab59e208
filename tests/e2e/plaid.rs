//! Plaid (SPEC §4, v4): a JWT in `Plaid-Verification`, signed ES256 by a
//! key the gateway asks Plaid for by its `kid`. Plaid's key endpoint is a
//! local fake (support/provider_api.rs); the gateway, WebCrypto, the
//! Durable Objects and the origin are real. Each test starts its own
//! gateway, so each begins with no key cached.

use idemgate_core::signature::plaid::Signer;
use serde_json::json;

use crate::senders::now;
use crate::support::provider_api::ProviderApi;
use crate::support::{client, Gateway, Reply};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const CLIENT_ID: &str = "5e2b0c1e9b1c3d0012e2e0aa";
const SECRET: &str = "e2eplaidsecret0000000000000000";
const KID: &str = "6c5516e1-92dc-479e-a8ff-5a51992e0001";
const KEY_PATH: &str = "/webhook_verification_key/get";

/// Plaid's signing key in these tests (the fake serves its public half).
fn plaid() -> Signer {
    Signer::from_seed([21; 32], KID)
}

/// The fake Plaid, serving `plaid()`'s key, and a gateway whose route
/// `/<tag>/plaid` asks it for keys (and whose route `/<tag>/closed` asks
/// a port where nothing answers).
async fn start(world: &World, tag: &str) -> (ProviderApi, Gateway) {
    let api = ProviderApi::start("unused-bearer-key").await;
    api.plaid_client(CLIENT_ID, SECRET);
    let jwk = plaid().jwk();
    api.add_plaid_key(KID, &jwk.x, &jwk.y, None);
    let routes = json!({
        "plaid": {
            "path": format!("/{tag}/plaid"), "signature": "plaid",
            "signing_secret": "E2E_PLAID_SECRET", "plaid_client_id": "E2E_PLAID_CLIENT_ID",
            "signature_api_base": api.url()
        },
        "closed": {
            "path": format!("/{tag}/closed"), "signature": "plaid",
            "signing_secret": "E2E_PLAID_SECRET", "plaid_client_id": "E2E_PLAID_CLIENT_ID",
            "signature_api_base": format!("http://127.0.0.1:{}", crate::support::closed_port())
        }
    })
    .to_string();
    let gateway = Gateway::start(&[
        ("ROUTES", &routes),
        ("ORIGIN_URL", &world.origin.url()),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("E2E_PLAID_SECRET", SECRET),
        ("E2E_PLAID_CLIENT_ID", CLIENT_ID),
    ])
    .await;
    (api, gateway)
}

/// A TRANSACTIONS `SYNC_UPDATES_AVAILABLE` webhook of item `item`.
fn webhook(item: &str) -> String {
    json!({
        "webhook_type": "TRANSACTIONS", "webhook_code": "SYNC_UPDATES_AVAILABLE",
        "item_id": item, "initial_update_complete": true,
        "historical_update_complete": false, "environment": "production"
    })
    .to_string()
}

async fn send(url: &str, token: Option<&str>, body: &str) -> Reply {
    let mut request = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(token) = token {
        request = request.header("Plaid-Verification", token);
    }
    Reply::read(request.send().await.unwrap()).await
}

/// How many times the gateway asked the fake for a key.
fn key_fetches(api: &ProviderApi) -> usize {
    api.requests()
        .iter()
        .filter(|(_, target)| target.starts_with(KEY_PATH))
        .count()
}

/// A genuine delivery is verified with the key fetched by its kid and
/// forwarded once, raw, with its `Plaid-Verification`; its duplicates,
/// sent at once, are absorbed; the key is fetched once and then kept.
pub async fn a_plaid_delivery_is_verified_and_forwarded_once(world: &'static World) {
    let tag = format!("plaid-once-{}", now());
    let (api, gateway) = start(world, &tag).await;
    let url = gateway.url(&format!("/{tag}/plaid/webhooks"));
    let body = webhook(&format!("item-first-{tag}"));
    let token = plaid().token(body.as_bytes(), now());
    let first = send(&url, Some(&token), &body).await;
    assert_eq!(
        first.status,
        201,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!(key_fetches(&api), 1);
    let received = world.origin.received(&format!("/{tag}/plaid/"));
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, body.as_bytes(), "the raw body");
    assert_eq!(
        received[0].header("plaid-verification"),
        Some(token.as_str())
    );
    // The default key is the body's hash (SPEC §4: `body-sha256`).
    let key = received[0].header("idempotency-key").unwrap().to_string();
    let body_sha256 = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(body.as_bytes()))
    };
    assert_eq!(key, format!("\"{body_sha256}\""));
    received[0].verify(FORWARD_SECRET).unwrap();
    let fetch = api.requests();
    let asked = fetch
        .iter()
        .find(|(_, target)| target.starts_with(KEY_PATH))
        .unwrap();
    assert_eq!(asked.1, format!("{KEY_PATH}?key_id={KID}"));

    // Ten copies of another event at once: one forward, ten answers.
    let body = webhook(&format!("item-storm-{tag}"));
    let token = plaid().token(body.as_bytes(), now());
    let replies = futures_join(
        (0..10)
            .map(|_| {
                let (url, token, body) = (url.clone(), token.clone(), body.clone());
                tokio::spawn(async move { send(&url, Some(&token), &body).await })
            })
            .collect(),
    )
    .await;
    for reply in &replies {
        assert_eq!(
            reply.status,
            201,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.body, replies[0].body);
    }
    let received = world.origin.received(&format!("/{tag}/plaid/"));
    assert_eq!(received.len(), 2, "each event forwarded once");
    assert_ne!(received[1].header("idempotency-key").unwrap(), key);
    assert_eq!(key_fetches(&api), 1, "the key was kept");
}

async fn futures_join(handles: Vec<tokio::task::JoinHandle<Reply>>) -> Vec<Reply> {
    let mut replies = Vec::new();
    for handle in handles {
        replies.push(handle.await.unwrap());
    }
    replies
}

/// A tampered body, an `iat` six minutes old, an `alg` other than ES256
/// and a missing header are 401 without a key fetch; a signature by
/// another key under Plaid's kid is 401 after it; a kid Plaid does not
/// know is 401, and asked about once however often it is sent; a key
/// Plaid reports expired is 401. Nothing reaches the origin.
pub async fn forged_and_stale_plaid_deliveries_are_401(world: &'static World) {
    let tag = format!("plaid-forged-{}", now());
    let (api, gateway) = start(world, &tag).await;
    let url = gateway.url(&format!("/{tag}/plaid/webhooks"));
    let body = webhook(&format!("item-forged-{tag}"));
    let t = now();
    let claims = |at: u64| {
        use sha2::Digest;
        json!({"iat": at, "request_body_sha256": hex::encode(sha2::Sha256::digest(body.as_bytes()))})
            .to_string()
    };
    let before_any_key: Vec<(&str, Option<String>, String, &str)> = vec![
        (
            "tampered body",
            Some(plaid().token(body.as_bytes(), t)),
            body.replace("item-forged", "item-forgex"),
            "mismatch",
        ),
        (
            "iat six minutes old",
            Some(plaid().token(body.as_bytes(), t - 360)),
            body.clone(),
            "stale",
        ),
        (
            "alg HS256",
            Some(plaid().token_of(
                &json!({"alg": "HS256", "kid": KID, "typ": "JWT"}).to_string(),
                &claims(t),
            )),
            body.clone(),
            "malformed Plaid-Verification: alg is not ES256",
        ),
        (
            "alg none",
            Some(plaid().token_of(&json!({"alg": "none", "kid": KID}).to_string(), &claims(t))),
            body.clone(),
            "malformed Plaid-Verification: alg is not ES256",
        ),
        ("no header", None, body.clone(), "missing header"),
    ];
    for (what, token, body, reason) in before_any_key {
        let reply = send(&url, token.as_deref(), &body).await;
        reply.assert_problem(401, "bad-signature");
        let detail = reply.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.starts_with(reason), "{what}: {detail}");
        assert_eq!(key_fetches(&api), 0, "{what}: refused before any key fetch");
    }

    let another_key = Signer::from_seed([22; 32], KID).token(body.as_bytes(), t);
    let reply = send(&url, Some(&another_key), &body).await;
    reply.assert_problem(401, "bad-signature");
    assert_eq!(key_fetches(&api), 1);

    let unknown = Signer::from_seed([22; 32], "forged-kid-0001").token(body.as_bytes(), t);
    for _ in 0..3 {
        send(&url, Some(&unknown), &body)
            .await
            .assert_problem(401, "bad-signature");
    }
    assert_eq!(
        key_fetches(&api),
        2,
        "a refused kid is remembered: one fetch for three deliveries"
    );

    // A key Plaid reports expired is refused, whoever signed with it.
    let retired = Signer::from_seed([23; 32], "retired-kid-0001");
    let retired_jwk = retired.jwk();
    api.add_plaid_key(
        &retired.kid,
        &retired_jwk.x,
        &retired_jwk.y,
        Some(1_700_000_000),
    );
    send(&url, Some(&retired.token(body.as_bytes(), t)), &body)
        .await
        .assert_problem(401, "bad-signature");
    assert_eq!(key_fetches(&api), 3);
    assert_eq!(
        world.origin.count(&format!("/{tag}/")),
        0,
        "nothing forwarded"
    );
}

/// While Plaid's key endpoint fails (a 5xx, then 429), or nothing answers
/// at all, a genuine delivery is 503 `signing-key-unavailable` with
/// `Retry-After`, and nothing is stored or forwarded; Plaid's retry, once
/// the endpoint answers, is verified and forwarded once.
pub async fn a_plaid_key_that_cannot_be_fetched_yet_is_503_then_accepted(world: &'static World) {
    let tag = format!("plaid-down-{}", now());
    let (api, gateway) = start(world, &tag).await;
    let url = gateway.url(&format!("/{tag}/plaid/webhooks"));
    let body = webhook(&format!("item-down-{tag}"));
    let token = plaid().token(body.as_bytes(), now());
    api.fail_next(&[503, 429]);
    for attempt in 1..=2 {
        let reply = send(&url, Some(&token), &body).await;
        reply.assert_problem(503, "signing-key-unavailable");
        assert_eq!(reply.header("retry-after"), Some("1"), "attempt {attempt}");
        assert_eq!(key_fetches(&api), attempt, "an outage is not kept");
    }
    assert_eq!(
        world.origin.count(&format!("/{tag}/")),
        0,
        "nothing forwarded"
    );
    let closed_url = gateway.url(&format!("/{tag}/closed/webhooks"));
    let closed = send(&closed_url, Some(&token), &body).await;
    closed.assert_problem(503, "signing-key-unavailable");
    assert_eq!(closed.header("retry-after"), Some("1"), "no answer at all");
    assert_eq!(world.origin.count(&format!("/{tag}/")), 0);
    let retry = send(&url, Some(&token), &body).await;
    assert_eq!(
        retry.status,
        201,
        "{}",
        String::from_utf8_lossy(&retry.body)
    );
    assert!(!retry.replayed(), "nothing was stored before");
    let again = send(&url, Some(&token), &body).await;
    assert!(again.replayed());
    assert_eq!(world.origin.count(&format!("/{tag}/")), 1);
    assert_eq!(key_fetches(&api), 3);
}

/// A route whose credentials Plaid refuses cannot verify anything: 503
/// (the operator's to fix; Plaid retries), never a 401 that would tell
/// the sender its genuine webhook was forged.
pub async fn refused_plaid_credentials_are_503_not_401(world: &'static World) {
    let tag = format!("plaid-creds-{}", now());
    let (api, gateway) = start(world, &tag).await;
    api.plaid_client(CLIENT_ID, "another-secret");
    let url = gateway.url(&format!("/{tag}/plaid/webhooks"));
    let body = webhook(&format!("item-creds-{tag}"));
    let token = plaid().token(body.as_bytes(), now());
    send(&url, Some(&token), &body)
        .await
        .assert_problem(503, "signing-key-unavailable");
    assert_eq!(key_fetches(&api), 1);
    assert_eq!(world.origin.count(&format!("/{tag}/")), 0);
}

/// The review's item 8 (round 5): everything checked before Plaid's key is
/// the sender's to choose, so 1,000 forgeries with made-up kids cost 1,000
/// credentialed calls to Plaid. A route's account now makes at most
/// `KEY_CALLS_PER_MINUTE` (10) key calls a minute per isolate: 500 forged
/// kids cost at most 10 calls, are never forwarded, and a genuine delivery
/// signed with a key already kept is verified throughout.
pub async fn a_flood_of_made_up_kids_costs_plaid_a_bounded_number_of_calls(world: &'static World) {
    use idemgate_core::signature::plaid::KEY_CALLS_PER_MINUTE;
    let tag = format!("plaid-flood-{}", now());
    let (api, gateway) = start(world, &tag).await;
    let url = gateway.url(&format!("/{tag}/plaid/webhooks"));
    let genuine = webhook(&format!("item-before-{tag}"));
    let reply = send(
        &url,
        Some(&plaid().token(genuine.as_bytes(), now())),
        &genuine,
    )
    .await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(key_fetches(&api), 1);
    let body = webhook(&format!("item-forged-{tag}"));
    let t = now();
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for n in 0..500 {
        let forger = Signer::from_seed([24; 32], &format!("made-up-kid-{n:04}"));
        let reply = send(&url, Some(&forger.token(body.as_bytes(), t)), &body).await;
        *statuses.entry(reply.status).or_default() += 1;
    }
    let asked = key_fetches(&api) - 1;
    assert!(
        asked <= KEY_CALLS_PER_MINUTE as usize,
        "{asked} key calls for 500 made-up kids"
    );
    assert_eq!(
        statuses.get(&401).copied().unwrap_or(0),
        asked,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.get(&503).copied().unwrap_or(0),
        500 - asked,
        "{statuses:?}"
    );
    // The genuine key is kept: its deliveries go on.
    let after = webhook(&format!("item-after-{tag}"));
    let reply = send(&url, Some(&plaid().token(after.as_bytes(), now())), &after).await;
    assert_eq!(
        reply.status,
        201,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert_eq!(
        world.origin.count(&format!("/{tag}/")),
        2,
        "the two genuine ones"
    );
}
