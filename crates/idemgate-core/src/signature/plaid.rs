//! Plaid: `Plaid-Verification` holds a compact JWT signed with ES256
//! (ECDSA over P-256 with SHA-256). Its header names the signing key
//! (`kid`); its claims hold `iat` (Unix seconds) and
//! `request_body_sha256`, the hex SHA-256 of the raw body. The key is a
//! JWK that Plaid serves at `POST /webhook_verification_key/get` (JSON
//! `client_id`, `secret`, `key_id`) on the route's `signature_api_base`.
//!
//! Everything that needs no key is checked here, before any fetch: the
//! algorithm (ES256 only), the key id's shape, `iat` (at most five minutes
//! old, and never more than `SIGNATURE_TOLERANCE_SECONDS` ahead), and the
//! body's hash, compared in constant time. What is left, the signature
//! itself, goes to the runtime's WebCrypto as a [`PublicKeyCheck`] whose
//! key ([`PublicKey::Plaid`]) says which JWK to fetch; the worker fetches
//! it, keeps it in a [`KeyCache`], and verifies.
//!
//! All that is checked before the fetch is the sender's to choose, so a
//! forger who makes up a new `kid` for each request passes it. What such a
//! flood costs Plaid is bounded instead: each isolate asks at most
//! [`KEY_CALLS_PER_MINUTE`] unknown kids a minute per Plaid account (API
//! base and client id); past that an unknown kid is `KeyUnavailable` (503)
//! without a call, and its sender retries. Deliveries signed with a key
//! already kept are never affected; a genuine new kid (Plaid rotated its
//! key) during a flood verifies on a retry that finds the minute's calls
//! not yet spent.
//!
//! The route's secret (`signing_secret`) is the Plaid API secret and
//! `plaid_client_id` names the secret holding the client id: both only
//! authenticate the key fetch. A delivery is trusted because Plaid's key,
//! fetched over TLS from the configured origin, verifies it.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{
    required_header, Message, PublicKey, PublicKeyAlgorithm, PublicKeyCheck, Rejection, Scheme,
    SchemeEntry, Secret, SignedRequest, Verdict,
};

pub const ENTRY: SchemeEntry = SchemeEntry::new("plaid", "body-sha256", |settings| {
    let secret = settings.required_secret("plaid")?;
    let base = settings.api_base.as_deref().unwrap_or(DEFAULT_API_BASE);
    let api_base = crate::api_origin::parse_api_origin(base.trim().trim_end_matches('/'))
            .ok_or_else(|| {
                super::setting_error(
                    "SIGNATURE_API_BASE",
                    "is not an https://host[:port] origin (plain http only for 127.0.0.1, [::1] or localhost)",
                )
            })?;
    let client_id = settings.client_id.clone().ok_or_else(|| {
            super::setting_error(
                "PLAID_CLIENT_ID",
                "is required by SIGNATURE_SCHEME=plaid: it names the secret holding the Plaid client id",
            )
        })?;
    Ok(Box::new(Plaid {
        secret,
        client_id: Secret::new(client_id),
        api_base,
    }))
});

/// Plaid's production API: a route takes its keys unless it names
/// another environment (`https://sandbox.plaid.com`) or a local fake.
pub const DEFAULT_API_BASE: &str = "https://production.plaid.com";

/// Where Plaid serves a webhook verification key.
pub const KEY_PATH: &str = "/webhook_verification_key/get";

const HEADER: &str = "Plaid-Verification";

/// The oldest `iat` Plaid's documentation lets a verifier take.
pub const MAX_AGE_SECONDS: u64 = 300;

/// A JWT longer than this is not Plaid's (theirs is about 400 bytes).
const MAX_TOKEN_BYTES: usize = 4_096;

#[derive(Debug)]
struct Plaid {
    secret: Secret,
    client_id: Secret,
    api_base: String,
}

/// The JWT's header, as far as it is read. A member named twice is
/// refused by serde, so no two readers can see different values.
#[derive(Deserialize)]
struct JoseHeader {
    alg: String,
    kid: Option<String>,
    /// Extensions a verifier must understand (RFC 7515 §4.1.11): none is.
    crit: Option<serde::de::IgnoredAny>,
}

#[derive(Deserialize)]
struct Claims {
    iat: serde_json::Number,
    request_body_sha256: String,
}

/// Which JWK to fetch: Plaid's key `kid`, from `api_base`, asked with the
/// route's client id and secret. `Debug` shows neither credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRequest {
    pub api_base: String,
    pub kid: String,
    pub client_id: Secret,
    pub secret: Secret,
}

impl KeyRequest {
    pub fn url(&self) -> String {
        format!("{}{KEY_PATH}", self.api_base)
    }

