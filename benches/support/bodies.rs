//! CPU per first delivery as the body grows, in the release wasm under
//! workerd: what admission (JSON read, canonical form, two SHA-256 passes,
//! key) costs at each size, and so the largest body whose delivery fits
//! the free plan's 10 ms of CPU. Measured as the workerd process's CPU
//! (from `/proc`) over deliveries sent one at a time, so it holds the
//! worker's request and its Durable Object's together: an upper bound on
//! the worker's own.

use std::time::Duration;

use serde_json::{json, Value};

use crate::machine;
use crate::support::{self, client, Gateway, TestOrigin};
use crate::ADMIN_TOKEN;

/// The last stays under `MAX_BODY_BYTES`'s ceiling of 4 MiB, item by item.
const SIZES: [usize; 6] = [1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4_000_000];
/// The free plan's CPU per request.
const FREE_PLAN_CPU_MS: f64 = 10.0;

/// Deliveries measured per size: fewer for the largest, whose each
/// delivery takes long enough on its own.
fn deliveries_at(size: usize) -> u64 {
    match size {
        size if size >= 1 << 20 => 8,
        size if size >= 256 << 10 => 20,
        _ => 60,
    }
}

pub async fn bodies() -> Value {
    let origin = TestOrigin::start().await;
    let gateway = Gateway::start_without_inspector(&[
        ("ORIGIN_URL", origin.url().as_str()),
        ("ADMIN_TOKEN", ADMIN_TOKEN),
        ("MAX_BODY_BYTES", "4194304"),
    ])
    .await;
    let cpu = machine::cpu_clock(gateway.process_group());
    let client = client();
    let mut rows = Vec::new();
    for size in SIZES {
        let body = crate::payment_body::body_of(size);
        let send = |index: u64| {
            let url = gateway.url(&format!("/bench-body/{size}/pay"));
            let key = format!("body-{size}-{index}");
            let (client, body) = (client.clone(), body.clone());
            async move {
                let reply = support::post_json(&client, &url, Some(&key), &body).await;
                assert!(reply.status < 300, "{size} bytes: {}", reply.status);
            }
        };
        // Unmeasured first, so the code is hot at this size.
        for index in 0..4 {
            send(1_000 + index).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let count = deliveries_at(size);
        let before = cpu();
        for index in 0..count {
            send(index).await;
        }
        let after = cpu();
        let cpu_ms = match (before, after) {
            (Some(before), Some(after)) => Some((after - before) * 1000.0 / count as f64),
            _ => None,
        };
        rows.push(json!({"bytes": body.len(), "deliveries": count, "cpu_ms_per_delivery": cpu_ms}));
    }
    json!({ "rows": rows, "largest_within_free_plan_bytes": largest_within(&rows) })
}

/// The body size at which CPU per delivery reaches the free plan's
/// limit, between the two measured sizes around it (linear between them).
fn largest_within(rows: &[Value]) -> Option<u64> {
    let points: Vec<(f64, f64)> = rows
        .iter()
        .filter_map(|row| Some((row["bytes"].as_f64()?, row["cpu_ms_per_delivery"].as_f64()?)))
        .collect();
    let over = points.iter().position(|(_, ms)| *ms > FREE_PLAN_CPU_MS)?;
    if over == 0 {
        return Some(0);
    }
    let ((x0, y0), (x1, y1)) = (points[over - 1], points[over]);
    Some((x0 + (FREE_PLAN_CPU_MS - y0) * (x1 - x0) / (y1 - y0)) as u64)
}

pub fn print(bodies: &Value) {
    println!("\nFirst deliveries by body size (workerd CPU per delivery, worker and object)");
    for row in bodies["rows"].as_array().into_iter().flatten() {
        println!(
            "  {:>9} bytes  {:>8.2} ms",
            row["bytes"],
            row["cpu_ms_per_delivery"].as_f64().unwrap_or(f64::NAN)
        );
    }
    match bodies["largest_within_free_plan_bytes"].as_u64() {
        Some(bytes) => println!("  largest body within 10 ms: about {} KiB", bytes / 1024),
        None => println!("  every measured size stays within 10 ms"),
    }
}
