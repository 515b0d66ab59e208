//! Verify what idemgate forwards, at the origin.
//!
//! idemgate adds four headers to every request it forwards:
//!
//! | header | value |
//! | --- | --- |
//! | `Idempotency-Key` | `"<key>"` (an RFC 8941 string) |
//! | `Idempotency-Scope` | the key's scope id: 64 lowercase hex digits (route, path, tenant) |
//! | `Idempotency-Epoch` | the forward's fencing epoch: higher than every earlier forward of the key |
//! | `Idempotency-Signature` | `t=<unix>,v1=<hex HMAC-SHA256(FORWARD_SECRET, content)>` |
//!
//! The signed content is seven lines joined by `\n`: `t`, the method, the
//! path and query as the origin received them, the scope, the key, the
//! epoch, and the hex SHA-256 of the raw body. [`Verifier::verify`] checks
//! them, in constant time and within a clock tolerance, and returns the
//! scope, key and epoch. The origin should then, in the same database
//! transaction as its side effect, keep per (scope, key) the highest epoch
//! it accepted and the body hash of its first request: refuse a lower
//! epoch (409) and a different body hash (422), and answer a key it already
//! processed with its first result.
//!
//! ```
//! use idemgate_origin::{ForwardedHeaders, ForwardedRequest, Verifier};
//!
//! let verifier = Verifier::new("whsec_test");
//! let headers = ForwardedHeaders {
//!     key: Some("\"order-42\""),
//!     scope: Some("aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd"),
//!     epoch: Some("1700000000000000"),
//!     signature: Some(
//!         "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53",
//!     ),
//! };
//! let request = ForwardedRequest {
//!     method: "POST",
//!     path_and_query: "/payments?currency=eur",
//!     body: br#"{"amount":1000}"#,
//! };
//! let forwarded = verifier
//!     .verify(&headers, &request, 1_700_000_000)
//!     .expect("a genuine forward");
//! assert_eq!(forwarded.key, "order-42");
//! assert_eq!(forwarded.epoch, 1_700_000_000_000_000);
//! ```

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub const KEY_HEADER: &str = "Idempotency-Key";
pub const SCOPE_HEADER: &str = "Idempotency-Scope";
pub const EPOCH_HEADER: &str = "Idempotency-Epoch";
pub const SIGNATURE_HEADER: &str = "Idempotency-Signature";

/// Default allowed distance between the signature's `t` and now.
pub const DEFAULT_TOLERANCE_SECONDS: u64 = 300;

/// The four header values as the request carried them (`None` if absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardedHeaders<'a> {
    pub key: Option<&'a str>,
    pub scope: Option<&'a str>,
    pub epoch: Option<&'a str>,
    pub signature: Option<&'a str>,
}

impl<'a> ForwardedHeaders<'a> {
    /// Reads the headers through any case-insensitive lookup, e.g.
    /// `|name| headers.get(name).and_then(|v| v.to_str().ok())`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<&'a str>) -> ForwardedHeaders<'a> {
        ForwardedHeaders {
            key: lookup(KEY_HEADER),
            scope: lookup(SCOPE_HEADER),
            epoch: lookup(EPOCH_HEADER),
            signature: lookup(SIGNATURE_HEADER),
        }
    }
}

/// The request as the origin received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardedRequest<'a> {
    pub method: &'a str,
    /// The path and query of the request line, e.g. `/payments?currency=eur`.
    pub path_and_query: &'a str,
    /// The raw body bytes.
    pub body: &'a [u8],
}

/// A forward that idemgate signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    pub scope: String,
    pub key: String,
    pub epoch: u64,
    /// Hex SHA-256 of the raw body: keep the first one per (scope, key).
    pub body_sha256: String,
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
    #[error("the signature does not match the request, scope, key, epoch and body")]
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

