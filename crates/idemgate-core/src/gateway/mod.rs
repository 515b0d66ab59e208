//! The gateway's steps in SPEC §1's order, from the request line to the
//! key's Durable Object, run against an [`Edge`]: the runtime's I/O and
//! the isolate's state, which the Worker implements on Cloudflare (as the
//! Durable Object implements [`crate::engine::Backend`]) and the tests
//! implement in memory. Each step returns early with what it came to;
//! nothing here renders a response or writes a log line: the
//! [`Handled`] value says what happened, and the Worker renders it.
//!
//! The order: normalise the path; the operator API; the configuration;
//! the route and the method; passthrough; the body's framing; the body;
//! the sender's signature (WebCrypto where a public key checks it); the
//! isolate's byte-identical replays; admission (key, fingerprint, scope);
//! the isolate's replays by key; the index an async route needs; a
//! single-use transmission's claim; the previous version's object after
//! an upgrade; the key's object.

use std::rc::Rc;

use crate::config::{Config, RouteConfig};
use crate::delivery::Delivery;
use crate::headers::{self, HeaderList};
use crate::object_call::{ObjectCall, ObjectOp, Reply};
use crate::origin::target;
use crate::pipeline::{
    admit, authenticate, body_framing, fast_replay_key, route_request, Admitted, Authentication,
    BodyFraming, Inbound, Kind, PublicKeyChecked,
};
use crate::problem::Problem;
use crate::receipt::HttpResponse;
use crate::replay_cache::{cache_key, ReplayCache};
use crate::routes::{is_operator, normalize_path};
use crate::signature::PublicKeyCheck;
use crate::upgrade::looks_up_previous;

/// What the gateway's steps need from the runtime and the isolate.
#[allow(async_fn_in_trait)] // single-threaded (wasm32): no Send bound wanted
pub trait Edge {
    /// The runtime's own response (a passthrough streams the origin's).
    type Response;
    /// A failure of the runtime itself (a body that could not be read).
    type Error;

    /// Milliseconds since the epoch.
    fn now_ms(&self) -> u64;
    /// The deployment's configuration.
    fn config(&self) -> Result<Rc<Config>, Problem>;
    /// The request's headers.
    fn headers(&self) -> HeaderList;
    /// The operator API's answer to the request.
    async fn operator(
        &self,
        normalized_path: &str,
        query: Option<&str>,
    ) -> Result<Self::Response, Self::Error>;
    /// The request sent on to `url` as it is, with `headers`, streamed.
    /// Sends a request that is not deduplicated on to the origin (through
    /// the binding `via` names, if any).
    async fn passthrough(
        &self,
        url: &str,
        headers: &HeaderList,
        via: Option<&str>,
    ) -> Result<Self::Response, Problem>;
    /// The request's body as `framing` says to read it; `None` when it is
    /// over `limit`.
    async fn read_body(
        &self,
        framing: BodyFraming,
        limit: u64,
    ) -> Result<Option<Vec<u8>>, Self::Error>;
    /// What the runtime's WebCrypto makes of a public-key signature.
    async fn check_public_keys(&self, checks: &[PublicKeyCheck]) -> PublicKeyChecked;
    /// The isolate's replays.
    fn with_replays<T>(&self, f: impl FnOnce(&mut ReplayCache) -> T) -> T;
    /// Whether the receipt index's shards (`INDEX_SHARD`) are bound.
    fn has_index(&self) -> bool;
    /// Since when this version runs, if the index knows (SPEC §3, v3).
    async fn upgrade_since(&self) -> Option<u64>;
    /// One call to the Durable Object `call` names, with `body` beside it.
    async fn call(&self, call: ObjectCall, body: Vec<u8>) -> Result<Reply, Problem>;
    /// A deduplicated request passed its size and signature checks.
    fn count_delivery(&self);
    /// Whether to address each delivery as the second version did (the
    /// end-to-end tests' deployment before its upgrade).
    fn addresses_as_second_version(&self) -> bool {
        false
    }
}

/// What became of a request.
#[derive(Debug)]
pub enum Handled<R> {
    /// The operator API's answer, or a passthrough's.
    Response(R),
    /// Refused, or failed, with `problem`; `route` once one was found.
    Rejected {
        route: Option<String>,
        problem: Problem,
    },
    /// A replay this isolate answered alone: no object was asked.
    /// `fast`: found by the request's raw bytes, before the body was read
    /// as JSON.
    EdgeReplay {
        route: String,
        log_duplicates: bool,
        object: String,
        replay: HttpResponse,
        fast: bool,
    },
    /// The key's object (or the previous version's) answered.
    Answered(Reply),
    /// A batch's events were each answered ([`batch`]): `response` is the
    /// batch's answer; `edge_replays`, the events this isolate answered
    /// alone, with their objects; `problems`, why the objects of any
    /// others could not be asked.
    Batch {
        route: String,
        log_duplicates: bool,
        batch: String,
        response: HttpResponse,
        edge_replays: Vec<(String, HttpResponse)>,
        problems: Vec<Problem>,
    },
}

