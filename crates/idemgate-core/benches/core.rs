//! The native cost of the pure core per delivery: the replay lookup's
//! key, canonical JSON, fingerprint and key derivation (the gateway's CPU
//! work before the Durable Object), for 1 KiB and 64 KiB JSON bodies, and
//! the parts of a 64 KiB one; and a flow
//! coordinator's work per permit with a backlog waiting, the ceiling of
//! permits per second one coordinator object's CPU allows.
//!
//! `cargo bench --bench core`; criterion leaves its estimates under
//! `target/criterion/`, which the gateway bench copies into its results.

#[path = "support/payment_body.rs"]
mod payment_body;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use idemgate_core::canonical::sha256_hex;
use idemgate_core::config::Config;
use idemgate_core::flow::{Coordinator, FlowLimits, PermitReply, PermitRequest};
use idemgate_core::json;
use idemgate_core::pipeline::{admit, authenticate, fast_replay_key, Inbound};

fn pipeline(criterion: &mut Criterion) {
    let config = Config::from_lookup(|name| match name {
        "ORIGIN_URL" => Some("https://origin.example".into()),
        _ => None,
    })
    .unwrap();
    let headers = vec![("content-type".to_string(), "application/json".to_string())];
    let mut group = criterion.benchmark_group("admit");
    for (label, size) in [("1KiB", 1024), ("64KiB", 64 * 1024)] {
        let body = payment_body::body_of(size).into_bytes();
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(label), &body, |bench, body| {
            bench.iter(|| {
                let inbound = Inbound {
                    method: "POST",
                    path: "/webhooks/stripe",
                    normalized_path: "/webhooks/stripe",
                    query: None,
                    headers: &headers,
                    body,
                    now: 0,
                };
                let authenticated = authenticate(&config.routes[0], black_box(&inbound))
                    .unwrap()
                    .done()
                    .unwrap();
                // What the gateway runs before the object: the isolate's
                // replay lookup key, then admission.
                black_box(fast_replay_key(&authenticated));
                black_box(admit(&authenticated).unwrap())
            })
        });
    }
    group.finish();
}

/// The parts of a 64 KiB admission, measured in the same run so that
/// their ratios hold on a noisy machine: the canonical form by the one
/// pass admission uses and by the tree it replaced, and SHA-256 of the
/// body (admission hashes it twice, raw and canonical).
fn parts(criterion: &mut Criterion) {
    let body = payment_body::body_of(64 * 1024).into_bytes();
    let pointers = ["/transaction_id", "/id"];
    let mut group = criterion.benchmark_group("admit-64KiB-parts");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("canonical-one-pass", |bench| {
        bench.iter(|| black_box(json::one_pass::read(black_box(&body), &pointers).unwrap()))
    });
    group.bench_function("canonical-tree", |bench| {
        bench.iter(|| black_box(json::parse(black_box(&body)).unwrap().canonical()))
    });
    group.bench_function("sha256", |bench| {
        bench.iter(|| black_box(sha256_hex(black_box(&body))))
    });
    group.finish();
}

/// One permit's turn on a coordinator holding 50 permits with `backlog`
/// deliveries waiting: the oldest holder gives its permit back, the oldest
/// waiter is woken and claims it, and one more delivery joins the queue
/// (the rows to write are gathered, as the object writes them).
fn flow(criterion: &mut Criterion) {
    let limits = FlowLimits {
        max_in_flight: Some(50),
        rate_thousandths: None,
        shards: 1,
    };
    let ask = |holder: String, accepted_at: u64| PermitRequest {
        holder,
        accepted_at,
        lease_ms: 15_000,
        wait: true,
        limits,
    };
    let mut group = criterion.benchmark_group("flow");
    for backlog in [100_u64, 10_000] {
        let mut flow = Coordinator::new(limits, 0);
        let mut held = std::collections::VecDeque::new();
        for i in 0..50 + backlog {
            let holder = format!("key-{i:012}");
            if let PermitReply::Granted { grant, .. } = flow.acquire(&ask(holder.clone(), i), 0) {
                held.push_back((holder, grant));
            }
        }
        flow.take_changes();
        let mut next = 50 + backlog;
        group.bench_function(BenchmarkId::new("permit", backlog), |bench| {
            bench.iter(|| {
                let (holder, grant) = held.pop_front().unwrap();
                flow.release(&holder, grant, limits, 1);
                let woken = flow.take_wakes().pop().unwrap();
                match flow.acquire(&ask(woken.clone(), 0), 1) {
                    PermitReply::Granted { grant, .. } => held.push_back((woken, grant)),
                    other => panic!("{other:?}"),
                }
                flow.acquire(&ask(format!("key-{next:012}"), next), 1);
                next += 1;
                black_box(flow.take_changes());
            })
        });
    }
}

criterion_group!(benches, pipeline, parts, flow);
criterion_main!(benches);
