//! The audit log (SPEC §13) and re-drive by filter (SPEC §7, v4) under
//! `wrangler dev`, each test on a gateway of its own (built with the test
//! hooks), so its chain starts empty.

use std::time::Duration;

use idemgate_origin::audit::{verify_chain, verify_chain_to, Fault};
use serde_json::Value;

use crate::support::access::{assertion, ACCESS_AUD};
use crate::support::{client, eventually, post_json, Gateway, Reply};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":900,"currency":"eur"}"#;
const ACCESS_EMAIL: &str = "ops@example.com";

/// The Access team the audit gateways are set with: the test origin.
static TEAM: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The test origin is also the Access team (its `/cdn-cgi/access/certs`).
async fn gateway(world: &'static World) -> Gateway {
    TEAM.get_or_init(|| world.origin.url());
    Gateway::start_with_hooks(&[
        ("ORIGIN_URL", &world.origin.url()),
        ("ACCESS_TEAM", &world.origin.url()),
        ("ACCESS_AUD", ACCESS_AUD),
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s,1s"),
        ("ORIGIN_TIMEOUT_MS", "8000"),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await
}

/// An operator request, as Cloudflare Access lets it through for `email`
/// (its signed assertion and its email header) when `email` is given, and
/// with the audit hook's header (`fail`: the intent's write fails;
/// `fail-result`: the result's) when `hook` is.
async fn act(
    gateway: &Gateway,
    method: reqwest::Method,
    path: &str,
    query: &[(&str, &str)],
    email: Option<&str>,
    hook: Option<&str>,
) -> Reply {
    let identity = email.map(|email| {
        let team = TEAM.get().expect("an audit gateway was started");
        (email, Some(assertion(team, ACCESS_AUD, email, false)))
    });
    act_as(gateway, method, path, query, identity, hook).await
}

/// An operator request carrying `identity`: the email header, and the
/// assertion when one is given (each is what a caller can send itself).
async fn act_as(
    gateway: &Gateway,
    method: reqwest::Method,
    path: &str,
    query: &[(&str, &str)],
    identity: Option<(&str, Option<String>)>,
    hook: Option<&str>,
) -> Reply {
    let mut request = client()
        .request(method, gateway.url(path))
        .query(query)
        .bearer_auth(ADMIN_TOKEN);
    if let Some((email, token)) = identity {
        request = request.header("Cf-Access-Authenticated-User-Email", email);
        if let Some(token) = token {
            request = request.header("Cf-Access-Jwt-Assertion", token);
        }
    }
    if let Some(hook) = hook {
        request = request.header("X-Idemgate-Test-Audit", hook);
    }
    Reply::read(request.send().await.unwrap()).await
}

async fn get(gateway: &Gateway, path: &str, query: &[(&str, &str)]) -> Value {
    let reply = act(gateway, reqwest::Method::GET, path, query, None, None).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

async fn state(gateway: &Gateway, key: &str) -> String {
    let reply = act(
        gateway,
        reqwest::Method::GET,
        "/__idemgate/receipts",
        &[("key", key), ("path", &format!("/audit/{key}"))],
        None,
        None,
    )
    .await;
    reply.json()["state"].as_str().unwrap_or("").to_string()
}

async fn deliver(gateway: &Gateway, key: &str) {
    let url = gateway.url(&format!("/audit/{key}"));
    let ack = post_json(&client(), &url, Some(key), BODY).await;
    assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
}

async fn dead(gateway: &Gateway, key: &str) {
    eventually(20, "dead after its schedule", || async {
        state(gateway, key).await == "dead"
    })
    .await;
}

/// The whole chain, oldest first, page by page.
async fn export(gateway: &Gateway) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = vec![("order", "oldest")];
        if let Some(cursor) = &cursor {
            query.push(("cursor", cursor));
        }
        let page = get(gateway, "/__idemgate/audit", &query).await;
        entries.extend(page["entries"].as_array().unwrap().iter().cloned());
        match page["cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return entries,
        }
    }
}

async fn newest(gateway: &Gateway) -> Value {
    let page = get(gateway, "/__idemgate/audit", &[]).await;
    page["entries"][0].clone()
}

fn key_sha256(key: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(key.as_bytes()))
}

