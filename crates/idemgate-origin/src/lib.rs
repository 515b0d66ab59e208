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

/// The Rust examples of `docs/origin.md`, compiled and run as doc tests
/// (the documentation's own test checks that the page is included here).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/origin.md")]
pub struct OriginPageExamples;

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
    /// Reads the headers from every `(name, value)` pair the request
    /// carried, names in any case: an `http::HeaderMap` (`&headers`), or a
    /// list of pairs in which a header sent twice is two pairs.
    ///
    /// A forwarded header sent more than once is refused as
    /// [`VerifyError::MalformedHeader`]: a verifier that read one value and
    /// application code that read another would disagree on the key. So is
    /// a value that is not text.
    ///
    /// ```
    /// use idemgate_origin::{ForwardedHeaders, VerifyError};
    ///
    /// let once = [("idempotency-key", "\"order-42\""), ("Content-Type", "application/json")];
    /// assert_eq!(ForwardedHeaders::from_pairs(once).unwrap().key, Some("\"order-42\""));
    ///
    /// let twice = [("Idempotency-Key", "\"order-42\""), ("idempotency-key", "\"order-43\"")];
    /// assert!(matches!(
    ///     ForwardedHeaders::from_pairs(twice),
    ///     Err(VerifyError::MalformedHeader { header: "Idempotency-Key", .. })
    /// ));
    /// ```
    pub fn from_pairs<N, V>(
        pairs: impl IntoIterator<Item = (N, &'a V)>,
    ) -> Result<ForwardedHeaders<'a>, VerifyError>
    where
        N: AsRef<str>,
        V: AsRef<[u8]> + ?Sized + 'a,
    {
        let mut headers = ForwardedHeaders::default();
        for (name, value) in pairs {
            let name = name.as_ref();
            let (header, slot) = if name.eq_ignore_ascii_case(KEY_HEADER) {
                (KEY_HEADER, &mut headers.key)
            } else if name.eq_ignore_ascii_case(SCOPE_HEADER) {
                (SCOPE_HEADER, &mut headers.scope)
            } else if name.eq_ignore_ascii_case(EPOCH_HEADER) {
                (EPOCH_HEADER, &mut headers.epoch)
            } else if name.eq_ignore_ascii_case(SIGNATURE_HEADER) {
                (SIGNATURE_HEADER, &mut headers.signature)
            } else {
                continue;
            };
            if slot.is_some() {
                return Err(malformed(header, "sent more than once"));
            }
            let text = std::str::from_utf8(value.as_ref())
                .map_err(|_| malformed(header, "not visible ASCII"))?;
            *slot = Some(text);
        }
        Ok(headers)
    }

    /// Reads the headers through a case-insensitive lookup that gives each
    /// header's value, a repeated header's values joined by `", "` as
    /// HTTP combines them (which no well-formed value contains, so the
    /// repetition is refused). A lookup that keeps only the first value,
    /// such as `http::HeaderMap::get`, would hide a repeated header: with a
    /// `HeaderMap`, use [`ForwardedHeaders::from_pairs`].
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

/// A value without HTTP's optional whitespace (spaces and tabs) around it.
fn trim_ows(value: &str) -> &str {
    value.trim_matches([' ', '\t'])
}

/// `"<key>"`: idemgate's keys are visible ASCII without `"` or `\`.
fn parse_key(value: &str) -> Result<&str, VerifyError> {
    let key = trim_ows(value)
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
    let scope = trim_ows(value);
    if scope.len() == 64 && is_lowercase_hex(scope) {
        Ok(scope)
    } else {
        Err(malformed(SCOPE_HEADER, "not 64 lowercase hex digits"))
    }
}

fn is_lowercase_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A number as idemgate writes it: decimal digits, no sign, no leading
/// zero (`0` alone aside), within a `u64`. Any other spelling of the same
/// number is refused, so that exactly one header value verifies.
fn canonical_decimal(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let leading_zero = text.len() > 1 && text.starts_with('0');
    if digits && !leading_zero {
        text.parse().ok()
    } else {
        None
    }
}

fn parse_epoch(value: &str) -> Result<u64, VerifyError> {
    match canonical_decimal(trim_ows(value)) {
        Some(epoch) if epoch >= 1 => Ok(epoch),
        _ => Err(malformed(EPOCH_HEADER, "not a positive integer")),
    }
}

/// `t=<unix seconds>,v1=<64 lowercase hex digits>`, and nothing else.
fn parse_signature(value: &str) -> Result<(u64, Vec<u8>), VerifyError> {
    let (t, v1) = trim_ows(value)
        .split_once(',')
        .ok_or(malformed(SIGNATURE_HEADER, "expected t=<unix>,v1=<hex>"))?;
    let signed_at = t
        .strip_prefix("t=")
        .and_then(canonical_decimal)
        .ok_or(malformed(SIGNATURE_HEADER, "t is not a Unix time"))?;
    let signature = v1
        .strip_prefix("v1=")
        .filter(|digest| digest.len() == 64 && is_lowercase_hex(digest))
        .and_then(|digest| hex::decode(digest).ok())
        .ok_or(malformed(
            SIGNATURE_HEADER,
            "v1 is not 64 lowercase hex digits",
        ))?;
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
mod tests;
