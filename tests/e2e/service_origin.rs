//! Origins reached through a binding (SPEC §5, v5): a payments API on
//! Workers with no public URL, reached through a service binding. The
//! origin Worker (`support/origin-worker`) runs beside idemgate under
//! wrangler's dev server (the two find each other through a shared dev
//! registry, as `wrangler dev` sessions do), checks every forward's signed
//! headers with the project's Node verifier, and records what it got.

use std::time::Duration;

use crate::support::{client, eventually, post_json, Gateway};
use crate::{World, ADMIN_TOKEN, FORWARD_SECRET};

const BODY: &str = r#"{"amount":1200,"currency":"eur"}"#;

fn routes() -> String {
    serde_json::json!({
        "pay": {"path": "/pay", "origin": "service:PAYMENTS"},
        "queue": {"path": "/flaky", "origin": "service:PAYMENTS", "delivery": "async",
                  "retry_schedule": "1s"},
        "lost": {"path": "/lost", "origin": "service:NOT_BOUND"},
        "cert": {"path": "/cert", "origin": "mtls:ORIGIN_CERT",
                 "origin_url": "https://payments.example"}
    })
    .to_string()
}

const SERVICES: &str = r#"
[[services]]
binding = "PAYMENTS"
service = "idemgate-test-origin"

[[mtls_certificates]]
binding = "ORIGIN_CERT"
certificate_id = "00000000-0000-0000-0000-000000000000"
"#;

async fn records(origin: &Gateway) -> serde_json::Value {
    let reply = client().get(origin.url("/__records")).send().await.unwrap();
    serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap()
}

pub async fn a_service_bound_origin_worker_is_charged_once_and_verifies_every_forward(
    _world: &'static World,
) {
    let registry = tempfile::tempdir().unwrap();
    let origin = Gateway::start_origin_worker(registry.path(), FORWARD_SECRET).await;
    let routes = routes();
    let gateway = Gateway::start_with_registry(
        &[
            ("ROUTES", routes.as_str()),
            ("FORWARD_SECRET", FORWARD_SECRET),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ],
        SERVICES,
        registry.path(),
    )
    .await;

    // A storm of 100 duplicates: one call at the origin Worker, its
    // answer replayed to the rest.
    let sends = (0..100).map(|_| {
        let url = gateway.url("/pay/charges");
        async move { post_json(&client(), &url, Some("svc-storm-1"), BODY).await }
    });
    let replies = futures::future::join_all(sends).await;
    let first = replies
        .iter()
        .find(|reply| reply.status == 201)
        .expect("a charge");
    for reply in &replies {
        assert!(
            [201, 409].contains(&reply.status),
            "{} {}",
            reply.status,
            String::from_utf8_lossy(&reply.body)
        );
        if reply.status == 201 {
            assert_eq!(reply.body, first.body, "the one answer, replayed");
        }
    }
    let answer = first.json();
    assert_eq!(answer["charged"], "svc-storm-1");
    assert_eq!(answer["host"], "payments", "no URL: the binding's name");
    let seen = records(&origin).await;
    assert_eq!(seen["calls"], 1, "{seen}");
    assert_eq!(seen["verified"], 1, "{seen}");
    assert_eq!(seen["refused"], serde_json::json!([]), "{seen}");

    // Async, with a retry: the first forward is answered 503, the retry
    // a second later is charged; both verify.
    let ack = post_json(
        &client(),
        &gateway.url("/flaky/charges"),
        Some("svc-async-1"),
        BODY,
    )
    .await;
    assert_eq!(ack.status, 202, "{}", String::from_utf8_lossy(&ack.body));
    eventually(20, "charged after its retry", || async {
        let seen = records(&origin).await;
        seen["charged"]
            .as_object()
            .is_some_and(|charged| charged.keys().any(|id| id.ends_with("|svc-async-1")))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = records(&origin).await;
    assert_eq!(seen["calls"], 3, "{seen}");
    assert_eq!(seen["verified"], 3, "every forward verifies: {seen}");
    let charged = seen["charged"].as_object().unwrap();
    assert!(charged.values().all(|count| count == 1), "{seen}");

    // A route whose binding does not exist fails alone, named by health.
    let lost = post_json(
        &client(),
        &gateway.url("/lost/charges"),
        Some("svc-lost-1"),
        BODY,
    )
    .await;
    lost.assert_problem(500, "misconfigured");
    let health: serde_json::Value = serde_json::from_slice(
        &client()
            .get(gateway.url("/__idemgate/health"))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let broken = &health["configuration"]["broken_routes"];
    assert_eq!(broken[0]["route"], "lost", "{health}");
    assert_eq!(broken[0]["setting"], "ROUTES.lost.origin", "{health}");

    // An mTLS certificate binding exists locally, so its route is well
    // configured, but wrangler's dev server cannot run its fetch ("needs
    // to be run remotely"): the forward is 502 origin-unreachable, saying
    // so, and the sender retries. Only a deployment shows the handshake.
    assert!(
        !broken
            .as_array()
            .unwrap()
            .iter()
            .any(|route| route["route"] == "cert"),
        "{health}"
    );
    let local = post_json(
        &client(),
        &gateway.url("/cert/charges"),
        Some("svc-cert-1"),
        BODY,
    )
    .await;
    local.assert_problem(502, "origin-unreachable");
    assert!(
        local.json()["detail"]
            .as_str()
            .unwrap_or("")
            .contains("remotely"),
        "{}",
        String::from_utf8_lossy(&local.body)
    );
    drop(gateway);
    drop(origin);
}
