//! Every fixture of every provider, signed for its route in the
//! repository's `.dev.vars.example` and verified natively by the route's
//! scheme as the worker configures it (public-key signatures checked here
//! as WebCrypto checks them in the worker); and the example's routes are
//! all valid, one per provider.

use std::path::Path;

use base64::Engine;
use idemgate_core::signature::{
    x509, PublicKey, PublicKeyAlgorithm, PublicKeyCheck, SignedRequest, Verdict,
};
use idemgate_send::fixture::{self, fixtures_dir};
use idemgate_send::provider::PROVIDERS;
use idemgate_send::route::{resolve, Target, Vars};
use idemgate_send::sign::{sign, TEST_CERTIFICATE};
use idemgate_send::template::Event;

fn example() -> Vars {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.dev.vars.example");
    Vars {
        entries: idemgate_send::dotenv::parse(&std::fs::read_to_string(&path).unwrap()),
        source: ".dev.vars.example".into(),
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A public-key signature checked natively, as WebCrypto does in the
/// worker; a certificate is the test certificate the sender serves.
fn public_key_verifies(check: &PublicKeyCheck) -> bool {
    match (&check.algorithm, &check.key) {
        (PublicKeyAlgorithm::Ed25519, PublicKey::Raw(key)) => {
            use ed25519_dalek::Verifier;
            let key = ed25519_dalek::VerifyingKey::from_bytes(key.as_slice().try_into().unwrap())
                .unwrap();
            let signature = ed25519_dalek::Signature::from_bytes(
                check.signature.as_slice().try_into().unwrap(),
            );
            key.verify(&check.message, &signature).is_ok()
        }
        (PublicKeyAlgorithm::RsaPkcs1Sha256, PublicKey::Certificate { url }) => {
            use rsa::pkcs8::DecodePublicKey;
            use sha2::Digest;
            assert!(url.starts_with("http://127.0.0.1:8790/"), "{url}");
            let der = x509::der_of(TEST_CERTIFICATE.as_bytes()).unwrap();
            let spki = x509::subject_public_key_info(&der).unwrap();
            rsa::RsaPublicKey::from_public_key_der(spki)
                .unwrap()
                .verify(
                    rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                    &sha2::Sha256::digest(&check.message),
                    &check.signature,
                )
                .is_ok()
        }
        (PublicKeyAlgorithm::EcdsaP256Sha256, PublicKey::Plaid(request)) => {
            use p256::ecdsa::signature::Verifier;
            assert!(
                request.url().starts_with("http://127.0.0.1:8791/"),
                "{}",
                request.url()
            );
            // The key the sender serves for its kid; no other kid is known.
            let signer = idemgate_send::sign::plaid_test_signer();
            if request.kid != signer.kid {
                return false;
            }
            let key = p256::ecdsa::VerifyingKey::from_sec1_bytes(&signer.jwk().sec1()).unwrap();
            let Ok(signature) = p256::ecdsa::Signature::from_slice(&check.signature) else {
                return false;
            };
            key.verify(&check.message, &signature).is_ok()
        }
        other => panic!("unexpected public key check {other:?}"),
    }
}

/// Whether `target`'s route takes `message` at `at`.
fn verifies(
    target: &Target,
    headers: &[(String, String)],
    body: &[u8],
    at: u64,
) -> Result<(), String> {
    // The worker sees header names in lowercase.
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.clone()))
        .collect();
    let request = SignedRequest {
        headers: &headers,
        body,
        query: None,
    };
    match target.scheme.verify(&request, at, 300) {
        Ok(Verdict::Verified) => Ok(()),
        Ok(Verdict::PublicKey(checks)) if checks.iter().any(public_key_verifies) => Ok(()),
        Ok(Verdict::PublicKey(_)) => Err("no public-key signature verifies".into()),
        Err(problem) => Err(problem.detail()),
    }
}

const CERT_URL: &str = "http://127.0.0.1:8790/v1/notifications/certs/CERT-test";

