use super::*;
use crate::headers::HeaderList;
use crate::key::IdempotencyKey;
use std::collections::HashMap;

#[test]
fn path_and_query_agree_with_a_full_url_parser() {
    for raw in [
        "http://127.0.0.1:8787/payments",
        "https://edge.example/v1/pay?x=1&y=%3F",
        "https://edge.example/a%2Fb?",
        "https://edge.example/",
        "https://edge.example",
        "https://user:pw@edge.example:443/p/q?k=v#frag",
        "https://edge.example/p#frag?not-a-query",
        "http://a/b?c",
        "https://x/",
    ] {
        let parsed = url::Url::parse(raw).unwrap();
        assert_eq!(
            path_and_query(parsed.as_str()),
            (parsed.path(), parsed.query()),
            "{raw}"
        );
    }
}

fn config(extra: &[(&str, &str)]) -> Config {
    let mut vars: HashMap<String, String> = [
        ("ORIGIN_URL", "http://origin:9/base"),
        ("FORWARD_SECRET", "forward-secret"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    vars.entry("MAX_BODY_BYTES".into()).or_insert("64".into());
    Config::from_lookup(|name| vars.get(name).cloned()).unwrap()
}

fn headers(pairs: &[(&str, &str)]) -> HeaderList {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

struct Request<'a> {
    method: &'a str,
    path: &'a str,
    query: Option<&'a str>,
    headers: HeaderList,
    body: &'a [u8],
}

fn json_post<'a>(extra: &[(&str, &str)], body: &'a str) -> Request<'a> {
    let mut list = headers(&[("content-type", "application/json")]);
    list.extend(headers(extra));
    Request {
        method: "POST",
        path: "/pay",
        query: Some("x=1"),
        headers: list,
        body: body.as_bytes(),
    }
}

fn run(config: &Config, request: &Request) -> Result<Seen, Problem> {
    let normalized = normalize(request.path);
    let route = config.route_for(&normalized).unwrap();
    let inbound = Inbound {
        method: request.method,
        path: request.path,
        normalized_path: &normalized,
        query: request.query,
        headers: &request.headers,
        body: request.body,
        now: 0,
    };
    admit(&authenticate(route, &inbound)?.done()?).map(Seen::from)
}

/// An admitted delivery as these tests read it, by the names they were
/// written with before the delivery took one shape.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    route: String,
    key: IdempotencyKey,
    fingerprint: Fingerprint,
    scope: String,
    object_name: String,
    scoped_path: Option<String>,
    tenant_sha256: Option<String>,
    method: String,
    target: Target,
    raw_body_sha256: String,
    forward_headers: HeaderList,
    previous: Option<SeenPrevious>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct SeenPrevious {
    key: IdempotencyKey,
    scope: String,
    object_name: String,
    tenant_sha256: Option<String>,
}

impl From<Admitted> for Seen {
    fn from(admitted: Admitted) -> Seen {
        let Delivery {
            identity,
            fingerprint,
            request,
            ..
        } = admitted.delivery;
        Seen {
            route: identity.route,
            key: identity.key,
            fingerprint,
            scope: identity.scope,
            object_name: identity.object,
            scoped_path: identity.path,
            tenant_sha256: identity.tenant_sha256,
            method: request.method,
            target: Target {
                url: request.url,
                path_and_query: request.path_and_query,
            },
            raw_body_sha256: request.raw_body_sha256,
            forward_headers: request.headers,
            previous: admitted.previous.map(|previous| SeenPrevious {
                key: previous.key,
                scope: previous.scope,
                object_name: previous.object,
                tenant_sha256: previous.tenant_sha256,
            }),
        }
    }
}

fn normalize(path: &str) -> String {
    crate::routes::normalize_path(path).unwrap()
}

fn admit_json(config: &Config, extra: &[(&str, &str)], body: &str) -> Result<Seen, Problem> {
    run(config, &json_post(extra, body))
}

