//! Requests per second beside the TypeScript peer (SPEC §14, v5): idemgate
//! and the peer (`BENCH_PEER`, the worker of `benches/peer` as
//! `scripts/bench` installs it) in front of the same origin, one after the
//! other, under the `wrangler dev` command and without the inspector,
//! `PEER_ROUNDS` rounds (default 2), each gateway fresh. The goals:
//! replays at least 1.2x the peer's rate, first deliveries at least 1.0x.

use std::path::Path;

use serde_json::{json, Value};

use crate::support::{Gateway, TestOrigin};
use crate::tables::{per_second, KINDS};
use crate::{command_gateway, throughput, ADMIN_TOKEN};

/// The kinds with a goal against the peer, and the goal.
const GOALS: [(&str, f64); 2] = [("replays", 1.2), ("first deliveries", 1.0)];

/// The rounds, or `None` without `BENCH_PEER`.
pub(crate) async fn rounds(origin: &TestOrigin, seconds: u64, rounds: usize) -> Option<Value> {
    let config = std::env::var_os("BENCH_PEER")?;
    let config = Path::new(&config);
    let mut measured = Vec::new();
    for round in 0..rounds {
        eprintln!("bench: peer round {round}: idemgate and the peer, under the command");
        let ours = command_gateway(origin).await;
        let ours_command = throughput(&ours, seconds).await;
        drop(ours);
        let peer = Gateway::start_peer(config, &origin.url(), true).await;
        let peer_command = throughput(&peer, seconds).await;
        drop(peer);
        eprintln!("bench: peer round {round}: idemgate and the peer, without the inspector");
        let ours = Gateway::start_without_inspector(&[
            ("ORIGIN_URL", origin.url().as_str()),
            ("ADMIN_TOKEN", ADMIN_TOKEN),
        ])
        .await;
        let ours_plain = throughput(&ours, seconds).await;
        drop(ours);
        let peer = Gateway::start_peer(config, &origin.url(), false).await;
        let peer_plain = throughput(&peer, seconds).await;
        drop(peer);
        measured.push(json!({
            "idemgate": { "command": ours_command, "plain": ours_plain },
            "peer": { "command": peer_command, "plain": peer_plain },
        }));
    }
    Some(Value::Array(measured))
}

pub(crate) fn print(rounds: &Value) {
    println!(
        "\nrequests per second beside the TypeScript peer (benches/peer), same origin, same run"
    );
    let Some(rounds) = rounds.as_array() else {
        println!("not measured: BENCH_PEER names no peer (scripts/bench installs it when it can, and says why not)");
        return;
    };
    println!(
        "{:<6} {:<13} {:<28} {:>9} {:>9} {:>8} {:>6}",
        "round", "setup", "kind", "idemgate", "peer", "x peer", "goal"
    );
    for (number, round) in rounds.iter().enumerate() {
        for setup in ["command", "plain"] {
            for kind in KINDS {
                let ours = per_second(&round["idemgate"][setup], kind);
                let theirs = per_second(&round["peer"][setup], kind);
                let goal = GOALS.iter().find(|(name, _)| *name == kind).map_or(
                    String::new(),
                    |(_, goal)| {
                        let met = if ours / theirs >= *goal {
                            "met"
                        } else {
                            "missed"
                        };
                        format!("{goal:.1} {met}")
                    },
                );
                println!(
                    "{:<6} {setup:<13} {kind:<28} {ours:>9.0} {theirs:>9.0} {:>8.2} {goal:>6}",
                    number + 1,
                    ours / theirs
                );
            }
        }
    }
}
