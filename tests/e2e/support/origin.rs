//! A real HTTP origin for the tests: it records every request it receives
//! and answers according to its path:
//! - `/slow/<ms>/...` waits that long first;
//! - `/slow-first/<ms>/...` waits that long on the first request to the path only;
//! - `/status/<code>/...` answers with that status;
//! - `/fail-first/<n>/<code>/...` answers `<code>` to the first n requests to the path;
//! - `/big/<bytes>/...` answers a text body of that many bytes;
//! - `/cookie/...` adds a `Set-Cookie` unique to the request;
//! - `/v1/notifications/certs/...` (PayPal's path) answers the test
//!   certificate (PayPal's signing key's), and
//!   `/v1/notifications/certs/fail-first-<n>-...` answers 503 to the first
//!   n requests;
//! - `/cdn-cgi/access/certs` answers the fake Access team's keys
//!   ([`super::access`]);
//! - a path under a prefix passed to [`TestOrigin::fail`] answers 503;
//! - otherwise 201 with a JSON body and headers unique to the request, which
//!   name the epoch the request carried.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When the origin received it.
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The request line's target, as idemgate signs it.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        }
    }

    /// Verifies idemgate's headers with the origin-side crate, now.
    pub fn verify(
        &self,
        secret: &str,
    ) -> Result<idemgate_origin::Forwarded, idemgate_origin::VerifyError> {
        let headers = idemgate_origin::ForwardedHeaders::from_lookup(|name| self.header(name));
        let path_and_query = self.path_and_query();
        let request = idemgate_origin::ForwardedRequest {
            method: &self.method,
            path_and_query: &path_and_query,
            body: &self.body,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        idemgate_origin::Verifier::new(secret).verify(&headers, &request, now)
    }
}

#[derive(Clone, Default)]
struct Log(
    Arc<Mutex<Vec<Received>>>,
    Arc<Mutex<Vec<String>>>,
    /// Requests being answered now and the most at once, by the first two
    /// segments of their path (`/flow/async`).
    Arc<Mutex<HashMap<String, (usize, usize)>>>,
);

pub struct TestOrigin {
    pub addr: SocketAddr,
    log: Log,
}

impl TestOrigin {
    pub async fn start() -> TestOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Log::default();
        let app = axum::Router::new().fallback(answer).with_state(log.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        TestOrigin { addr, log }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request whose path starts with `prefix`, in arrival order.
    pub fn received(&self, prefix: &str) -> Vec<Received> {
        self.log
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|request| request.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub fn count(&self, prefix: &str) -> usize {
        self.received(prefix).len()
    }

    /// The most requests under `section` (the first two segments of a
    /// path, `/flow/async`) the origin was answering at once.
    pub fn max_concurrency(&self, section: &str) -> usize {
        self.log
            .2
            .lock()
            .unwrap()
            .get(section)
            .map_or(0, |(_, max)| *max)
    }

    /// Makes every request under `prefix` answer 503 (or stop doing so).
    pub fn fail(&self, prefix: &str, failing: bool) {
        let mut prefixes = self.log.1.lock().unwrap();
        prefixes.retain(|known| known != prefix);
        if failing {
            prefixes.push(prefix.to_string());
        }
    }

    /// The `Idempotency-Epoch` of every request under `prefix`, in order;
    /// asserts that they rise strictly (SPEC §2).
    pub fn rising_epochs(&self, prefix: &str) -> Vec<u64> {
        let epochs: Vec<u64> = self
            .epochs(prefix)
            .iter()
            .map(|epoch| epoch.parse().unwrap_or_else(|_| panic!("epoch {epoch:?}")))
            .collect();
        assert!(
            epochs.windows(2).all(|pair| pair[0] < pair[1]),
            "epochs under {prefix} do not rise: {epochs:?}"
        );
        epochs
    }

    /// The `Idempotency-Epoch` of every request under `prefix`, in order.
    pub fn epochs(&self, prefix: &str) -> Vec<String> {
        self.received(prefix)
            .iter()
            .map(|request| {
                request
                    .header("idempotency-epoch")
                    .unwrap_or("-")
                    .to_string()
            })
            .collect()
    }
}

async fn answer(State(log): State<Log>, request: Request) -> Response {
    let section: String = request
        .uri()
        .path()
        .split('/')
        .take(3)
        .collect::<Vec<_>>()
        .join("/");
    {
        let mut sections = log.2.lock().unwrap();
        let (now, max) = sections.entry(section.clone()).or_default();
        *now += 1;
        *max = (*max).max(*now);
    }
    let response = respond(&log, request).await;
    if let Some((now, _)) = log.2.lock().unwrap().get_mut(&section) {
        *now -= 1;
    }
    response
}

async fn respond(log: &Log, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path().to_string();
    let (sequence, earlier_to_path) = {
        let mut log = log.0.lock().unwrap();
        let earlier_to_path = log.iter().filter(|earlier| earlier.path == path).count();
        log.push(Received {
            method: parts.method.to_string(),
            path: path.clone(),
            query: parts.uri.query().map(str::to_string),
            headers: parts.headers.clone(),
            body: body.clone(),
            at: std::time::Instant::now(),
        });
        (log.len(), earlier_to_path)
    };
    if path == "/cdn-cgi/access/certs" {
        let certs = super::access::certs();
        return (
            StatusCode::OK,
            [("content-type", "application/json")],
            certs,
        )
            .into_response();
    }
    if let Some(certificate) = path.strip_prefix("/v1/notifications/certs/") {
        if let Some(rest) = certificate.strip_prefix("fail-first-") {
            let n = rest.split('-').next().unwrap();
            if (earlier_to_path as u64) < n.parse::<u64>().unwrap() {
                return StatusCode::SERVICE_UNAVAILABLE.into_response();
            }
        }
        let pem = include_str!("../../../crates/idemgate-core/tests/fixtures/test-certificate.pem");
        return (StatusCode::OK, pem).into_response();
    }
    let segments: Vec<&str> = path.split('/').collect();
    let mut status = StatusCode::CREATED;
    if log
        .1
        .lock()
        .unwrap()
        .iter()
        .any(|prefix| path.starts_with(prefix))
    {
        status = StatusCode::SERVICE_UNAVAILABLE;
    }
    let number = |text: &str| -> u64 { text.parse().unwrap() };
    for window in segments.windows(3) {
        match *window {
            ["slow", ms, _] => tokio::time::sleep(Duration::from_millis(number(ms))).await,
            ["slow-first", ms, _] if earlier_to_path == 0 => {
                tokio::time::sleep(Duration::from_millis(number(ms))).await
            }
            ["status", code, _] => status = StatusCode::from_u16(number(code) as u16).unwrap(),
            ["fail-first", n, code] if (earlier_to_path as u64) < number(n) => {
                status = StatusCode::from_u16(number(code) as u16).unwrap()
            }
            ["big", bytes, _] => {
                return (status, "x".repeat(number(bytes) as usize)).into_response();
            }
            _ => {}
        }
    }
    let epoch = parts
        .headers
        .get("idempotency-epoch")
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-");
    let payment = serde_json::json!({
        "payment_id": format!("pay_{sequence}"),
        "path": path,
        "epoch": epoch,
        "bytes_received": body.len(),
    });
    let mut response = (
        status,
        [
            ("content-type", "application/json".to_string()),
            ("x-origin-sequence", sequence.to_string()),
        ],
        payment.to_string(),
    )
        .into_response();
    if segments.contains(&"cookie") {
        response.headers_mut().append(
            "set-cookie",
            format!("session=s{sequence}; HttpOnly").parse().unwrap(),
        );
    }
    response
}
