//! Sender authentication (SPEC §4): one file per scheme, one entry point.
//!
//! Verification runs before the Durable Object is touched, so a forged or
//! stale delivery can neither lock nor poison a key. Every comparison of a
//! signature is constant-time (`Mac::verify_slice`), and a rejection says
//! which check failed without echoing the expected value.

mod standard_webhooks;
mod stripe;

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use standard_webhooks::decode_secret as decode_standard_webhooks_secret;

use crate::problem::Problem;

/// A secret whose `Debug` form never shows its value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Secret(redacted)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureScheme {
    None,
    /// `Stripe-Signature`, keyed by the `whsec_...` secret as text.
    Stripe {
        secret: Secret,
    },
    /// `webhook-signature`, keyed by the base64-decoded secret.
    StandardWebhooks {
        key: Vec<u8>,
    },
}

/// Why a delivery's signature was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    MissingHeader(&'static str),
    Malformed(&'static str, &'static str),
    Stale { skew_seconds: u64, tolerance: u64 },
    Mismatch,
}

impl From<Rejection> for Problem {
    fn from(rejection: Rejection) -> Problem {
        let reason = match rejection {
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

/// Checks a delivery's signature; `now` is Unix seconds.
pub fn verify(
    scheme: &SignatureScheme,
    tolerance_seconds: u64,
    headers: &[(String, String)],
    body: &[u8],
    now: u64,
) -> Result<(), Problem> {
    match scheme {
        SignatureScheme::None => Ok(()),
        SignatureScheme::Stripe { secret } => stripe::verify(
            secret.expose().as_bytes(),
            tolerance_seconds,
            headers,
            body,
            now,
        ),
        SignatureScheme::StandardWebhooks { key } => {
            standard_webhooks::verify(key, tolerance_seconds, headers, body, now)
        }
    }
    .map_err(Problem::from)
}

/// Passes if any decodable candidate is the HMAC-SHA256, under `key`, of
/// `signed` joined by `.` (both schemes sign "<part>.<part>.<raw body>").
/// Compared in constant time; senders list several while rolling a secret.
fn any_matches(
    key: &[u8],
    signed: &[&[u8]],
    mut candidates: impl Iterator<Item = Option<Vec<u8>>>,
) -> Result<(), Rejection> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    for (index, part) in signed.iter().enumerate() {
        if index > 0 {
            mac.update(b".");
        }
        mac.update(part);
    }
    if candidates.any(|candidate| {
        candidate.is_some_and(|signature| mac.clone().verify_slice(&signature).is_ok())
    }) {
        Ok(())
    } else {
        Err(Rejection::Mismatch)
    }
}

/// Both schemes refuse a timestamp too far in the past or in the future.
fn check_freshness(timestamp: u64, now: u64, tolerance: u64) -> Result<(), Rejection> {
    let skew_seconds = timestamp.abs_diff(now);
    if skew_seconds > tolerance {
        return Err(Rejection::Stale {
            skew_seconds,
            tolerance,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let scheme = SignatureScheme::Stripe {
            secret: Secret::new("whsec_do_not_print".into()),
        };
        assert!(!format!("{scheme:?}").contains("do_not_print"));
    }

    #[test]
    fn freshness_is_symmetric() {
        assert!(check_freshness(1_000, 1_300, 300).is_ok());
        assert!(check_freshness(1_300, 1_000, 300).is_ok());
        assert!(check_freshness(1_000, 1_301, 300).is_err());
        assert!(check_freshness(1_301, 1_000, 300).is_err());
    }

    #[test]
    fn rejections_name_the_failed_check_without_the_expected_value() {
        let problem = Problem::from(Rejection::Mismatch);
        assert_eq!(problem.status(), 401);
        assert_eq!(problem.name(), "bad-signature");
        assert!(problem.detail().starts_with("mismatch"));
    }
}
