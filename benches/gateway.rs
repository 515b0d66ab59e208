//! The gateway benchmark: the release worker under `wrangler dev` in front
//! of a real Rust origin (well under a millisecond per answer, and a 300 ms
//! variant), measured in one run so that every figure has a baseline from
//! the same machine and minute. Prints a table, and writes the same numbers
//! to `benches/results/latest.json` for `benches/tools/chart.py`.
//!
//! `scripts/bench` is the one command (it builds, then runs this).
//! `BENCH_SECONDS` sets each throughput run (default 5); `DRAIN_KEYS` the
//! flow-control backlog (default 4,000); `SCALING_KEYS` the distinct keys
//! of the scaling curve (default 4,000), `SCALING_STEP` its keys a point
//! and `SCALING_RATE` its pace (see `support/scaling.rs`); `BENCH_ONLY=drain`,
//! `BENCH_ONLY=bodies`, `BENCH_ONLY=scaling` or `BENCH_ONLY=storms` (100 x
//! 100 storms under the command, `STORM_REPEATS` of them, with their
//! failures by kind) or `BENCH_ONLY=cpu` (the isolate CPU table alone,
//! `CPU_ROUNDS` times) runs only that part.

#[path = "support/bodies.rs"]
mod bodies;
#[path = "support/drain.rs"]
mod drain;
#[path = "support/isolate_cpu.rs"]
mod isolate_cpu;
#[path = "support/machine.rs"]
mod machine;
#[path = "../crates/idemgate-core/benches/support/payment_body.rs"]
mod payment_body;
#[path = "support/scaling.rs"]
mod scaling;
#[path = "../tests/e2e/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{client, Gateway, Reply, TestOrigin};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub(crate) const CONCURRENCY: usize = 20;
/// How long each kind of request runs, unmeasured, before it is measured.
const WARM_UP: Duration = Duration::from_secs(3);
/// Most connections a storm holds open at once: 10,000 simultaneous
/// connects overflow the listen backlog of `wrangler dev` (the kernel's SYN
/// retries then dominate), and 1,000 get connections reset. A 100 x 100 storm is 10,000 requests issued
/// over this many connections; the floor it is compared with uses the same.
const STORM_CONNECTIONS: usize = 250;
pub(crate) const ADMIN_TOKEN: &str = "bench-admin-token";
pub(crate) const BODY: &str = r#"{"amount":1000,"currency":"eur","customer":"cus_1"}"#;

/// One closed-loop run: `CONCURRENCY` connections, each sending the next
/// request as soon as its last one was answered.
#[derive(Debug, Clone)]
struct Load {
    requests: u64,
    errors: u64,
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
}

fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

/// Request `n` of a run is built by `request(client, first_index + n)`.
async fn closed_loop<F>(duration: Duration, first_index: u64, request: F) -> Load
where
    F: Fn(&reqwest::Client, u64) -> reqwest::RequestBuilder + Send + Sync + 'static,
{
    let request = Arc::new(request);
    let counter = Arc::new(AtomicU64::new(first_index));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..CONCURRENCY {
        let (request, counter, latencies, errors) = (
            request.clone(),
            counter.clone(),
            latencies.clone(),
            errors.clone(),
        );
        workers.spawn(async move {
            let client = client();
            while started.elapsed() < duration {
                let index = counter.fetch_add(1, Ordering::Relaxed);
                let sent = Instant::now();
                let ok = match request(&client, index).send().await {
                    Ok(response) => {
                        let success = response.status().is_success();
                        success && response.bytes().await.is_ok()
                    }
                    Err(_) => false,
                };
                if !ok {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                latencies
                    .lock()
                    .unwrap()
                    .push(sent.elapsed().as_secs_f64() * 1000.0);
            }
        });
    }
    workers.join_all().await;
    let elapsed = started.elapsed().as_secs_f64();
    let mut sorted = latencies.lock().unwrap().clone();
    sorted.sort_by(f64::total_cmp);
    Load {
        requests: sorted.len() as u64,
        errors: errors.load(Ordering::Relaxed),
        per_second: sorted.len() as f64 / elapsed,
        p50_ms: percentile(&sorted, 0.50),
        p99_ms: percentile(&sorted, 0.99),
    }
}

pub(crate) async fn stats(gateway: &Gateway) -> Value {
    // A gateway that stopped answering says why in its log, which goes
    // with its temporary directory when the bench ends.
    let health = support::client()
        .get(gateway.url("/__idemgate/health"))
        .send()
        .await;
    if let Err(error) = health {
        let log = gateway.log();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "the gateway stopped answering ({error}); the end of its log:\n{}",
            tail.join("\n")
        );
    }
    support::read_stats(gateway, ADMIN_TOKEN).await
}

