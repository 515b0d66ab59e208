//! Sender authentication (SPEC §4): one file per scheme, one table.
//!
//! Each scheme's file owns everything about its sender: the name
//! `SIGNATURE_SCHEME` knows it by, the settings it takes, its default key
//! sources, how it verifies a delivery and how the sender signs one (the
//! tests and `scripts/send` sign with the same code the gateway verifies
//! with). [`SCHEMES`] is the one list of them.
//!
//! Verification runs before the Durable Object is touched, so a forged or
//! stale delivery can neither lock nor poison a key. Every comparison of a
//! signature is constant-time (`Mac::verify_slice`), a scheme that carries
//! several signatures passes when any one matches (a sender rolling its
//! secret signs with both), and a rejection says which check failed without
//! echoing the expected value.
// Without `sign` the signing halves of the schemes are left out, and the
// imports only they use go unused (the helpers only they call are left
// unused with them, each allowed so where it stands).
#![cfg_attr(not(feature = "sign"), allow(unused_imports))]

mod adyen;
#[cfg(test)]
pub(crate) use adyen::sample_notification;
mod adyen_platform;
mod body_hmac;
mod braintree;
mod checkout;
mod github;
mod hmac_generic;
mod mac;
mod paddle;
pub mod paypal;
mod razorpay;
mod secret;
mod shopify;
mod slack;
mod square;
pub mod standard_webhooks;
mod stripe;
mod twilio;
pub mod x509;

use std::fmt;
use std::sync::Arc;

pub use body_hmac::Encoding;
pub use secret::{Secret, SecretBytes};

use crate::headers::HeaderList;
use crate::key::KeyPart;
use crate::problem::Problem;

/// A delivery as a scheme verifies it: the raw bytes and headers as sent,
/// and the query string (Twilio signs the URL it called).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedRequest<'a> {
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub query: Option<&'a str>,
}

/// A delivery as its sender builds it, before and after signing: what the
/// tests and `scripts/send` post to the gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub headers: HeaderList,
    pub body: Vec<u8>,
}

/// What a scheme's signature covers (SPEC §3, v3): a key, a tenant or a
/// scope may come only from that, or a captured delivery re-sent with an
/// unsigned byte changed would be a new key, and forwarded again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signed {
    /// The headers it covers, lowercase.
    pub headers: &'static [&'static str],
    pub body: SignedBody,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignedBody {
    /// Every byte of the body.
    Whole,
    /// Every byte, through a checksum a forger can match (PayPal's CRC32):
    /// what bounds a replay is the signed time and its tolerance.
    Checksum,
    /// Only fields the scheme names ([`Scheme::signs_pointer`]), whose
    /// canonical form [`Scheme::signed_content`] gives.
    Fields,
}

impl Signed {
    /// The raw body, and no header.
    pub const BODY: Signed = Signed {
        headers: &[],
        body: SignedBody::Whole,
    };
}

/// One sender's scheme, configured with its secret. `Debug` never shows a
/// secret.
pub trait Scheme: fmt::Debug + Send + Sync {
    /// `KEY_SOURCES` when the route sets none: taken from what the
    /// signature covers, never from an unsigned header, so that one
    /// genuine delivery cannot be replayed under fresh keys.
    fn default_key_sources(&self) -> &'static str;

    /// What the signature covers.
    fn signed(&self) -> Signed {
        Signed::BODY
    }

    /// What `body-sha256` hashes on this route, when it is not the raw
    /// body: the signed fields, in their canonical order.
    fn signed_content(&self, _request: &SignedRequest) -> Option<Vec<u8>> {
        None
    }

    /// Whether `json:POINTER` reads only signed bytes.
    fn signs_pointer(&self, _pointer: &str) -> bool {
        self.signed().body != SignedBody::Fields
    }

    /// Whether `form:NAME` reads only signed bytes.
    fn signs_form_field(&self, _name: &str) -> bool {
        self.signed().body != SignedBody::Fields
    }

    /// Whether the scheme makes a `scheme-key`.
    fn makes_scheme_key(&self) -> bool {
        false
    }

    /// The key the scheme makes from what it signs (`scheme-key`).
    fn scheme_key(&self, _request: &SignedRequest) -> Option<String> {
        None
    }

    /// Checks `request` under this scheme's one secret; `now` is Unix
    /// seconds, and a signed time further than `tolerance` seconds from it
    /// is refused.
    fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<Verdict, Rejection>;

    /// The origins a certificate may be fetched from, for a scheme that
    /// fetches one.
    fn cert_hosts(&self) -> &[String] {
        &[]
    }

