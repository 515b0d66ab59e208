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
//! failures by kind), `BENCH_ONLY=cpu` (the isolate CPU table alone,
//! `CPU_ROUNDS` times), `BENCH_ONLY=level` (one optimisation level's
//! size, cold start and CPU; `scripts/bench levels` runs it per level and
//! `BENCH_ONLY=levels` prints their table), `BENCH_ONLY=ordered` (1,000 deliveries over 100
//! entities, ordered and not), `BENCH_ONLY=reconcile` (two passes of
//! reconciliation over `RECONCILE_EVENTS` events, default 4,000) or
//! `BENCH_ONLY=capacity` (the capacity table: an async storm of
//! `CAPACITY_KEYS` distinct keys, default 20,000, counted per class of
//! object), `BENCH_ONLY=latency` (the latency idemgate adds: p50 and p99
//! through it minus the origin directly) or `BENCH_ONLY=peer` (requests per
//! second beside the TypeScript peer, `PEER_ROUNDS` rounds) runs only that
//! part. With `BENCH_PEER` (which `scripts/bench` sets when it installs the
//! peer of `benches/peer`) the full run measures the peer too.

#[path = "support/bodies.rs"]
mod bodies;
#[path = "support/capacity.rs"]
mod capacity;
#[path = "support/cost.rs"]
mod costs;
#[path = "support/drain.rs"]
mod drain;
#[path = "support/isolate_cpu.rs"]
mod isolate_cpu;
#[path = "support/latency.rs"]
mod latency;
#[path = "support/levels.rs"]
mod levels;
#[path = "support/machine.rs"]
mod machine;
#[path = "support/ordered.rs"]
mod ordered;
#[path = "../crates/idemgate-core/benches/support/payment_body.rs"]
mod payment_body;
#[path = "support/peer.rs"]
mod peer;
#[path = "support/reconcile.rs"]
mod reconcile;
#[path = "support/scaling.rs"]
mod scaling;
#[path = "../tests/e2e/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;
#[path = "support/tables.rs"]
mod tables;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{client, Gateway, Reply, TestOrigin};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use costs::{async_cost, core_cost, cost, wasm_size};
use tables::{print_isolate_cpu, print_table};

