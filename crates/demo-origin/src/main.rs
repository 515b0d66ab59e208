//! A small payments API to run behind idemgate with `scripts/dev`.
//!
//! `POST /payments` "charges" and answers 201 with a new payment id, so a
//! duplicate that got through would be visible as a second id. It prints one
//! line per request with the idempotency headers idemgate added.
//! `?delay_ms=N` makes it slow, to watch duplicates wait; `GET /payments`
//! lists what was charged.
//!
//! Usage: `demo-origin [PORT]` (default 9090), listening on 127.0.0.1.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<Value>>>);

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("-")
}

async fn charge(
    State(ledger): State<Ledger>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, Json<Value>) {
    if let Some(delay) = query.get("delay_ms").and_then(|ms| ms.parse().ok()) {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut ledger = ledger.0.lock().unwrap();
    let payment = json!({
        "payment_id": format!("pay_{}", ledger.len() + 1),
        "amount": request.get("amount"),
        "currency": request.get("currency"),
        "idempotency_key": header(&headers, "idempotency-key"),
        "epoch": header(&headers, "idempotency-epoch"),
    });
    println!(
        "demo-origin: charged {} key={} epoch={} signed={}",
        payment["payment_id"],
        header(&headers, "idempotency-key"),
        header(&headers, "idempotency-epoch"),
        headers.contains_key("idempotency-signature"),
    );
    ledger.push(payment.clone());
    (StatusCode::CREATED, Json(payment))
}

async fn list(State(ledger): State<Ledger>) -> Json<Value> {
    Json(Value::Array(ledger.0.lock().unwrap().clone()))
}

#[tokio::main]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .map(|port| port.parse().expect("PORT is a number"))
        .unwrap_or(9090);
    let app = Router::new()
        .route("/payments", get(list).post(charge))
        .with_state(Ledger::default());
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|error| panic!("cannot listen on 127.0.0.1:{port}: {error}"));
    println!("demo-origin: listening on http://127.0.0.1:{port}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .unwrap();
}