    /// The id the sender signs for this one transmission, and the signed
    /// time (Unix seconds), for a sender whose signature does not bind
    /// the body: each such id is forwarded under one key at most
    /// ([`crate::single_use`]).
    fn single_use_id<'r>(&self, _request: &SignedRequest<'r>) -> Option<(&'r str, u64)> {
        None
    }

    /// The header a route names for its signature (the generic `hmac`'s
    /// `SIGNATURE_HEADER`): masked wherever a request is shown, as the
    /// well-known signature headers are.
    fn signature_header(&self) -> Option<&str> {
        None
    }

    /// Signs `message` at `now` (Unix seconds) as the sender does.
    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, now: u64);
}

/// Everything a scheme may be configured with (SPEC §8's `SIGNATURE_*`).
#[derive(Debug, Default, Clone)]
pub struct SchemeSettings {
    pub secret: Option<String>,
    pub header: Option<String>,
    pub encoding: Option<String>,
    pub prefix: Option<String>,
    pub url: Option<String>,
    /// `SIGNATURE_CERT_HOSTS` (PayPal).
    pub cert_hosts: Option<String>,
}

impl SchemeSettings {
    /// The signing secret a scheme needs.
    pub(crate) fn required_secret(&self, scheme: &str) -> Result<Secret, SettingError> {
        self.secret.clone().map(Secret::new).ok_or_else(|| {
            setting_error(
                "SIGNING_SECRET",
                format!("is required by SIGNATURE_SCHEME={scheme}"),
            )
        })
    }
}

/// Why a scheme's settings do not make a scheme: the setting at fault
/// (`SIGNING_SECRET`, `SIGNATURE_URL`, ...) and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub setting: &'static str,
    pub reason: String,
}

pub(crate) fn setting_error(setting: &'static str, reason: impl Into<String>) -> SettingError {
    SettingError {
        setting,
        reason: reason.into(),
    }
}

/// One row of [`SCHEMES`]: a scheme's name and how it is configured.
pub struct SchemeEntry {
    pub name: &'static str,
    pub configure: fn(&SchemeSettings) -> Result<Box<dyn Scheme>, SettingError>,
}

/// Every scheme but `none`, by the name `SIGNATURE_SCHEME` takes.
pub const SCHEMES: &[SchemeEntry] = &[
    stripe::ENTRY,
    standard_webhooks::ENTRY,
    github::ENTRY,
    shopify::ENTRY,
    paddle::ENTRY,
    square::ENTRY,
    checkout::ENTRY,
    razorpay::ENTRY,
    adyen::ENTRY,
    hmac_generic::ENTRY,
    adyen_platform::ENTRY,
    slack::ENTRY,
    twilio::ENTRY,
    braintree::ENTRY,
    paypal::ENTRY,
];

/// The names `SIGNATURE_SCHEME` accepts: `none` and each of [`SCHEMES`].
pub fn scheme_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("none").chain(SCHEMES.iter().map(|entry| entry.name))
}

