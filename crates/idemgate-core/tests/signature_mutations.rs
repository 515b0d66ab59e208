//! No change to a signed delivery's bytes gets a new key past its
//! signature, for every scheme: a flipped bit anywhere in the body or in
//! a signature header is refused, or it left unchanged everything the
//! scheme signs (a percent-escape of a form spelt in another case, an
//! unsigned field of an Adyen notification), so the key, taken only from
//! signed content, is the same and the delivery a replay. Public-key
//! signatures (Standard Webhooks `v1a`, PayPal, Plaid) are checked natively, as
//! WebCrypto checks them in the worker.
//!
//! 2,000 cases by default; `PROPTEST_CASES` runs more.

mod support {
    pub mod public_key;
}

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use idemgate_core::signature::{
    paypal, plaid, scheme_names, standard_webhooks, x509, Message, PublicKeyCheck, SchemeSettings,
    SignatureScheme, SignedRequest, Verdict,
};
use proptest::prelude::*;

const FORM: &str = "application/x-www-form-urlencoded";
const CERT_HOST: &str = "https://certs.example.com";
const TOLERANCE: u64 = 300;

fn cases() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig::with_cases(cases)
}

fn v1a_signer(secret: &str) -> ed25519_dalek::SigningKey {
    use sha2::Digest;
    ed25519_dalek::SigningKey::from_bytes(&sha2::Sha256::digest(secret.as_bytes()).into())
}

/// Plaid's key pair, served under `PLAID_KID` by the fake endpoint.
const PLAID_KID: &str = "6c5516e1-92dc-479e-a8ff-5a51992e0001";

fn plaid_signer() -> plaid::Signer {
    plaid::Signer::from_seed([5; 32], PLAID_KID)
}

fn paypal_signer() -> rsa::RsaPrivateKey {
    use rsa::pkcs8::DecodePrivateKey;
    rsa::RsaPrivateKey::from_pkcs8_pem(include_str!("fixtures/test-certificate.key")).unwrap()
}

/// The route of scheme `name` (`v1a`: Standard Webhooks with an Ed25519
/// key), holding `secret` in the form the scheme takes.
fn route(name: &str, secret: &str) -> SignatureScheme {
    use sha2::Digest;
    let hex_key = hex::encode(sha2::Sha256::digest(secret.as_bytes()));
    let (scheme, secret) = match name {
        "v1a" => (
            "standard-webhooks",
            format!(
                "whpk_{}",
                STANDARD.encode(v1a_signer(secret).verifying_key().as_bytes())
            ),
        ),
        "standard-webhooks" => (name, format!("whsec_{}", STANDARD.encode(secret))),
        "adyen" | "adyen-platform" => (name, hex_key),
        "braintree" => (name, format!("public_key:{secret}")),
        _ => (name, secret.to_string()),
    };
    SignatureScheme::configure(
        scheme,
        &SchemeSettings {
            secret: Some(secret),
            header: Some("X-Signature".into()),
            encoding: Some("base64".into()),
            prefix: Some("sha256=".into()),
            url: Some("https://hooks.example.com/p/route".into()),
            cert_hosts: Some(CERT_HOST.into()),
            client_id: Some("plaid-client".into()),
            ..SchemeSettings::default()
        },
    )
    .unwrap()
}