#[test]
fn the_method_decides_passthrough_deduplication_or_405() {
    let config = config(&[]);
    let kind = |method| route_request(&config, method, "/x").map(|(_, kind)| kind);
    assert_eq!(kind("GET"), Ok(Kind::Passthrough));
    assert_eq!(kind("head"), Ok(Kind::Passthrough));
    assert_eq!(kind("OPTIONS"), Ok(Kind::Passthrough));
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        assert_eq!(kind(method), Ok(Kind::Deduplicate));
    }
    assert_eq!(kind("TRACE").unwrap_err().status(), 405);
}

#[test]
fn an_unrouted_path_is_404_whatever_the_method() {
    let config = config(&[("ROUTES", r#"{"api":{"path":"/v1"}}"#)]);
    for method in ["GET", "POST", "TRACE"] {
        assert_eq!(
            route_request(&config, method, "/v2/x").unwrap_err(),
            Problem::NoRoute
        );
    }
    assert_eq!(
        route_request(&config, "POST", "/v1/x").unwrap().0.name,
        "api"
    );
}

#[test]
fn a_body_of_exactly_the_limit_is_accepted_and_one_byte_more_is_413() {
    let config = config(&[("KEY_SOURCES", "header:Idempotency-Key")]);
    let route = &config.routes[0];
    assert_eq!(
        body_framing(64, Some("64"), None),
        Ok(BodyFraming::Declared)
    );
    assert_eq!(
        body_framing(64, Some("65"), None).unwrap_err().status(),
        413
    );
    assert!(!over_limit(64, 64));
    assert!(over_limit(65, 64));
    let at_limit = "x".repeat(route.max_body_bytes as usize);
    let mut request = json_post(&[("idempotency-key", "k")], &at_limit);
    request.headers[0].1 = "text/plain".into();
    assert!(run(&config, &request).is_ok());
    let over = "x".repeat(route.max_body_bytes as usize + 1);
    request.body = over.as_bytes();
    assert_eq!(run(&config, &request).unwrap_err().status(), 413);
}

#[test]
fn a_body_without_a_binding_length_is_streamed() {
    for (length, encoding) in [
        (None, None),
        (None, Some("chunked")),
        (Some("10"), Some("chunked")),
        (Some("ten"), None),
    ] {
        assert_eq!(
            body_framing(64, length, encoding),
            Ok(BodyFraming::Streamed),
            "{length:?} {encoding:?}"
        );
    }
}

#[test]
fn admits_a_json_delivery() {
    let config = config(&[]);
    let admitted = admit_json(
        &config,
        &[
            ("idempotency-key", "\"k1\""),
            ("idempotency-epoch", "7"),
            ("idempotency_scope", "x"),
        ],
        r#"{"b":1, "a":2}"#,
    )
    .unwrap();
    assert_eq!(admitted.key.as_str(), "k1");
    assert_eq!(
        admitted.fingerprint,
        Fingerprint::of_request("POST", Some("x=1"), &sha256_hex(br#"{"a":2,"b":1}"#))
    );
    assert_eq!(admitted.target.url, "http://origin:9/base/pay?x=1");
    assert_eq!(admitted.target.path_and_query, "/base/pay?x=1");
    assert_eq!(admitted.route, "default");
    assert_eq!(admitted.scoped_path.as_deref(), Some("/pay"));
    assert_eq!(
        admitted.scope,
        Scope::new("default", Some("/pay"), None).id()
    );
    assert_eq!(
        admitted.forward_headers,
        headers(&[("content-type", "application/json")])
    );
}

#[test]
fn the_fingerprint_covers_method_and_query() {
    let config = config(&[]);
    let mut request = json_post(&[("idempotency-key", "k")], r#"{"amount":1}"#);
    let first = run(&config, &request).unwrap();
    request.query = Some("amount=999");
    assert_ne!(
        run(&config, &request).unwrap().fingerprint,
        first.fingerprint
    );
    request.query = Some("x=1");
    request.method = "PUT";
    let put = run(&config, &request).unwrap();
    assert_ne!(put.fingerprint, first.fingerprint);
    assert_eq!(put.object_name, first.object_name, "one key, one object");
}

#[test]
fn each_rejection_has_its_status() {
    let config = config(&[]);
    let problem =
        |extra: &[(&str, &str)], body: &str| admit_json(&config, extra, body).unwrap_err();
    assert_eq!(problem(&[], &"x".repeat(65)).status(), 413);
    assert_eq!(problem(&[], "{not json").name(), "invalid-json");
    assert_eq!(
        problem(&[("idempotency-key", "k")], r#"{"a":1,"a":2}"#).name(),
        "invalid-json"
    );
    assert_eq!(problem(&[], "{}").name(), "missing-key");
    assert_eq!(
        problem(&[("idempotency-key", "")], "{}").name(),
        "invalid-key"
    );
    assert_eq!(
        problem(&[("idempotency-key", "caf\u{e9}")], "{}").name(),
        "invalid-key"
    );
    assert_eq!(
        problem(&[("idempotency-key", &"k".repeat(256))], "{}").name(),
        "invalid-key"
    );
}

#[test]
fn the_signature_is_checked_before_the_body_is_read() {
    let config = config(&[
        ("SIGNATURE_SCHEME", "stripe"),
        ("SIGNING_SECRET", "whsec_x"),
    ]);
    let problem = admit_json(
        &config,
        &[("stripe-signature", "t=1,v1=00")],
        r#"{"id":"evt_1"}"#,
    )
    .unwrap_err();
    assert_eq!(problem.name(), "bad-signature");
    let unsigned = admit_json(&config, &[], "{not even json").unwrap_err();
    assert_eq!(
        unsigned.name(),
        "bad-signature",
        "no body parsing before authentication"
    );
}

#[test]
fn a_certificate_that_could_not_be_fetched_is_retryable_not_forged() {
    use PublicKeyChecked::{KeyUnavailable, Rejected, Verified};
    for (checks, all) in [
        (vec![], Rejected),
        (vec![Rejected, Rejected], Rejected),
        (vec![KeyUnavailable], KeyUnavailable),
        (vec![Rejected, KeyUnavailable], KeyUnavailable),
        (vec![KeyUnavailable, Verified], Verified),
        (vec![Verified, Rejected], Verified),
    ] {
        let found = checks.iter().copied().max().unwrap_or(Rejected);
        assert_eq!(found, all, "{checks:?}");
    }
    let unavailable = Problem::SigningKeyUnavailable;
    assert_eq!(unavailable.status(), 503);
    assert_eq!(unavailable.name(), "signing-key-unavailable");
    assert_eq!(unavailable.retry_after_secs(), Some(1));
    assert!(unavailable.detail().contains("retrying is safe"));
}

#[test]
fn raw_bodies_fingerprint_as_bytes() {
    let config = config(&[("KEY_SOURCES", "header:Idempotency-Key")]);
    let mut request = json_post(&[("idempotency-key", "k")], "{ \"a\": 1 }");
    request.headers[0].1 = "text/plain".into();
    let admitted = run(&config, &request).unwrap();
    assert_eq!(
        admitted.fingerprint,
        Fingerprint::of_request("POST", Some("x=1"), &sha256_hex(b"{ \"a\": 1 }"))
    );
}

#[test]
fn tenants_never_share_an_object_under_either_scope() {
    for scope in ["path", "route"] {
        let config = config(&[("TENANT_HEADER", "Authorization"), ("KEY_SCOPE", scope)]);
        assert_eq!(
            admit_json(&config, &[("idempotency-key", "k")], "{}")
                .unwrap_err()
                .name(),
            "missing-tenant"
        );
        let as_tenant = |token: &str| {
            admit_json(
                &config,
                &[("idempotency-key", "k"), ("authorization", token)],
                "{}",
            )
            .unwrap()
        };
        let (a, b) = (as_tenant("Bearer a"), as_tenant("Bearer b"));
        assert_ne!(a.object_name, b.object_name, "{scope}");
        assert_ne!(a.scope, b.scope, "{scope}");
        assert_eq!(
            a.tenant_sha256.as_deref(),
            Some(tenant_sha256("Bearer a").as_str())
        );
    }
}

#[test]
fn route_scope_shares_paths_and_path_scope_separates_them() {
    let with_scope = |scope: &str, path: &'static str| {
        let config = config(&[("KEY_SCOPE", scope)]);
        let mut request = json_post(&[("idempotency-key", "k")], "{}");
        request.path = path;
        run(&config, &request).unwrap()
    };
    assert_eq!(
        with_scope("route", "/a").object_name,
        with_scope("route", "/b").object_name
    );
    assert_ne!(
        with_scope("path", "/a").object_name,
        with_scope("path", "/b").object_name
    );
    assert_eq!(
        with_scope("path", "/webhooks/stripe").object_name,
        with_scope("path", "//webhooks/%73tripe/").object_name,
        "one path however it is spelt"
    );
    assert_eq!(
        with_scope("path", "//a/").target.url,
        "http://origin:9/base//a/?x=1",
        "the origin gets the path as sent"
    );
}

#[test]
fn a_byte_identical_retry_has_the_same_fast_key_and_a_change_does_not() {
    let config = config(&[("TENANT_HEADER", "Authorization")]);
    let route = &config.routes[0];
    let key = |request: &Request| {
        let normalized = normalize(request.path);
        let inbound = Inbound {
            method: request.method,
            path: request.path,
            normalized_path: &normalized,
            query: request.query,
            headers: &request.headers,
            body: request.body,
            now: 0,
        };
        fast_replay_key(&authenticate(route, &inbound).unwrap().done().unwrap())
    };
    let base = json_post(
        &[
            ("idempotency-key", "k"),
            ("authorization", "a"),
            ("x-trace", "1"),
        ],
        "{}",
    );
    let same = json_post(
        &[
            ("idempotency-key", "k"),
            ("authorization", "a"),
            ("x-trace", "2"),
        ],
        "{}",
    );
    assert_eq!(
        key(&base),
        key(&same),
        "headers no source reads do not matter"
    );
    for changed in [
        json_post(&[("idempotency-key", "k2"), ("authorization", "a")], "{}"),
        json_post(&[("idempotency-key", "k"), ("authorization", "b")], "{}"),
        json_post(&[("idempotency-key", "k"), ("authorization", "a")], "{ }"),
        json_post(&[("authorization", "a"), ("webhook-id", "k")], "{}"),
    ] {
        assert_ne!(key(&base), key(&changed));
    }
    let mut other_path = json_post(&[("idempotency-key", "k"), ("authorization", "a")], "{}");
    other_path.path = "/other";
    assert_ne!(key(&base), key(&other_path));
}

/// A route configured by `vars` (with a large enough body limit).
fn routed(vars: &[(&str, &str)]) -> Config {
    let mut all = vec![("MAX_BODY_BYTES", "65536")];
    all.extend_from_slice(vars);
    config(&all)
}

/// `request` signed by `config`'s route's own scheme at time 0.
fn signed(config: &Config, mut request: Request<'static>) -> (Request<'static>, Vec<u8>) {
    let mut message = crate::signature::Message {
        headers: request.headers.clone(),
        body: request.body.to_vec(),
    };
    config.routes[0].signature_scheme.sign(&mut message, 0);
    request.headers = message.headers;
    let body = message.body;
    (request, body)
}

fn run_owned(config: &Config, request: &Request, body: &[u8]) -> Result<Seen, Problem> {
    let request = Request {
        method: request.method,
        path: request.path,
        query: request.query,
        headers: request.headers.clone(),
        body,
    };
    run(config, &request)
}

#[test]
fn a_signed_bodys_key_is_its_raw_hash_whatever_its_content_type_says() {
    let config = routed(&[("SIGNATURE_SCHEME", "github"), ("SIGNING_SECRET", "s")]);
    let body: &'static str = "{ \"action\": \"completed\", \"id\": 1 }";
    let (request, bytes) = signed(&config, json_post(&[], body));
    let as_json = run_owned(&config, &request, &bytes).unwrap();
    assert_eq!(as_json.key.as_str(), sha256_hex(body.as_bytes()));
    // A captured delivery re-sent without its (unsigned) Content-Type.
    let mut bare = Request {
        headers: request.headers.clone(),
        ..json_post(&[], body)
    };
    bare.headers.retain(|(name, _)| name != "content-type");
    let as_text = run_owned(&config, &bare, &bytes).unwrap();
    assert_eq!(
        as_text.object_name, as_json.object_name,
        "one key: replayed, not forwarded"
    );
    // The second version keyed it by its canonical JSON.
    let previous = as_json.previous.expect("the key changed");
    assert_eq!(
        previous.key.as_str(),
        sha256_hex(br#"{"action":"completed","id":1}"#)
    );
}

#[test]
fn an_adyen_notifications_key_ignores_unsigned_members() {
    let config = routed(&[
        ("SIGNATURE_SCHEME", "adyen"),
        ("SIGNING_SECRET", &"ab".repeat(32)),
    ]);
    let body = crate::signature::sample_notification("psp42");
    let body: &'static str = Box::leak(body.into_boxed_str());
    let (request, bytes) = signed(&config, json_post(&[], body));
    let genuine = run_owned(&config, &request, &bytes).unwrap();
    assert_eq!(genuine.key.as_str(), "psp42:AUTHORISATION:true");
    let text = String::from_utf8(bytes).unwrap();
    let padded = text.replacen("{\"live\"", "{\"extra\":1,\"live\"", 1);
    assert_ne!(padded, text);
    let changed = run_owned(&config, &request, padded.as_bytes()).unwrap();
    assert_eq!(changed.object_name, genuine.object_name, "the same key");
    assert_ne!(
        changed.fingerprint, genuine.fingerprint,
        "so it is 422, never forwarded"
    );
    assert!(
        genuine.previous.is_some(),
        "the second version hashed the body"
    );
}

#[test]
fn in_api_mode_credentials_scope_keys_and_none_is_anonymous() {
    let api = config(&[("DEDUP_MODE", "api")]);
    let as_caller = |authorization: Option<&str>| {
        let mut extra = vec![("idempotency-key", "order-1")];
        extra.extend(authorization.map(|value| ("authorization", value)));
        run(&api, &json_post(&extra, "{}")).unwrap()
    };
    let (alice, bob, anonymous) = (
        as_caller(Some("Bearer alice")),
        as_caller(Some("Bearer bob")),
        as_caller(None),
    );
    assert_ne!(alice.object_name, bob.object_name);
    assert_ne!(alice.object_name, anonymous.object_name);
    assert_eq!(anonymous.tenant_sha256, None, "no 400: anonymous");
    assert_eq!(
        alice
            .previous
            .as_ref()
            .map(|previous| previous.tenant_sha256.clone()),
        Some(None),
        "the second version had no tenant here"
    );
    assert_eq!(
        anonymous.previous, None,
        "anonymous: as the second version was"
    );
    let shared = config(&[("DEDUP_MODE", "api"), ("TENANT_HEADER", "none")]);
    let key = |authorization| {
        run(
            &shared,
            &json_post(
                &[("idempotency-key", "k"), ("authorization", authorization)],
                "{}",
            ),
        )
        .unwrap()
        .object_name
    };
    assert_eq!(
        key("Bearer a"),
        key("Bearer b"),
        "TENANT_HEADER=none shares on purpose"
    );
    let explicit = config(&[("DEDUP_MODE", "api"), ("TENANT_HEADER", "Authorization")]);
    assert_eq!(
        run(&explicit, &json_post(&[("idempotency-key", "k")], "{}"))
            .unwrap_err()
            .name(),
        "missing-tenant"
    );
}

#[test]
fn the_previous_identity_is_the_second_versions_and_absent_when_unchanged() {
    let composite = config(&[("KEY_SOURCES", "json:/a+json:/b")]);
    let admitted = run(&composite, &json_post(&[], r#"{"a":"x:y","b":"z"}"#)).unwrap();
    assert_eq!(admitted.key.as_str(), "x%3Ay:z");
    let previous = admitted.previous.unwrap();
    assert_eq!(previous.key.as_str(), "x:y:z");
    assert_eq!(
        previous.object_name,
        Scope::new("default", Some("/pay"), None).object_name(&previous.key)
    );
    let unchanged = run(&composite, &json_post(&[], r#"{"a":"x","b":"z"}"#)).unwrap();
    assert_eq!(unchanged.previous, None, "no ':' to encode: the same key");
    let plain = run(&config(&[]), &json_post(&[("idempotency-key", "k")], "{}")).unwrap();
    assert_eq!(plain.previous, None);
}

#[test]
fn a_signed_route_takes_keys_tenants_and_scopes_only_from_what_is_signed() {
    let vars = |extra: &[(&'static str, &'static str)]| {
        let mut all = vec![
            ("ORIGIN_URL", "http://o"),
            ("SIGNATURE_SCHEME", "github"),
            ("SIGNING_SECRET", "s"),
        ];
        all.extend_from_slice(extra);
        let map: HashMap<String, String> = all
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let config = Config::from_lookup(|name| map.get(name).cloned()).unwrap();
        match config.broken.first() {
            Some(broken) => Err(broken.problem.clone()),
            None => Ok(config),
        }
    };
    for (name, value) in [
        ("KEY_SOURCES", "header:X-GitHub-Delivery"),
        ("KEY_SOURCES", "json:/id,header:x-other"),
        ("TENANT_HEADER", "X-GitHub-Hook-ID"),
        ("KEY_SCOPE", "path"),
    ] {
        let problem = vars(&[(name, value)]).unwrap_err();
        assert_eq!(problem.name(), "misconfigured", "{name}={value}");
        assert!(problem.detail().starts_with(name), "{}", problem.detail());
        assert!(
            problem.detail().contains("forwarded again"),
            "{}",
            problem.detail()
        );
    }
    assert!(vars(&[("KEY_SOURCES", "json:/hook_id,body-sha256")]).is_ok());
    assert!(vars(&[("TENANT_HEADER", "none")]).is_ok());
    // The id Standard Webhooks signs is a key; scheme-key needs a scheme that makes one.
    let standard = config(&[
        ("SIGNATURE_SCHEME", "standard-webhooks"),
        ("SIGNING_SECRET", "whsec_c2VjcmV0"),
        ("KEY_SOURCES", "header:webhook-id"),
    ]);
    assert_eq!(standard.routes[0].key_sources.len(), 1);
    let map: HashMap<String, String> = [("ORIGIN_URL", "http://o"), ("KEY_SOURCES", "scheme-key")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let unsigned = Config::from_lookup(|name| map.get(name).cloned()).unwrap();
    assert_eq!(unsigned.broken[0].problem.name(), "misconfigured");
}

/// The order ticket an ordered async route gives `body` (SPEC §12).
fn ticket_of(body: &str) -> Option<crate::order::OrderTicket> {
    let config = config(&[
        ("DELIVERY", "async"),
        ("ORDER_KEY", "json:/data/object/id"),
        ("ORDER_TIME", "json:/created"),
        ("ON_STALE", "skip"),
        ("MAX_BODY_BYTES", "4096"),
    ]);
    let request = json_post(&[], body);
    let normalized = normalize(request.path);
    let route = config.route_for(&normalized).unwrap();
    let inbound = Inbound {
        method: request.method,
        path: request.path,
        normalized_path: &normalized,
        query: request.query,
        headers: &request.headers,
        body: request.body,
        now: 0,
    };
    let admitted = admit(&authenticate(route, &inbound).unwrap().done().unwrap()).unwrap();
    admitted.delivery.request.order
}

#[test]
fn an_ordered_route_tickets_each_delivery_with_its_entity_and_its_time() {
    let ticket =
        ticket_of(r#"{"id":"evt_1","created":1796395500,"data":{"object":{"id":"in_1"}}}"#)
            .unwrap();
    assert_eq!(ticket.time_ms, 1_796_395_500_000);
    assert!(ticket.skip_stale);
    assert_eq!(ticket.hold_ms, crate::config::DEFAULT_HOLD_MS);
    let other_event = ticket_of(
        r#"{"id":"evt_2","created":"2026-12-04T14:45:01Z","data":{"object":{"id":"in_1"}}}"#,
    )
    .unwrap();
    assert_eq!(
        other_event.object, ticket.object,
        "one entity, one order object"
    );
    assert_eq!(other_event.time_ms, 1_796_395_501_000);
    let other_entity =
        ticket_of(r#"{"id":"evt_3","created":1,"data":{"object":{"id":"in_2"}}}"#).unwrap();
    assert_ne!(other_entity.object, ticket.object);
}

#[test]
fn a_delivery_without_an_entity_or_a_readable_time_goes_unordered() {
    for body in [
        r#"{"id":"evt_1","created":1796395500}"#,
        r#"{"id":"evt_1","data":{"object":{"id":"in_1"}}}"#,
        r#"{"id":"evt_1","created":"yesterday","data":{"object":{"id":"in_1"}}}"#,
        r#"{"id":"evt_1","created":1796395500,"data":{"object":{"id":{"nested":1}}}}"#,
    ] {
        assert_eq!(ticket_of(body), None, "{body}");
    }
}

/// The review's item 1 (round 5): a Paddle replay is a new notification,
/// its `notification_id` new in the body. On a route reconciled from
/// Paddle a replay of an event already received is compared by event id
/// (a replay of the receipt), not as another payload (422).
#[test]
fn a_paddle_replay_of_an_event_is_the_same_delivery_on_a_reconciled_route() {
    let notification = |ntf: &str| -> &'static str {
        Box::leak(
            format!(
                r#"{{"event_id":"evt_01","event_type":"transaction.paid","occurred_at":"2026-12-05T10:00:00Z","notification_id":"{ntf}","data":{{"id":"txn_1"}}}}"#
            )
            .into_boxed_str(),
        )
    };
    let seen = |reconciled: bool, ntf: &str| {
        let reconcile = match reconciled {
            true => {
                r#","reconcile":{"source":"paddle","api_key":"PADDLE_KEY","types":["*"],"endpoint":"ntfset_1"}"#
            }
            false => "",
        };
        let routes = format!(
            r#"{{"paddle":{{"path":"/pay","signature":"paddle","signing_secret":"PADDLE_SECRET"{reconcile}}}}}"#
        );
        let config = routed(&[
            ("ROUTES", &routes),
            ("PADDLE_SECRET", "pdl_ntfset_01_secret"),
            ("PADDLE_KEY", "pdl_live_apikey_01"),
        ]);
        let (request, bytes) = signed(&config, json_post(&[], notification(ntf)));
        run_owned(&config, &request, &bytes).unwrap()
    };
    let (first, replay) = (seen(true, "ntf_1"), seen(true, "ntf_2"));
    assert_eq!(first.key.as_str(), "evt_01");
    assert_eq!(first.object_name, replay.object_name);
    assert_eq!(first.fingerprint, replay.fingerprint, "one event");
    assert_eq!(first.fingerprint, Fingerprint::of_event("evt_01"));
    // Not reconciled, another payload under the key is still another.
    assert_ne!(
        seen(false, "ntf_1").fingerprint,
        seen(false, "ntf_2").fingerprint
    );
}

/// A Stripe thin event (SPEC v5 §4): `created` in RFC 3339 with
/// milliseconds, the object it is about in `related_object`.
const STRIPE_THIN_EVENT: &str = r#"{"id":"evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2","object":"v2.core.event","type":"v1.billing.meter.error_report_triggered","livemode":false,"created":"2026-12-05T10:00:00.000Z","related_object":{"id":"mtr_test_61R9IiYPH1rWXkX9H41R9IiWfDQSQ0IK","type":"billing.meter","url":"/v1/billing/meters/mtr_test_61R9IiYPH1rWXkX9H41R9IiWfDQSQ0IK"},"context":null}"#;

/// An async Stripe route ordered by `order_key` and the event's `created`.
fn ordered_stripe_route(order_key: &str) -> Config {
    routed(&[
        ("SIGNATURE_SCHEME", "stripe"),
        ("SIGNING_SECRET", "whsec_thin"),
        ("DELIVERY", "async"),
        ("ORDER_KEY", order_key),
        ("ORDER_TIME", "json:/created"),
    ])
}

/// `body` signed as Stripe signs it, admitted by `config`'s route.
fn admitted_stripe(config: &Config, body: &'static str) -> Admitted {
    let (request, bytes) = signed(config, json_post(&[], body));
    let normalized = normalize(request.path);
    let route = config.route_for(&normalized).unwrap();
    let inbound = Inbound {
        method: request.method,
        path: request.path,
        normalized_path: &normalized,
        query: request.query,
        headers: &request.headers,
        body: &bytes,
        now: 0,
    };
    admit(&authenticate(route, &inbound).unwrap().done().unwrap()).unwrap()
}

#[test]
fn a_stripe_thin_event_is_keyed_by_its_id_and_ordered_by_its_rfc_3339_created() {
    let config = ordered_stripe_route("json:/related_object/id");
    let admitted = admitted_stripe(&config, STRIPE_THIN_EVENT);
    assert_eq!(
        admitted.delivery.identity.key.as_str(),
        "evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2",
        "the default key of signature = \"stripe\", json:/id"
    );
    let ticket = admitted
        .delivery
        .request
        .order
        .expect("an ordered delivery");
    // 2026-12-05T10:00:00.000Z
    assert_eq!(ticket.time_ms, 1_796_464_800_000);
    // A later thin event about the same meter: one entity, one order object.
    let later: &'static str = Box::leak(
        STRIPE_THIN_EVENT
            .replace("evt_test_65R9Ijk8d", "evt_test_65R9Zzz9d")
            .replace(":00.000Z", ":01.250Z")
            .into_boxed_str(),
    );
    let later = admitted_stripe(&config, later)
        .delivery
        .request
        .order
        .unwrap();
    assert_eq!(later.object, ticket.object);
    assert_eq!(later.time_ms, 1_796_464_801_250, "milliseconds count");
}

#[test]
fn one_stripe_route_orders_thin_and_snapshot_events_by_their_own_created() {
    // `created` is Unix seconds in a snapshot event, RFC 3339 in a thin
    // one: the same `order_time` reads both as one clock.
    let snapshot: &'static str = r#"{"id":"evt_1","object":"event","created":1796464801,"type":"invoice.paid","data":{"object":{"id":"in_1"}}}"#;
    let config = ordered_stripe_route("json:/data/object/id");
    let ticket = admitted_stripe(&config, snapshot)
        .delivery
        .request
        .order
        .unwrap();
    assert_eq!(ticket.time_ms, 1_796_464_801_000);
    // A thin event has no data.object: it goes unordered on that route,
    // never refused.
    let thin = admitted_stripe(&config, STRIPE_THIN_EVENT);
    assert_eq!(thin.delivery.request.order, None);
    assert_eq!(
        thin.delivery.identity.key.as_str(),
        "evt_test_65R9Ijk8dLk1mVvs316R9IiXnQSQKMpTNQOWJbUnYxr3Z2"
    );
}
