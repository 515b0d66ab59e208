//! Public-key signatures (adapter; SPEC §4): Ed25519 (Standard Webhooks
//! `v1a`) and RSASSA-PKCS1-v1_5 with SHA-256 (PayPal), checked with the
//! runtime's WebCrypto rather than a Rust crate in the wasm. A PayPal
//! certificate is fetched only from the origins the core allowed, and kept
//! in this isolate for a day.

use std::cell::RefCell;
use std::collections::HashMap;

use wasm_bindgen::prelude::*;
use worker::js_sys::{self, Uint8Array};
use worker::wasm_bindgen_futures::JsFuture;

use idemgate_core::pipeline::PublicKeyChecked;
use idemgate_core::signature::x509;
use idemgate_core::signature::{PublicKey, PublicKeyAlgorithm, PublicKeyCheck};

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
export async function fetch_certificate(url) {
  // Workers take no redirect: "error"; "manual" leaves a redirect
  // unfollowed, and its 3xx is refused below.
  const response = await fetch(url, { redirect: "manual" });
  if (!response.ok) throw new Error("status " + response.status);
  return new Uint8Array(await response.arrayBuffer());
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
    fn fetch_certificate(url: &str) -> Result<js_sys::Promise, JsValue>;
}

/// How long a fetched certificate's key is kept.
const CERTIFICATE_TTL_MS: u64 = 86_400_000;
/// At most this many certificates are kept.
const MAX_CERTIFICATES: usize = 32;

thread_local! {
    /// Certificate URL -> (its SubjectPublicKeyInfo, fetched at).
    static CERTIFICATES: RefCell<HashMap<String, (Vec<u8>, u64)>> = RefCell::new(HashMap::new());
}

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
    let key = match &check.key {
        PublicKey::Raw(bytes) => bytes.clone(),
        PublicKey::Certificate { url } => match certificate_key(url).await {
            Ok(spki) => spki,
            Err(unusable) => return unusable,
        },
    };
    let algorithm = match check.algorithm {
        PublicKeyAlgorithm::Ed25519 => "ed25519",
        PublicKeyAlgorithm::RsaPkcs1Sha256 => "rsa",
    };
    // Copies the runtime owns: an await may move the wasm memory.
    let verdict = verify_signature(
        algorithm,
        &Uint8Array::from(key.as_slice()),
        &Uint8Array::from(check.signature.as_slice()),
        &Uint8Array::from(&check.message[..]),
    );
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

/// The public key of the certificate at `url` (an allowed host's, which
/// the core checked), fetched once a day per isolate. A certificate that
/// could not be fetched (no answer, or not 2xx) is `KeyUnavailable`; one
/// that is not a certificate, `Rejected`.
async fn certificate_key(url: &str) -> Result<Vec<u8>, PublicKeyChecked> {
    let now = worker::Date::now().as_millis();
    let cached = CERTIFICATES.with(|certificates| {
        certificates
            .borrow()
            .get(url)
            .filter(|(_, at)| now.saturating_sub(*at) < CERTIFICATE_TTL_MS)
            .map(|(spki, _)| spki.clone())
    });
    if let Some(spki) = cached {
        return Ok(spki);
    }
    let unavailable = |_| PublicKeyChecked::KeyUnavailable;
    let fetched = JsFuture::from(fetch_certificate(url).map_err(unavailable)?)
        .await
        .map_err(unavailable)?;
    let pem = Uint8Array::new(&fetched).to_vec();
    let spki = x509::der_of(&pem)
        .and_then(|der| x509::subject_public_key_info(&der).map(<[u8]>::to_vec))
        .ok_or(PublicKeyChecked::Rejected)?;
    CERTIFICATES.with(|certificates| {
        let mut certificates = certificates.borrow_mut();
        if certificates.len() >= MAX_CERTIFICATES {
            certificates.clear();
        }
        certificates.insert(url.to_string(), (spki.clone(), now));
    });
    Ok(spki)
}