/// A delivery of `name` carrying `event` and `text`, as its sender signs
/// it at `t`.
fn delivery(name: &str, secret: &str, event: &str, text: &str, t: u64) -> Message {
    let text = text.replace(['"', '\\'], "");
    let json = format!(r#"{{"id":"{event}","event_id":"{event}","note":"{text}"}}"#);
    let mut message = match name {
        "adyen" => Message {
            headers: Vec::new(),
            body: format!(
                r#"{{"live":"false","notificationItems":[{{"NotificationRequestItem":{{"pspReference":"{event}","amount":{{"currency":"EUR","value":1130}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"{text}","success":"true"}}}}]}}"#
            )
            .into_bytes(),
        },
        "twilio" => Message {
            headers: vec![("content-type".into(), FORM.into())],
            body: format!("MessageSid={event}&Body={}", form_escape(&text)).into_bytes(),
        },
        "braintree" => Message {
            headers: Vec::new(),
            body: format!("<notification><id>{event}</id><note>{text}</note></notification>")
                .into_bytes(),
        },
        _ => Message {
            headers: vec![("content-type".into(), "application/json".into())],
            body: json.into_bytes(),
        },
    };
    match name {
        "v1a" => {
            use ed25519_dalek::Signer;
            let content = standard_webhooks::signed_content(event, &t.to_string(), &message.body);
            let signature = v1a_signer(secret).sign(&content);
            message.headers.extend([
                ("webhook-id".into(), event.to_string()),
                ("webhook-timestamp".into(), t.to_string()),
                (
                    "webhook-signature".into(),
                    format!("v1a,{}", STANDARD.encode(signature.to_bytes())),
                ),
            ]);
        }
        "paypal" => {
            use sha2::Digest;
            let time = "2026-12-02T00:00:00Z";
            let signed = paypal::signed_string(event, time, secret, &message.body);
            let signature = paypal_signer()
                .sign(
                    rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                    &sha2::Sha256::digest(signed.as_bytes()),
                )
                .unwrap();
            message.headers.extend([
                ("PAYPAL-TRANSMISSION-ID".into(), event.to_string()),
                ("PAYPAL-TRANSMISSION-TIME".into(), time.to_string()),
                ("PAYPAL-TRANSMISSION-SIG".into(), STANDARD.encode(signature)),
                (
                    "PAYPAL-CERT-URL".into(),
                    format!("{CERT_HOST}/v1/notifications/certs/cert.pem"),
                ),
                ("PAYPAL-AUTH-ALGO".into(), "SHA256withRSA".into()),
            ]);
        }
        "plaid" => plaid_signer().sign(&mut message, t),
        _ => route(name, secret).sign(&mut message, t),
    }
    message
}

fn form_escape(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => (byte as char).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// When PayPal's signed time is: the scheme's time, not the generated one.
fn signed_at(name: &str, t: u64) -> u64 {
    match name {
        "paypal" => idemgate_core::time::unix_seconds("2026-12-02T00:00:00Z").unwrap(),
        _ => t,
    }
}

/// Whether `route` takes the delivery, checking public keys natively.
fn accepted(route: &SignatureScheme, message: &Message, now: u64) -> bool {
    let request = SignedRequest {
        headers: &message.headers,
        body: &message.body,
        query: None,
    };
    match route.verify(&request, now, TOLERANCE) {
        Ok(Verdict::Verified) => true,
        Ok(Verdict::PublicKey(checks)) => checks.iter().any(public_key_verifies),
        Err(_) => false,
    }
}

/// What the runtime's WebCrypto would make of `check`: PayPal's
/// certificate is the test one, served only from the allowed host.
fn public_key_verifies(check: &PublicKeyCheck) -> bool {
    support::public_key::verifies_with(
        check,
        |url| {
            // Host names are case-insensitive; the host itself is fixed.
            assert!(
                url.to_ascii_lowercase().starts_with(CERT_HOST),
                "only the allowed host: {url}"
            );
            let der = x509::der_of(include_bytes!("fixtures/test-certificate.pem")).unwrap();
            Some(x509::subject_public_key_info(&der).unwrap().to_vec())
        },
        // Plaid's endpoint knows one key id.
        |request| (request.kid == PLAID_KID).then(|| plaid_signer().jwk()),
    )
}

/// Everything a key may come from: the signed content `body-sha256`
/// hashes, and each header the scheme signs.
fn signed_parts(route: &SignatureScheme, message: &Message) -> (Vec<u8>, Vec<(String, String)>) {
    let request = SignedRequest {
        headers: &message.headers,
        body: &message.body,
        query: None,
    };
    let content = route.body_for_key(&request).unwrap().into_owned();
    let mut headers: Vec<(String, String)> = message
        .headers
        .iter()
        .filter(|(name, _)| route.signs_header(name))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect();
    headers.sort();
    (content, headers)
}

/// Every scheme, and `v1a` beside `standard-webhooks`.
fn senders() -> Vec<&'static str> {
    scheme_names()
        .filter(|name| *name != "none")
        .chain(["v1a"])
        .collect()
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn a_flipped_bit_is_refused_or_changes_nothing_signed(
        which in any::<prop::sample::Index>(),
        secret in "[a-zA-Z0-9]{8,24}",
        event in "evt_[a-zA-Z0-9]{4,16}",
        text in "[ -~]{0,40}",
        t in 1_700_000_000u64..1_900_000_000,
        in_header in any::<bool>(),
        at in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let senders = senders();
        let name = *which.get(&senders);
        let route = route(name, &secret);
        let genuine = delivery(name, &secret, &event, &text, t);
        let now = signed_at(name, t);
        prop_assert!(accepted(&route, &genuine, now), "{name}: the genuine delivery");

        let mut mutated = genuine.clone();
        let signature_headers: Vec<usize> = (0..mutated.headers.len())
            .filter(|&i| !mutated.headers[i].0.eq_ignore_ascii_case("content-type"))
            .collect();
        if in_header && !signature_headers.is_empty() {
            let header = signature_headers[at.index(signature_headers.len())];
            let mut bytes = mutated.headers[header].1.clone().into_bytes();
            let i = at.index(bytes.len().max(1)).min(bytes.len().saturating_sub(1));
            if bytes.is_empty() {
                bytes.push(b'x');
            } else {
                bytes[i] ^= 1 << bit;
            }
            mutated.headers[header].1 = String::from_utf8_lossy(&bytes).into_owned();
        } else {
            let i = at.index(mutated.body.len());
            mutated.body[i] ^= 1 << bit;
        }
        prop_assume!(mutated != genuine);
        if accepted(&route, &mutated, now) {
            prop_assert_eq!(
                signed_parts(&route, &mutated),
                signed_parts(&route, &genuine),
                "{}: a mutation verified and changed what is signed: {:?}",
                name,
                mutated
            );
        }
    }
}
