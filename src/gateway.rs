//! The fetch handler: SPEC §1 in order, with the I/O the pure
//! [`crate::pipeline`] leaves out (reading the body, calling the Durable
//! Object, proxying passthrough requests).

use futures::StreamExt;
use worker::{Env, Request, RequestInit, RequestRedirect, Response};

use crate::admin::{self, DEDUP_OBJECT_BINDING};
use crate::answer::render_problem;
use crate::config::Config;
use crate::convert::{header_list, to_headers, to_request, to_response};
use crate::decision_log::DecisionLog;
use crate::dedup_object::{FINGERPRINT_HEADER, KEY_HEADER, SCOPE_HEADER};
use crate::env::config_from_env;
use crate::headers;
use crate::origin::{target_url, OutboundRequest};
use crate::pipeline::{admit, check_declared_length, route, Inbound, Route};
use crate::problem::Problem;

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
    let mut headers = admitted.forward_headers;
    headers.push((KEY_HEADER.into(), admitted.key.as_str().into()));
    headers.push((
        FINGERPRINT_HEADER.into(),
        admitted.fingerprint.as_str().into(),
    ));
    headers.push((SCOPE_HEADER.into(), admitted.object_name.clone()));
    let to_object = to_request(&OutboundRequest {
        method,
        url: admitted.origin_url,
        headers,
        body,
    })?;
    let unavailable = |error: worker::Error| Problem::StorageUnavailable {
        message: format!("the key's Durable Object did not answer: {error}"),
    };
    let stub = match env
        .durable_object(DEDUP_OBJECT_BINDING)
        .and_then(|namespace| namespace.get_by_name(&admitted.object_name))
    {
        Ok(stub) => stub,
        Err(error) => return Ok(Err(unavailable(error))),
    };
    Ok(stub
        .fetch_with_request(to_object)
        .await
        .map_err(unavailable))
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