#[test]
fn the_example_has_a_valid_route_for_every_provider() {
    let config = example().config().unwrap();
    assert!(
        config.broken.is_empty(),
        "{:?}",
        config
            .broken
            .iter()
            .map(|route| route.problem.detail())
            .collect::<Vec<_>>()
    );
    for provider in PROVIDERS {
        let target = resolve(&example(), provider.name, None, None)
            .unwrap_or_else(|error| panic!("{}: {error}", provider.name));
        assert_eq!(target.provider.name, provider.name);
    }
    // The README's curl examples: `default` at / behaves as the top-level
    // configuration does without ROUTES.
    let default = config.route("default").unwrap();
    // (As scripts/dev runs it: ORIGIN_URL and FORWARD_SECRET by --var.)
    let bare = idemgate_core::config::Config::from_lookup(|name| match name {
        "ORIGIN_URL" => Some("http://127.0.0.1:9090".to_string()),
        "FORWARD_SECRET" => Some("demo-forward-secret".to_string()),
        _ => None,
    })
    .unwrap();
    assert_eq!(default, &bare.routes[0]);
    // The v1a route's secret is a key pair (the sender signs with it).
    let v1a = resolve(&example(), "standard-webhooks-v1a", None, None).unwrap();
    assert!(v1a.secret.unwrap().starts_with("whsk_"));
}

#[test]
fn every_fixture_is_signed_as_its_route_verifies() {
    let dir = fixtures_dir();
    let mut count = 0;
    for provider in PROVIDERS {
        let routes: &[&str] = match provider.name {
            // Both kinds of Standard Webhooks key: v1 (whsec_) and v1a (whsk_).
            "standard-webhooks" => &["standard-webhooks", "standard-webhooks-v1a"],
            name => &[name][..],
        };
        let names = fixture::list(&dir, provider.name);
        assert!(
            names.contains(&provider.default_fixture.to_string()),
            "{}",
            provider.name
        );
        for route in routes {
            let target = resolve(&example(), provider.name, Some(route), None).unwrap();
            for name in &names {
                let what = format!("{}/{name} on route {route}", provider.name);
                let fixture =
                    fixture::load(&dir, provider.name, name, provider.default_fixture).unwrap();
                assert!(!fixture.description.is_empty(), "{what}: a description");
                let event = Event::new(now() * 1_000);
                let rendered = fixture.render(&event).unwrap();
                // The same event renders the same bytes; another, others.
                assert_eq!(rendered, fixture.render(&event).unwrap(), "{what}");
                let other = fixture.render(&Event::new(now() * 1_000)).unwrap();
                assert_ne!(
                    String::from_utf8_lossy(&rendered.body),
                    String::from_utf8_lossy(&other.body),
                    "{what}: a new event is new"
                );
                let body = String::from_utf8(rendered.body.clone()).unwrap();
                assert!(!body.contains("{{"), "{what}");
                let json = fixture.headers.iter().any(|(name, value)| {
                    name.eq_ignore_ascii_case("content-type") && value.contains("json")
                });
                if json {
                    idemgate_core::json::parse(body.as_bytes())
                        .unwrap_or_else(|error| panic!("{what}: not JSON: {error:?}"));
                }
                let t = now();
                let signed = sign(&target, rendered, t, Some(CERT_URL)).unwrap();
                verifies(&target, &signed.headers, &signed.body, t)
                    .unwrap_or_else(|error| panic!("{what}: {error}"));
                // Plaid signs with its key, not the route's secret (which
                // only asks for the key): another key under the same kid
                // is refused.
                if provider.scheme == "plaid" {
                    let kid = idemgate_send::sign::PLAID_TEST_KID;
                    let mut forged = idemgate_core::signature::Message {
                        headers: Vec::new(),
                        body: signed.body.clone(),
                    };
                    idemgate_core::signature::plaid::Signer::from_seed([9; 32], kid)
                        .sign(&mut forged, t);
                    assert!(
                        verifies(&target, &forged.headers, &forged.body, t).is_err(),
                        "{what}: another key's signature"
                    );
                }
                // Signed by the route's secret, not by any: another secret's
                // signature is refused.
                if !["none", "plaid"].contains(&provider.scheme) {
                    let wrong = match provider.scheme {
                        "adyen" | "adyen-platform" => "11".repeat(32),
                        "braintree" => "local_public_key:another".to_string(),
                        "standard-webhooks" if route.ends_with("v1a") => {
                            idemgate_send::sign::whsk_of([9; 32])
                        }
                        "standard-webhooks" => format!(
                            "whsec_{}",
                            base64::engine::general_purpose::STANDARD.encode("another")
                        ),
                        _ => "another-secret".to_string(),
                    };
                    let forger =
                        resolve(&example(), provider.name, Some(route), Some(&wrong)).unwrap();
                    let forged =
                        sign(&forger, fixture.render(&event).unwrap(), t, Some(CERT_URL)).unwrap();
                    assert!(
                        verifies(&target, &forged.headers, &forged.body, t).is_err(),
                        "{what}: another secret's signature"
                    );
                }
                count += 1;
            }
        }
    }
    assert!(count >= 20, "{count} fixtures");
}

