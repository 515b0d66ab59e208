//! How much memory admitting a delivery takes, as a multiple of its body:
//! what bounds `MAX_BODY_BYTES` (SPEC §8, v3). A counting allocator records
//! the heap's peak while one delivery is authenticated and admitted, for
//! the worst shapes of body: JSON of many small members (its parsed tree
//! costs most per byte), one long JSON string, and raw text.
//!
//! `cargo test -p idemgate-core --test body_memory -- --nocapture` prints
//! the table.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use idemgate_core::config::{Config, MAX_BODY_BYTES_LIMIT};
use idemgate_core::pipeline::{admit, authenticate, Inbound};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        PEAK.fetch_max(live, Ordering::SeqCst);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        unsafe { System.dealloc(pointer, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Peak heap bytes above the baseline while `body` is admitted.
fn peak_while_admitting(config: &Config, content_type: &str, body: &[u8]) -> usize {
    let headers = vec![
        ("content-type".to_string(), content_type.to_string()),
        ("idempotency-key".to_string(), "k".to_string()),
    ];
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    let inbound = Inbound {
        method: "POST",
        path: "/pay",
        normalized_path: "/pay",
        query: None,
        headers: &headers,
        body,
        now: 0,
    };
    let admitted = admit(
        &authenticate(&config.routes[0], &inbound)
            .unwrap()
            .done()
            .unwrap(),
    )
    .unwrap();
    drop(admitted);
    PEAK.load(Ordering::SeqCst) - base
}

fn many_members(size: usize) -> Vec<u8> {
    let mut body = b"{".to_vec();
    let mut index = 0;
    while body.len() < size - 16 {
        if index > 0 {
            body.push(b',');
        }
        body.extend_from_slice(format!("\"{index:x}\":{index}").as_bytes());
        index += 1;
    }
    body.push(b'}');
    body
}

fn one_string(size: usize) -> Vec<u8> {
    format!(r#"{{"note":"{}"}}"#, "x".repeat(size - 12)).into_bytes()
}

/// The largest multiple of its body that admitting a delivery holds at
/// once, over every shape (the worst is JSON of tiny members): what
/// `MAX_BODY_BYTES_LIMIT`'s reasoning assumes.
const ADMISSION_PEAK_PER_BODY_BYTE: usize = 13;

#[test]
fn admission_holds_a_bounded_multiple_of_the_body() {
    let config = Config::from_lookup(|name| {
        HashMap::from([
            ("ORIGIN_URL", "http://o".to_string()),
            ("MAX_BODY_BYTES", MAX_BODY_BYTES_LIMIT.to_string()),
        ])
        .get(name)
        .cloned()
    })
    .unwrap();
    println!("| body | shape | peak heap | × body |");
    println!("| ---: | --- | ---: | ---: |");
    let mut worst: f64 = 0.0;
    for size in [64 * 1024, 1 << 20, MAX_BODY_BYTES_LIMIT as usize] {
        for (shape, content_type, body) in [
            ("JSON, many members", "application/json", many_members(size)),
            ("JSON, one string", "application/json", one_string(size)),
            ("raw text", "text/plain", vec![b'x'; size]),
        ] {
            let peak = peak_while_admitting(&config, content_type, &body);
            let ratio = peak as f64 / body.len() as f64;
            worst = worst.max(ratio);
            println!(
                "| {} KiB | {shape} | {:.1} MiB | {ratio:.1} |",
                body.len() / 1024,
                peak as f64 / (1 << 20) as f64
            );
        }
    }
    println!("worst: {worst:.1} × the body");
    assert!(
        worst <= ADMISSION_PEAK_PER_BODY_BYTE as f64,
        "admission holds {worst:.1} × its body, over the {ADMISSION_PEAK_PER_BODY_BYTE} × that bounds MAX_BODY_BYTES"
    );
}
