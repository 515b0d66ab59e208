//! The payload fingerprint (SPEC §1.5): SHA-256 of the RFC 8785 (JCS)
//! canonical form for JSON bodies, of the raw bytes for anything else.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::problem::Problem;

/// Hex SHA-256 of a delivery's canonical body.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn of_json(value: &Value) -> Fingerprint {
        Fingerprint::of_bytes(&canonical_json(value))
    }

    pub fn of_bytes(bytes: &[u8]) -> Fingerprint {
        Fingerprint(sha256_hex(bytes))
    }

    /// Accepts only what [`Fingerprint::as_str`] produces: 64 lowercase hex digits.
    pub fn from_hex(hex: &str) -> Option<Fingerprint> {
        let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        valid.then(|| Fingerprint(hex.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
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

/// Parses a JSON body; the error carries serde_json's message, which names
/// the line and column (and covers invalid UTF-8 and nesting past 128 levels).
pub fn parse_json(body: &[u8]) -> Result<Value, Problem> {
    serde_json::from_slice(body).map_err(|error| Problem::InvalidJson {
        message: error.to_string(),
    })
}

/// RFC 8785: sorted keys (by UTF-16 code units), no whitespace, ECMAScript
/// number formatting, minimal string escapes.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    serde_jcs::to_vec(value).expect("a parsed JSON value always canonicalises")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        String::from_utf8(canonical_json(&parse_json(text.as_bytes()).unwrap())).unwrap()
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a = parse_json(br#"{"amount": 1000, "currency": "eur", "id": "tx_1"}"#).unwrap();
        let b =
            parse_json(b"{\n  \"id\":\"tx_1\",\"currency\" :\"eur\",\t\"amount\":1000}").unwrap();
        assert_eq!(Fingerprint::of_json(&a), Fingerprint::of_json(&b));
        assert_eq!(
            canonical(r#"{ "b": [1, 2, {"d": null, "c": true}], "a": "x" }"#),
            r#"{"a":"x","b":[1,2,{"c":true,"d":null}]}"#
        );
    }

    #[test]
    fn a_changed_value_changes_the_fingerprint() {
        let a = parse_json(br#"{"id":"tx_1","amount":1000}"#).unwrap();
        let b = parse_json(br#"{"id":"tx_1","amount":1001}"#).unwrap();
        assert_ne!(Fingerprint::of_json(&a), Fingerprint::of_json(&b));
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // RFC 8785 §3.2.3 sorts by UTF-16 code units, which differs from
        // code point order above U+FFFF: U+1F600 (surrogate 0xD83D) sorts
        // before U+FF61 although its code point is larger.
        assert_eq!(
            canonical(r#"{"ö":4,"\u0080":3,"1":2,"\r":1}"#),
            "{\"\\r\":1,\"1\":2,\"\u{80}\":3,\"ö\":4}"
        );
        assert_eq!(canonical(r#"{"😀":2,"€":1}"#), r#"{"€":1,"😀":2}"#);
        assert_eq!(
            canonical("{\"\u{ff61}\":2,\"\u{1f600}\":1}"),
            "{\"\u{1f600}\":1,\"\u{ff61}\":2}"
        );
    }

    #[test]
    fn unicode_escapes_are_resolved_and_only_controls_escaped() {
        assert_eq!(canonical(r#""\u0041\u00e9\u20ac""#), "\"Aé€\"");
        assert_eq!(canonical(r#""\ud83d\ude00""#), "\"😀\"");
        assert_eq!(canonical(r#""\u001f\n\"\\/""#), r#""\u001f\n\"\\/""#);
        assert_eq!(canonical(r#""\u000f""#), r#""\u000f""#);
    }

    #[test]
    fn numbers_use_ecmascript_formatting() {
        // Vectors from RFC 8785 Appendix B and §3.2.2.3.
        assert_eq!(canonical("[1.0, 1e0, 100e-2]"), "[1,1,1]");
        assert_eq!(canonical("1e30"), "1e+30");
        assert_eq!(canonical("-0.0"), "0");
        assert_eq!(canonical("0.000001"), "0.000001");
        assert_eq!(canonical("0.0000001"), "1e-7");
        assert_eq!(canonical("333333333.33333329"), "333333333.3333333");
        assert_eq!(canonical("1E21"), "1e+21");
        assert_eq!(canonical("999999999999999999999"), "1e+21");
        assert_eq!(canonical("4.50"), "4.5");
        assert_eq!(canonical("2e-3"), "0.002");
    }

    #[test]
    fn rfc8785_section_3_2_2_example() {
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        assert_eq!(
            canonical(input),
            "{\"literals\":[null,true,false],\"numbers\":[333333333.3333333,1e+30,4.5,0.002,1e-27],\"string\":\"€$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}"
        );
    }

    #[test]
    fn raw_bytes_fingerprint_is_plain_sha256() {
        assert_eq!(
            Fingerprint::of_bytes(b"abc").as_str(),
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
    fn invalid_json_carries_the_parser_message() {
        let Problem::InvalidJson { message } = parse_json(b"{\"a\":").unwrap_err() else {
            panic!()
        };
        assert!(message.contains("line 1"), "{message}");
        assert!(parse_json(&[0x22, 0xff, 0x22]).is_err());
        let deep = "[".repeat(5_000) + &"]".repeat(5_000);
        assert!(parse_json(deep.as_bytes()).is_err());
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