pub(crate) const CONCURRENCY: usize = 20;
/// How long each kind of request runs, unmeasured, before it is measured.
const WARM_UP: Duration = Duration::from_secs(3);
/// Most connections a storm holds open at once: 10,000 simultaneous
/// connects overflow the listen backlog of `wrangler dev` (the kernel's SYN
/// retries then dominate), and 1,000 get connections reset. A 100 x 100 storm is 10,000 requests issued
/// over this many connections; the floor it is compared with uses the same.
const STORM_CONNECTIONS: usize = 250;
/// The floor: an operator path that does not exist, a 404 from the worker
/// alone on both sides (idemgate's `/__idemgate/health` reads D1).
const FLOOR_PATH: &str = "/__idemgate/no-such-path";
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
        client.get(format!("{warm}{FLOOR_PATH}"))
    })
    .await;

    let mut rows = Vec::new();
    let run_id = std::process::id();
    let kinds: Vec<(&str, Make)> = vec![
        ("floor: worker only", {
            let base = base.clone();
            Box::new(move |client, _| client.get(format!("{base}{FLOOR_PATH}")))
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
        let (client, url) = (client.clone(), gateway.url(FLOOR_PATH));
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
    for round_number in 0..rounds {
        eprintln!("bench: cpu round {round_number}: idemgate");
        let gateway = command_gateway(&origin).await;
        let ours = throughput(&gateway, seconds).await;
        drop(gateway);
        eprintln!("bench: cpu round {round_number}: the reference worker");
        let reference = Gateway::start_reference(&origin.url(), true).await;
        let theirs = throughput(&reference, seconds).await;
        drop(reference);
        let mut round = json!({ "throughput": ours, "reference": { "throughput": theirs } });
        if let Some(config) = std::env::var_os("BENCH_PEER") {
            eprintln!(
                "bench: cpu round {round_number}: the peer ({})",
                config.to_string_lossy()
            );
            let peer =
                Gateway::start_peer(std::path::Path::new(&config), &origin.url(), true).await;
            round["peer"] = json!({ "throughput": throughput(&peer, seconds).await });
        }
        measured.push(round);
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
    let reconcile_events = number_from_env("RECONCILE_EVENTS", 4_000);
    let capacity_keys = number_from_env("CAPACITY_KEYS", 20_000);
    let folder = root().join("benches/results");
    let path = folder.join("latest.json");
    let mut stored: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| json!({}));
    match std::env::var("BENCH_ONLY").as_deref() {
        // One level of the optimisation table, kept beside the others.
        Ok("level") => {
            let measured = runtime.block_on(levels::level(seconds));
            let level = measured["level"].as_str().unwrap_or("").to_string();
            stored["levels"][level] = measured;
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(&path, serde_json::to_string_pretty(&stored).unwrap()).unwrap();
            levels::print(&stored["levels"]);
            return;
        }
        Ok("levels") => return levels::print(&stored["levels"]),
        // The cold start alone, of the build `IDEMGATE_WORKER_BUILD` names.
        Ok("cold") => {
            let measured = runtime.block_on(async {
                let origin = TestOrigin::start().await;
                levels::cold_start(&origin).await
            });
            levels::print_cold(&measured);
            stored["cold_start"] = measured;
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(&path, serde_json::to_string_pretty(&stored).unwrap()).unwrap();
            return;
        }
        _ => {}
    }
    if let Ok(part) = std::env::var("BENCH_ONLY") {
        // One part: its figures replace those of the last full run.
        let measured = match part.as_str() {
            "drain" => runtime.block_on(drain::drain(drain_keys)),
            "bodies" => runtime.block_on(bodies::bodies()),
            "scaling" => runtime.block_on(scaling::scaling(scaling_keys, scaling_pace())),
            "storms" => runtime.block_on(storms_only()),
            "cpu" => runtime.block_on(cpu_only(seconds)),
            "reconcile" => runtime.block_on(reconcile::reconcile(reconcile_events)),
            "ordered" => runtime.block_on(ordered::ordered()),
            "capacity" => runtime.block_on(capacity::capacity(capacity_keys)),
            "latency" => runtime.block_on(latency::latency()),
            "peer" => runtime.block_on(async {
                let origin = TestOrigin::start().await;
                let rounds = number_from_env("PEER_ROUNDS", 2);
                peer::rounds(&origin, seconds, rounds).await.unwrap_or(Value::Null)
            }),
            other => panic!(
                "BENCH_ONLY={other}: drain, ordered, bodies, scaling, storms, cpu, reconcile, capacity, latency or peer"
            ),
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
            "reconcile" => reconcile::print(&measured),
            "ordered" => ordered::print(&measured),
            "capacity" => capacity::print(&measured),
            "latency" => latency::print(&measured),
            "peer" => peer::print(&measured),
            _ => bodies::print(&measured),
        }
        let mut results = stored;
        // The repeated storms keep the full run's own storms.
        let name = match part.as_str() {
            "storms" => "storm_repeats",
            "cpu" => "cpu_rounds",
            "peer" => "peer_rounds",
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
        let ordered = ordered::ordered().await;
        let scaled = scaling::scaling(scaling_keys, scaling_pace()).await;
        let reconciled = reconcile::reconcile(reconcile_events).await;
        let capacity = capacity::capacity(capacity_keys).await;
        let latency = latency::latency().await;
        let cold_start = levels::cold_start(&origin).await;
        let peer_rounds = peer::rounds(&origin, seconds, number_from_env("PEER_ROUNDS", 2)).await;
        // The peer's CPU per request beside idemgate's (the fixed-cost
        // table): its first round under the command.
        let peer_cpu = peer_rounds.as_ref().map_or(
            Value::Null,
            |rounds| json!({ "throughput": rounds[0]["peer"]["command"] }),
        );
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
            "ordered": ordered,
            "bodies": bodies,
            "scaling": scaled,
            "reconcile": reconciled,
            "capacity": capacity,
            "latency": latency,
            "cold_start": cold_start,
            "peer_rounds": peer_rounds,
            "peer": peer_cpu,
        })
    });
    results["cpu_stolen_share"] = json!(machine::stolen_share(ticks_before, machine::cpu_ticks()));
    print_table(&results);
    bodies::print(&results["bodies"]);
    drain::print(&results["drain"]);
    ordered::print(&results["ordered"]);
    scaling::print(&results["scaling"]);
    reconcile::print(&results["reconcile"]);
    capacity::print(&results["capacity"]);
    latency::print(&results["latency"]);
    levels::print_cold(&results["cold_start"]);
    peer::print(&results["peer_rounds"]);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(&path, serde_json::to_string_pretty(&results).unwrap()).unwrap();
    println!("\nwrote {}", path.display());
}

pub(crate) fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
