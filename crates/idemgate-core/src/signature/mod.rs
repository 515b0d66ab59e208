//! Sender authentication (SPEC §4): one file per scheme, one entry point.
//!
//! Verification runs before the Durable Object is touched, so a forged or
//! stale delivery can neither lock nor poison a key. Every comparison of a
//! signature is constant-time (`Mac::verify_slice`), a scheme that carries
//! several signatures passes when any one matches (a sender rolling its
//! secret signs with both), and a rejection says which check failed without
//! echoing the expected value.

mod adyen;
mod body_hmac;
mod checkout;
mod github;
mod paddle;
mod razorpay;
mod shopify;
mod square;
mod standard_webhooks;
mod stripe;

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use body_hmac::Encoding;

use crate::headers;
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

/// A decoded key (Standard Webhooks, Adyen), redacted like [`Secret`].
#[derive(Clone, PartialEq, Eq)]
pub struct SecretBytes(Vec<u8>);

impl SecretBytes {
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SecretBytes {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("SecretBytes(redacted)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureScheme {
    None,
    Stripe {
        secret: Secret,
    },
    StandardWebhooks {
        key: SecretBytes,
    },
    /// GitHub, Shopify, Checkout.com, Razorpay and the generic `hmac`: one
    /// HMAC-SHA256 of the raw body in one header.
    BodyHmac {
        scheme: &'static str,
        secret: Secret,
        header: String,
        encoding: Encoding,
        prefix: String,
    },
    Paddle {
        secret: Secret,
    },
    Square {
        secret: Secret,
        /// The notification URL registered with Square, signed before the body.
        url: String,
    },
    Adyen {
        key: SecretBytes,
    },
}

/// Everything a scheme may be configured with (SPEC §8's `SIGNATURE_*`).
#[derive(Debug, Default, Clone)]
pub struct SchemeSettings {
    pub secret: Option<String>,
    pub header: Option<String>,
    pub encoding: Option<String>,
    pub prefix: Option<String>,
    pub url: Option<String>,
}

/// Why a scheme's settings do not make a scheme: the setting at fault
/// (`SIGNING_SECRET`, `SIGNATURE_URL`, ...) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub setting: &'static str,
    pub reason: String,
}

fn setting_error(setting: &'static str, reason: impl Into<String>) -> SettingError {
    SettingError {
        setting,
        reason: reason.into(),
    }
}

/// The scheme names `SIGNATURE_SCHEME` accepts.
pub const SCHEME_NAMES: &[&str] = &[
    "none",
    "stripe",
    "standard-webhooks",
    "github",
    "shopify",
    "paddle",
    "square",
    "checkout",
    "razorpay",
    "adyen",
    "hmac",
];

impl SignatureScheme {
    /// The scheme `name` with its settings; `name` is one of [`SCHEME_NAMES`].
    pub fn configure(
        name: &str,
        settings: &SchemeSettings,
    ) -> Result<SignatureScheme, SettingError> {
        let secret = || {
            settings.secret.clone().map(Secret::new).ok_or_else(|| {
                setting_error(
                    "SIGNING_SECRET",
                    format!("is required by SIGNATURE_SCHEME={name}"),
                )
            })
        };
        let body_hmac = |scheme: &'static str, header: &str, encoding, prefix: &str| {
            Ok(SignatureScheme::BodyHmac {
                scheme,
                secret: secret()?,
                header: header.to_string(),
                encoding,
                prefix: prefix.to_string(),
            })
        };
        match name {
            "none" => Ok(SignatureScheme::None),
            "stripe" => Ok(SignatureScheme::Stripe { secret: secret()? }),
            "standard-webhooks" => Ok(SignatureScheme::StandardWebhooks {
                key: SecretBytes(
                    standard_webhooks::decode_secret(secret()?.expose())
                        .map_err(|reason| setting_error("SIGNING_SECRET", reason))?,
                ),
            }),
            "github" => body_hmac("github", github::HEADER, Encoding::Hex, github::PREFIX),
            "shopify" => body_hmac("shopify", shopify::HEADER, Encoding::Base64, ""),
            "checkout" => body_hmac("checkout", checkout::HEADER, Encoding::Hex, ""),
            "razorpay" => body_hmac("razorpay", razorpay::HEADER, Encoding::Hex, ""),
            "hmac" => {
                let header = settings.header.clone().ok_or_else(|| {
                    setting_error("SIGNATURE_HEADER", "is required by SIGNATURE_SCHEME=hmac")
                })?;
                if !crate::config::is_header_name(&header) {
                    return Err(setting_error("SIGNATURE_HEADER", "is not a header name"));
                }
                let encoding = match settings.encoding.as_deref() {
                    Some(text) if text.eq_ignore_ascii_case("hex") => Encoding::Hex,
                    Some(text) if text.eq_ignore_ascii_case("base64") => Encoding::Base64,
                    Some(text) => {
                        return Err(setting_error(
                            "SIGNATURE_ENCODING",
                            format!("{text:?} is not one of hex, base64"),
                        ))
                    }
                    None => {
                        return Err(setting_error(
                            "SIGNATURE_ENCODING",
                            "is required by SIGNATURE_SCHEME=hmac (hex or base64)",
                        ))
                    }
                };
                Ok(SignatureScheme::BodyHmac {
                    scheme: "hmac",
                    secret: secret()?,
                    header,
                    encoding,
                    prefix: settings.prefix.clone().unwrap_or_default(),
                })
            }
            "paddle" => Ok(SignatureScheme::Paddle { secret: secret()? }),
            "square" => {
                let url = settings.url.clone().ok_or_else(|| {
                    setting_error(
                        "SIGNATURE_URL",
                        "is required by SIGNATURE_SCHEME=square: the notification URL registered with Square, byte for byte",
                    )
                })?;
                Ok(SignatureScheme::Square {
                    secret: secret()?,
                    url,
                })
            }
            "adyen" => Ok(SignatureScheme::Adyen {
                key: SecretBytes(
                    adyen::decode_key(secret()?.expose())
                        .map_err(|reason| setting_error("SIGNING_SECRET", reason))?,
                ),
            }),
            other => Err(setting_error(
                "SIGNATURE_SCHEME",
                format!(
                    "unknown scheme {other:?}; one of {}",
                    SCHEME_NAMES.join(", ")
                ),
            )),
        }
    }

