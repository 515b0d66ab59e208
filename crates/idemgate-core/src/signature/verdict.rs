//! What checking a delivery's signature comes to: a [`Verdict`] (verified,
//! or public-key signatures left to the runtime's WebCrypto), or the
//! [`Rejection`] that says which check failed.

use super::plaid;
use crate::problem::Problem;

/// A signature's verdict, as far as the core can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Verified,
    /// Public-key signatures the runtime's WebCrypto checks: the delivery
    /// passes when any one of them verifies.
    PublicKey(Vec<PublicKeyCheck>),
}

/// One public-key signature to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKeyCheck {
    pub algorithm: PublicKeyAlgorithm,
    pub key: PublicKey,
    /// The bytes signed: one copy however many signatures are checked
    /// against it (a body may be a MiB).
    pub message: std::rc::Rc<[u8]>,
    pub signature: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicKeyAlgorithm {
    /// Ed25519 (Standard Webhooks `v1a`).
    Ed25519,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (PayPal's `SHA256withRSA`).
    RsaPkcs1Sha256,
    /// ECDSA on P-256 with SHA-256, the signature `r || s` (JWS `ES256`,
    /// Plaid's).
    EcdsaP256Sha256,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// The key's raw bytes (an Ed25519 public key).
    Raw(Vec<u8>),
    /// The X.509 certificate at this URL, from an allowed host, holds it.
    Certificate { url: String },
    /// Plaid's JWK of this key id, fetched from the route's API base.
    Plaid(plaid::KeyRequest),
}

/// Why a delivery's signature was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    MissingHeader(String),
    Malformed(String, &'static str),
    Stale {
        skew_seconds: u64,
        tolerance: u64,
    },
    Mismatch,
    /// Genuine, but a batch that repeats an event: 400, nothing stored.
    InvalidBatch(&'static str),
}

impl Rejection {
    pub(crate) fn missing(header: &str) -> Rejection {
        Rejection::MissingHeader(header.to_string())
    }

    pub(crate) fn malformed(header: &str, what: &'static str) -> Rejection {
        Rejection::Malformed(header.to_string(), what)
    }
}

/// The header `name` (any case) a scheme needs, or the rejection that
/// says it is missing.
pub(crate) fn required_header<'a>(
    headers: &'a [(String, String)],
    name: &str,
) -> Result<&'a str, Rejection> {
    crate::headers::get(headers, name).ok_or_else(|| Rejection::missing(name))
}

impl From<Rejection> for Problem {
    fn from(rejection: Rejection) -> Problem {
        let reason = match rejection {
            Rejection::InvalidBatch(reason) => {
                return Problem::InvalidBatch {
                    reason: reason.to_string(),
                }
            }
            Rejection::MissingHeader(header) => format!("missing header {header}"),
            Rejection::Malformed(header, what) => format!("malformed {header}: {what}"),
            Rejection::Stale {
                skew_seconds,
                tolerance,
            } => format!(
                "stale: the signed timestamp is {skew_seconds} s from now, over SIGNATURE_TOLERANCE_SECONDS ({tolerance})"
            ),
            Rejection::Mismatch => "mismatch: no signature matches the body".to_string(),
        };
        Problem::BadSignature { reason }
    }
}
