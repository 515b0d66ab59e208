//! The operator API under `/__idemgate/` (SPEC §7): health, stats, reading,
//! purging, listing and re-driving receipts. Never forwarded, never
//! deduplicated. Its decisions (who may call, which receipt a query names)
//! are pure, in `idemgate_core::operator`.

use worker::{web_sys, Env};

use idemgate_core::access::TokenUsed;
use idemgate_core::answer::render_problem;
use idemgate_core::config::Config;
use idemgate_core::headers;
use idemgate_core::object_call::ObjectOp;
use idemgate_core::operator::{authorize, listing, query_pairs, receipt_address, route_of};
use idemgate_core::problem::Problem;
use idemgate_core::reconcile_runs::route_runs::ReconcileCall;

use crate::audit_client;
use crate::edge_http;
use crate::env::config_from_env;
use crate::flow_client;
use crate::isolate::with_replays;
use crate::object_client;
use crate::receipt_index;
use crate::reconcile_client;
use crate::stats;

/// The operator request: its method as sent (`worker::Method` would read
/// an unknown one as GET), normalised path, query and `Authorization`.
struct Call {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    authorization: Option<String>,
    /// The request's headers, where Access's token is read for the audit
    /// log's actor (SPEC §13, v5).
    header_list: idemgate_core::headers::HeaderList,
    /// The end-to-end tests' hook: one of this act's audit writes fails.
    audit_hook: audit_client::AuditHook,
}

pub async fn handle(
    request: &web_sys::Request,
    method: &str,
    normalized_path: &str,
    query: Option<&str>,
    env: &Env,
) -> worker::Result<web_sys::Response> {
    let header_list = edge_http::header_list(&request.headers());
    let call = Call {
        method: method.to_string(),
        path: normalized_path.to_string(),
        query: query_pairs(query.unwrap_or("")),
        authorization: headers::get(&header_list, "authorization").map(str::to_string),
        audit_hook: audit_hook(env, &header_list),
        header_list,
    };
    if idemgate_core::operator::page::is_page(&call.path) {
        // The page holds no data and needs no token: every call it makes
        // carries the token (SPEC §10).
        return match idemgate_core::operator::page::serve(&call.method, &call.path) {
            Ok(file) => edge_http::response(&file),
            Err(problem) => edge_http::response(&render_problem(&problem)),
        };
    }
    let answer = match (call.method.as_str(), call.path.as_str()) {
        ("GET", "/__idemgate/health") => return health(env).await,
        ("GET", "/__idemgate/stats") => stats_route(&call, env),
        ("GET", "/__idemgate/summary") => summary(&call, env).await,
        ("GET" | "DELETE", "/__idemgate/receipts") => receipts(&call, env).await,
        ("POST", "/__idemgate/receipts/redrive") => redrive(&call, env).await,
        ("GET" | "POST", "/__idemgate/reconcile") => reconcile(&call, env).await,
        ("GET", "/__idemgate/audit") => audit(&call, env).await,
        #[cfg(feature = "test-hooks")]
        ("POST", "/__idemgate/test/index-shards") => test_index_shards(&call, env).await,
        _ => Err(Problem::NotFound),
    };
    match answer {
        Ok(response) => Ok(response),
        Err(problem) => edge_http::response(&render_problem(&problem)),
    }
}

/// `ok`, or that the Durable Object `binding` a route needs is missing.
fn binding_state(env: &Env, needed: bool, binding: &str) -> String {
    match needed && env.durable_object(binding).is_err() {
        true => format!("the {binding} binding is missing (wrangler.toml)"),
        false => "ok".into(),
    }
}

