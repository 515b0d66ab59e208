//! `read_export` with `verify_export`, and the `verify-audit` binary,
//! against the shared audit vectors: every case of
//! `tests/vectors/audit.json` (its chain written out as an export), and
//! every hostile export of `tests/vectors/audit-hostile.json`, which the
//! Node.js and Python verifiers answer the same.

use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use idemgate_origin::audit::{read_export, verify_export};
use serde_json::{json, Value};

fn vectors(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let Value::Array(cases) = serde_json::from_str(&text).expect("vectors are JSON") else {
        panic!("{name} is not an array");
    };
    cases
}

/// What the library answers, in the vectors' form.
fn read_and_verify(text: &str, head: Option<&str>) -> Value {
    let entries = match read_export(text) {
        Ok(entries) => entries,
        Err(_) => return json!({ "valid": false, "error": "unreadable" }),
    };
    match verify_export(&entries, head) {
        Ok(verified) => json!({ "valid": true, "entries": verified.entries }),
        Err(broken) => json!({
            "valid": false,
            "index": broken.index,
            "seq": broken.seq,
            "fault": broken.fault.as_str(),
        }),
    }
}

#[test]
fn each_audit_vector_reads_back_and_verifies_as_expected() {
    for case in vectors("audit.json") {
        let text = serde_json::to_string(&case["chain"]).unwrap();
        assert_eq!(
            read_and_verify(&text, None),
            case["expected"],
            "{}",
            case["name"]
        );
        if let Some(head) = case["head"].as_str() {
            assert_eq!(
                read_and_verify(&text, Some(head)),
                case["expected_with_head"],
                "{}",
                case["name"]
            );
        }
    }
}

#[test]
fn each_hostile_export_is_read_as_expected() {
    let cases = vectors("audit-hostile.json");
    assert!(cases.len() > 30);
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let expected = &case["expected"];
        if let Some(text) = case["export"].as_str() {
            let answer = read_and_verify(text, None);
            if answer != *expected {
                failures.push(format!(
                    "{name}: library answered {answer}, expected {expected}"
                ));
            }
        }
        let bytes = match case["export"].as_str() {
            Some(text) => text.as_bytes().to_vec(),
            None => base64::engine::general_purpose::STANDARD
                .decode(case["export_base64"].as_str().unwrap())
                .unwrap(),
        };
        let file = std::env::temp_dir().join(format!(
            "verify-audit-hostile-{}-{name}.json",
            std::process::id()
        ));
        std::fs::write(&file, bytes).unwrap();
        let run = Command::new(env!("CARGO_BIN_EXE_verify-audit"))
            .arg(&file)
            .output()
            .unwrap();
        std::fs::remove_file(&file).unwrap();
        let (code, stdout) = (run.status.code(), String::from_utf8_lossy(&run.stdout));
        let stderr = String::from_utf8_lossy(&run.stderr);
        let as_expected = if expected["valid"] == true {
            code == Some(0)
                && stdout.starts_with(&format!("ok: {} entries, head ", expected["entries"]))
        } else if expected.get("error").is_some() {
            code == Some(2) && stdout.is_empty() && stderr.starts_with("verify-audit: ")
        } else {
            let line = format!(
                "broken: entry {} (seq {}) breaks the chain: {}\n",
                expected["index"],
                expected["seq"],
                expected["fault"].as_str().unwrap()
            );
            code == Some(1) && stdout == line
        };
        if !as_expected {
            failures.push(format!(
                "{name}: verify-audit exited {code:?} with {stdout:?} {stderr:?}, expected {expected}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
