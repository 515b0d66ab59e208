use super::*;

#[path = "../../tests/support/public_key.rs"]
mod public_key;
pub use public_key::public_key_verifies;

/// [`public_key_verifies`] with Plaid's keys from `plaid`.
pub fn public_key_verifies_with(
    check: &PublicKeyCheck,
    plaid: impl Fn(&plaid::KeyRequest) -> Option<plaid::Jwk>,
) -> bool {
    public_key::verifies_with(check, |_| None, plaid)
}

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
        api_base: None,
        client_id: Some("plaid_client_id_do_not_print".into()),
    }
}

#[test]
fn secrets_are_redacted_in_debug_output() {
    for entry in SCHEMES {
        let scheme = SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
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
    // So does Plaid (its tests sign with a `plaid::Signer`).
    for entry in SCHEMES
        .iter()
        .filter(|entry| !["paypal", "plaid"].contains(&entry.name))
    {
        let scheme = SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
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
        let scheme = SignatureScheme::configure(entry.name, &working_settings(entry.name)).unwrap();
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

/// What holds for a scheme whatever its settings is its entry's data:
/// what it signs, whether it makes a `scheme-key`, whether it batches.
#[test]
fn an_entry_says_what_its_scheme_signs_makes_and_batches() {
    use crate::key::KeyPart;
    let names = |says: fn(&SchemeEntry) -> bool| -> Vec<&str> {
        SCHEMES
            .iter()
            .filter(|entry| says(entry))
            .map(|entry| entry.name)
            .collect()
    };
    assert_eq!(
        names(|entry| entry.batch.is_some()),
        ["adyen", "gocardless"]
    );
    assert_eq!(names(|entry| entry.makes_scheme_key), ["adyen", "slack"]);
    assert_eq!(
        names(|entry| entry.signed.body == SignedBody::Fields),
        ["adyen", "twilio", "braintree"]
    );
    let scheme = |name: &str| SignatureScheme::configure(name, &working_settings(name)).unwrap();
    let pointer = |pointer: &str| KeyPart::JsonPointer(pointer.into());
    assert_eq!(scheme("stripe").allows(&pointer("/data/object/id")), Ok(()));
    assert!(scheme("twilio").allows(&pointer("/id")).is_err());
    assert!(scheme("braintree").allows(&pointer("/id")).is_err());
    assert_eq!(
        scheme("braintree").allows(&KeyPart::Form("bt_payload".into())),
        Ok(())
    );
    assert!(scheme("braintree")
        .allows(&KeyPart::Form("bt_signature".into()))
        .is_err());
    assert!(scheme("paypal").signs_header("PayPal-Transmission-Id"));
    assert!(!scheme("paypal").signs_header("PayPal-Cert-Url"));
    assert!(scheme("github").allows(&KeyPart::SchemeKey).is_err());
    assert_eq!(
        scheme("gocardless").batch().map(|format| format.events),
        Some("events")
    );
}