    /// The JSON body of the request, credentials included.
    pub fn body(&self) -> String {
        serde_json::json!({
            "client_id": self.client_id.expose(),
            "secret": self.secret.expose(),
            "key_id": self.kid,
        })
        .to_string()
    }

    /// What a fetched key is kept under: the environment, the client and
    /// the key id (never the secret, so a rotated secret finds it).
    pub fn cache_key(&self) -> String {
        format!("{} {} {}", self.api_base, self.client_id.expose(), self.kid)
    }
}

/// An EC P-256 public key as a JWK's base64url coordinates, each checked
/// to be 32 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub x: String,
    pub y: String,
}

impl Jwk {
    /// The key's coordinates, if each is 32 bytes of base64url.
    pub fn new(x: &str, y: &str) -> Option<Jwk> {
        let coordinate = |text: &str| {
            URL_SAFE_NO_PAD
                .decode(text)
                .ok()
                .filter(|bytes| bytes.len() == 32)
        };
        coordinate(x)?;
        coordinate(y)?;
        Some(Jwk {
            x: x.to_string(),
            y: y.to_string(),
        })
    }

    /// The JWK WebCrypto imports (`importKey("jwk", ...)`).
    pub fn to_json(&self) -> String {
        serde_json::json!({"kty": "EC", "crv": "P-256", "x": self.x, "y": self.y}).to_string()
    }

    /// The uncompressed SEC1 point (`04 || x || y`), for native checks.
    pub fn sec1(&self) -> Vec<u8> {
        let mut point = vec![4];
        for coordinate in [&self.x, &self.y] {
            point.extend(URL_SAFE_NO_PAD.decode(coordinate).expect("checked by new"));
        }
        point
    }
}

/// What Plaid's answer to a key request comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyAnswer {
    /// The key, current (`expired_at` null).
    Key(Jwk),
    /// No such key (`INVALID_WEBHOOK_VERIFICATION_KEY_ID`), or one Plaid
    /// says has expired: a delivery naming it is refused.
    Refused,
    /// Anything else (5xx, 429, a refused credential, a body that is not
    /// Plaid's): the delivery can be neither verified nor refused yet.
    Unavailable,
}

#[derive(Deserialize)]
struct KeyBody {
    key: KeyFields,
}

#[derive(Deserialize)]
struct KeyFields {
    alg: Option<String>,
    crv: String,
    kid: String,
    kty: String,
    x: String,
    y: String,
    expired_at: Option<serde_json::Number>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error_code: String,
}

/// Reads Plaid's answer (`status`, `body`) to a request for `kid`.
pub fn read_key_answer(status: u16, body: &[u8], kid: &str) -> KeyAnswer {
    if status == 400 {
        let unknown = serde_json::from_slice::<ErrorBody>(body)
            .is_ok_and(|error| error.error_code == "INVALID_WEBHOOK_VERIFICATION_KEY_ID");
        return match unknown {
            true => KeyAnswer::Refused,
            false => KeyAnswer::Unavailable,
        };
    }
    if status != 200 {
        return KeyAnswer::Unavailable;
    }
    let Ok(KeyBody { key }) = serde_json::from_slice::<KeyBody>(body) else {
        return KeyAnswer::Unavailable;
    };
    let shaped = key.kty == "EC"
        && key.crv == "P-256"
        && key.alg.as_deref().is_none_or(|alg| alg == "ES256")
        && key.kid == kid;
    match (shaped, Jwk::new(&key.x, &key.y)) {
        (true, Some(_)) if key.expired_at.is_some() => KeyAnswer::Refused,
        (true, Some(jwk)) => KeyAnswer::Key(jwk),
        _ => KeyAnswer::Unavailable,
    }
}

/// How long a current key is kept before it is asked for again: Plaid
/// marks a rotated key with `expired_at`, and a key kept for an hour
/// learns that within the hour.
pub const KEY_TTL_MS: u64 = 3_600_000;
/// How long a refused key id is remembered: a forger repeating one kid
/// makes one fetch per five minutes, not one per request.
pub const REFUSED_TTL_MS: u64 = 300_000;
/// At most this many keys and refusals are kept per isolate.
pub const MAX_KEPT: usize = 64;

/// How many key calls one isolate makes per Plaid account and minute.
pub const KEY_CALLS_PER_MINUTE: u32 = 10;
const KEY_CALL_WINDOW_MS: u64 = 60_000;

/// What the cache knows of a key id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached {
    Key(Jwk),
    Refused,
}

#[derive(Debug, Clone)]
struct Kept {
    cached: Cached,
    until: u64,
    used_at: u64,
}

