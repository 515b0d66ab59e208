//! Property tests over the pure core. The generators make mostly valid
//! inputs with targeted corruptions, so that each property reaches the
//! logic it names rather than the first check; `admission_shares` measures
//! how many generated inputs get past parsing and validation.
//!
//! 2,000 cases per property by default; `PROPTEST_CASES=100000 cargo test
//! -p idemgate-core --test properties` runs longer.

use std::collections::HashMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use idemgate_core::canonical::body_sha256;
use idemgate_core::config::Config;
use idemgate_core::json::{self, Json, PointerLookup};
use idemgate_core::key::{derive_key, json_pointers, IdempotencyKey, KeyInput, KeySource};
use idemgate_core::pipeline::{admit, authenticate, Inbound};
use idemgate_core::problem::Problem;
use idemgate_core::routes::normalize_path;
use idemgate_core::signature::{Message, SchemeSettings, SignatureScheme, SignedRequest, Verdict};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

fn cases() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(2_000);
    ProptestConfig::with_cases(cases)
}

/// A JSON number as a decimal value (sign, digits, exponent), so that it
/// can be written in many spellings of the same value.
#[derive(Debug, Clone, PartialEq)]
struct Number {
    negative: bool,
    /// No leading zero, at least one digit.
    digits: String,
    exponent: i32,
}

impl Number {
    /// A spelling of this value: `style` picks where the point goes and how
    /// the exponent is written; every spelling has the same value.
    fn spell(&self, style: u8) -> String {
        let sign = if self.negative { "-" } else { "" };
        let digits = &self.digits;
        match style % 5 {
            0 => format!("{sign}{digits}e{}", self.exponent),
            1 => format!("{sign}{digits}0E{}", self.exponent - 1),
            2 => format!(
                "{sign}{}.{}0e{:+}",
                &digits[..1],
                &digits[1..],
                self.exponent + digits.len() as i32 - 1
            ),
            3 if self.exponent >= 0 && self.exponent < 30 => {
                format!("{sign}{digits}{}.000", "0".repeat(self.exponent as usize))
            }
            _ => format!(
                "{sign}0.{}00e{}",
                digits,
                self.exponent + digits.len() as i32
            ),
        }
    }
}