/// 200 whatever is wrong (the worker answers), and says what is: the
/// configuration (a broken route by its name and the setting at fault,
/// never a value) and the receipt index, which async delivery and the
/// sweep need. It needs no token, so it tells nothing more.
async fn health(env: &Env) -> worker::Result<web_sys::Response> {
    let (shards, legacy) = receipt_index::health(env).await;
    let index = match shards {
        Ok(()) => "ok".to_string(),
        Err(problem) => problem,
    };
    // A v4 deployment's D1 index, while its rows move into the shards
    // (SPEC §15, v5): empty, its binding can go.
    let legacy_index = match legacy {
        None => serde_json::Value::Null,
        Some(Ok(0)) => serde_json::json!({
            "rows": 0,
            "state": "empty: the IDEMGATE_INDEX binding can go",
        }),
        Some(Ok(rows)) => serde_json::json!({
            "rows": rows,
            "state": "moving into the index shards",
        }),
        Some(Err(_)) => serde_json::json!({ "state": "unavailable" }),
    };
    // Receipts whose row has not landed (SPEC §2b, v5): their objects'
    // own word, kept by each route's alert object.
    let owed_rows =
        match crate::alerts::owed_rows(env, crate::alert_object::OWED_NAMED_IN_HEALTH).await {
            Ok(view) => serde_json::to_value(view).unwrap_or_default(),
            Err(_) => serde_json::json!({ "state": "unavailable" }),
        };
    let configuration = match config_from_env(env) {
        Ok(config) => serde_json::json!({
            // A route that reconciles needs its objects' binding.
            "reconcile": binding_state(
                env,
                config.routes.iter().any(|route| route.reconcile.is_some()),
                crate::reconcile_object::RECONCILE_OBJECT_BINDING,
            ),
            // An ordered route's deliveries wait for their entity's object.
            "order": binding_state(
                env,
                config.routes.iter().any(|route| route.order.is_some()),
                crate::order_object::ORDER_OBJECT_BINDING,
            ),
            "routes": config.routes.iter().map(|route| route.name.as_str()).collect::<Vec<_>>(),
            "broken_routes": config.broken.iter().map(|broken| serde_json::json!({
                "route": broken.name,
                "setting": idemgate_core::problem::misconfigured_variable(&broken.problem),
            })).collect::<Vec<_>>(),
        }),
        Err(problem) => serde_json::json!({
            "refused": idemgate_core::problem::misconfigured_variable(&problem),
        }),
    };
    // ALERTS is read apart: broken, it sends nothing, and says so here.
    let alerts = match crate::alerts::config(env) {
        Ok(None) => "off".to_string(),
        Ok(Some(_))
            if env
                .durable_object(crate::alerts::ALERT_OBJECT_BINDING)
                .is_err() =>
        {
            "the ALERT_OBJECT binding is missing (wrangler.toml)".to_string()
        }
        Ok(Some(_)) => "ok".to_string(),
        Err(problem) => problem,
    };
    edge_http::json(
        200,
        &serde_json::json!({
            "status": "ok",
            "service": "idemgate",
            "configuration": configuration,
            "index": index,
            "legacy_index": legacy_index,
            "index_rows_not_landed": owed_rows,
            "alerts": alerts,
        }),
    )
}

