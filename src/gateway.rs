//! The fetch handler: SPEC §1 in order, with the I/O the pure
//! [`crate::pipeline`] leaves out (reading the body, calling the Durable
//! Object, proxying passthrough requests).

use futures::StreamExt;
use worker::{Env, Request, RequestInit, RequestRedirect, Response};

use crate::admin;
use crate::answer::render_problem;
use crate::config::Config;
use crate::convert::{header_list, to_headers, to_response};
use crate::decision_log::DecisionLog;
use crate::edge_cache::{cache_key, with_replays};
use crate::env::config_from_env;
use crate::headers;
use crate::log_sink;
use crate::object_call::ObjectOp;
use crate::object_client;
use crate::origin::target_url;
use crate::pipeline::{admit, body_framing, route, BodyFraming, Inbound, Route};
use crate::problem::Problem;
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
        log_sink::emit(&line);
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
    let framing = body_framing(
        config,
        request.headers().get("content-length")?.as_deref(),
        request.headers().get("transfer-encoding")?.as_deref(),
    );
    let framing = match framing {
        Ok(framing) => framing,
        Err(problem) => return Ok(Err(problem)),
    };
    let Some(body) = read_body(&mut request, framing, config.max_body_bytes).await? else {
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
        object_client::count_absorbed(&admitted.object_name);
        log_edge("replayed", &admitted.object_name, replay.status, started);
        return Ok(Ok(to_response(replay)?));
    }
    let object_name = admitted.object_name.clone();
    let op = ObjectOp::deliver(admitted, method);
    let answer = object_client::call(env, &object_name, op, &body).await;
    let response = match answer {
        Ok((response, Some(until))) => {
            // A stored, complete replay: this isolate may answer it alone.
            let now = worker::Date::now().as_millis();
            with_replays(|cache| cache.put(key, response.clone(), until, now));
            response
        }
        Ok((response, None)) => response,
        Err(problem) => return Ok(Err(problem)),
    };
    to_response(response).map(Ok)
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
    request: &mut Request,
    framing: BodyFraming,
    limit: u64,
) -> worker::Result<Option<Vec<u8>>> {
    if request.inner().body().is_none() {
        return Ok(Some(Vec::new()));
    }
    if framing == BodyFraming::Declared {
        // One call instead of a JS round trip per chunk.
        return request.bytes().await.map(Some);
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
