use super::*;

const SECRET: &str = "whsec_test";
const T: u64 = 1_700_000_000;
const SCOPE: &str = "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd";
const EPOCH: &str = "1700000000000000";
const BODY: &[u8] = br#"{"amount":1000}"#;
/// The README's test vector, computed independently with Python's hmac.
const VECTOR: &str =
    "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53";
/// Its v2 (no source, not stale), computed the same way.
const VECTOR_V2: &str =
    "t=1700000000,v2=97b6ee9585b362364454abe474303feee33744719d8c5cd8c28e0ee5342d8bd1";
/// v2 of the same forward as reconciliation sends it late: `Idempotency-Source:
/// reconciliation` and `Idempotency-Stale: true`, computed the same way.
const VECTOR_V2_RECONCILED_STALE: &str =
    "t=1700000000,v2=a33ab68fdcf7820d9d99e1598b334049da0695db6e718e0636ac6ae2698b0e18";

fn request(body: &[u8]) -> ForwardedRequest<'_> {
    ForwardedRequest {
        method: "POST",
        path_and_query: "/payments?currency=eur",
        body,
    }
}

fn headers<'a>(
    key: &'a str,
    scope: &'a str,
    epoch: &'a str,
    signature: &'a str,
) -> ForwardedHeaders<'a> {
    ForwardedHeaders {
        key: Some(key),
        scope: Some(scope),
        epoch: Some(epoch),
        signature: Some(signature),
        signature_v2: Some(VECTOR_V2),
        source: None,
        stale: None,
    }
}

fn fields(source: Option<&'static str>, stale: bool) -> SignedFields<'static> {
    SignedFields {
        scope: SCOPE,
        key: "order-42",
        epoch: 1_700_000_000_000_000,
        source,
        stale,
    }
}

fn genuine() -> ForwardedHeaders<'static> {
    headers("\"order-42\"", SCOPE, EPOCH, VECTOR)
}

fn verify(
    headers: &ForwardedHeaders<'_>,
    request: &ForwardedRequest<'_>,
    now: u64,
) -> Result<Forwarded, VerifyError> {
    Verifier::new(SECRET).verify(headers, request, now)
}

#[test]
fn accepts_the_test_vector() {
    let forwarded = verify(&genuine(), &request(BODY), T).unwrap();
    assert_eq!(forwarded.key, "order-42");
    assert_eq!(forwarded.scope, SCOPE);
    assert_eq!(forwarded.epoch, 1_700_000_000_000_000);
    assert_eq!(forwarded.signed_at, T);
    assert_eq!(
        forwarded.body_sha256,
        "612612d208fb618eb2b007d2a7f8d7a1cfb511532389298f1cc33322c3094bcc"
    );
    assert_eq!((forwarded.source, forwarded.stale), (None, false));
    assert_eq!(
        sign(SECRET, &request(BODY), &fields(None, false), T),
        [
            (SIGNATURE_HEADER, VECTOR.to_string()),
            (SIGNATURE_V2_HEADER, VECTOR_V2.to_string())
        ]
    );
}

#[test]
fn a_reconciled_stale_forward_verifies_with_its_source_and_staleness() {
    let reconciled = ForwardedHeaders {
        signature_v2: Some(VECTOR_V2_RECONCILED_STALE),
        source: Some("reconciliation"),
        stale: Some("true"),
        ..genuine()
    };
    let forwarded = verify(&reconciled, &request(BODY), T).unwrap();
    assert_eq!(forwarded.source.as_deref(), Some("reconciliation"));
    assert!(forwarded.stale);
    assert_eq!(
        sign(
            SECRET,
            &request(BODY),
            &fields(Some("reconciliation"), true),
            T
        ),
        [
            (SOURCE_HEADER, "reconciliation".to_string()),
            (STALE_HEADER, "true".to_string()),
            // v1 is the same as a live forward's: it does not cover them.
            (SIGNATURE_HEADER, VECTOR.to_string()),
            (SIGNATURE_V2_HEADER, VECTOR_V2_RECONCILED_STALE.to_string())
        ]
    );
    // Removing, adding or changing either header breaks v2.
    let tampered = [
        ForwardedHeaders {
            source: None,
            ..reconciled
        },
        ForwardedHeaders {
            stale: None,
            ..reconciled
        },
        ForwardedHeaders {
            source: Some("live"),
            ..reconciled
        },
        ForwardedHeaders {
            source: Some("reconciliation"),
            ..genuine()
        },
        ForwardedHeaders {
            stale: Some("true"),
            ..genuine()
        },
    ];
    for headers in tampered {
        assert_eq!(
            verify(&headers, &request(BODY), T),
            Err(VerifyError::BadSignature),
            "{headers:?}"
        );
    }
}

