//! Prints `tests/vectors/forwards.json`: forwards signed by the core's own
//! `OutboundRequest::with_idempotency`, as an origin receives them, each
//! with what a verifier must answer (`expected`), and what a verifier of
//! the previous version, which reads `Idempotency-Signature` alone, answers
//! (`expected_v1`). The origin verifiers (the Rust crate, the Node.js and
//! Python packages) are all tested against this one file.
//!
//! `cargo run -p idemgate-core --example forward_vectors > tests/vectors/forwards.json`
//!
//! `tests/forward_vectors.rs` checks that the committed file is what this
//! prints, so a change to the signing cannot leave the vectors behind.

use base64::Engine as _;
use idemgate_core::canonical::sha256_hex;
use idemgate_core::key::{IdempotencyKey, Scope};
use idemgate_core::origin::{Idempotency, OutboundRequest};
use serde::Serialize;

/// The verifier's secret in every vector (a forward signed with another
/// secret is one of the cases).
const SECRET: &str = "whsec_test";
const NOW: u64 = 1_700_000_000;
const TOLERANCE_SECONDS: u64 = 300;
const EPOCH: u64 = 1_700_000_000_000_000;

/// One case. Structs, not `serde_json::Value`, so that the field order is
/// the declaration order whatever features serde_json is built with.
#[derive(Debug, Clone, Serialize)]
pub struct Vector {
    pub name: &'static str,
    pub description: &'static str,
    /// What the verifier is configured with.
    pub secret: &'static str,
    /// The verifier's clock, Unix seconds.
    pub now: u64,
    pub tolerance_seconds: u64,
    pub request: Received,
    /// What a verifier of `Idempotency-Signature-V2` answers.
    pub expected: Expected,
    /// What a verifier of the previous version answers: it checks
    /// `Idempotency-Signature` (`v1`, seven lines) and reads no other
    /// signature, nor `Idempotency-Source` or `Idempotency-Stale`.
    pub expected_v1: Expected,
}

/// The request as the origin receives it.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    pub method: String,
    pub path_and_query: String,
    /// Name and value pairs in order: a list, so that a header sent twice
    /// is two entries.
    pub headers: Vec<[String; 2]>,
    pub body_base64: String,
}

/// What the verifier answers: the verified fields, or an error category.
#[derive(Debug, Clone, Serialize)]
pub struct Expected {
    pub valid: bool,
    /// `missing-header`, `malformed-header`, `stale` or `bad-signature`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed_at: Option<u64>,
    /// When valid, from a v2 verifier: `Idempotency-Source`, `null` when
    /// absent. A v1 verifier's answer has neither this nor `stale`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Option<String>>,
    /// When valid, from a v2 verifier: whether `Idempotency-Stale: true`
    /// came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale: Option<bool>,
}

impl Expected {
    /// The same answer without what only a v2 verifier reads.
    fn as_v1(&self) -> Expected {
        Expected {
            source: None,
            stale: None,
            ..self.clone()
        }
    }
}

/// What idemgate forwards and signs.
#[derive(Debug, Clone)]
struct Forward {
    method: &'static str,
    path_and_query: String,
    body: Vec<u8>,
    key: String,
    scope: String,
    epoch: u64,
    signed_at: u64,
    secret: &'static str,
    /// The sender's own headers, which idemgate forwards as they came.
    other_headers: Vec<(String, String)>,
    /// `Idempotency-Source`, on a forward that reconciliation made.
    source: Option<&'static str>,
    /// `Idempotency-Stale: true`.
    stale: bool,
}

fn payments_scope() -> String {
    Scope::new("payments", None, None).id().to_string()
}

impl Forward {
    fn genuine() -> Forward {
        Forward {
            method: "POST",
            path_and_query: "/payments".into(),
            body: br#"{"amount":1000,"currency":"eur"}"#.to_vec(),
            key: "order-42".into(),
            scope: payments_scope(),
            epoch: EPOCH,
            signed_at: NOW,
            secret: SECRET,
            other_headers: vec![("Content-Type".into(), "application/json".into())],
            source: None,
            stale: false,
        }
    }

