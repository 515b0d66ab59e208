//! Requests that are not deduplicated.

use crate::support::{client, Reply};
use crate::{Profile, World};

pub async fn get_passes_through_without_dedup_or_idempotency_headers(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    for _ in 0..2 {
        let response = client
            .get(gateway.url("/pass/things?page=2"))
            .header("idempotency-key", "same")
            .header("idempotency-signature", "t=1,v1=forged")
            .send()
            .await
            .unwrap();
        let reply = Reply::read(response).await;
        assert_eq!(reply.status, 201, "the origin's own answer");
        assert_eq!(reply.header("idemgate-decision"), None);
        assert!(!reply.replayed());
    }
    let received = world.origin.received("/pass/");
    assert_eq!(received.len(), 2, "GET is never deduplicated");
    for request in received {
        assert_eq!(request.method, "GET");
        assert_eq!(request.query.as_deref(), Some("page=2"));
        let forged: Vec<_> = request
            .headers
            .keys()
            .filter(|name| name.as_str().starts_with("idempotency-"))
            .collect();
        assert!(forged.is_empty(), "{forged:?}");
    }
}

pub async fn operator_health_is_not_forwarded(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let before = world.origin.count("/");
    let reply = crate::support::get(&gateway, "/__idemgate/health").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["status"], "ok");
    assert_eq!(world.origin.count("/"), before);
}

/// A method the HTTP parser knows but SPEC §1 does not list is refused, not
/// proxied: `worker::Request` once turned it into a GET, and the gateway
/// answered a bare 500 (or the operator API answered it as a GET).
pub async fn unlisted_methods_are_405_problems_and_not_forwarded(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let before = world.origin.count("/unlisted/");
    for method in ["PROPFIND", "TRACE"] {
        let response = client()
            .request(
                reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
                gateway.url("/unlisted/pay"),
            )
            .header("idempotency-key", format!("unlisted-{method}"))
            .send()
            .await
            .unwrap();
        Reply::read(response)
            .await
            .assert_problem(405, "method-not-allowed");
    }
    assert_eq!(world.origin.count("/unlisted/"), before);
    // The operator routes answer GET (and DELETE) only, not what reads as one.
    let response = client()
        .request(
            reqwest::Method::from_bytes(b"PROPFIND").unwrap(),
            gateway.url("/__idemgate/health"),
        )
        .send()
        .await
        .unwrap();
    Reply::read(response).await.assert_problem(404, "not-found");
}