fn assert_entry(entry: &Value, seq: u64, actor: &str, action: &str, key: Option<&str>) {
    assert_eq!(entry["seq"], seq, "{entry}");
    assert_eq!(entry["actor"], actor, "{entry}");
    assert_eq!(entry["action"], action, "{entry}");
    assert_eq!(entry["route"], "default", "{entry}");
    if let Some(key) = key {
        let target = entry["target"].as_str().unwrap();
        assert!(target.contains(&key_sha256(key)), "{entry}");
        assert!(!target.contains(key), "the key itself never: {entry}");
    }
}

/// Purge, force purge, re-drive and bulk re-drive each leave one entry,
/// with the Access identity as the actor when it came and `admin-token`
/// when not; the exported chain verifies, ends at the summary's head, and
/// an edited or deleted entry is named.
pub async fn each_operator_act_leaves_one_entry_and_the_chain_verifies(world: &'static World) {
    let gateway = gateway(world).await;
    world.origin.fail("/audit/", true);
    for key in ["au-purge", "au-redrive", "au-bulk"] {
        deliver(&gateway, key).await;
    }
    for key in ["au-purge", "au-redrive", "au-bulk"] {
        dead(&gateway, key).await;
    }
    let receipts = "/__idemgate/receipts";
    let redrive = "/__idemgate/receipts/redrive";

    let purged = act(
        &gateway,
        reqwest::Method::DELETE,
        receipts,
        &[("key", "au-purge"), ("path", "/audit/au-purge")],
        Some(ACCESS_EMAIL),
        None,
    )
    .await;
    assert_eq!(
        purged.status,
        204,
        "{}",
        String::from_utf8_lossy(&purged.body)
    );
    assert_entry(
        &newest(&gateway).await,
        1,
        ACCESS_EMAIL,
        "purge",
        Some("au-purge"),
    );
    assert_eq!(newest(&gateway).await["result"], "204");

    // A pending delivery (its first attempt fails, its schedule runs on).
    deliver(&gateway, "au-force").await;
    let forced = act(
        &gateway,
        reqwest::Method::DELETE,
        receipts,
        &[
            ("key", "au-force"),
            ("path", "/audit/au-force"),
            ("force", "true"),
        ],
        None,
        None,
    )
    .await;
    assert_eq!(
        forced.status,
        204,
        "{}",
        String::from_utf8_lossy(&forced.body)
    );
    assert_entry(
        &newest(&gateway).await,
        2,
        "admin-token",
        "force-purge",
        Some("au-force"),
    );

    world.origin.fail("/audit/", false);
    let redriven = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("key", "au-redrive"), ("path", "/audit/au-redrive")],
        Some(ACCESS_EMAIL),
        None,
    )
    .await;
    assert_eq!(
        redriven.status,
        202,
        "{}",
        String::from_utf8_lossy(&redriven.body)
    );
    assert_entry(
        &newest(&gateway).await,
        3,
        ACCESS_EMAIL,
        "redrive",
        Some("au-redrive"),
    );
    assert_eq!(newest(&gateway).await["result"], "202");

    let bulk = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("route", "default"), ("state", "dead")],
        None,
        None,
    )
    .await;
    assert_eq!(bulk.status, 200, "{}", String::from_utf8_lossy(&bulk.body));
    assert_eq!(bulk.json()["redriven"], 1, "{}", bulk.json());
    let entry = newest(&gateway).await;
    assert_entry(&entry, 4, "admin-token", "bulk-redrive", None);
    assert_eq!(entry["target"], "state=dead");
    assert_eq!(entry["result"], "200 redriven=1 failed=0");
    for key in ["au-redrive", "au-bulk"] {
        eventually(15, "re-driven and delivered", || async {
            state(&gateway, key).await == "completed"
        })
        .await;
    }

    // Reads are not acts: nothing more was written.
    let chain = export(&gateway).await;
    assert_eq!(chain.len(), 4, "{chain:?}");
    let verified = verify_chain(&chain).expect("the exported chain verifies");
    let summary = get(&gateway, "/__idemgate/summary", &[]).await;
    assert_eq!(summary["audit"]["seq"], 4, "{summary}");
    let head = summary["audit"]["hash"].as_str().unwrap();
    assert_eq!(verified.head_hash, head);
    verify_chain_to(&chain, head).expect("ends at the summary's head");

    let mut edited = chain.clone();
    edited[1]["actor"] = "someone-else@example.com".into();
    let broken = verify_chain(&edited).unwrap_err();
    assert_eq!(
        (broken.index, broken.seq, broken.fault),
        (1, Some(2), Fault::Hash)
    );
    let mut deleted = chain.clone();
    deleted.remove(2);
    let broken = verify_chain(&deleted).unwrap_err();
    assert_eq!(
        (broken.index, broken.seq, broken.fault),
        (2, Some(4), Fault::Seq)
    );
    let mut cut = chain.clone();
    cut.pop();
    assert_eq!(verify_chain_to(&cut, head).unwrap_err().fault, Fault::Head);

    // The route's own page, newest first.
    let page = get(&gateway, "/__idemgate/audit", &[("route", "default")]).await;
    let seqs: Vec<u64> = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [4, 3, 2, 1]);
    assert!(page["cursor"].is_null());
}

