//! A small payments API to run behind idemgate (`scripts/dev` starts it).
//!
//! `POST /payments` charges once per scope and idempotency key into a
//! SQLite ledger ([`ledger`]): a second request with the same key gets the
//! first result, a forward whose epoch is lower than one already accepted
//! for its key is refused with 409, and one whose body differs from the
//! key's first is refused with 422. With `FORWARD_SECRET` set it accepts
//! only requests whose idemgate headers verify (the `idemgate-origin`
//! crate); without it, it trusts the headers, as an origin behind no
//! gateway must not.
//!
//! `?delay_ms=N` makes a charge slow, to watch duplicates wait; with
//! `&slow=first` only the first forward of each key is slow (a forward that
//! hangs while its lease is taken over). `GET /payments` lists the ledger.
//!
//! Usage: `demo-origin [--port PORT] [--db PATH]` (defaults: 9090,
//! `demo-origin.sqlite`); listens on 127.0.0.1.

mod ledger;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{OriginalUri, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use idemgate_origin::{ForwardedHeaders, ForwardedRequest, Verifier};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use ledger::{Charge, Forward, Ledger};

#[derive(Clone)]
struct App {
    ledger: Arc<Mutex<Ledger>>,
    verifier: Option<Verifier>,
    /// Keys seen, for `?slow=first`.
    seen: Arc<Mutex<std::collections::HashSet<String>>>,
}

type Reply = (StatusCode, Json<Value>);

fn error(status: StatusCode, error: &str, detail: String) -> Reply {
    (status, Json(json!({ "error": error, "detail": detail })))
}

/// The scope, key and epoch idemgate forwarded: verified with a secret,
/// read as they are without one. Every occurrence of each header is read
/// (`HeaderMap::get` would keep the first): one sent twice is refused
/// either way, since the ledger and the verifier could read different ones.
fn forwarded(app: &App, headers: &HeaderMap, request: &ForwardedRequest) -> Result<Forward, Reply> {
    let forwarded = ForwardedHeaders::from_pairs(headers).map_err(|reason| match app.verifier {
        Some(_) => error(StatusCode::UNAUTHORIZED, "unverified", reason.to_string()),
        None => error(
            StatusCode::BAD_REQUEST,
            "no-idempotency",
            reason.to_string(),
        ),
    })?;
    if let Some(verifier) = &app.verifier {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or(0);
        return verifier
            .verify(&forwarded, request, now)
            .map(|verified| Forward {
                scope: verified.scope,
                key: verified.key,
                epoch: verified.epoch,
                body_sha256: verified.body_sha256,
            })
            .map_err(|reason| error(StatusCode::UNAUTHORIZED, "unverified", reason.to_string()));
    }
    let key = forwarded.key.map(|key| key.trim_matches('"').to_string());
    let epoch = forwarded.epoch.and_then(|epoch| epoch.parse().ok());
    match (key, forwarded.scope, epoch) {
        (Some(key), Some(scope), Some(epoch)) if !key.is_empty() => Ok(Forward {
            scope: scope.to_string(),
            key,
            epoch,
            body_sha256: hex::encode(Sha256::digest(request.body)),
        }),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "no-idempotency",
            "send payments through idemgate".into(),
        )),
    }
}

async fn charge(
    State(app): State<App>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Reply {
    let path_and_query = uri.path_and_query().map_or("/", |line| line.as_str());
    let request = ForwardedRequest {
        method: method.as_str(),
        path_and_query,
        body: &body,
    };
    let forward = match forwarded(&app, &headers, &request) {
        Ok(forwarded) => forwarded,
        Err(reply) => {
            println!(
                "demo-origin: refused unverified request: {}",
                reply.1 .0["detail"]
            );
            return reply;
        }
    };
    // `slow=first`: only the first forward of a key is slow (a hung forward).
    let first_of_key = app.seen.lock().unwrap().insert(forward.key.clone());
    let delay = query
        .get("delay_ms")
        .and_then(|ms| ms.parse().ok())
        .filter(|_| query.get("slow").is_none_or(|which| which != "first") || first_of_key);
    // Like most payment backends, the charge runs to its end even when the
    // caller hangs up (idemgate gave up on a forward that timed out): it
    // runs apart from the connection.
    let charging = tokio::spawn(async move {
        if let Some(delay) = delay {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let outcome = app.ledger.lock().unwrap().charge(&forward, &request);
        answer(&forward, outcome)
    });
    charging.await.unwrap_or_else(|failure| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "ledger",
            failure.to_string(),
        )
    })
}

