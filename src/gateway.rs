//! The fetch handler: SPEC §1 in order, with the I/O the pure
//! [`crate::pipeline`] leaves out (reading the body, calling the Durable
//! Object, proxying passthrough requests).

use std::cell::RefCell;
use std::collections::HashMap;

use futures::StreamExt;
use worker::{Env, Request, RequestInit, RequestRedirect, Response};

use crate::admin::{self, DEDUP_OBJECT_BINDING};
use crate::answer::render_problem;
use crate::config::Config;
use crate::convert::{header_list, to_headers, to_request, to_response};
use crate::decision_log::DecisionLog;
use crate::dedup_object::{ABSORBED_HEADER, FINGERPRINT_HEADER, KEY_HEADER, SCOPE_HEADER};
use crate::edge_cache::{cache_key, with_replays, REPLAYABLE_UNTIL_HEADER};
use crate::env::config_from_env;
use crate::headers;
use crate::origin::{target_url, OutboundRequest};
use crate::pipeline::{admit, check_declared_length, route, Inbound, Route};
use crate::problem::Problem;
use crate::receipt::HttpResponse;
use crate::stats;

pub async fn handle(request: Request, env: Env) -> worker::Result<Response> {
    let url = request.url()?;
    let method = request.method().to_string();
    let route = route(&method, url.path());
    if route == Route::Operator {
        return admin::handle(request, &env).await;
    }
    let config = match config_from_env(&env) {
        Ok(config) => config,
        Err(problem) => return problem_response(&problem),
    };
    let started = worker::Date::now().as_millis();
    let outcome = match route {
        Route::Passthrough => passthrough(request, &config, &url).await?,
        Route::Deduplicate => deduplicate(request, &config, &url, &env).await?,
        Route::Reject(problem) => Err(problem),
        Route::Operator => unreachable!("handled above"),
    };
    outcome.or_else(|problem| {
        // Decisions of the Durable Object are logged there; these are the
        // rejections made before it (and failed passthroughs).
        let mut line = DecisionLog::new(
            "rejected",
            worker::Date::now().as_millis().saturating_sub(started),
        );
        line.path = Some(url.path().to_string());
        line.status = Some(problem.status());
        line.reason = Some(problem.name());
        worker::console_log!("{}", line.to_json());
        problem_response(&problem)
    })
}

fn problem_response(problem: &Problem) -> worker::Result<Response> {
    to_response(render_problem(problem))
}

/// GET, HEAD and OPTIONS go to the origin as they are, streamed, minus
/// hop-by-hop and `Idempotency-*` headers (so no one can forge those).
async fn passthrough(
    request: Request,
    config: &Config,
    url: &worker::Url,
) -> worker::Result<Result<Response, Problem>> {
    let target = target_url(&config.origin_url, url.path(), url.query());
    let mut init = RequestInit::new();
    init.with_method(request.method())
        .with_headers(to_headers(&headers::for_origin(&header_list(
            request.headers(),
        )))?)
        .with_redirect(RequestRedirect::Manual)
        .with_body(request.inner().body().map(Into::into));
    let outbound = Request::new_with_init(&target, &init)?;
    Ok(worker::Fetch::Request(outbound)
        .send()
        .await
        .map_err(|error| Problem::OriginUnreachable {
            message: error.to_string(),
        }))
}

async fn deduplicate(
    mut request: Request,
    config: &Config,
    url: &worker::Url,
    env: &Env,
) -> worker::Result<Result<Response, Problem>> {
    let declared = request.headers().get("content-length")?;
    if let Err(problem) = check_declared_length(config, declared.as_deref()) {
        return Ok(Err(problem));
    }
    let Some(body) = read_body(&mut request, config.max_body_bytes).await? else {
        return Ok(Err(Problem::PayloadTooLarge {
            limit: config.max_body_bytes,
        }));
    };
    let list = header_list(request.headers());
    let method = request.method().to_string();
    let inbound = Inbound {
        method: &method,
        path: url.path(),
        query: url.query(),
        headers: &list,
        body: &body,
        now: worker::Date::now().as_millis() / 1000,
    };
    let admitted = match admit(config, &inbound) {
        Ok(admitted) => admitted,
        Err(problem) => return Ok(Err(problem)),
    };
    stats::record(|stats| stats.deliveries += 1);
    let started = worker::Date::now().as_millis();
    let key = cache_key(&admitted.object_name, admitted.fingerprint.as_str());
    if let Some(replay) = with_replays(|cache| cache.get(&key, started)) {
        stats::record(|stats| stats.cache_hits += 1);
        absorbed(&admitted.object_name);
        log_edge("replayed", &admitted.object_name, replay.status, started);
        return Ok(Ok(to_response(replay)?));
    }
    let mut headers = admitted.forward_headers;
    headers.push((KEY_HEADER.into(), admitted.key.as_str().into()));
    headers.push((
        FINGERPRINT_HEADER.into(),
        admitted.fingerprint.as_str().into(),
    ));
    headers.push((SCOPE_HEADER.into(), admitted.object_name.clone()));
    let request = OutboundRequest {
        method,
        url: admitted.origin_url,
        headers,
        body,
    };
    respond(call_object(env, &admitted.object_name, request, &key).await)
}

