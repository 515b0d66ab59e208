//! A small payments API to run behind idemgate (`scripts/dev` starts it).
//!
//! `POST /payments` charges once per idempotency key into a SQLite ledger
//! ([`ledger`]): a second request with the same key gets the first result,
//! and a forward whose epoch is lower than one already accepted for its key
//! is refused with 409. With `FORWARD_SECRET` set it accepts only requests
//! whose idemgate headers verify (the `idemgate-origin` crate); without it,
//! it trusts the headers, as an origin behind no gateway must not.
//!
//! `?delay_ms=N` makes a charge slow, to watch duplicates wait; with
//! `&slow_epoch=E` only the forward at epoch E is slow. `GET /payments`
//! lists the ledger.
//!
//! Usage: `demo-origin [--port PORT] [--db PATH]` (defaults: 9090,
//! `demo-origin.sqlite`); listens on 127.0.0.1.

mod ledger;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use idemgate_origin::{ForwardedHeaders, Verifier};
use serde_json::{json, Value};

use ledger::{Charge, Ledger};

#[derive(Clone)]
struct App {
    ledger: Arc<Mutex<Ledger>>,
    verifier: Option<Verifier>,
}

type Reply = (StatusCode, Json<Value>);

fn error(status: StatusCode, error: &str, detail: String) -> Reply {
    (status, Json(json!({ "error": error, "detail": detail })))
}

/// The key and epoch idemgate forwarded: verified with a secret, read as
/// they are without one.
fn forwarded(app: &App, headers: &HeaderMap, body: &[u8]) -> Result<(String, u64), Reply> {
    let forwarded = ForwardedHeaders::from_lookup(|name| {
        headers.get(name).and_then(|value| value.to_str().ok())
    });
    if let Some(verifier) = &app.verifier {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0);
        return verifier
            .verify(&forwarded, body, now)
            .map(|verified| (verified.key, verified.epoch))
            .map_err(|reason| error(StatusCode::UNAUTHORIZED, "unverified", reason.to_string()));
    }
    let key = forwarded.key.map(|key| key.trim_matches('"').to_string());
    let epoch = forwarded.epoch.and_then(|epoch| epoch.parse().ok());
    match (key, epoch) {
        (Some(key), Some(epoch)) if !key.is_empty() => Ok((key, epoch)),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "no-idempotency",
            "send payments through idemgate".into(),
        )),
    }
}

async fn charge(
    State(app): State<App>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let (key, epoch) = match forwarded(&app, &headers, &body) {
        Ok(forwarded) => forwarded,
        Err(reply) => {
            println!(
                "demo-origin: refused unverified request: {}",
                reply.1 .0["detail"]
            );
            return reply;
        }
    };
    let slow_epoch = query.get("slow_epoch").and_then(|e| e.parse::<u64>().ok());
    if let Some(delay) = query.get("delay_ms").and_then(|ms| ms.parse().ok()) {
        if slow_epoch.is_none_or(|slow| slow == epoch) {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let outcome = app.ledger.lock().unwrap().charge(&key, epoch, &request);
    match outcome {
        Ok(Charge::Created(payment)) => {
            println!(
                "demo-origin: charged {} key={key} epoch={epoch}",
                payment["payment_id"]
            );
            (StatusCode::CREATED, Json(payment))
        }
        Ok(Charge::Repeated(payment)) => {
            println!("demo-origin: repeat of key={key} epoch={epoch}: first result, no charge");
            (StatusCode::CREATED, Json(payment))
        }
        Ok(Charge::StaleEpoch { highest }) => {
            println!("demo-origin: refused stale epoch {epoch} of key={key} (highest {highest})");
            error(
                StatusCode::CONFLICT,
                "stale-epoch",
                format!("epoch {epoch} is lower than the accepted {highest}"),
            )
        }
        Err(failure) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger",
            failure.to_string(),
        ),
    }
}

async fn list(State(app): State<App>) -> Reply {
    match app.ledger.lock().unwrap().payments() {
        Ok(payments) => (StatusCode::OK, Json(Value::Array(payments))),
        Err(failure) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger",
            failure.to_string(),
        ),
    }
}

fn argument(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|arg| arg == name)
        .and_then(|at| args.get(at + 1).cloned())
}

#[tokio::main]
async fn main() {
    let port: u16 = argument("--port")
        .map(|port| port.parse().expect("--port takes a number"))
        .unwrap_or(9090);
    let db = PathBuf::from(argument("--db").unwrap_or_else(|| "demo-origin.sqlite".into()));
    let ledger = Ledger::open(&db)
        .unwrap_or_else(|failure| panic!("cannot open {}: {failure}", db.display()));
    let verifier = std::env::var("FORWARD_SECRET")
        .ok()
        .filter(|secret| !secret.is_empty())
        .map(Verifier::new);
    let app = App {
        ledger: Arc::new(Mutex::new(ledger)),
        verifier,
    };
    let verifying = app.verifier.is_some();
    let router = Router::new()
        .route("/payments", get(list).post(charge))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|failure| panic!("cannot listen on 127.0.0.1:{port}: {failure}"));
    println!(
        "demo-origin: listening on http://127.0.0.1:{port}, ledger {}, {}",
        db.display(),
        if verifying {
            "verifying Idempotency-Signature"
        } else {
            "FORWARD_SECRET unset: headers not verified"
        }
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .unwrap();
}