    /// The scheme's default `KEY_SOURCES`: taken from what the signature
    /// covers, never from an unsigned header, so that one genuine delivery
    /// cannot be replayed under fresh keys.
    pub fn default_key_sources(&self) -> Option<&'static str> {
        match self {
            SignatureScheme::None => None,
            SignatureScheme::Stripe { .. } => Some("json:/id"),
            SignatureScheme::StandardWebhooks { .. } => Some("header:webhook-id"),
            SignatureScheme::BodyHmac { scheme, .. } => Some(match *scheme {
                "checkout" => "json:/id",
                _ => "body-sha256",
            }),
            SignatureScheme::Paddle { .. } | SignatureScheme::Square { .. } => {
                Some("json:/event_id")
            }
            SignatureScheme::Adyen { .. } => Some("body-sha256"),
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, SignatureScheme::None)
    }
}

/// Why a delivery's signature was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    MissingHeader(String),
    Malformed(String, &'static str),
    Stale { skew_seconds: u64, tolerance: u64 },
    Mismatch,
}

impl Rejection {
    fn missing(header: &str) -> Rejection {
        Rejection::MissingHeader(header.to_string())
    }

    fn malformed(header: &str, what: &'static str) -> Rejection {
        Rejection::Malformed(header.to_string(), what)
    }
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
            standard_webhooks::verify(key.expose(), tolerance_seconds, headers, body, now)
        }
        SignatureScheme::BodyHmac {
            secret,
            header,
            encoding,
            prefix,
            ..
        } => body_hmac::verify(
            secret.expose().as_bytes(),
            header,
            *encoding,
            prefix,
            headers,
            body,
        ),
        SignatureScheme::Paddle { secret } => paddle::verify(
            secret.expose().as_bytes(),
            tolerance_seconds,
            headers,
            body,
            now,
        ),
        SignatureScheme::Square { secret, url } => {
            square::verify(secret.expose().as_bytes(), url, headers, body)
        }
        SignatureScheme::Adyen { key } => adyen::verify(key.expose(), body),
    }
    .map_err(Problem::from)
}

