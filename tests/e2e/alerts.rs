//! Alerts (SPEC §13, v4) under `wrangler dev`, with the test origin as the
//! sinks: dead letters make one `dead` alert per interval carrying the
//! count (not a storm) and a `resolved` one once they stop, each JSON alert
//! verified by the official `standardwebhooks` library; 25 forged
//! deliveries make a `signature_failures` alert; a sink that answers 503
//! is retried until it takes the alert, and no delivery waits for it.

use std::path::PathBuf;

use hmac::Mac;

use crate::support::{client, eventually, post_json, read_summary, Gateway};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

pub const ALERT_SECRET: &str = "whsec_YWxlcnRzLXNpZ25pbmcta2V5LWZvci10aGUtZTJlLXRlc3Rz";
const GITHUB_SECRET: &str = "alerts-github-secret";

/// The alerts the test origin got as the JSON sink, oldest first.
fn json_alerts(world: &World, run: &str) -> Vec<serde_json::Value> {
    world
        .origin
        .received(&format!("/alerts-{run}/json"))
        .iter()
        .map(|received| serde_json::from_slice(&received.body).unwrap())
        .collect()
}

/// What the official Standard Webhooks library makes of one delivery.
pub fn verified_by_standardwebhooks(
    received: &crate::support::origin::Received,
) -> serde_json::Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let headers: serde_json::Map<String, serde_json::Value> =
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
            .iter()
            .map(|name| (name.to_string(), received.header(name).unwrap_or("").into()))
            .collect();
    let delivery = serde_json::json!({
        "secret": ALERT_SECRET,
        "headers": headers,
        "body": String::from_utf8(received.body.to_vec()).unwrap(),
    });
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), delivery.to_string()).unwrap();
    let output = std::process::Command::new("node")
        .arg(root.join("tests/official/verify-standard-webhook.mjs"))
        .arg(file.path())
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "standardwebhooks refuses the alert: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn github_signature(body: &str, secret: &str) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

pub async fn dead_letters_and_forgeries_reach_a_person_once_per_interval(world: &'static World) {
    let origin = world.origin.url();
    let run = crate::senders::now().to_string();
    let sinks = serde_json::json!([
        {"url": format!("{origin}/alerts-{run}/slack"), "format": "slack"},
        {"url": format!("{origin}/alerts-{run}/json"), "format": "json", "secret": "ALERT_SECRET"}
    ])
    .to_string();
    let routes = serde_json::json!({
        "queue": {"path": "/queue", "delivery": "async", "retry_schedule": "1s"},
        "github": {"path": "/gh", "signature": "github", "signing_secret": "GITHUB_ROUTE_SECRET"}
    })
    .to_string();
    let gateway = Gateway::start(&[
        ("ROUTES", &routes),
        ("ORIGIN_URL", &origin),
        ("FORWARD_SECRET", FORWARD_SECRET),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("GITHUB_ROUTE_SECRET", GITHUB_SECRET),
        ("ALERTS", &sinks),
        ("ALERT_SECRET", ALERT_SECRET),
        ("ALERT_INTERVAL_SECONDS", "3"),
    ])
    .await;
    let health = crate::support::Reply::read(
        client()
            .get(gateway.url("/__idemgate/health"))
            .send()
            .await
            .unwrap(),
    )
    .await
    .json();
    assert_eq!(health["alerts"], "ok", "{health}");

    // The Slack sink is down at first: its alerts wait, nothing else does.
    world.origin.fail(&format!("/alerts-{run}/slack"), true);
    world.origin.fail(&format!("/queue/{run}/"), true);
    let started = std::time::Instant::now();
    for n in 0..3 {
        let reply = post_json(
            &client(),
            &gateway.url(&format!("/queue/{run}/pay")),
            Some(&format!("dead-{run}-{n}")),
            r#"{"amount": 100}"#,
        )
        .await;
        assert_eq!(reply.status, 202);
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "acknowledging waited for nothing"
    );
    // Each dies after its attempt and one retry; the alerts follow.
    eventually(30, "a resolved dead alert", || async {
        json_alerts(world, &run)
            .iter()
            .any(|alert| alert["condition"] == "dead" && alert["state"] == "resolved")
    })
    .await;
    let dead: Vec<serde_json::Value> = json_alerts(world, &run)
        .into_iter()
        .filter(|alert| alert["condition"] == "dead")
        .collect();
    let firing = dead
        .iter()
        .filter(|alert| alert["state"] == "firing")
        .count();
    assert!(
        (1..=2).contains(&firing),
        "one per interval, not a storm: {dead:?}"
    );
    let counted: u64 = dead
        .iter()
        .map(|alert| alert["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 3, "every dead letter counted once: {dead:?}");
    assert_eq!(dead[0]["route"], "queue");
    assert_eq!(dead[0]["type"], "idemgate.alert");
    let received = world.origin.received(&format!("/alerts-{run}/json"));
    let verified = verified_by_standardwebhooks(&received[0]);
    assert_eq!(verified["condition"], "dead");

    // 25 forged deliveries: one signature_failures alert, and each is 401.
    for n in 0..25 {
        let body = format!(r#"{{"action":"forged","n":{n}}}"#);
        let reply = client()
            .post(gateway.url("/gh/events"))
            .header("content-type", "application/json")
            .header(
                "x-hub-signature-256",
                github_signature(&body, "not-the-secret"),
            )
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 401);
    }
    eventually(20, "a signature_failures alert", || async {
        json_alerts(world, &run).iter().any(|alert| {
            alert["condition"] == "signature_failures"
                && alert["route"] == "github"
                && alert["state"] == "firing"
                && alert["count"].as_u64() >= Some(20)
        })
    })
    .await;
    assert_eq!(world.origin.count("/gh/"), 0, "no forgery was forwarded");

    // The Slack sink was asked and refused; once it answers, every alert
    // reaches it.
    let slack = format!("/alerts-{run}/slack");
    assert!(world.origin.count(&slack) >= 1, "the sink was tried");
    world.origin.fail(&slack, false);
    eventually(40, "the Slack sink catches up", || async {
        let summary = read_summary(&gateway, ADMIN_TOKEN).await;
        summary["alerts"]["outbox"] == 0
    })
    .await;
    let texts: Vec<String> = world
        .origin
        .received(&slack)
        .iter()
        .filter_map(|received| {
            let body: serde_json::Value = serde_json::from_slice(&received.body).ok()?;
            body["text"].as_str().map(str::to_string)
        })
        .collect();
    assert!(
        texts
            .iter()
            .any(|text| text.contains("`signature_failures` on route `github`")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|text| text.contains("`dead` on route `queue` resolved")),
        "{texts:?}"
    );
    let summary = read_summary(&gateway, ADMIN_TOKEN).await;
    let github = summary["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|route| route["route"] == "github")
        .unwrap()
        .clone();
    assert_eq!(
        github["alerts"][0]["condition"], "signature_failures",
        "{summary}"
    );
    assert_eq!(github["alerts"][0]["firing"], true);
}
