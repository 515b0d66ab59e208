//! Idempotency keys: where they come from, what a valid one is, the scope a
//! key lives in, and which Durable Object holds it (SPEC §3).

use crate::canonical::sha256_hex;
use crate::headers;
use crate::headers::is_header_name;
use crate::json::{Pointed, PointerLookup};
use crate::problem::Problem;

/// One part of a key source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPart {
    /// `header:NAME`; the name is kept lowercase.
    Header(String),
    /// `json:POINTER`, an RFC 6901 pointer into the JSON body.
    JsonPointer(String),
    /// `form:NAME`, a field of a form-encoded body.
    Form(String),
    /// `body-sha256`: the hash of the body (on a signed route, of what the
    /// signature covers).
    BodySha256,
    /// `scheme-key`: the key the route's signature scheme makes from what
    /// it signs (Adyen: each item's pspReference, eventCode and success).
    SchemeKey,
}

/// One entry of `KEY_SOURCES`: a part, or several joined by `+`, whose
/// values make one key (e.g. `json:/pspReference+json:/eventCode`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySource {
    pub parts: Vec<KeyPart>,
}

/// How much of a request, besides the route, separates one key from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScope {
    /// One key space per route (and tenant).
    Route,
    /// One key space per normalised request path (and tenant).
    Path,
}

/// A key that passed validation: 1 to 255 visible ASCII characters, no `"` or `\`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

pub const MAX_KEY_LEN: usize = 255;

impl KeyPart {
    fn parse(text: &str) -> Result<KeyPart, String> {
        let text = text.trim();
        match text {
            "body-sha256" => return Ok(KeyPart::BodySha256),
            "scheme-key" => return Ok(KeyPart::SchemeKey),
            _ => {}
        }
        if let Some(name) = text.strip_prefix("header:") {
            return if is_header_name(name) {
                Ok(KeyPart::Header(name.to_ascii_lowercase()))
            } else {
                Err(format!("{text:?}: {name:?} is not a header name"))
            };
        }
        if let Some(pointer) = text.strip_prefix("json:") {
            return if pointer.starts_with('/') {
                Ok(KeyPart::JsonPointer(pointer.to_string()))
            } else {
                Err(format!(
                    "{text:?}: a JSON pointer starts with '/', e.g. json:/id"
                ))
            };
        }
        if let Some(name) = text.strip_prefix("form:") {
            return if name.is_empty() {
                Err(format!(
                    "{text:?}: name the form's field, e.g. form:MessageSid"
                ))
            } else {
                Ok(KeyPart::Form(name.to_string()))
            };
        }
        Err(format!(
            "{text:?} is not header:NAME, json:/POINTER, form:NAME, body-sha256 or scheme-key"
        ))
    }

    pub fn label(&self) -> String {
        match self {
            KeyPart::Header(name) => format!("header:{name}"),
            KeyPart::JsonPointer(pointer) => format!("json:{pointer}"),
            KeyPart::Form(name) => format!("form:{name}"),
            KeyPart::BodySha256 => "body-sha256".into(),
            KeyPart::SchemeKey => "scheme-key".into(),
        }
    }
}

impl KeySource {
    pub fn header(name: &str) -> KeySource {
        KeySource {
            parts: vec![KeyPart::Header(name.to_ascii_lowercase())],
        }
    }

    pub fn parse(text: &str) -> Result<KeySource, String> {
        let parts = text
            .split('+')
            .map(KeyPart::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeySource { parts })
    }

    /// A comma-separated, ordered, non-empty list.
    pub fn parse_list(text: &str) -> Result<Vec<KeySource>, String> {
        text.split(',').map(KeySource::parse).collect()
    }

    pub fn label(&self) -> String {
        self.parts
            .iter()
            .map(KeyPart::label)
            .collect::<Vec<_>>()
            .join("+")
    }

