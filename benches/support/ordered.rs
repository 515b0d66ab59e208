//! The ordered drain (SPEC §12): 1,000 async deliveries over 100 entities
//! on a route with `order_key` and `order_time`, against the same
//! deliveries on a route without them, on one gateway and origin in the
//! same run. Measures the time to drain each, and what ordering adds to
//! each delivery: Durable Object requests (the worker's own and the key
//! objects' calls to the order objects, and the wakes those send back),
//! the order book's writes, and the key object's rows and alarms.
//!
//! Each entity's events are sent in the order they were created, over
//! `SENDERS` connections at once, so a few arrive at the gateway out of
//! order, as a provider's retries do; the origin takes `ORIGIN_MS` per
//! forward, so two arrivals of one entity closer than that overlapped.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::drain::{arrivals_by_key, receipt_ops, seconds_to_last_answer, send_bodies};
use crate::support::{Gateway, TestOrigin};
use crate::{stats, ADMIN_TOKEN};

const DELIVERIES: usize = 1_000;
const ENTITIES: usize = 100;
const ORIGIN_MS: u64 = 100;
/// The default `ORDER_HOLD_MS`: the wait for an older event that may
/// still come, paid once by each entity's first event.
const HOLD_MS: u64 = 2_000;
/// Published overage prices, per million (as `benches/tools/cost.py`).
const PRICE_OBJECT_REQUEST: f64 = 0.15;
const PRICE_ROW_WRITTEN: f64 = 1.00;

fn routes() -> String {
    json!({
        "ordered": {
            "path": "/ordered/on", "delivery": "async",
            "order_key": "json:/data/object/id", "order_time": "json:/created",
        },
        "unordered": {"path": "/ordered/off", "delivery": "async"},
    })
    .to_string()
}

/// Event `index`: entity `index % ENTITIES`, created `index` seconds after
/// a fixed start, so each entity's events are created oldest first.
fn event(index: usize) -> String {
    json!({
        "id": format!("evt_{index}"),
        "type": "invoice.updated",
        "created": 1_796_000_000 + index,
        "data": {"object": {"id": format!("in_{}", index % ENTITIES), "object": "invoice"}},
    })
    .to_string()
}

/// One route's run: how long the deliveries took to reach the origin, how
/// the origin saw them per entity, and what each cost.
async fn run(gateway: &Gateway, origin: &TestOrigin, route: &str, prefix: &str) -> Value {
    let sends: Vec<(String, String, String)> = (0..DELIVERIES)
        .map(|index| {
            let path = format!("{prefix}slow/{ORIGIN_MS}/e{}/k{index}", index % ENTITIES);
            (path, format!("{route}-{index}"), event(index))
        })
        .collect();
    let before = stats(gateway).await;
    let started = Instant::now();
    let (accepted, retried) = send_bodies(gateway, sends.clone()).await;
    let deadline = Instant::now() + Duration::from_secs(600);
    while arrivals_by_key(origin, prefix).len() < DELIVERIES {
        assert!(Instant::now() < deadline, "{route}: not drained in 600 s");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let arrivals = arrivals_by_key(origin, prefix);
    let drained = seconds_to_last_answer(&arrivals, started, ORIGIN_MS);
    let entities = per_entity(origin, prefix);
    // Let the last outcomes reach their books before the counts are read.
    tokio::time::sleep(Duration::from_millis(ORIGIN_MS + 2_000)).await;
    let keys: Vec<(String, String)> = sends
        .iter()
        .map(|(path, key, _)| (path.clone(), key.clone()))
        .collect();
    let receipt = receipt_ops(gateway, route, &keys).await;
    let after = stats(gateway).await;
    let delta =
        |name: &str| after[name].as_f64().unwrap_or(0.0) - before[name].as_f64().unwrap_or(0.0);
    let per = |value: f64| value / DELIVERIES as f64;
    // The receipt reads above are the benchmark's, not the deliveries'.
    let object_requests = delta("object_requests") - crate::drain::SAMPLED_RECEIPTS as f64;
    json!({
        "route": route,
        "deliveries": DELIVERIES,
        "entities": ENTITIES,
        "accept_seconds": accepted.as_secs_f64(),
        "sends_retried": retried,
        "drain_seconds": drained,
        "deliveries_per_second": DELIVERIES as f64 / drained,
        "forwarded_twice": arrivals.values().filter(|seen| seen.len() > 1).count(),
        "origin_max_concurrency": origin.max_concurrency(prefix.trim_end_matches('/')),
        "entity_overlaps": entities.overlaps,
        "out_of_order": entities.out_of_order,
        "marked_stale": entities.stale,
        "per_delivery": {
            "worker_object_requests": per(object_requests),
            "order_calls": per(delta("order_calls")),
            "order_wakes": per(delta("order_wakes")),
            "order_book_writes": per(delta("order_book_writes")),
            "log_lines": per(delta("log_lines")),
            "receipt": receipt,
        },
    })
}

/// What the origin saw of each entity, in the order it received them.
#[derive(Default)]
struct Entities {
    /// Consecutive arrivals of one entity closer than the origin's time
    /// to answer: two of its events at the origin at once.
    overlaps: usize,
    /// Arrivals older than one of the same entity that came before.
    out_of_order: usize,
    /// Forwards carrying `Idempotency-Stale: true`.
    stale: usize,
}

fn per_entity(origin: &TestOrigin, prefix: &str) -> Entities {
    let mut seen: HashMap<String, Vec<(Instant, u64)>> = HashMap::new();
    let mut entities = Entities::default();
    for received in origin.received(prefix) {
        let entity = received.path.rsplit('/').nth(1).unwrap_or("").to_string();
        let body: Value = serde_json::from_slice(&received.body).unwrap_or(Value::Null);
        let created = body["created"].as_u64().unwrap_or(0);
        entities.stale += usize::from(received.header("idempotency-stale") == Some("true"));
        seen.entry(entity).or_default().push((received.at, created));
    }
    for arrivals in seen.values() {
        let mut newest = 0;
        for (index, (at, created)) in arrivals.iter().enumerate() {
            if index > 0 && (*at - arrivals[index - 1].0) < Duration::from_millis(ORIGIN_MS) {
                entities.overlaps += 1;
            }
            entities.out_of_order += usize::from(*created < newest);
            newest = newest.max(*created);
        }
    }
    entities
}

/// Both runs on a gateway and origin of their own.
pub async fn ordered() -> Value {
    let origin = TestOrigin::start().await;
    let routes = routes();
    let gateway = Gateway::start_without_inspector(&[
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin.url().as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
    ])
    .await;
    eprintln!("bench: {DELIVERIES} deliveries over {ENTITIES} entities, ordered then not, {ORIGIN_MS} ms origin");
    let ordered = run(&gateway, &origin, "ordered", "/ordered/on/").await;
    let unordered = run(&gateway, &origin, "unordered", "/ordered/off/").await;
    json!({
        "origin_ms": ORIGIN_MS,
        "hold_ms": HOLD_MS,
        "ordered": ordered,
        "unordered": unordered,
    })
}

/// Requests and rows per delivery, and what they cost per million.
fn billed(run: &Value) -> (f64, f64, f64) {
    let number = |pointer: &str| run.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0);
    // The worker's object requests hold the order objects' wakes (each
    // a call to a key's object); the key objects' calls are counted apart.
    let requests =
        number("/per_delivery/worker_object_requests") + number("/per_delivery/order_calls");
    let rows = number("/per_delivery/order_book_writes")
        + number("/per_delivery/receipt/writes")
        + number("/per_delivery/receipt/alarm_writes");
    let dollars = requests * PRICE_OBJECT_REQUEST + rows * PRICE_ROW_WRITTEN;
    (requests, rows, dollars)
}

