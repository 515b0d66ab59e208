//! The latency idemgate adds (SPEC §14, v5): p50 and p99 of a first
//! delivery, a replay and an async acknowledgement through idemgate, minus
//! the same request sent to the origin directly, measured in the same run
//! at a few concurrencies (closed loops: each connection sends its next
//! request once the last was answered); beside it the reference worker's
//! (and, with `BENCH_PEER`, the TypeScript peer's) first delivery and
//! replay, each without the inspector.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::support::{client, Gateway, TestOrigin};
use crate::{ADMIN_TOKEN, BODY};

const CONCURRENCIES: [usize; 3] = [1, 8, 32];
const SECONDS: u64 = 3;

fn routes() -> String {
    json!({
        "sync": {"path": "/lat-sync"},
        "queue": {"path": "/lat-async", "delivery": "async"},
    })
    .to_string()
}

/// p50 and p99, in milliseconds, of `concurrency` connections sending
/// `url` (with a key of `key(n)`, when given) for [`SECONDS`].
async fn measure(
    url: String,
    concurrency: usize,
    key: fn(u64) -> Option<String>,
) -> (f64, f64, u64) {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency {
        let (url, latencies, counter) = (url.clone(), latencies.clone(), counter.clone());
        tasks.spawn(async move {
            let client = client();
            while started.elapsed() < Duration::from_secs(SECONDS) {
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let mut request = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(BODY);
                if let Some(key) = key(n) {
                    request = request.header("idempotency-key", key);
                }
                let sent = Instant::now();
                if let Ok(response) = request.send().await {
                    let _ = response.bytes().await;
                }
                latencies
                    .lock()
                    .unwrap()
                    .push(sent.elapsed().as_secs_f64() * 1000.0);
            }
        });
    }
    tasks.join_all().await;
    let mut sorted = latencies.lock().unwrap().clone();
    sorted.sort_by(f64::total_cmp);
    let at = |fraction: f64| sorted[((sorted.len() - 1) as f64 * fraction).round() as usize];
    (at(0.50), at(0.99), sorted.len() as u64)
}

fn fresh(n: u64) -> Option<String> {
    Some(format!("lat-{}-{n}", std::process::id()))
}

fn same(_: u64) -> Option<String> {
    Some(format!("lat-replay-{}", std::process::id()))
}

fn none(_: u64) -> Option<String> {
    None
}

/// A gateway measured: its name, and the paths of its kinds (the
/// reference has no async acknowledgement).
struct Measured {
    name: &'static str,
    gateway: Gateway,
    sync_path: &'static str,
    async_path: Option<&'static str>,
}

pub async fn latency() -> Value {
    let origin = TestOrigin::start().await;
    let routes = routes();
    let mut gateways = vec![Measured {
        name: "idemgate",
        gateway: Gateway::start_without_inspector(&[
            ("ROUTES", routes.as_str()),
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ])
        .await,
        sync_path: "/lat-sync/pay",
        async_path: Some("/lat-async/pay"),
    }];
    gateways.push(Measured {
        name: "reference",
        gateway: Gateway::start_reference(&origin.url(), false).await,
        sync_path: "/lat-sync/pay",
        async_path: None,
    });
    if let Some(config) = std::env::var_os("BENCH_PEER") {
        gateways.push(Measured {
            name: "peer",
            gateway: Gateway::start_peer(std::path::Path::new(&config), &origin.url(), false).await,
            sync_path: "/lat-sync/pay",
            async_path: None,
        });
    }
    // The replayed key, and a warm-up of every path.
    for measured in &gateways {
        let _ = client()
            .post(measured.gateway.url(measured.sync_path))
            .header("content-type", "application/json")
            .header("idempotency-key", same(0).unwrap())
            .body(BODY)
            .send()
            .await;
        measure(measured.gateway.url("/lat-sync/warm"), 4, fresh).await;
    }
    measure(origin.url() + "/lat-direct/warm", 4, fresh).await;
    let mut rows = Vec::new();
    for concurrency in CONCURRENCIES {
        let direct = measure(origin.url() + "/lat-direct/pay", concurrency, none).await;
        for measured in &gateways {
            let sync = measured.gateway.url(measured.sync_path);
            let mut kinds = vec![
                (
                    "first delivery",
                    sync.clone(),
                    fresh as fn(u64) -> Option<String>,
                ),
                ("replay", sync, same),
            ];
            if let Some(path) = measured.async_path {
                kinds.push(("async acknowledgement", measured.gateway.url(path), fresh));
            }
            for (kind, url, key) in kinds {
                let (p50, p99, requests) = measure(url, concurrency, key).await;
                rows.push(json!({
                    "gateway": measured.name,
                    "kind": kind,
                    "concurrency": concurrency,
                    "requests": requests,
                    "p50_ms": p50,
                    "p99_ms": p99,
                    "direct_p50_ms": direct.0,
                    "direct_p99_ms": direct.1,
                    "added_p50_ms": p50 - direct.0,
                    "added_p99_ms": p99 - direct.1,
                }));
            }
        }
    }
    json!({ "seconds": SECONDS, "rows": rows })
}

pub fn print(latency: &Value) {
    println!(
        "\nlatency added (through the gateway minus the origin directly, same run, {} s a point; the reference has no async acknowledgement):",
        latency["seconds"]
    );
    println!("| gateway | request | connections | p50 (ms) | added p50 | p99 (ms) | added p99 |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for row in latency["rows"].as_array().into_iter().flatten() {
        let number = |name: &str| row[name].as_f64().unwrap_or(0.0);
        println!(
            "| {} | {} | {} | {:.2} | {:+.2} | {:.2} | {:+.2} |",
            row["gateway"].as_str().unwrap_or("idemgate"),
            row["kind"].as_str().unwrap_or(""),
            row["concurrency"],
            number("p50_ms"),
            number("added_p50_ms"),
            number("p99_ms"),
            number("added_p99_ms"),
        );
    }
}
