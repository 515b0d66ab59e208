//! Verify what idemgate forwards, at the origin.
//!
//! idemgate adds these headers to every request it forwards (the last two
//! only with `FORWARD_SECRET`, and Source and Stale only when they apply):
//!
//! | header | value |
//! | --- | --- |
//! | `Idempotency-Key` | `"<key>"` (an RFC 8941 string) |
//! | `Idempotency-Scope` | the key's scope id: 64 lowercase hex digits (route, path, tenant) |
//! | `Idempotency-Epoch` | the forward's fencing epoch: higher than every earlier forward of the key |
//! | `Idempotency-Source` | `reconciliation` on a forward that idemgate's reconciliation made; absent on a live delivery |
//! | `Idempotency-Stale` | `true` on a forward older than one already delivered for its entity; absent otherwise |
//! | `Idempotency-Signature` | `t=<unix>,v1=<hex HMAC-SHA256(FORWARD_SECRET, content)>` |
//! | `Idempotency-Signature-V2` | `t=<unix>,v2=<hex HMAC-SHA256(FORWARD_SECRET, content2)>`, the same `t` |
//!
//! `content` is seven lines joined by `\n`: `t`, the method, the path and
//! query as the origin received them, the scope, the key, the epoch, and
//! the hex SHA-256 of the raw body. `content2` is nine: those seven, then
//! the `Idempotency-Source` value and the `Idempotency-Stale` value, each
//! an empty line when the header is absent.
//!
//! `v1` is what idemgate has always signed, and it still sends it byte for
//! byte, so that an origin on a verifier of that version keeps verifying.
//! But `v1` does not cover Source and Stale: anyone between idemgate and
//! the origin could add or remove them. [`Verifier::verify`] therefore
//! requires both headers, well-formed and with the same `t` (a pair with
//! two `t`s was not signed as one forward: [`VerifyError::BadSignature`]),
//! and checks the `v2` HMAC, which covers everything `v1` does and more; it
//! does not compute `v1`'s. It checks in constant time and within a clock
//! tolerance, and returns the scope, key, epoch, source and staleness.
//!
//! The origin should then, in the same database transaction as its side
//! effect, keep per (scope, key) the highest epoch it accepted and the body
//! hash of its first request: refuse a lower epoch (409) and a different
//! body hash (422), and answer a key it already processed with its first
//! result.
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
//!     signature_v2: Some(
//!         "t=1700000000,v2=97b6ee9585b362364454abe474303feee33744719d8c5cd8c28e0ee5342d8bd1",
//!     ),
//!     source: None,
//!     stale: None,
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
//! assert_eq!((forwarded.source, forwarded.stale), (None, false));
//! ```

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

pub mod audit;

pub const KEY_HEADER: &str = "Idempotency-Key";
pub const SCOPE_HEADER: &str = "Idempotency-Scope";
pub const EPOCH_HEADER: &str = "Idempotency-Epoch";
pub const SIGNATURE_HEADER: &str = "Idempotency-Signature";
pub const SIGNATURE_V2_HEADER: &str = "Idempotency-Signature-V2";
pub const SOURCE_HEADER: &str = "Idempotency-Source";
pub const STALE_HEADER: &str = "Idempotency-Stale";

/// The Rust examples of `docs/origin.md`, compiled and run as doc tests
/// (the documentation's own test checks that the page is included here).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/origin.md")]
pub struct OriginPageExamples;

/// Default allowed distance between the signature's `t` and now.
pub const DEFAULT_TOLERANCE_SECONDS: u64 = 300;

