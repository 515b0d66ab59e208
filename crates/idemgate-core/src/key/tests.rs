use super::*;
use crate::json;

fn sources(list: &str) -> Vec<KeySource> {
    KeySource::parse_list(list).unwrap()
}

const BODY_SHA256: &str = "3a6eb0790f39ac87c94f3856b2dd2c5d110e6811602261a9a923d3bb23adc8b7";

fn derive(
    list: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Result<IdempotencyKey, Problem> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    let sources = sources(list);
    let pointers = json_pointers(&sources);
    let json = body.map(|text| json::one_pass::read(text.as_bytes(), &pointers).unwrap());
    derive_key(
        &sources,
        &KeyInput {
            headers: &headers,
            content_type: Some(if json.is_some() {
                "application/json"
            } else {
                "text/plain"
            }),
            json: json.as_ref().map(|json| json as &dyn PointerLookup),
            form: None,
            body_sha256: BODY_SHA256,
            scheme_key: None,
        },
    )
}

const WEBHOOK: &str = "header:Idempotency-Key,header:webhook-id,json:/transaction_id,json:/id";

#[test]
fn first_present_source_wins() {
    let body = Some(r#"{"id":"evt_1","transaction_id":"tx_9"}"#);
    assert_eq!(derive(WEBHOOK, &[], body).unwrap().as_str(), "tx_9");
    assert_eq!(
        derive(WEBHOOK, &[("webhook-id", "msg_2")], body)
            .unwrap()
            .as_str(),
        "msg_2"
    );
    assert_eq!(
        derive(
            WEBHOOK,
            &[("idempotency-key", "k-1"), ("webhook-id", "msg_2")],
            body
        )
        .unwrap()
        .as_str(),
        "k-1"
    );
    assert_eq!(
        derive(WEBHOOK, &[], Some(r#"{"id":"evt_1"}"#))
            .unwrap()
            .as_str(),
        "evt_1"
    );
}

#[test]
fn header_names_match_case_insensitively_and_quotes_are_removed() {
    let key = derive(
        "header:Idempotency-Key",
        &[("idempotency-key", " \"abc-1\" ")],
        None,
    );
    assert_eq!(key.unwrap().as_str(), "abc-1");
}

#[test]
fn nested_pointers_and_numbers() {
    let body = Some(
        r#"{"data":{"object":{"id":"pi_3"}},"n":12345678901234,"big":90071992547409930001,"f":1.50}"#,
    );
    assert_eq!(
        derive("json:/data/object/id", &[], body).unwrap().as_str(),
        "pi_3"
    );
    assert_eq!(
        derive("json:/n", &[], body).unwrap().as_str(),
        "12345678901234"
    );
    assert_eq!(
        derive("json:/big", &[], body).unwrap().as_str(),
        "90071992547409930001"
    );
    assert_eq!(derive("json:/f", &[], body).unwrap().as_str(), "1.5");
}

#[test]
fn composite_sources_join_their_parts_and_need_every_one() {
    let body = Some(r#"{"pspReference":"8535","eventCode":"AUTHORISATION","id":"x"}"#);
    assert_eq!(
        derive("json:/pspReference+json:/missing,json:/id", &[], body)
            .unwrap()
            .as_str(),
        "x",
        "a source yields only when every part does"
    );
    assert_eq!(
        derive("header:x-shop+json:/id", &[("x-shop", "s1")], body)
            .unwrap()
            .as_str(),
        "s1:x"
    );
    assert_eq!(
        derive(
            "json:/pspReference+header:x-bad",
            &[("x-bad", "two words")],
            body
        )
        .unwrap_err()
        .name(),
        "invalid-key"
    );
    assert_eq!(sources("json:/a+json:/b")[0].label(), "json:/a+json:/b");
}

#[test]
fn two_different_lists_of_parts_never_make_one_key() {
    let key = |body: &str| {
        derive("json:/a+json:/b", &[], Some(body))
            .unwrap()
            .as_str()
            .to_string()
    };
    assert_ne!(
        key(r#"{"a":"x:y","b":"z"}"#),
        key(r#"{"a":"x","b":"y:z"}"#),
        "x:y + z is not x + y:z"
    );
    assert_eq!(key(r#"{"a":"x:y","b":"z"}"#), "x%3Ay:z");
    assert_eq!(key(r#"{"a":"x","b":"y:z"}"#), "x:y%3Az");
    assert_ne!(
        key(r#"{"a":"x%3Ay","b":"z"}"#),
        key(r#"{"a":"x:y","b":"z"}"#),
        "an escape in a part is escaped in turn"
    );
    // A single part is the key as it is.
    assert_eq!(
        derive("json:/a", &[], Some(r#"{"a":"x:y"}"#))
            .unwrap()
            .as_str(),
        "x:y"
    );
}

#[test]
fn form_fields_and_scheme_keys_are_sources() {
    let form = crate::form::pairs("MessageSid=SM1&From=%2B1555&Dup=1&Dup=2");
    let input = derive_key_owned;
    assert_eq!(
        input(Some(&form), None)("form:MessageSid")
            .unwrap()
            .as_str(),
        "SM1"
    );
    assert_eq!(
        input(Some(&form), None)("form:Missing,form:From")
            .unwrap()
            .as_str(),
        "+1555"
    );
    assert_eq!(
        input(Some(&form), None)("form:Dup").unwrap_err().name(),
        "invalid-key",
        "which of two values was meant cannot be known"
    );
    assert_eq!(
        input(None, None)("form:MessageSid").unwrap_err().status(),
        415
    );
    assert_eq!(
        input(None, Some("psp1:AUTHORISATION:true"))("scheme-key")
            .unwrap()
            .as_str(),
        "psp1:AUTHORISATION:true"
    );
    assert_eq!(
        input(None, None)("scheme-key,body-sha256")
            .unwrap()
            .as_str(),
        BODY_SHA256
    );
}

/// `derive` with a form and a scheme key, by source list.
fn derive_key_owned<'a>(
    form: Option<&'a [(String, String)]>,
    scheme_key: Option<&'a str>,
) -> impl Fn(&str) -> Result<IdempotencyKey, Problem> + 'a {
    move |list| {
        derive_key(
            &sources(list),
            &KeyInput {
                headers: &[],
                content_type: Some("application/x-www-form-urlencoded"),
                json: None,
                form,
                body_sha256: BODY_SHA256,
                scheme_key,
            },
        )
    }
}

#[test]
fn null_or_absent_pointer_falls_through() {
    let body = Some(r#"{"transaction_id":null,"id":"evt_7"}"#);
    assert_eq!(derive(WEBHOOK, &[], body).unwrap().as_str(), "evt_7");
}

#[test]
fn body_sha256_uses_the_canonical_body_hash() {
    assert_eq!(
        derive("body-sha256", &[], None).unwrap().as_str(),
        BODY_SHA256
    );
}

#[test]
fn no_source_is_missing_key_naming_what_was_tried() {
    let Problem::MissingKey { tried } = derive(WEBHOOK, &[], Some("{}")).unwrap_err() else {
        panic!()
    };
    assert_eq!(
        tried,
        "header:idempotency-key, header:webhook-id, json:/transaction_id, json:/id"
    );
}

#[test]
fn json_source_on_a_non_json_body_is_unsupported_media_type() {
    assert_eq!(derive(WEBHOOK, &[], None).unwrap_err().status(), 415);
}

#[test]
fn objects_and_booleans_are_not_keys() {
    for body in [r#"{"id":{"a":1}}"#, r#"{"id":true}"#, r#"{"id":[1]}"#] {
        assert_eq!(
            derive("json:/id", &[], Some(body)).unwrap_err().name(),
            "invalid-key"
        );
    }
}

#[test]
fn validity_rules() {
    let ok = |raw: &str| IdempotencyKey::parse(raw, "test").is_ok();
    assert!(ok("a"));
    assert!(ok(&"x".repeat(255)));
    assert!(ok("  padded\t"));
    assert!(ok("!#$%&'()*+,-./0123456789:;<=>?@[]^_`{|}~"));
    assert!(!ok(""));
    assert!(!ok("   "));
    assert!(!ok(&"x".repeat(256)));
    assert!(!ok("has space"));
    assert!(!ok("tab\tinside"));
    assert!(!ok("quote\"d"));
    assert!(!ok("back\\slash"));
    assert!(!ok("caf\u{e9}"));
    assert!(!ok("nul\0"));
    assert!(
        !ok("a, b"),
        "two Idempotency-Key headers arrive joined by ', '"
    );
}

#[test]
fn structured_field_form() {
    let key = IdempotencyKey::parse("k-1", "test").unwrap();
    assert_eq!(key.to_structured_field(), "\"k-1\"");
}

#[test]
fn source_parsing() {
    assert_eq!(
        sources("header:Idempotency-Key, json:/a/b ,body-sha256"),
        vec![
            KeySource::header("idempotency-key"),
            KeySource {
                parts: vec![KeyPart::JsonPointer("/a/b".into())]
            },
            KeySource {
                parts: vec![KeyPart::BodySha256]
            },
        ]
    );
    assert_eq!(
        sources("form:MessageSid,scheme-key")
            .iter()
            .map(KeySource::label)
            .collect::<Vec<_>>(),
        ["form:MessageSid", "scheme-key"]
    );
    for bad in [
        "",
        "header:",
        "header:a b",
        "json:id",
        "query:x",
        "header:a,,json:/b",
        "json:/a+",
        "+json:/a",
        "form:",
    ] {
        assert!(KeySource::parse_list(bad).is_err(), "{bad}");
    }
}

#[test]
fn scopes_separate_routes_paths_and_tenants() {
    let key = IdempotencyKey::parse("k", "test").unwrap();
    let name = |route, path, tenant| Scope::new(route, path, tenant).object_name(&key);
    let base = name("default", Some("/pay"), None);
    assert_ne!(base, name("default", Some("/refund"), None));
    assert_ne!(base, name("other", Some("/pay"), None));
    assert_ne!(base, name("default", None, None));
    let alice = tenant_sha256("Bearer a");
    let bob = tenant_sha256("Bearer b");
    for path in [Some("/pay"), None] {
        assert_ne!(
            name("default", path, Some(&alice)),
            name("default", path, Some(&bob))
        );
        assert_ne!(
            name("default", path, Some(&alice)),
            name("default", path, None)
        );
    }
    assert_eq!(base.len(), 64);
    assert_eq!(Scope::new("default", None, None).id().len(), 64);
    // Length prefixes: no field can imitate another's encoding.
    assert_ne!(
        Scope::new("a|1:b", None, None).id(),
        Scope::new("a", Some("b"), None).id()
    );
}