/// Runs the request `method url` through every step.
pub async fn handle<E: Edge>(
    edge: &E,
    method: &str,
    url: &str,
) -> Result<Handled<E::Response>, E::Error> {
    let started = edge.now_ms();
    let (path, query) = crate::pipeline::path_and_query(url);
    // Fetch leaves `patch` as sent; the origin gets the standard spelling.
    let method = method.to_ascii_uppercase();
    let rejected = |problem| Handled::Rejected {
        route: None,
        problem,
    };
    let normalized = match normalize_path(path) {
        Ok(normalized) => normalized,
        Err(problem) => return Ok(rejected(problem)),
    };
    if is_operator(&normalized) {
        return edge
            .operator(&normalized, query)
            .await
            .map(Handled::Response);
    }
    let config = match edge.config() {
        Ok(config) => config,
        Err(problem) => return Ok(rejected(problem)),
    };
    let (route, kind) = match route_request(&config, &method, &normalized) {
        Ok(routed) => routed,
        Err(problem) => return Ok(rejected(problem)),
    };
    let outcome = match kind {
        Kind::Passthrough => {
            let headers = headers::for_origin(&edge.headers());
            let url = target(&route.origin_url, path, query).url;
            let via = route
                .origin_binding
                .as_ref()
                .map(|binding| binding.name.as_str());
            edge.passthrough(&url, &headers, via)
                .await
                .map(Handled::Response)
        }
        Kind::Deduplicate => {
            let line = RequestLine {
                method: &method,
                path,
                normalized_path: &normalized,
                query,
                started,
            };
            deduplicate(edge, route, &line).await?
        }
    };
    Ok(outcome.unwrap_or_else(|problem| Handled::Rejected {
        route: Some(route.name.clone()),
        problem,
    }))
}

/// What [`deduplicate`] needs of the request line.
struct RequestLine<'a> {
    method: &'a str,
    path: &'a str,
    normalized_path: &'a str,
    query: Option<&'a str>,
    started: u64,
}

async fn deduplicate<E: Edge>(
    edge: &E,
    route: &RouteConfig,
    line: &RequestLine<'_>,
) -> Result<Result<Handled<E::Response>, Problem>, E::Error> {
    let list = edge.headers();
    let framing = body_framing(
        route.max_body_bytes,
        headers::get(&list, "content-length"),
        headers::get(&list, "transfer-encoding"),
    );
    let framing = match framing {
        Ok(framing) => framing,
        Err(problem) => return Ok(Err(problem)),
    };
    let Some(body) = edge.read_body(framing, route.max_body_bytes).await? else {
        return Ok(Err(Problem::PayloadTooLarge {
            limit: route.max_body_bytes,
        }));
    };
    let inbound = Inbound {
        method: line.method,
        path: line.path,
        normalized_path: line.normalized_path,
        query: line.query,
        headers: &list,
        body: &body,
        // The runtime's clock stands still between I/O: one reading serves.
        now: line.started / 1000,
    };
    let authenticated = match authenticate(route, &inbound) {
        Ok(Authentication::Done(authenticated)) => authenticated,
        // Before any Durable Object is touched, like every other check.
        Ok(Authentication::Pending(pending)) => {
            let checked = edge.check_public_keys(pending.checks()).await;
            match pending.complete(checked) {
                Ok(authenticated) => authenticated,
                Err(problem) => return Ok(Err(problem)),
            }
        }
        Err(problem) => return Ok(Err(problem)),
    };
    edge.count_delivery();
    if let Some(format) = route.signature_scheme.batch() {
        return Ok(batch::deliver_batch(edge, &authenticated, format).await);
    }
    // A byte-identical retry is found before its body is parsed; any
    // other one after, by its object and fingerprint.
    let fast_key = fast_replay_key(&authenticated);
    let now = edge.now_ms();
    let replay = |object: &str, replay, fast| Handled::EdgeReplay {
        route: route.name.clone(),
        log_duplicates: route.log_duplicates,
        object: object.to_string(),
        replay,
        fast,
    };
    if let Some((key, found)) = edge.with_replays(|cache| cache.get_fast(&fast_key, now)) {
        let object = key.split('/').next().unwrap_or("");
        return Ok(Ok(replay(object, found, true)));
    }
    let single_use = authenticated.single_use();
    let mut admitted = match admit(&authenticated) {
        Ok(admitted) => admitted,
        Err(problem) => return Ok(Err(problem)),
    };
    if edge.addresses_as_second_version() {
        admitted = admitted.as_previous();
    }
    if let Some((object, found)) = replayed_here(edge, &admitted, Some(&fast_key), now) {
        return Ok(Ok(replay(&object, found, false)));
    }
    // An async delivery is acknowledged only with its index row, which the
    // sweep finds it by: without an index, take nothing at all.
    if route.is_async() && !edge.has_index() {
        return Ok(Err(no_index()));
    }
    // A transmission whose signature does not bind its body (PayPal's)
    // goes to the first key it was delivered under, and to no other.
    if let Some((id, until)) = single_use {
        let claimant = admitted.delivery.identity.object.clone();
        if let Err(problem) = claim_once(edge, route, &id, claimant, until).await {
            return Ok(Err(problem));
        }
    }
    if let Some((key, answer)) = answer_from_previous(edge, route, &admitted, &body).await {
        return Ok(answered(edge, answer, key, fast_key));
    }
    let Delivery {
        identity,
        fingerprint,
        ..
    } = &admitted.delivery;
    let key = cache_key(&identity.object, fingerprint.as_str());
    let call = ObjectCall::deliver(admitted.delivery, 0);
    let answer = edge.call(call, body).await;
    Ok(answered(edge, answer, key, fast_key))
}