/// The forwarded header values as the request carried them (`None` if
/// absent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForwardedHeaders<'a> {
    pub key: Option<&'a str>,
    pub scope: Option<&'a str>,
    pub epoch: Option<&'a str>,
    /// `Idempotency-Signature` (`t=..,v1=..`).
    pub signature: Option<&'a str>,
    /// `Idempotency-Signature-V2` (`t=..,v2=..`).
    pub signature_v2: Option<&'a str>,
    /// `Idempotency-Source`, absent on a live delivery.
    pub source: Option<&'a str>,
    /// `Idempotency-Stale`, absent unless the forward is stale.
    pub stale: Option<&'a str>,
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
            } else if name.eq_ignore_ascii_case(SIGNATURE_V2_HEADER) {
                (SIGNATURE_V2_HEADER, &mut headers.signature_v2)
            } else if name.eq_ignore_ascii_case(SOURCE_HEADER) {
                (SOURCE_HEADER, &mut headers.source)
            } else if name.eq_ignore_ascii_case(STALE_HEADER) {
                (STALE_HEADER, &mut headers.stale)
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
            signature_v2: lookup(SIGNATURE_V2_HEADER),
            source: lookup(SOURCE_HEADER),
            stale: lookup(STALE_HEADER),
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
    /// The signatures' `t`, in Unix seconds.
    pub signed_at: u64,
    /// `Idempotency-Source`: `Some("reconciliation")` on a forward that
    /// idemgate's reconciliation made, `None` on a live delivery.
    pub source: Option<String>,
    /// `Idempotency-Stale: true`: the forward is older than one already
    /// delivered for its entity.
    pub stale: bool,
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
    #[error(
        "the signature does not match the request, scope, key, epoch, source, staleness and body"
    )]
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

/// What the signatures cover besides the request.
#[derive(Debug, Clone, Copy)]
struct Covered<'a> {
    scope: &'a str,
    key: &'a str,
    epoch: u64,
    body_sha256: &'a str,
    source: Option<&'a str>,
    stale: bool,
}

/// `v1`'s content: seven lines joined by `\n`.
fn signed_content(t: u64, request: &ForwardedRequest<'_>, covered: &Covered<'_>) -> String {
    format!(
        "{t}\n{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        request.path_and_query,
        covered.scope,
        covered.key,
        covered.epoch,
        covered.body_sha256
    )
}

/// `v2`'s content: `v1`'s seven lines, then the source and the staleness
/// (each empty when its header is absent), joined by `\n`.
fn signed_content_v2(t: u64, request: &ForwardedRequest<'_>, covered: &Covered<'_>) -> String {
    format!(
        "{}\n{}\n{}",
        signed_content(t, request, covered),
        covered.source.unwrap_or(""),
        if covered.stale { STALE_VALUE } else { "" }
    )
}

