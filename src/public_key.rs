//! Public-key signatures (adapter; SPEC §4): Ed25519 (Standard Webhooks
//! `v1a`), RSASSA-PKCS1-v1_5 with SHA-256 (PayPal) and ECDSA P-256 with
//! SHA-256 (Plaid's ES256), checked with the runtime's WebCrypto rather
//! than a Rust crate in the wasm. A PayPal certificate is fetched only
//! from the origins the core allowed, and kept in this isolate for a day;
//! a Plaid key is asked from the route's API base by its `kid` and kept as
//! the core's [`KeyCache`] says (an hour; a refused kid five minutes), at
//! most `KEY_CALLS_PER_MINUTE` calls a minute per Plaid account.

use wasm_bindgen::prelude::*;
use worker::js_sys::{self, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;

use idemgate_core::pipeline::PublicKeyChecked;
use idemgate_core::signature::plaid::{self, Cached, Jwk, KeyAnswer, KeyRequest};
use idemgate_core::signature::x509;
use idemgate_core::signature::{PublicKey, PublicKeyAlgorithm, PublicKeyCheck};

use crate::isolate::Certificate;

#[wasm_bindgen(inline_js = r#"
export async function verify_signature(algorithm, key, signature, message) {
  const params = algorithm === "ed25519"
    ? [["raw", { name: "Ed25519" }], { name: "Ed25519" }]
    : [["spki", { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }], "RSASSA-PKCS1-v1_5"];
  try {
    const imported = await crypto.subtle.importKey(params[0][0], key, params[0][1], false, ["verify"]);
    return await crypto.subtle.verify(params[1], imported, signature, message);
  } catch (error) {
    return false;
  }
}
export async function verify_rs256_jwk(n, e, signature, message) {
  try {
    const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" };
    const imported = await crypto.subtle.importKey("jwk", { kty: "RSA", n, e, alg: "RS256", ext: true }, algorithm, false, ["verify"]);
    return await crypto.subtle.verify("RSASSA-PKCS1-v1_5", imported, signature, message);
  } catch (error) {
    return false;
  }
}
export async function verify_es256(jwk, signature, message) {
  // A JWS ES256 signature is r || s, the form WebCrypto's ECDSA takes.
  try {
    const curve = { name: "ECDSA", namedCurve: "P-256" };
    const imported = await crypto.subtle.importKey("jwk", JSON.parse(jwk), curve, false, ["verify"]);
    return await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, imported, signature, message);
  } catch (error) {
    return false;
  }
}
export async function fetch_certificate(url, timeout_ms, max_bytes) {
  // Workers take no redirect: "error"; "manual" leaves a redirect
  // unfollowed, and its 3xx is refused below. An unauthenticated request
  // chose this URL (on an allowed host): the fetch is bounded in time and
  // in bytes.
  const response = await fetch(url, { redirect: "manual", signal: AbortSignal.timeout(timeout_ms) });
  if (!response.ok) throw new Error("status " + response.status);
  return await read_bounded(response, max_bytes);
}
export async function post_json(url, body, timeout_ms, max_bytes) {
  // Plaid's key endpoint: a JSON POST, its answer's status and bytes
  // (bounded); a network error or timeout throws.
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    redirect: "manual",
    signal: AbortSignal.timeout(timeout_ms),
  });
  return [response.status, await read_bounded(response, max_bytes)];
}
async function read_bounded(response, max_bytes) {
  if (!response.body) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max_bytes) {
      await reader.cancel();
      throw new Error("over " + max_bytes + " bytes");
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.byteLength;
  }
  return bytes;
}
"#)]
extern "C" {
    #[wasm_bindgen(catch)]
    fn verify_signature(
        algorithm: &str,
        key: &Uint8Array,
        signature: &Uint8Array,
        message: &Uint8Array,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn verify_rs256_jwk(
        n: &str,
        e: &str,
        signature: &Uint8Array,
        message: &Uint8Array,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn verify_es256(
        jwk: &str,
        signature: &Uint8Array,
        message: &Uint8Array,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn post_json(
        url: &str,
        body: &str,
        timeout_ms: u32,
        max_bytes: u32,
    ) -> Result<js_sys::Promise, JsValue>;
    #[wasm_bindgen(catch)]
    fn fetch_certificate(
        url: &str,
        timeout_ms: u32,
        max_bytes: u32,
    ) -> Result<js_sys::Promise, JsValue>;
}

/// How long a fetched certificate's key is kept.
const CERTIFICATE_TTL_MS: u64 = 86_400_000;
/// At most this many certificates are kept; the least recently used goes.
const MAX_CERTIFICATES: usize = 32;
/// A certificate fetch gives up after this long (the delivery is then
/// 503 `signing-key-unavailable`, and PayPal retries).
const FETCH_TIMEOUT_MS: u32 = 5_000;
/// A PayPal certificate is about 2 KiB; nothing near this is one.
const MAX_CERTIFICATE_BYTES: u32 = 65_536;
/// Plaid's answer with a key is about 400 bytes.
const MAX_KEY_ANSWER_BYTES: u32 = 16_384;

/// What `checks` come to, checked one after the other until one verifies.
pub async fn check_all(checks: &[PublicKeyCheck]) -> PublicKeyChecked {
    let mut all = PublicKeyChecked::Rejected;
    for check in checks {
        all = all.max(check_one(check).await);
        if all == PublicKeyChecked::Verified {
            break;
        }
    }
    all
}

async fn check_one(check: &PublicKeyCheck) -> PublicKeyChecked {
    if let PublicKey::Plaid(request) = &check.key {
        return match plaid_key(request).await {
            Ok(jwk) => {
                settle(verify_es256(
                    &jwk.to_json(),
                    &Uint8Array::from(check.signature.as_slice()),
                    &Uint8Array::from(&check.message[..]),
                ))
                .await
            }
            Err(unusable) => unusable,
        };
    }
    let key = match &check.key {
        PublicKey::Raw(bytes) => bytes.clone(),
        PublicKey::Certificate { url } => match certificate_key(url).await {
            Ok(spki) => spki,
            Err(unusable) => return unusable,
        },
        PublicKey::Plaid(_) => return PublicKeyChecked::Rejected,
    };
    let algorithm = match check.algorithm {
        PublicKeyAlgorithm::Ed25519 => "ed25519",
        PublicKeyAlgorithm::RsaPkcs1Sha256 => "rsa",
        // Only Plaid's keys are ECDSA, and they are JWKs (above).
        PublicKeyAlgorithm::EcdsaP256Sha256 => return PublicKeyChecked::Rejected,
    };
    // Copies the runtime owns: an await may move the wasm memory.
    let verdict = verify_signature(
        algorithm,
        &Uint8Array::from(key.as_slice()),
        &Uint8Array::from(check.signature.as_slice()),
        &Uint8Array::from(&check.message[..]),
    );
    settle(verdict).await
}

/// Whether `signature` is the RS256 signature of `message` under the RSA
/// key `n`, `e` (a JWK's base64url modulus and exponent).
pub(crate) async fn rs256_verifies(n: &str, e: &str, signature: &[u8], message: &[u8]) -> bool {
    let verdict = verify_rs256_jwk(
        n,
        e,
        &Uint8Array::from(signature),
        &Uint8Array::from(message),
    );
    settle(verdict).await == PublicKeyChecked::Verified
}

/// The bytes at `url` (a GET, no redirect followed, at most `max_bytes`,
/// within the certificate fetch's timeout); `None` when none came.
pub(crate) async fn fetch_bounded(url: &str, max_bytes: u32) -> Option<Vec<u8>> {
    let fetching = fetch_certificate(url, FETCH_TIMEOUT_MS, max_bytes).ok()?;
    let fetched = JsFuture::from(fetching).await.ok()?;
    Some(Uint8Array::new(&fetched).to_vec())
}

/// What WebCrypto's verdict comes to: anything but `true` is a rejection.
async fn settle(verdict: Result<js_sys::Promise, JsValue>) -> PublicKeyChecked {
    let verified = match verdict {
        Ok(promise) => JsFuture::from(promise)
            .await
            .ok()
            .and_then(|value| value.as_bool())
            .unwrap_or(false),
        Err(_) => false,
    };
    match verified {
        true => PublicKeyChecked::Verified,
        false => PublicKeyChecked::Rejected,
    }
}

/// Plaid's key `request.kid`, from this isolate's cache or asked from the
/// route's API base. A kid Plaid refused (or whose key expired) is
/// `Rejected`, and remembered; an answer that is no answer (no
/// connection, a timeout, 429, 5xx, refused credentials) is
/// `KeyUnavailable`, and not remembered, so the sender's retry asks again.
async fn plaid_key(request: &KeyRequest) -> Result<Jwk, PublicKeyChecked> {
    let now = worker::Date::now().as_millis();
    let cache_key = request.cache_key();
    let cached =
        crate::isolate::with(|isolate| isolate.plaid_keys.borrow_mut().lookup(&cache_key, now));
    match cached {
        Some(Cached::Key(jwk)) => return Ok(jwk),
        Some(Cached::Refused) => return Err(PublicKeyChecked::Rejected),
        None => {}
    }
    // A flood of made-up kids spends the account's calls for the minute,
    // not one call each: past them, the sender retries.
    if !crate::isolate::with(|isolate| isolate.plaid_keys.borrow_mut().may_ask(request, now)) {
        return Err(PublicKeyChecked::KeyUnavailable);
    }
    let unavailable = |_| PublicKeyChecked::KeyUnavailable;
    let asking = post_json(
        &request.url(),
        &request.body(),
        FETCH_TIMEOUT_MS,
        MAX_KEY_ANSWER_BYTES,
    );
    let answered = JsFuture::from(asking.map_err(unavailable)?)
        .await
        .map_err(unavailable)?;
    let answered = js_sys::Array::from(&answered);
    let status = answered.get(0).as_f64().unwrap_or(0.0) as u16;
    let body = Uint8Array::new(&answered.get(1)).to_vec();
    let answer = plaid::read_key_answer(status, &body, &request.kid);
    crate::isolate::with(|isolate| {
        isolate
            .plaid_keys
            .borrow_mut()
            .remember(&cache_key, &answer, now)
    });
    match answer {
        KeyAnswer::Key(jwk) => Ok(jwk),
        KeyAnswer::Refused => Err(PublicKeyChecked::Rejected),
        KeyAnswer::Unavailable => Err(PublicKeyChecked::KeyUnavailable),
    }
}

/// The public key of the certificate at `url` (an allowed host's, which
/// the core checked), fetched once a day per isolate. A certificate that
/// could not be fetched (no answer, or not 2xx) is `KeyUnavailable`; one
/// that is not a certificate, `Rejected`.
async fn certificate_key(url: &str) -> Result<Vec<u8>, PublicKeyChecked> {
    let now = worker::Date::now().as_millis();
    let cached = crate::isolate::with(|isolate| {
        let mut certificates = isolate.certificates.borrow_mut();
        let kept = certificates
            .get_mut(url)
            .filter(|kept| now.saturating_sub(kept.fetched_at) < CERTIFICATE_TTL_MS)?;
        kept.used_at = now;
        Some(kept.spki.clone())
    });
    if let Some(spki) = cached {
        return Ok(spki);
    }
    let unavailable = |_| PublicKeyChecked::KeyUnavailable;
    let fetching = fetch_certificate(url, FETCH_TIMEOUT_MS, MAX_CERTIFICATE_BYTES);
    let fetched = JsFuture::from(fetching.map_err(unavailable)?)
        .await
        .map_err(unavailable)?;
    let pem = Uint8Array::new(&fetched).to_vec();
    let spki = x509::der_of(&pem)
        .and_then(|der| x509::subject_public_key_info(&der).map(<[u8]>::to_vec))
        .ok_or(PublicKeyChecked::Rejected)?;
    crate::isolate::with(|isolate| {
        let mut certificates = isolate.certificates.borrow_mut();
        if certificates.len() >= MAX_CERTIFICATES && !certificates.contains_key(url) {
            // The least recently used goes: clearing all would let a burst
            // of URLs on an allowed host make every delivery fetch again.
            let oldest = certificates
                .iter()
                .min_by_key(|(_, kept)| kept.used_at)
                .map(|(url, _)| url.clone());
            if let Some(oldest) = oldest {
                certificates.remove(&oldest);
            }
        }
        certificates.insert(
            url.to_string(),
            Certificate {
                spki: spki.clone(),
                fetched_at: now,
                used_at: now,
            },
        );
    });
    Ok(spki)
}
