//! The capacity table (SPEC §15, v5): an async storm of distinct keys on
//! one route, counted by the gateway itself, per class of Durable Object:
//! the requests each class takes per delivery, and the busiest single
//! object of each class shared by many keys (an index shard, a flow
//! coordinator, an alert object). A class's ceiling per route is then the
//! published rate of one object (about 1,000 requests a second) over its
//! busiest object's requests per delivery; docs/capacity.md gives the
//! arithmetic for every kind of delivery.
//!
//! Locally every object lives in one workerd process, whose SQLite heap
//! holds about 4,300 live objects (docs/benchmarks.md): the storm is sent
//! in steps, each waiting until the origin received its deliveries and
//! workerd had time to evict the step's idle objects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::support::{self, client, Gateway, TestOrigin};
use crate::{stats, ADMIN_TOKEN, BODY};

/// Keys sent at once, then a pause.
const STEP: usize = 1_000;
/// Connections an async storm is sent over: as many as two local cores
/// answer without queueing a first attempt past the second its row
/// waits for (at 64, the acknowledgements alone queue for longer there,
/// and every row is written: docs/capacity.md).
const SENDERS: usize = 8;
/// Connections the limited route's storm is sent over: a backlog that
/// waits for its permits.
const LIMITED_SENDERS: usize = 64;
/// Long enough for workerd to evict a step's idle objects.
const SETTLE: Duration = Duration::from_secs(12);
/// Cloudflare's published figure for one Durable Object.
pub const OBJECT_REQUESTS_PER_SECOND: f64 = 1_000.0;
const INDEX_SHARDS: &str = "16";

/// The limited route's coordinators and its limit (a share of 8 each).
const FLOW_SHARDS: u64 = 8;
const LIMIT: u64 = 64;

fn routes() -> String {
    json!({
        "storm": {"path": "/capacity", "delivery": "async"},
        "limited": {"path": "/capacity-limited", "delivery": "async",
                    "max_in_flight": LIMIT, "flow_shards": FLOW_SHARDS},
        "failing": {"path": "/capacity-failing", "delivery": "async",
                    "retry_schedule": "1h"},
    })
    .to_string()
}

/// The async storm of `keys` distinct keys on an unlimited route, then
/// a fifth of them on a route limited over [`FLOW_SHARDS`] coordinators,
/// and a fifth on a route whose origin refuses them all.
pub async fn capacity(keys: usize) -> Value {
    let origin = TestOrigin::start().await;
    let origin_url = origin.url();
    let routes = routes();
    let gateway = Gateway::start_without_inspector(&[
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", origin_url.as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("INDEX_SHARDS", INDEX_SHARDS),
    ])
    .await;
    let unlimited = storm(&gateway, &origin, "/capacity/", keys, SENDERS).await;
    let limited = storm(
        &gateway,
        &origin,
        "/capacity-limited/",
        (keys / 5).max(STEP),
        LIMITED_SENDERS,
    )
    .await;
    // An origin that refuses every delivery: each one's row is written,
    // and its next attempt is an hour off.
    origin.fail("/capacity-failing/", true);
    let failing = storm(
        &gateway,
        &origin,
        "/capacity-failing/",
        (keys / 5).max(STEP),
        SENDERS,
    )
    .await;
    json!({
        "index_shards": INDEX_SHARDS.parse::<u64>().unwrap(),
        "async": unlimited,
        "failing": failing,
        "limited": limited,
        "flow_shards": FLOW_SHARDS,
        "limit": LIMIT,
    })
}

