//! Sender authentication (SPEC §4): one file per scheme, one table.
//!
//! Each scheme's file owns everything about its sender: its [`SchemeEntry`]
//! (the name `SIGNATURE_SCHEME` knows it by, its default key sources, what
//! its signature covers, its batches, the settings it takes), how it
//! verifies a delivery and how the sender signs one (the tests and
//! `scripts/send` sign with the same code the gateway verifies with).
//! [`SCHEMES`] is the one list of them: a scheme is added by its file, its
//! `mod` line and its row there.
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
mod gocardless;
mod hmac_generic;
mod mac;
mod paddle;
pub mod paypal;
pub mod plaid;
mod razorpay;
mod secret;
mod shopify;
mod slack;
mod square;
pub mod standard_webhooks;
mod stripe;
mod twilio;
mod verdict;
pub mod x509;

use std::fmt;
use std::sync::Arc;

pub use body_hmac::Encoding;
pub use secret::{Secret, SecretBytes};
pub(crate) use verdict::required_header;
pub use verdict::{PublicKey, PublicKeyAlgorithm, PublicKeyCheck, Rejection, Verdict};

use crate::batch::BatchFormat;
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

    /// Fields of the body the scheme names, and no header.
    pub const FIELDS: Signed = Signed {
        headers: &[],
        body: SignedBody::Fields,
    };
}

/// One sender's scheme, configured with its secret: what differs from
/// one secret or setting to another (what holds for the scheme whatever
/// its settings is data, in its [`SchemeEntry`]). `Debug` never shows a
/// secret.
pub trait Scheme: fmt::Debug + Send + Sync {
    /// What `body-sha256` hashes on this route, when it is not the raw
    /// body: the signed fields, in their canonical order.
    fn signed_content(&self, _request: &SignedRequest) -> Option<Vec<u8>> {
        None
    }

    /// Whether `json:POINTER` reads only signed bytes, for a scheme that
    /// signs only fields ([`SignedBody::Fields`]; any other signs them
    /// all).
    fn signs_pointer(&self, _pointer: &str) -> bool {
        false
    }

    /// Whether `form:NAME` reads only signed bytes, likewise.
    fn signs_form_field(&self, _name: &str) -> bool {
        false
    }

    /// The key the scheme makes from what it signs (`scheme-key`), for
    /// a scheme whose entry says it makes one.
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