/// Per route the token may see: how many receipts are queued, in flight,
/// failed and dead, and how long the oldest pending one has waited.
async fn summary(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let visible: Vec<&idemgate_core::config::RouteConfig> = config
        .routes
        .iter()
        .filter(|route| {
            authorize(route.admin_token.as_ref(), call.authorization.as_deref()).is_ok()
        })
        .collect();
    if visible.is_empty() {
        authorize(config.admin_token.as_ref(), call.authorization.as_deref())?;
    }
    let counts = receipt_index::summary(env).await?;
    let now = worker::Date::now().as_millis();
    let mut summary = idemgate_core::operator::summary(
        visible.iter().map(|route| route.name.as_str()),
        counts
            .iter()
            .map(|count| idemgate_core::operator::StateCount {
                route: &count.route,
                state: &count.state,
                count: count.count as u64,
                oldest_accepted_at: count.oldest.map(|at| at as u64),
            }),
        now,
    );
    // Flow control (SPEC §7, v3): per limited route, its coordinator's
    // permits in use and deliveries waiting.
    let limited = visible
        .iter()
        .filter_map(|route| Some((route.name.as_str(), route.flow?)));
    let statuses = futures::future::join_all(limited.map(|(name, limits)| async move {
        let status = flow_client::status(env, name, limits.shards).await;
        (name, limits, status.ok())
    }))
    .await;
    // Reconciliation (SPEC §11): per reconciled route, its last run and
    // the last day's counts.
    let reconciled = visible
        .iter()
        .filter(|route| route.reconcile.is_some())
        .map(|route| async move {
            let answer = reconcile_client::call(env, &route.name, ReconcileCall::Status).await;
            (route.name.as_str(), answer.ok().map(|answer| answer.body))
        });
    let reconciled = futures::future::join_all(reconciled).await;
    if let Some(routes) = summary["routes"].as_array_mut() {
        for (name, status) in reconciled {
            if let Some(entry) = routes.iter_mut().find(|entry| entry["route"] == name) {
                entry["reconcile"] = match status {
                    Some(mut status) => serde_json::json!({
                        "last_run": status["runs"].get_mut(0).map(serde_json::Value::take),
                        "last_day": status["last_day"].take(),
                    }),
                    None => {
                        serde_json::json!({ "error": "the route's reconciliation object could not be reached" })
                    }
                };
            }
        }
    }
    // Alerts (SPEC §13): each visible route's conditions, firing first.
    if matches!(crate::alerts::config(env), Ok(Some(_))) {
        let book = crate::alerts::view(env).await;
        if let Some(routes) = summary["routes"].as_array_mut() {
            for entry in routes.iter_mut() {
                let conditions: Vec<serde_json::Value> = match &book {
                    Ok(book) => book["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|condition| condition["route"] == entry["route"])
                        .cloned()
                        .collect(),
                    Err(_) => Vec::new(),
                };
                entry["alerts"] = serde_json::Value::Array(conditions);
            }
        }
        summary["alerts"] = match book {
            Ok(book) => serde_json::json!({
                "outbox": book["outbox"],
                "delivered": book["delivered"],
                "given_up": book["given_up"],
            }),
            Err(_) => serde_json::json!({ "error": "an alert object could not be reached" }),
        };
    }
    // The audit log's head (SPEC §13): its latest seq and hash.
    summary["audit"] = audit_client::head_summary(env).await;
    if let Some(routes) = summary["routes"].as_array_mut() {
        for (name, limits, status) in statuses {
            if let Some(entry) = routes.iter_mut().find(|entry| entry["route"] == name) {
                entry["flow"] = idemgate_core::operator::flow_summary(&limits, status.as_ref());
            }
        }
    }
    json(&summary)
}

/// A route's reconciliation (SPEC §11): `GET` its last 50 runs and its
/// cursor; `POST` a run now, answered with its record when it ends.
async fn reconcile(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let route = authorized_route(&config, call)?;
    if route.reconcile.is_none() {
        return Err(Problem::NotFound);
    }
    let op = match call.method.as_str() {
        "POST" => ReconcileCall::RunNow,
        _ => ReconcileCall::Status,
    };
    let run = async {
        let answer = reconcile_client::call(env, &route.name, op)
            .await
            .map_err(|message| Problem::StorageUnavailable {
                message: format!("the route's reconciliation object failed: {message}"),
            })?;
        let body = match answer.status {
            409 => serde_json::json!({
                "route": route.name,
                "running": true,
                "detail": "a run of this route is in progress: GET shows it once it has ended",
            }),
            _ => answer.body,
        };
        edge_http::json(answer.status, &body).map_err(|error| Problem::StorageUnavailable {
            message: error.to_string(),
        })
    };
    match call.method.as_str() {
        "POST" => {
            let intent = act(call, &config, "reconcile-now", &route.name, "route").await;
            audit_client::audited(env, intent, run).await
        }
        _ => run.await,
    }
}

/// `GET /__idemgate/audit` (SPEC §13): with `route=`, that route's
/// entries (its token suffices); without, the whole chain with the
/// deployment's token, or the entries of the routes a route's own token
/// opens (as the summary shows those routes alone).
async fn audit(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let authorization = call.authorization.as_deref();
    let routes = match call.query.iter().any(|(key, _)| key == "route") {
        true => Some(vec![authorized_route(&config, call)?.name.clone()]),
        false => match authorize(config.admin_token.as_ref(), authorization) {
            Ok(()) => None,
            Err(problem) => {
                let opened: Vec<String> = config
                    .routes
                    .iter()
                    .filter(|route| authorize(route.admin_token.as_ref(), authorization).is_ok())
                    .map(|route| route.name.clone())
                    .collect();
                if opened.is_empty() {
                    return Err(problem);
                }
                Some(opened)
            }
        },
    };
    json(&audit_client::page(env, routes, &call.query).await?)
}

/// Who acts on `route` (SPEC §13, v5): the email a verified Access token
/// names, else the kind of token the call presented. A bare email header
/// is what the caller says, and is never read.
async fn actor(call: &Call, config: &Config, route: &str) -> String {
    let email = crate::access::verified_email(config.access.as_ref(), &call.header_list).await;
    let token = match authorize(config.admin_token.as_ref(), call.authorization.as_deref()) {
        Ok(()) => TokenUsed::Deployment,
        Err(_) => TokenUsed::Route(route.to_string()),
    };
    idemgate_core::access::actor(email.as_deref(), &token)
}

/// The end-to-end tests' hook: every index shard of `route=` fails
/// (`fail=true`) or answers again. Never in the release worker.
#[cfg(feature = "test-hooks")]
async fn test_index_shards(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    authorize(config.admin_token.as_ref(), call.authorization.as_deref())?;
    let param = |name: &str| {
        call.query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let route = param("route").unwrap_or("default");
    let fail = param("fail") == Some("true");
    crate::test_hooks::fail_index_shards(env, route, fail)
        .await
        .map_err(|message| Problem::IndexUnavailable { message })?;
    json(&serde_json::json!({ "route": route, "failing": fail }))
}

/// An act's intent for the audit log.
async fn act(
    call: &Call,
    config: &Config,
    action: &'static str,
    route: &str,
    target: &str,
) -> audit_client::Act {
    audit_client::Act {
        actor: actor(call, config, route).await,
        action,
        route: route.to_string(),
        target: target.to_string(),
        hook: call.audit_hook,
    }
}

/// The end-to-end tests' hook: `X-Idemgate-Test-Audit: fail` makes the
/// act's intent write fail, `fail-result` its result's. Never in the
/// release worker.
#[cfg(feature = "test-hooks")]
fn audit_hook(_env: &Env, header_list: &[(String, String)]) -> audit_client::AuditHook {
    crate::test_hooks::audit_hook(header_list)
}

#[cfg(not(feature = "test-hooks"))]
fn audit_hook(_env: &Env, _header_list: &[(String, String)]) -> audit_client::AuditHook {
    audit_client::AuditHook::None
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
    if method == "DELETE" {
        let force = flag(query, "force")?;
        let op = ObjectOp::Purge {
            force,
            receipt_id: idemgate_core::operator::receipt_id(query)?,
        };
        let action = if force { "force-purge" } else { "purge" };
        let target = address.audit_target(idemgate_core::operator::receipt_id(query)?.as_deref());
        let intent = act(call, &config, action, &address.route, &target).await;
        return audit_client::audited(env, intent, async {
            // This isolate forgets the key at once; others within REPLAY_TTL_MS.
            with_replays(|cache| cache.evict_object(&address.object_name));
            object_client::ask_object(env, address.route.clone(), address.object_name.clone(), op)
                .await
        })
        .await;
    }
    object_client::ask_object(
        env,
        address.route,
        address.object_name,
        ObjectOp::ReadReceipt,
    )
    .await
}

/// `name=true` or `name=false` (absent: false).
fn flag(query: &[(String, String)], name: &str) -> Result<bool, Problem> {
    match query
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
    {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(Problem::InvalidKey {
            source: "query".into(),
            reason: format!("{name}= is true or false"),
        }),
    }
}

/// One receipt by its key, or (SPEC §7, v4) a route's receipts by state
/// and acceptance time, a page per call (`bulk_redrive`).
async fn redrive(call: &Call, env: &Env) -> Result<web_sys::Response, Problem> {
    let config = config_from_env(env)?;
    let route = authorized_route(&config, call)?;
    let has = |name: &str| call.query.iter().any(|(key, _)| key == name);
    if has("state") && !has("key") {
        return crate::bulk_redrive::redrive(
            env,
            route,
            &call.query,
            actor(call, &config, &route.name).await,
            call.audit_hook,
        )
        .await;
    }
    let address = receipt_address(route, &call.query)?;
    let receipt_id = idemgate_core::operator::receipt_id(&call.query)?;
    let target = address.audit_target(receipt_id.as_deref());
    let intent = act(call, &config, "redrive", &address.route, &target).await;
    audit_client::audited(
        env,
        intent,
        object_client::ask_object(
            env,
            address.route.clone(),
            address.object_name.clone(),
            ObjectOp::Redrive { receipt_id },
        ),
    )
    .await
}
