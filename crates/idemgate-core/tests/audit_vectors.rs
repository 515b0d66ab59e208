//! The committed `tests/vectors/audit.json` is what the example that
//! writes it prints now, and every case's expectation is what the Rust
//! verifier answers.

#[allow(dead_code)]
#[path = "../examples/audit_vectors.rs"]
mod audit_vectors;

use std::path::PathBuf;

use idemgate_origin::audit::{verify_chain, verify_chain_to};

fn committed() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/audit.json");
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn the_committed_audit_vectors_are_what_the_generator_prints() {
    assert!(
        committed() == audit_vectors::audit_vectors_json(),
        "tests/vectors/audit.json is stale; regenerate it with\n  \
         cargo run -p idemgate-core --example audit_vectors > tests/vectors/audit.json"
    );
}

#[test]
fn the_written_chain_verifies() {
    let chain: Vec<serde_json::Value> = audit_vectors::good_chain()
        .iter()
        .map(|entry| serde_json::to_value(entry).unwrap())
        .collect();
    let verified = verify_chain(&chain).unwrap();
    assert_eq!(verified.entries, 5);
    assert_eq!(verified.head_seq, 5);
}

#[test]
fn each_case_is_what_the_verifier_answers() {
    let cases = audit_vectors::audit_vectors();
    for case in cases.as_array().unwrap() {
        let chain = case["chain"].as_array().unwrap();
        let answer = |result: Result<_, idemgate_origin::audit::Broken>| match result {
            Ok(_) => serde_json::json!({ "valid": true, "entries": chain.len() }),
            Err(broken) => serde_json::json!({
                "valid": false,
                "index": broken.index,
                "seq": broken.seq,
                "fault": broken.fault.as_str(),
            }),
        };
        assert_eq!(
            answer(verify_chain(chain)),
            case["expected"],
            "{}",
            case["name"]
        );
        if let Some(head) = case["head"].as_str() {
            assert_eq!(
                answer(verify_chain_to(chain, head)),
                case["expected_with_head"],
                "{}",
                case["name"]
            );
        }
    }
}
