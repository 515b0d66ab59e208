//! The optimisation table and the cold start (SPEC §14). `scripts/bench
//! levels` builds the release worker at each optimisation level ("z", "s",
//! 2, 3) into `target/levels/<level>` and runs this part once per level
//! (`BENCH_ONLY=level`, `BENCH_LEVEL`, `IDEMGATE_WORKER_BUILD`), each
//! against the JavaScript reference worker in the same run; then
//! `BENCH_ONLY=levels` prints the table from what the runs stored.
//!
//! A cold start is a fresh dev server's first request, measured two ways.
//! The isolate's: under the `wrangler dev` command, sent nothing until it
//! is ready, then one first delivery with V8's profiler sampling the
//! isolate (what the worker and its objects ran: what the platform bills
//! as the request's CPU), then a second first delivery the same way. The
//! process's: started without the inspector, what the worker's workerd
//! process spent from its launch until it was ready (`startup`) and on
//! each request, read from `/proc`; it also holds the dev server's own
//! first-use work (the local Durable Object and SQLite machinery, the
//! emulated bindings), the same for idemgate and the reference.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::isolate_cpu::Profile;
use crate::machine::WorkerProcess;
use crate::support::{self, Gateway, TestOrigin};
use crate::{command_gateway, root, throughput, BODY};

/// Fresh dev servers per worker for the cold start.
const COLD_SAMPLES: usize = 5;

/// One fresh gateway's cold start: CPU ms until ready and on its first
/// request (a first delivery), that request's wall time, and the same of
/// a second first delivery (another key) right after: what the first
/// costs beyond it is the cold start proper. The first request's CPU is
/// split into the thread that ran it (workerd's isolate thread: the
/// busiest) and the rest (V8's compiler and collector threads).
async fn one_cold_start(gateway: Gateway) -> Value {
    let process = wait_for_worker_process(&gateway).await;
    let cpu = || process.cpu_seconds().unwrap_or(f64::NAN) * 1000.0;
    let startup_ms = cpu();
    let threads_before = process.threads();
    let (first_request_ms, wall_ms) = timed_first_delivery(&gateway, "cold-1", &cpu).await;
    let busiest_ms = process
        .threads()
        .iter()
        .map(|(id, ns)| ns - threads_before.get(id).copied().unwrap_or(0))
        .max()
        .unwrap_or(0) as f64
        / 1e6;
    let (second_request_ms, _) = timed_first_delivery(&gateway, "cold-2", &cpu).await;
    json!({
        "startup_cpu_ms": startup_ms,
        "first_request_cpu_ms": first_request_ms,
        "first_request_busiest_thread_ms": busiest_ms,
        "first_request_wall_ms": wall_ms,
        "second_request_cpu_ms": second_request_ms,
    })
}

/// A first delivery of `key`: the process's CPU ms on it, and its wall time.
async fn timed_first_delivery(gateway: &Gateway, key: &str, cpu: &impl Fn() -> f64) -> (f64, f64) {
    let before = cpu();
    let sent = Instant::now();
    first_delivery(gateway, key).await;
    let wall_ms = sent.elapsed().as_secs_f64() * 1000.0;
    (cpu() - before, wall_ms)
}

/// Sends a first delivery of `key`, which must be answered 2xx.
async fn first_delivery(gateway: &Gateway, key: &str) {
    let reply = support::post_json(
        &support::client(),
        &gateway.url("/cold/pay"),
        Some(key),
        BODY,
    )
    .await;
    assert!(
        (200..300).contains(&reply.status),
        "the first delivery {key} answered {}",
        reply.status
    );
}

