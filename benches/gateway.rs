//! The gateway benchmark: the release worker under `wrangler dev` in front
//! of a real Rust origin (well under a millisecond per answer, and a 300 ms
//! variant), measured in one run so that every figure has a baseline from
//! the same machine and minute. Prints a table, and writes the same numbers
//! to `bench/results/latest.json` for `bench/chart.py`.
//!
//! `scripts/bench` is the one command (it builds, then runs this).
//! `BENCH_SECONDS` sets each throughput run (default 5).

#[path = "support/machine.rs"]
mod machine;
#[path = "../tests/e2e/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use machine::WorkerProcess;
use serde_json::{json, Value};
use support::{client, Gateway, Reply, TestOrigin};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const CONCURRENCY: usize = 20;
/// How long each kind of request runs, unmeasured, before it is measured.
const WARM_UP: Duration = Duration::from_secs(3);
/// Most connections a storm holds open at once: 10,000 simultaneous
/// connects overflow the listen backlog of `wrangler dev` (the kernel's SYN
/// retries then dominate), and 1,000 get connections reset. A 100 x 100 storm is 10,000 requests issued
/// over this many connections; the floor it is compared with uses the same.
const STORM_CONNECTIONS: usize = 250;
const ADMIN_TOKEN: &str = "bench-admin-token";
const BODY: &str = r#"{"amount":1000,"currency":"eur","customer":"cus_1"}"#;

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

async fn stats(gateway: &Gateway) -> Value {
    support::read_stats(gateway, ADMIN_TOKEN).await
}

