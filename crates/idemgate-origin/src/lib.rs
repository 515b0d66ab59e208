//! Verify what idemgate forwards, at the origin.
//!
//! idemgate adds three headers to every request it forwards:
//!
//! | header | value |
//! | --- | --- |
//! | `Idempotency-Key` | `"<key>"` (an RFC 8941 string) |
//! | `Idempotency-Epoch` | the forward's fencing epoch: 1, 2, ... |
//! | `Idempotency-Signature` | `t=<unix>,v1=<hex HMAC-SHA256(FORWARD_SECRET, "<t>.<key>.<epoch>.<hex SHA-256 of the raw body>")>` |
//!
//! [`Verifier::verify`] checks them against the raw body, in constant time
//! and within a clock tolerance, and returns the key and epoch. The origin
//! should then, in the same database transaction as its side effect, refuse
//! an epoch lower than the highest it accepted for that key (fencing) and
//! answer a key it already processed with its first result.
//!
//! ```
//! use idemgate_origin::{ForwardedHeaders, Verifier};
//!
//! let verifier = Verifier::new("whsec_test");
//! let headers = ForwardedHeaders {
//!     key: Some("\"order-42\""),
//!     epoch: Some("1"),
//!     signature: Some(
//!         "t=1700000000,v1=c46fbc568198cf52410b61e17ba4499119045ceefb61c910d5906e4c50549f96",
//!     ),
//! };
//! let forwarded = verifier
//!     .verify(&headers, br#"{"amount":1000}"#, 1_700_000_000)
//!     .expect("a genuine forward");
//! assert_eq!(forwarded.key, "order-42");
//! assert_eq!(forwarded.epoch, 1);
//! ```

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const KEY_HEADER: &str = "Idempotency-Key";
pub const EPOCH_HEADER: &str = "Idempotency-Epoch";
pub const SIGNATURE_HEADER: &str = "Idempotency-Signature";

/// Default allowed distance between the signature's `t` and now.
pub const DEFAULT_TOLERANCE_SECONDS: u64 = 300;

/// The three header values as the request carried them (`None` if absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardedHeaders<'a> {
    pub key: Option<&'a str>,
    pub epoch: Option<&'a str>,
    pub signature: Option<&'a str>,
}

impl<'a> ForwardedHeaders<'a> {
    /// Reads the three headers through any case-insensitive lookup, e.g.
    /// `|name| headers.get(name).and_then(|v| v.to_str().ok())`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<&'a str>) -> ForwardedHeaders<'a> {
        ForwardedHeaders {
            key: lookup(KEY_HEADER),
            epoch: lookup(EPOCH_HEADER),
            signature: lookup(SIGNATURE_HEADER),
        }
    }
}

/// A forward that idemgate signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    pub key: String,
    pub epoch: u64,
    /// The signature's `t`, in Unix seconds.
    pub signed_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    #[error("malformed header {header}: {reason}")]
    MalformedHeader {
        header: &'static str,
        reason: &'static str,
    },
    #[error("stale signature: signed {skew_seconds} s from now, tolerance {tolerance_seconds} s")]
    Stale {
        skew_seconds: u64,
        tolerance_seconds: u64,
    },
    #[error("the signature does not match the key, epoch and body")]
    BadSignature,
}

/// Checks forwarded headers with the gateway's `FORWARD_SECRET`.
#[derive(Clone)]
pub struct Verifier {
    secret: Vec<u8>,
    tolerance_seconds: u64,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Verifier")
            .field("secret", &"redacted")
            .field("tolerance_seconds", &self.tolerance_seconds)
            .finish()
    }
}

impl Verifier {
    pub fn new(secret: impl AsRef<[u8]>) -> Verifier {
        Verifier {
            secret: secret.as_ref().to_vec(),
            tolerance_seconds: DEFAULT_TOLERANCE_SECONDS,
        }
    }

