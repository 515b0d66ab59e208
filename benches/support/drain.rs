//! The drain benchmark of flow control: a backlog of distinct keys on an
//! async route limited to `MAX_IN_FLIGHT` in front of a slow origin, as
//! after a provider's outage. Measures how long the backlog takes to reach
//! the origin against the ideal (keys × origin latency / limit), how many
//! permits one route's coordinator grants per second with an origin that
//! answers at once, and what the limit adds to each delivery in Durable
//! Object requests and rows written, counted by the gateway itself.
//!
//! Locally every Durable Object lives in one workerd process, whose SQLite
//! has one heap limit for all of them (512 MiB in this workerd; each open
//! database reserves about 120 KiB): beyond about 4,300 objects alive at
//! once their storage fails with `SQLITE_NOMEM`. The default backlog of
//! 4,000 stays below that line; `DRAIN_KEYS=10000` crosses it, so its run
//! also shows what storage failures do: senders answered 503 and retrying,
//! and forwards made again under a higher epoch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::support::{self, client, Gateway, TestOrigin};
use crate::{stats, ADMIN_TOKEN, BODY};

const LIMIT: u64 = 50;
/// How often a sender retries a 503 before the bench gives up on the run.
const SEND_RETRIES: usize = 15;
const ORIGIN_MS: u64 = 300;
/// Connections the backlog is sent over: a provider replaying its
/// pending events holds many open at once.
const SENDERS: usize = 64;
/// Keys of the permits-per-second and extra-cost runs.
const QUICK_KEYS: usize = 2_000;
/// Longer than a forward's lease (the default `ORIGIN_TIMEOUT_MS` and its
/// margin): a run is over when nothing arrived for this long.
const QUIET: Duration = Duration::from_secs(20);
/// The sharded backlog's coordinators (SPEC §15, v5: `flow_shards`).
const FLOW_SHARDS: u64 = 8;
/// The slow origin of the review's case (round 4): each forward takes this
/// long, under these limits, with a backlog of this many forwards per
/// permit (an ideal drain of 8 x 2 s = 16 s at every limit).
const SLOW_ORIGIN_MS: u64 = 2_000;
const SLOW_LIMITS: [u64; 3] = [1, 4, 50];
const SLOW_ROUNDS: u64 = 8;
/// Receipts read per route for their own storage counts.
pub(crate) const SAMPLED_RECEIPTS: usize = 20;

fn routes() -> String {
    json!({
        "drain": {"path": "/drain/limited", "delivery": "async", "max_in_flight": LIMIT},
        "sharded": {"path": "/drain/sharded", "delivery": "async", "max_in_flight": LIMIT,
                    "flow_shards": FLOW_SHARDS},
        "quick": {"path": "/drain/quick", "delivery": "async", "max_in_flight": LIMIT},
        "free": {"path": "/drain/free", "delivery": "async"},
        "slow1": {"path": "/drain/slow1", "delivery": "async", "max_in_flight": SLOW_LIMITS[0]},
        "slow4": {"path": "/drain/slow4", "delivery": "async", "max_in_flight": SLOW_LIMITS[1]},
        "slow50": {"path": "/drain/slow50", "delivery": "async", "max_in_flight": SLOW_LIMITS[2]},
    })
    .to_string()
}

/// Sends one delivery per key, `SENDERS` at a time; answers when every
/// one is acknowledged (202): how long that took, and the sends retried
/// after a 503, by reason.
async fn send_backlog(
    gateway: &Gateway,
    paths: Vec<(String, String)>,
) -> (Duration, HashMap<String, u64>) {
    let sends = paths
        .into_iter()
        .map(|(path, key)| (path, key, BODY.to_string()))
        .collect();
    send_bodies(gateway, sends).await
}

