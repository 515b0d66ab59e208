//! Property tests over the pure core: no input makes key derivation,
//! canonical JSON, signature checks or the pipeline panic, and the laws
//! they promise hold for generated inputs.
//!
//! 2,000 cases per property by default; `PROPTEST_CASES=100000 cargo test
//! --test properties` runs longer.

use hmac::{Hmac, Mac};
use idemgate_core::canonical::{canonical_json, parse_json, Fingerprint};
use idemgate_core::config::Config;
use idemgate_core::key::{derive_key, IdempotencyKey, KeyInput, KeySource};
use idemgate_core::pipeline::{admit, Inbound};
use idemgate_core::signature::{verify, Secret, SignatureScheme};
use proptest::prelude::*;
use serde_json::Value;
use sha2::Sha256;

fn cases() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig::with_cases(cases)
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |number| number.is_finite())
            .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(any::<String>(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn header_pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = prop_oneof![
        Just("idempotency-key".to_string()),
        Just("webhook-id".to_string()),
        Just("content-type".to_string()),
        Just("stripe-signature".to_string()),
        Just("webhook-signature".to_string()),
        Just("webhook-timestamp".to_string()),
        "[a-z-]{1,12}",
    ];
    prop::collection::vec((name, any::<String>()), 0..6)
}

fn is_valid_key(text: &str) -> bool {
    let trimmed = text.trim();
    (1..=255).contains(&trimmed.chars().count())
        && trimmed
            .chars()
            .all(|c| ('\x21'..='\x7e').contains(&c) && c != '"' && c != '\\')
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_json(&bytes);
    }

    #[test]
    fn canonical_form_is_a_fixed_point_and_ignores_layout(value in json_value()) {
        let canonical = canonical_json(&value);
        let reparsed = parse_json(&canonical).unwrap();
        prop_assert_eq!(canonical_json(&reparsed), canonical.clone());
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        prop_assert_eq!(
            Fingerprint::of_json(&parse_json(&pretty).unwrap()),
            Fingerprint::of_bytes(&canonical)
        );
    }

    #[test]
    fn key_validation_is_exactly_the_spec_rule(text in any::<String>()) {
        let parsed = IdempotencyKey::parse(&text, &KeySource::BodySha256);
        prop_assert_eq!(parsed.is_ok(), is_valid_key(&text));
    }

    #[test]
    fn derived_keys_are_always_valid(headers in header_pairs(), value in json_value()) {
        let sources = KeySource::parse_list(
            "header:Idempotency-Key,header:webhook-id,json:/transaction_id,json:/id,json:/a/0",
        )
        .unwrap();
        let fingerprint = Fingerprint::of_json(&value);
        let input = KeyInput {
            headers: &headers,
            content_type: Some("application/json"),
            json: Some(&value),
            fingerprint: &fingerprint,
        };
        if let Ok(key) = derive_key(&sources, &input) {
            prop_assert!(is_valid_key(key.as_str()));
        }
    }

    #[test]
    fn signature_checks_never_panic(
        headers in header_pairs(),
        body in prop::collection::vec(any::<u8>(), 0..256),
        now in any::<u64>(),
    ) {
        let schemes = [
            SignatureScheme::Stripe { secret: Secret::new("whsec_prop".into()) },
            SignatureScheme::StandardWebhooks { key: b"prop-key".to_vec() },
        ];
        for scheme in &schemes {
            let _ = verify(scheme, 300, &headers, &body, now);
        }
    }

    #[test]
    fn a_stripe_signature_verifies_only_its_own_body(
        secret in "[a-zA-Z0-9_]{1,40}",
        body in prop::collection::vec(any::<u8>(), 0..256),
        other in prop::collection::vec(any::<u8>(), 0..256),
        t in 1_000u64..4_000_000_000,
    ) {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(&body);
        let header = format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()));
        let headers = vec![("stripe-signature".to_string(), header)];
        let scheme = SignatureScheme::Stripe { secret: Secret::new(secret) };
        prop_assert!(verify(&scheme, 300, &headers, &body, t).is_ok());
        if other != body {
            prop_assert!(verify(&scheme, 300, &headers, &other, t).is_err());
        }
    }

    #[test]
    fn the_pipeline_never_panics(
        headers in header_pairs(),
        body in prop::collection::vec(any::<u8>(), 0..512),
        path in "/[ -~]{0,40}",
    ) {
        let config = Config::from_lookup(|name| match name {
            "ORIGIN_URL" => Some("http://origin".into()),
            "MAX_BODY_BYTES" => Some("256".into()),
            _ => None,
        })
        .unwrap();
        let inbound = Inbound {
            method: "POST",
            path: &path,
            query: None,
            headers: &headers,
            body: &body,
            now: 0,
        };
        if let Ok(admitted) = admit(&config, &inbound) {
            prop_assert!(is_valid_key(admitted.key.as_str()));
            prop_assert_eq!(admitted.object_name.len(), 64);
        }
    }
}