#[test]
fn svix_deliveries_carry_svix_headers() {
    let target = resolve(&example(), "svix", None, None).unwrap();
    let fixture = fixture::load(&fixtures_dir(), "svix", "invoice.paid", "invoice.paid").unwrap();
    let signed = sign(&target, fixture.render(&Event::new(0)).unwrap(), 1, None).unwrap();
    let names: Vec<&str> = signed
        .headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect();
    for name in ["svix-id", "svix-timestamp", "svix-signature"] {
        assert!(names.contains(&name), "{names:?}");
    }
    assert!(
        !names.iter().any(|name| name.starts_with("webhook-")),
        "{names:?}"
    );
}

#[test]
fn a_v1a_route_holding_only_its_public_key_says_how_to_sign() {
    let mut vars = example();
    vars.set(
        "STANDARD_WEBHOOKS_V1A_KEY",
        "whpk_epspKtv+2501G76y7P/hlEMRyWr+BPlHl1zQbxXEVig=",
    );
    let target = resolve(&vars, "standard-webhooks-v1a", None, None).unwrap();
    let fixture = fixture::load(
        &fixtures_dir(),
        "standard-webhooks",
        "invoice.paid",
        "invoice.paid",
    )
    .unwrap();
    let error = sign(&target, fixture.render(&Event::new(0)).unwrap(), 1, None).unwrap_err();
    assert!(error.contains("--secret whsk_"), "{error}");
    // The example's whsk_ key is that public key's pair.
    let pair = example().get("STANDARD_WEBHOOKS_V1A_KEY").unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(pair.strip_prefix("whsk_").unwrap())
        .unwrap();
    assert_eq!(
        idemgate_send::sign::whsk_of(bytes[..32].try_into().unwrap()),
        pair
    );
}

/// `scripts/send stripe --thin`: Stripe's thin event, signed with the same
/// `Stripe-Signature` as a snapshot event, verified by the example's
/// Stripe route; its body a thin event whose `created` (RFC 3339 with
/// milliseconds) is the event's own time, as `order_time` reads it.
#[test]
fn a_thin_stripe_event_is_signed_as_stripe_signs_it_and_timed_as_the_gateway_reads_it() {
    let target = resolve(&example(), "stripe", None, None).unwrap();
    let thin = target
        .provider
        .thin_fixture
        .expect("Stripe sends thin events");
    let fixture = fixture::load(&fixtures_dir(), "stripe", thin, thin).unwrap();
    let event = Event {
        seed: "thin".into(),
        created_ms: 1_796_464_800_123,
    };
    let t = now();
    let signed = sign(&target, fixture.render(&event).unwrap(), t, None).unwrap();
    let signatures: Vec<&str> = signed
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("stripe-signature"))
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(signatures.len(), 1, "{:?}", signed.headers);
    assert!(signatures[0].starts_with(&format!("t={t},v1=")));
    verifies(&target, &signed.headers, &signed.body, t).unwrap();
    let mut tampered = signed.body.clone();
    let at = tampered.iter().position(u8::is_ascii_digit).unwrap();
    tampered[at] = if tampered[at] == b'9' {
        b'0'
    } else {
        tampered[at] + 1
    };
    assert!(verifies(&target, &signed.headers, &tampered, t).is_err());

    let body: serde_json::Value = serde_json::from_slice(&signed.body).unwrap();
    assert_eq!(body["object"], "v2.core.event");
    assert_eq!(body["type"], "v1.billing.meter.error_report_triggered");
    assert!(
        body.get("data").is_none(),
        "a thin event carries no snapshot"
    );
    let id = body["id"].as_str().unwrap();
    assert!(id.starts_with("evt_test_65") && id.len() == 55, "{id}");
    let meter = body["related_object"]["id"].as_str().unwrap();
    assert_eq!(
        body["related_object"]["url"],
        format!("/v1/billing/meters/{meter}")
    );
    let created = body["created"].as_str().unwrap();
    assert_eq!(created, "2026-12-05T10:00:00.123Z");
    assert_eq!(
        idemgate_core::order::time::order_time_ms(created),
        Some(1_796_464_800_123)
    );
}
