//! Re-drive by filter (SPEC §7, v4): `POST /__idemgate/receipts/redrive
//! ?route=R&state=S[&since=T][&until=T][&dry_run=true][&cursor=C]`.
//!
//! A dry run counts what the filter names and shows a sample, and changes
//! nothing (it is not an act, so it is not audited). Otherwise one page of
//! the filter (at most the listing's page) is re-driven per call, on the
//! record (SPEC §13): each receipt is queued again with a fresh schedule,
//! and its attempt asks the route's coordinator for a permit like any
//! other, so a large re-drive reaches the origin at the route's pace, not
//! all at once. The answer's `cursor` continues.

use futures::StreamExt;
use worker::{web_sys, Env};

use idemgate_core::config::RouteConfig;
use idemgate_core::object_call::ObjectOp;
use idemgate_core::operator::redrive_filter::{bulk_filter, SAMPLE};
use idemgate_core::problem::Problem;

use crate::audit_client::{self, Act, AuditHook};
use crate::{edge_http, receipt_index};

/// Object calls a page makes at once: each only queues its receipt.
const CONCURRENT_CALLS: usize = 8;

pub async fn redrive(
    env: &Env,
    route: &RouteConfig,
    query: &[(String, String)],
    actor: String,
    hook: AuditHook,
) -> Result<web_sys::Response, Problem> {
    let filter = bulk_filter(route, query)?;
    let bounds = serde_json::json!({
        "route": filter.listing.route,
        "state": filter.listing.state,
        "since": filter.since,
        "until": filter.until,
    });
    if filter.dry_run {
        let count = receipt_index::count_filtered(env, &filter).await?;
        let (rows, _) = receipt_index::list_filtered(env, &filter).await?;
        let sample: Vec<_> = rows.into_iter().take(SAMPLE).collect();
        let mut body = bounds;
        body["dry_run"] = true.into();
        body["count"] = count.into();
        body["sample"] = serde_json::to_value(sample).unwrap_or_default();
        return json(&body);
    }
    let open = audit_client::begin(
        env,
        Act {
            actor,
            action: "bulk-redrive",
            route: route.name.clone(),
            target: filter.target(),
            hook,
        },
    )
    .await?;
    let page = receipt_index::list_filtered(env, &filter).await;
    let (rows, next) = match page {
        Ok(page) => page,
        Err(problem) => {
            let result = format!("{} {}", problem.status(), problem.name());
            audit_client::finish(env, &open, result).await;
            return Err(problem);
        }
    };
    let calls = rows.iter().map(|row| {
        crate::object_client::ask_object(
            env,
            row.route.clone(),
            row.object.clone(),
            // Only the life the row names: a newer one is not this
            // receipt, and its schedule is left as it is.
            ObjectOp::Redrive {
                receipt_id: Some(row.receipt_id.clone()),
            },
        )
    });
    let answers = futures::stream::iter(calls)
        .buffer_unordered(CONCURRENT_CALLS)
        .collect::<Vec<_>>()
        .await;
    let redriven = answers
        .iter()
        .filter(|answer| {
            answer
                .as_ref()
                .is_ok_and(|response| response.status() == 202)
        })
        .count();
    let failed = answers.len() - redriven;
    let mut body = bounds;
    body["redriven"] = redriven.into();
    body["failed"] = failed.into();
    body["cursor"] = next.map(|cursor| cursor.encode()).into();
    let answer = json(&body);
    let recorded = audit_client::finish(
        env,
        &open,
        format!("200 redriven={redriven} failed={failed}"),
    )
    .await;
    match recorded {
        true => answer,
        false => audit_client::mark_pending(answer),
    }
}

fn json(value: &serde_json::Value) -> Result<web_sys::Response, Problem> {
    edge_http::json(200, value).map_err(|error| Problem::StorageUnavailable {
        message: error.to_string(),
    })
}