/// The review's item 10 (round 5): any token holder could send
/// `Cf-Access-Authenticated-User-Email: ceo@corp` and the act was the
/// CEO's. The email counts only from an Access assertion that verifies
/// (the fake team's key, this application's audience); otherwise the
/// actor is the token used.
pub async fn a_claimed_identity_is_not_the_actor_until_access_proves_it(world: &'static World) {
    let gateway = gateway(world).await;
    let team = TEAM.get().unwrap().clone();
    let claimed = "ceo@corp.example";
    let receipts = "/__idemgate/receipts";
    let purge = |key: &'static str| [("key", key), ("path", "/audit/none")];
    let cases = [
        ("au-header-only", None, "admin-token"),
        (
            "au-forged",
            Some(assertion(&team, ACCESS_AUD, claimed, true)),
            "admin-token",
        ),
        (
            "au-other-app",
            Some(assertion(&team, "another-application", claimed, false)),
            "admin-token",
        ),
        (
            "au-other-team",
            Some(assertion(
                "https://evil.cloudflareaccess.com",
                ACCESS_AUD,
                claimed,
                false,
            )),
            "admin-token",
        ),
        (
            "au-proved",
            Some(assertion(&team, ACCESS_AUD, claimed, false)),
            claimed,
        ),
    ];
    for (seq, (key, token, actor)) in cases.into_iter().enumerate() {
        let reply = act_as(
            &gateway,
            reqwest::Method::DELETE,
            receipts,
            &purge(key),
            Some((claimed, token)),
            None,
        )
        .await;
        assert!(
            reply.status < 500,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_entry(
            &newest(&gateway).await,
            seq as u64 + 1,
            actor,
            "purge",
            Some(key),
        );
    }
}

/// The review's item 11 (round 5): the chain is anchored outside the
/// object that keeps it. After an act, the head goes to the `json` sink
/// as a signed `idemgate.audit_head` checkpoint (the official Standard
/// Webhooks library verifies it), and the exported chain agrees with it.
pub async fn an_act_sends_the_chains_head_to_the_json_sink(world: &'static World) {
    use crate::alerts::{verified_by_standardwebhooks, ALERT_SECRET};
    let origin = world.origin.url();
    let run = crate::senders::now().to_string();
    let sinks = serde_json::json!([
        {"url": format!("{origin}/checkpoints-{run}/json"), "format": "json", "secret": "ALERT_SECRET"}
    ])
    .to_string();
    let gateway = Gateway::start_with_hooks(&[
        ("ORIGIN_URL", &origin),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("ALERTS", &sinks),
        ("ALERT_SECRET", ALERT_SECRET),
    ])
    .await;
    let purged = act(
        &gateway,
        reqwest::Method::DELETE,
        "/__idemgate/receipts",
        &[("key", "au-anchor"), ("path", "/audit/au-anchor")],
        None,
        None,
    )
    .await;
    assert_eq!(
        purged.status,
        404,
        "{}",
        String::from_utf8_lossy(&purged.body)
    );
    let prefix = format!("/checkpoints-{run}/json");
    eventually(20, "the checkpoint reached the json sink", || async {
        !world.origin.received(&prefix).is_empty()
    })
    .await;
    let received = world.origin.received(&prefix);
    let checkpoint = verified_by_standardwebhooks(&received[0]);
    assert_eq!(checkpoint["type"], "idemgate.audit_head", "{checkpoint}");
    assert_eq!(checkpoint["seq"], 1, "{checkpoint}");
    let checkpoint = idemgate_origin::audit::Checkpoint::from_json(
        std::str::from_utf8(&received[0].body).unwrap(),
    )
    .expect("the sink's body is a checkpoint the verifiers read");
    let chain = export(&gateway).await;
    idemgate_origin::audit::verify_chain_at(&chain, &checkpoint)
        .expect("the exported chain agrees with what left the deployment");
}

/// An audit write that fails answers 503 and the act is not done: the
/// purge left the receipt, the re-drives left the dead letter dead, and
/// the chain did not move.
pub async fn an_audit_write_that_fails_refuses_the_act(world: &'static World) {
    let gateway = gateway(world).await;
    world.origin.fail("/audit/", true);
    deliver(&gateway, "au-refused").await;
    dead(&gateway, "au-refused").await;
    world.origin.fail("/audit/", false);
    let query = [("key", "au-refused"), ("path", "/audit/au-refused")];
    let purge = act(
        &gateway,
        reqwest::Method::DELETE,
        "/__idemgate/receipts",
        &query,
        None,
        Some("fail"),
    )
    .await;
    purge.assert_problem(503, "storage-unavailable");
    assert!(
        purge.json()["detail"]
            .as_str()
            .unwrap()
            .contains("audit log"),
        "{}",
        purge.json()
    );
    let redrive = act(
        &gateway,
        reqwest::Method::POST,
        "/__idemgate/receipts/redrive",
        &query,
        None,
        Some("fail"),
    )
    .await;
    redrive.assert_problem(503, "storage-unavailable");
    let bulk = act(
        &gateway,
        reqwest::Method::POST,
        "/__idemgate/receipts/redrive",
        &[("state", "dead")],
        None,
        Some("fail"),
    )
    .await;
    bulk.assert_problem(503, "storage-unavailable");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state(&gateway, "au-refused").await,
        "dead",
        "neither purged nor re-driven"
    );
    assert!(
        export(&gateway).await.is_empty(),
        "nothing on record: nothing was done"
    );
    let summary = get(&gateway, "/__idemgate/summary", &[]).await;
    assert_eq!(summary["audit"]["seq"], 0, "{summary}");
    // The result's write fails: the act was done (a 503 would invite a
    // retry of it), so its answer is given, marked pending; its intent is
    // on record and is settled as `unknown` later.
    let purge = act(
        &gateway,
        reqwest::Method::DELETE,
        "/__idemgate/receipts",
        &query,
        None,
        Some("fail-result"),
    )
    .await;
    assert_eq!(
        purge.status,
        204,
        "{}",
        String::from_utf8_lossy(&purge.body)
    );
    assert_eq!(purge.header("idemgate-audit"), Some("pending"));
    assert_eq!(state(&gateway, "au-refused").await, "", "purged");
    assert!(
        export(&gateway).await.is_empty(),
        "its entry waits to be settled"
    );
    // The next act is on record as usual.
    let bulk = act(
        &gateway,
        reqwest::Method::POST,
        "/__idemgate/receipts/redrive",
        &[("state", "dead")],
        None,
        None,
    )
    .await;
    assert_eq!(bulk.status, 200, "{}", String::from_utf8_lossy(&bulk.body));
    let chain = export(&gateway).await;
    assert_eq!(chain.len(), 1, "{chain:?}");
    assert_eq!(chain[0]["result"], "200 redriven=0 failed=0");
}