fn hmac(secret: &[u8], content: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(content.as_bytes());
    mac
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
        // v1 must be there and well-formed, but its HMAC is not computed:
        // v2's covers all that v1's does.
        let (signed_at, _v1) = parse_signature(
            headers
                .signature
                .ok_or(VerifyError::MissingHeader(SIGNATURE_HEADER))?,
            Version::V1,
        )?;
        let (signed_at_v2, signature) = parse_signature(
            headers
                .signature_v2
                .ok_or(VerifyError::MissingHeader(SIGNATURE_V2_HEADER))?,
            Version::V2,
        )?;
        let source = headers.source.map(parse_source).transpose()?;
        let stale = headers.stale.map(parse_stale).transpose()?.is_some();
        // idemgate signs both at once: two `t`s were not one forward.
        if signed_at != signed_at_v2 {
            return Err(VerifyError::BadSignature);
        }
        let skew_seconds = signed_at.abs_diff(now);
        if skew_seconds > self.tolerance_seconds {
            return Err(VerifyError::Stale {
                skew_seconds,
                tolerance_seconds: self.tolerance_seconds,
            });
        }
        let body_sha256 = hex::encode(Sha256::digest(request.body));
        let covered = Covered {
            scope,
            key,
            epoch,
            body_sha256: &body_sha256,
            source,
            stale,
        };
        hmac(
            &self.secret,
            &signed_content_v2(signed_at, request, &covered),
        )
        .verify_slice(&signature)
        .map_err(|_| VerifyError::BadSignature)?;
        Ok(Forwarded {
            scope: scope.to_string(),
            key: key.to_string(),
            epoch,
            body_sha256,
            signed_at,
            source: source.map(str::to_string),
            stale,
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

#[derive(Debug, Clone, Copy)]
enum Version {
    V1,
    V2,
}

/// `t=<unix seconds>,v1=<64 lowercase hex digits>` (`v2=` for
/// `Idempotency-Signature-V2`), and nothing else.
fn parse_signature(value: &str, version: Version) -> Result<(u64, Vec<u8>), VerifyError> {
    let (header, prefix, form, digest_reason) = match version {
        Version::V1 => (
            SIGNATURE_HEADER,
            "v1=",
            "expected t=<unix>,v1=<hex>",
            "v1 is not 64 lowercase hex digits",
        ),
        Version::V2 => (
            SIGNATURE_V2_HEADER,
            "v2=",
            "expected t=<unix>,v2=<hex>",
            "v2 is not 64 lowercase hex digits",
        ),
    };
    let (t, digest) = trim_ows(value)
        .split_once(',')
        .ok_or(malformed(header, form))?;
    let signed_at = t
        .strip_prefix("t=")
        .and_then(canonical_decimal)
        .ok_or(malformed(header, "t is not a Unix time"))?;
    let signature = digest
        .strip_prefix(prefix)
        .filter(|digest| digest.len() == 64 && is_lowercase_hex(digest))
        .and_then(|digest| hex::decode(digest).ok())
        .ok_or(malformed(header, digest_reason))?;
    Ok((signed_at, signature))
}

/// An RFC 9110 token (`reconciliation`): one word of visible ASCII, never
/// empty, since an empty value would sign as an absent header. Any token
/// verifies, so that a source idemgate adds later needs no new verifier;
/// what it means is the origin's to decide.
fn parse_source(value: &str) -> Result<&str, VerifyError> {
    let source = trim_ows(value);
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !source.is_empty() && source.bytes().all(tchar) {
        Ok(source)
    } else {
        Err(malformed(SOURCE_HEADER, "not a token"))
    }
}

/// The only value idemgate sends.
const STALE_VALUE: &str = "true";

fn parse_stale(value: &str) -> Result<(), VerifyError> {
    if trim_ows(value) == STALE_VALUE {
        Ok(())
    } else {
        Err(malformed(STALE_HEADER, "not `true`"))
    }
}

/// What [`sign`] signs besides the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedFields<'a> {
    pub scope: &'a str,
    /// The key, without quotes.
    pub key: &'a str,
    pub epoch: u64,
    /// Sent as `Idempotency-Source`, e.g. `Some("reconciliation")`.
    pub source: Option<&'a str>,
    /// Whether to send `Idempotency-Stale: true`.
    pub stale: bool,
}

/// Signs like idemgate does, for tests of origin code. Returns the headers
/// idemgate would add besides Key, Scope and Epoch, in its order:
/// `Idempotency-Source` and `Idempotency-Stale` when `fields` has them,
/// then `Idempotency-Signature` and `Idempotency-Signature-V2`, both at
/// `now`.
pub fn sign(
    secret: impl AsRef<[u8]>,
    request: &ForwardedRequest<'_>,
    fields: &SignedFields<'_>,
    now: u64,
) -> Vec<(&'static str, String)> {
    let body_sha256 = hex::encode(Sha256::digest(request.body));
    let covered = Covered {
        scope: fields.scope,
        key: fields.key,
        epoch: fields.epoch,
        body_sha256: &body_sha256,
        source: fields.source,
        stale: fields.stale,
    };
    let digest =
        |content: String| hex::encode(hmac(secret.as_ref(), &content).finalize().into_bytes());
    let mut headers = Vec::with_capacity(4);
    if let Some(source) = fields.source {
        headers.push((SOURCE_HEADER, source.to_string()));
    }
    if fields.stale {
        headers.push((STALE_HEADER, STALE_VALUE.to_string()));
    }
    headers.push((
        SIGNATURE_HEADER,
        format!(
            "t={now},v1={}",
            digest(signed_content(now, request, &covered))
        ),
    ));
    headers.push((
        SIGNATURE_V2_HEADER,
        format!(
            "t={now},v2={}",
            digest(signed_content_v2(now, request, &covered))
        ),
    ));
    headers
}

#[cfg(test)]
mod tests;