    /// The origin a key is asked from, for a scheme that asks its
    /// sender's API for one (Plaid).
    fn api_base(&self) -> Option<&str> {
        None
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
    /// `SIGNATURE_API_BASE` (Plaid): the origin a key is fetched from.
    pub api_base: Option<String>,
    /// The value of the secret `PLAID_CLIENT_ID` names (Plaid).
    pub client_id: Option<String>,
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

    /// The URL a scheme signs (`SIGNATURE_URL`), which `what` describes.
    pub(crate) fn required_url(&self, scheme: &str, what: &str) -> Result<String, SettingError> {
        self.url.clone().ok_or_else(|| {
            setting_error(
                "SIGNATURE_URL",
                format!("is required by SIGNATURE_SCHEME={scheme}: {what}"),
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

/// One row of [`SCHEMES`], in its scheme's file: what the scheme is
/// whatever its settings, and how it is configured.
pub struct SchemeEntry {
    pub name: &'static str,
    /// `KEY_SOURCES` when the route sets none: taken from what the
    /// signature covers, never from an unsigned header, so that one
    /// genuine delivery cannot be replayed under fresh keys.
    pub default_key_sources: &'static str,
    /// What the signature covers.
    pub signed: Signed,
    /// Whether the scheme makes a `scheme-key` ([`Scheme::scheme_key`]).
    pub makes_scheme_key: bool,
    /// How the sender lays out several events in one request, for a
    /// sender that does (SPEC §4, v4 "Batches").
    pub batch: Option<&'static BatchFormat>,
    pub configure: fn(&SchemeSettings) -> Result<Box<dyn Scheme>, SettingError>,
}

impl SchemeEntry {
    /// A scheme whose signature covers the raw body and no header, that
    /// makes no `scheme-key` and sends no batches (the methods below say
    /// otherwise).
    pub const fn new(
        name: &'static str,
        default_key_sources: &'static str,
        configure: fn(&SchemeSettings) -> Result<Box<dyn Scheme>, SettingError>,
    ) -> SchemeEntry {
        SchemeEntry {
            name,
            default_key_sources,
            signed: Signed::BODY,
            makes_scheme_key: false,
            batch: None,
            configure,
        }
    }

    pub const fn signing(self, signed: Signed) -> SchemeEntry {
        SchemeEntry { signed, ..self }
    }

    pub const fn making_scheme_key(self) -> SchemeEntry {
        SchemeEntry {
            makes_scheme_key: true,
            ..self
        }
    }

    pub const fn batching(self, format: &'static BatchFormat) -> SchemeEntry {
        SchemeEntry {
            batch: Some(format),
            ..self
        }
    }
}

/// Every scheme but `none`, by the name `SIGNATURE_SCHEME` takes. A
/// private scheme module whose entry is missing here is dead code, which
/// the lints refuse.
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
    gocardless::ENTRY,
    plaid::ENTRY,
];

/// The names `SIGNATURE_SCHEME` accepts: `none` and each of [`SCHEMES`].
pub fn scheme_names() -> impl Iterator<Item = &'static str> {
    std::iter::once("none").chain(SCHEMES.iter().map(|entry| entry.name))
}

/// A route's sender authentication: `none`, or a scheme configured once
/// per secret the route names (SPEC §4, v3: while a sender rotates its
/// secret, a delivery verified by any one of them passes).
#[derive(Clone)]
pub struct SignatureScheme(Option<(&'static SchemeEntry, Vec<Arc<dyn Scheme>>)>);

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
        Ok(SignatureScheme(Some((entry, instances))))
    }

    pub fn name(&self) -> &'static str {
        self.entry().map_or("none", |entry| entry.name)
    }

    fn entry(&self) -> Option<&'static SchemeEntry> {
        self.0.as_ref().map(|(entry, _)| *entry)
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
        self.entry().map(|entry| entry.default_key_sources)
    }

    /// Whether `part` reads only what the signature covers; always on an
    /// unsigned route. The reason when it does not.
    pub fn allows(&self, part: &KeyPart) -> Result<(), String> {
        let (Some(entry), Some(scheme)) = (self.entry(), self.first()) else {
            return match part {
                KeyPart::SchemeKey => {
                    Err("scheme-key needs a SIGNATURE_SCHEME that makes one".into())
                }
                _ => Ok(()),
            };
        };
        let name = entry.name;
        let whole = entry.signed.body != SignedBody::Fields;
        let signed = match part {
            KeyPart::Header(header) => self.signs_header(header),
            KeyPart::JsonPointer(pointer) => whole || scheme.signs_pointer(pointer),
            KeyPart::Form(field) => whole || scheme.signs_form_field(field),
            KeyPart::BodySha256 => true,
            KeyPart::SchemeKey if entry.makes_scheme_key => true,
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
        self.entry().is_none_or(|entry| {
            entry
                .signed
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

    /// How the route's sender batches events, if it does.
    pub fn batch(&self) -> Option<&'static BatchFormat> {
        self.entry().and_then(|entry| entry.batch)
    }

    pub fn cert_hosts(&self) -> &[String] {
        self.first().map_or(&[], |scheme| scheme.cert_hosts())
    }

    /// The origin a key is asked from (Plaid's scheme).
    pub fn api_base(&self) -> Option<&str> {
        self.first().and_then(|scheme| scheme.api_base())
    }
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

#[cfg(test)]
pub(crate) mod tests;
