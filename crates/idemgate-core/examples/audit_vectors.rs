//! Prints `tests/vectors/audit.json`: an audit chain as idemgate's writer
//! makes it, and broken variants of it (an entry edited, edited with its
//! own hash recomputed, deleted, reordered, cut from the end), each with
//! the first broken entry a verifier must name.
//!
//! cargo run -p idemgate-core --example audit_vectors > tests/vectors/audit.json

use idemgate_core::audit::{key_sha256, Chain, Entry, Intent};
use serde_json::{json, Value};

/// The chain every case starts from: five acts, with actors and targets
/// whose canonical form needs escaping (a quote, a control character,
/// non-ASCII and a character beyond the BMP).
pub fn good_chain() -> Vec<Entry> {
    let acts: [(&str, &str, &str, String, &str); 5] = [
        (
            "ops@example.com",
            "purge",
            "stripe",
            format!("key_sha256={}", key_sha256("evt_1")),
            "200",
        ),
        (
            "admin-token",
            "force-purge",
            "stripe",
            format!(
                "key_sha256={}&receipt_id=0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
                key_sha256("evt_2")
            ),
            "200",
        ),
        (
            "zoë \"ops\" <zoe@example.com>\u{7}",
            "redrive",
            "adyen",
            format!(
                "key_sha256={}&path_sha256={}",
                key_sha256("psp_9"),
                key_sha256("/hooks/adyen")
            ),
            "202",
        ),
        (
            "運用@example.jp 💳",
            "bulk-redrive",
            "adyen",
            "state=dead&since=1764770000000&until=1764780000000".to_string(),
            "200 redriven=3 failed=0",
        ),
        (
            "admin-token",
            "reconcile-now",
            "stripe",
            "route".to_string(),
            "200",
        ),
    ];
    let mut chain = Chain::default();
    acts.iter()
        .enumerate()
        .map(|(index, (actor, action, route, target, result))| {
            let intent = Intent {
                at: 1_764_770_000_000 + index as u64 * 61_000,
                actor: actor.to_string(),
                action: action.to_string(),
                route: route.to_string(),
                target: target.clone(),
            };
            chain.append(&intent, result)
        })
        .collect()
}

fn values(entries: &[Entry]) -> Vec<Value> {
    entries
        .iter()
        .map(|entry| serde_json::to_value(entry).expect("an entry serializes"))
        .collect()
}

fn case(
    name: &str,
    description: &str,
    chain: Vec<Value>,
    broken: Option<(usize, Option<u64>, &str)>,
) -> Value {
    let expected = match broken {
        None => json!({ "valid": true, "entries": chain.len() }),
        Some((index, seq, fault)) => {
            json!({ "valid": false, "index": index, "seq": seq, "fault": fault })
        }
    };
    json!({ "name": name, "description": description, "chain": chain, "expected": expected })
}

pub fn audit_vectors() -> Value {
    let good = values(&good_chain());
    let head = good.last().expect("five entries")["hash"].clone();
    let mut cases = vec![case("good", "the chain as written", good.clone(), None)];
    cases.push(case(
        "empty",
        "no act yet: an empty chain verifies",
        vec![],
        None,
    ));

    let mut edited = good.clone();
    edited[2]["result"] = json!("409");
    cases.push(case(
        "edited-result",
        "the third entry's result changed: its hash no longer matches",
        edited,
        Some((2, Some(3), "hash")),
    ));

    let mut rehashed = good.clone();
    rehashed[1]["actor"] = json!("someone-else@example.com");
    let map = rehashed[1].as_object().expect("an object").clone();
    rehashed[1]["hash"] = json!(idemgate_origin::audit::entry_hash(&map).expect("a hash"));
    cases.push(case(
        "edited-and-rehashed",
        "the second entry's actor changed and its hash recomputed: the next entry's prev_hash no longer matches",
        rehashed,
        Some((2, Some(3), "prev_hash")),
    ));

    let mut deleted = good.clone();
    deleted.remove(2);
    cases.push(case(
        "deleted",
        "the third entry deleted: the fourth follows the second",
        deleted,
        Some((2, Some(4), "seq")),
    ));

    let mut deleted_first = good.clone();
    deleted_first.remove(0);
    cases.push(case(
        "deleted-first",
        "the first entry deleted: the chain starts at seq 2",
        deleted_first,
        Some((0, Some(2), "seq")),
    ));

    let mut reordered = good.clone();
    reordered.swap(1, 3);
    cases.push(case(
        "reordered",
        "the second and fourth entries swapped",
        reordered,
        Some((1, Some(4), "seq")),
    ));

    let mut renumbered = good.clone();
    renumbered[3]["seq"] = json!(7);
    cases.push(case(
        "renumbered",
        "the fourth entry's seq changed",
        renumbered,
        Some((3, Some(7), "seq")),
    ));

    let mut extra_field = good.clone();
    extra_field[4]["note"] = json!("added");
    cases.push(case(
        "extra-field",
        "the fifth entry carries a field idemgate never writes",
        extra_field,
        Some((4, Some(5), "malformed")),
    ));

    let mut cut = good.clone();
    cut.pop();
    let mut truncated = case(
        "cut-at-the-end",
        "the last entry removed: the chain alone verifies, but it does not end at the head",
        cut,
        None,
    );
    truncated["head"] = head;
    truncated["expected_with_head"] =
        json!({ "valid": false, "index": 4, "seq": null, "fault": "head" });
    cases.push(truncated);
    Value::Array(cases)
}

pub fn audit_vectors_json() -> String {
    let mut text = serde_json::to_string_pretty(&audit_vectors()).expect("vectors serialize");
    text.push('\n');
    text
}

#[allow(dead_code)]
fn main() {
    print!("{}", audit_vectors_json());
}