async fn wait_for_worker_process(gateway: &Gateway) -> WorkerProcess {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(process) = WorkerProcess::find(gateway.process_group()) {
            return process;
        }
        assert!(
            Instant::now() < deadline,
            "no workerd process for the worker"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `COLD_SAMPLES` cold starts of idemgate and of the reference, in turn.
pub async fn cold_start(origin: &TestOrigin) -> Value {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..COLD_SAMPLES {
        let vars = [
            ("ORIGIN_URL", origin.url()),
            ("ADMIN_TOKEN", crate::ADMIN_TOKEN.to_string()),
        ];
        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut sample = one_cold_start(Gateway::start_cold(&vars).await).await;
        sample["isolate"] = isolate_cold_start(Gateway::start_cold_inspected(&vars).await).await;
        ours.push(sample);
        let mut sample = one_cold_start(Gateway::start_reference_cold(&origin.url()).await).await;
        sample["isolate"] =
            isolate_cold_start(Gateway::start_reference_cold_inspected(&origin.url()).await).await;
        theirs.push(sample);
    }
    json!({"idemgate": ours, "reference": theirs})
}

/// A fresh isolate's first two first deliveries, each sampled by V8's
/// profiler: the isolate's busy milliseconds on each.
async fn isolate_cold_start(gateway: Gateway) -> Value {
    let first = sampled_first_delivery(&gateway, "cold-1").await;
    let second = sampled_first_delivery(&gateway, "cold-2").await;
    json!({ "first_request_ms": first, "second_request_ms": second })
}

async fn sampled_first_delivery(gateway: &Gateway, key: &str) -> Option<f64> {
    let port = gateway.inspector_port?;
    let profile = Profile::start(&root(), port)?;
    first_delivery(gateway, key).await;
    // What the answer leaves behind (its log line, a waitUntil) is the
    // request's too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    profile.stop()?["busy_ms"].as_f64()
}

/// One level's measurements: the build's size, its cold start and the
/// isolate's CPU per kind, each beside the reference's.
pub async fn level(seconds: u64) -> Value {
    let level = std::env::var("BENCH_LEVEL").unwrap_or_else(|_| "as built".to_string());
    let origin = TestOrigin::start().await;
    eprintln!("bench: level {level}: cold starts");
    let cold = cold_start(&origin).await;
    eprintln!("bench: level {level}: isolate CPU, idemgate");
    let gateway = command_gateway(&origin).await;
    let ours = throughput(&gateway, seconds).await;
    drop(gateway);
    eprintln!("bench: level {level}: isolate CPU, the reference");
    let reference = Gateway::start_reference(&origin.url(), true).await;
    let theirs = throughput(&reference, seconds).await;
    drop(reference);
    json!({
        "level": level,
        "wasm": crate::costs::wasm_size(),
        "cold_start": cold,
        "throughput": ours,
        "reference": {"throughput": theirs},
    })
}

/// The lowest and highest of `field` over `samples`.
fn range(samples: &Value, field: &str) -> (f64, f64) {
    let values: Vec<f64> = samples
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|sample| sample[field].as_f64())
        .collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (low, high)
}

fn busy_ms(setup: &Value, kind: &str) -> f64 {
    setup["throughput"]
        .as_array()
        .and_then(|rows| rows.iter().find(|row| row["kind"] == kind))
        .and_then(|row| row["isolate_cpu_ms_per_request"]["busy_ms"].as_f64())
        .unwrap_or(f64::NAN)
}

/// The table of every level measured, from `levels` (level name to its
/// measurements), in the order given.
pub fn print(levels: &Value) {
    println!("\nOptimisation levels: size, cold start (CPU ms, {COLD_SAMPLES} fresh dev servers each) and isolate CPU per request (ms), each beside the reference in its own run");
    println!(
        "  level  gzip bytes  first request (ref)          startup (ref)                first delivery  x ref   replay  x ref   floor  x ref"
    );
    for level in ["z", "s", "2", "3"] {
        let Some(run) = levels.get(level) else {
            continue;
        };
        let cold = &run["cold_start"];
        let (first_low, first_high) = range(&cold["idemgate"], "first_request_cpu_ms");
        let (ref_first_low, ref_first_high) = range(&cold["reference"], "first_request_cpu_ms");
        let (start_low, start_high) = range(&cold["idemgate"], "startup_cpu_ms");
        let (ref_start_low, ref_start_high) = range(&cold["reference"], "startup_cpu_ms");
        let ratio = |kind: &str| busy_ms(run, kind) / busy_ms(&run["reference"], kind);
        println!(
            "  {level:<5} {:>11} {:>6.1}-{:<6.1} ({:>5.1}-{:<5.1})  {:>6.1}-{:<6.1} ({:>5.1}-{:<5.1})  {:>8.3} {:>6.2} {:>8.3} {:>6.2} {:>7.3} {:>6.2}",
            run["wasm"]["gzip_bytes"],
            first_low,
            first_high,
            ref_first_low,
            ref_first_high,
            start_low,
            start_high,
            ref_start_low,
            ref_start_high,
            busy_ms(run, "first deliveries"),
            ratio("first deliveries"),
            busy_ms(run, "replays"),
            ratio("replays"),
            busy_ms(run, "floor: worker only"),
            ratio("floor: worker only"),
        );
    }
    for level in ["z", "s", "2", "3"] {
        if let Some(run) = levels.get(level) {
            print!("  level {level}: ");
            print_cold(&run["cold_start"]);
        }
    }
}

fn median(samples: &Value, field: impl Fn(&Value) -> Option<f64>) -> f64 {
    let mut values: Vec<f64> = samples
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(field)
        .collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The cold start proper, medians: what a fresh dev server's first
/// request costs beyond the warm first delivery after it, idemgate's and
/// the reference's, and of idemgate's first request what its busiest
/// thread (the isolate's) spent.
pub fn print_cold(cold: &Value) {
    let beyond = |side: &str| {
        median(&cold[side], |sample| {
            Some(
                sample["first_request_cpu_ms"].as_f64()?
                    - sample["second_request_cpu_ms"].as_f64()?,
            )
        })
    };
    let (ours, theirs) = (beyond("idemgate"), beyond("reference"));
    let isolate = |side: &str, request: &str| {
        median(&cold[side], |sample| sample["isolate"][request].as_f64())
    };
    println!(
        "cold start, the isolate's CPU ms on a fresh isolate's first request (then on the second), median of {COLD_SAMPLES}: idemgate {:.1} ({:.1}), the reference {:.1} ({:.1})",
        isolate("idemgate", "first_request_ms"),
        isolate("idemgate", "second_request_ms"),
        isolate("reference", "first_request_ms"),
        isolate("reference", "second_request_ms"),
    );
    // The goal (SPEC §14) holds for every sample, not the median.
    let samples = |side: &str| {
        cold[side]
            .as_array()
            .map_or(Vec::new(), |samples| {
                samples
                    .iter()
                    .filter_map(|sample| sample["isolate"]["first_request_ms"].as_f64())
                    .map(|ms| format!("{ms:.1}"))
                    .collect()
            })
            .join(", ")
    };
    println!(
        "  every sample, first request: idemgate {}; the reference {}",
        samples("idemgate"),
        samples("reference")
    );
    println!(
        "  the workerd process's CPU ms beyond a warm first delivery: idemgate {ours:.1}, the reference {theirs:.1}, difference {:.1}; idemgate's first request {:.1}, its busiest thread {:.1}",
        ours - theirs,
        median(&cold["idemgate"], |sample| sample["first_request_cpu_ms"].as_f64()),
        median(&cold["idemgate"], |sample| sample["first_request_busiest_thread_ms"].as_f64()),
    );
}