    /// Sets the allowed clock skew, past or future.
    pub fn with_tolerance(mut self, seconds: u64) -> Verifier {
        self.tolerance_seconds = seconds;
        self
    }

    /// Verifies a forward; `now` is Unix seconds.
    pub fn verify(
        &self,
        headers: &ForwardedHeaders<'_>,
        raw_body: &[u8],
        now: u64,
    ) -> Result<Forwarded, VerifyError> {
        let key = parse_key(headers.key.ok_or(VerifyError::MissingHeader(KEY_HEADER))?)?;
        let epoch = parse_epoch(
            headers
                .epoch
                .ok_or(VerifyError::MissingHeader(EPOCH_HEADER))?,
        )?;
        let (signed_at, signature) = parse_signature(
            headers
                .signature
                .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER))?,
        )?;
        let skew_seconds = signed_at.abs_diff(now);
        if skew_seconds > self.tolerance_seconds {
            return Err(VerifyError::Stale {
                skew_seconds,
                tolerance_seconds: self.tolerance_seconds,
            });
        }
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        let body_hash = hex::encode(Sha256::digest(raw_body));
        mac.update(format!("{signed_at}.{key}.{epoch}.{body_hash}").as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| VerifyError::BadSignature)?;
        Ok(Forwarded {
            key: key.to_string(),
            epoch,
            signed_at,
        })
    }
}

fn malformed(header: &'static str, reason: &'static str) -> VerifyError {
    VerifyError::MalformedHeader { header, reason }
}

/// `"<key>"`: idemgate's keys are visible ASCII without `"` or `\`.
fn parse_key(value: &str) -> Result<&str, VerifyError> {
    let key = value
        .trim()
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .ok_or(malformed(KEY_HEADER, "not a quoted string"))?;
    let valid = (1..=255).contains(&key.len())
        && key
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\');
    if valid {
        Ok(key)
    } else {
        Err(malformed(KEY_HEADER, "not a valid idempotency key"))
    }
}

fn parse_epoch(value: &str) -> Result<u64, VerifyError> {
    let value = value.trim();
    match value.parse::<u64>() {
        Ok(epoch) if epoch >= 1 && !value.starts_with('+') => Ok(epoch),
        _ => Err(malformed(EPOCH_HEADER, "not a positive integer")),
    }
}

fn parse_signature(value: &str) -> Result<(u64, Vec<u8>), VerifyError> {
    let (t, v1) = value
        .trim()
        .split_once(',')
        .ok_or(malformed(SIGNATURE_HEADER, "expected t=<unix>,v1=<hex>"))?;
    let signed_at = t
        .strip_prefix("t=")
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or(malformed(SIGNATURE_HEADER, "t is not a Unix time"))?;
    let signature = v1
        .strip_prefix("v1=")
        .and_then(|hex_digest| hex::decode(hex_digest).ok())
        .filter(|digest| digest.len() == 32)
        .ok_or(malformed(SIGNATURE_HEADER, "v1 is not 64 hex digits"))?;
    Ok((signed_at, signature))
}

