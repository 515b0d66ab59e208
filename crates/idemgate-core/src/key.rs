//! Idempotency keys: where they come from, what a valid one is, and which
//! Durable Object a key lives in (SPEC §3).

use serde_json::Value;

use crate::canonical::{sha256_hex, Fingerprint};
use crate::config::is_header_name;
use crate::headers;
use crate::problem::Problem;

/// One entry of `KEY_SOURCES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `header:NAME`; the name is kept lowercase.
    Header(String),
    /// `json:POINTER`, an RFC 6901 pointer into the JSON body.
    JsonPointer(String),
    /// `body-sha256`: the fingerprint itself is the key.
    BodySha256,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScope {
    /// Keys are per request path (query excluded).
    Path,
    /// Keys are shared across paths.
    Global,
}

/// A key that passed validation: 1 to 255 visible ASCII characters, no `"` or `\`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

pub const MAX_KEY_LEN: usize = 255;

impl KeySource {
    pub fn parse(text: &str) -> Result<KeySource, String> {
        let text = text.trim();
        if text == "body-sha256" {
            return Ok(KeySource::BodySha256);
        }
        if let Some(name) = text.strip_prefix("header:") {
            return if is_header_name(name) {
                Ok(KeySource::Header(name.to_ascii_lowercase()))
            } else {
                Err(format!("{text:?}: {name:?} is not a header name"))
            };
        }
        if let Some(pointer) = text.strip_prefix("json:") {
            return if pointer.starts_with('/') {
                Ok(KeySource::JsonPointer(pointer.to_string()))
            } else {
                Err(format!(
                    "{text:?}: a JSON pointer starts with '/', e.g. json:/id"
                ))
            };
        }
        Err(format!(
            "{text:?} is not header:NAME, json:/POINTER or body-sha256"
        ))
    }

    /// A comma-separated, ordered, non-empty list.
    pub fn parse_list(text: &str) -> Result<Vec<KeySource>, String> {
        let sources = text
            .split(',')
            .map(KeySource::parse)
            .collect::<Result<Vec<_>, _>>()?;
        if sources.is_empty() {
            return Err("lists no source".into());
        }
        Ok(sources)
    }

    pub fn label(&self) -> String {
        match self {
            KeySource::Header(name) => format!("header:{name}"),
            KeySource::JsonPointer(pointer) => format!("json:{pointer}"),
            KeySource::BodySha256 => "body-sha256".into(),
        }
    }
}

impl IdempotencyKey {
    /// Validates a raw value after trimming surrounding whitespace.
    pub fn parse(raw: &str, source: &KeySource) -> Result<IdempotencyKey, Problem> {
        let invalid = |reason: &str| Problem::InvalidKey {
            source: source.label(),
            reason: reason.to_string(),
        };
        let key = raw.trim();
        if key.is_empty() {
            return Err(invalid("the key is empty"));
        }
        if key.chars().count() > MAX_KEY_LEN {
            return Err(invalid("the key is longer than 255 characters"));
        }
        if let Some(bad) = key
            .chars()
            .find(|&c| !matches!(c, '\x21'..='\x7e') || c == '"' || c == '\\')
        {
            return Err(invalid(&format!(
                "the key may hold only visible ASCII other than '\"' and '\\'; found {bad:?}"
            )));
        }
        Ok(IdempotencyKey(key.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The RFC 8941 string form the IETF draft forwards: `"<key>"`. Valid
    /// keys contain neither `"` nor `\`, so no escaping is needed.
    pub fn to_structured_field(&self) -> String {
        format!("\"{}\"", self.0)
    }
}

/// What key derivation may look at.
pub struct KeyInput<'a> {
    pub headers: &'a [(String, String)],
    pub content_type: Option<&'a str>,
    /// The parsed body, when the body is JSON.
    pub json: Option<&'a Value>,
    pub fingerprint: &'a Fingerprint,
}

/// The first source in `sources` that yields a value wins (SPEC §3).
pub fn derive_key(sources: &[KeySource], input: &KeyInput) -> Result<IdempotencyKey, Problem> {
    for source in sources {
        match source {
            KeySource::Header(name) => {
                if let Some(value) = headers::get(input.headers, name) {
                    return IdempotencyKey::parse(unquote(value.trim()), source);
                }
            }
            KeySource::JsonPointer(pointer) => {
                let Some(json) = input.json else {
                    return Err(Problem::UnsupportedMediaType {
                        source: source.label(),
                        content_type: input.content_type.unwrap_or("").to_string(),
                    });
                };
                match json.pointer(pointer) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(text)) => return IdempotencyKey::parse(text, source),
                    Some(Value::Number(number)) => {
                        return IdempotencyKey::parse(&number.to_string(), source)
                    }
                    Some(_) => {
                        return Err(Problem::InvalidKey {
                            source: source.label(),
                            reason: "the key must be a JSON string or number".into(),
                        })
                    }
                }
            }
            KeySource::BodySha256 => {
                return IdempotencyKey::parse(input.fingerprint.as_str(), source)
            }
        }
    }
    Err(Problem::MissingKey {
        tried: sources
            .iter()
            .map(KeySource::label)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// `"abc"` (an RFC 8941 string) becomes `abc`; a bare value stays as it is.
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|inner| inner.strip_suffix('"'))
        .unwrap_or(value)
}

/// Where a key lives: the Durable Object name and the scope hash used in logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope<'a> {
    pub kind: KeyScope,
    /// The request path, query excluded.
    pub path: &'a str,
    /// The tenant header's value, when `TENANT_HEADER` is set.
    pub tenant: Option<&'a str>,
}