    /// The headers this source reads, lowercase.
    pub fn headers(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            KeyPart::Header(name) => Some(name.as_str()),
            _ => None,
        })
    }
}

/// The JSON pointers `sources` read, each once: what admission asks of a
/// JSON body besides its canonical form.
pub fn json_pointers(sources: &[KeySource]) -> Vec<&str> {
    let mut pointers: Vec<&str> = Vec::new();
    for part in sources.iter().flat_map(|source| &source.parts) {
        if let KeyPart::JsonPointer(pointer) = part {
            if !pointers.contains(&pointer.as_str()) {
                pointers.push(pointer);
            }
        }
    }
    pointers
}

impl IdempotencyKey {
    /// Validates a raw value after trimming surrounding whitespace.
    pub fn parse(raw: &str, source: &str) -> Result<IdempotencyKey, Problem> {
        let invalid = |reason: &str| Problem::InvalidKey {
            source: source.to_string(),
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

/// Written as its text; read back through [`IdempotencyKey::parse`], so a
/// key read from a stored record or from the gateway's call is as valid as
/// one just derived, and no reader of it parses it again.
impl serde::Serialize for IdempotencyKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for IdempotencyKey {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<IdempotencyKey, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        IdempotencyKey::parse(&text, "stored key")
            .map_err(|problem| serde::de::Error::custom(problem.detail()))
    }
}

impl PartialEq<str> for IdempotencyKey {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for IdempotencyKey {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Unit tests write valid keys as literals.
#[cfg(test)]
impl From<&str> for IdempotencyKey {
    fn from(text: &str) -> IdempotencyKey {
        IdempotencyKey::parse(text, "test").expect("a valid key")
    }
}

impl std::fmt::Display for IdempotencyKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// What key derivation may look at.
pub struct KeyInput<'a> {
    pub headers: &'a [(String, String)],
    pub content_type: Option<&'a str>,
    /// The body's values at the key sources' pointers, when it is JSON.
    pub json: Option<&'a dyn PointerLookup>,
    /// The form's fields, when the body is form-encoded.
    pub form: Option<&'a [(String, String)]>,
    /// Hex SHA-256 for `body-sha256`: of the canonical body, or on a signed
    /// route of what the signature covers.
    pub body_sha256: &'a str,
    /// The route's scheme's own key, when it makes one.
    pub scheme_key: Option<&'a str>,
}

/// How the parts of a composite source become one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Joining {
    /// Each part percent-encodes `%` and `:`, then `:` joins them, so two
    /// different lists of parts never make one key (SPEC §3, v3).
    Encoded,
    /// The second version's join, as it was (`x:y`+`z` and `x`+`y:z` met):
    /// only to find receipts it made (see `pipeline::previous_identity`).
    Plain,
}

/// What one part found.
enum Found {
    Value(String),
    Absent,
}

fn read_part(part: &KeyPart, source: &KeySource, input: &KeyInput) -> Result<Found, Problem> {
    let found = |value: Option<&str>| match value {
        Some(value) => Found::Value(value.to_string()),
        None => Found::Absent,
    };
    match part {
        KeyPart::Header(name) => Ok(found(
            headers::get(input.headers, name).map(|value| unquote(value.trim())),
        )),
        KeyPart::JsonPointer(pointer) => {
            let Some(json) = input.json else {
                return Err(Problem::UnsupportedMediaType {
                    source: source.label(),
                    content_type: input.content_type.unwrap_or("").to_string(),
                });
            };
            match json.lookup(pointer) {
                Pointed::Absent => Ok(Found::Absent),
                Pointed::Text(text) => Ok(Found::Value(text.to_string())),
                Pointed::Other => Err(Problem::InvalidKey {
                    source: source.label(),
                    reason: "the key must be a JSON string or number".into(),
                }),
            }
        }
        KeyPart::Form(name) => {
            let Some(form) = input.form else {
                return Err(Problem::UnsupportedMediaType {
                    source: source.label(),
                    content_type: input.content_type.unwrap_or("").to_string(),
                });
            };
            crate::form::single(form, name)
                .map(found)
                .map_err(|_| Problem::InvalidKey {
                    source: source.label(),
                    reason: "the form holds this field more than once".into(),
                })
        }
        KeyPart::BodySha256 => Ok(Found::Value(input.body_sha256.to_string())),
        KeyPart::SchemeKey => Ok(found(input.scheme_key)),
    }
}

/// The first source in `sources` that yields a value wins (SPEC §3); a
/// source of several parts yields only when every part does.
pub fn derive_key(sources: &[KeySource], input: &KeyInput) -> Result<IdempotencyKey, Problem> {
    derive_key_joined(sources, input, Joining::Encoded)
}

/// [`derive_key`], joining a composite source's parts as `joining` says.
pub fn derive_key_joined(
    sources: &[KeySource],
    input: &KeyInput,
    joining: Joining,
) -> Result<IdempotencyKey, Problem> {
    'sources: for source in sources {
        let mut values = Vec::with_capacity(source.parts.len());
        for part in &source.parts {
            match read_part(part, source, input)? {
                Found::Value(value) => values.push(value),
                Found::Absent => continue 'sources,
            }
        }
        let label = source.label();
        if values.len() == 1 {
            return IdempotencyKey::parse(&values[0], &label);
        }
        // Each part must be a valid key on its own, so that a part cannot
        // smuggle whitespace inside.
        for value in &values {
            IdempotencyKey::parse(value, &label)?;
        }
        let joined: Vec<String> = values
            .iter()
            .map(|value| match joining {
                Joining::Encoded => encode_part(value.trim()),
                Joining::Plain => value.trim().to_string(),
            })
            .collect();
        return IdempotencyKey::parse(&joined.join(":"), &label);
    }
    Err(Problem::MissingKey {
        tried: sources
            .iter()
            .map(KeySource::label)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A composite key's part: `%` and `:` percent-encoded, so `:` only ever
/// separates parts.
pub fn encode_part(value: &str) -> String {
    value.replace('%', "%25").replace(':', "%3A")
}

/// `"abc"` (an RFC 8941 string) becomes `abc`; a bare value stays as it is.
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|inner| inner.strip_suffix('"'))
        .unwrap_or(value)
}

/// The key space a key lives in (SPEC §3): its id is the hex SHA-256 of
/// the route's name, the normalised path under path scope, and the tenant
/// header's hash when `TENANT_HEADER` is set, each length-prefixed so that
/// no choice of one can imitate another. The origin receives it as
/// `Idempotency-Scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    id: String,
}

impl Scope {
    /// `path` is the normalised request path under path scope, `None`
    /// under route scope; `tenant_sha256` the hex hash of the tenant value.
    pub fn new(route: &str, path: Option<&str>, tenant_sha256: Option<&str>) -> Scope {
        let mut encoded = String::from("idemgate/scope/v2");
        for field in [route, path.unwrap_or(""), tenant_sha256.unwrap_or("")] {
            encoded.push_str(&format!("|{}:{}", field.len(), field));
        }
        Scope {
            id: sha256_hex(encoded.as_bytes()),
        }
    }

    /// 64 lowercase hex digits.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The name of the Durable Object that holds `key` in this scope.
    pub fn object_name(&self, key: &IdempotencyKey) -> String {
        let encoded = format!(
            "idemgate/object/v2|{}:{}|{}:{}",
            self.id.len(),
            self.id,
            key.as_str().len(),
            key.as_str()
        );
        sha256_hex(encoded.as_bytes())
    }
}

/// The hash a tenant header's value is known by, in scopes and in the
/// operator API (`tenant_sha256=`), so the raw value never goes into a URL.
pub fn tenant_sha256(value: &str) -> String {
    sha256_hex(value.as_bytes())
}

#[cfg(test)]
mod tests;
