//! Signs a rendered fixture as its sender does: with the core's own
//! `sign` (the code the gateway verifies with), or, for the public-key
//! senders the core does not sign for, here: Standard Webhooks `v1a` with
//! the Ed25519 key of a `whsk_` secret, PayPal with the key of the
//! repository's test certificate, Plaid with a test P-256 key.

use std::sync::LazyLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use idemgate_core::signature::Message;

use crate::fixture::Rendered;
use crate::route::Target;

/// The test certificate PayPal deliveries name (`PAYPAL-CERT-URL`): the
/// sender serves it while it sends. A test certificate, never PayPal's.
pub const TEST_CERTIFICATE: &str =
    include_str!("../../idemgate-core/tests/fixtures/test-certificate.pem");

static TEST_KEY: LazyLock<rsa::RsaPrivateKey> = LazyLock::new(|| {
    use rsa::pkcs8::DecodePrivateKey;
    rsa::RsaPrivateKey::from_pkcs8_pem(include_str!(
        "../../idemgate-core/tests/fixtures/test-certificate.key"
    ))
    .expect("the test certificate's key parses")
});

/// The kid of the test key Plaid deliveries are signed with.
pub const PLAID_TEST_KID: &str = "idemgate-test-plaid-key-0001";

/// The test key Plaid deliveries are signed with; the sender serves its
/// public half as Plaid's key endpoint would. A test key, never Plaid's.
pub fn plaid_test_signer() -> idemgate_core::signature::plaid::Signer {
    idemgate_core::signature::plaid::Signer::from_seed(
        *b"idemgate local plaid test key 01",
        PLAID_TEST_KID,
    )
}

/// Plaid's answer to `POST /webhook_verification_key/get` for the test
/// key (https://plaid.com/docs/api/webhooks/webhook-verification/).
pub fn plaid_test_key_answer() -> String {
    let jwk = plaid_test_signer().jwk();
    serde_json::json!({
        "key": {
            "alg": "ES256", "created_at": 1_764_633_600, "crv": "P-256", "expired_at": null,
            "kid": PLAID_TEST_KID, "kty": "EC", "use": "sig", "x": jwk.x, "y": jwk.y
        },
        "request_id": "idemgateLocal01"
    })
    .to_string()
}

/// Signs `rendered` for `target` at `now` (Unix seconds). `cert_url` is
/// where a PayPal delivery says its certificate is.
pub fn sign(
    target: &Target,
    rendered: Rendered,
    now: u64,
    cert_url: Option<&str>,
) -> Result<Message, String> {
    let mut message = Message {
        headers: rendered.headers,
        body: rendered.body,
    };
    match target.provider.scheme {
        "none" => {}
        "plaid" => plaid_test_signer().sign(&mut message, now),
        "paypal" => {
            let webhook_id = target.secret.as_deref().ok_or_else(|| missing(target))?;
            let cert_url = cert_url.ok_or("a PayPal delivery needs a certificate URL")?;
            sign_paypal(&mut message, webhook_id, cert_url, now);
        }
        "standard-webhooks" => {
            if target.provider.svix_brand {
                rename(&mut message.headers, "svix-", "webhook-");
            }
            let secret = target.secret.as_deref().ok_or_else(|| missing(target))?;
            if let Some(pair) = secret.strip_prefix("whsk_") {
                sign_v1a(&mut message, pair, now)?;
            } else if secret.starts_with("whpk_") {
                return Err(format!(
                    "route {} holds only the public key of its v1a sender ({}=whpk_...): pass --secret whsk_... (base64 of the sender's seed and public key) to sign as that sender",
                    target.route,
                    target.secret_name.as_deref().unwrap_or("SIGNING_SECRET")
                ));
            } else {
                target.scheme.sign(&mut message, now);
            }
            if target.provider.svix_brand {
                rename(&mut message.headers, "webhook-", "svix-");
            }
        }
        _ => target.scheme.sign(&mut message, now),
    }
    Ok(message)
}