/// A route's sender authentication: `none`, or a scheme configured once
/// per secret the route names (SPEC §4, v3: while a sender rotates its
/// secret, a delivery verified by any one of them passes).
#[derive(Clone)]
pub struct SignatureScheme(Option<(&'static str, Vec<Arc<dyn Scheme>>)>);

impl SignatureScheme {
    pub const NONE: SignatureScheme = SignatureScheme(None);

    /// The scheme `name` with its settings and its one secret.
    pub fn configure(
        name: &str,
        settings: &SchemeSettings,
    ) -> Result<SignatureScheme, SettingError> {
        let secrets: Vec<String> = settings.secret.iter().cloned().collect();
        SignatureScheme::configure_rotating(name, settings, &secrets)
    }

    /// The scheme `name` with its settings, once per secret of `secrets`
    /// (the current one first: it signs; any verifies).
    pub fn configure_rotating(
        name: &str,
        settings: &SchemeSettings,
        secrets: &[String],
    ) -> Result<SignatureScheme, SettingError> {
        if name == "none" {
            return Ok(SignatureScheme::NONE);
        }
        let entry = SCHEMES
            .iter()
            .find(|entry| entry.name == name)
            .ok_or_else(|| {
                setting_error(
                    "SIGNATURE_SCHEME",
                    format!(
                        "unknown scheme {name:?}; one of {}",
                        scheme_names().collect::<Vec<_>>().join(", ")
                    ),
                )
            })?;
        let instances = match secrets {
            [] => vec![Arc::from((entry.configure)(&SchemeSettings {
                secret: None,
                ..settings.clone()
            })?)],
            secrets => secrets
                .iter()
                .map(|secret| {
                    (entry.configure)(&SchemeSettings {
                        secret: Some(secret.clone()),
                        ..settings.clone()
                    })
                    .map(Arc::from)
                })
                .collect::<Result<Vec<Arc<dyn Scheme>>, _>>()?,
        };
        Ok(SignatureScheme(Some((entry.name, instances))))
    }

    pub fn name(&self) -> &'static str {
        self.0.as_ref().map_or("none", |(name, _)| name)
    }

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }

    /// The current secret's scheme (what is said of every one alike).
    fn first(&self) -> Option<&Arc<dyn Scheme>> {
        self.0.as_ref().and_then(|(_, instances)| instances.first())
    }

    /// The scheme's default `KEY_SOURCES` (none for `none`).
    pub fn default_key_sources(&self) -> Option<&'static str> {
        self.first().map(|scheme| scheme.default_key_sources())
    }

    /// Whether `part` reads only what the signature covers; always on an
    /// unsigned route. The reason when it does not.
    pub fn allows(&self, part: &KeyPart) -> Result<(), String> {
        let Some(scheme) = self.first() else {
            return match part {
                KeyPart::SchemeKey => {
                    Err("scheme-key needs a SIGNATURE_SCHEME that makes one".into())
                }
                _ => Ok(()),
            };
        };
        let name = self.name();
        let signed = match part {
            KeyPart::Header(header) => self.signs_header(header),
            KeyPart::JsonPointer(pointer) => scheme.signs_pointer(pointer),
            KeyPart::Form(field) => scheme.signs_form_field(field),
            KeyPart::BodySha256 => true,
            KeyPart::SchemeKey if scheme.makes_scheme_key() => true,
            KeyPart::SchemeKey => {
                return Err(format!("SIGNATURE_SCHEME={name} makes no scheme-key"));
            }
        };
        match signed {
            true => Ok(()),
            false => Err(format!(
                "{} reads bytes SIGNATURE_SCHEME={name} does not sign: a delivery re-sent with them changed would be a new key, forwarded again",
                part.label()
            )),
        }
    }

    /// Whether the signature covers the header `name` (any case).
    pub fn signs_header(&self, name: &str) -> bool {
        self.first().is_none_or(|scheme| {
            scheme
                .signed()
                .headers
                .iter()
                .any(|signed| signed.eq_ignore_ascii_case(name))
        })
    }

    /// What `body-sha256` hashes: the raw body on a signed route, or the
    /// signed fields where the scheme signs less; `None` on an unsigned
    /// route (the canonical body is hashed there).
    pub fn body_for_key<'a>(
        &self,
        request: &SignedRequest<'a>,
    ) -> Option<std::borrow::Cow<'a, [u8]>> {
        let scheme = self.first()?;
        Some(match scheme.signed_content(request) {
            Some(content) => std::borrow::Cow::Owned(content),
            None => std::borrow::Cow::Borrowed(request.body),
        })
    }

    /// The scheme's own key of a verified delivery, if it makes one.
    pub fn scheme_key(&self, request: &SignedRequest) -> Option<String> {
        self.first().and_then(|scheme| scheme.scheme_key(request))
    }

    /// Checks a delivery's signature under each secret; `now` is Unix
    /// seconds. A signature only a public key can check (Ed25519, RSA) is
    /// left to the runtime's WebCrypto: the verdict says which.
    pub fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance_seconds: u64,
    ) -> Result<Verdict, Problem> {
        let Some((_, instances)) = &self.0 else {
            return Ok(Verdict::Verified);
        };
        let mut checks: Vec<PublicKeyCheck> = Vec::new();
        let mut rejection = None;
        for scheme in instances {
            match scheme.verify(request, now, tolerance_seconds) {
                Ok(Verdict::Verified) => return Ok(Verdict::Verified),
                Ok(Verdict::PublicKey(mut pending)) => checks.append(&mut pending),
                // Parsing and freshness are the same under every secret;
                // only a mismatch is worth the next one.
                Err(Rejection::Mismatch) => rejection = rejection.or(Some(Rejection::Mismatch)),
                Err(other) => return Err(other.into()),
            }
        }
        match (checks.is_empty(), rejection) {
            (false, _) => Ok(Verdict::PublicKey(checks)),
            (true, rejection) => Err(rejection.unwrap_or(Rejection::Mismatch).into()),
        }
    }

    /// Signs `message` as the route's sender would, with the current
    /// secret; `none` signs nothing.
    #[cfg(feature = "sign")]
    pub fn sign(&self, message: &mut Message, now: u64) {
        if let Some(scheme) = self.first() {
            scheme.sign(message, now);
        }
    }

    /// The origins a certificate may be fetched from (PayPal's scheme).
    /// The signed transmission id of a verified delivery, and its signed
    /// time, where the scheme forwards each id once.
    pub fn single_use_id<'r>(&self, request: &SignedRequest<'r>) -> Option<(&'r str, u64)> {
        self.first()
            .and_then(|scheme| scheme.single_use_id(request))
    }

    /// The route's own signature header, if it names one.
    pub fn signature_header(&self) -> Option<&str> {
        self.first().and_then(|scheme| scheme.signature_header())
    }

    pub fn cert_hosts(&self) -> &[String] {
        self.first().map_or(&[], |scheme| scheme.cert_hosts())
    }
}

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
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// The key's raw bytes (an Ed25519 public key).
    Raw(Vec<u8>),
    /// The X.509 certificate at this URL, from an allowed host, holds it.
    Certificate { url: String },
}

