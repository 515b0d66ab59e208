//! The payload fingerprint (SPEC §1.5): SHA-256 over the method, the query
//! string and the canonical body, which is the RFC 8785 form for JSON
//! ([`crate::json`]) and the raw bytes for anything else.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::json::{self, one_pass::CanonicalBody};
use crate::problem::Problem;

/// Hex SHA-256 of a delivery's method, query and canonical body. Read
/// back (from a record or the gateway's call) only as [`Fingerprint::from_hex`]
/// accepts it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct Fingerprint(String);

impl From<Fingerprint> for String {
    fn from(fingerprint: Fingerprint) -> String {
        fingerprint.0
    }
}

impl TryFrom<String> for Fingerprint {
    type Error = &'static str;

    fn try_from(hex: String) -> Result<Fingerprint, &'static str> {
        match is_sha256_hex(&hex) {
            true => Ok(Fingerprint(hex)),
            false => Err("a fingerprint is 64 lowercase hex digits"),
        }
    }
}

impl Fingerprint {
    /// The fingerprint of a request, from the hash of its canonical body
    /// ([`body_sha256`]). The method is upper-cased; an absent query and an
    /// empty one are the same. Newlines cannot occur in a method or a
    /// query, so the three fields cannot run into each other.
    pub fn of_request(method: &str, query: Option<&str>, body_sha256: &str) -> Fingerprint {
        let mut hasher = Sha256::new();
        hasher.update(b"idemgate/fingerprint/v2\n");
        hasher.update(method.to_ascii_uppercase().as_bytes());
        hasher.update(b"\n");
        hasher.update(query.unwrap_or("").as_bytes());
        hasher.update(b"\n");
        hasher.update(body_sha256.as_bytes());
        Fingerprint(hex::encode(hasher.finalize()))
    }

    /// The fingerprint of a reconciled delivery (SPEC §11): the provider's
    /// event id, since the API's rendering of an event and its webhook's
    /// body differ in bytes. A prefix no request fingerprint hashes keeps
    /// the two kinds apart.
    pub fn of_event(event_id: &str) -> Fingerprint {
        let mut hasher = Sha256::new();
        hasher.update(b"idemgate/fingerprint/event\n");
        hasher.update(event_id.as_bytes());
        Fingerprint(hex::encode(hasher.finalize()))
    }

    /// A fingerprint for tests and simulations that need one per payload.
    pub fn of_bytes(bytes: &[u8]) -> Fingerprint {
        Fingerprint(sha256_hex(bytes))
    }

    /// Accepts only what [`Fingerprint::as_str`] produces: 64 lowercase hex digits.
    pub fn from_hex(hex: &str) -> Option<Fingerprint> {
        is_sha256_hex(hex).then(|| Fingerprint(hex.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// 64 lowercase hex digits: what [`sha256_hex`] writes.
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Hex SHA-256 of the canonical body: RFC 8785 for JSON (`canonical`),
/// the raw bytes otherwise. It is the `body-sha256` key, and the body
/// part of the fingerprint.
pub fn body_sha256(canonical: Option<&[u8]>, raw: &[u8]) -> String {
    sha256_hex(canonical.unwrap_or(raw))
}

/// `application/json`, or any `type/subtype+json`, parameters ignored.
pub fn is_json_media_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json" || (essence.contains('/') && essence.ends_with("+json"))
}

/// Reads a JSON body into its canonical form and the values at
/// `pointers`; the error carries the reader's message, which names the
/// line and column (and covers invalid UTF-8, duplicate member names and
/// nesting past 128 levels).
pub fn read_json<'a>(body: &'a [u8], pointers: &[&str]) -> Result<CanonicalBody<'a>, Problem> {
    json::one_pass::read(body, pointers).map_err(|error| Problem::InvalidJson {
        message: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body_hash(text: &str) -> String {
        let body = read_json(text.as_bytes(), &[]).unwrap();
        body_sha256(Some(body.canonical()), text.as_bytes())
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        assert_eq!(
            body_hash(r#"{"amount": 1000, "currency": "eur", "id": "tx_1"}"#),
            body_hash("{\n  \"id\":\"tx_1\",\"currency\" :\"eur\",\t\"amount\":1000}")
        );
        assert_eq!(body_hash(r#"{"a":1}"#), sha256_hex(br#"{"a":1}"#));
    }

    #[test]
    fn a_changed_value_changes_the_body_hash() {
        assert_ne!(
            body_hash(r#"{"id":"tx_1","amount":1000}"#),
            body_hash(r#"{"id":"tx_1","amount":1001}"#)
        );
        assert_ne!(
            body_hash(r#"{"amount":9007199254740993}"#),
            body_hash(r#"{"amount":9007199254740992}"#)
        );
    }

    #[test]
    fn the_fingerprint_covers_method_and_query() {
        let body = body_hash(r#"{"amount":100}"#);
        let charge = Fingerprint::of_request("POST", Some("amount=100"), &body);
        assert_ne!(
            charge,
            Fingerprint::of_request("POST", Some("amount=999"), &body)
        );
        assert_ne!(
            charge,
            Fingerprint::of_request("PUT", Some("amount=100"), &body)
        );
        assert_eq!(
            charge,
            Fingerprint::of_request("post", Some("amount=100"), &body)
        );
        assert_eq!(
            Fingerprint::of_request("POST", None, &body),
            Fingerprint::of_request("POST", Some(""), &body)
        );
        assert_ne!(
            Fingerprint::of_request("POST", None, &body),
            Fingerprint::of_request("POST", None, &body_hash("{}"))
        );
    }

    #[test]
    fn raw_bytes_hash_as_they_are() {
        assert_eq!(
            body_sha256(None, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn json_media_types() {
        assert!(is_json_media_type("application/json"));
        assert!(is_json_media_type("Application/JSON; charset=utf-8"));
        assert!(is_json_media_type("application/problem+json"));
        assert!(!is_json_media_type("text/plain"));
        assert!(!is_json_media_type("application/x-www-form-urlencoded"));
        assert!(!is_json_media_type("+json"));
    }

    #[test]
    fn invalid_json_carries_the_reader_message() {
        let Problem::InvalidJson { message } = read_json(b"{\"a\":", &[]).unwrap_err() else {
            panic!()
        };
        assert!(message.contains("line 1"), "{message}");
        let Problem::InvalidJson { message } = read_json(br#"{"a":1,"a":2}"#, &[]).unwrap_err()
        else {
            panic!()
        };
        assert!(message.starts_with("duplicate member name"), "{message}");
    }

    #[test]
    fn fingerprint_hex_round_trip() {
        let fingerprint = Fingerprint::of_bytes(b"x");
        assert_eq!(
            Fingerprint::from_hex(fingerprint.as_str()),
            Some(fingerprint)
        );
        assert_eq!(Fingerprint::from_hex("abc"), None);
        assert_eq!(Fingerprint::from_hex(&"G".repeat(64)), None);
    }
}