impl Scope<'_> {
    /// A hash of scope and key, so that one key never collides across paths
    /// or tenants. Fields are length-prefixed, so no choice of path, tenant
    /// or key can imitate another's encoding.
    pub fn object_name(&self, key: &IdempotencyKey) -> String {
        let path = match self.kind {
            KeyScope::Path => self.path,
            KeyScope::Global => "",
        };
        let tenant = self.tenant.map(|value| sha256_hex(value.as_bytes()));
        let mut encoded = String::from("idemgate/v1");
        for field in [path, tenant.as_deref().unwrap_or(""), key.as_str()] {
            encoded.push_str(&format!("|{}:{}", field.len(), field));
        }
        sha256_hex(encoded.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::parse_json;

    fn sources(list: &str) -> Vec<KeySource> {
        KeySource::parse_list(list).unwrap()
    }

    fn derive(
        list: &str,
        headers: &[(&str, &str)],
        json: Option<&str>,
    ) -> Result<IdempotencyKey, Problem> {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let json = json.map(|text| parse_json(text.as_bytes()).unwrap());
        let fingerprint = Fingerprint::of_bytes(b"body");
        derive_key(
            &sources(list),
            &KeyInput {
                headers: &headers,
                content_type: Some(if json.is_some() {
                    "application/json"
                } else {
                    "text/plain"
                }),
                json: json.as_ref(),
                fingerprint: &fingerprint,
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
        let body = Some(r#"{"data":{"object":{"id":"pi_3"}},"n":12345678901234}"#);
        assert_eq!(
            derive("json:/data/object/id", &[], body).unwrap().as_str(),
            "pi_3"
        );
        assert_eq!(
            derive("json:/n", &[], body).unwrap().as_str(),
            "12345678901234"
        );
    }

    #[test]
    fn null_or_absent_pointer_falls_through() {
        let body = Some(r#"{"transaction_id":null,"id":"evt_7"}"#);
        assert_eq!(derive(WEBHOOK, &[], body).unwrap().as_str(), "evt_7");
    }

    #[test]
    fn body_sha256_uses_the_fingerprint() {
        assert_eq!(
            derive("body-sha256", &[], None).unwrap().as_str(),
            Fingerprint::of_bytes(b"body").as_str()
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
        let problem = derive(WEBHOOK, &[], None).unwrap_err();
        assert_eq!(problem.status(), 415);
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
        let source = KeySource::Header("idempotency-key".into());
        let ok = |raw: &str| IdempotencyKey::parse(raw, &source).is_ok();
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
        let key = IdempotencyKey::parse("k-1", &KeySource::BodySha256).unwrap();
        assert_eq!(key.to_structured_field(), "\"k-1\"");
    }

    #[test]
    fn source_parsing() {
        assert_eq!(
            sources("header:Idempotency-Key, json:/a/b ,body-sha256"),
            vec![
                KeySource::Header("idempotency-key".into()),
                KeySource::JsonPointer("/a/b".into()),
                KeySource::BodySha256
            ]
        );
        for bad in [
            "",
            "header:",
            "header:a b",
            "json:id",
            "query:x",
            "header:a,,json:/b",
        ] {
            assert!(KeySource::parse_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn scope_separates_paths_and_tenants() {
        let key = IdempotencyKey::parse("k", &KeySource::BodySha256).unwrap();
        let name = |kind, path, tenant| Scope { kind, path, tenant }.object_name(&key);
        let base = name(KeyScope::Path, "/pay", None);
        assert_ne!(base, name(KeyScope::Path, "/refund", None));
        assert_eq!(
            name(KeyScope::Global, "/pay", None),
            name(KeyScope::Global, "/refund", None)
        );
        assert_ne!(base, name(KeyScope::Path, "/pay", Some("Bearer a")));
        assert_ne!(
            name(KeyScope::Path, "/pay", Some("Bearer a")),
            name(KeyScope::Path, "/pay", Some("Bearer b"))
        );
        assert_ne!(base, name(KeyScope::Global, "/pay", None));
        assert_eq!(base.len(), 64);
    }
}
