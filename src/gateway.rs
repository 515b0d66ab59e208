//! The fetch handler: SPEC §1 in order, with the I/O the pure
//! `idemgate_core::pipeline` leaves out (reading the body, calling the
//! Durable Object, proxying passthrough requests), on the runtime's own
//! request ([`crate::edge_http`]).

use worker::{web_sys, Env};

use idemgate_core::answer::render_problem;
use idemgate_core::config::RouteConfig;
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::headers::{self, RECEIPT_ID};
use idemgate_core::object_call::Reply;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::origin::target;
use idemgate_core::pipeline::{
    admit, authenticate, body_framing, fast_replay_key, path_and_query, route_request,
    Authentication, BodyFraming, Inbound, Kind,
};
use idemgate_core::problem::Problem;
use idemgate_core::replay_cache::cache_key;
use idemgate_core::routes::{is_operator, normalize_path};
use idemgate_core::upgrade::looks_up_previous;

use crate::admin;
use crate::edge_cache::with_replays;
use crate::edge_http;
use crate::env::config_from_env;
use crate::events;
use crate::object_client;
use crate::stats;

pub async fn handle(request: web_sys::Request, env: Env) -> worker::Result<web_sys::Response> {
    let url = request.url();
    let (path, query) = path_and_query(&url);
    // Fetch leaves `patch` as sent; the origin gets the standard spelling.
    let method = request.method().to_ascii_uppercase();
    let started = worker::Date::now().as_millis();
    let normalized = match normalize_path(path) {
        Ok(normalized) => normalized,
        Err(problem) => return reject(&env, None, path, problem, started),
    };
    if is_operator(&normalized) {
        return admin::handle(&request, &method, &normalized, query, &env).await;
    }
    let config = match config_from_env(&env) {
        Ok(config) => config,
        Err(problem) => return reject(&env, None, path, problem, started),
    };
    let (route, kind) = match route_request(&config, &method, &normalized) {
        Ok(routed) => routed,
        Err(problem) => return reject(&env, None, path, problem, started),
    };
    let outcome = match kind {
        Kind::Passthrough => passthrough(&request, route, path, query).await,
        Kind::Deduplicate => {
            let inbound = RequestLine {
                method: &method,
                path,
                normalized_path: &normalized,
                query,
            };
            deduplicate(request, route, &inbound, &env, started).await?
        }
    };
    outcome.or_else(|problem| reject(&env, Some(&route.name), path, problem, started))
}

/// A rejection made before the Durable Object (bad input, a bad signature,
/// misconfiguration) or a failed passthrough: one event, and the problem.
fn reject(
    env: &Env,
    route: Option<&str>,
    path: &str,
    problem: Problem,
    started: u64,
) -> worker::Result<web_sys::Response> {
    let mut event = DecisionLog::new(
        "rejected",
        worker::Date::now().as_millis().saturating_sub(started),
    );
    event.route = route.map(str::to_string);
    event.path = Some(path.to_string());
    event.status = Some(problem.status());
    event.reason = Some(problem.name());
    events::emit(env, &event, true);
    edge_http::response(&render_problem(&problem))
}

/// GET, HEAD and OPTIONS go to the route's origin as they are, streamed,
/// minus hop-by-hop and forbidden headers (so no one can forge them).
async fn passthrough(
    request: &web_sys::Request,
    route: &RouteConfig,
    path: &str,
    query: Option<&str>,
) -> Result<web_sys::Response, Problem> {
    let target = target(&route.origin_url, path, query);
    let headers = headers::for_origin(&edge_http::header_list(&request.headers()));
    edge_http::proxy_to(request, &target.url, &headers)
        .await
        .map_err(|message| Problem::OriginUnreachable { message })
}

/// What `deduplicate` needs of the request line.
struct RequestLine<'a> {
    method: &'a str,
    path: &'a str,
    normalized_path: &'a str,
    query: Option<&'a str>,
}