pub(crate) fn counter(before: &Value, after: &Value, name: &str) -> f64 {
    after[name].as_f64().unwrap_or(0.0) - before[name].as_f64().unwrap_or(0.0)
}

async fn post(client: &reqwest::Client, url: &str, key: &str) -> Reply {
    support::post_json(client, url, Some(key), BODY).await
}

async fn object_ops(gateway: &Gateway, key: &str, path: &str) -> Value {
    support::read_receipt(gateway, ADMIN_TOKEN, key, path)
        .await
        .json()["object_storage_ops"]
        .clone()
}

/// Throughput and latency per kind of request, with ratios to GET
/// passthrough measured in the same run.
async fn throughput(gateway: &Gateway, seconds: u64) -> Value {
    let duration = Duration::from_secs(seconds);
    let base = gateway.base.clone();
    // Twenty completed keys to replay.
    let client = client();
    for key in 0..20 {
        post(
            &client,
            &format!("{base}/bench-replay/pay"),
            &format!("replay-{key}"),
        )
        .await;
    }
    let warm = base.clone();
    closed_loop(Duration::from_secs(1), 0, move |client, _| {
        client.get(format!("{warm}/__idemgate/health"))
    })
    .await;

    let mut rows = Vec::new();
    let run_id = std::process::id();
    let kinds: Vec<(&str, Make)> = vec![
        ("floor: worker only", {
            let base = base.clone();
            Box::new(move |client, _| client.get(format!("{base}/__idemgate/health")))
        }),
        ("baseline: GET passthrough", {
            let base = base.clone();
            Box::new(move |client, _| client.get(format!("{base}/bench-get/item")))
        }),
        ("first deliveries", {
            let base = base.clone();
            Box::new(move |client, index| {
                client
                    .post(format!("{base}/bench-first/pay"))
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("first-{run_id}-{index}"))
                    .body(BODY)
            })
        }),
        ("replays", {
            let base = base.clone();
            Box::new(move |client, index| {
                client
                    .post(format!("{base}/bench-replay/pay"))
                    .header("content-type", "application/json")
                    .header("idempotency-key", format!("replay-{}", index % 20))
                    .body(BODY)
            })
        }),
    ];
    let cpu = machine::cpu_clock(gateway.process_group());
    for (name, make) in kinds {
        // Unmeasured first: V8 tiers hot wasm up only after it has run a
        // while, and each kind runs code the others do not (first
        // deliveries measured cold were a third slower). The warm-up's
        // indices come after the measured run's, so no key repeats.
        let make = Arc::new(make);
        let warm_make = make.clone();
        closed_loop(WARM_UP, 1 << 40, move |client, index| {
            warm_make(client, index)
        })
        .await;
        let before = stats(gateway).await;
        let cpu_before = cpu();
        let measured_make = make.clone();
        let load = closed_loop(duration, 0, move |client, index| {
            measured_make(client, index)
        })
        .await;
        let cpu_after = cpu();
        let after = stats(gateway).await;
        let requests = load.requests.max(1) as f64;
        // A pass of its own, since sampling slows what it samples.
        let isolate_cpu = match gateway.inspector_port {
            Some(port) => profiled(port, duration, make).await,
            None => Value::Null,
        };
        let worker_cpu_ms = match (cpu_before, cpu_after) {
            (Some(before), Some(after)) => json!((after - before) * 1000.0 / requests),
            _ => Value::Null,
        };
        rows.push(json!({
            "kind": name,
            "requests": load.requests,
            "errors": load.errors,
            "per_second": load.per_second,
            "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms,
            "worker_cpu_ms_per_request": worker_cpu_ms,
            "isolate_cpu_ms_per_request": isolate_cpu,
            "object_requests_per_request": counter(&before, &after, "object_requests") / requests,
            "cache_hits_per_request": counter(&before, &after, "cache_hits") / requests,
        }));
    }
    let baseline = rows[1]["per_second"].as_f64().unwrap();
    let floor_cpu = rows[0]["worker_cpu_ms_per_request"].as_f64();
    for row in &mut rows {
        row["ratio_to_baseline"] = json!(row["per_second"].as_f64().unwrap() / baseline);
        if let (Some(cpu), Some(floor)) = (row["worker_cpu_ms_per_request"].as_f64(), floor_cpu) {
            row["worker_cpu_ratio_to_floor"] = json!(cpu / floor);
        }
    }
    Value::Array(rows)
}