/// Plaid's keys as one isolate keeps them, bounded: refusals go first
/// when it is full (a burst of forged kids must not push out the real
/// key), then the least recently used key.
#[derive(Debug, Default)]
pub struct KeyCache {
    kept: HashMap<String, Kept>,
    /// Per Plaid account (API base and client id): the minute's window
    /// start and the calls made in it.
    calls: HashMap<String, (u64, u32)>,
}

impl KeyCache {
    /// Whether `request`'s account may make one more key call at `now_ms`
    /// (and counts it): at most [`KEY_CALLS_PER_MINUTE`] a minute.
    pub fn may_ask(&mut self, request: &KeyRequest, now_ms: u64) -> bool {
        let account = format!("{} {}", request.api_base, request.client_id.expose());
        if !self.calls.contains_key(&account) && self.calls.len() >= MAX_KEPT {
            // Accounts are the configured routes'; this bounds the map
            // whatever happens.
            self.calls
                .retain(|_, (start, _)| now_ms < start.saturating_add(KEY_CALL_WINDOW_MS));
        }
        let (start, made) = self.calls.entry(account).or_insert((now_ms, 0));
        if now_ms >= start.saturating_add(KEY_CALL_WINDOW_MS) {
            (*start, *made) = (now_ms, 0);
        }
        if *made >= KEY_CALLS_PER_MINUTE {
            return false;
        }
        *made += 1;
        true
    }

    /// What is known of `key` at `now_ms`, if anything still is.
    pub fn lookup(&mut self, key: &str, now_ms: u64) -> Option<Cached> {
        let kept = self.kept.get_mut(key)?;
        if now_ms >= kept.until {
            self.kept.remove(key);
            return None;
        }
        kept.used_at = now_ms;
        Some(kept.cached.clone())
    }

    /// Keeps `answer` for `key`; an unavailable key is not kept.
    pub fn remember(&mut self, key: &str, answer: &KeyAnswer, now_ms: u64) {
        let (cached, ttl) = match answer {
            KeyAnswer::Key(jwk) => (Cached::Key(jwk.clone()), KEY_TTL_MS),
            KeyAnswer::Refused => (Cached::Refused, REFUSED_TTL_MS),
            KeyAnswer::Unavailable => return,
        };
        if !self.kept.contains_key(key) {
            self.kept.retain(|_, kept| now_ms < kept.until);
            if self.kept.len() >= MAX_KEPT {
                let victim = self
                    .kept
                    .iter()
                    .min_by_key(|(_, kept)| (matches!(kept.cached, Cached::Key(_)), kept.used_at))
                    .map(|(key, _)| key.clone());
                if let Some(victim) = victim {
                    self.kept.remove(&victim);
                }
            }
        }
        self.kept.insert(
            key.to_string(),
            Kept {
                cached,
                until: now_ms.saturating_add(ttl),
                used_at: now_ms,
            },
        );
    }

    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// A key id as Plaid makes them (a UUID): plain characters, bounded, as
/// it travels into a request body and a cache key.
fn is_key_id(kid: &str) -> bool {
    (1..=128).contains(&kid.len())
        && kid
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(&byte))
}

/// The JWT's three parts: header and claims decoded, the signing input
/// as sent, and the signature.
struct Token<'a> {
    header: Vec<u8>,
    claims: Vec<u8>,
    signing_input: &'a str,
    signature: Vec<u8>,
}

fn split_token(token: &str) -> Result<Token<'_>, Rejection> {
    let malformed = |what| Rejection::malformed(HEADER, what);
    if token.len() > MAX_TOKEN_BYTES {
        return Err(malformed("longer than a Plaid JWT"));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(malformed("not a JWT of three parts"));
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| ());
    let signing_input = &token[..header.len() + 1 + claims.len()];
    Ok(Token {
        header: decode(header).map_err(|_| malformed("the JWT header is not base64url"))?,
        claims: decode(claims).map_err(|_| malformed("the JWT claims are not base64url"))?,
        signing_input,
        signature: decode(signature)
            .map_err(|_| malformed("the JWT signature is not base64url"))?,
    })
}

/// `iat` at most [`MAX_AGE_SECONDS`] old (or the tolerance, if shorter)
/// and at most `tolerance` ahead.
fn check_issued_at(iat: u64, now: u64, tolerance: u64) -> Result<(), Rejection> {
    let (skew_seconds, bound) = match iat <= now {
        true => (now - iat, tolerance.min(MAX_AGE_SECONDS)),
        false => (iat - now, tolerance),
    };
    match skew_seconds > bound {
        true => Err(Rejection::Stale {
            skew_seconds,
            tolerance: bound,
        }),
        false => Ok(()),
    }
}