async fn deduplicate(
    request: web_sys::Request,
    route: &RouteConfig,
    line: &RequestLine<'_>,
    env: &Env,
    started: u64,
) -> worker::Result<Result<web_sys::Response, Problem>> {
    let list = edge_http::header_list(&request.headers());
    let framing = body_framing(
        route.max_body_bytes,
        headers::get(&list, "content-length"),
        headers::get(&list, "transfer-encoding"),
    );
    let framing = match framing {
        Ok(framing) => framing,
        Err(problem) => return Ok(Err(problem)),
    };
    let Some(body) = read_body(request, framing, route.max_body_bytes).await? else {
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
        now: started / 1000,
    };
    let authenticated = match authenticate(route, &inbound) {
        Ok(Authentication::Done(authenticated)) => authenticated,
        // Before any Durable Object is touched, like every other check.
        Ok(Authentication::Pending(pending)) => {
            let checked = crate::public_key::check_all(pending.checks()).await;
            match pending.complete(checked) {
                Ok(authenticated) => authenticated,
                Err(problem) => return Ok(Err(problem)),
            }
        }
        Err(problem) => return Ok(Err(problem)),
    };
    stats::record(|stats| stats.deliveries += 1);
    // A byte-identical retry is found before its body is parsed; any
    // other one after, by its object and fingerprint.
    let fast_key = fast_replay_key(&authenticated);
    let now = worker::Date::now().as_millis();
    if let Some((key, replay)) = with_replays(|cache| cache.get_fast(&fast_key, now)) {
        stats::record(|stats| stats.fast_cache_hits += 1);
        return edge_replay(
            env,
            route,
            key.split('/').next().unwrap_or(""),
            replay,
            started,
            now,
        )
        .map(Ok);
    }
    let single_use = authenticated.single_use();
    #[allow(unused_mut)] // the test hook below may change it
    let mut admitted = match admit(&authenticated) {
        Ok(admitted) => admitted,
        Err(problem) => return Ok(Err(problem)),
    };
    #[cfg(feature = "test-hooks")]
    if crate::test_hooks::second_version_keys(env) {
        admitted = admitted.as_previous();
    }
    let delivery = &admitted.delivery;
    let previous = admitted
        .previous
        .as_ref()
        .map(|previous| previous.object.as_str());
    for object in std::iter::once(delivery.identity.object.as_str()).chain(previous) {
        let key = cache_key(object, delivery.fingerprint.as_str());
        if let Some(replay) = with_replays(|cache| cache.get(&key, now)) {
            with_replays(|cache| cache.alias(fast_key, &key));
            return edge_replay(env, route, object, replay, started, now).map(Ok);
        }
    }
    // An async delivery is acknowledged only with its index row, which the
    // sweep finds it by: without an index, take nothing at all.
    if route.is_async() && crate::receipt_index::database(env).is_none() {
        return Ok(Err(Problem::Misconfigured {
            variable: crate::receipt_index::INDEX_BINDING.into(),
            reason: "async delivery needs the receipt index: bind a D1 database as IDEMGATE_INDEX (wrangler.toml [[d1_databases]])".into(),
        }));
    }
    // A transmission whose signature does not bind its body (PayPal's)
    // goes to the first key it was delivered under, and to no other.
    if let Some((id, until)) = single_use {
        let call = ObjectCall {
            route: route.name.clone(),
            object: idemgate_core::single_use::object_name(&route.name, &id),
            absorbed: 0,
            op: ObjectOp::ClaimOnce {
                claimant: delivery.identity.object.clone(),
                until,
            },
        };
        match object_client::call(env, call, Vec::new()).await {
            Ok(reply) if reply.response.status == 204 => {}
            Ok(reply) if reply.response.status == 409 => {
                return Ok(Err(idemgate_core::single_use::replayed()));
            }
            Ok(_) => {
                return Ok(Err(Problem::StorageUnavailable {
                    message: "the transmission's claim could not be checked".into(),
                }))
            }
            Err(problem) => return Ok(Err(problem)),
        }
    }
    // After an upgrade, a retry whose key the second version derived
    // otherwise is answered where that version kept its receipt, if it did.
    if let Some(call) = ObjectCall::deliver_to_previous(&admitted) {
        let since = crate::receipt_index::upgrade_since(env).await;
        let retention_ms = route.retention_seconds.saturating_mul(1_000);
        if looks_up_previous(since, now, retention_ms) {
            let key = cache_key(&call.object, delivery.fingerprint.as_str());
            match object_client::call(env, call, body.clone()).await {
                Ok(reply) if reply.unknown_key => {}
                answer => return answered(answer, key, fast_key),
            }
        }
    }
    let key = cache_key(&delivery.identity.object, delivery.fingerprint.as_str());
    let call = ObjectCall::deliver(admitted.delivery, 0);
    let answer = object_client::call(env, call, body).await;
    answered(answer, key, fast_key)
}

/// The object's answer to a delivery, as the caller gets it; a stored,
/// complete replay is kept in this isolate under `key` (and `fast_key`).
fn answered(
    answer: Result<Reply, Problem>,
    key: String,
    fast_key: String,
) -> worker::Result<Result<web_sys::Response, Problem>> {
    let response = match answer {
        Ok(Reply {
            response,
            replayable_until: Some(until),
            ..
        }) => {
            // A stored, complete replay: this isolate may answer it alone.
            let now = worker::Date::now().as_millis();
            let answer = edge_http::response(&response);
            with_replays(|cache| {
                cache.put(key.clone(), response, until, now);
                cache.alias(fast_key, &key);
            });
            answer
        }
        Ok(reply) => edge_http::response(&reply.response),
        Err(problem) => return Ok(Err(problem)),
    };
    response.map(Ok)
}

/// A replay this isolate answers alone, found at `now`: counted for the
/// key's object and the route, logged only with `LOG_DUPLICATES`.
fn edge_replay(
    env: &Env,
    route: &RouteConfig,
    object_name: &str,
    replay: idemgate_core::receipt::HttpResponse,
    started: u64,
    now: u64,
) -> worker::Result<web_sys::Response> {
    let duration_ms = now.saturating_sub(started);
    stats::record(|stats| stats.cache_hits += 1);
    object_client::count_absorbed(object_name);
    if route.log_duplicates {
        let mut event = DecisionLog::new("replayed", duration_ms);
        event.route = Some(route.name.clone());
        event.receipt_id = headers::get(&replay.headers, RECEIPT_ID).map(str::to_string);
        event.status = Some(replay.status);
        event.origin_status = Some(replay.status);
        event.edge = true;
        event.absorbed = true;
        events::emit(env, &event, true);
    } else {
        events::absorbed_at_edge(env, &route.name, "replayed", now, duration_ms);
    }
    edge_http::response(&replay)
}

/// Reads the body: whole when its declared length binds, else chunk by
/// chunk, stopping at the first byte over `limit`, so a chunked upload is
/// never buffered whole. `None` means over the limit.
async fn read_body(
    request: web_sys::Request,
    framing: BodyFraming,
    limit: u64,
) -> worker::Result<Option<Vec<u8>>> {
    if framing == BodyFraming::Declared {
        // One call instead of a JS round trip per chunk.
        return edge_http::whole_body(&request).await.map(Some);
    }
    edge_http::bounded_body(&request, limit).await
}
