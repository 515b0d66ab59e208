//! The tables the benchmark prints, from the figures it writes.

use super::*;

/// The throughput and storm tables of one way of running the worker.
pub(crate) fn print_setup(title: &str, setup: &Value) {
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

pub(crate) fn print_table(results: &Value) {
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

/// The kinds every gateway is measured on, as `throughput` names them.
pub(crate) const KINDS: [&str; 4] = [
    "floor: worker only",
    "baseline: GET passthrough",
    "first deliveries",
    "replays",
];

/// A kind's requests per second in a throughput table (NaN without it).
pub(crate) fn per_second(rows: &Value, kind: &str) -> f64 {
    rows.as_array()
        .and_then(|rows| rows.iter().find(|row| row["kind"] == kind))
        .and_then(|row| row["per_second"].as_f64())
        .unwrap_or(f64::NAN)
}

/// idemgate against the reference worker, each way of running them.
pub(crate) fn print_reference(results: &Value) {
    println!(
        "\nagainst the reference worker (benches/reference/worker.mjs), same origin, same run"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>12}",
        "", "command", "x reference", "no inspector", "x reference"
    );
    for kind in KINDS {
        let rate = |setup: &Value| per_second(&setup["throughput"], kind);
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
pub(crate) fn print_isolate_cpu(results: &Value) {
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
    let peer = results.get("peer").filter(|peer| !peer.is_null());
    if peer.is_some() {
        println!(
            "{:<28} {:>9} {:>27} {:>10} {:>12} {:>10} {:>8}",
            "", "", "", "", "", "peer", "x peer"
        );
    }
    for kind in KINDS {
        let (ours, theirs) = (row_of(results, kind), row_of(&results["reference"], kind));
        let ms = |value: &Value, name: &str| value[name].as_f64().unwrap_or(f64::NAN);
        let beside_peer = peer.map_or(String::new(), |peer| {
            let peers = row_of(peer, kind);
            format!(
                " {:>10.3} {:>8.2}",
                ms(&peers, "busy_ms"),
                ms(&ours, "busy_ms") / ms(&peers, "busy_ms")
            )
        });
        let split = format!(
            "{:.3}/{:.3}/{:.3}/{:.3}",
            ms(&ours, "wasm"),
            ms(&ours, "javascript"),
            ms(&ours, "program"),
            ms(&ours, "gc")
        );
        println!(
            "{kind:<28} {:>9.3} {split:>27} {:>10.3} {:>12.2}{beside_peer}",
            ms(&ours, "busy_ms"),
            ms(&theirs, "busy_ms"),
            ms(&ours, "busy_ms") / ms(&theirs, "busy_ms")
        );
    }
}