/// Signs like idemgate does; for tests of origin code.
pub fn sign(secret: impl AsRef<[u8]>, key: &str, epoch: u64, raw_body: &[u8], now: u64) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_ref()).expect("HMAC takes a key of any length");
    let body_hash = hex::encode(Sha256::digest(raw_body));
    mac.update(format!("{now}.{key}.{epoch}.{body_hash}").as_bytes());
    format!("t={now},v1={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_test";
    const T: u64 = 1_700_000_000;
    const BODY: &[u8] = br#"{"amount":1000}"#;
    /// The README's test vector, computed independently with Python's hmac.
    const VECTOR: &str =
        "t=1700000000,v1=c46fbc568198cf52410b61e17ba4499119045ceefb61c910d5906e4c50549f96";

    fn headers<'a>(key: &'a str, epoch: &'a str, signature: &'a str) -> ForwardedHeaders<'a> {
        ForwardedHeaders {
            key: Some(key),
            epoch: Some(epoch),
            signature: Some(signature),
        }
    }

    fn verify(
        headers: &ForwardedHeaders<'_>,
        body: &[u8],
        now: u64,
    ) -> Result<Forwarded, VerifyError> {
        Verifier::new(SECRET).verify(headers, body, now)
    }

    #[test]
    fn accepts_the_test_vector() {
        let forwarded = verify(&headers("\"order-42\"", "1", VECTOR), BODY, T).unwrap();
        assert_eq!(
            forwarded,
            Forwarded {
                key: "order-42".into(),
                epoch: 1,
                signed_at: T
            }
        );
        assert_eq!(sign(SECRET, "order-42", 1, BODY, T), VECTOR);
    }

    #[test]
    fn a_wrong_secret_is_rejected() {
        let result =
            Verifier::new("whsec_other").verify(&headers("\"order-42\"", "1", VECTOR), BODY, T);
        assert_eq!(result, Err(VerifyError::BadSignature));
    }

    #[test]
    fn a_modified_body_key_or_epoch_is_rejected() {
        let cases = [
            (
                headers("\"order-42\"", "1", VECTOR),
                &br#"{"amount":1001}"#[..],
            ),
            (headers("\"order-43\"", "1", VECTOR), BODY),
            (headers("\"order-42\"", "2", VECTOR), BODY),
        ];
        for (headers, body) in cases {
            assert_eq!(verify(&headers, body, T), Err(VerifyError::BadSignature));
        }
    }

    #[test]
    fn stale_and_future_timestamps_are_rejected() {
        let headers = headers("\"order-42\"", "1", VECTOR);
        assert!(verify(&headers, BODY, T + 300).is_ok());
        assert!(verify(&headers, BODY, T - 300).is_ok());
        assert!(matches!(
            verify(&headers, BODY, T + 301),
            Err(VerifyError::Stale { .. })
        ));
        assert!(matches!(
            verify(&headers, BODY, T - 301),
            Err(VerifyError::Stale { .. })
        ));
        let lenient = Verifier::new(SECRET).with_tolerance(3_600);
        assert!(lenient.verify(&headers, BODY, T + 3_000).is_ok());
    }

    #[test]
    fn malformed_and_missing_headers_are_typed_errors() {
        let malformed_cases = [
            headers("order-42", "1", VECTOR),
            headers("\"\"", "1", VECTOR),
            headers("\"two words\"", "1", VECTOR),
            headers("\"order-42\"", "0", VECTOR),
            headers("\"order-42\"", "-1", VECTOR),
            headers("\"order-42\"", "one", VECTOR),
            headers("\"order-42\"", "1", "v1=abc"),
            headers("\"order-42\"", "1", "t=soon,v1=00"),
            headers("\"order-42\"", "1", "t=1700000000,v1=abc"),
        ];
        for headers in malformed_cases {
            assert!(
                matches!(
                    verify(&headers, BODY, T),
                    Err(VerifyError::MalformedHeader { .. })
                ),
                "{headers:?}"
            );
        }
        let missing = ForwardedHeaders {
            signature: None,
            ..headers("\"order-42\"", "1", VECTOR)
        };
        assert_eq!(
            verify(&missing, BODY, T),
            Err(VerifyError::MissingHeader(SIGNATURE_HEADER))
        );
    }

    #[test]
    fn headers_come_from_any_lookup() {
        let list = [
            ("idempotency-key", "\"order-42\""),
            ("idempotency-epoch", "1"),
            ("idempotency-signature", VECTOR),
        ];
        let headers = ForwardedHeaders::from_lookup(|name| {
            list.iter()
                .find(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| *value)
        });
        assert!(verify(&headers, BODY, T).is_ok());
    }

    #[test]
    fn the_secret_is_not_in_debug_output() {
        assert!(!format!("{:?}", Verifier::new("whsec_hidden")).contains("hidden"));
    }
}