/// The signed content: seven lines joined by `\n`.
fn signed_content(
    t: u64,
    request: &ForwardedRequest<'_>,
    scope: &str,
    key: &str,
    epoch: u64,
    body_sha256: &str,
) -> String {
    format!(
        "{t}\n{}\n{}\n{scope}\n{key}\n{epoch}\n{body_sha256}",
        request.method, request.path_and_query
    )
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
        request: &ForwardedRequest<'_>,
        now: u64,
    ) -> Result<Forwarded, VerifyError> {
        let key = parse_key(headers.key.ok_or(VerifyError::MissingHeader(KEY_HEADER))?)?;
        let scope = parse_scope(
            headers
                .scope
                .ok_or(VerifyError::MissingHeader(SCOPE_HEADER))?,
        )?;
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
        let body_sha256 = hex::encode(Sha256::digest(request.body));
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes a key of any length");
        mac.update(signed_content(signed_at, request, scope, key, epoch, &body_sha256).as_bytes());
        mac.verify_slice(&signature)
            .map_err(|_| VerifyError::BadSignature)?;
        Ok(Forwarded {
            scope: scope.to_string(),
            key: key.to_string(),
            epoch,
            body_sha256,
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

fn parse_scope(value: &str) -> Result<&str, VerifyError> {
    let scope = value.trim();
    if scope.len() == 64
        && scope
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        Ok(scope)
    } else {
        Err(malformed(SCOPE_HEADER, "not 64 lowercase hex digits"))
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
pub fn sign(
    secret: impl AsRef<[u8]>,
    request: &ForwardedRequest<'_>,
    scope: &str,
    key: &str,
    epoch: u64,
    now: u64,
) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_ref()).expect("HMAC takes a key of any length");
    let body_sha256 = hex::encode(Sha256::digest(request.body));
    mac.update(signed_content(now, request, scope, key, epoch, &body_sha256).as_bytes());
    format!("t={now},v1={}", hex::encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_test";
    const T: u64 = 1_700_000_000;
    const SCOPE: &str = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd";
    const EPOCH: &str = "1700000000000000";
    const BODY: &[u8] = br#"{"amount":1000}"#;
    /// The README's test vector, computed independently with Python's hmac.
    const VECTOR: &str =
        "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53";

    fn request(body: &[u8]) -> ForwardedRequest<'_> {
        ForwardedRequest {
            method: "POST",
            path_and_query: "/payments?currency=eur",
            body,
        }
    }

    fn headers<'a>(
        key: &'a str,
        scope: &'a str,
        epoch: &'a str,
        signature: &'a str,
    ) -> ForwardedHeaders<'a> {
        ForwardedHeaders {
            key: Some(key),
            scope: Some(scope),
            epoch: Some(epoch),
            signature: Some(signature),
        }
    }

    fn genuine() -> ForwardedHeaders<'static> {
        headers("\"order-42\"", SCOPE, EPOCH, VECTOR)
    }

    fn verify(
        headers: &ForwardedHeaders<'_>,
        request: &ForwardedRequest<'_>,
        now: u64,
    ) -> Result<Forwarded, VerifyError> {
        Verifier::new(SECRET).verify(headers, request, now)
    }

    #[test]
    fn accepts_the_test_vector() {
        let forwarded = verify(&genuine(), &request(BODY), T).unwrap();
        assert_eq!(forwarded.key, "order-42");
        assert_eq!(forwarded.scope, SCOPE);
        assert_eq!(forwarded.epoch, 1_700_000_000_000_000);
        assert_eq!(forwarded.signed_at, T);
        assert_eq!(
            forwarded.body_sha256,
            "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc"
        );
        assert_eq!(
            sign(
                SECRET,
                &request(BODY),
                SCOPE,
                "order-42",
                1_700_000_000_000_000,
                T
            ),
            VECTOR
        );
    }

    #[test]
    fn a_wrong_secret_is_rejected() {
        let result = Verifier::new("whsec_other").verify(&genuine(), &request(BODY), T);
        assert_eq!(result, Err(VerifyError::BadSignature));
    }

    #[test]
    fn every_signed_part_is_checked() {
        let other_scope = "b".repeat(64);
        let signed_cases = [
            (headers("\"order-43\"", SCOPE, EPOCH, VECTOR), request(BODY)),
            (
                headers("\"order-42\"", &other_scope, EPOCH, VECTOR),
                request(BODY),
            ),
            (
                headers("\"order-42\"", SCOPE, "1700000000000001", VECTOR),
                request(BODY),
            ),
            (genuine(), request(br#"{"amount":1001}"#)),
            (
                genuine(),
                ForwardedRequest {
                    method: "PUT",
                    ..request(BODY)
                },
            ),
            (
                genuine(),
                ForwardedRequest {
                    path_and_query: "/payments?currency=usd",
                    ..request(BODY)
                },
            ),
            (
                genuine(),
                ForwardedRequest {
                    path_and_query: "/refunds?currency=eur",
                    ..request(BODY)
                },
            ),
        ];
        for (headers, request) in signed_cases {
            assert_eq!(
                verify(&headers, &request, T),
                Err(VerifyError::BadSignature),
                "{headers:?} {request:?}"
            );
        }
    }

    #[test]
    fn stale_and_future_timestamps_are_rejected() {
        assert!(verify(&genuine(), &request(BODY), T + 300).is_ok());
        assert!(verify(&genuine(), &request(BODY), T - 300).is_ok());
        for now in [T + 301, T - 301] {
            assert!(matches!(
                verify(&genuine(), &request(BODY), now),
                Err(VerifyError::Stale { .. })
            ));
        }
        let lenient = Verifier::new(SECRET).with_tolerance(3_600);
        assert!(lenient
            .verify(&genuine(), &request(BODY), T + 3_000)
            .is_ok());
    }

    #[test]
    fn malformed_and_missing_headers_are_typed_errors() {
        let upper = SCOPE.to_uppercase();
        let malformed_cases = [
            headers("order-42", SCOPE, EPOCH, VECTOR),
            headers("\"\"", SCOPE, EPOCH, VECTOR),
            headers("\"two words\"", SCOPE, EPOCH, VECTOR),
            headers("\"order-42\"", "abc", EPOCH, VECTOR),
            headers("\"order-42\"", &upper, EPOCH, VECTOR),
            headers("\"order-42\"", SCOPE, "0", VECTOR),
            headers("\"order-42\"", SCOPE, "-1", VECTOR),
            headers("\"order-42\"", SCOPE, "one", VECTOR),
            headers("\"order-42\"", SCOPE, EPOCH, "v1=abc"),
            headers("\"order-42\"", SCOPE, EPOCH, "t=soon,v1=00"),
            headers("\"order-42\"", SCOPE, EPOCH, "t=1700000000,v1=abc"),
        ];
        for headers in malformed_cases {
            assert!(
                matches!(
                    verify(&headers, &request(BODY), T),
                    Err(VerifyError::MalformedHeader { .. })
                ),
                "{headers:?}"
            );
        }
        let missing_scope = ForwardedHeaders {
            scope: None,
            ..genuine()
        };
        assert_eq!(
            verify(&missing_scope, &request(BODY), T),
            Err(VerifyError::MissingHeader(SCOPE_HEADER))
        );
        let missing = ForwardedHeaders {
            signature: None,
            ..genuine()
        };
        assert_eq!(
            verify(&missing, &request(BODY), T),
            Err(VerifyError::MissingHeader(SIGNATURE_HEADER))
        );
    }

    #[test]
    fn headers_come_from_any_lookup() {
        let list = [
            ("idempotency-key", "\"order-42\""),
            ("idempotency-scope", SCOPE),
            ("idempotency-epoch", EPOCH),
            ("idempotency-signature", VECTOR),
        ];
        let headers = ForwardedHeaders::from_lookup(|name| {
            list.iter()
                .find(|(header, _)| header.eq_ignore_ascii_case(name))
                .map(|(_, value)| *value)
        });
        assert!(verify(&headers, &request(BODY), T).is_ok());
    }

    #[test]
    fn the_secret_is_not_in_debug_output() {
        assert!(!format!("{:?}", Verifier::new("whsec_hidden")).contains("hidden"));
    }
}
