//! The fetch handler: SPEC §1 in order, with the I/O the pure
//! [`idemgate_core::pipeline`] leaves out (reading the body, calling the Durable
//! Object, proxying passthrough requests). Deliveries read the runtime's
//! request directly ([`crate::edge_http`]); the operator API and
//! passthrough, which are not on the hot path, use `worker::Request`.

use futures::StreamExt;
use worker::{web_sys, Env, Headers, Request, RequestInit, RequestRedirect, Response};

use crate::admin;
use crate::edge_cache::with_replays;
use crate::edge_http;
use crate::env::config_from_env;
use crate::log_sink;
use crate::object_client;
use crate::stats;
use idemgate_core::answer::render_problem;
use idemgate_core::config::Config;
use idemgate_core::decision_log::DecisionLog;
use idemgate_core::headers;
use idemgate_core::object_call::ObjectOp;
use idemgate_core::origin::target_url;
use idemgate_core::pipeline::{
    admit, body_framing, path_and_query, route, BodyFraming, Inbound, Route,
};
use idemgate_core::problem::Problem;
use idemgate_core::replay_cache::cache_key;

pub async fn handle(request: web_sys::Request, env: Env) -> worker::Result<web_sys::Response> {
    let url = request.url();
    let (path, query) = path_and_query(&url);
    // Fetch leaves `patch` as sent; the origin gets the standard spelling.
    let method = request.method().to_ascii_uppercase();
    let route = route(&method, path);
    if route == Route::Operator {
        return admin::handle(Request::from(request), &env).await;
    }
    let config = match config_from_env(&env) {
        Ok(config) => config,
        Err(problem) => return problem_response(&problem),
    };
    let started = worker::Date::now().as_millis();
    let outcome = match route {
        Route::Passthrough => passthrough(Request::from(request), &config, path, query)
            .await?
            .map(Into::into),
        Route::Deduplicate => deduplicate(request, &config, &method, path, query, &env).await?,
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
        line.path = Some(path.to_string());
        line.status = Some(problem.status());
        line.reason = Some(problem.name());
        log_sink::emit(&line);
        problem_response(&problem)
    })
}

fn problem_response(problem: &Problem) -> worker::Result<web_sys::Response> {
    edge_http::response(&render_problem(problem))
}

/// GET, HEAD and OPTIONS go to the origin as they are, streamed, minus
/// hop-by-hop and `Idempotency-*` headers (so no one can forge those).
async fn passthrough(
    request: Request,
    config: &Config,
    path: &str,
    query: Option<&str>,
) -> worker::Result<Result<Response, Problem>> {
    let target = target_url(&config.origin_url, path, query);
    let mut init = RequestInit::new();
    init.with_method(request.method())
        .with_headers(Headers(edge_http::header_object(&headers::for_origin(
            &edge_http::header_list(&request.headers().0),
        ))?))
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
    request: web_sys::Request,
    config: &Config,
    method: &str,
    path: &str,
    query: Option<&str>,
    env: &Env,
) -> worker::Result<Result<web_sys::Response, Problem>> {
    let list = edge_http::header_list(&request.headers());
    let framing = body_framing(
        config,
        headers::get(&list, "content-length"),
        headers::get(&list, "transfer-encoding"),
    );
    let framing = match framing {
        Ok(framing) => framing,
        Err(problem) => return Ok(Err(problem)),
    };
    let Some(body) = read_body(request, framing, config.max_body_bytes).await? else {
        return Ok(Err(Problem::PayloadTooLarge {
            limit: config.max_body_bytes,
        }));
    };
    let inbound = Inbound {
        method,
        path,
        query,
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
        object_client::count_absorbed(&admitted.object_name);
        log_edge("replayed", &admitted.object_name, replay.status, started);
        return edge_http::response(&replay).map(Ok);
    }
    let object_name = admitted.object_name.clone();
    let op = ObjectOp::deliver(admitted, method.to_string());
    let answer = object_client::call(env, &object_name, op, &body).await;
    let response = match answer {
        Ok((response, Some(until))) => {
            // A stored, complete replay: this isolate may answer it alone.
            let now = worker::Date::now().as_millis();
            let answer = edge_http::response(&response);
            with_replays(|cache| cache.put(key, response, until, now));
            answer
        }
        Ok((response, None)) => edge_http::response(&response),
        Err(problem) => return Ok(Err(problem)),
    };
    response.map(Ok)
}

fn log_edge(decision: &'static str, scope: &str, status: u16, started: u64) {
    let mut line = DecisionLog::new(
        decision,
        worker::Date::now().as_millis().saturating_sub(started),
    );
    line.scope = Some(scope.to_string());
    line.status = Some(status);
    line.edge = true;
    log_sink::emit(&line);
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
    if request.body().is_none() {
        return Ok(Some(Vec::new()));
    }
    let mut chunks = Request::from(request).stream()?;
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