/// After an upgrade, a retry whose key the second version derived
/// otherwise is answered where that version kept its receipt, if it did:
/// that object's answer, and its replay's cache key.
async fn answer_from_previous<E: Edge>(
    edge: &E,
    route: &RouteConfig,
    admitted: &Admitted,
    body: &[u8],
) -> Option<(String, Result<Reply, Problem>)> {
    let call = ObjectCall::deliver_to_previous(admitted)?;
    let since = edge.upgrade_since().await;
    let retention_ms = route.retention_seconds.saturating_mul(1_000);
    if !looks_up_previous(since, edge.now_ms(), retention_ms) {
        return None;
    }
    let key = cache_key(&call.object, admitted.delivery.fingerprint.as_str());
    match edge.call(call, body.to_vec()).await {
        Ok(reply) if reply.unknown_key => None,
        answer => Some((key, answer)),
    }
}

fn no_index() -> Problem {
    Problem::Misconfigured {
        variable: crate::index::SHARD_BINDING.into(),
        reason: "async delivery needs the receipt index: bind the IndexShard Durable Object class as INDEX_SHARD (wrangler.toml [[durable_objects.bindings]] and its migration)".into(),
    }
}

/// A replay of `admitted` this isolate holds, under its object or the one
/// the second version kept it in, and that object's name; found, it is
/// kept under `fast_key` too, when there is one.
fn replayed_here<E: Edge>(
    edge: &E,
    admitted: &Admitted,
    fast_key: Option<&str>,
    now: u64,
) -> Option<(String, HttpResponse)> {
    let delivery = &admitted.delivery;
    let previous = admitted
        .previous
        .as_ref()
        .map(|previous| previous.object.as_str());
    std::iter::once(delivery.identity.object.as_str())
        .chain(previous)
        .find_map(|object| {
            let key = cache_key(object, delivery.fingerprint.as_str());
            let found = edge.with_replays(|cache| {
                let found = cache.get(&key, now)?;
                if let Some(fast_key) = fast_key {
                    cache.alias(fast_key.to_string(), &key);
                }
                Some(found)
            })?;
            Some((object.to_string(), found))
        })
}

/// Claims transmission `id` for `claimant` (the key's object) until
/// `until`: refused when another key claimed it first.
async fn claim_once<E: Edge>(
    edge: &E,
    route: &RouteConfig,
    id: &str,
    claimant: String,
    until: u64,
) -> Result<(), Problem> {
    let call = ObjectCall {
        route: route.name.clone(),
        object: crate::single_use::object_name(&route.name, id),
        absorbed: 0,
        op: ObjectOp::ClaimOnce { claimant, until },
    };
    match edge.call(call, Vec::new()).await?.response.status {
        204 => Ok(()),
        409 => Err(crate::single_use::replayed()),
        _ => Err(Problem::StorageUnavailable {
            message: "the transmission's claim could not be checked".into(),
        }),
    }
}

/// The object's answer to a delivery; a stored, complete replay is kept
/// in this isolate under `key` (and `fast_key`), which may then answer it
/// alone.
fn answered<E: Edge>(
    edge: &E,
    answer: Result<Reply, Problem>,
    key: String,
    fast_key: String,
) -> Result<Handled<E::Response>, Problem> {
    let reply = answer?;
    if let Some(until) = reply.replayable_until {
        let now = edge.now_ms();
        let response = reply.response.clone();
        edge.with_replays(|cache| {
            cache.put(key.clone(), response, until, now);
            cache.alias(fast_key, &key);
        });
    }
    Ok(Handled::Answered(reply))
}

mod batch;
pub use batch::BATCH;

#[cfg(test)]
mod batch_tests;
#[cfg(test)]
mod engine_edge;
#[cfg(test)]
mod stripe_tests;
#[cfg(test)]
mod tests;