fn answer(forward: &Forward, outcome: rusqlite::Result<Charge>) -> Reply {
    let (key, epoch) = (&forward.key, forward.epoch);
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
        Ok(Charge::BodyMismatch) => {
            println!("demo-origin: refused key={key}: its first request had another body");
            error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "body-mismatch",
                "this idempotency key was first used with another body".into(),
            )
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
        seen: Arc::default(),
    };
    let verifying = app.verifier.is_some();
    let router = Router::new()
        .route("/payments", get(list).post(charge))
        .with_state(app);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|failure| panic!("cannot listen on 127.0.0.1:{port}: {failure}"));
    // With --port 0 the kernel picks the port; the line says which.
    let port = listener.local_addr().map_or(port, |address| address.port());
    println!(
        "demo-origin: listening on http://127.0.0.1:{port}, ledger {}, {}",
        db.display(),
        if verifying {
            "verifying Idempotency-Signature-V2"
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    const SCOPE: &str = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd";

    fn app(secret: Option<&str>) -> App {
        App {
            ledger: Arc::new(Mutex::new(Ledger::in_memory().unwrap())),
            verifier: secret.map(Verifier::new),
            seen: Arc::default(),
        }
    }

    fn request(body: &[u8]) -> ForwardedRequest<'_> {
        ForwardedRequest {
            method: "POST",
            path_and_query: "/payments",
            body,
        }
    }

    /// A forward of `body` under `key`, signed now when `secret` is given.
    fn headers(key: &str, body: &[u8], secret: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let epoch = 1_700_000_000_000_000;
        headers.insert("idempotency-key", format!("\"{key}\"").parse().unwrap());
        headers.insert("idempotency-scope", HeaderValue::from_static(SCOPE));
        headers.insert("idempotency-epoch", epoch.to_string().parse().unwrap());
        if let Some(secret) = secret {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs();
            let fields = idemgate_origin::SignedFields {
                scope: SCOPE,
                key,
                epoch,
                source: None,
                stale: false,
            };
            for (name, value) in idemgate_origin::sign(secret, &request(body), &fields, now) {
                headers.insert(name, value.parse().unwrap());
            }
        }
        headers
    }

    #[test]
    fn a_verified_forward_is_read() {
        let body = br#"{"amount":1000}"#;
        let forward = forwarded(
            &app(Some("whsec_test")),
            &headers("order-1", body, Some("whsec_test")),
            &request(body),
        )
        .unwrap();
        assert_eq!(
            (forward.key.as_str(), forward.scope.as_str()),
            ("order-1", SCOPE)
        );
    }

    /// `HeaderMap::get` would read the first `Idempotency-Key` and let the
    /// second through to whatever reads the headers next.
    #[test]
    fn a_forwarded_header_sent_twice_is_refused() {
        let body = br#"{"amount":1000}"#;
        for secret in [Some("whsec_test"), None] {
            for name in [
                "idempotency-key",
                "idempotency-scope",
                "idempotency-epoch",
                "idempotency-signature",
                "idempotency-signature-v2",
            ] {
                let mut repeated = headers("order-1", body, Some("whsec_test"));
                let value = repeated.get(name).unwrap().clone();
                repeated.append(name, value);
                let (status, Json(reply)) =
                    forwarded(&app(secret), &repeated, &request(body)).unwrap_err();
                let expected = match secret {
                    Some(_) => StatusCode::UNAUTHORIZED,
                    None => StatusCode::BAD_REQUEST,
                };
                assert_eq!(status, expected, "{name} {secret:?}");
                assert!(
                    reply["detail"].as_str().unwrap().contains("more than once"),
                    "{reply}"
                );
            }
        }
    }

    #[test]
    fn without_a_secret_the_headers_are_trusted_but_must_be_there() {
        let body = br#"{"amount":1000}"#;
        let trusted = forwarded(&app(None), &headers("order-2", body, None), &request(body));
        assert_eq!(trusted.unwrap().epoch, 1_700_000_000_000_000);
        let (status, _) = forwarded(&app(None), &HeaderMap::new(), &request(body)).unwrap_err();
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }
}