/// As [`send_backlog`], each delivery a path, a key and a body of its own.
pub(crate) async fn send_bodies(
    gateway: &Gateway,
    deliveries: Vec<(String, String, String)>,
) -> (Duration, HashMap<String, u64>) {
    let started = Instant::now();
    let senders = Arc::new(Semaphore::new(SENDERS));
    let client = client();
    let mut sends = JoinSet::new();
    for (path, key, body) in deliveries {
        let url = gateway.url(&path);
        let permit = senders.clone().acquire_owned().await.unwrap();
        let client = client.clone();
        sends.spawn(async move {
            let _permit = permit;
            let mut retried = Vec::new();
            loop {
                let reply = support::post_json(&client, &url, Some(&key), &body).await;
                match reply.status {
                    202 => return Ok(retried),
                    // A 503 asks the sender to try again with the same key,
                    // as every provider does: idemgate's own when the
                    // receipt index did not take the row under load, and
                    // wrangler's local proxy's when its pooled connection to
                    // the worker closed while idle (`stream disconnected
                    // prematurely` in its log).
                    // Backing off as providers do (from half a second,
                    // doubling, at most 8 s apart; about 90 s in all):
                    // locally, an object whose storage failed at the SQLite
                    // heap's limit (see above) may refuse for seconds.
                    503 if retried.len() < SEND_RETRIES => {
                        let reason = match reply.body.starts_with(b"Your worker restarted") {
                            true => "wrangler-proxy".to_string(),
                            false => reply.json()["type"].as_str().unwrap_or("503").to_string(),
                        };
                        let backoff = 500u64 << retried.len().min(4);
                        retried.push(reason);
                        tokio::time::sleep(Duration::from_millis(backoff)).await;
                    }
                    status => {
                        let body = String::from_utf8_lossy(&reply.body);
                        return Err(format!("{key}: {status} {body}"));
                    }
                }
            }
        });
    }
    let mut retries: HashMap<String, u64> = HashMap::new();
    while let Some(sent) = sends.join_next().await {
        match sent.unwrap() {
            Ok(retried) => {
                for reason in retried {
                    *retries.entry(reason).or_default() += 1;
                }
            }
            Err(refused) => {
                let log = crate::root().join("target/drain-gateway.log");
                std::fs::write(&log, gateway.log()).unwrap();
                panic!("{refused}\n(the gateway's log is in {})", log.display());
            }
        }
    }
    (started.elapsed(), retries)
}

/// `route`'s flow status from the operator summary (none for an
/// unlimited route). Each call asks every limited route's coordinator.
async fn flow_status(gateway: &Gateway, route: &str) -> Option<Value> {
    let summary = support::read_summary(gateway, ADMIN_TOKEN).await;
    summary["routes"]
        .as_array()
        .and_then(|routes| routes.iter().find(|r| r["route"] == route))
        .map(|route| route["flow"].clone())
        .filter(|flow| !flow.is_null())
}

/// The object requests one summary call makes, measured (the shards it
/// asks depend on the rows written so far).
async fn summary_requests(gateway: &Gateway) -> f64 {
    let before = stats(gateway).await;
    let _ = support::read_summary(gateway, ADMIN_TOKEN).await;
    let after = stats(gateway).await;
    after["object_requests"].as_f64().unwrap_or(0.0)
        - before["object_requests"].as_f64().unwrap_or(0.0)
}

/// What the operator saw while a run drained, and how often it looked.
#[derive(Default)]
struct Watched {
    most_waiting: u64,
    most_in_use: u64,
    oldest_wait_ms: u64,
    summary_calls: u64,
}