impl Scheme for Plaid {
    fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        let malformed = |what| Rejection::malformed(HEADER, what);
        let token = required_header(request.headers, HEADER)?.trim();
        let token = split_token(token)?;
        let header: JoseHeader = serde_json::from_slice(&token.header)
            .map_err(|_| malformed("the JWT header is not a JSON object with alg"))?;
        if header.alg != "ES256" {
            return Err(malformed("alg is not ES256"));
        }
        if header.crit.is_some() {
            return Err(malformed("the JWT names critical extensions"));
        }
        let kid = header
            .kid
            .filter(|kid| is_key_id(kid))
            .ok_or_else(|| malformed("the JWT header has no usable kid"))?;
        let claims: Claims = serde_json::from_slice(&token.claims)
            .map_err(|_| malformed("the claims lack iat or request_body_sha256"))?;
        let iat = claims
            .iat
            .as_u64()
            .ok_or_else(|| malformed("iat is not a whole number of seconds"))?;
        check_issued_at(iat, now, tolerance)?;
        let claimed = hex::decode(&claims.request_body_sha256)
            .ok()
            .filter(|hash| hash.len() == 32)
            .ok_or_else(|| malformed("request_body_sha256 is not 64 hex digits"))?;
        let actual = Sha256::digest(request.body);
        if !bool::from(actual.as_slice().ct_eq(&claimed)) {
            return Err(Rejection::Mismatch);
        }
        if token.signature.len() != 64 {
            return Err(malformed("an ES256 signature is 64 bytes"));
        }
        Ok(Verdict::PublicKey(vec![PublicKeyCheck {
            algorithm: PublicKeyAlgorithm::EcdsaP256Sha256,
            key: PublicKey::Plaid(KeyRequest {
                api_base: self.api_base.clone(),
                kid,
                client_id: self.client_id.clone(),
                secret: self.secret.clone(),
            }),
            message: token.signing_input.as_bytes().into(),
            signature: token.signature,
        }]))
    }

    /// Plaid signs with its private key, which no route holds: its sender
    /// (a test, `scripts/send`) signs with a [`Signer`].
    #[cfg(feature = "sign")]
    fn sign(&self, _message: &mut Message, _now: u64) {}

    fn api_base(&self) -> Option<&str> {
        Some(&self.api_base)
    }
}

/// A Plaid-like sender: an ES256 key pair and its key id, for the tests
/// and `scripts/send` (never Plaid's key).
#[cfg(feature = "sign")]
pub struct Signer {
    key: p256::ecdsa::SigningKey,
    pub kid: String,
}

#[cfg(feature = "sign")]
impl Signer {
    /// The key pair of a 32-byte secret scalar.
    pub fn from_seed(seed: [u8; 32], kid: &str) -> Signer {
        Signer {
            key: p256::ecdsa::SigningKey::from_bytes(&seed.into())
                .expect("a seed below the curve's order"),
            kid: kid.to_string(),
        }
    }

    /// The public key, as Plaid's key endpoint serves it.
    pub fn jwk(&self) -> Jwk {
        let point = self.key.verifying_key().to_encoded_point(false);
        let coordinate = |bytes: Option<&p256::FieldBytes>| {
            URL_SAFE_NO_PAD.encode(bytes.expect("an uncompressed point"))
        };
        Jwk::new(&coordinate(point.x()), &coordinate(point.y())).expect("32-byte coordinates")
    }