    fn reconciled() -> Forward {
        Forward {
            source: Some("reconciliation"),
            ..Forward::genuine()
        }
    }

    fn stale() -> Forward {
        Forward {
            stale: true,
            ..Forward::genuine()
        }
    }

    /// The request idemgate sends, headers added by the core itself; their
    /// names in mixed case, as no verifier may depend on case.
    fn received(&self) -> Received {
        let key = IdempotencyKey::parse(&self.key, "vector").expect("a valid key");
        let body_sha256 = sha256_hex(&self.body);
        let outbound = OutboundRequest {
            method: self.method.into(),
            url: format!("https://origin.example{}", self.path_and_query),
            headers: self.other_headers.clone(),
            body: self.body.clone(),
            via: None,
        }
        .with_idempotency(&Idempotency {
            key: &key,
            scope: &self.scope,
            epoch: self.epoch,
            path_and_query: &self.path_and_query,
            body_sha256: &body_sha256,
            forward_secret: Some(self.secret),
            unix_seconds: self.signed_at,
            source: self.source,
            stale: self.stale,
        });
        Received {
            method: outbound.method,
            path_and_query: self.path_and_query.clone(),
            headers: outbound
                .headers
                .into_iter()
                .map(|(name, value)| [mixed_case(&name), value])
                .collect(),
            body_base64: base64::engine::general_purpose::STANDARD.encode(&outbound.body),
        }
    }

    fn verified(&self) -> Expected {
        Expected {
            valid: true,
            error: None,
            scope: Some(self.scope.clone()),
            key: Some(self.key.clone()),
            epoch: Some(self.epoch),
            body_sha256: Some(sha256_hex(&self.body)),
            signed_at: Some(self.signed_at),
            source: Some(self.source.map(str::to_string)),
            stale: Some(self.stale),
        }
    }
}

fn mixed_case(name: &str) -> String {
    match name {
        "idempotency-key" => "Idempotency-Key".into(),
        "idempotency-scope" => "idempotency-scope".into(),
        "idempotency-epoch" => "IDEMPOTENCY-EPOCH".into(),
        "idempotency-signature" => "Idempotency-signature".into(),
        "idempotency-signature-v2" => "IDEMPOTENCY-SIGNATURE-V2".into(),
        "idempotency-source" => "Idempotency-Source".into(),
        "idempotency-stale" => "idempotency-Stale".into(),
        other => other.into(),
    }
}

fn rejected(error: &'static str) -> Expected {
    Expected {
        valid: false,
        error: Some(error),
        scope: None,
        key: None,
        epoch: None,
        body_sha256: None,
        signed_at: None,
        source: None,
        stale: None,
    }
}

impl Received {
    fn position(&self, name: &str) -> usize {
        self.headers
            .iter()
            .position(|[header, _]| header.eq_ignore_ascii_case(name))
            .unwrap_or_else(|| panic!("no {name} header"))
    }

    fn value(&self, name: &str) -> String {
        self.headers[self.position(name)][1].clone()
    }

    fn with_header(mut self, name: &str, value: impl Into<String>) -> Received {
        let at = self.position(name);
        self.headers[at][1] = value.into();
        self
    }

    fn without_header(mut self, name: &str) -> Received {
        let at = self.position(name);
        self.headers.remove(at);
        self
    }

    /// A header the forward did not have, as the last header.
    fn with_added_header(mut self, name: &str, value: impl Into<String>) -> Received {
        self.headers
            .push([mixed_case(&name.to_ascii_lowercase()), value.into()]);
        self
    }

    /// The header sent a second time, as the last header.
    fn with_header_twice(mut self, name: &str, second: impl Into<String>) -> Received {
        let first = self.headers[self.position(name)][0].clone();
        self.headers.push([first, second.into()]);
        self
    }