/// Each combination that `sign` writes verifies as what it says.
#[test]
fn sign_writes_what_verify_reads() {
    for (source, stale) in [
        (None, false),
        (Some("reconciliation"), false),
        (None, true),
        (Some("reconciliation"), true),
    ] {
        let signed = sign(SECRET, &request(BODY), &fields(source, stale), T);
        let mut pairs = vec![
            (KEY_HEADER, "\"order-42\"".to_string()),
            (SCOPE_HEADER, SCOPE.to_string()),
            (EPOCH_HEADER, EPOCH.to_string()),
        ];
        pairs.extend(signed);
        let headers =
            ForwardedHeaders::from_pairs(pairs.iter().map(|(name, value)| (*name, value.as_str())))
                .unwrap();
        let forwarded = verify(&headers, &request(BODY), T).unwrap();
        assert_eq!(
            (forwarded.source.as_deref(), forwarded.stale),
            (source, stale)
        );
    }
}

/// v2 covers all that v1 does: v1 must be present and well-formed, with
/// v2's `t`, but its HMAC is not what decides.
#[test]
fn v1_must_be_there_with_v2s_t_but_v2_decides() {
    let other_v1 = sign("whsec_other", &request(BODY), &fields(None, false), T)
        .into_iter()
        .find(|(name, _)| *name == SIGNATURE_HEADER)
        .unwrap()
        .1;
    let v1_of_another_secret = ForwardedHeaders {
        signature: Some(&other_v1),
        ..genuine()
    };
    assert!(verify(&v1_of_another_secret, &request(BODY), T).is_ok());
    let moved = VECTOR.replace("t=1700000000", "t=1699999999");
    let t_differs = ForwardedHeaders {
        signature: Some(&moved),
        ..genuine()
    };
    assert_eq!(
        verify(&t_differs, &request(BODY), T),
        Err(VerifyError::BadSignature)
    );
    let v2_signed_elsewhere = Verifier::new("whsec_other").verify(&genuine(), &request(BODY), T);
    assert_eq!(v2_signed_elsewhere, Err(VerifyError::BadSignature));
    let without_v2 = ForwardedHeaders {
        signature_v2: None,
        ..genuine()
    };
    assert_eq!(
        verify(&without_v2, &request(BODY), T),
        Err(VerifyError::MissingHeader(SIGNATURE_V2_HEADER))
    );
}

#[test]
fn source_and_stale_are_read_as_idemgate_writes_them() {
    for (source, stale) in [
        (Some(""), None),
        (Some("two words"), None),
        (Some("reconciliation, reconciliation"), None),
        (Some("récon"), None),
        (None, Some("false")),
        (None, Some("1")),
        (None, Some("True")),
        (None, Some("")),
        (None, Some("true, true")),
    ] {
        let headers = ForwardedHeaders {
            source,
            stale,
            ..genuine()
        };
        let header = if source.is_some() {
            SOURCE_HEADER
        } else {
            STALE_HEADER
        };
        assert!(
            matches!(
                verify(&headers, &request(BODY), T),
                Err(VerifyError::MalformedHeader { header: h, .. }) if h == header
            ),
            "{headers:?}"
        );
    }
    // Spaces and tabs around them are HTTP's.
    let padded = ForwardedHeaders {
        signature_v2: Some(VECTOR_V2_RECONCILED_STALE),
        source: Some(" reconciliation\t"),
        stale: Some("\ttrue "),
        ..genuine()
    };
    let forwarded = verify(&padded, &request(BODY), T).unwrap();
    assert_eq!(forwarded.source.as_deref(), Some("reconciliation"));
}

