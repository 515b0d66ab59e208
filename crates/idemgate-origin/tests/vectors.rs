//! The verifier against every case of `tests/vectors/forwards.json`, the
//! vectors the Node.js and Python packages are tested against too, with
//! the headers read both ways the crate takes them.

use std::path::PathBuf;

use base64::Engine as _;
use idemgate_origin::{ForwardedHeaders, ForwardedRequest, Verifier, VerifyError};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/forwards.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    serde_json::from_str::<Value>(&text)
        .expect("the vectors are JSON")
        .as_array()
        .expect("the vectors are an array")
        .clone()
}

/// Every value of `name`, case-insensitively, joined by ", " as HTTP
/// combines a field sent more than once (RFC 9110 §5.3): no joined value
/// is a well-formed one. (A lookup that keeps only the first value, as
/// `http::HeaderMap::get` does, would hide the repetition; `from_pairs`
/// sees it.)
fn combined(headers: &[(String, String)], name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .iter()
        .filter(|(header, _)| header.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

fn category(error: &VerifyError) -> &'static str {
    match error {
        VerifyError::MissingHeader(_) => "missing-header",
        VerifyError::MalformedHeader { .. } => "malformed-header",
        VerifyError::Stale { .. } => "stale",
        VerifyError::BadSignature => "bad-signature",
    }
}

/// How a request's headers reach the crate.
#[derive(Debug, Clone, Copy)]
enum Reading {
    /// Every pair, as an `http::HeaderMap` iterates them
    /// ([`ForwardedHeaders::from_pairs`]): a repeated header is seen.
    Pairs,
    /// One value per name, a repeated header's joined by ", "
    /// ([`ForwardedHeaders::from_lookup`]).
    Joined,
}

/// What the crate answers for one vector, in the vectors' own terms.
fn answer(vector: &Value, reading: Reading) -> Value {
    let request = &vector["request"];
    let headers: Vec<(String, String)> = request["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let [key, scope, epoch, signature] = [
        idemgate_origin::KEY_HEADER,
        idemgate_origin::SCOPE_HEADER,
        idemgate_origin::EPOCH_HEADER,
        idemgate_origin::SIGNATURE_HEADER,
    ]
    .map(|name| combined(&headers, name));
    let forwarded = match reading {
        Reading::Pairs => ForwardedHeaders::from_pairs(
            headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        ),
        Reading::Joined => Ok(ForwardedHeaders {
            key: key.as_deref(),
            scope: scope.as_deref(),
            epoch: epoch.as_deref(),
            signature: signature.as_deref(),
        }),
    };
    let body = base64::engine::general_purpose::STANDARD
        .decode(request["body_base64"].as_str().unwrap())
        .unwrap();
    let verifier = Verifier::new(vector["secret"].as_str().unwrap())
        .with_tolerance(vector["tolerance_seconds"].as_u64().unwrap());
    let result = forwarded.and_then(|forwarded| {
        verifier.verify(
            &forwarded,
            &ForwardedRequest {
                method: request["method"].as_str().unwrap(),
                path_and_query: request["path_and_query"].as_str().unwrap(),
                body: &body,
            },
            vector["now"].as_u64().unwrap(),
        )
    });
    match result {
        Ok(forwarded) => serde_json::json!({
            "valid": true,
            "scope": forwarded.scope,
            "key": forwarded.key,
            "epoch": forwarded.epoch,
            "body_sha256": forwarded.body_sha256,
            "signed_at": forwarded.signed_at,
        }),
        Err(error) => serde_json::json!({ "valid": false, "error": category(&error) }),
    }
}

#[test]
fn the_verifier_answers_every_vector_as_expected() {
    let mut disagreements = Vec::new();
    let vectors = vectors();
    for vector in &vectors {
        let name = vector["name"].as_str().unwrap();
        for reading in [Reading::Pairs, Reading::Joined] {
            let answer = answer(vector, reading);
            if answer != vector["expected"] {
                disagreements.push(format!(
                    "{name} ({reading:?}): expected {}, the crate answered {answer}",
                    vector["expected"]
                ));
            }
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // The vectors hold what this test is for: repeated headers, and the
    // non-canonical numbers the crate once accepted.
    for name in [
        "duplicate-key",
        "duplicate-signature",
        "epoch-leading-zero",
        "signature-t-plus-sign",
        "signature-t-leading-zero",
        "signature-v1-uppercase-hex",
    ] {
        assert!(
            vectors.iter().any(|vector| vector["name"] == name),
            "{name}"
        );
    }
}