    fn with_body(mut self, body: &[u8]) -> Received {
        self.body_base64 = base64::engine::general_purpose::STANDARD.encode(body);
        self
    }
}

/// A case that a verifier of the previous version answers the same way
/// (without the fields only v2 reads); see [`Vector::v1_answers`].
fn case(
    name: &'static str,
    description: &'static str,
    request: Received,
    expected: Expected,
) -> Vector {
    Vector {
        name,
        description,
        secret: SECRET,
        now: NOW,
        tolerance_seconds: TOLERANCE_SECONDS,
        request,
        expected_v1: expected.as_v1(),
        expected,
    }
}

impl Vector {
    /// What a verifier of the previous version answers instead.
    fn v1_answers(self, expected_v1: Expected) -> Vector {
        Vector {
            expected_v1,
            ..self
        }
    }
}

fn valid(name: &'static str, description: &'static str, forward: Forward) -> Vector {
    case(name, description, forward.received(), forward.verified())
}

fn signed_at(offset: i64) -> Forward {
    Forward {
        signed_at: NOW.checked_add_signed(offset).expect("a Unix time"),
        ..Forward::genuine()
    }
}

fn genuine_with(name: &str, value: &str) -> Received {
    Forward::genuine().received().with_header(name, value)
}

const KEY: &str = "Idempotency-Key";
const SCOPE: &str = "Idempotency-Scope";
const EPOCH_HEADER: &str = "Idempotency-Epoch";
const SIGNATURE: &str = "Idempotency-Signature";
const SIGNATURE_V2: &str = "Idempotency-Signature-V2";
const SOURCE: &str = "Idempotency-Source";
const STALE: &str = "Idempotency-Stale";

