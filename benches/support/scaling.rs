//! How the figures grow with the number of distinct keys (one Durable
//! Object each) and with the duplicates each key receives, on one gateway
//! without the inspector: the workerd process's CPU per request (worker
//! and objects together) and the object requests per delivery, from the
//! isolate's counters. The body-size curve is `bodies.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::machine;
use crate::support::{self, client, Gateway, TestOrigin};
use crate::{counter, stats, ADMIN_TOKEN, BODY, CONCURRENCY};

/// Keys are created in steps of this many; each step is one point.
const KEY_STEP: usize = 1_000;

/// How keys are sent: in steps of `step`, at most `per_second` first
/// deliveries a second (`None`: as fast as the connections go). Paced,
/// local workerd evicts idle objects as fast as new ones come, so the
/// curve can reach 100,000 keys (`SCALING_KEYS=100000 SCALING_STEP=10000
/// SCALING_RATE=60`, about half an hour); unpaced, its SQLite heap holds
/// about 4,300 live objects.
#[derive(Clone, Copy)]
pub struct Pace {
    pub step: usize,
    pub per_second: Option<f64>,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            step: KEY_STEP,
            per_second: None,
        }
    }
}
/// Duplicates per key measured.
const DUPLICATES: [usize; 4] = [1, 10, 100, 1_000];

/// Keys for `duplicates` per key: at least 1,000 requests per point (the
/// process's CPU is counted in 10 ms ticks), and at least as many keys as
/// connections.
fn keys_for(duplicates: usize) -> usize {
    (1_000 / duplicates).max(CONCURRENCY)
}

/// `keys` distinct keys in steps of [`KEY_STEP`] (locally, workerd's
/// SQLite heap holds about 4,300 live objects: see docs/benchmarks.md),
/// then the duplicates curve on a fresh gateway (its 1,140 keys would
/// otherwise cross that line).
pub async fn scaling(keys: usize, pace: Pace) -> Value {
    let origin = TestOrigin::start().await;
    let origin_url = origin.url();
    let vars = [
        ("ORIGIN_URL", origin_url.as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let gateway = Gateway::start_without_inspector(&vars).await;
    let cpu = machine::cpu_clock(gateway.process_group());
    let mut by_keys = Vec::new();
    for step in 0..keys.div_ceil(pace.step) {
        let first = step * pace.step;
        let count = pace.step.min(keys - first);
        let sends: Vec<(String, usize)> = (first..first + count)
            .map(|index| (format!("scale-key-{index}"), 1))
            .collect();
        let mut row = measure(&gateway, &cpu, "bench-scale-keys", sends, pace.per_second).await;
        // Unpaced, every object is still alive; paced, the keys so far.
        row["live_objects"] = json!(first + count);
        row["paced_per_second"] = json!(pace.per_second);
        by_keys.push(row);
    }
    drop(gateway);
    let gateway = Gateway::start_without_inspector(&vars).await;
    let cpu = machine::cpu_clock(gateway.process_group());
    let mut by_duplicates = Vec::new();
    for duplicates in DUPLICATES {
        let sends: Vec<(String, usize)> = (0..keys_for(duplicates))
            .map(|index| (format!("scale-dup-{duplicates}-{index}"), duplicates))
            .collect();
        let mut row = measure(&gateway, &cpu, "bench-scale-duplicates", sends, None).await;
        row["duplicates_per_key"] = json!(duplicates);
        by_duplicates.push(row);
    }
    json!({ "by_keys": by_keys, "by_duplicates": by_duplicates })
}

/// Sends each key its number of identical deliveries over
/// [`CONCURRENCY`] connections (a key's own deliveries one after the
/// other, so the first completes before its duplicates arrive), keys
/// started at most `per_second` a second, and returns CPU and object
/// requests per request.
async fn measure(
    gateway: &Gateway,
    cpu: &impl Fn() -> Option<f64>,
    route: &str,
    sends: Vec<(String, usize)>,
    per_second: Option<f64>,
) -> Value {
    let requests: usize = sends.iter().map(|(_, count)| count).sum();
    let slots = Arc::new(Semaphore::new(CONCURRENCY));
    let url = gateway.url(&format!("/{route}/pay"));
    let before = stats(gateway).await;
    let cpu_before = cpu();
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for (index, (key, count)) in sends.into_iter().enumerate() {
        if let Some(rate) = per_second {
            let due = started + Duration::from_secs_f64(index as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let (slots, url, client) = (slots.clone(), url.clone(), client());
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let mut failed = 0;
            for _ in 0..count {
                let reply = support::post_json(&client, &url, Some(&key), BODY).await;
                failed += usize::from(reply.status >= 300);
            }
            failed
        });
    }
    let failed: usize = tasks.join_all().await.into_iter().sum();
    let seconds = started.elapsed().as_secs_f64();
    let cpu_after = cpu();
    let after = stats(gateway).await;
    let per_request = |name: &str| counter(&before, &after, name) / requests as f64;
    json!({
        "requests": requests,
        "failed": failed,
        "per_second": requests as f64 / seconds,
        "cpu_ms_per_request": match (cpu_before, cpu_after) {
            (Some(before), Some(after)) => json!((after - before) * 1000.0 / requests as f64),
            _ => Value::Null,
        },
        "object_requests_per_request": per_request("object_requests"),
        "cache_hits_per_request": per_request("cache_hits"),
    })
}

pub fn print(scaling: &Value) {
    let ms = |row: &Value, name: &str| row[name].as_f64().unwrap_or(f64::NAN);
    println!("\nScaling: first deliveries as distinct keys grow (workerd CPU per request)");
    for row in scaling["by_keys"].as_array().into_iter().flatten() {
        println!(
            "  {:>6} keys  {:>7.0} req/s  {:>6.2} ms  {} failed",
            row["live_objects"],
            ms(row, "per_second"),
            ms(row, "cpu_ms_per_request"),
            row["failed"]
        );
    }
    println!("Scaling: duplicates per key (CPU and object requests per delivery)");
    for row in scaling["by_duplicates"].as_array().into_iter().flatten() {
        println!(
            "  {:>6} per key  {:>7.0} req/s  {:>6.2} ms  {:>5.3} object requests  {} failed",
            row["duplicates_per_key"],
            ms(row, "per_second"),
            ms(row, "cpu_ms_per_request"),
            ms(row, "object_requests_per_request"),
            row["failed"]
        );
    }
}