    /// A compact JWT of `header` and `claims` (JSON texts), signed ES256.
    pub fn token_of(&self, header: &str, claims: &str) -> String {
        use p256::ecdsa::signature::Signer as _;
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header),
            URL_SAFE_NO_PAD.encode(claims)
        );
        let signature: p256::ecdsa::Signature = self.key.sign(input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }

    /// Plaid's JWT for `body` issued at `iat`.
    pub fn token(&self, body: &[u8], iat: u64) -> String {
        let header = serde_json::json!({"alg": "ES256", "kid": self.kid, "typ": "JWT"});
        let claims = serde_json::json!({
            "iat": iat,
            "request_body_sha256": hex::encode(Sha256::digest(body)),
        });
        self.token_of(&header.to_string(), &claims.to_string())
    }

    /// Signs `message` as Plaid does at `iat`: its `Plaid-Verification`.
    pub fn sign(&self, message: &mut Message, iat: u64) {
        let token = self.token(&message.body, iat);
        message
            .headers
            .retain(|(name, _)| !name.eq_ignore_ascii_case(HEADER));
        message.headers.push((HEADER.to_string(), token));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::tests::{public_key_verifies_with, settings};
    use crate::signature::{SchemeSettings, SignatureScheme};

    const KID: &str = "bfbd5111-8e33-4643-8ced-b2e642a72f3c";
    const NOW: u64 = 1_764_700_000;
    const BODY: &[u8] = br#"{"webhook_type":"TRANSACTIONS","webhook_code":"SYNC_UPDATES_AVAILABLE","item_id":"wz666MBjYWTp2PDzzggYhM6oWWmBb","initial_update_complete":true,"historical_update_complete":false,"environment":"production"}"#;

    fn signer() -> Signer {
        Signer::from_seed([9; 32], KID)
    }

    fn plaid_settings(api_base: Option<&str>) -> SchemeSettings {
        SchemeSettings {
            api_base: api_base.map(str::to_string),
            client_id: Some("client-id-value".into()),
            ..settings(Some("plaid-secret-value"))
        }
    }

    fn route() -> SignatureScheme {
        SignatureScheme::configure("plaid", &plaid_settings(None)).unwrap()
    }

    fn check_token(token: &str, body: &[u8], now: u64) -> Result<Verdict, String> {
        let headers = vec![("plaid-verification".to_string(), token.to_string())];
        route()
            .verify(
                &SignedRequest {
                    headers: &headers,
                    body,
                    query: None,
                },
                now,
                300,
            )
            .map_err(|problem| problem.detail())
    }

    /// Whether the runtime would take `verdict`, Plaid's endpoint serving
    /// the signer's key under `KID` and no other.
    fn verifies(verdict: &Verdict) -> bool {
        let Verdict::PublicKey(checks) = verdict else {
            return false;
        };
        checks.iter().any(|check| {
            public_key_verifies_with(check, |request| {
                (request.kid == KID).then(|| signer().jwk())
            })
        })
    }

    fn claims(iat: u64, body: &[u8]) -> String {
        format!(
            r#"{{"iat":{iat},"request_body_sha256":"{}"}}"#,
            hex::encode(Sha256::digest(body))
        )
    }

    #[test]
    fn a_delivery_plaid_signed_verifies_with_its_key_fetched_by_kid() {
        let token = signer().token(BODY, NOW - 10);
        let verdict = check_token(&token, BODY, NOW).unwrap();
        let Verdict::PublicKey(checks) = &verdict else {
            panic!("a public-key verdict");
        };
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].algorithm, PublicKeyAlgorithm::EcdsaP256Sha256);
        let PublicKey::Plaid(request) = &checks[0].key else {
            panic!("Plaid's key");
        };
        assert_eq!(request.kid, KID);
        assert_eq!(
            request.url(),
            "https://production.plaid.com/webhook_verification_key/get"
        );
        let body: serde_json::Value = serde_json::from_str(&request.body()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"client_id": "client-id-value", "secret": "plaid-secret-value", "key_id": KID})
        );
        assert!(verifies(&verdict));
        // Another key pair under the same kid: the signature fails.
        let forged = Signer::from_seed([8; 32], KID).token(BODY, NOW);
        assert!(!verifies(&check_token(&forged, BODY, NOW).unwrap()));
        // A kid the endpoint does not know: nothing verifies.
        let unknown = Signer::from_seed([9; 32], "another-kid").token(BODY, NOW);
        assert!(!verifies(&check_token(&unknown, BODY, NOW).unwrap()));
    }

    /// Each check that needs no key is made before one is asked for: the
    /// verdict is a rejection, not a key to fetch.
    #[test]
    fn forged_and_stale_tokens_are_refused_before_any_key_is_fetched() {
        let signer = signer();
        let header = |alg: &str| format!(r#"{{"alg":"{alg}","kid":"{KID}","typ":"JWT"}}"#);
        let mut tampered = BODY.to_vec();
        tampered[10] ^= 1;
        let cases: Vec<(&str, String, &[u8], &str)> = vec![
            (
                "tampered body",
                signer.token(BODY, NOW),
                &tampered,
                "mismatch",
            ),
            (
                "6 minutes old",
                signer.token(BODY, NOW - 360),
                BODY,
                "stale",
            ),
            (
                "ahead of the tolerance",
                signer.token(BODY, NOW + 301),
                BODY,
                "stale",
            ),
            (
                "HS256",
                signer.token_of(&header("HS256"), &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: alg is not ES256",
            ),
            (
                "none",
                signer.token_of(&header("none"), &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: alg is not ES256",
            ),
            (
                "RS256",
                signer.token_of(&header("RS256"), &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: alg is not ES256",
            ),
            (
                "es256 in lowercase",
                signer.token_of(&header("es256"), &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: alg is not ES256",
            ),
            (
                "two algs",
                signer.token_of(
                    &format!(r#"{{"alg":"ES256","alg":"HS256","kid":"{KID}"}}"#),
                    &claims(NOW, BODY),
                ),
                BODY,
                "malformed",
            ),
            (
                "no kid",
                signer.token_of(r#"{"alg":"ES256"}"#, &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: the JWT header has no usable kid",
            ),
            (
                "a kid with a quote",
                signer.token_of(r#"{"alg":"ES256","kid":"a\"b"}"#, &claims(NOW, BODY)),
                BODY,
                "malformed Plaid-Verification: the JWT header has no usable kid",
            ),
            (
                "a long kid",
                signer.token_of(
                    &format!(r#"{{"alg":"ES256","kid":"{}"}}"#, "k".repeat(129)),
                    &claims(NOW, BODY),
                ),
                BODY,
                "malformed",
            ),
            (
                "critical extensions",
                signer.token_of(
                    &format!(r#"{{"alg":"ES256","kid":"{KID}","crit":["b64"]}}"#),
                    &claims(NOW, BODY),
                ),
                BODY,
                "malformed Plaid-Verification: the JWT names critical extensions",
            ),
            (
                "no iat",
                signer.token_of(
                    &header("ES256"),
                    &format!(
                        r#"{{"request_body_sha256":"{}"}}"#,
                        hex::encode(Sha256::digest(BODY))
                    ),
                ),
                BODY,
                "malformed",
            ),
            (
                "a fractional iat",
                signer.token_of(
                    &header("ES256"),
                    &format!(
                        r#"{{"iat":{NOW}.5,"request_body_sha256":"{}"}}"#,
                        hex::encode(Sha256::digest(BODY))
                    ),
                ),
                BODY,
                "malformed Plaid-Verification: iat is not a whole number",
            ),
            (
                "no body hash",
                signer.token_of(&header("ES256"), &format!(r#"{{"iat":{NOW}}}"#)),
                BODY,
                "malformed",
            ),
            (
                "a short body hash",
                signer.token_of(
                    &header("ES256"),
                    &format!(r#"{{"iat":{NOW},"request_body_sha256":"abcd"}}"#),
                ),
                BODY,
                "malformed Plaid-Verification: request_body_sha256",
            ),
            (
                "two parts",
                "e30.e30".to_string(),
                BODY,
                "malformed Plaid-Verification: not a JWT of three parts",
            ),
            (
                "four parts",
                format!("{}.x", signer.token(BODY, NOW)),
                BODY,
                "malformed Plaid-Verification: not a JWT of three parts",
            ),
            (
                "padding",
                format!("{}=", signer.token(BODY, NOW)),
                BODY,
                "malformed Plaid-Verification: the JWT signature is not base64url",
            ),
            (
                "a short signature",
                signer
                    .token(BODY, NOW)
                    .rsplit_once('.')
                    .map(|(input, _)| format!("{input}.AAAA"))
                    .unwrap(),
                BODY,
                "malformed Plaid-Verification: an ES256 signature is 64 bytes",
            ),
            (
                "not JSON",
                format!(
                    "{}.{}.AAAA",
                    URL_SAFE_NO_PAD.encode("alg"),
                    URL_SAFE_NO_PAD.encode("{}")
                ),
                BODY,
                "malformed",
            ),
            (
                "too long",
                "a".repeat(MAX_TOKEN_BYTES + 1),
                BODY,
                "malformed Plaid-Verification: longer than a Plaid JWT",
            ),
        ];
        for (what, token, body, reason) in cases {
            let refused = check_token(&token, body, NOW).expect_err(what);
            assert!(refused.starts_with(reason), "{what}: {refused}");
        }
        let headers: Vec<(String, String)> = Vec::new();
        let missing = route()
            .verify(
                &SignedRequest {
                    headers: &headers,
                    body: BODY,
                    query: None,
                },
                NOW,
                300,
            )
            .unwrap_err();
        assert_eq!(missing.detail(), "missing header Plaid-Verification");
    }

    /// `iat` five minutes old passes and a second more does not; ahead,
    /// the tolerance is the bound; a tolerance under five minutes bounds
    /// the age too.
    #[test]
    fn iat_is_at_most_five_minutes_old_and_at_most_the_tolerance_ahead() {
        assert!(check_issued_at(NOW - 300, NOW, 300).is_ok());
        assert!(check_issued_at(NOW - 301, NOW, 300).is_err());
        assert!(
            check_issued_at(NOW - 301, NOW, 900).is_err(),
            "never over five minutes old"
        );
        assert!(check_issued_at(NOW + 900, NOW, 900).is_ok());
        assert!(check_issued_at(NOW + 901, NOW, 900).is_err());
        assert!(check_issued_at(NOW - 61, NOW, 60).is_err());
        assert_eq!(
            check_issued_at(NOW - 400, NOW, 300),
            Err(Rejection::Stale {
                skew_seconds: 400,
                tolerance: 300
            })
        );
    }

    /// Every byte of the claimed hash counts: one that differs in its
    /// last hex digit only is a mismatch, and no key is asked for.
    #[test]
    fn a_body_hash_differing_in_its_last_digit_is_a_mismatch() {
        let mut digest = hex::encode(Sha256::digest(BODY));
        let last = if digest.ends_with('0') { "1" } else { "0" };
        digest.replace_range(63.., last);
        let header = format!(r#"{{"alg":"ES256","kid":"{KID}"}}"#);
        let claims = format!(r#"{{"iat":{NOW},"request_body_sha256":"{digest}"}}"#);
        let token = signer().token_of(&header, &claims);
        let refused = check_token(&token, BODY, NOW).unwrap_err();
        assert!(
            refused.contains("no signature matches the body"),
            "{refused}"
        );
    }

    #[test]
    fn the_body_hash_may_be_upper_case_hex() {
        let header = format!(r#"{{"alg":"ES256","kid":"{KID}"}}"#);
        let claims = format!(
            r#"{{"iat":{NOW},"request_body_sha256":"{}"}}"#,
            hex::encode_upper(Sha256::digest(BODY))
        );
        let token = signer().token_of(&header, &claims);
        assert!(verifies(&check_token(&token, BODY, NOW).unwrap()));
    }

    #[test]
    fn a_route_needs_a_client_id_and_an_https_or_loopback_api_base() {
        let missing = SignatureScheme::configure(
            "plaid",
            &SchemeSettings {
                client_id: None,
                ..plaid_settings(None)
            },
        )
        .unwrap_err();
        assert_eq!(missing.setting, "PLAID_CLIENT_ID");
        let secret = SignatureScheme::configure(
            "plaid",
            &SchemeSettings {
                secret: None,
                ..plaid_settings(None)
            },
        )
        .unwrap_err();
        assert_eq!(secret.setting, "SIGNING_SECRET");
        for good in [
            "https://sandbox.plaid.com",
            "https://sandbox.plaid.com/",
            "http://127.0.0.1:9999",
            "http://localhost:8791",
        ] {
            assert!(
                SignatureScheme::configure("plaid", &plaid_settings(Some(good))).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "http://sandbox.plaid.com",
            "http://localhost.attacker.example",
            "https://user:pw@plaid.example",
            "https://plaid.example/path",
            "ftp://x",
        ] {
            let error =
                SignatureScheme::configure("plaid", &plaid_settings(Some(bad))).unwrap_err();
            assert_eq!(error.setting, "SIGNATURE_API_BASE", "{bad}");
            assert!(!error.reason.contains("pw"), "never echoes a credential");
        }
        let shown = format!("{:?}", route());
        assert!(
            !shown.contains("client-id-value") && !shown.contains("plaid-secret-value"),
            "{shown}"
        );
    }

    #[test]
    fn plaids_answers_are_a_key_a_refusal_or_unavailable() {
        let jwk = signer().jwk();
        let key = |kid: &str, expired_at: &str| {
            format!(
                r#"{{"key":{{"alg":"ES256","created_at":1560466143,"crv":"P-256","expired_at":{expired_at},"kid":"{kid}","kty":"EC","use":"sig","x":"{}","y":"{}"}},"request_id":"HvfCtrDLG1ihcp7"}}"#,
                jwk.x, jwk.y
            )
        };
        assert_eq!(
            read_key_answer(200, key(KID, "null").as_bytes(), KID),
            KeyAnswer::Key(jwk.clone())
        );
        assert_eq!(
            read_key_answer(200, key(KID, "1700000000").as_bytes(), KID),
            KeyAnswer::Refused
        );
        // Another key than the one asked for is not taken.
        assert_eq!(
            read_key_answer(200, key("other", "null").as_bytes(), KID),
            KeyAnswer::Unavailable
        );
        let unknown = br#"{"display_message":null,"error_code":"INVALID_WEBHOOK_VERIFICATION_KEY_ID","error_message":"invalid key_id provided","error_type":"INVALID_INPUT","request_id":"r1"}"#;
        assert_eq!(read_key_answer(400, unknown, KID), KeyAnswer::Refused);
        let credentials = br#"{"display_message":null,"error_code":"INVALID_API_KEYS","error_message":"invalid client_id or secret provided","error_type":"INVALID_INPUT","request_id":"r2"}"#;
        assert_eq!(
            read_key_answer(400, credentials, KID),
            KeyAnswer::Unavailable
        );
        for status in [429, 500, 502, 503] {
            assert_eq!(read_key_answer(status, b"{}", KID), KeyAnswer::Unavailable);
        }
        assert_eq!(read_key_answer(200, b"<html>", KID), KeyAnswer::Unavailable);
        let rsa = key(KID, "null").replace(r#""kty":"EC""#, r#""kty":"RSA""#);
        assert_eq!(
            read_key_answer(200, rsa.as_bytes(), KID),
            KeyAnswer::Unavailable
        );
        let short = key(KID, "null").replace(&jwk.x, "AAAA");
        assert_eq!(
            read_key_answer(200, short.as_bytes(), KID),
            KeyAnswer::Unavailable
        );
    }

    /// The review's item 8 (round 5): 1,000 forgeries with random kids
    /// made 1,000 credentialed calls to Plaid. A route's account makes at
    /// most `KEY_CALLS_PER_MINUTE` a minute per isolate; another account's
    /// are its own; the next minute has its calls again.
    #[test]
    fn a_flood_of_made_up_kids_spends_a_bounded_number_of_key_calls() {
        let request = |base: &str, kid: &str| KeyRequest {
            api_base: base.into(),
            kid: kid.into(),
            client_id: Secret::new("client-id-value".into()),
            secret: Secret::new("plaid-secret-value".into()),
        };
        let mut cache = KeyCache::default();
        let asked = (0..1_000)
            .filter(|n| {
                cache.may_ask(
                    &request("https://production.plaid.com", &format!("forged-{n}")),
                    1_000 + n,
                )
            })
            .count();
        assert_eq!(asked, KEY_CALLS_PER_MINUTE as usize);
        assert!(
            cache.may_ask(&request("https://sandbox.plaid.com", "kid"), 2_000),
            "another account's calls are its own"
        );
        assert!(!cache.may_ask(&request("https://production.plaid.com", "genuine"), 60_999));
        assert!(
            cache.may_ask(&request("https://production.plaid.com", "genuine"), 61_000),
            "a minute later, the sender's retry is asked"
        );
    }

    #[test]
    fn the_cache_keeps_keys_an_hour_refusals_five_minutes_and_is_bounded() {
        let jwk = signer().jwk();
        let mut cache = KeyCache::default();
        cache.remember("k", &KeyAnswer::Key(jwk.clone()), 0);
        cache.remember("gone", &KeyAnswer::Refused, 0);
        cache.remember("down", &KeyAnswer::Unavailable, 0);
        assert_eq!(
            cache.lookup("k", KEY_TTL_MS - 1),
            Some(Cached::Key(jwk.clone()))
        );
        assert_eq!(
            cache.lookup("k", KEY_TTL_MS),
            None,
            "asked again after an hour"
        );
        assert_eq!(
            cache.lookup("gone", REFUSED_TTL_MS - 1),
            Some(Cached::Refused)
        );
        assert_eq!(cache.lookup("gone", REFUSED_TTL_MS), None);
        assert_eq!(cache.lookup("down", 1), None, "an outage is never kept");

        // Full of refusals of forged kids, the real key stays.
        let mut cache = KeyCache::default();
        cache.remember("real", &KeyAnswer::Key(jwk.clone()), 0);
        for forged in 0..MAX_KEPT * 4 {
            cache.remember(
                &format!("forged-{forged}"),
                &KeyAnswer::Refused,
                1 + forged as u64,
            );
            assert!(cache.len() <= MAX_KEPT);
        }
        assert_eq!(cache.lookup("real", 10_000), Some(Cached::Key(jwk.clone())));
        // Full of keys, the least recently used goes.
        let mut cache = KeyCache::default();
        for n in 0..MAX_KEPT {
            cache.remember(&format!("key-{n}"), &KeyAnswer::Key(jwk.clone()), n as u64);
        }
        cache.lookup("key-0", 1_000);
        cache.remember("new", &KeyAnswer::Key(jwk.clone()), 1_001);
        assert_eq!(cache.len(), MAX_KEPT);
        assert!(cache.lookup("key-0", 1_002).is_some());
        assert!(cache.lookup("key-1", 1_002).is_none());
    }

    #[test]
    fn the_cache_key_is_the_environment_the_client_and_the_kid() {
        let request = |secret: &str| KeyRequest {
            api_base: "https://sandbox.plaid.com".into(),
            kid: KID.into(),
            client_id: Secret::new("client".into()),
            secret: Secret::new(secret.into()),
        };
        assert_eq!(request("a").cache_key(), request("b").cache_key());
        assert!(!request("s3cr3t").cache_key().contains("s3cr3t"));
        assert!(!format!("{:?}", request("s3cr3t")).contains("s3cr3t"));
    }
}