/// The ordered drain's rows of the printed table.
pub fn print(measured: &Value) {
    let (ordered, unordered) = (&measured["ordered"], &measured["unordered"]);
    println!(
        "\nOrder per entity: {} deliveries over {} entities, {} ms origin, ORDER_HOLD_MS {}",
        ordered["deliveries"], ordered["entities"], measured["origin_ms"], measured["hold_ms"]
    );
    println!("  route       drained (s)  per second  ms per delivery  origin peak  entity overlaps  out of order  stale  twice");
    for run in [ordered, unordered] {
        let drained = run["drain_seconds"].as_f64().unwrap_or(0.0);
        println!(
            "  {:<10} {:>12.1} {:>11.0} {:>16.2} {:>12} {:>16} {:>13} {:>6} {:>6}",
            run["route"].as_str().unwrap_or(""),
            drained,
            run["deliveries_per_second"].as_f64().unwrap_or(0.0),
            drained * 1000.0 / run["deliveries"].as_f64().unwrap_or(1.0),
            run["origin_max_concurrency"].as_u64().unwrap_or(0),
            run["entity_overlaps"].as_u64().unwrap_or(0),
            run["out_of_order"].as_u64().unwrap_or(0),
            run["marked_stale"].as_u64().unwrap_or(0),
            run["forwarded_twice"].as_u64().unwrap_or(0),
        );
    }
    println!("  per delivery            ordered  unordered");
    for (label, pointer) in [
        ("object requests", "/per_delivery/worker_object_requests"),
        ("order calls", "/per_delivery/order_calls"),
        ("of which order wakes", "/per_delivery/order_wakes"),
        ("order book writes", "/per_delivery/order_book_writes"),
        ("receipt rows written", "/per_delivery/receipt/writes"),
        ("receipt alarms", "/per_delivery/receipt/alarm_writes"),
        ("log lines", "/per_delivery/log_lines"),
    ] {
        let value = |run: &Value| run.pointer(pointer).and_then(Value::as_f64).unwrap_or(0.0);
        println!(
            "  {label:<22} {:>8.2} {:>10.2}",
            value(ordered),
            value(unordered)
        );
    }
    let ((requests, rows, dollars), (base_requests, base_rows, base_dollars)) =
        (billed(ordered), billed(unordered));
    println!(
        "  billed: {requests:.2} object requests and {rows:.2} rows a delivery ordered, {base_requests:.2} and {base_rows:.2} not: ${:.2} more per million (objects and rows alone, {:.2}x)",
        dollars - base_dollars,
        dollars / base_dollars.max(f64::EPSILON),
    );
    let ratio = ordered["drain_seconds"].as_f64().unwrap_or(0.0)
        / unordered["drain_seconds"].as_f64().unwrap_or(1.0);
    println!("  time to drain: {ratio:.2}x unordered");
}