fn counter(before: &Value, after: &Value, name: &str) -> f64 {
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
    type Make = Box<dyn Fn(&reqwest::Client, u64) -> reqwest::RequestBuilder + Send + Sync>;
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
    let worker = WorkerProcess::find(gateway.process_group());
    let cpu = || worker.as_ref().and_then(WorkerProcess::cpu_seconds);
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
        let load = closed_loop(duration, 0, move |client, index| make(client, index)).await;
        let cpu_after = cpu();
        let after = stats(gateway).await;
        let requests = load.requests.max(1) as f64;
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
            storm.spawn(async move {
                let _slot = slots.acquire_owned().await.unwrap();
                let sent = Instant::now();
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header(
                        "idempotency-key",
                        format!("storm-{keys}x{deliveries}-{key}"),
                    )
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
    let forwards = world_origin.count(&prefix);
    let target_seconds = 0.3 + 1.25 * floor_seconds;
    json!({
        "keys": keys,
        "deliveries_per_key": deliveries,
        "forwards": forwards,
        "forwards_per_key": forwards as f64 / keys as f64,
        "failed": failed,
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

/// Durable Object requests (counted by the gateway) and storage operations
/// (counted by the object) per kind of delivery.
async fn cost(gateway: &Gateway) -> Value {
    let client = client();
    let mut rows = Vec::new();
    let zero = json!({"reads": 0, "writes": 0, "alarm_writes": 0});
    let delta = |after: &Value, before: &Value, per: f64| {
        json!({
            "reads": (after["reads"].as_f64().unwrap() - before["reads"].as_f64().unwrap()) / per,
            "writes": (after["writes"].as_f64().unwrap() - before["writes"].as_f64().unwrap()) / per,
            "alarm_writes": (after["alarm_writes"].as_f64().unwrap() - before["alarm_writes"].as_f64().unwrap()) / per,
        })
    };

    let path = "/cost-first/pay";
    let before = stats(gateway).await;
    post(&client, &gateway.url(path), "cost-first").await;
    let after = stats(gateway).await;
    let first = object_ops(gateway, "cost-first", path).await;
    rows.push(json!({"kind": "first delivery", "object_requests": counter(&before, &after, "object_requests"), "storage": delta(&first, &zero, 1.0)}));

    let before = stats(gateway).await;
    for _ in 0..10 {
        post(&client, &gateway.url(path), "cost-first").await;
    }
    let after = stats(gateway).await;
    let replayed = object_ops(gateway, "cost-first", path).await;
    rows.push(json!({"kind": "replay", "object_requests": counter(&before, &after, "object_requests") / 10.0, "storage": delta(&replayed, &first, 10.0)}));

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
    rows.push(json!({"kind": "duplicate under wait", "object_requests": counter(&before, &after, "object_requests") / 10.0, "storage": delta(&waited, &first, 9.0)}));

    let path = "/cost-fail/status/503/pay";
    let before = stats(gateway).await;
    post(&client, &gateway.url(path), "cost-fail").await;
    let after = stats(gateway).await;
    let failed = object_ops(gateway, "cost-fail", path).await;
    rows.push(json!({"kind": "failure", "object_requests": counter(&before, &after, "object_requests"), "storage": delta(&failed, &zero, 1.0)}));
    Value::Array(rows)
}

fn root() -> std::path::PathBuf {
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

/// Criterion's estimates from `cargo bench --bench core`, if it ran.
fn core_cost() -> Value {
    let mut rows = Vec::new();
    for size in ["1KiB", "64KiB"] {
        let path = root().join(format!("target/criterion/admit/{size}/new/estimates.json"));
        if let Ok(text) = std::fs::read_to_string(path) {
            let estimates: Value = serde_json::from_str(&text).unwrap();
            rows.push(json!({"body": size, "median_us": estimates["median"]["point_estimate"].as_f64().unwrap() / 1000.0}));
        }
    }
    Value::Array(rows)
}

/// The throughput and storm tables of one way of running the worker.
fn print_setup(title: &str, setup: &Value) {
    println!("\n{title}");
    println!(
        "\n{:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9} {:>7}",
        "throughput", "req/s", "x base", "p50 ms", "p99 ms", "cpu ms", "x floor", "DO/req"
    );
    for row in setup["throughput"].as_array().unwrap() {
        let cpu = |name: &str, digits: usize| {
            row[name]
                .as_f64()
                .map_or("n/a".to_string(), |value| format!("{value:.digits$}"))
        };
        println!(
            "{:<28} {:>9.0} {:>8.2} {:>8.1} {:>8.1} {:>9} {:>9} {:>7.2}",
            row["kind"].as_str().unwrap(),
            row["per_second"].as_f64().unwrap(),
            row["ratio_to_baseline"].as_f64().unwrap(),
            row["p50_ms"].as_f64().unwrap(),
            row["p99_ms"].as_f64().unwrap(),
            cpu("worker_cpu_ms_per_request", 3),
            cpu("worker_cpu_ratio_to_floor", 2),
            row["object_requests_per_request"].as_f64().unwrap(),
        );
    }
    println!(
        "(cpu ms: the worker's workerd process alone, per request; errors: {})",
        setup["throughput"]
            .as_array()
            .unwrap()
            .iter()
            .map(|row| row["errors"].as_u64().unwrap_or(0))
            .sum::<u64>()
    );
    println!(
        "\n{:<14} {:>9} {:>8} {:>9} {:>10} {:>10} {:>10} {:>8}",
        "storm", "forwards", "per key", "wall s", "dup p50", "dup p99", "target s", "x target"
    );
    for row in setup["storms"].as_array().unwrap() {
        println!(
            "{:<14} {:>9} {:>8.2} {:>9.2} {:>10.1} {:>10.1} {:>10.2} {:>8.2}",
            format!("{} x {}", row["keys"], row["deliveries_per_key"]),
            row["forwards"],
            row["forwards_per_key"].as_f64().unwrap(),
            row["wall_seconds"].as_f64().unwrap(),
            row["duplicate_p50_ms"].as_f64().unwrap(),
            row["duplicate_p99_ms"].as_f64().unwrap(),
            row["target_seconds"].as_f64().unwrap(),
            row["ratio_to_target"].as_f64().unwrap(),
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
    println!(
        "\n{:<22} {:>10} {:>8} {:>8} {:>13}",
        "cost per delivery", "DO req", "reads", "writes", "alarm writes"
    );
    for row in results["cost"].as_array().unwrap() {
        println!(
            "{:<22} {:>10.2} {:>8.2} {:>8.2} {:>13.2}",
            row["kind"].as_str().unwrap(),
            row["object_requests"].as_f64().unwrap(),
            row["storage"]["reads"].as_f64().unwrap(),
            row["storage"]["writes"].as_f64().unwrap(),
            row["storage"]["alarm_writes"].as_f64().unwrap(),
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
            "pure core per delivery ({} JSON body): {:.1} us",
            row["body"].as_str().unwrap(),
            row["median_us"].as_f64().unwrap()
        );
    }
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
    let seconds: u64 = std::env::var("BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
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
    let ticks_before = machine::cpu_ticks();
    let mut results = runtime.block_on(async {
        let origin = TestOrigin::start().await;
        let gateway = Gateway::start_logging(
            tempfile::tempdir().unwrap(),
            &[
                ("ORIGIN_URL", origin.url().as_str()),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            "warn",
        )
        .await;
        let measured = run_setup(&origin, &gateway, "cli", seconds).await;
        eprintln!("bench: cost per delivery kind");
        let cost = cost(&gateway).await;
        drop(gateway);
        let gateway = Gateway::start_without_inspector(&[
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ])
        .await;
        let without_inspector = run_setup(&origin, &gateway, "plain", seconds).await;
        json!({
            "seconds": seconds,
            "concurrency": CONCURRENCY,
            "throughput": measured["throughput"],
            "storms": measured["storms"],
            "without_inspector": without_inspector,
            "cost": cost,
            "wasm": wasm_size(),
            "core": core_cost(),
            "stray_processes": strays,
        })
    });
    results["cpu_stolen_share"] = json!(machine::stolen_share(ticks_before, machine::cpu_ticks()));
    print_table(&results);
    let folder = root().join("bench/results");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("latest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("\nwrote {}", path.display());
}