/// Polls the origin until every key under `prefix` arrived, sampling the
/// route's flow status meanwhile.
async fn await_origin(
    gateway: &Gateway,
    origin: &TestOrigin,
    prefix: &str,
    route: &str,
    keys: usize,
) -> Watched {
    let mut watched = Watched::default();
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let arrived = arrivals_by_key(origin, prefix).len();
        if arrived >= keys {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{prefix}: {arrived} of {keys} arrived in 900 s"
        );
        watched.summary_calls += 1;
        if let Some(flow) = flow_status(gateway, route).await {
            let number = |name: &str| flow[name].as_u64().unwrap_or(0);
            watched.most_waiting = watched.most_waiting.max(number("waiting"));
            watched.most_in_use = watched.most_in_use.max(number("permits_in_use"));
            watched.oldest_wait_ms = watched.oldest_wait_ms.max(number("oldest_wait_ms"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    watched
}

/// Waits until the route holds no permit and nothing waits, and the origin
/// has seen nothing new for longer than a forward's lease (a second
/// forward comes after the first one's lease), so that a run's counts
/// hold all of its own work and none of the next run's.
async fn await_quiet(gateway: &Gateway, origin: &TestOrigin, prefix: &str, route: &str) -> u64 {
    let mut summary_calls = 0;
    let mut seen = origin.count(prefix);
    let mut still_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        summary_calls += 1;
        let busy = flow_status(gateway, route).await.is_some_and(|flow| {
            flow["permits_in_use"].as_u64() != Some(0) || flow["waiting"].as_u64() != Some(0)
        });
        let now_seen = origin.count(prefix);
        if busy || now_seen != seen {
            (seen, still_since) = (now_seen, Instant::now());
        } else if still_since.elapsed() > QUIET {
            return summary_calls;
        }
    }
}

/// Each key's arrivals at the origin under `prefix` (its path there), in
/// order: the forward's `Idempotency-Epoch` and when it arrived.
pub(crate) type Arrivals = HashMap<String, Vec<(String, Instant)>>;

pub(crate) fn arrivals_by_key(origin: &TestOrigin, prefix: &str) -> Arrivals {
    let mut arrivals = Arrivals::new();
    for received in origin.received(prefix) {
        let epoch = received
            .header("idempotency-epoch")
            .unwrap_or("-")
            .to_string();
        arrivals
            .entry(received.path.clone())
            .or_default()
            .push((epoch, received.at));
    }
    arrivals
}

/// Keys the origin received more than once: how many, and for the first
/// few, each arrival's epoch and its time after the first (a forward whose
/// outcome went unrecorded is made again under a higher epoch once its
/// lease ends, for the origin to fence).
fn forwarded_twice(arrivals: &Arrivals) -> (usize, Vec<Value>) {
    let twice: Vec<_> = arrivals.iter().filter(|(_, seen)| seen.len() > 1).collect();
    let examples = twice
        .iter()
        .take(5)
        .map(|(path, seen)| {
            let arrivals: Vec<Value> = seen
                .iter()
                .map(|(epoch, at)| json!({"epoch": epoch, "after_ms": (*at - seen[0].1).as_millis() as u64}))
                .collect();
            json!({"path": path, "arrivals": arrivals})
        })
        .collect();
    (twice.len(), examples)
}

/// Seconds from `started` until every key had arrived once, plus what the
/// origin then took to answer.
pub(crate) fn seconds_to_last_answer(arrivals: &Arrivals, started: Instant, origin_ms: u64) -> f64 {
    let last = arrivals.values().map(|seen| seen[0].1).max().unwrap();
    (last - started).as_secs_f64() + origin_ms as f64 / 1000.0
}

/// Average key-object storage counts of a few receipts of a route.
pub(crate) async fn receipt_ops(
    gateway: &Gateway,
    route: &str,
    paths: &[(String, String)],
) -> Value {
    let mut sums: HashMap<&str, f64> = HashMap::new();
    let names = ["reads", "writes", "alarm_writes", "index_writes"];
    let sampled = &paths[paths.len().saturating_sub(SAMPLED_RECEIPTS)..];
    for (path, key) in sampled {
        let query = [
            ("key", key.as_str()),
            ("route", route),
            ("path", path.as_str()),
        ];
        let receipt = support::operator(gateway, reqwest::Method::GET, ADMIN_TOKEN, &query)
            .await
            .json();
        assert_eq!(receipt["state"], "completed", "{receipt}");
        for name in names {
            *sums.entry(name).or_default() +=
                receipt["object_storage_ops"][name].as_f64().unwrap_or(0.0);
        }
    }
    let count = sampled.len() as f64;
    names
        .iter()
        .map(|name| (name.to_string(), json!(sums[name] / count)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// One route's run of `keys` deliveries: timings, and per delivery what
/// the gateway's counters moved by.
async fn run(
    gateway: &Gateway,
    origin: &TestOrigin,
    route: &str,
    prefix: &str,
    origin_path: &str,
    keys: usize,
    origin_ms: u64,
) -> Value {
    let paths: Vec<(String, String)> = (0..keys)
        .map(|i| (format!("{prefix}{origin_path}k{i}"), format!("{route}-{i}")))
        .collect();
    let before = stats(gateway).await;
    let started = Instant::now();
    let (accepted, retried) = send_backlog(gateway, paths.clone()).await;
    let watched = await_origin(gateway, origin, prefix, route, keys).await;
    let drained = seconds_to_last_answer(&arrivals_by_key(origin, prefix), started, origin_ms);
    // The receipts' own counts are per object instance: read them before
    // an idle object is evicted and a new one counts from zero.
    tokio::time::sleep(Duration::from_millis(origin_ms + 2_000)).await;
    let receipt = receipt_ops(gateway, route, &paths).await;
    let quiet_calls = await_quiet(gateway, origin, prefix, route).await;
    let (twice, twice_examples) = forwarded_twice(&arrivals_by_key(origin, prefix));
    let after = stats(gateway).await;
    let delta =
        |name: &str| after[name].as_f64().unwrap_or(0.0) - before[name].as_f64().unwrap_or(0.0);
    // The operator's summary calls ask the coordinators and every route's
    // index shards; they are the benchmark's, not the deliveries'.
    let summary_calls = (watched.summary_calls + quiet_calls) as f64;
    let object_requests = delta("object_requests")
        - summary_calls * summary_requests(gateway).await
        - SAMPLED_RECEIPTS as f64;
    let waited = |stats: &Value| {
        stats["decisions"][route]["waiting_for_permit"]
            .as_f64()
            .unwrap_or(0.0)
    };
    let per_key = |value: f64| value / keys as f64;
    json!({
        "route": route,
        "keys": keys,
        "accept_seconds": accepted.as_secs_f64(),
        "sends_retried": retried,
        "drain_seconds": drained,
        "deliveries_per_second": keys as f64 / drained,
        "origin_max_concurrency": origin.max_concurrency(prefix.trim_end_matches('/')),
        "forwarded_twice": twice,
        "forwarded_twice_examples": twice_examples,
        "most_waiting": watched.most_waiting,
        "most_permits_in_use": watched.most_in_use,
        "oldest_wait_ms": watched.oldest_wait_ms,
        "waited_for_permit": waited(&after) - waited(&before),
        "claims_expired": delta("coordinator_claims_expired"),
        "per_delivery": {
            "object_requests": per_key(object_requests),
            "coordinator_rows_written": per_key(delta("coordinator_rows_written")),
            "coordinator_alarm_writes": per_key(delta("coordinator_alarm_writes")),
            "log_lines": per_key(delta("log_lines")),
            "metric_points": per_key(delta("metric_points")),
            "receipt": receipt,
        },
    })
}

/// The whole drain benchmark, `keys` deliveries in the backlog, on a
/// gateway and origin of its own.
pub async fn drain(keys: usize) -> Value {
    let origin = TestOrigin::start().await;
    let routes = routes();
    let gateway = Gateway::start_without_inspector(&[
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin.url().as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    eprintln!("bench: drain of {keys} keys under max_in_flight {LIMIT}, {ORIGIN_MS} ms origin");
    let backlog = run(
        &gateway,
        &origin,
        "drain",
        "/drain/limited/",
        &format!("slow/{ORIGIN_MS}/"),
        keys,
        ORIGIN_MS,
    )
    .await;
    eprintln!("bench: the same backlog over {FLOW_SHARDS} coordinators (flow_shards)");
    let sharded = run(
        &gateway,
        &origin,
        "sharded",
        "/drain/sharded/",
        &format!("slow/{ORIGIN_MS}/"),
        keys,
        ORIGIN_MS,
    )
    .await;
    eprintln!("bench: {QUICK_KEYS} keys to an origin that answers at once, limited and not");
    let quick = run(
        &gateway,
        &origin,
        "quick",
        "/drain/quick/",
        "",
        QUICK_KEYS,
        0,
    )
    .await;
    let free = run(&gateway, &origin, "free", "/drain/free/", "", QUICK_KEYS, 0).await;
    let mut slow = Vec::new();
    for limit in SLOW_LIMITS {
        let keys = (limit * SLOW_ROUNDS) as usize;
        eprintln!("bench: {keys} keys under max_in_flight {limit}, {SLOW_ORIGIN_MS} ms origin");
        let route = format!("slow{limit}");
        let measured = run(
            &gateway,
            &origin,
            &route,
            &format!("/drain/{route}/"),
            &format!("slow/{SLOW_ORIGIN_MS}/"),
            keys,
            SLOW_ORIGIN_MS,
        )
        .await;
        let ideal = (SLOW_ROUNDS * SLOW_ORIGIN_MS) as f64 / 1000.0;
        slow.push(json!({"limit": limit, "ideal_seconds": ideal, "run": measured}));
    }
    // Kept for reading what went wrong in a run: storage failures near the
    // local SQLite heap limit show there as `SQLITE_NOMEM`.
    let log = gateway.log();
    std::fs::write(crate::root().join("target/drain-gateway.log"), &log).unwrap();
    let storage_failures = log.matches("SQLITE_NOMEM").count();
    let ideal = keys as f64 * ORIGIN_MS as f64 / 1000.0 / LIMIT as f64;
    json!({
        "limit": LIMIT,
        "log_lines_naming_sqlite_nomem": storage_failures,
        "origin_ms": ORIGIN_MS,
        "ideal_seconds": ideal,
        "backlog": backlog,
        "flow_shards": FLOW_SHARDS,
        "sharded_backlog": sharded,
        "quick_limited": quick,
        "quick_unlimited": free,
        "slow_origin": slow,
    })
}

/// The drain's rows of the printed table.
pub fn print(drain: &Value) {
    let backlog = &drain["backlog"];
    let ratio =
        backlog["drain_seconds"].as_f64().unwrap() / drain["ideal_seconds"].as_f64().unwrap();
    println!(
        "\nFlow control: {} keys, max_in_flight {}, {} ms origin ({} log lines name SQLITE_NOMEM)",
        backlog["keys"], drain["limit"], drain["origin_ms"], drain["log_lines_naming_sqlite_nomem"]
    );
    println!(
        "  acknowledged in {:.1} s (sends retried after a 503: {}); drained in {:.1} s against an ideal of {:.1} s ({ratio:.2}x)",
        backlog["accept_seconds"].as_f64().unwrap(),
        backlog["sends_retried"],
        backlog["drain_seconds"].as_f64().unwrap(),
        drain["ideal_seconds"].as_f64().unwrap(),
    );
    println!(
        "  origin saw at most {} at once; keys forwarded twice: {}; queue up to {}, oldest wait {:.1} s",
        backlog["origin_max_concurrency"],
        backlog["forwarded_twice"],
        backlog["most_waiting"],
        backlog["oldest_wait_ms"].as_f64().unwrap_or(0.0) / 1000.0,
    );
    println!(
        "  {} of the {} waited for a permit (a delivery that finds one free does not)",
        backlog["waited_for_permit"], backlog["keys"]
    );
    let sharded = &drain["sharded_backlog"];
    if let Some(seconds) = sharded["drain_seconds"].as_f64() {
        println!(
            "  flow_shards {}: drained in {seconds:.1} s ({:.2}x flow_shards 1), origin saw at most {} at once (limit {}); keys forwarded twice: {}",
            drain["flow_shards"],
            seconds / backlog["drain_seconds"].as_f64().unwrap_or(1.0),
            sharded["origin_max_concurrency"],
            drain["limit"],
            sharded["forwarded_twice"],
        );
    }
    let (limited, free) = (&drain["quick_limited"], &drain["quick_unlimited"]);
    let rate = |run: &Value| run["deliveries_per_second"].as_f64().unwrap();
    println!(
        "  origin answering at once: {:.0} deliveries/s limited (at most {} permits in use seen), {:.0} unlimited ({:.2}x)",
        rate(limited),
        limited["most_permits_in_use"],
        rate(free),
        rate(limited) / rate(free),
    );
    if let Some(slow) = drain["slow_origin"].as_array() {
        println!(
            "  a {SLOW_ORIGIN_MS} ms origin, {SLOW_ROUNDS} forwards per permit:\n  max_in_flight  keys  peak at origin  drained (s)  ideal (s)  ratio  claims expired  forwarded twice"
        );
        for row in slow {
            let run = &row["run"];
            let drained = run["drain_seconds"].as_f64().unwrap_or(0.0);
            let ideal = row["ideal_seconds"].as_f64().unwrap_or(1.0);
            println!(
                "  {:>13}  {:>4}  {:>14}  {:>11.1}  {:>9.1}  {:>5.2}  {:>14}  {:>15}",
                row["limit"].as_u64().unwrap_or(0),
                run["keys"].as_u64().unwrap_or(0),
                run["origin_max_concurrency"].as_u64().unwrap_or(0),
                drained,
                ideal,
                drained / ideal,
                run["claims_expired"].as_f64().unwrap_or(0.0),
                run["forwarded_twice"].as_u64().unwrap_or(0),
            );
        }
    }
    println!("  per delivery            limited (backlog)  limited (quick)  unlimited");
    for (label, pointer) in [
        ("object requests", "/per_delivery/object_requests"),
        ("coordinator rows", "/per_delivery/coordinator_rows_written"),
        (
            "coordinator alarms",
            "/per_delivery/coordinator_alarm_writes",
        ),
        ("receipt rows written", "/per_delivery/receipt/writes"),
        ("receipt alarms", "/per_delivery/receipt/alarm_writes"),
        ("log lines", "/per_delivery/log_lines"),
        ("metric points", "/per_delivery/metric_points"),
    ] {
        let value = |run: &Value| run.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0);
        println!(
            "  {label:<22} {:>18.2} {:>16.2} {:>10.2}",
            value(backlog),
            value(limited),
            value(free)
        );
    }
}