/// Re-drive by filter: a dry run counts what `since`/`until` name, shows a
/// sample, changes nothing and is not on record; the re-drive then takes
/// only the receipts in the window.
pub async fn redrive_by_filter_counts_first_and_takes_only_its_window(world: &'static World) {
    let gateway = gateway(world).await;
    world.origin.fail("/audit/", true);
    let keys = ["au-w0", "au-w1", "au-w2"];
    deliver(&gateway, keys[0]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let between = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    deliver(&gateway, keys[1]).await;
    deliver(&gateway, keys[2]).await;
    for key in keys {
        dead(&gateway, key).await;
    }
    world.origin.fail("/audit/", false);
    let redrive = "/__idemgate/receipts/redrive";
    let dry = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("state", "dead"), ("since", &between), ("dry_run", "true")],
        None,
        None,
    )
    .await;
    assert_eq!(dry.status, 200, "{}", String::from_utf8_lossy(&dry.body));
    let dry = dry.json();
    assert_eq!(dry["count"], 2, "{dry}");
    assert_eq!(dry["dry_run"], true);
    let mut sampled: Vec<&str> = dry["sample"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap())
        .collect();
    sampled.sort_unstable();
    assert_eq!(sampled, ["au-w1", "au-w2"]);
    let all = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("state", "dead"), ("dry_run", "true")],
        None,
        None,
    )
    .await;
    assert_eq!(all.json()["count"], 3, "{}", all.json());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for key in keys {
        assert_eq!(
            state(&gateway, key).await,
            "dead",
            "a dry run changes nothing"
        );
    }
    assert!(export(&gateway).await.is_empty(), "a dry run is not an act");

    // RFC 3339 works as well as milliseconds.
    let rfc3339 = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[
            ("state", "dead"),
            ("since", "2020-01-01T00:00:00Z"),
            ("until", "2999-01-01T00:00:00.000+01:00"),
            ("dry_run", "true"),
        ],
        None,
        None,
    )
    .await;
    assert_eq!(rfc3339.json()["count"], 3, "{}", rfc3339.json());
    let bad = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("state", "dead"), ("until", "yesterday")],
        None,
        None,
    )
    .await;
    bad.assert_problem(400, "invalid-key");
    let taken = act(
        &gateway,
        reqwest::Method::POST,
        redrive,
        &[("state", "dead"), ("until", &between)],
        None,
        None,
    )
    .await;
    assert_eq!(
        taken.status,
        200,
        "{}",
        String::from_utf8_lossy(&taken.body)
    );
    assert_eq!(taken.json()["redriven"], 1, "{}", taken.json());
    eventually(15, "the window's receipt is delivered", || async {
        state(&gateway, keys[0]).await == "completed"
    })
    .await;
    for key in &keys[1..] {
        assert_eq!(state(&gateway, key).await, "dead", "outside the window");
    }
    let entry = newest(&gateway).await;
    assert_eq!(entry["action"], "bulk-redrive");
    assert_eq!(entry["target"], format!("state=dead&until={between}"));
}