fn accepted() -> Vec<Vector> {
    let query = Forward {
        path_and_query: "/payments?currency=eur&note=caf%C3%A9".into(),
        body: "{\"amount\":1000,\"note\":\"café\"}".as_bytes().to_vec(),
        ..Forward::genuine()
    };
    let empty = Forward {
        method: "DELETE",
        path_and_query: "/payments/pay_1".into(),
        body: vec![],
        other_headers: vec![],
        ..Forward::genuine()
    };
    let binary = Forward {
        method: "PUT",
        body: (0..=255u8).rev().collect(),
        other_headers: vec![("Content-Type".into(), "application/octet-stream".into())],
        ..Forward::genuine()
    };
    let longest_key = Forward {
        key: "k".repeat(255),
        ..Forward::genuine()
    };
    let symbols_key = Forward {
        key: "!#$%&'()*+,-./:;<=>?@[]^_`{|}~".into(),
        ..Forward::genuine()
    };
    let largest_exact_epoch = Forward {
        epoch: (1 << 53) - 1,
        ..Forward::genuine()
    };
    let stripe = Forward {
        path_and_query: "/webhooks/stripe".into(),
        body: br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#.to_vec(),
        key: "evt_1".into(),
        scope: Scope::new("stripe", None, None).id().to_string(),
        other_headers: vec![
            ("Content-Type".into(), "application/json".into()),
            // Five hours old: what the sender signed when it first sent.
            (
                "Stripe-Signature".into(),
                format!(
                    "t={},v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd",
                    NOW - 5 * 3_600
                ),
            ),
        ],
        ..Forward::genuine()
    };
    let genuine = Forward::genuine().received();
    let pad = |request: Received, names: &[&str]| {
        names.iter().fold(request, |request, name| {
            let value = format!(" \t{} ", request.value(name));
            request.with_header(name, value)
        })
    };
    let padded = pad(
        genuine,
        &[KEY, SCOPE, EPOCH_HEADER, SIGNATURE, SIGNATURE_V2],
    );
    let reconciled_and_stale = Forward {
        stale: true,
        ..Forward::reconciled()
    };
    let padded_source_and_stale = pad(reconciled_and_stale.received(), &[SOURCE, STALE]);
    let v1_of_another_secret = {
        let other = Forward {
            secret: "whsec_other",
            ..Forward::genuine()
        }
        .received()
        .value(SIGNATURE);
        Forward::genuine().received().with_header(SIGNATURE, other)
    };
    vec![
        valid("genuine", "A forward as idemgate sends it.", Forward::genuine()),
        valid(
            "genuine-with-query",
            "The path and query are signed as the origin receives them, percent-encoding included; the body is UTF-8 with a non-ASCII character.",
            query,
        ),
        valid("empty-body", "A DELETE without a body: the SHA-256 of no bytes.", empty),
        valid(
            "binary-body",
            "A body that is not UTF-8 (bytes 255 down to 0): it is hashed as bytes, never decoded.",
            binary,
        ),
        valid(
            "signed-at-tolerance-past",
            "Signed exactly 300 s before now: within the tolerance.",
            signed_at(-300),
        ),
        valid(
            "signed-at-tolerance-future",
            "Signed exactly 300 s after now (the verifier's clock is behind): within the tolerance.",
            signed_at(300),
        ),
        Vector {
            tolerance_seconds: 3_600,
            ..valid(
                "wider-tolerance",
                "Signed 3000 s ago, with the tolerance set to 3600 s.",
                signed_at(-3_000),
            )
        },
        valid(
            "longest-key",
            "A key of 255 characters, the longest idemgate forwards.",
            longest_key,
        ),
        valid(
            "key-of-symbols",
            "A key of every visible ASCII symbol but '\"' and '\\'.",
            symbols_key,
        ),
        valid(
            "largest-exact-epoch",
            "Epoch 2^53 - 1: exact in JSON and in JavaScript numbers.",
            largest_exact_epoch,
        ),
        case(
            "whitespace-around-values",
            "Spaces and tabs around each value (HTTP's optional whitespace) are not part of it.",
            padded,
            Forward::genuine().verified(),
        ),
        valid(
            "source-reconciliation",
            "A forward that idemgate's reconciliation made: Idempotency-Source: reconciliation, covered by v2 only.",
            Forward::reconciled(),
        ),
        valid(
            "stale-true",
            "A forward older than one already delivered for its entity: Idempotency-Stale: true, covered by v2 only.",
            Forward::stale(),
        ),
        valid(
            "source-reconciliation-and-stale-true",
            "Both: a reconciled forward, older than one already delivered.",
            reconciled_and_stale.clone(),
        ),
        case(
            "whitespace-around-source-and-stale",
            "Spaces and tabs around Idempotency-Source and Idempotency-Stale are not part of their values either.",
            padded_source_and_stale,
            reconciled_and_stale.verified(),
        ),
        case(
            "signature-v1-of-another-secret",
            "Idempotency-Signature signed with another secret, Idempotency-Signature-V2 genuine: a v2 verifier requires v1 present, well-formed and at v2's t, but checks v2's HMAC only, which covers all v1 does; a v1 verifier refuses it.",
            v1_of_another_secret,
            Forward::genuine().verified(),
        )
        .v1_answers(rejected("bad-signature")),
        valid(
            "async-retry-with-old-sender-signature",
            "An async route's delivery sent again hours later: idemgate's signature is fresh, the sender's Stripe-Signature (forwarded as it came) is five hours old. Verify idemgate's signature, not the sender's.",
            stripe,
        ),
    ]
}

mod refused;

use refused::{refused_as_malformed, refused_as_missing, refused_as_not_signed, refused_as_stale};

/// Every case, in the order of the file.
pub fn forward_vectors() -> Vec<Vector> {
    [
        accepted(),
        refused_as_stale(),
        refused_as_not_signed(),
        refused_as_missing(),
        refused_as_malformed(),
    ]
    .concat()
}

/// The file's exact text.
pub fn forward_vectors_json() -> String {
    let mut json = serde_json::to_string_pretty(&forward_vectors()).expect("vectors serialize");
    json.push('\n');
    json
}

fn main() {
    print!("{}", forward_vectors_json());
}
