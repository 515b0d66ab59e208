//! The operator API under `/__idemgate/` (SPEC §7): health, and reading or
//! purging one key's receipt. Never forwarded, never deduplicated.

use subtle::ConstantTimeEq;
use worker::{web_sys, Env, Request, Response};

use crate::answer::render_problem;
use crate::config::Config;
use crate::edge_cache::with_replays;
use crate::edge_http;
use crate::env::config_from_env;
use crate::key::{IdempotencyKey, KeySource, Scope};
use crate::object_call::ObjectOp;
use crate::object_client;
use crate::problem::Problem;
use crate::signature::Secret;
use crate::stats;

/// `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time. With
/// no token configured the receipt routes do not exist (404).
pub fn authorize(admin_token: Option<&str>, authorization: Option<&str>) -> Result<(), Problem> {
    let Some(expected) = admin_token else {
        return Err(Problem::NotFound);
    };
    let presented = authorization
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(Problem::Unauthorized)
    }
}

/// The Durable Object name a receipt query refers to: `key`, `path` (when
/// keys are scoped by path) and `tenant` (the raw tenant header value, when
/// `TENANT_HEADER` is set).
pub fn receipt_object_name(config: &Config, query: &[(String, String)]) -> Result<String, Problem> {
    let param = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let key = IdempotencyKey::parse(param("key").unwrap_or(""), &KeySource::Header("key".into()))?;
    let scope = Scope {
        kind: config.key_scope,
        path: param("path").unwrap_or("/"),
        tenant: match &config.tenant_header {
            Some(header) => Some(param("tenant").ok_or_else(|| Problem::MissingTenant {
                header: header.clone(),
            })?),
            None => None,
        },
    };
    Ok(scope.object_name(&key))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_token_configured_hides_the_routes() {
        assert_eq!(authorize(None, Some("Bearer x")), Err(Problem::NotFound));
    }

    #[test]
    fn wrong_or_missing_token_is_401_and_right_one_passes() {
        assert_eq!(authorize(Some("s3cret"), None), Err(Problem::Unauthorized));
        assert_eq!(
            authorize(Some("s3cret"), Some("Bearer nope")),
            Err(Problem::Unauthorized)
        );
        assert_eq!(
            authorize(Some("s3cret"), Some("s3cret")),
            Err(Problem::Unauthorized)
        );
        assert_eq!(authorize(Some("s3cret"), Some("Bearer s3cret")), Ok(()));
    }
}