impl fmt::Debug for SignatureScheme {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => formatter.write_str("none"),
            Some((_, instances)) => formatter.debug_list().entries(instances).finish(),
        }
    }
}

/// Two schemes are the same when they have the same name and settings:
/// their `Debug` forms, which show every setting but secrets, match, and
/// they sign a probe message alike (so their secrets agree too). Only
/// with `sign`: the worker never compares configurations.
#[cfg(feature = "sign")]
impl PartialEq for SignatureScheme {
    fn eq(&self, other: &SignatureScheme) -> bool {
        let signed = |scheme: &SignatureScheme| {
            let mut probe = Message {
                headers: Vec::new(),
                body: br#"{"id":"probe"}"#.to_vec(),
            };
            scheme.sign(&mut probe, 0);
            probe
        };
        self.name() == other.name()
            && format!("{self:?}") == format!("{other:?}")
            && signed(self) == signed(other)
    }
}

#[cfg(feature = "sign")]
impl Eq for SignatureScheme {}

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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn settings(secret: Option<&str>) -> SchemeSettings {
        SchemeSettings {
            secret: secret.map(str::to_string),
            ..SchemeSettings::default()
        }
    }

    /// Verifies `body` under a header of `name: value` with the scheme `scheme`.
    pub fn check(
        scheme: &str,
        settings: SchemeSettings,
        header: Option<(&str, &str)>,
        body: &[u8],
    ) -> Result<(), String> {
        let scheme = SignatureScheme::configure(scheme, &settings).unwrap();
        let headers: Vec<(String, String)> = header
            .map(|(name, value)| vec![(name.to_ascii_lowercase(), value.to_string())])
            .unwrap_or_default();
        scheme
            .verify(
                &SignedRequest {
                    headers: &headers,
                    body,
                    query: None,
                },
                0,
                300,
            )
            .map(|verdict| assert_eq!(verdict, Verdict::Verified))
            .map_err(|problem| problem.detail())
    }

    /// Checks a public-key signature natively, as WebCrypto does in the
    /// worker.
    pub fn public_key_verifies(check: &PublicKeyCheck) -> bool {
        match (&check.algorithm, &check.key) {
            (PublicKeyAlgorithm::Ed25519, PublicKey::Raw(key)) => {
                use ed25519_dalek::{Signature, Verifier, VerifyingKey};
                let (Ok(key), Ok(signature)) = (
                    <[u8; 32]>::try_from(key.as_slice()),
                    <[u8; 64]>::try_from(check.signature.as_slice()),
                ) else {
                    return false;
                };
                VerifyingKey::from_bytes(&key).is_ok_and(|key| {
                    key.verify(&check.message, &Signature::from_bytes(&signature))
                        .is_ok()
                })
            }
            (PublicKeyAlgorithm::RsaPkcs1Sha256, PublicKey::Raw(spki)) => {
                use rsa::pkcs8::DecodePublicKey;
                use sha2::Digest;
                let Ok(key) = rsa::RsaPublicKey::from_public_key_der(spki) else {
                    return false;
                };
                key.verify(
                    rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                    &sha2::Sha256::digest(&check.message),
                    &check.signature,
                )
                .is_ok()
            }
            _ => false,
        }
    }

    /// A setting for every scheme, so each can be configured in a test.
    pub fn working_settings(name: &str) -> SchemeSettings {
        let secret = match name {
            "adyen" | "adyen-platform" => {
                "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
            }
            "standard-webhooks" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "braintree" => "public_key:whsec_do_not_print",
            _ => "whsec_do_not_print",
        };
        SchemeSettings {
            secret: Some(secret.into()),
            header: Some("X-Signature".into()),
            encoding: Some("hex".into()),
            prefix: None,
            url: Some("https://hooks.example.com/square".into()),
            cert_hosts: None,
        }
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        for entry in SCHEMES {
            let scheme =
                SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
            let shown = format!("{scheme:?}");
            for secret in ["do_not_print", "44782", "MfKQ"] {
                assert!(!shown.contains(secret), "{}: {shown}", entry.name);
            }
        }
        assert_eq!(format!("{:?}", Secret::new("x".into())), "Secret(redacted)");
    }

    #[test]
    fn every_scheme_signs_what_it_verifies() {
        // PayPal signs with a private key no route holds (its tests sign).
        for entry in SCHEMES.iter().filter(|entry| entry.name != "paypal") {
            let scheme =
                SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
            let mut message = match entry.name {
                "twilio" => Message {
                    headers: vec![(
                        "content-type".into(),
                        "application/x-www-form-urlencoded".into(),
                    )],
                    body: b"MessageSid=SM1&Body=hello+1".to_vec(),
                },
                _ => Message {
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: sample_notification("evt_1").into_bytes(),
                },
            };
            scheme.sign(&mut message, 1_700_000_000);
            let verify = |body: &[u8], now: u64| {
                scheme.verify(
                    &SignedRequest {
                        headers: &message.headers,
                        body,
                        query: None,
                    },
                    now,
                    300,
                )
            };
            assert_eq!(
                verify(&message.body, 1_700_000_000),
                Ok(Verdict::Verified),
                "{}",
                entry.name
            );
            let mut tampered = message.body.clone();
            let at = tampered.iter().position(|b| *b == b'1').unwrap();
            tampered[at] = b'2';
            assert_eq!(
                verify(&tampered, 1_700_000_000).unwrap_err().name(),
                "bad-signature",
                "{}",
                entry.name
            );
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
        let request = |body: &'static [u8]| SignedRequest {
            headers: &headers,
            body,
            query: None,
        };
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            scheme.verify(&request(body), 1_614_265_330, 300),
            Ok(Verdict::Verified)
        );
        assert!(scheme.verify(&request(b"{}"), 1_614_265_330, 300).is_err());
    }

    #[test]
    fn every_scheme_but_none_needs_a_secret() {
        for entry in SCHEMES {
            let error = SignatureScheme::configure(entry.name, &settings(None))
                .map(|_| ())
                .unwrap_err();
            let expected = match entry.name {
                "hmac" => "SIGNATURE_HEADER",
                "square" | "twilio" => "SIGNATURE_URL",
                _ => "SIGNING_SECRET",
            };
            assert_eq!(error.setting, expected, "{}", entry.name);
        }
        let unknown = SignatureScheme::configure("strip", &settings(Some("x")))
            .map(|_| ())
            .unwrap_err();
        assert_eq!(unknown.setting, "SIGNATURE_SCHEME");
        assert!(unknown.reason.starts_with("unknown scheme \"strip\""));
    }

    #[test]
    fn default_keys_come_from_signed_content() {
        let key_of = |name: &str| {
            SignatureScheme::configure(name, &working_settings(name))
                .unwrap()
                .default_key_sources()
        };
        assert_eq!(key_of("none"), None);
        assert_eq!(key_of("stripe"), Some("json:/id"));
        assert_eq!(
            key_of("standard-webhooks"),
            Some("header:webhook-id,header:svix-id")
        );
        for name in ["github", "shopify", "razorpay", "hmac"] {
            assert_eq!(key_of(name), Some("body-sha256"), "{name}");
        }
        assert_eq!(key_of("adyen"), Some("scheme-key"));
        // Each default reads only what its scheme signs.
        for entry in SCHEMES {
            let scheme =
                SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
            let sources =
                crate::key::KeySource::parse_list(scheme.default_key_sources().unwrap()).unwrap();
            for part in sources.iter().flat_map(|source| &source.parts) {
                assert_eq!(scheme.allows(part), Ok(()), "{}: {part:?}", entry.name);
            }
        }
        assert_eq!(key_of("checkout"), Some("json:/id"));
        assert_eq!(key_of("paddle"), Some("json:/event_id"));
        assert_eq!(key_of("square"), Some("json:/event_id"));
    }

    #[test]
    fn schemes_equal_by_name_settings_and_secret() {
        let configure = |name: &str, secret: &str| {
            SignatureScheme::configure(name, &settings(Some(secret))).unwrap()
        };
        assert_eq!(configure("stripe", "a"), configure("stripe", "a"));
        assert_ne!(configure("stripe", "a"), configure("stripe", "b"));
        assert_ne!(configure("stripe", "a"), configure("github", "a"));
        assert_eq!(SignatureScheme::NONE, SignatureScheme::NONE);
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