type Make = Box<dyn Fn(&reqwest::Client, u64) -> reqwest::RequestBuilder + Send + Sync>;

/// The isolate's CPU per request of one more closed-loop pass of `make`,
/// sampled through the inspector on `port` (keys after the other passes').
async fn profiled(port: u16, duration: Duration, make: Arc<Make>) -> Value {
    let Some(profile) = isolate_cpu::Profile::start(&root(), port) else {
        return Value::Null;
    };
    let load = closed_loop(duration, 1 << 41, move |client, index| make(client, index)).await;
    match profile.stop() {
        Some(profile) => isolate_cpu::per_request(&profile, load.requests.max(1) as f64),
        None => Value::Null,
    }
}

/// K keys x D concurrent identical deliveries against a 300 ms origin.
async fn storm(
    world_origin: &TestOrigin,
    gateway: &Gateway,
    setup: &str,
    keys: usize,
    deliveries: usize,
) -> Value {
    let client = client();
    let slots = Arc::new(Semaphore::new(STORM_CONNECTIONS));
    // What the worker alone needs to answer as many concurrent requests.
    let floor_started = Instant::now();
    let mut floor = JoinSet::new();
    for _ in 0..keys * deliveries {
        let (client, url) = (client.clone(), gateway.url("/__idemgate/health"));
        let slots = slots.clone();
        floor.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            client.get(url).send().await.map(|_| ())
        });
    }
    let floor_errors = floor.join_all().await.iter().filter(|r| r.is_err()).count();
    let floor_seconds = floor_started.elapsed().as_secs_f64();

    let prefix = format!("/storm-{setup}-{keys}x{deliveries}/");
    let url = gateway.url(&format!("{prefix}slow/300/pay"));
    let started = Instant::now();
    let mut storm = JoinSet::new();
    for _ in 0..deliveries {
        for key in 0..keys {
            let (client, url, slots) = (client.clone(), url.clone(), slots.clone());
            let key = format!("storm-{setup}-{keys}x{deliveries}-{key}");
            storm.spawn(async move {
                let _slot = slots.acquire_owned().await.unwrap();
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("idempotency-key", key)
                    .body(BODY)
                    .send()
                    .await;
                let reply = match response {
                    Ok(response) => Some(Reply::read(response).await),
                    Err(_) => None,
                };
                (reply, sent.elapsed().as_secs_f64() * 1000.0)
            });
        }
    }
    let replies = storm.join_all().await;
    let wall_seconds = started.elapsed().as_secs_f64();
    let mut duplicate_ms: Vec<f64> = replies
        .iter()
        .filter(|(reply, _)| reply.as_ref().is_some_and(Reply::replayed))
        .map(|(_, ms)| *ms)
        .collect();
    duplicate_ms.sort_by(f64::total_cmp);
    let failed = replies
        .iter()
        .filter(|(reply, _)| reply.as_ref().is_none_or(|reply| reply.status != 201))
        .count();
    // What each failure was, so that a failed delivery can be explained.
    let mut failures = std::collections::BTreeMap::<String, u64>::new();
    for (reply, _) in &replies {
        let kind = match reply {
            None => "connection error".to_string(),
            Some(reply) if reply.status == 201 => continue,
            Some(reply) => {
                let body = String::from_utf8_lossy(&reply.body);
                format!(
                    "{} {}",
                    reply.status,
                    body.chars().take(80).collect::<String>()
                )
            }
        };
        *failures.entry(kind).or_default() += 1;
    }
    let forwards = world_origin.count(&prefix);
    let target_seconds = 0.3 + 1.25 * floor_seconds;
    json!({
        "keys": keys,
        "deliveries_per_key": deliveries,
        "forwards": forwards,
        "forwards_per_key": forwards as f64 / keys as f64,
        "failed": failed,
        "failures": failures,
        "wall_seconds": wall_seconds,
        "duplicate_p50_ms": percentile(&duplicate_ms, 0.5),
        "duplicate_p99_ms": percentile(&duplicate_ms, 0.99),
        "floor_seconds_same_concurrency": floor_seconds,
        "floor_errors": floor_errors,
        "connections": STORM_CONNECTIONS.min(keys * deliveries),
        "target_seconds": target_seconds,
        "ratio_to_target": wall_seconds / target_seconds,
    })
}