/// HMAC-SHA256 under `key` of `parts` written one after the other.
/// The shape Stripe and Paddle share: one header of `name=value` entries,
/// a signed Unix time and any number of signatures (several while a
/// secret rotates); entries of other names are ignored.
struct TimestampedHeader {
    header: &'static str,
    separator: char,
    time: &'static str,
    signature: &'static str,
    no_time: &'static str,
    not_a_time: &'static str,
    no_signature: &'static str,
}

/// A [`TimestampedHeader`] as sent: the time as written, as seconds, and
/// the signatures.
struct Timestamped<'a> {
    time_text: &'a str,
    seconds: u64,
    signatures: Vec<&'a str>,
}

impl TimestampedHeader {
    fn parse<'a>(&self, headers: &'a [(String, String)]) -> Result<Timestamped<'a>, Rejection> {
        let value =
            headers::get(headers, self.header).ok_or_else(|| Rejection::missing(self.header))?;
        let mut time_text = None;
        let mut signatures = Vec::new();
        for entry in value.split(self.separator) {
            match entry.trim().split_once('=') {
                Some((name, text)) if name == self.time => time_text = Some(text),
                Some((name, signature)) if name == self.signature => signatures.push(signature),
                Some(_) => {}
                None => {
                    return Err(Rejection::malformed(
                        self.header,
                        "an entry is not key=value",
                    ))
                }
            }
        }
        let time_text = time_text.ok_or_else(|| Rejection::malformed(self.header, self.no_time))?;
        let seconds = time_text
            .parse::<u64>()
            .map_err(|_| Rejection::malformed(self.header, self.not_a_time))?;
        if signatures.is_empty() {
            return Err(Rejection::malformed(self.header, self.no_signature));
        }
        Ok(Timestamped {
            time_text,
            seconds,
            signatures,
        })
    }
}

fn mac_of(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac
}

/// Passes if any decodable candidate is `mac`'s tag, compared in constant
/// time; senders list several while rolling a secret.
fn any_matches(
    mac: &Hmac<Sha256>,
    mut candidates: impl Iterator<Item = Option<Vec<u8>>>,
) -> Result<(), Rejection> {
    if candidates.any(|candidate| {
        candidate.is_some_and(|signature| mac.clone().verify_slice(&signature).is_ok())
    }) {
        Ok(())
    } else {
        Err(Rejection::Mismatch)
    }
}

