//! A real HTTP origin for the tests: it records every request it receives
//! and answers according to its path:
//! - `/slow/<ms>/...` waits that long first;
//! - `/status/<code>/...` answers with that status;
//! - anything else answers 201 with a body and headers unique to the request.

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
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Received>>>);

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
}

async fn answer(State(log): State<Log>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let path = parts.uri.path().to_string();
    let sequence = {
        let mut log = log.0.lock().unwrap();
        log.push(Received {
            method: parts.method.to_string(),
            path: path.clone(),
            query: parts.uri.query().map(str::to_string),
            headers: parts.headers.clone(),
            body: body.clone(),
        });
        log.len()
    };
    let segments: Vec<&str> = path.split('/').collect();
    let mut status = StatusCode::CREATED;
    for window in segments.windows(2) {
        match window {
            ["slow", ms] => {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            }
            ["status", code] => status = StatusCode::from_u16(code.parse().unwrap()).unwrap(),
            _ => {}
        }
    }
    let payment = serde_json::json!({
        "payment_id": format!("pay_{sequence}"),
        "path": path,
        "bytes_received": body.len(),
    });
    (
        status,
        [
            ("content-type", "application/json".to_string()),
            ("x-origin-sequence", sequence.to_string()),
        ],
        payment.to_string(),
    )
        .into_response()
}
