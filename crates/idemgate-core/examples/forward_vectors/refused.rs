//! The forwards a verifier must refuse: stale, not signed by the secret,
//! missing a header, malformed. Some of them only since v2: a verifier of
//! the previous version, blind to what v2 covers, accepts them
//! (`expected_v1`).

use super::*;

pub fn refused_as_stale() -> Vec<Vector> {
    vec![
        case(
            "stale",
            "Signed an hour ago.",
            signed_at(-3_600).received(),
            rejected("stale"),
        ),
        case(
            "one-second-past-tolerance",
            "Signed 301 s ago.",
            signed_at(-301).received(),
            rejected("stale"),
        ),
        case(
            "future",
            "Signed an hour ahead of now.",
            signed_at(3_600).received(),
            rejected("stale"),
        ),
        case(
            "one-second-ahead-of-tolerance",
            "Signed 301 s ahead of now.",
            signed_at(301).received(),
            rejected("stale"),
        ),
    ]
}

pub fn refused_as_not_signed() -> Vec<Vector> {
    let genuine = Forward::genuine();
    let bad = || rejected("bad-signature");
    let with_signed_at_changed = {
        let request = genuine.received();
        let signature = request.value(SIGNATURE);
        let changed = signature.replacen(&format!("t={NOW}"), &format!("t={}", NOW - 1), 1);
        request.with_header(SIGNATURE, changed)
    };
    let other_secret_v2 = Forward {
        secret: "whsec_other",
        ..Forward::genuine()
    }
    .received()
    .value(SIGNATURE_V2);
    let earlier_v2 = signed_at(-1).received().value(SIGNATURE_V2);
    let received_as = |method: &str, path_and_query: &str| Received {
        method: method.into(),
        path_and_query: path_and_query.into(),
        ..genuine.received()
    };
    vec![
        case(
            "wrong-scope",
            "Idempotency-Scope is another scope than the one signed.",
            genuine_with(SCOPE, Scope::new("refunds", None, None).id()),
            bad(),
        ),
        case(
            "wrong-epoch",
            "Idempotency-Epoch is one more than the epoch signed.",
            genuine_with(EPOCH_HEADER, &(EPOCH + 1).to_string()),
            bad(),
        ),
        case(
            "wrong-key",
            "Idempotency-Key is another key than the one signed.",
            genuine_with(KEY, "\"order-43\""),
            bad(),
        ),
        case(
            "tampered-body",
            "The body differs from the one signed by one digit.",
            genuine
                .received()
                .with_body(br#"{"amount":1001,"currency":"eur"}"#),
            bad(),
        ),
        case(
            "wrong-method",
            "Received as PUT, signed as POST.",
            received_as("PUT", "/payments"),
            bad(),
        ),
        case(
            "method-in-lowercase",
            "Received as 'post', signed as 'POST': the method is compared as it is.",
            received_as("post", "/payments"),
            bad(),
        ),
        case(
            "wrong-path",
            "Received at another path than the one signed.",
            received_as("POST", "/refunds"),
            bad(),
        ),
        case(
            "wrong-query",
            "Received with a query that was not signed.",
            received_as("POST", "/payments?amount=1"),
            bad(),
        ),
        case(
            "wrong-secret",
            "Signed with another secret than the verifier's.",
            Forward {
                secret: "whsec_other",
                ..Forward::genuine()
            }
            .received(),
            bad(),
        ),
        case(
            "signed-at-changed",
            "Idempotency-Signature's t moved one second back (still within the tolerance): t is signed too, and no longer v2's.",
            with_signed_at_changed,
            bad(),
        ),
        case(
            "signature-v2-wrong-secret",
            "Idempotency-Signature-V2 signed with another secret than the verifier's, Idempotency-Signature genuine.",
            genuine_with(SIGNATURE_V2, &other_secret_v2),
            bad(),
        )
        .v1_answers(v1_valid()),
        case(
            "signature-v2-t-differs",
            "Idempotency-Signature-V2 genuinely signed one second before Idempotency-Signature: idemgate signs both at once with one t, so two t's are refused as bad-signature (each header alone is well-formed).",
            genuine_with(SIGNATURE_V2, &earlier_v2),
            bad(),
        )
        .v1_answers(v1_valid()),
        case(
            "source-stripped",
            "Idempotency-Source removed from a forward that reconciliation made: v2 covers it.",
            Forward::reconciled().received().without_header(SOURCE),
            bad(),
        )
        .v1_answers(Forward::reconciled().verified().as_v1()),
        case(
            "source-added",
            "Idempotency-Source: reconciliation added to a live delivery.",
            Forward::genuine()
                .received()
                .with_added_header(SOURCE, "reconciliation"),
            bad(),
        )
        .v1_answers(v1_valid()),
        case(
            "source-changed",
            "Idempotency-Source changed from reconciliation to another token.",
            Forward::reconciled().received().with_header(SOURCE, "live"),
            bad(),
        )
        .v1_answers(Forward::reconciled().verified().as_v1()),
        case(
            "stale-stripped",
            "Idempotency-Stale removed from a stale forward: v2 covers it.",
            Forward::stale().received().without_header(STALE),
            bad(),
        )
        .v1_answers(Forward::stale().verified().as_v1()),
        case(
            "stale-added",
            "Idempotency-Stale: true added to a forward that was not stale.",
            Forward::genuine().received().with_added_header(STALE, "true"),
            bad(),
        )
        .v1_answers(v1_valid()),
    ]
}

/// The genuine forward as a v1 verifier sees it.
fn v1_valid() -> Expected {
    Forward::genuine().verified().as_v1()
}

pub fn refused_as_missing() -> Vec<Vector> {
    vec![
        case(
            "missing-key",
            "No Idempotency-Key header.",
            Forward::genuine().received().without_header(KEY),
            rejected("missing-header"),
        ),
        case(
            "missing-scope",
            "No Idempotency-Scope header.",
            Forward::genuine().received().without_header(SCOPE),
            rejected("missing-header"),
        ),
        case(
            "missing-epoch",
            "No Idempotency-Epoch header.",
            Forward::genuine().received().without_header(EPOCH_HEADER),
            rejected("missing-header"),
        ),
        case(
            "missing-signature",
            "Neither signature header (idemgate without FORWARD_SECRET).",
            Forward::genuine()
                .received()
                .without_header(SIGNATURE)
                .without_header(SIGNATURE_V2),
            rejected("missing-header"),
        ),
        case(
            "missing-signature-v1",
            "Idempotency-Signature-V2 without Idempotency-Signature: a v2 verifier requires both.",
            Forward::genuine().received().without_header(SIGNATURE),
            rejected("missing-header"),
        ),
        case(
            "missing-signature-v2",
            "Idempotency-Signature without Idempotency-Signature-V2, as idemgate sent before v2: a v2 verifier refuses it, a v1 verifier accepts it.",
            Forward::genuine().received().without_header(SIGNATURE_V2),
            rejected("missing-header"),
        )
        .v1_answers(v1_valid()),
    ]
}

pub fn refused_as_malformed() -> Vec<Vector> {
    let genuine = Forward::genuine().received();
    let signature = genuine.value(SIGNATURE);
    let (t, v1) = signature.split_once(',').expect("t=..,v1=..");
    let malformed = |name: &'static str, description: &'static str, header: &str, value: &str| {
        case(
            name,
            description,
            genuine_with(header, value),
            rejected("malformed-header"),
        )
    };
    let twice = |name: &'static str, description: &'static str, header: &str| {
        let value = genuine.value(header);
        case(
            name,
            description,
            genuine.clone().with_header_twice(header, value),
            rejected("malformed-header"),
        )
    };
    let signature_v2 = genuine.value(SIGNATURE_V2);
    let (_, v2) = signature_v2.split_once(',').expect("t=..,v2=..");
    // Refused by a v2 verifier only: a v1 verifier reads none of these.
    let malformed_since_v2 = |name: &'static str, description: &'static str, request: Received| {
        case(name, description, request, rejected("malformed-header")).v1_answers(v1_valid())
    };
    let longer_key = format!("\"{}\"", "k".repeat(256));
    let upper_scope = payments_scope().to_uppercase();
    let short_scope = payments_scope()[..63].to_string();
    vec![
        malformed("key-unquoted", "The key without its quotes.", KEY, "order-42"),
        malformed("key-empty", "An empty quoted key.", KEY, "\"\""),
        malformed("key-empty-value", "Idempotency-Key present with an empty value.", KEY, ""),
        malformed("key-with-space", "A space is not a key character.", KEY, "\"two words\""),
        malformed(
            "key-with-escape",
            "An RFC 8941 escape: idemgate's keys never contain '\\' or '\"'.",
            KEY,
            "\"order\\\"42\"",
        ),
        malformed("key-too-long", "A key of 256 characters.", KEY, &longer_key),
        malformed(
            "key-not-ascii",
            "A non-ASCII character in the key.",
            KEY,
            "\"ordér-42\"",
        ),
        malformed(
            "scope-uppercase-hex",
            "The scope in uppercase hex digits.",
            SCOPE,
            &upper_scope,
        ),
        malformed(
            "scope-too-short",
            "63 hex digits.",
            SCOPE,
            &short_scope,
        ),
        malformed(
            "epoch-leading-zero",
            "A leading zero: not how idemgate writes an epoch.",
            EPOCH_HEADER,
            &format!("0{EPOCH}"),
        ),
        malformed("epoch-plus-sign", "A '+' sign.", EPOCH_HEADER, &format!("+{EPOCH}")),
        malformed("epoch-negative", "A '-' sign.", EPOCH_HEADER, &format!("-{EPOCH}")),
        malformed("epoch-zero", "Epochs start at 1.", EPOCH_HEADER, "0"),
        malformed("epoch-not-a-number", "Not digits.", EPOCH_HEADER, "1e15"),
        malformed(
            "epoch-beyond-u64",
            "2^64: beyond any epoch.",
            EPOCH_HEADER,
            "18446744073709551616",
        ),
        malformed(
            "signature-without-t",
            "Only v1.",
            SIGNATURE,
            v1,
        ),
        malformed(
            "signature-without-v1",
            "Only t.",
            SIGNATURE,
            t,
        ),
        malformed(
            "signature-fields-reordered",
            "v1 before t.",
            SIGNATURE,
            &format!("{v1},{t}"),
        ),
        malformed(
            "signature-t-not-a-number",
            "t is not digits.",
            SIGNATURE,
            &format!("t=soon,{v1}"),
        ),
        malformed(
            "signature-t-plus-sign",
            "t with a '+' sign: not how idemgate writes it.",
            SIGNATURE,
            &format!("t=+{NOW},{v1}"),
        ),
        malformed(
            "signature-t-leading-zero",
            "t with a leading zero: not how idemgate writes it.",
            SIGNATURE,
            &format!("t=0{NOW},{v1}"),
        ),
        malformed(
            "signature-v1-short",
            "v1 of 62 hex digits.",
            SIGNATURE,
            &format!("{t},{}", &v1[..v1.len() - 2]),
        ),
        malformed(
            "signature-v1-uppercase-hex",
            "v1 in uppercase hex digits: not how idemgate writes it.",
            SIGNATURE,
            &format!("{t},{}", v1.to_uppercase().replacen("V1=", "v1=", 1)),
        ),
        malformed(
            "signature-extra-field",
            "A second signature after v1.",
            SIGNATURE,
            &format!("{signature},{v1}"),
        ),
        twice(
            "duplicate-key",
            "Idempotency-Key sent twice with the same value: a verifier and the code after it could read different ones, so it is refused.",
            KEY,
        ),
        twice(
            "duplicate-scope",
            "Idempotency-Scope sent twice with the same value.",
            SCOPE,
        ),
        twice(
            "duplicate-epoch",
            "Idempotency-Epoch sent twice with the same value.",
            EPOCH_HEADER,
        ),
        twice(
            "duplicate-signature",
            "Idempotency-Signature sent twice with the same value.",
            SIGNATURE,
        ),
        malformed_since_v2(
            "duplicate-signature-v2",
            "Idempotency-Signature-V2 sent twice with the same value.",
            genuine
                .clone()
                .with_header_twice(SIGNATURE_V2, signature_v2.clone()),
        ),
        case(
            "duplicate-source",
            "Idempotency-Source sent twice with the same value.",
            Forward::reconciled()
                .received()
                .with_header_twice(SOURCE, "reconciliation"),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::reconciled().verified().as_v1()),
        case(
            "duplicate-stale",
            "Idempotency-Stale sent twice with the same value.",
            Forward::stale().received().with_header_twice(STALE, "true"),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::stale().verified().as_v1()),
        malformed_since_v2(
            "signature-v2-uppercase-hex",
            "v2 in uppercase hex digits: not how idemgate writes it.",
            genuine_with(
                SIGNATURE_V2,
                &format!("{t},{}", v2.to_uppercase().replacen("V2=", "v2=", 1)),
            ),
        ),
        malformed_since_v2(
            "signature-v2-t-leading-zero",
            "Idempotency-Signature-V2's t with a leading zero: not how idemgate writes it.",
            genuine_with(SIGNATURE_V2, &format!("t=0{NOW},{v2}")),
        ),
        malformed_since_v2(
            "signature-v2-labelled-v1",
            "Idempotency-Signature-V2 holding its digest as v1=: the label must be v2.",
            genuine_with(SIGNATURE_V2, &format!("{t},{}", v2.replacen("v2=", "v1=", 1))),
        ),
        malformed_since_v2(
            "signature-v2-without-t",
            "Idempotency-Signature-V2 with only v2.",
            genuine_with(SIGNATURE_V2, v2),
        ),
        case(
            "stale-false",
            "Idempotency-Stale: false. idemgate sends the header only on a stale forward, and only as true; any other value is refused rather than read one way or the other.",
            Forward::stale().received().with_header(STALE, "false"),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::stale().verified().as_v1()),
        case(
            "stale-one",
            "Idempotency-Stale: 1, not true.",
            Forward::stale().received().with_header(STALE, "1"),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::stale().verified().as_v1()),
        case(
            "source-empty",
            "Idempotency-Source present with an empty value: it would sign as an absent header, so it is refused.",
            Forward::reconciled().received().with_header(SOURCE, ""),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::reconciled().verified().as_v1()),
        case(
            "source-not-a-token",
            "Idempotency-Source with a space: not one token.",
            Forward::reconciled()
                .received()
                .with_header(SOURCE, "reconciliation run"),
            rejected("malformed-header"),
        )
        .v1_answers(Forward::reconciled().verified().as_v1()),
    ]
}