/// Schemes that sign a timestamp refuse one too far in the past or the future.
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

    fn settings(secret: Option<&str>) -> SchemeSettings {
        SchemeSettings {
            secret: secret.map(str::to_string),
            ..SchemeSettings::default()
        }
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        for name in ["stripe", "github", "paddle", "adyen", "standard-webhooks"] {
            let secret = match name {
                "adyen" => "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
                "standard-webhooks" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                _ => "whsec_do_not_print",
            };
            let scheme = SignatureScheme::configure(name, &settings(Some(secret))).unwrap();
            let shown = format!("{scheme:?}");
            assert!(
                !shown.contains("do_not_print") && !shown.contains("44782"),
                "{shown}"
            );
            assert!(!shown.contains("MfKQ"), "{shown}");
        }
    }

    #[test]
    fn a_configured_key_is_the_key_that_verifies() {
        // The Standard Webhooks specification's published vector, through
        // the configured scheme (its decoded key) rather than the module.
        let scheme = SignatureScheme::configure(
            "standard-webhooks",
            &settings(Some("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")),
        )
        .unwrap();
        let headers: Vec<(String, String)> = [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(verify(&scheme, 300, &headers, body, 1_614_265_330), Ok(()));
        assert!(verify(&scheme, 300, &headers, b"{}", 1_614_265_330).is_err());
        assert_eq!(format!("{:?}", Secret::new("x".into())), "Secret(redacted)");
        let SignatureScheme::StandardWebhooks { key } = &scheme else {
            panic!("{scheme:?}")
        };
        assert_eq!(format!("{key:?}"), "SecretBytes(redacted)");
    }

    #[test]
    fn every_scheme_but_none_needs_a_secret() {
        for name in SCHEME_NAMES.iter().filter(|name| **name != "none") {
            let error = SignatureScheme::configure(name, &settings(None)).unwrap_err();
            let expected = match *name {
                "hmac" => "SIGNATURE_HEADER",
                "square" => "SIGNATURE_URL",
                _ => "SIGNING_SECRET",
            };
            assert_eq!(error.setting, expected, "{name}");
        }
        let unknown = SignatureScheme::configure("strip", &settings(Some("x"))).unwrap_err();
        assert_eq!(unknown.setting, "SIGNATURE_SCHEME");
        assert!(unknown.reason.starts_with("unknown scheme \"strip\""));
    }

    #[test]
    fn default_keys_come_from_signed_content() {
        let key_of = |name: &str, extra: SchemeSettings| {
            SignatureScheme::configure(name, &extra)
                .unwrap()
                .default_key_sources()
        };
        let with = |secret: &str| settings(Some(secret));
        assert_eq!(key_of("none", settings(None)), None);
        assert_eq!(key_of("stripe", with("s")), Some("json:/id"));
        assert_eq!(
            key_of("standard-webhooks", with("whsec_c2VjcmV0")),
            Some("header:webhook-id")
        );
        for name in ["github", "shopify", "razorpay"] {
            assert_eq!(key_of(name, with("s")), Some("body-sha256"), "{name}");
        }
        assert_eq!(key_of("checkout", with("s")), Some("json:/id"));
        assert_eq!(key_of("paddle", with("s")), Some("json:/event_id"));
        let square = SchemeSettings {
            url: Some("https://example.com/hook".into()),
            ..with("s")
        };
        assert_eq!(key_of("square", square), Some("json:/event_id"));
        assert_eq!(key_of("adyen", with(&"00".repeat(32))), Some("body-sha256"));
        let hmac = SchemeSettings {
            header: Some("X-Signature".into()),
            encoding: Some("base64".into()),
            ..with("s")
        };
        assert_eq!(key_of("hmac", hmac), Some("body-sha256"));
    }

    #[test]
    fn the_generic_scheme_checks_its_settings() {
        let bad_encoding = SchemeSettings {
            header: Some("X-Sig".into()),
            encoding: Some("base32".into()),
            ..settings(Some("s"))
        };
        assert_eq!(
            SignatureScheme::configure("hmac", &bad_encoding)
                .unwrap_err()
                .setting,
            "SIGNATURE_ENCODING"
        );
        let bad_header = SchemeSettings {
            header: Some("X Sig".into()),
            encoding: Some("hex".into()),
            ..settings(Some("s"))
        };
        assert_eq!(
            SignatureScheme::configure("hmac", &bad_header)
                .unwrap_err()
                .setting,
            "SIGNATURE_HEADER"
        );
    }

    #[test]
    fn freshness_is_symmetric_and_inclusive() {
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
        let missing = Problem::from(Rejection::missing("X-Hub-Signature-256"));
        assert_eq!(missing.detail(), "missing header X-Hub-Signature-256");
    }
}
