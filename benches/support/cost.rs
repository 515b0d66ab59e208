//! What a delivery costs: Durable Object requests, rows written, index
//! writes and log lines per kind of delivery, counted by the worker; the
//! wasm's size; the core's own CPU per delivery.

use super::*;

/// What one delivery of each kind costs: Durable Object requests, log
/// lines and metric points (counted by the isolate) and storage operations
/// (counted by the object), as Cloudflare bills them.
pub(crate) async fn cost(gateway: &Gateway) -> Value {
    let client = client();
    let mut rows = Vec::new();
    let zero = json!({"reads": 0, "writes": 0, "alarm_writes": 0, "index_writes": 0});
    let delta = |after: &Value, before: &Value, per: f64| {
        let field = |name: &str| {
            (after[name].as_f64().unwrap_or(0.0) - before[name].as_f64().unwrap_or(0.0)) / per
        };
        json!({
            "reads": field("reads"),
            "writes": field("writes"),
            "alarm_writes": field("alarm_writes"),
            "index_writes": field("index_writes"),
        })
    };
    let counted = |before: &Value, after: &Value, per: f64| {
        json!({
            "object_requests": counter(before, after, "object_requests") / per,
            "log_lines": counter(before, after, "log_lines") / per,
            "metric_points": counter(before, after, "metric_points") / per,
        })
    };
    let row = |kind: &str, counts: Value, storage: Value| {
        let mut row = counts;
        row["kind"] = json!(kind);
        row["storage"] = storage;
        row
    };

    let path = "/cost-first/pay";
    let before = stats(gateway).await;
    post(&client, &gateway.url(path), "cost-first").await;
    let after = stats(gateway).await;
    let first = object_ops(gateway, "cost-first", path).await;
    rows.push(row(
        "first delivery",
        counted(&before, &after, 1.0),
        delta(&first, &zero, 1.0),
    ));

    let before = stats(gateway).await;
    for _ in 0..10 {
        post(&client, &gateway.url(path), "cost-first").await;
    }
    let after = stats(gateway).await;
    let replayed = object_ops(gateway, "cost-first", path).await;
    rows.push(row(
        "replay",
        counted(&before, &after, 10.0),
        delta(&replayed, &first, 10.0),
    ));

    let path = "/cost-wait/slow/300/pay";
    let before = stats(gateway).await;
    let mut storm = JoinSet::new();
    for _ in 0..10 {
        let (client, url) = (client.clone(), gateway.url(path));
        storm.spawn(async move { post(&client, &url, "cost-wait").await });
    }
    storm.join_all().await;
    let after = stats(gateway).await;
    let waited = object_ops(gateway, "cost-wait", path).await;
    // Nine of the ten waited; the first is a first delivery.
    let mut counts = counted(&before, &after, 1.0);
    for name in ["object_requests", "log_lines", "metric_points"] {
        counts[name] = json!((counts[name].as_f64().unwrap() - 1.0) / 9.0);
    }
    rows.push(row(
        "duplicate under wait",
        counts,
        delta(&waited, &first, 9.0),
    ));

    let path = "/cost-fail/status/503/pay";
    let before = stats(gateway).await;
    post(&client, &gateway.url(path), "cost-fail").await;
    let after = stats(gateway).await;
    let failed = object_ops(gateway, "cost-fail", path).await;
    rows.push(row(
        "failure",
        counted(&before, &after, 1.0),
        delta(&failed, &zero, 1.0),
    ));
    Value::Array(rows)
}

/// The attempts of `receipt` that alarms made: all but a first attempt
/// the accepting call made, which began in the same millisecond as the
/// receipt (an alarm fires later).
pub(crate) fn alarm_attempts(receipt: &Value) -> usize {
    let first_seen_at = &receipt["first_seen_at"];
    receipt["attempts"].as_array().map_or(0, |attempts| {
        attempts
            .iter()
            .filter(|attempt| attempt["started_at"] != *first_seen_at)
            .count()
    })
}

/// What one async delivery costs, from acknowledgement to completion, on a
/// gateway of its own (`DELIVERY=async`); the alarm that later expires the
/// receipt is one more Durable Object request and one delete.
pub(crate) async fn async_cost(origin: &TestOrigin) -> Value {
    let gateway = Gateway::start_logging(
        tempfile::tempdir().unwrap(),
        &[
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
            ("DELIVERY", "async"),
        ],
        "warn",
    )
    .await;
    let client = client();
    let path = "/cost-async/pay";
    let before = stats(&gateway).await;
    let ack = post(&client, &gateway.url(path), "cost-async").await;
    assert_eq!(ack.status, 202);
    let mut receipt = Value::Null;
    for _ in 0..100 {
        receipt = support::read_receipt(&gateway, ADMIN_TOKEN, "cost-async", path)
            .await
            .json();
        if receipt["state"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = stats(&gateway).await;
    let ops = &receipt["object_storage_ops"];
    // The receipt reads themselves are operator calls, not the delivery's.
    let reads_made = counter(&before, &after, "object_requests") - 1.0;
    json!({
        "kind": "async delivery",
        "state": receipt["state"],
        "object_requests": 1.0,
        "alarm_invocations": alarm_attempts(&receipt),
        "operator_reads_while_waiting": reads_made,
        "log_lines": counter(&before, &after, "log_lines"),
        "metric_points": counter(&before, &after, "metric_points"),
        "storage": {
            "reads": ops["reads"],
            "writes": ops["writes"],
            "alarm_writes": ops["alarm_writes"],
            "index_writes": ops["index_writes"],
        },
    })
}

/// The release wasm's size: `build/`'s, or the build the benchmark was
/// pointed at (`IDEMGATE_WORKER_BUILD`, the table of optimisation levels).
pub(crate) fn wasm_size() -> Value {
    let dir = std::env::var("IDEMGATE_WORKER_BUILD").unwrap_or_else(|_| "build".to_string());
    let path = root().join(dir).join("index_bg.wasm");
    let wasm = std::fs::read(&path).unwrap_or_default();
    let gzip = std::process::Command::new("gzip")
        .args(["-9c"])
        .arg(&path)
        .output()
        .map(|output| output.stdout.len())
        .unwrap_or(0);
    json!({"raw_bytes": wasm.len(), "gzip_bytes": gzip})
}

/// Criterion's estimates from `cargo bench --bench core`, if it ran:
/// admission per body size, and the parts of a 64 KiB one.
pub(crate) fn core_cost() -> Value {
    let median_us = |bench: &str| {
        let path = root().join(format!("target/criterion/{bench}/new/estimates.json"));
        let text = std::fs::read_to_string(path).ok()?;
        let estimates: Value = serde_json::from_str(&text).ok()?;
        Some(estimates["median"]["point_estimate"].as_f64()? / 1000.0)
    };
    let mut rows = Vec::new();
    for (body, bench) in [
        ("1KiB", "admit/1KiB"),
        ("64KiB", "admit/64KiB"),
        (
            "64KiB canonical, one pass",
            "admit-64KiB-parts/canonical-one-pass",
        ),
        ("64KiB canonical, tree", "admit-64KiB-parts/canonical-tree"),
        ("64KiB sha256", "admit-64KiB-parts/sha256"),
    ] {
        if let Some(median) = median_us(bench) {
            rows.push(json!({"body": body, "median_us": median}));
        }
    }
    Value::Array(rows)
}