fn missing(target: &Target) -> String {
    format!(
        "route {} has no signing secret ({} is not set)",
        target.route,
        target.secret_name.as_deref().unwrap_or("SIGNING_SECRET")
    )
}

/// Renames headers starting with `from` (any case) to start with `to`.
fn rename(headers: &mut [(String, String)], from: &str, to: &str) {
    for (name, _) in headers {
        if name.len() >= from.len() && name[..from.len()].eq_ignore_ascii_case(from) {
            *name = format!("{to}{}", &name[from.len()..]);
        }
    }
}

fn set(headers: &mut Vec<(String, String)>, name: &str, value: String) {
    headers.retain(|(known, _)| !known.eq_ignore_ascii_case(name));
    headers.push((name.to_string(), value));
}

fn get<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// Standard Webhooks `v1a`: Ed25519 over `id.timestamp.body`, by the key
/// pair of a `whsk_` secret (base64 of its 32-byte seed, then its public
/// key). The fixture's `webhook-id` is kept: a retry reuses it.
fn sign_v1a(message: &mut Message, pair: &str, now: u64) -> Result<(), String> {
    use ed25519_dalek::Signer;
    let bytes = BASE64
        .decode(pair.trim())
        .ok()
        .filter(|bytes| bytes.len() == 64)
        .ok_or("a whsk_ secret is the base64 of 64 bytes: the Ed25519 seed, then its public key")?;
    let seed: [u8; 32] = bytes[..32].try_into().expect("32 of 64 bytes");
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    if key.verifying_key().as_bytes() != &bytes[32..] {
        return Err("the whsk_ secret's public half is not its seed's public key".into());
    }
    let id = match get(&message.headers, "webhook-id") {
        Some(id) => id.to_string(),
        None => format!("msg_{}", &hex::encode(sha256(&message.body))[..24]),
    };
    let t = now.to_string();
    let content =
        idemgate_core::signature::standard_webhooks::signed_content(&id, &t, &message.body);
    let signature = BASE64.encode(key.sign(&content).to_bytes());
    set(&mut message.headers, "webhook-id", id);
    set(&mut message.headers, "webhook-timestamp", t);
    set(
        &mut message.headers,
        "webhook-signature",
        format!("v1a,{signature}"),
    );
    Ok(())
}

/// PayPal: RSA-SHA256 over `transmission id|time|webhook id|crc32(body)`
/// by the test certificate's key. The fixture's transmission id is kept.
fn sign_paypal(message: &mut Message, webhook_id: &str, cert_url: &str, now: u64) {
    use sha2::Digest;
    let id = match get(&message.headers, "PAYPAL-TRANSMISSION-ID") {
        Some(id) => id.to_string(),
        None => hex::encode(&sha256(&message.body)[..16]),
    };
    let time = crate::template::rfc3339(now);
    let signed =
        idemgate_core::signature::paypal::signed_string(&id, &time, webhook_id, &message.body);
    let signature = TEST_KEY
        .sign(
            rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
            &sha2::Sha256::digest(signed.as_bytes()),
        )
        .expect("an RSA signature");
    for (name, value) in [
        ("PAYPAL-TRANSMISSION-ID", id),
        ("PAYPAL-TRANSMISSION-TIME", time),
        ("PAYPAL-TRANSMISSION-SIG", BASE64.encode(signature)),
        ("PAYPAL-CERT-URL", cert_url.to_string()),
        ("PAYPAL-AUTH-ALGO", "SHA256withRSA".to_string()),
    ] {
        set(&mut message.headers, name, value);
    }
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}

/// A `whsk_` secret for the Ed25519 seed `seed`: what a route (or
/// `--secret`) holds to sign `v1a` deliveries.
pub fn whsk_of(seed: [u8; 32]) -> String {
    let key = ed25519_dalek::SigningKey::from_bytes(&seed);
    let mut pair = seed.to_vec();
    pair.extend_from_slice(key.verifying_key().as_bytes());
    format!("whsk_{}", BASE64.encode(pair))
}