/// What one delivery of each kind costs: Durable Object requests, log
/// lines and metric points (counted by the isolate) and storage operations
/// (counted by the object), as Cloudflare bills them.
async fn cost(gateway: &Gateway) -> Value {
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
fn alarm_attempts(receipt: &Value) -> usize {
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
async fn async_cost(origin: &TestOrigin) -> Value {
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

pub(crate) fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn wasm_size() -> Value {
    let wasm = std::fs::read(root().join("build/index_bg.wasm")).unwrap_or_default();
    let gzip = std::process::Command::new("gzip")
        .args(["-9c"])
        .arg(root().join("build/index_bg.wasm"))
        .output()
        .map(|output| output.stdout.len())
        .unwrap_or(0);
    json!({"raw_bytes": wasm.len(), "gzip_bytes": gzip})
}

/// Criterion's estimates from `cargo bench --bench core`, if it ran:
/// admission per body size, and the parts of a 64 KiB one.
fn core_cost() -> Value {
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

/// The throughput and storm tables of one way of running the worker.
fn print_setup(title: &str, setup: &Value) {
    println!("\n{title}");
    println!(
        "\n{:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7} {:>7}",
        "throughput",
        "req/s",
        "x base",
        "p50 ms",
        "p99 ms",
        "cpu ms",
        "x floor",
        "DO/req",
        "errors"
    );
    for row in setup["throughput"].as_array().unwrap() {
        let cpu = |name: &str, digits: usize| {
            row[name]
                .as_f64()
                .map_or("n/a".to_string(), |value| format!("{value:.digits$}"))
        };
        println!(
            "{:<28} {:>9.0} {:>8.2} {:>8.1} {:>8.1} {:>9} {:>9} {:>7.2} {:>7}",
            row["kind"].as_str().unwrap(),
            row["per_second"].as_f64().unwrap(),
            row["ratio_to_baseline"].as_f64().unwrap(),
            row["p50_ms"].as_f64().unwrap(),
            row["p99_ms"].as_f64().unwrap(),
            cpu("worker_cpu_ms_per_request", 3),
            cpu("worker_cpu_ratio_to_floor", 2),
            row["object_requests_per_request"].as_f64().unwrap(),
            row["errors"].as_u64().unwrap_or(0),
        );
    }
    println!("(cpu ms: the worker's workerd process alone, per request; errors: failed requests and non-2xx answers)");
    println!(
        "\n{:<14} {:>9} {:>8} {:>9} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "storm",
        "forwards",
        "per key",
        "wall s",
        "dup p50",
        "dup p99",
        "target s",
        "x target",
        "failed"
    );
    for row in setup["storms"].as_array().unwrap() {
        println!(
            "{:<14} {:>9} {:>8.2} {:>9.2} {:>10.1} {:>10.1} {:>10.2} {:>8.2} {:>8}",
            format!("{} x {}", row["keys"], row["deliveries_per_key"]),
            row["forwards"],
            row["forwards_per_key"].as_f64().unwrap(),
            row["wall_seconds"].as_f64().unwrap(),
            row["duplicate_p50_ms"].as_f64().unwrap(),
            row["duplicate_p99_ms"].as_f64().unwrap(),
            row["target_seconds"].as_f64().unwrap(),
            row["ratio_to_target"].as_f64().unwrap(),
            row["failed"],
        );
    }
}

fn print_table(results: &Value) {
    println!(
        "\nidemgate benchmark ({} connections, {} s per run)",
        CONCURRENCY, results["seconds"]
    );
    if let Some(stolen) = results["cpu_stolen_share"].as_f64() {
        println!(
            "CPU time stolen by the hypervisor during the run: {:.1}%",
            stolen * 100.0
        );
    }
    let strays = results["stray_processes"].as_array().map_or(0, Vec::len);
    if strays > 0 {
        println!("WARNING: {strays} other dev-server processes ran during this benchmark");
    }
    print_setup(
        "wrangler dev (the command; devtools bridge attached)",
        results,
    );
    print_setup(
        "wrangler's dev server without the devtools inspector",
        &results["without_inspector"],
    );
    print_reference(results);
    println!(
        "\n{:<22} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7}",
        "cost per delivery",
        "DO req",
        "alarms",
        "reads",
        "writes",
        "alarm w",
        "index w",
        "logs",
        "points"
    );
    for row in results["cost"].as_array().unwrap() {
        let number = |value: &Value| {
            value
                .as_f64()
                .map_or("-".to_string(), |v| format!("{v:.2}"))
        };
        println!(
            "{:<22} {:>8} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>7}",
            row["kind"].as_str().unwrap(),
            number(&row["object_requests"]),
            number(&row["alarm_invocations"]),
            number(&row["storage"]["reads"]),
            number(&row["storage"]["writes"]),
            number(&row["storage"]["alarm_writes"]),
            number(&row["storage"]["index_writes"]),
            number(&row["log_lines"]),
            number(&row["metric_points"]),
        );
    }
    let wasm = &results["wasm"];
    println!(
        "\nrelease wasm: {} bytes raw, {} bytes gzip ({:.1} KiB)",
        wasm["raw_bytes"],
        wasm["gzip_bytes"],
        wasm["gzip_bytes"].as_f64().unwrap() / 1024.0
    );
    for row in results["core"].as_array().unwrap() {
        println!(
            "pure core before the object ({}): {:.1} us",
            row["body"].as_str().unwrap(),
            row["median_us"].as_f64().unwrap()
        );
    }
}

/// idemgate against the reference worker, each way of running them.
fn print_reference(results: &Value) {
    println!(
        "\nagainst the reference worker (benches/reference/worker.mjs), same origin, same run"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>12}",
        "", "command", "x reference", "no inspector", "x reference"
    );
    for kind in [
        "floor: worker only",
        "baseline: GET passthrough",
        "first deliveries",
        "replays",
    ] {
        let rate = |setup: &Value| {
            setup["throughput"]
                .as_array()
                .and_then(|rows| rows.iter().find(|row| row["kind"] == kind))
                .and_then(|row| row["per_second"].as_f64())
                .unwrap_or(f64::NAN)
        };
        let (ours, theirs) = (rate(results), rate(&results["reference"]));
        let (ours_plain, theirs_plain) = (
            rate(&results["without_inspector"]),
            rate(&results["reference"]["without_inspector"]),
        );
        println!(
            "{kind:<28} {:>12} {:>12.2} {:>12} {:>12.2}",
            format!("{ours:.0}/{theirs:.0}"),
            ours / theirs,
            format!("{ours_plain:.0}/{theirs_plain:.0}"),
            ours_plain / theirs_plain
        );
    }
    print_isolate_cpu(results);
    let floor_ratio = |setup: &Value| {
        let rows = setup["throughput"].as_array().unwrap();
        rows[3]["per_second"].as_f64().unwrap() / rows[0]["per_second"].as_f64().unwrap()
    };
    println!(
        "idemgate replays x its own floor: {:.2} (command), {:.2} (no inspector)",
        floor_ratio(results),
        floor_ratio(&results["without_inspector"])
    );
}

/// The isolate's CPU per request of each kind (the inspector's profile,
/// under the command), idemgate beside the reference worker.
fn print_isolate_cpu(results: &Value) {
    println!("\nisolate CPU per request, from the inspector's profile (ms; wasm / JavaScript / runtime / GC)");
    println!(
        "{:<28} {:>9} {:>27} {:>10} {:>12}",
        "", "idemgate", "split", "reference", "x reference"
    );
    let row_of = |setup: &Value, kind: &str| -> Value {
        setup["throughput"]
            .as_array()
            .and_then(|rows| rows.iter().find(|row| row["kind"] == kind))
            .map_or(Value::Null, |row| row["isolate_cpu_ms_per_request"].clone())
    };
    for kind in [
        "floor: worker only",
        "baseline: GET passthrough",
        "first deliveries",
        "replays",
    ] {
        let (ours, theirs) = (row_of(results, kind), row_of(&results["reference"], kind));
        let ms = |value: &Value, name: &str| value[name].as_f64().unwrap_or(f64::NAN);
        let split = format!(
            "{:.3}/{:.3}/{:.3}/{:.3}",
            ms(&ours, "wasm"),
            ms(&ours, "javascript"),
            ms(&ours, "program"),
            ms(&ours, "gc")
        );
        println!(
            "{kind:<28} {:>9.3} {split:>27} {:>10.3} {:>12.2}",
            ms(&ours, "busy_ms"),
            ms(&theirs, "busy_ms"),
            ms(&ours, "busy_ms") / ms(&theirs, "busy_ms")
        );
    }
}

/// The gateway under the `wrangler dev` command in front of `origin`, at
/// log level `warn` (a line per request costs throughput).
async fn command_gateway(origin: &TestOrigin) -> Gateway {
    Gateway::start_logging(
        tempfile::tempdir().unwrap(),
        &[
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ],
        "warn",
    )
    .await
}

/// `SCALING_STEP` (default 1,000 keys a point) and `SCALING_RATE` (first
/// deliveries a second; unpaced when unset).
fn scaling_pace() -> scaling::Pace {
    scaling::Pace {
        step: number_from_env("SCALING_STEP", scaling::Pace::default().step),
        per_second: std::env::var("SCALING_RATE")
            .ok()
            .and_then(|rate| rate.parse().ok()),
    }
}

/// A count the environment may set, else `default`.
fn number_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// `STORM_REPEATS` (default 5) storms of 100 keys x 100 under the
/// `wrangler dev` command, each with keys of its own: to see what the
/// rare failed delivery of a storm is.
async fn storms_only() -> Value {
    let repeats = number_from_env("STORM_REPEATS", 5);
    let origin = TestOrigin::start().await;
    let gateway = command_gateway(&origin).await;
    let mut storms = Vec::new();
    for repeat in 0..repeats {
        let storm = storm(&origin, &gateway, &format!("repeat{repeat}"), 100, 100).await;
        eprintln!(
            "storm {repeat}: failed {} {}",
            storm["failed"], storm["failures"]
        );
        storms.push(storm);
    }
    Value::Array(storms)
}

/// The isolate's CPU per kind, idemgate's and the reference's under the
/// command, `CPU_ROUNDS` times (default 1), each round with fresh gateways:
/// the CPU table alone, for comparing two builds in minutes.
async fn cpu_only(seconds: u64) -> Value {
    let rounds = number_from_env("CPU_ROUNDS", 1);
    let origin = TestOrigin::start().await;
    let mut measured = Vec::new();
    for round in 0..rounds {
        eprintln!("bench: cpu round {round}: idemgate");
        let gateway = command_gateway(&origin).await;
        let ours = throughput(&gateway, seconds).await;
        drop(gateway);
        eprintln!("bench: cpu round {round}: the reference worker");
        let reference = Gateway::start_reference(&origin.url(), true).await;
        let theirs = throughput(&reference, seconds).await;
        drop(reference);
        measured.push(json!({ "throughput": ours, "reference": { "throughput": theirs } }));
    }
    Value::Array(measured)
}

/// Throughput and storms against one running gateway.
async fn run_setup(origin: &TestOrigin, gateway: &Gateway, setup: &str, seconds: u64) -> Value {
    eprintln!("bench ({setup}): throughput, {seconds} s per kind");
    let throughput = throughput(gateway, seconds).await;
    eprintln!("bench ({setup}): storms");
    let storms = vec![
        storm(origin, gateway, setup, 20, 50).await,
        storm(origin, gateway, setup, 100, 100).await,
    ];
    json!({ "throughput": throughput, "storms": storms })
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is read.
    let seconds = number_from_env("BENCH_SECONDS", 5) as u64;
    let strays = machine::strays();
    if !strays.is_empty() {
        eprintln!(
            "bench: WARNING: {} dev-server processes were already running and will skew the figures:\n  {}",
            strays.len(),
            strays.join("\n  ")
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let drain_keys = number_from_env("DRAIN_KEYS", 4_000);
    let scaling_keys = number_from_env("SCALING_KEYS", 4_000);
    let folder = root().join("benches/results");
    let path = folder.join("latest.json");
    if let Ok(part) = std::env::var("BENCH_ONLY") {
        // One part: its figures replace those of the last full run.
        let measured = match part.as_str() {
            "drain" => runtime.block_on(drain::drain(drain_keys)),
            "bodies" => runtime.block_on(bodies::bodies()),
            "scaling" => runtime.block_on(scaling::scaling(scaling_keys, scaling_pace())),
            "storms" => runtime.block_on(storms_only()),
            "cpu" => runtime.block_on(cpu_only(seconds)),
            other => panic!("BENCH_ONLY={other}: drain, bodies, scaling, storms or cpu"),
        };
        match part.as_str() {
            "storms" => println!("{}", serde_json::to_string_pretty(&measured).unwrap()),
            "cpu" => measured
                .as_array()
                .unwrap()
                .iter()
                .for_each(print_isolate_cpu),
            "drain" => drain::print(&measured),
            "scaling" => scaling::print(&measured),
            _ => bodies::print(&measured),
        }
        let mut results: Value = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_else(|| json!({}));
        // The repeated storms keep the full run's own storms.
        let name = match part.as_str() {
            "storms" => "storm_repeats",
            "cpu" => "cpu_rounds",
            _ => part.as_str(),
        };
        results[name] = measured;
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
        println!("\nwrote the {part} figures into {}", path.display());
        return;
    }
    let ticks_before = machine::cpu_ticks();
    let mut results = runtime.block_on(async {
        let origin = TestOrigin::start().await;
        let gateway = command_gateway(&origin).await;
        let measured = run_setup(&origin, &gateway, "cli", seconds).await;
        eprintln!("bench: cost per delivery kind");
        let mut cost = cost(&gateway).await;
        drop(gateway);
        cost.as_array_mut().unwrap().push(async_cost(&origin).await);
        let gateway = Gateway::start_without_inspector(&[
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ])
        .await;
        let without_inspector = run_setup(&origin, &gateway, "plain", seconds).await;
        drop(gateway);
        eprintln!("bench: the reference worker");
        let reference = Gateway::start_reference(&origin.url(), true).await;
        let mut reference_results = run_setup(&origin, &reference, "reference-cli", seconds).await;
        drop(reference);
        let reference = Gateway::start_reference(&origin.url(), false).await;
        reference_results["without_inspector"] =
            run_setup(&origin, &reference, "reference-plain", seconds).await;
        drop(reference);
        let bodies = bodies::bodies().await;
        let drained = drain::drain(drain_keys).await;
        let scaled = scaling::scaling(scaling_keys, scaling_pace()).await;
        json!({
            "reference": reference_results,
            "seconds": seconds,
            "concurrency": CONCURRENCY,
            "throughput": measured["throughput"],
            "storms": measured["storms"],
            "without_inspector": without_inspector,
            "cost": cost,
            "wasm": wasm_size(),
            "core": core_cost(),
            "stray_processes": strays,
            "drain": drained,
            "bodies": bodies,
            "scaling": scaled,
        })
    });
    results["cpu_stolen_share"] = json!(machine::stolen_share(ticks_before, machine::cpu_ticks()));
    print_table(&results);
    bodies::print(&results["bodies"]);
    drain::print(&results["drain"]);
    scaling::print(&results["scaling"]);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("\nwrote {}", path.display());
}
