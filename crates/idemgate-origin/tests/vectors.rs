//! The verifier against every case of `tests/vectors/forwards.json`, the
//! vectors the Node.js and Python packages are tested against too, with
//! the headers read both ways the crate takes them; and a verifier of the
//! previous version (v1 alone, written out here) against each case's
//! `expected_v1`, which shows that an origin that has not upgraded still
//! verifies what it did.

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

fn header_pairs(vector: &Value) -> Vec<(String, String)> {
    vector["request"]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_string(),
                pair[1].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// What the crate answers for one vector, in the vectors' own terms.
fn answer(vector: &Value, reading: Reading) -> Value {
    let request = &vector["request"];
    let headers = header_pairs(vector);
    let [key, scope, epoch, signature, signature_v2, source, stale] = [
        idemgate_origin::KEY_HEADER,
        idemgate_origin::SCOPE_HEADER,
        idemgate_origin::EPOCH_HEADER,
        idemgate_origin::SIGNATURE_HEADER,
        idemgate_origin::SIGNATURE_V2_HEADER,
        idemgate_origin::SOURCE_HEADER,
        idemgate_origin::STALE_HEADER,
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
            signature_v2: signature_v2.as_deref(),
            source: source.as_deref(),
            stale: stale.as_deref(),
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
            "source": forwarded.source,
            "stale": forwarded.stale,
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
        "duplicate-signature-v2",
        "duplicate-source",
        "duplicate-stale",
        "signature-v2-uppercase-hex",
        "signature-v2-t-leading-zero",
    ] {
        assert!(
            vectors.iter().any(|vector| vector["name"] == name),
            "{name}"
        );
    }
}

/// A verifier of the previous version, as the crate was: it reads Key,
/// Scope, Epoch and `Idempotency-Signature` (each once), checks `v1` over
/// the seven lines, and ignores every other header. Written out here, in
/// the vectors' own terms, so that the file keeps proving what such an
/// origin answers.
mod v1 {
    use hmac::{Hmac, Mac};
    use serde_json::{json, Value};
    use sha2::{Digest, Sha256};

    type Refusal = &'static str;

    fn canonical_decimal(text: &str) -> Option<u64> {
        let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        let leading_zero = text.len() > 1 && text.starts_with('0');
        (digits && !leading_zero)
            .then(|| text.parse().ok())
            .flatten()
    }

    fn lowercase_hex(text: &str, len: usize) -> bool {
        text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }

    /// The one value of `name`, without spaces and tabs around it.
    fn single<'a>(headers: &'a [(String, String)], name: &str) -> Result<&'a str, Refusal> {
        let mut values = headers
            .iter()
            .filter(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim_matches([' ', '\t']));
        let value = values.next().ok_or("missing-header")?;
        match values.next() {
            Some(_) => Err("malformed-header"),
            None => Ok(value),
        }
    }

    pub fn answer(vector: &Value, headers: &[(String, String)], body: &[u8]) -> Value {
        match verify(vector, headers, body) {
            Ok(verified) => verified,
            Err(category) => json!({ "valid": false, "error": category }),
        }
    }

    fn verify(vector: &Value, headers: &[(String, String)], body: &[u8]) -> Result<Value, Refusal> {
        let key = single(headers, "Idempotency-Key")?
            .strip_prefix('"')
            .and_then(|rest| rest.strip_suffix('"'))
            .filter(|key| {
                (1..=255).contains(&key.len())
                    && key
                        .bytes()
                        .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
            })
            .ok_or("malformed-header")?;
        let scope = Some(single(headers, "Idempotency-Scope")?)
            .filter(|scope| lowercase_hex(scope, 64))
            .ok_or("malformed-header")?;
        let epoch = canonical_decimal(single(headers, "Idempotency-Epoch")?)
            .filter(|epoch| *epoch >= 1)
            .ok_or("malformed-header")?;
        let (t, v1) = single(headers, "Idempotency-Signature")?
            .split_once(',')
            .ok_or("malformed-header")?;
        let signed_at = t
            .strip_prefix("t=")
            .and_then(canonical_decimal)
            .ok_or("malformed-header")?;
        let v1 = v1
            .strip_prefix("v1=")
            .filter(|digest| lowercase_hex(digest, 64))
            .ok_or("malformed-header")?;
        let now = vector["now"].as_u64().unwrap();
        if signed_at.abs_diff(now) > vector["tolerance_seconds"].as_u64().unwrap() {
            return Err("stale");
        }
        let request = &vector["request"];
        let body_sha256 = hex::encode(Sha256::digest(body));
        let content = [
            signed_at.to_string().as_str(),
            request["method"].as_str().unwrap(),
            request["path_and_query"].as_str().unwrap(),
            scope,
            key,
            &epoch.to_string(),
            &body_sha256,
        ]
        .join("\n");
        let mut mac = Hmac::<Sha256>::new_from_slice(vector["secret"].as_str().unwrap().as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(content.as_bytes());
        mac.verify_slice(&hex::decode(v1).unwrap())
            .map_err(|_| "bad-signature")?;
        Ok(json!({
            "valid": true,
            "scope": scope,
            "key": key,
            "epoch": epoch,
            "body_sha256": body_sha256,
            "signed_at": signed_at,
        }))
    }
}

#[test]
fn a_verifier_of_the_previous_version_answers_every_vector_as_expected_v1() {
    let mut disagreements = Vec::new();
    let vectors = vectors();
    for vector in &vectors {
        let body = base64::engine::general_purpose::STANDARD
            .decode(vector["request"]["body_base64"].as_str().unwrap())
            .unwrap();
        let answer = v1::answer(vector, &header_pairs(vector), &body);
        if answer != vector["expected_v1"] {
            disagreements.push(format!(
                "{}: expected_v1 {}, the v1 verifier answered {answer}",
                vector["name"], vector["expected_v1"]
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    // Every forward idemgate signs now verifies for an origin that has not
    // upgraded, whatever its source and staleness; and the cases v2 refuses
    // that v1 cannot see are there.
    for name in [
        "genuine",
        "source-reconciliation",
        "stale-true",
        "source-reconciliation-and-stale-true",
    ] {
        let vector = vectors
            .iter()
            .find(|vector| vector["name"] == name)
            .unwrap();
        assert_eq!(vector["expected_v1"]["valid"], true, "{name}");
    }
    let refused_by_v2_only = vectors
        .iter()
        .filter(|vector| {
            vector["expected"]["valid"] == false && vector["expected_v1"]["valid"] == true
        })
        .count();
    assert!(refused_by_v2_only >= 10, "{refused_by_v2_only}");
}