/// `keys` first deliveries to `prefix`, each a key of its own, in steps.
async fn storm(
    gateway: &Gateway,
    origin: &TestOrigin,
    prefix: &str,
    keys: usize,
    senders: usize,
) -> Value {
    let gateway = &gateway;
    let before = stats(gateway).await;
    let started = Instant::now();
    let mut acknowledged = 0usize;
    let mut refused = 0usize;
    let mut sent = 0usize;
    while sent < keys {
        let step = STEP.min(keys - sent);
        let (ok, not) = send_step(gateway, prefix, sent, step, senders).await;
        acknowledged += ok;
        refused += not;
        sent += step;
        let deadline = Instant::now() + Duration::from_secs(60);
        while origin.count(prefix) < acknowledged && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        eprintln!(
            "bench: capacity: {sent} of {keys} sent, {} at the origin",
            origin.count(prefix)
        );
        tokio::time::sleep(SETTLE).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let after = stats(gateway).await;
    let deliveries = acknowledged.max(1) as f64;
    let delta = |map: &str, name: &str| {
        after[map][name].as_f64().unwrap_or(0.0) - before[map][name].as_f64().unwrap_or(0.0)
    };
    let classes: Vec<String> = after["requests_by_class"]
        .as_object()
        .map(|classes| classes.keys().cloned().collect())
        .unwrap_or_default();
    let rows: Vec<Value> = classes
        .iter()
        .map(|class| {
            let requests = delta("requests_by_class", class);
            let busiest = after["requests_by_object"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(name, _)| name.starts_with(&format!("{class} ")))
                .map(|(name, _)| (name.clone(), delta("requests_by_object", name)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let shared = class != "DEDUP_OBJECT";
            let busiest_per_delivery = busiest
                .as_ref()
                .map_or(0.0, |(_, count)| count / deliveries);
            json!({
                "class": class,
                "requests": requests,
                "per_delivery": requests / deliveries,
                "shared": shared,
                "busiest_object": busiest.as_ref().map(|(name, _)| name.clone()),
                "busiest_per_delivery": shared.then_some(busiest_per_delivery),
                "route_ceiling_per_second": (shared && busiest_per_delivery > 0.0)
                    .then(|| OBJECT_REQUESTS_PER_SECOND / busiest_per_delivery),
            })
        })
        .collect();
    // Local storage near workerd's SQLite heap limit fails writes
    // (`SQLITE_NOMEM`); an outcome that could not be stored is forwarded
    // again, under a higher epoch, by the alarm at its lease's end.
    let mut paths: Vec<String> = origin
        .received(prefix)
        .into_iter()
        .map(|request| request.path)
        .collect();
    let forwards = paths.len();
    paths.sort();
    paths.dedup();
    json!({
        "keys": keys,
        "senders": senders,
        "acknowledged": acknowledged,
        "refused": refused,
        "delivered": paths.len(),
        "forwarded_again": forwards - paths.len(),
        "log_lines_naming_sqlite_nomem": gateway.log().matches("SQLITE_NOMEM").count(),
        "seconds": seconds,
        "classes": rows,
    })
}

/// `count` first deliveries of keys from `first`, over `senders`
/// connections: how many were acknowledged (202) and how many not.
async fn send_step(
    gateway: &Gateway,
    prefix: &str,
    first: usize,
    count: usize,
    senders: usize,
) -> (usize, usize) {
    let gate = Arc::new(Semaphore::new(senders));
    let mut tasks = JoinSet::new();
    for n in first..first + count {
        let gate = gate.clone();
        let url = gateway.url(&format!("{prefix}{n}"));
        tasks.spawn(async move {
            let _held = gate.acquire_owned().await.unwrap();
            let key = format!("capacity-{n}");
            support::post_json(&client(), &url, Some(&key), BODY)
                .await
                .status
                == 202
        });
    }
    let mut ok = 0;
    let mut not = 0;
    while let Some(done) = tasks.join_next().await {
        match done.unwrap() {
            true => ok += 1,
            false => not += 1,
        }
    }
    (ok, not)
}

pub fn print(capacity: &Value) {
    print_storm(
        &format!("async, INDEX_SHARDS {}", capacity["index_shards"]),
        &capacity["async"],
    );
    if !capacity["failing"].is_null() {
        print_storm(
            &format!(
                "async, every first attempt refused by the origin, INDEX_SHARDS {}",
                capacity["index_shards"]
            ),
            &capacity["failing"],
        );
    }
    print_storm(
        &format!(
            "async, max_in_flight {} over flow_shards {}",
            capacity["limit"], capacity["flow_shards"]
        ),
        &capacity["limited"],
    );
}

fn print_storm(what: &str, capacity: &Value) {
    println!(
        "\ncapacity: {} deliveries of distinct keys over {} connections, {what} ({} acknowledged, {} refused with 503, {} keys at the origin, {} forwarded again; {} log lines name SQLITE_NOMEM)",
        capacity["keys"],
        capacity["senders"],
        capacity["acknowledged"],
        capacity["refused"],
        capacity["delivered"],
        capacity["forwarded_again"],
        capacity["log_lines_naming_sqlite_nomem"],
    );
    println!(
        "| class | requests per delivery | busiest object | its requests per delivery | route ceiling (deliveries/s, at {OBJECT_REQUESTS_PER_SECOND} req/s per object) |"
    );
    println!("|---|---|---|---|---|");
    for row in capacity["classes"].as_array().into_iter().flatten() {
        let busiest = match row["shared"].as_bool() {
            Some(true) => row["busiest_object"].as_str().unwrap_or("-").to_string(),
            _ => "each key its own".to_string(),
        };
        println!(
            "| {} | {:.3} | {} | {} | {} |",
            row["class"].as_str().unwrap_or(""),
            row["per_delivery"].as_f64().unwrap_or(0.0),
            busiest,
            row["busiest_per_delivery"]
                .as_f64()
                .map_or("-".to_string(), |value| format!("{value:.4}")),
            row["route_ceiling_per_second"]
                .as_f64()
                .map_or("scales with keys".to_string(), |value| format!(
                    "{value:.0}"
                )),
        );
    }
}
