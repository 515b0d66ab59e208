//! The operator API under `/__idemgate/` (SPEC §7): health, stats, reading,
//! purging, listing and re-driving receipts. Never forwarded, never
//! deduplicated. Its decisions (who may call, which receipt a query names)
//! are pure, in `idemgate_core::operator`.

use worker::{web_sys, Env};

use idemgate_core::answer::render_problem;
use idemgate_core::config::Config;
use idemgate_core::headers;
use idemgate_core::object_call::{ObjectCall, ObjectOp};
use idemgate_core::operator::{authorize, listing, query_pairs, receipt_address, route_of};
use idemgate_core::problem::Problem;

use crate::edge_cache::with_replays;
use crate::edge_http;
use crate::env::config_from_env;
use crate::object_client;
use crate::receipt_index;
use crate::stats;

/// The operator request: its method as sent (`worker::Method` would read
/// an unknown one as GET), normalised path, query and `Authorization`.
struct Call {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    authorization: Option<String>,
}

pub async fn handle(
    request: &web_sys::Request,
    method: &str,
    normalized_path: &str,
    query: Option<&str>,
    env: &Env,
) -> worker::Result<web_sys::Response> {
    let call = Call {
        method: method.to_string(),
        path: normalized_path.to_string(),
        query: query_pairs(query.unwrap_or("")),
        authorization: headers::get(&edge_http::header_list(&request.headers()), "authorization")
            .map(str::to_string),
    };
    let answer = match (call.method.as_str(), call.path.as_str()) {
        ("GET", "/__idemgate/health") => {
            return edge_http::json(
                200,
                &serde_json::json!({ "status": "ok", "service": "idemgate" }),
            )
        }
        ("GET", "/__idemgate/stats") => stats_route(&call, env),
        ("GET" | "DELETE", "/__idemgate/receipts") => receipts(&call, env).await,
        ("POST", "/__idemgate/receipts/redrive") => redrive(&call, env).await,
        _ => Err(Problem::NotFound),
    };
    match answer {
        Ok(response) => Ok(response),
        Err(problem) => edge_http::response(&render_problem(&problem)),
    }
}

fn stats_route(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    authorize(config.admin_token.as_ref(), call.authorization.as_deref())?;
    json(&stats::snapshot())
}

fn json(value: &impl serde::Serialize) -> Result<web_sys::Response, Problem> {
    edge_http::json(200, value).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })
}

/// The route a query names, once its admin token is presented.
fn authorized_route<'a>(
    config: &'a Config,
    call: &Call,
) -> Result<&'a idemgate_core::config::RouteConfig, Problem> {
    let route = route_of(config, &call.query);
    // Which token guards a route is configuration, not a secret: an
    // unknown route is 401 to a caller without any valid token.
    let token = match &route {
        Ok(route) => route.admin_token.as_ref(),
        Err(_) => config.admin_token.as_ref(),
    };
    authorize(token, call.authorization.as_deref())?;
    route
}

async fn receipts(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let route = authorized_route(&config, call)?;
    let (method, query) = (call.method.as_str(), call.query.as_slice());
    let has = |name: &str| query.iter().any(|(key, _)| key == name);
    if method == "GET" && has("state") && !has("key") {
        let listing = listing(route, query)?;
        let (rows, next) = receipt_index::list(env, &listing).await?;
        return json(&serde_json::json!({
            "route": listing.route,
            "state": listing.state,
            "receipts": rows,
            "cursor": next.map(|cursor| cursor.encode()),
        }));
    }
    let address = receipt_address(route, query)?;
    let op = if method == "DELETE" {
        // This isolate forgets the key at once; others within REPLAY_TTL_MS.
        with_replays(|cache| cache.evict_object(&address.object_name));
        ObjectOp::Purge
    } else {
        ObjectOp::ReadReceipt
    };
    ask_object(env, address.route, address.object_name, op).await
}

async fn redrive(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let route = authorized_route(&config, call)?;
    let address = receipt_address(route, &call.query)?;
    ask_object(env, address.route, address.object_name, ObjectOp::Redrive).await
}

async fn ask_object(
    env: &Env,
    route: String,
    object: String,
    op: ObjectOp,
) -> Result<web_sys::Response, Problem> {
    let request = ObjectCall {
        route,
        object,
        absorbed: 0,
        op,
    };
    let (response, _) = object_client::call(env, request, Vec::new()).await?;
    edge_http::response(&response).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })
}