#[test]
fn a_wrong_secret_is_rejected() {
    let result = Verifier::new("whsec_other").verify(&genuine(), &request(BODY), T);
    assert_eq!(result, Err(VerifyError::BadSignature));
}

#[test]
fn every_signed_part_is_checked() {
    let other_scope = "b".repeat(64);
    let signed_cases = [
        (headers("\"order-43\"", SCOPE, EPOCH, VECTOR), request(BODY)),
        (
            headers("\"order-42\"", &other_scope, EPOCH, VECTOR),
            request(BODY),
        ),
        (
            headers("\"order-42\"", SCOPE, "1700000000000001", VECTOR),
            request(BODY),
        ),
        (genuine(), request(br#"{"amount":1001}"#)),
        (
            genuine(),
            ForwardedRequest {
                method: "PUT",
                ..request(BODY)
            },
        ),
        (
            genuine(),
            ForwardedRequest {
                path_and_query: "/payments?currency=usd",
                ..request(BODY)
            },
        ),
        (
            genuine(),
            ForwardedRequest {
                path_and_query: "/refunds?currency=eur",
                ..request(BODY)
            },
        ),
    ];
    for (headers, request) in signed_cases {
        assert_eq!(
            verify(&headers, &request, T),
            Err(VerifyError::BadSignature),
            "{headers:?} {request:?}"
        );
    }
}

#[test]
fn stale_and_future_timestamps_are_rejected() {
    assert!(verify(&genuine(), &request(BODY), T + 300).is_ok());
    assert!(verify(&genuine(), &request(BODY), T - 300).is_ok());
    for now in [T + 301, T - 301] {
        assert!(matches!(
            verify(&genuine(), &request(BODY), now),
            Err(VerifyError::Stale { .. })
        ));
    }
    let lenient = Verifier::new(SECRET).with_tolerance(3_600);
    assert!(lenient
        .verify(&genuine(), &request(BODY), T + 3_000)
        .is_ok());
}

#[test]
fn malformed_and_missing_headers_are_typed_errors() {
    let upper = SCOPE.to_uppercase();
    let malformed_cases = [
        headers("order-42", SCOPE, EPOCH, VECTOR),
        headers("\"\"", SCOPE, EPOCH, VECTOR),
        headers("\"two words\"", SCOPE, EPOCH, VECTOR),
        headers("\"order-42\"", "abc", EPOCH, VECTOR),
        headers("\"order-42\"", &upper, EPOCH, VECTOR),
        headers("\"order-42\"", SCOPE, "0", VECTOR),
        headers("\"order-42\"", SCOPE, "-1", VECTOR),
        headers("\"order-42\"", SCOPE, "one", VECTOR),
        headers("\"order-42\"", SCOPE, EPOCH, "v1=abc"),
        headers("\"order-42\"", SCOPE, EPOCH, "t=soon,v1=00"),
        headers("\"order-42\"", SCOPE, EPOCH, "t=1700000000,v1=abc"),
        ForwardedHeaders {
            signature_v2: Some("t=1700000000,v2=abc"),
            ..genuine()
        },
        ForwardedHeaders {
            signature_v2: Some(VECTOR),
            ..genuine()
        },
    ];
    for headers in malformed_cases {
        assert!(
            matches!(
                verify(&headers, &request(BODY), T),
                Err(VerifyError::MalformedHeader { .. })
            ),
            "{headers:?}"
        );
    }
    let missing_scope = ForwardedHeaders {
        scope: None,
        ..genuine()
    };
    assert_eq!(
        verify(&missing_scope, &request(BODY), T),
        Err(VerifyError::MissingHeader(SCOPE_HEADER))
    );
    let missing = ForwardedHeaders {
        signature: None,
        ..genuine()
    };
    assert_eq!(
        verify(&missing, &request(BODY), T),
        Err(VerifyError::MissingHeader(SIGNATURE_HEADER))
    );
}

#[test]
fn headers_come_from_any_lookup() {
    let list = [
        ("idempotency-key", "\"order-42\""),
        ("idempotency-scope", SCOPE),
        ("idempotency-epoch", EPOCH),
        ("idempotency-signature", VECTOR),
        ("idempotency-signature-v2", VECTOR_V2_RECONCILED_STALE),
        ("idempotency-source", "reconciliation"),
        ("idempotency-stale", "true"),
    ];
    let headers = ForwardedHeaders::from_lookup(|name| {
        list.iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| *value)
    });
    let forwarded = verify(&headers, &request(BODY), T).unwrap();
    assert_eq!(forwarded.source.as_deref(), Some("reconciliation"));
    assert!(forwarded.stale);
}

/// Forms idemgate never writes are refused even where they read as the
/// same number, and the signature over that number would match: one
/// header value verifies, as with the Node.js and Python packages.
#[test]
fn only_the_canonical_spelling_of_a_number_verifies() {
    let upper_v1 = VECTOR.replace("v1=8e1ea884ae", "v1=8E1EA884AE");
    let upper_v2 = VECTOR_V2.replace("v2=97b6ee9585b", "v2=97B6EE9585B");
    let leading_zero_v2 = VECTOR_V2.replace("t=1700000000", "t=01700000000");
    let non_canonical = [
        headers("\"order-42\"", SCOPE, "01700000000000000", VECTOR),
        headers("\"order-42\"", SCOPE, "+1700000000000000", VECTOR),
        headers(
            "\"order-42\"",
            SCOPE,
            EPOCH,
            &VECTOR.replace("t=1700000000", "t=+1700000000"),
        ),
        headers(
            "\"order-42\"",
            SCOPE,
            EPOCH,
            &VECTOR.replace("t=1700000000", "t=01700000000"),
        ),
        headers("\"order-42\"", SCOPE, EPOCH, &upper_v1),
        headers("\"order-42\"", SCOPE, EPOCH, &format!("{VECTOR}\n")),
        ForwardedHeaders {
            signature_v2: Some(&upper_v2),
            ..genuine()
        },
        ForwardedHeaders {
            signature_v2: Some(&leading_zero_v2),
            ..genuine()
        },
    ]
    .map(|headers| verify(&headers, &request(BODY), T));
    for result in non_canonical {
        assert!(
            matches!(result, Err(VerifyError::MalformedHeader { .. })),
            "{result:?}"
        );
    }
    // Spaces and tabs around a value are HTTP's, not the value's.
    let padded = headers(" \"order-42\"\t", SCOPE, "\t1700000000000000 ", VECTOR);
    assert!(verify(&padded, &request(BODY), T).is_ok());
}

#[test]
fn a_forwarded_header_sent_twice_is_refused() {
    let genuine = [
        ("Idempotency-Key", "\"order-42\""),
        ("idempotency-scope", SCOPE),
        ("IDEMPOTENCY-EPOCH", EPOCH),
        ("Idempotency-Signature", VECTOR),
        ("idempotency-signature-V2", VECTOR_V2_RECONCILED_STALE),
        ("Idempotency-Source", "reconciliation"),
        ("idempotency-stale", "true"),
        ("content-type", "application/json"),
    ];
    let headers = ForwardedHeaders::from_pairs(genuine).unwrap();
    assert!(verify(&headers, &request(BODY), T).is_ok());
    for (name, value) in genuine.iter().take(7) {
        let mut twice = genuine.to_vec();
        let lowercase: &'static str = name.to_ascii_lowercase().leak();
        twice.push((lowercase, *value));
        let refused = ForwardedHeaders::from_pairs(twice).unwrap_err();
        assert!(
            matches!(
                refused,
                VerifyError::MalformedHeader {
                    reason: "sent more than once",
                    ..
                }
            ),
            "{name}: {refused:?}"
        );
    }
    // Other headers may repeat.
    let mut cookies = genuine.to_vec();
    cookies.extend([("cookie", "a=1"), ("cookie", "b=2")]);
    assert!(ForwardedHeaders::from_pairs(cookies).is_ok());
    // A value that is not text cannot be the one the signature covers.
    let bytes: [(&str, &[u8]); 1] = [("idempotency-key", b"\"order-\xff\"")];
    assert!(matches!(
        ForwardedHeaders::from_pairs(bytes),
        Err(VerifyError::MalformedHeader {
            header: KEY_HEADER,
            ..
        })
    ));
}

#[test]
fn the_secret_is_not_in_debug_output() {
    assert!(!format!("{:?}", Verifier::new("whsec_hidden")).contains("hidden"));
}
