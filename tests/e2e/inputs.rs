//! Bad input gets its problem+json, and nothing is forwarded or stored.

use crate::support::{client, post_json, Reply};
use crate::{Profile, World};

/// After a rejected delivery, a valid one with the same key is a first
/// delivery (forwarded, not a replay, not a 422): nothing was stored.
async fn assert_nothing_stored(world: &'static World, path: &str, key: &str) {
    let gateway = world.gateway(Profile::Wait).await;
    let before = world.origin.count(path);
    let valid = post_json(&client(), &gateway.url(path), Some(key), r#"{"ok":true}"#).await;
    assert_eq!(valid.status, 201);
    assert!(!valid.replayed());
    assert_eq!(world.origin.count(path), before + 1);
}

pub async fn invalid_json_is_400_and_stores_nothing(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let reply = post_json(
        &client(),
        &gateway.url("/bad-json/p"),
        Some("bj-1"),
        "{\"amount\": 10,",
    )
    .await;
    reply.assert_problem(400, "invalid-json");
    assert!(reply.json()["detail"].as_str().unwrap().contains("line 1"));
    assert_eq!(world.origin.count("/bad-json/"), 0);
    assert_nothing_stored(world, "/bad-json/p", "bj-1").await;
}

pub async fn oversized_body_is_413(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let body = format!(r#"{{"pad":"{}"}}"#, "x".repeat(70_000));
    let reply = post_json(&client(), &gateway.url("/too-big/p"), Some("big-1"), &body).await;
    reply.assert_problem(413, "payload-too-large");
    assert_eq!(world.origin.count("/too-big/"), 0);
    assert_nothing_stored(world, "/too-big/p", "big-1").await;
}

pub async fn missing_key_is_400(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let reply = post_json(
        &client(),
        &gateway.url("/no-key/p"),
        None,
        r#"{"amount":1}"#,
    )
    .await;
    reply.assert_problem(400, "missing-key");
    assert_eq!(world.origin.count("/no-key/"), 0);
}

pub async fn invalid_keys_are_400(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/bad-key/p");
    let long = "k".repeat(256);
    let cases: Vec<(&str, reqwest::header::HeaderValue)> = vec![
        ("empty", "".parse().unwrap()),
        ("blank", "   ".parse().unwrap()),
        ("over 255 characters", long.parse().unwrap()),
        ("inner space", "two words".parse().unwrap()),
        (
            "non-ASCII",
            reqwest::header::HeaderValue::from_bytes("café".as_bytes()).unwrap(),
        ),
    ];
    for (what, value) in cases {
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .header("idempotency-key", value)
            .body(r#"{"amount":1}"#)
            .send()
            .await
            .unwrap();
        let reply = Reply::read(response).await;
        assert_eq!(reply.status, 400, "{what}");
        reply.assert_problem(400, "invalid-key");
    }
    let object_key = post_json(&client, &url, None, r#"{"id":{"nested":1}}"#).await;
    object_key.assert_problem(400, "invalid-key");
    assert_eq!(world.origin.count("/bad-key/"), 0);
}

pub async fn json_key_source_on_a_non_json_body_is_415(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let response = client()
        .post(gateway.url("/form/p"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("id=evt_1")
        .send()
        .await
        .unwrap();
    Reply::read(response)
        .await
        .assert_problem(415, "unsupported-media-type");
    assert_eq!(world.origin.count("/form/"), 0);
}

pub async fn missing_origin_url_is_500_misconfigured(world: &'static World) {
    let gateway = world.gateway(Profile::Unconfigured).await;
    let client = client();
    let post = post_json(&client, &gateway.url("/p"), Some("k"), "{}").await;
    post.assert_problem(500, "misconfigured");
    assert!(post.json()["detail"]
        .as_str()
        .unwrap()
        .contains("ORIGIN_URL"));
    let get = Reply::read(client.get(gateway.url("/p")).send().await.unwrap()).await;
    get.assert_problem(500, "misconfigured");
}

pub async fn hostile_bodies_and_keys_are_rejected(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let client = client();
    let url = gateway.url("/hostile/p");
    let send_bytes = |body: Vec<u8>| {
        let request = client
            .post(&url)
            .header("content-type", "application/json")
            .header("idempotency-key", "hostile-1")
            .body(body);
        async move { Reply::read(request.send().await.unwrap()).await }
    };
    send_bytes(vec![b'"', 0xff, 0xfe, b'"'])
        .await
        .assert_problem(400, "invalid-json");
    let deep = "[".repeat(10_000) + &"]".repeat(10_000);
    let reply = send_bytes(deep.into_bytes()).await;
    reply.assert_problem(400, "invalid-json");
    assert!(reply.json()["detail"]
        .as_str()
        .unwrap()
        .contains("recursion"));
    for body in [
        r#"{"id":"a\u0001b"}"#,
        r#"{"id":"tab\tkey"}"#,
        r#"{"id":""}"#,
    ] {
        let reply = post_json(&client, &url, None, body).await;
        reply.assert_problem(400, "invalid-key");
    }
    assert_eq!(world.origin.count("/hostile/"), 0);
    assert_nothing_stored(world, "/hostile/p", "hostile-1").await;
}

pub async fn duplicate_idempotency_key_headers_are_400(world: &'static World) {
    let gateway = world.gateway(Profile::Wait).await;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.append("idempotency-key", "first".parse().unwrap());
    headers.append("idempotency-key", "second".parse().unwrap());
    let response = client()
        .post(gateway.url("/dup-header/p"))
        .header("content-type", "application/json")
        .headers(headers)
        .body("{}")
        .send()
        .await
        .unwrap();
    Reply::read(response)
        .await
        .assert_problem(400, "invalid-key");
    assert_eq!(world.origin.count("/dup-header/"), 0);
}

/// A chunked upload declares no length; the gateway stops reading at the
/// limit. Written by hand so that no client sets `Content-Length`.
pub async fn chunked_body_over_the_limit_is_413_without_content_length(world: &'static World) {
    let response = send_chunked(world, "chunked-1", "").await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("urn:idemgate:problem:payload-too-large"));
    assert_eq!(world.origin.count("/chunked/"), 0);
}

/// A small `Content-Length` beside `Transfer-Encoding: chunked` must not
/// let an oversized body through, whichever framing the runtime honours
/// (workerd reads the declared 10 bytes: 400, not JSON; the chunks: 413).
pub async fn conflicting_length_and_chunked_framing_forward_nothing(world: &'static World) {
    let response = send_chunked(world, "chunked-2", "content-length: 10\r\n").await;
    let status: Option<u16> = response.get(9..12).and_then(|code| code.parse().ok());
    let problem = match status {
        Some(400) => "urn:idemgate:problem:invalid-json",
        Some(413) => "urn:idemgate:problem:payload-too-large",
        _ => panic!("not a 400 or 413 answer: {response:?}"),
    };
    assert!(
        response
            .to_ascii_lowercase()
            .contains("content-type: application/problem+json"),
        "{response}"
    );
    assert!(response.contains(problem), "{response}");
    assert_eq!(world.origin.count("/chunked/"), 0);
    assert_nothing_stored(world, "/chunked/p", "chunked-2").await;
}

/// Sends 128 KiB in chunks (over the 64 KiB limit) with `extra_headers`,
/// and reads the raw response.
async fn send_chunked(world: &'static World, key: &str, extra_headers: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gateway = world.gateway(Profile::Wait).await;
    let address = gateway.base.trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /chunked/p HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         idempotency-key: {key}\r\n{extra_headers}transfer-encoding: chunked\r\n\
         connection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let chunk = "x".repeat(16 * 1024);
    for _ in 0..8 {
        let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
        if stream.write_all(framed.as_bytes()).await.is_err() {
            break; // the gateway answered and closed early
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    String::from_utf8_lossy(&response).into_owned()
}
