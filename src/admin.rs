//! The operator API under `/__idemgate/` (SPEC §7): health, and reading or
//! purging one key's receipt. Never forwarded, never deduplicated.

use worker::{web_sys, Env, Request, Response};

use crate::edge_cache::with_replays;
use crate::edge_http;
use crate::env::config_from_env;
use crate::object_client;
use crate::stats;
use idemgate_core::answer::render_problem;
use idemgate_core::object_call::ObjectOp;
use idemgate_core::operator::{authorize, receipt_object_name};
use idemgate_core::problem::Problem;
use idemgate_core::signature::Secret;

/// The method as sent: `worker::Method` reads any method it does not know
/// as GET.
fn is_get(request: &Request) -> bool {
    request.inner().method() == "GET"
}

pub async fn handle(request: Request, env: &Env) -> worker::Result<web_sys::Response> {
    let url = request.url()?;
    match url.path() {
        "/__idemgate/health" if is_get(&request) => {
            Response::from_json(&serde_json::json!({ "status": "ok", "service": "idemgate" }))
                .map(Into::into)
        }
        "/__idemgate/stats" if is_get(&request) => {
            let authorized = config_from_env(env).and_then(|config| {
                let authorization = request.headers().get("authorization").ok().flatten();
                authorize(
                    config.admin_token.as_ref().map(Secret::expose),
                    authorization.as_deref(),
                )
            });
            match authorized {
                Ok(()) => Response::from_json(&stats::snapshot()).map(Into::into),
                Err(problem) => edge_http::response(&render_problem(&problem)),
            }
        }
        "/__idemgate/receipts" => {
            let query: Vec<(String, String)> = url.query_pairs().into_owned().collect();
            match receipts(&request, env, &query).await {
                Ok(response) => Ok(response),
                Err(problem) => edge_http::response(&render_problem(&problem)),
            }
        }
        _ => edge_http::response(&render_problem(&Problem::NotFound)),
    }
}

async fn receipts(
    request: &Request,
    env: &Env,
    query: &[(String, String)],
) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let authorization = request.headers().get("authorization").ok().flatten();
    authorize(
        config.admin_token.as_ref().map(Secret::expose),
        authorization.as_deref(),
    )?;
    let method = request.inner().method();
    if !matches!(method.as_str(), "GET" | "DELETE") {
        return Err(Problem::NotFound);
    }
    let object_name = receipt_object_name(&config, query)?;
    if method == "DELETE" {
        // This isolate forgets the key at once; others within REPLAY_TTL_MS.
        with_replays(|cache| cache.evict_object(&object_name));
    }
    let op = match method.as_str() {
        "DELETE" => ObjectOp::Purge,
        _ => ObjectOp::ReadReceipt,
    };
    let (response, _) = object_client::call(env, &object_name, op, &[]).await?;
    edge_http::response(&response).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })
}