#[derive(Debug, Clone)]
enum Value {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

fn number() -> impl Strategy<Value = Number> {
    (any::<bool>(), "[1-9][0-9]{0,24}", -30i32..30).prop_map(|(negative, digits, exponent)| {
        Number {
            negative,
            digits,
            exponent,
        }
    })
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        "[ -~\u{80}-\u{2FF}\u{1F600}\u{FF61}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 256, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z\u{e9}\u{1F600}\u{FF61}]{0,6}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Writes `value` as JSON text: `seed` picks member order, whitespace and
/// number spellings, none of which change what it means.
fn render(value: &Value, seed: u64, out: &mut String) {
    let space =
        |out: &mut String, n: u64| out.push_str(["", " ", "\n\t", "  \r\n"][(n % 4) as usize]);
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(flag) => out.push_str(if *flag { "true" } else { "false" }),
        Value::Number(number) => out.push_str(&number.spell((seed % 7) as u8)),
        Value::String(text) => out.push_str(&escape(text, seed)),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                space(out, seed >> index);
                render(item, seed.rotate_left(7) ^ index as u64, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            let mut order: Vec<usize> = (0..members.len()).collect();
            order.sort_by_key(|index| (seed.rotate_left(*index as u32 * 5) ^ *index as u64) % 97);
            for (position, index) in order.into_iter().enumerate() {
                let (name, item) = &members[index];
                if position > 0 {
                    out.push(',');
                }
                space(out, seed >> position);
                out.push_str(&escape(name, seed >> 3));
                out.push(':');
                render(item, seed.rotate_left(11) ^ index as u64, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string literal; odd seeds escape every character as `\uXXXX`.
fn escape(text: &str, seed: u64) -> String {
    if seed % 2 == 1 {
        let mut out = String::from("\"");
        for unit in text.encode_utf16() {
            out.push_str(&format!("\\u{unit:04x}"));
        }
        out.push('"');
        out
    } else {
        serde_json::to_string(text).unwrap()
    }
}

fn text_of(value: &Value, seed: u64) -> String {
    let mut out = String::new();
    render(value, seed, &mut out);
    out
}

fn canonical(text: &str) -> Vec<u8> {
    json::parse(text.as_bytes()).unwrap().canonical()
}

fn is_valid_key(text: &str) -> bool {
    let trimmed = text.trim();
    (1..=255).contains(&trimmed.chars().count())
        && trimmed
            .chars()
            .all(|c| ('\x21'..='\x7e').contains(&c) && c != '"' && c != '\\')
}

/// Mostly valid keys, some with one bad character, some too long.
fn near_key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[!#-\\[\\]-~]{1,40}",
        2 => ("[!#-\\[\\]-~]{0,20}", "[ \"\\\\\t\u{e9}\0]", "[!#-\\[\\]-~]{0,20}").prop_map(|(a, bad, b)| format!("{a}{bad}{b}")),
        1 => "[a-z]{250,260}",
        1 => "[ \t]{0,2}[!#-~]{1,8}[ \t]{0,2}",
    ]
}

fn scheme(name: &str, secret: &str) -> SignatureScheme {
    // Standard Webhooks keys are `whsec_` and base64.
    let secret = match name {
        "standard-webhooks" => format!("whsec_{}", STANDARD.encode(secret)),
        _ => secret.to_string(),
    };
    SignatureScheme::configure(
        name,
        &SchemeSettings {
            secret: Some(secret),
            url: Some("https://example.com/hooks/square".into()),
            ..SchemeSettings::default()
        },
    )
    .unwrap()
}

/// A genuinely signed delivery for `name`: its headers, signed by the
/// scheme's own signer (each scheme's unit tests check it against the
/// sender's published vectors or official library).
fn signed_headers(name: &str, secret: &str, body: &[u8], t: u64) -> Vec<(String, String)> {
    let mut message = Message {
        headers: Vec::new(),
        body: body.to_vec(),
    };
    scheme(name, secret).sign(&mut message, t);
    message.headers
}

fn verify(
    scheme: &SignatureScheme,
    headers: &[(String, String)],
    body: &[u8],
    now: u64,
) -> Result<(), Problem> {
    match scheme.verify(
        &SignedRequest {
            headers,
            body,
            query: None,
        },
        now,
        300,
    )? {
        Verdict::Verified => Ok(()),
        Verdict::PublicKey(_) => Err(Problem::BadSignature {
            reason: "a public-key signature: no HMAC matched".into(),
        }),
    }
}

const SIGNED: &[&str] = &[
    "stripe",
    "standard-webhooks",
    "github",
    "shopify",
    "paddle",
    "square",
    "checkout",
    "razorpay",
];

/// The configuration of `vars`, or its first broken route's problem.
fn config(vars: &[(&str, &str)]) -> Result<Config, Problem> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let config = Config::from_lookup(|name| map.get(name).cloned())?;
    match config.broken.first() {
        Some(broken) => Err(broken.problem.clone()),
        None => Ok(config),
    }
}

/// A delivery as the pipeline sees it, mostly valid.
#[derive(Debug, Clone)]
struct Delivery {
    path: String,
    query: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

fn delivery() -> impl Strategy<Value = Delivery> {
    let path = prop_oneof![
        8 => "(/([a-z0-9.~_-]|%7E|%2[eE]|%41){1,8}){1,4}/?",
        1 => "/[ -~]{0,20}",
    ];
    let content_type = prop_oneof![
        8 => Just("application/json".to_string()),
        1 => Just("text/plain".to_string()),
        1 => "[ -~]{0,20}",
    ];
    let key = prop_oneof![8 => near_key().prop_map(Some), 1 => Just(None)];
    let body = prop_oneof![
        8 => (value(), any::<u64>()).prop_map(|(value, seed)| text_of(&value, seed).into_bytes()),
        1 => (value(), any::<u64>(), any::<usize>(), any::<u8>()).prop_map(|(value, seed, at, byte)| {
            let mut text = text_of(&value, seed).into_bytes();
            let at = at % (text.len() + 1);
            text.insert(at, byte);
            text
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ];
    (
        path,
        prop::option::of("[a-z]=[0-9]{1,3}"),
        content_type,
        key,
        body,
    )
        .prop_map(|(path, query, content_type, key, body)| {
            let mut headers = vec![("content-type".to_string(), content_type)];
            if let Some(key) = key {
                headers.push(("idempotency-key".to_string(), key));
            }
            Delivery {
                path,
                query,
                headers,
                body,
            }
        })
}

fn admit_delivery(
    config: &Config,
    delivery: &Delivery,
) -> Result<idemgate_core::pipeline::Admitted, Problem> {
    let normalized = normalize_path(&delivery.path)?;
    let route = config.route_for(&normalized)?;
    let inbound = Inbound {
        method: "POST",
        path: &delivery.path,
        normalized_path: &normalized,
        query: delivery.query.as_deref(),
        headers: &delivery.headers,
        body: &delivery.body,
        now: 0,
    };
    admit(&authenticate(route, &inbound)?.done()?)
}

fn pipeline_config() -> Config {
    config(&[("ORIGIN_URL", "http://origin"), ("MAX_BODY_BYTES", "4096")]).unwrap()
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn reading_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = json::parse(&bytes);
    }

    #[test]
    fn a_corrupted_document_is_refused_or_read_consistently(
        value in value(),
        seed in any::<u64>(),
        at in any::<usize>(),
        byte in any::<u8>(),
    ) {
        let mut text = text_of(&value, seed).into_bytes();
        let at = at % text.len();
        text[at] = byte;
        // Whatever a corruption yields, the reader agrees with serde_json
        // on whether it is JSON (serde_json keeps duplicate names, and
        // refuses numbers a double cannot hold; both are refused or read
        // differently here on purpose).
        let ours = json::parse(&text);
        let theirs = serde_json::from_slice::<serde_json::Value>(&text);
        if let (Err(error), Ok(_)) = (&ours, &theirs) {
            prop_assert!(
                error.message.starts_with("duplicate member name"),
                "refused what serde_json reads: {error} in {:?}",
                String::from_utf8_lossy(&text)
            );
        }
        if let (Ok(_), Err(error)) = (&ours, &theirs) {
            prop_assert!(error.to_string().contains("number out of range"), "{error}");
        }
    }

    #[test]
    fn the_one_pass_reads_every_document_as_the_tree_does(
        value in value(),
        seed in any::<u64>(),
        corrupt in any::<bool>(),
        at in any::<usize>(),
        byte in any::<u8>(),
    ) {
        let mut text = text_of(&value, seed).into_bytes();
        if corrupt {
            let at = at % text.len();
            text[at] = byte;
        }
        let pointers = ["", "/a", "/a/0", "/b", "/0", "/a/b/c", "/id", "/1/a"];
        match (json::parse(&text), json::one_pass::read(&text, &pointers)) {
            (Ok(tree), Ok(pass)) => {
                prop_assert_eq!(pass.canonical(), &tree.canonical()[..]);
                for pointer in pointers {
                    prop_assert_eq!(pass.lookup(pointer), tree.lookup(pointer), "{}", pointer);
                }
            }
            (Err(tree), Err(pass)) => prop_assert_eq!(pass, tree),
            (tree, pass) => prop_assert!(false, "tree {:?}, one pass {:?}", tree.err(), pass.err()),
        }
    }

    #[test]
    fn canonical_form_ignores_layout_order_and_number_spelling(
        value in value(),
        first in any::<u64>(),
        second in any::<u64>(),
    ) {
        let one = canonical(&text_of(&value, first));
        let other = canonical(&text_of(&value, second));
        prop_assert_eq!(&one, &other);
        // A fixed point: the canonical form reads back to itself.
        prop_assert_eq!(canonical(std::str::from_utf8(&one).unwrap()), one.clone());
    }

    #[test]
    fn numbers_that_differ_in_value_never_share_a_canonical_form(
        a in number(),
        digit in 0usize..25,
        bump in 1u8..9,
        style in any::<u8>(),
    ) {
        let mut b = a.clone();
        let at = digit % b.digits.len();
        let mut digits = b.digits.clone().into_bytes();
        digits[at] = b'0' + (digits[at] - b'0' + bump) % 10;
        if digits[0] == b'0' {
            digits[0] = b'1';
        }
        b.digits = String::from_utf8(digits).unwrap();
        let trimmed = |n: &Number| n.digits.trim_end_matches('0').to_string();
        prop_assume!(trimmed(&a) != trimmed(&b));
        prop_assert_ne!(canonical(&a.spell(style)), canonical(&b.spell(style)));
        prop_assert_eq!(canonical(&a.spell(style)), canonical(&a.spell(style.wrapping_add(1))));
    }

    #[test]
    fn key_validation_is_exactly_the_spec_rule(text in near_key()) {
        let parsed = IdempotencyKey::parse(&text, "property");
        prop_assert_eq!(parsed.is_ok(), is_valid_key(&text), "{:?}", text);
    }

    #[test]
    fn derived_keys_are_always_valid(key in near_key(), id in near_key(), value in value(), seed in any::<u64>()) {
        let sources = KeySource::parse_list("header:Idempotency-Key,json:/id,json:/a/0+json:/b,body-sha256").unwrap();
        let body = match value {
            Value::Object(mut members) => {
                members.retain(|(name, _)| name != "id");
                members.push(("id".into(), Value::String(id)));
                text_of(&Value::Object(members), seed)
            }
            other => text_of(&other, seed),
        };
        let parsed = json::one_pass::read(body.as_bytes(), &json_pointers(&sources)).unwrap();
        let hash = body_sha256(Some(parsed.canonical()), body.as_bytes());
        let headers = if seed % 3 == 0 { vec![("idempotency-key".to_string(), key)] } else { vec![] };
        let input = KeyInput {
            headers: &headers,
            content_type: Some("application/json"),
            json: Some(&parsed),
            form: None,
            body_sha256: &hash,
            scheme_key: None,
        };
        if let Ok(key) = derive_key(&sources, &input) {
            prop_assert!(is_valid_key(key.as_str()));
        }
    }

    #[test]
    fn a_signature_verifies_its_own_body_only(
        which in 0..SIGNED.len(),
        secret in "[a-zA-Z0-9_]{1,40}",
        value in value(),
        seed in any::<u64>(),
        flip in any::<usize>(),
        t in 1_000_000u64..4_000_000_000,
    ) {
        let name = SIGNED[which];
        let signer = scheme(name, &secret);
        let body = text_of(&value, seed).into_bytes();
        let headers = signed_headers(name, &secret, &body, t);
        prop_assert!(verify(&signer, &headers, &body, t).is_ok(), "{name}");
        let mut tampered = body.clone();
        let at = flip % tampered.len();
        tampered[at] ^= 1 << (seed % 8);
        prop_assert!(verify(&signer, &headers, &tampered, t).is_err(), "{name}: a flipped bit passed");
        let mut forged = headers.clone();
        let signature = &mut forged.last_mut().unwrap().1;
        let last = signature.pop().unwrap();
        signature.push(if last == 'a' { 'b' } else { 'a' });
        prop_assert!(verify(&signer, &forged, &body, t).is_err(), "{name}: a forged signature passed");
        let wrong = scheme(name, &format!("{secret}x"));
        prop_assert!(verify(&wrong, &headers, &body, t).is_err(), "{name}: a wrong secret passed");
    }

    #[test]
    fn signature_checks_never_panic(
        headers in prop::collection::vec(("[a-z-]{1,30}", "[ -~]{0,80}"), 0..6),
        body in prop::collection::vec(any::<u8>(), 0..256),
        now in any::<u64>(),
    ) {
        for name in SIGNED {
            let _ = verify(&scheme(name, "s"), &headers, &body, now);
        }
        let adyen = scheme("adyen", &"00".repeat(32));
        let _ = verify(&adyen, &headers, &body, now);
    }

    #[test]
    fn the_pipeline_admits_valid_deliveries_and_scopes_them(delivery in delivery()) {
        let config = pipeline_config();
        match admit_delivery(&config, &delivery) {
            Ok(admitted) => {
                prop_assert!(is_valid_key(admitted.delivery.identity.key.as_str()));
                prop_assert_eq!(admitted.delivery.identity.object.len(), 64);
                prop_assert_eq!(admitted.delivery.identity.scope.len(), 64);
                let query = delivery.query.as_deref().map(|query| format!("?{query}")).unwrap_or_default();
                let expected = format!("{}{query}", delivery.path);
                prop_assert!(admitted.delivery.request.url.ends_with(&expected));
                // The same delivery with another query is another payload.
                let mut other = delivery.clone();
                other.query = Some(format!("{}x", delivery.query.clone().unwrap_or_default()));
                prop_assert_ne!(admit_delivery(&config, &other).unwrap().delivery.fingerprint, admitted.delivery.fingerprint);
            }
            Err(problem) => prop_assert!((400..500).contains(&problem.status()), "{:?}", problem),
        }
    }

    #[test]
    fn path_normalisation_is_idempotent(path in "(/[a-zA-Z0-9%.~_-]{0,6}){0,5}/?") {
        if let Ok(normal) = normalize_path(&path) {
            prop_assert_eq!(normalize_path(&normal).unwrap(), normal.clone());
            prop_assert!(normal.starts_with('/'));
            prop_assert!(!normal.contains("//"));
            prop_assert!(normal == "/" || !normal.ends_with('/'));
        }
    }

    #[test]
    fn configured_numbers_never_overflow(
        which in 0..6usize,
        number in prop_oneof![any::<u64>(), 0u64..1_000_000_000, Just(u64::MAX), Just(1u64 << 31)],
        now in 0u64..253_402_300_800_000, // up to the year 9999, in ms
    ) {
        let names = ["WAIT_MS", "ORIGIN_TIMEOUT_MS", "LEASE_MS", "RETENTION_SECONDS", "MAX_BODY_BYTES", "MAX_WAITERS"];
        let text = number.to_string();
        match config(&[("ORIGIN_URL", "http://o"), (names[which], &text)]) {
            Ok(config) => {
                let route = &config.routes[0];
                prop_assert!(route.lease_ms > route.origin_timeout_ms);
                prop_assert!(route.retention_seconds * 1_000 > route.lease_ms);
                prop_assert!(route.origin_timeout_ms <= 300_000, "a timer must fit in 2^31 ms");
                prop_assert!(now.checked_add(route.lease_ms).is_some());
                prop_assert!(now.checked_add(route.retention_seconds * 1_000).is_some());
                prop_assert!(now.checked_add(route.wait_ms).is_some());
                prop_assert!(now.checked_mul(1_000).is_some(), "epochs in microseconds");
            }
            Err(Problem::Misconfigured { variable, .. }) => prop_assert_eq!(variable, names[which]),
            Err(other) => prop_assert!(false, "{:?}", other),
        }
    }
}

/// How many generated inputs reach the logic a property names.
#[test]
fn admission_shares() {
    let mut runner = TestRunner::deterministic();
    let samples = 2_000;
    let share = |runner: &mut TestRunner, f: &dyn Fn(&mut TestRunner) -> bool| {
        (0..samples).filter(|_| f(runner)).count() as f64 / samples as f64
    };
    let keys = share(&mut runner, &|runner| {
        let key = near_key().new_tree(runner).unwrap().current();
        IdempotencyKey::parse(&key, "share").is_ok()
    });
    let config = pipeline_config();
    let admitted = share(&mut runner, &|runner| {
        let delivery = delivery().new_tree(runner).unwrap().current();
        admit_delivery(&config, &delivery).is_ok()
    });
    let documents = share(&mut runner, &|runner| {
        let value = value().new_tree(runner).unwrap().current();
        json::parse(text_of(&value, 7).as_bytes()).is_ok()
    });
    let deep = share(&mut runner, &|runner| {
        let value = value().new_tree(runner).unwrap().current();
        fn depth(value: &Json) -> usize {
            match value {
                Json::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
                Json::Object(members) => {
                    1 + members.iter().map(|(_, v)| depth(v)).max().unwrap_or(0)
                }
                _ => 0,
            }
        }
        depth(&json::parse(text_of(&value, 7).as_bytes()).unwrap()) >= 3
    });
    println!(
        "admission shares of {samples}: valid keys {keys:.2}, admitted deliveries {admitted:.2}, \
         documents that parse {documents:.2}, documents 3 or more deep {deep:.2}"
    );
    assert!(keys > 0.5, "keys {keys}");
    assert!(admitted > 0.4, "admitted {admitted}");
    assert!(documents > 0.99, "documents {documents}");
    assert!(deep > 0.2, "deep {deep}");
}
