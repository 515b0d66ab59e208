//! A fresh isolate's first delivery, rehearsed when the isolate starts
//! (SPEC §14, the cold start). V8 compiles a WebAssembly function on its
//! first call, so an isolate's first delivery paid for compiling the
//! gateway's whole path: about 45 ms of the isolate's CPU against 6 ms
//! for the delivery after it (`BENCH_ONLY=cold`). Startup runs once per
//! isolate, and on Cloudflare while the TLS handshake of the request that
//! caused it is still under way, so the gateway's steps run here once, on
//! a made-up delivery against an [`Edge`] that does no I/O: the
//! configuration's reading, routing, the body's canonical form, the key,
//! the fingerprint, the object call and its reply as they cross the wire,
//! and the replays. Nothing it does outlives it: its configuration, its
//! replays and its answer are its own.

use std::cell::RefCell;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::config::Config;
use crate::gateway::{handle, Edge, Handled};
use crate::headers::HeaderList;
use crate::object_call::{ObjectCall, ObjectReply, Reply};
use crate::pipeline::{BodyFraming, PublicKeyChecked};
use crate::problem::Problem;
use crate::receipt::HttpResponse;
use crate::replay_cache::ReplayCache;
use crate::signature::PublicKeyCheck;

/// Milliseconds since the epoch the rehearsal runs at (any fixed time).
const AT: u64 = 1_700_000_000_000;
const BODY: &[u8] =
    br#"{"amount":1000,"currency":"eur","customer":"cus_1","metadata":{"order":"o-1"}}"#;

/// Runs one first delivery and its byte-identical retry through the
/// gateway's steps; `true` when the first reached the object and the
/// retry was answered from the replays, as a real pair would be.
pub fn rehearse() -> bool {
    let edge = RehearsalEdge {
        config: Config::from_lookup(|name| {
            (name == "ORIGIN_URL").then(|| "https://origin.invalid".to_string())
        })
        .map(Rc::new),
        replays: RefCell::default(),
    };
    let url = "https://gateway.invalid/payments?rehearsal=1";
    let first = run(handle(&edge, "POST", url));
    let retry = run(handle(&edge, "POST", url));
    matches!(first, Some(Ok(Handled::Answered(_))))
        && matches!(retry, Some(Ok(Handled::EdgeReplay { .. })))
}

/// Polls `future` once: the rehearsal's edge never waits, so it is ready
/// (no executor, which on wasm32 could not block).
fn run<F: Future>(future: F) -> Option<F::Output> {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    }
}

/// An edge with one request, whose object stores what it is sent and
/// answers 201.
struct RehearsalEdge {
    config: Result<Rc<Config>, Problem>,
    replays: RefCell<ReplayCache>,
}

impl Edge for RehearsalEdge {
    type Response = ();
    type Error = ();

    fn now_ms(&self) -> u64 {
        AT
    }

    fn config(&self) -> Result<Rc<Config>, Problem> {
        self.config.clone()
    }

    fn headers(&self) -> HeaderList {
        vec![
            ("content-length".into(), BODY.len().to_string()),
            ("content-type".into(), "application/json".into()),
            ("idempotency-key".into(), "rehearsal-1".into()),
        ]
    }

    async fn operator(&self, _: &str, _: Option<&str>) -> Result<(), ()> {
        Ok(())
    }

    async fn passthrough(&self, _: &str, _: &HeaderList) -> Result<(), Problem> {
        Ok(())
    }

    async fn read_body(&self, _: BodyFraming, limit: u64) -> Result<Option<Vec<u8>>, ()> {
        Ok((BODY.len() as u64 <= limit).then(|| BODY.to_vec()))
    }

    async fn check_public_keys(&self, _: &[PublicKeyCheck]) -> PublicKeyChecked {
        PublicKeyChecked::Rejected
    }

    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T {
        f(&mut self.replays.borrow_mut())
    }

    fn has_index(&self) -> bool {
        true
    }

    async fn upgrade_since(&self) -> Option<u64> {
        Some(AT)
    }

    /// The call crosses as it would to the key's object and back.
    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem> {
        let delivery = ObjectCall::from_json(&call.to_json())?.into_delivery(body)?;
        let (json, body) = ObjectReply::encode(Reply {
            response: HttpResponse {
                status: 201,
                headers: vec![
                    ("content-type".into(), "application/json".into()),
                    ("idempotency-key".into(), delivery.identity.key.to_string()),
                ],
                body: br#"{"id":"pay_1"}"#.to_vec(),
            },
            replayable_until: Some(AT + 60_000),
            unknown_key: false,
            already_received: false,
        });
        ObjectReply::decode(&json, body).map_err(|message| Problem::StorageUnavailable { message })
    }

    fn count_delivery(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rehearsal_reaches_the_object_then_answers_its_retry_from_the_replays() {
        assert!(rehearse());
    }
}