/// A response or a problem, as the fetch handler returns them.
fn respond(answer: Outcome) -> worker::Result<Result<Response, Problem>> {
    match answer {
        Ok(response) => to_response(response).map(Ok),
        Err(problem) => Ok(Err(problem)),
    }
}

type Outcome = Result<HttpResponse, Problem>;

/// Counts a duplicate this isolate absorbed for `object_name`; the count
/// reaches the receipt with the next request to that object.
fn absorbed(object_name: &str) {
    ABSORBED.with(|absorbed| {
        let mut absorbed = absorbed.borrow_mut();
        if absorbed.len() < MAX_PENDING_ABSORBED || absorbed.contains_key(object_name) {
            *absorbed.entry(object_name.to_string()).or_default() += 1;
        }
    });
}

/// Duplicates absorbed here and not yet told to their object; past this
/// many objects, further counts are dropped (the count is approximate).
const MAX_PENDING_ABSORBED: usize = 4_096;

thread_local! {
    static ABSORBED: RefCell<HashMap<String, u64>> = RefCell::new(HashMap::new());
}

/// The header that carries the absorbed count of `object_name`, if any.
pub fn take_absorbed(object_name: &str) -> Option<(String, String)> {
    ABSORBED
        .with(|absorbed| absorbed.borrow_mut().remove(object_name))
        .map(|count| (ABSORBED_HEADER.to_string(), count.to_string()))
}

/// One request to the key's Durable Object, read whole. A replay it marks
/// as such is kept in this isolate's replay cache.
async fn call_object(
    env: &Env,
    object_name: &str,
    mut request: OutboundRequest,
    key: &str,
) -> Outcome {
    let unavailable = |error: worker::Error| Problem::StorageUnavailable {
        message: format!("the key's Durable Object did not answer: {error}"),
    };
    stats::record(|stats| stats.object_requests += 1);
    request.headers.extend(take_absorbed(object_name));
    let exchange = async {
        let stub = env
            .durable_object(DEDUP_OBJECT_BINDING)?
            .get_by_name(object_name)?;
        let mut response = stub.fetch_with_request(to_request(&request)?).await?;
        let body = response.bytes().await?;
        Ok::<_, worker::Error>(HttpResponse {
            status: response.status_code(),
            headers: header_list(response.headers()),
            body,
        })
    };
    let mut response = exchange.await.map_err(unavailable)?;
    let replayable_until = headers::get(&response.headers, REPLAYABLE_UNTIL_HEADER)
        .and_then(|until| until.parse::<u64>().ok());
    response
        .headers
        .retain(|(name, _)| !name.starts_with(headers::INTERNAL_PREFIX));
    if let Some(until) = replayable_until {
        let now = worker::Date::now().as_millis();
        with_replays(|cache| cache.put(key.to_string(), response.clone(), until, now));
    }
    Ok(response)
}

fn log_edge(decision: &'static str, scope: &str, status: u16, started: u64) {
    let mut line = DecisionLog::new(
        decision,
        worker::Date::now().as_millis().saturating_sub(started),
    );
    line.scope = Some(scope.to_string());
    line.status = Some(status);
    line.edge = true;
    worker::console_log!("{}", line.to_json());
}

/// Reads the body chunk by chunk and stops at the first byte over `limit`,
/// so a chunked upload with no `Content-Length` is not buffered whole.
async fn read_body(request: &mut Request, limit: u64) -> worker::Result<Option<Vec<u8>>> {
    if request.inner().body().is_none() {
        return Ok(Some(Vec::new()));
    }
    let mut chunks = request.stream()?;
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        if (body.len() + chunk.len()) as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}
