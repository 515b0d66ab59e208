//! The audit log as the operator API reaches it (SPEC §13): one RPC call
//! to the deployment's `AuditLog` object, and the rule that every act is
//! on record before its answer.
//!
//! An act runs as [`audited`]: its intent is written first, and if that
//! write fails the act is not done and the operator gets 503
//! `storage-unavailable` (nothing was done; retrying is safe). The act
//! then runs, and its result becomes the chain's entry. If that second
//! write fails, the act was done and its answer is given as it is (a 503
//! would invite a retry of an act that happened), with `Idemgate-Audit:
//! pending`: the writer settles the open intent into an entry whose
//! result is `unknown` ([`idemgate_core::audit::SETTLE_AFTER_MS`]).

use std::future::Future;

use worker::{web_sys, Env};

use idemgate_core::audit::{AuditCall, Begun, Intent, Page, EXPORT_PAGE, PAGE, WRITER_NAME};
use idemgate_core::problem::Problem;

use crate::audit_object::AUDIT_LOG_BINDING;
use crate::stats;

/// Sends `call` to the writer; answers its reply's line. An error is a
/// writer that could not be reached, or a write that failed.
pub async fn call(env: &Env, call: &AuditCall) -> Result<String, String> {
    stats::record(|stats| stats.object_requests += 1);
    let line = serde_json::to_string(call).expect("a call serializes");
    crate::object_rpc::call(
        env,
        AUDIT_LOG_BINDING,
        WRITER_NAME,
        None,
        &line,
        "audit log",
    )
    .await
}

/// The end-to-end tests' hook (`X-Idemgate-Test-Audit`): which of an
/// act's two writes fails. Always `None` in the release worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuditHook {
    #[default]
    None,
    /// `fail`: the intent's write.
    FailIntent,
    /// `fail-result`: the result's write.
    FailResult,
}

/// Who is acting, on what: an operator act's intent.
pub struct Act {
    pub actor: String,
    pub action: &'static str,
    pub route: String,
    pub target: String,
    pub hook: AuditHook,
}

/// An intent on record, waiting for its act's result.
pub struct Open {
    id: u64,
    hook: AuditHook,
}

/// Writes `act`'s intent; a failure refuses the act (503).
pub async fn begin(env: &Env, act: Act) -> Result<Open, Problem> {
    let hook = act.hook;
    let intent = Intent {
        at: worker::Date::now().as_millis(),
        actor: act.actor,
        action: act.action.to_string(),
        route: act.route,
        target: act.target,
    };
    let begun = call(
        env,
        &AuditCall::Begin {
            intent,
            fail: hook == AuditHook::FailIntent,
        },
    )
    .await
    .and_then(|line| serde_json::from_str::<Begun>(&line).map_err(|error| error.to_string()));
    begun
        .map(|begun| Open {
            id: begun.intent_id,
            hook,
        })
        .map_err(|message| Problem::StorageUnavailable {
            message: format!(
                "the audit log could not record this act, so it was not done (retrying is safe): {message}"
            ),
        })
}

/// Records the act's result; `false` when that write failed (the intent
/// stays open and is settled as `unknown`).
pub async fn finish(env: &Env, open: &Open, result: String) -> bool {
    let finish = AuditCall::Finish {
        intent_id: open.id,
        result,
        fail: open.hook == AuditHook::FailResult,
    };
    call(env, &finish).await.is_ok()
}

/// How an answer is recorded: its status, and a problem's type.
pub fn result_of(answer: &Result<web_sys::Response, Problem>) -> String {
    match answer {
        Ok(response) => response.status().to_string(),
        Err(problem) => format!("{} {}", problem.status(), problem.name()),
    }
}

/// Marks an answer whose audit entry is still open.
pub fn mark_pending(
    answer: Result<web_sys::Response, Problem>,
) -> Result<web_sys::Response, Problem> {
    if let Ok(response) = &answer {
        // Headers of a response built here are mutable.
        let _ = response.headers().set("idemgate-audit", "pending");
    }
    answer
}

/// Runs `act` on the record: its intent first (a failure refuses it with
/// 503 and `act` never runs), then its result.
pub async fn audited<F>(env: &Env, intent: Act, act: F) -> Result<web_sys::Response, Problem>
where
    F: Future<Output = Result<web_sys::Response, Problem>>,
{
    let open = begin(env, intent).await?;
    let answer = act.await;
    match finish(env, &open, result_of(&answer)).await {
        true => answer,
        false => mark_pending(answer),
    }
}

/// `GET /__idemgate/audit[?route=R][&cursor=C]`: the chain newest first,
/// a page at a time; `order=oldest[&cursor=C]` exports it oldest first
/// (every route), for verification.
pub async fn page(
    env: &Env,
    routes: Option<Vec<String>>,
    query: &[(String, String)],
) -> Result<serde_json::Value, Problem> {
    let find = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let bad = |reason: &str| Problem::InvalidKey {
        source: "query".into(),
        reason: reason.into(),
    };
    let cursor = find("cursor")
        .map(|text| {
            text.parse::<u64>()
                .map_err(|_| bad("cursor= is not one this API gave"))
        })
        .transpose()?;
    let whole_chain = routes.is_none();
    let request = match find("order") {
        None | Some("newest") => AuditCall::Page {
            routes,
            before: cursor,
            limit: PAGE,
        },
        Some("oldest") if routes.is_none() => AuditCall::Export {
            after: cursor.unwrap_or(0),
            limit: EXPORT_PAGE,
        },
        Some("oldest") => {
            return Err(bad(
                "order=oldest exports the whole chain: leave route= out, with the top-level ADMIN_TOKEN",
            ))
        }
        Some(_) => return Err(bad("order= is newest or oldest")),
    };
    let line = call(env, &request)
        .await
        .map_err(|message| Problem::StorageUnavailable {
            message: format!("the audit log could not be read: {message}"),
        })?;
    let page: Page = serde_json::from_str(&line).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })?;
    Ok(page.answer(whole_chain))
}

/// The summary's audit: the chain's head, or that it could not be read.
pub async fn head_summary(env: &Env) -> serde_json::Value {
    match call(env, &AuditCall::Head).await {
        Ok(line) => serde_json::from_str(&line).unwrap_or_default(),
        Err(_) => serde_json::json!({ "unreachable": true }),
    }
}
