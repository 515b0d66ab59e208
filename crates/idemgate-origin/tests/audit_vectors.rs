//! `read_export` with `verify_export`, and the `verify-audit` binary,
//! against the shared audit vectors: every case of
//! `tests/vectors/audit.json` (its chain written out as an export), and
//! every hostile export of `tests/vectors/audit-hostile.json`, and every
//! export checked against a checkpoint in
//! `tests/vectors/audit-checkpoints.json`, which the Node.js and Python
//! verifiers answer the same.

use std::path::PathBuf;
use std::process::Command;

use base64::Engine as _;
use idemgate_origin::audit::{
    is_hash, read_export, verify_chain, verify_chain_at, verify_chain_to, verify_export,
    verify_export_at, Broken, Checkpoint, Verified,
};
use serde_json::{json, Value};

fn read_vectors(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn vectors(name: &str) -> Vec<Value> {
    let Value::Array(cases) = read_vectors(name) else {
        panic!("{name} is not an array");
    };
    cases
}

/// A verdict in the vectors' form.
fn answer(verdict: Result<Verified, Broken>) -> Value {
    match verdict {
        Ok(verified) => json!({ "valid": true, "entries": verified.entries }),
        Err(broken) => json!({
            "valid": false,
            "index": broken.index,
            "seq": broken.seq,
            "fault": broken.fault.as_str(),
        }),
    }
}

fn unreadable() -> Value {
    json!({ "valid": false, "error": "unreadable" })
}

/// What the library answers, in the vectors' form.
fn read_and_verify(text: &str, head: Option<&str>) -> Value {
    match read_export(text) {
        Ok(entries) => answer(verify_export(&entries, head)),
        Err(_) => unreadable(),
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

/// What `--head` names, read by the library as the command reads it: a
/// hash, `SEQ:HASH`, or a checkpoint file's text.
enum Head {
    Hash(String),
    Checkpoint(Checkpoint),
}

fn head_of(checkpoint: &Value) -> Result<Head, String> {
    match (checkpoint["arg"].as_str(), checkpoint["file"].as_str()) {
        (Some(arg), None) if is_hash(arg) => Ok(Head::Hash(arg.to_string())),
        (Some(arg), None) => arg.parse().map(Head::Checkpoint),
        (None, Some(text)) => Checkpoint::from_json(text).map(Head::Checkpoint),
        _ => panic!("a checkpoint is an arg or a file: {checkpoint}"),
    }
}

#[test]
fn each_export_is_checked_against_its_checkpoint_as_expected() {
    let vectors = read_vectors("audit-checkpoints.json");
    let cases = vectors["cases"].as_array().unwrap();
    assert!(cases.len() > 40);
    let dir = std::env::temp_dir().join(format!("verify-audit-checkpoints-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let expected = &case["expected"];
        let chain = vectors["chains"][case["export"]["chain"].as_str().unwrap()]
            .as_array()
            .unwrap();
        let chain = &chain[..case["export"]["length"].as_u64().unwrap() as usize];
        let text = serde_json::to_string(chain).unwrap();
        let alone = answer(verify_chain(chain));
        if alone != case["expected_without_checkpoint"] {
            failures.push(format!("{name}: without the checkpoint, {alone}"));
        }
        // The library: on the chain as JSON values, and as read_export reads it.
        let entries = read_export(&text).unwrap();
        let answers = match head_of(&case["checkpoint"]) {
            Err(_) => vec![unreadable()],
            Ok(Head::Hash(hash)) => vec![
                answer(verify_chain_to(chain, &hash)),
                answer(verify_export(&entries, Some(&hash))),
            ],
            Ok(Head::Checkpoint(checkpoint)) => vec![
                answer(verify_chain_at(chain, &checkpoint)),
                answer(verify_export_at(&entries, &checkpoint)),
            ],
        };
        for answer in answers {
            if answer != *expected {
                failures.push(format!(
                    "{name}: library answered {answer}, expected {expected}"
                ));
            }
        }
        // The command.
        let export = dir.join(format!("{name}.export.json"));
        std::fs::write(&export, &text).unwrap();
        let head = match (
            case["checkpoint"]["arg"].as_str(),
            case["checkpoint"]["file"].as_str(),
        ) {
            (Some(arg), _) => arg.to_string(),
            (None, Some(body)) => {
                let file = dir.join(format!("{name}.checkpoint.json"));
                std::fs::write(&file, body).unwrap();
                file.to_string_lossy().into_owned()
            }
            _ => unreachable!(),
        };
        let run = Command::new(env!("CARGO_BIN_EXE_verify-audit"))
            .arg(&export)
            .arg("--head")
            .arg(&head)
            .output()
            .unwrap();
        let (code, stdout) = (run.status.code(), String::from_utf8_lossy(&run.stdout));
        let stderr = String::from_utf8_lossy(&run.stderr);
        let as_expected = match case["output"].as_str() {
            Some(line) => {
                let exit = if expected["valid"] == true { 0 } else { 1 };
                code == Some(exit) && stdout == format!("{line}\n")
            }
            None => {
                code == Some(2) && stdout.is_empty() && stderr.starts_with("verify-audit: --head ")
            }
        };
        if !as_expected {
            failures.push(format!(
                "{name}: verify-audit exited {code:?} with {stdout:?} {stderr:?}, expected {expected}"
            ));
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_head_option_without_its_value_is_a_usage_error() {
    let run = Command::new(env!("CARGO_BIN_EXE_verify-audit"))
        .args(["-", "--head"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).starts_with("usage: verify-audit"));
}
