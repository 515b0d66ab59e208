//! SPEC §1 as a sequence of small steps, each returning early with its
//! problem. Everything here is pure; the Worker's `gateway` does the I/O
//! around it (reading the body, calling the Durable Object, proxying).

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use crate::canonical::{body_sha256, is_json_media_type, read_json, sha256_hex, Fingerprint};
use crate::config::{Config, RouteConfig, Tenant};
use crate::form;
use crate::headers::{self, HeaderList};
use crate::json::{one_pass::CanonicalBody, PointerLookup};
use crate::key::{
    derive_key, derive_key_joined, json_pointers, tenant_sha256, IdempotencyKey, Joining, KeyInput,
    KeyPart, KeyScope, KeySource, Scope,
};
use crate::origin::{target, Target};
use crate::problem::Problem;
use crate::signature::{self, PublicKeyCheck, Verdict};

/// What a request to a route is, from its method (SPEC §1 step 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// GET, HEAD, OPTIONS: proxied unchanged, no Durable Object.
    Passthrough,
    /// POST, PUT, PATCH, DELETE.
    Deduplicate,
}

/// The path and query of a URL as the runtime serializes it (WHATWG), read
/// without parsing it again: serialization always writes a path after the
/// host, and percent-encodes every `?` and `#` inside the path and query.
pub fn path_and_query(url: &str) -> (&str, Option<&str>) {
    let after_scheme = url.find("://").map_or(0, |at| at + 3);
    let rest = match url[after_scheme..].find('/') {
        Some(at) => &url[after_scheme + at..],
        None => "/",
    };
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    }
}

/// Steps 0 and 1 for a path that is not the operator API's (the gateway
/// normalises the path and answers the operator API first): the route
/// (404 `no-route` whatever the method), then the method (405).
pub fn route_request<'a>(
    config: &'a Config,
    method: &str,
    normalized_path: &str,
) -> Result<(&'a RouteConfig, Kind), Problem> {
    let route = config.route_for(normalized_path)?;
    let kind = match method.to_ascii_uppercase().as_str() {
        "GET" | "HEAD" | "OPTIONS" => Kind::Passthrough,
        "POST" | "PUT" | "PATCH" | "DELETE" => Kind::Deduplicate,
        _ => {
            return Err(Problem::MethodNotAllowed {
                method: method.to_string(),
            })
        }
    };
    Ok((route, kind))
}

/// How the gateway reads a deduplicated request's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// A declared `Content-Length` within the limit: the runtime delivers
    /// exactly that many bytes, so the body is read whole, in one call.
    Declared,
    /// No usable length (chunked, or a `Transfer-Encoding` beside a length,
    /// which then does not bind): read chunk by chunk, stopping at the limit.
    Streamed,
}

/// Step 2, early: a declared `Content-Length` over the limit is refused
/// before the body is read.
pub fn body_framing(
    max_body_bytes: u64,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Result<BodyFraming, Problem> {
    let declared = content_length.and_then(|value| value.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > max_body_bytes => Err(Problem::PayloadTooLarge {
            limit: max_body_bytes,
        }),
        Some(_) if transfer_encoding.is_none() => Ok(BodyFraming::Declared),
        _ => Ok(BodyFraming::Streamed),
    }
}

/// Whether a body of `length` bytes is over the limit: a body of exactly
/// `max_body_bytes` is accepted.
pub fn over_limit(length: u64, max_body_bytes: u64) -> bool {
    length > max_body_bytes
}

/// A deduplicated request as the pipeline sees it.
pub struct Inbound<'a> {
    pub method: &'a str,
    /// The path as the sender sent it (the origin gets it so).
    pub path: &'a str,
    pub normalized_path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// Unix seconds, for the freshness of sender signatures.
    pub now: u64,
}

/// A delivery that passed every check: ready for its Durable Object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub route: String,
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    /// The scope id (SPEC §3), forwarded as `Idempotency-Scope`.
    pub scope: String,
    /// Name of the Durable Object that holds this key's receipt.
    pub object_name: String,
    /// The normalised path, under path scope (for the operator API).
    pub scoped_path: Option<String>,
    pub tenant_sha256: Option<String>,
    pub method: String,
    pub target: Target,
    /// Hex SHA-256 of the raw body, for `Idempotency-Signature`.
    pub raw_body_sha256: String,
    /// The sender's headers as the origin will see them, before idemgate's own.
    pub forward_headers: HeaderList,
    /// Where the second version kept this delivery's receipt, when that
    /// differs (SPEC §3, v3 "Upgrading"): looked up first for a while after
    /// an upgrade, so that a retry spanning it is not forwarded again.
    pub previous: Option<PreviousIdentity>,
}

impl Admitted {
    /// This delivery as the second version addressed it: its previous
    /// identity, when it has one (a deployment before its upgrade, in the
    /// end-to-end tests).
    pub fn as_previous(self) -> Admitted {
        match self.previous.clone() {
            Some(previous) => Admitted {
                key: previous.key,
                scope: previous.scope,
                object_name: previous.object_name,
                tenant_sha256: previous.tenant_sha256,
                previous: None,
                ..self
            },
            None => self,
        }
    }
}

/// A delivery's identity as the second version derived it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviousIdentity {
    pub key: IdempotencyKey,
    pub scope: String,
    pub object_name: String,
    pub tenant_sha256: Option<String>,
}

/// A delivery whose size and sender's signature were checked (steps 2
/// and 3). Only [`authenticate`] makes one, and [`admit`] takes nothing
/// else: no later step can run on a delivery that skipped them.
pub struct Authenticated<'a> {
    route: &'a RouteConfig,
    inbound: &'a Inbound<'a>,
    /// Hex SHA-256 of the raw body, computed once: the isolate's replay
    /// lookup and the forward's `Idempotency-Signature` both need it.
    raw_body_sha256: std::cell::OnceCell<String>,
}

impl<'a> Authenticated<'a> {
    pub fn route(&self) -> &'a RouteConfig {
        self.route
    }

    pub fn inbound(&self) -> &'a Inbound<'a> {
        self.inbound
    }

    /// Hex SHA-256 of the raw body.
    pub fn raw_body_sha256(&self) -> &str {
        self.raw_body_sha256
            .get_or_init(|| sha256_hex(self.inbound.body))
    }

    /// The signed transmission id this delivery may be forwarded under
    /// once, and until when (ms) a replay of it could still verify
    /// ([`crate::single_use`]); `None` for a scheme that binds the body.
    pub fn single_use(&self) -> Option<(String, u64)> {
        let request = self.signed_request();
        let (id, signed_at) = self.route.signature_scheme.single_use_id(&request)?;
        let until = signed_at
            .saturating_add(self.route.signature_tolerance_seconds)
            .saturating_mul(1_000)
            .saturating_add(crate::single_use::CLAIM_MARGIN_MS);
        Some((id.to_string(), until))
    }

    fn signed_request(&self) -> signature::SignedRequest<'a> {
        signature::SignedRequest {
            headers: self.inbound.headers,
            body: self.inbound.body,
            query: self.inbound.query,
        }
    }
}

/// Steps 2 and 3: the size, then the sender's signature, before anything
/// reads the body. A signature only a public key can check comes back
/// [`Authentication::Pending`], for the runtime's WebCrypto.
pub fn authenticate<'a>(
    route: &'a RouteConfig,
    inbound: &'a Inbound<'a>,
) -> Result<Authentication<'a>, Problem> {
    if over_limit(inbound.body.len() as u64, route.max_body_bytes) {
        return Err(Problem::PayloadTooLarge {
            limit: route.max_body_bytes,
        });
    }
    let authenticated = Authenticated {
        route,
        inbound,
        raw_body_sha256: std::cell::OnceCell::new(),
    };
    let verdict = route.signature_scheme.verify(
        &authenticated.signed_request(),
        inbound.now,
        route.signature_tolerance_seconds,
    )?;
    Ok(match verdict {
        Verdict::Verified => Authentication::Done(authenticated),
        Verdict::PublicKey(checks) => Authentication::Pending(PendingAuthentication {
            authenticated,
            checks,
        }),
    })
}

/// What authentication came to.
pub enum Authentication<'a> {
    Done(Authenticated<'a>),
    Pending(PendingAuthentication<'a>),
}

impl<'a> Authentication<'a> {
    /// The authenticated delivery, for a route whose scheme needs no
    /// public key: tests, benchmarks, and senders that sign with HMAC.
    pub fn done(self) -> Result<Authenticated<'a>, Problem> {
        match self {
            Authentication::Done(authenticated) => Ok(authenticated),
            Authentication::Pending(_) => Err(Problem::BadSignature {
                reason: "a public-key signature needs the runtime to check it".into(),
            }),
        }
    }
}

/// A delivery whose signature only public-key checks can settle: it is
/// authenticated once any one of [`PendingAuthentication::checks`] verifies.
pub struct PendingAuthentication<'a> {
    authenticated: Authenticated<'a>,
    checks: Vec<PublicKeyCheck>,
}

impl<'a> PendingAuthentication<'a> {
    pub fn checks(&self) -> &[PublicKeyCheck] {
        &self.checks
    }

    /// The runtime's result of [`PendingAuthentication::checks`].
    pub fn complete(self, checked: PublicKeyChecked) -> Result<Authenticated<'a>, Problem> {
        match checked {
            PublicKeyChecked::Verified => Ok(self.authenticated),
            PublicKeyChecked::Rejected => Err(Problem::BadSignature {
                reason: "mismatch: no signature matches the body".into(),
            }),
            PublicKeyChecked::KeyUnavailable => Err(Problem::SigningKeyUnavailable),
        }
    }
}

/// What the runtime found of a delivery's public-key signatures, ordered
/// so that the greatest of its checks' results is the delivery's: any one
/// that verified passes it, and a key that could not be fetched leaves it
/// undecided rather than forged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PublicKeyChecked {
    /// None verified, with every key at hand: forged, or signed with
    /// another key.
    Rejected,
    /// None verified, and a certificate could not be fetched: a genuine
    /// delivery must not be refused as forged for its host's outage, so it
    /// is answered 503 and its sender retries.
    KeyUnavailable,
    /// It verified.
    Verified,
}

/// Steps 4 and 5: key, fingerprint and scope. The first failing check
/// answers; nothing reaches a Durable Object.
pub fn admit(authenticated: &Authenticated) -> Result<Admitted, Problem> {
    let (route, inbound) = (authenticated.route, authenticated.inbound);
    let content_type = headers::get(inbound.headers, "content-type");
    let json: Option<CanonicalBody> = match content_type {
        Some(media_type) if is_json_media_type(media_type) => {
            Some(read_json(inbound.body, &json_pointers(&route.key_sources))?)
        }
        _ => None,
    };
    let reads = |wanted: fn(&KeyPart) -> bool| {
        route
            .key_sources
            .iter()
            .any(|source| source.parts.iter().any(wanted))
    };
    let form = match content_type {
        Some(media_type)
            if form::is_form_media_type(media_type)
                && reads(|part| matches!(part, KeyPart::Form(_))) =>
        {
            Some(form::pairs(&String::from_utf8_lossy(inbound.body)))
        }
        _ => None,
    };
    let signed = authenticated.signed_request();
    let scheme_key = match reads(|part| *part == KeyPart::SchemeKey) {
        true => route.signature_scheme.scheme_key(&signed),
        false => None,
    };
    let canonical_hash = body_sha256(json.as_ref().map(CanonicalBody::canonical), inbound.body);
    let fingerprint = Fingerprint::of_request(inbound.method, inbound.query, &canonical_hash);
    // On a signed route, `body-sha256` hashes what the signature covers,
    // whatever the (unsigned) Content-Type says (SPEC §3, v3): the raw
    // body's hash, already made, for a scheme that signs the body. Only a
    // route whose key sources read it pays for it.
    let key_hash = match reads(|part| *part == KeyPart::BodySha256) {
        false => String::new(),
        true => match route.signature_scheme.body_for_key(&signed) {
            Some(Cow::Borrowed(_)) => authenticated.raw_body_sha256().to_string(),
            Some(Cow::Owned(signed_fields)) => sha256_hex(&signed_fields),
            None => canonical_hash.clone(),
        },
    };
    let input = |body_sha256| KeyInput {
        headers: inbound.headers,
        content_type,
        json: json.as_ref().map(|json| json as &dyn PointerLookup),
        form: form.as_deref(),
        body_sha256,
        scheme_key: scheme_key.as_deref(),
    };
    let key = derive_key(&route.key_sources, &input(&key_hash))?;
    let tenant_sha256 = tenant_hash(route, inbound.headers)?;
    let scoped_path = match route.key_scope {
        KeyScope::Path => Some(inbound.normalized_path.to_string()),
        KeyScope::Route => None,
    };
    let scope = Scope::new(
        &route.name,
        scoped_path.as_deref(),
        tenant_sha256.as_deref(),
    );
    let object_name = scope.object_name(&key);
    let previous = previous_identity(
        route,
        &input(&canonical_hash),
        scoped_path.as_deref(),
        tenant_sha256.as_deref(),
    )
    .filter(|previous| previous.object_name != object_name);
    Ok(Admitted {
        route: route.name.clone(),
        object_name,
        scope: scope.id().to_string(),
        key,
        fingerprint,
        scoped_path,
        tenant_sha256,
        method: inbound.method.to_ascii_uppercase(),
        target: target(&route.origin_url, inbound.path, inbound.query),
        raw_body_sha256: authenticated.raw_body_sha256().to_string(),
        forward_headers: headers::for_origin(inbound.headers),
        previous,
    })
}

/// Where the second version kept a delivery's receipt: its `body-sha256`
/// hashed the canonical body on every route, Adyen's default key was that
/// hash, composite parts were joined as they were, and an api route
/// without `TENANT_HEADER` had no tenant. `None` when it derived nothing.
fn previous_identity(
    route: &RouteConfig,
    input: &KeyInput,
    scoped_path: Option<&str>,
    tenant_sha256: Option<&str>,
) -> Option<PreviousIdentity> {
    let sources: Vec<KeySource> = route
        .key_sources
        .iter()
        .map(|source| KeySource {
            parts: source
                .parts
                .iter()
                .map(|part| match part {
                    KeyPart::SchemeKey => KeyPart::BodySha256,
                    other => other.clone(),
                })
                .collect(),
        })
        .collect();
    let key = derive_key_joined(&sources, input, Joining::Plain).ok()?;
    let tenant_sha256 = match route.tenant {
        Tenant::Header {
            required: false, ..
        } => None,
        _ => tenant_sha256,
    };
    let scope = Scope::new(&route.name, scoped_path, tenant_sha256);
    Some(PreviousIdentity {
        object_name: scope.object_name(&key),
        scope: scope.id().to_string(),
        key,
        tenant_sha256: tenant_sha256.map(str::to_string),
    })
}

/// The hash of the tenant header's value: 400 `missing-tenant` without
/// it where `TENANT_HEADER` requires it; anonymous (none) where api mode
/// scopes by `Authorization` and a request has none.
fn tenant_hash(route: &RouteConfig, list: &[(String, String)]) -> Result<Option<String>, Problem> {
    match &route.tenant {
        Tenant::Header { name, required } => match headers::get(list, name) {
            Some(value) => Ok(Some(tenant_sha256(value))),
            None if *required => Err(Problem::MissingTenant {
                header: name.clone(),
            }),
            None => Ok(None),
        },
        Tenant::Shared => Ok(None),
    }
}

/// The isolate cache's key for a byte-identical retry, computed from the
/// raw request without parsing its body: the hash of everything that
/// decides the delivery's object and fingerprint (route, method, the path
/// under path scope, query, content type, the headers the key sources and
/// the tenant read, and the raw body). Two requests with equal inputs
/// admit to the same object and fingerprint, so a replay cached under this
/// key is theirs; a different payload misses and goes the long way (422).
pub fn fast_replay_key(authenticated: &Authenticated) -> String {
    let (route, inbound) = (authenticated.route, authenticated.inbound);
    let mut hasher = Sha256::new();
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    };
    field(b"idemgate/fast-replay/v1");
    field(route.name.as_bytes());
    field(inbound.method.to_ascii_uppercase().as_bytes());
    match route.key_scope {
        KeyScope::Path => field(inbound.normalized_path.as_bytes()),
        KeyScope::Route => field(b""),
    }
    field(inbound.query.unwrap_or("").as_bytes());
    field(
        headers::get(inbound.headers, "content-type")
            .unwrap_or("")
            .as_bytes(),
    );
    let read_headers = route
        .key_sources
        .iter()
        .flat_map(|source| source.headers())
        .chain(match &route.tenant {
            Tenant::Header { name, .. } => Some(name.as_str()),
            Tenant::Shared => None,
        });
    for name in read_headers {
        match headers::get(inbound.headers, name) {
            Some(value) => {
                field(b"1");
                field(value.as_bytes());
            }
            None => field(b"0"),
        }
    }
    // The body by its hash, which admission then reuses.
    field(authenticated.raw_body_sha256().as_bytes());
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn path_and_query_agree_with_a_full_url_parser() {
        for raw in [
            "http://127.0.0.1:8787/payments",
            "https://edge.example/v1/pay?x=1&y=%3F",
            "https://edge.example/a%2Fb?",
            "https://edge.example/",
            "https://edge.example",
            "https://user:pw@edge.example:443/p/q?k=v#frag",
            "https://edge.example/p#frag?not-a-query",
            "http://a/b?c",
            "https://x/",
        ] {
            let parsed = url::Url::parse(raw).unwrap();
            assert_eq!(
                path_and_query(parsed.as_str()),
                (parsed.path(), parsed.query()),
                "{raw}"
            );
        }
    }

    fn config(extra: &[(&str, &str)]) -> Config {
        let mut vars: HashMap<String, String> = [("ORIGIN_URL", "http://origin:9/base")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        vars.entry("MAX_BODY_BYTES".into()).or_insert("64".into());
        Config::from_lookup(|name| vars.get(name).cloned()).unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderList {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    struct Request<'a> {
        method: &'a str,
        path: &'a str,
        query: Option<&'a str>,
        headers: HeaderList,
        body: &'a [u8],
    }

    fn json_post<'a>(extra: &[(&str, &str)], body: &'a str) -> Request<'a> {
        let mut list = headers(&[("content-type", "application/json")]);
        list.extend(headers(extra));
        Request {
            method: "POST",
            path: "/pay",
            query: Some("x=1"),
            headers: list,
            body: body.as_bytes(),
        }
    }

    fn run(config: &Config, request: &Request) -> Result<Admitted, Problem> {
        let normalized = normalize(request.path);
        let route = config.route_for(&normalized).unwrap();
        let inbound = Inbound {
            method: request.method,
            path: request.path,
            normalized_path: &normalized,
            query: request.query,
            headers: &request.headers,
            body: request.body,
            now: 0,
        };
        admit(&authenticate(route, &inbound)?.done()?)
    }

    fn normalize(path: &str) -> String {
        crate::routes::normalize_path(path).unwrap()
    }

    fn admit_json(
        config: &Config,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Result<Admitted, Problem> {
        run(config, &json_post(extra, body))
    }

    #[test]
    fn the_method_decides_passthrough_deduplication_or_405() {
        let config = config(&[]);
        let kind = |method| route_request(&config, method, "/x").map(|(_, kind)| kind);
        assert_eq!(kind("GET"), Ok(Kind::Passthrough));
        assert_eq!(kind("head"), Ok(Kind::Passthrough));
        assert_eq!(kind("OPTIONS"), Ok(Kind::Passthrough));
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            assert_eq!(kind(method), Ok(Kind::Deduplicate));
        }
        assert_eq!(kind("TRACE").unwrap_err().status(), 405);
    }

    #[test]
    fn an_unrouted_path_is_404_whatever_the_method() {
        let config = config(&[("ROUTES", r#"{"api":{"path":"/v1"}}"#)]);
        for method in ["GET", "POST", "TRACE"] {
            assert_eq!(
                route_request(&config, method, "/v2/x").unwrap_err(),
                Problem::NoRoute
            );
        }
        assert_eq!(
            route_request(&config, "POST", "/v1/x").unwrap().0.name,
            "api"
        );
    }

    #[test]
    fn a_body_of_exactly_the_limit_is_accepted_and_one_byte_more_is_413() {
        let config = config(&[("KEY_SOURCES", "header:Idempotency-Key")]);
        let route = &config.routes[0];
        assert_eq!(
            body_framing(64, Some("64"), None),
            Ok(BodyFraming::Declared)
        );
        assert_eq!(
            body_framing(64, Some("65"), None).unwrap_err().status(),
            413
        );
        assert!(!over_limit(64, 64));
        assert!(over_limit(65, 64));
        let at_limit = "x".repeat(route.max_body_bytes as usize);
        let mut request = json_post(&[("idempotency-key", "k")], &at_limit);
        request.headers[0].1 = "text/plain".into();
        assert!(run(&config, &request).is_ok());
        let over = "x".repeat(route.max_body_bytes as usize + 1);
        request.body = over.as_bytes();
        assert_eq!(run(&config, &request).unwrap_err().status(), 413);
    }

    #[test]
    fn a_body_without_a_binding_length_is_streamed() {
        for (length, encoding) in [
            (None, None),
            (None, Some("chunked")),
            (Some("10"), Some("chunked")),
            (Some("ten"), None),
        ] {
            assert_eq!(
                body_framing(64, length, encoding),
                Ok(BodyFraming::Streamed),
                "{length:?} {encoding:?}"
            );
        }
    }

    #[test]
    fn admits_a_json_delivery() {
        let config = config(&[]);
        let admitted = admit_json(
            &config,
            &[
                ("idempotency-key", "\"k1\""),
                ("idempotency-epoch", "7"),
                ("idempotency_scope", "x"),
            ],
            r#"{"b":1, "a":2}"#,
        )
        .unwrap();
        assert_eq!(admitted.key.as_str(), "k1");
        assert_eq!(
            admitted.fingerprint,
            Fingerprint::of_request("POST", Some("x=1"), &sha256_hex(br#"{"a":2,"b":1}"#))
        );
        assert_eq!(admitted.target.url, "http://origin:9/base/pay?x=1");
        assert_eq!(admitted.target.path_and_query, "/base/pay?x=1");
        assert_eq!(admitted.route, "default");
        assert_eq!(admitted.scoped_path.as_deref(), Some("/pay"));
        assert_eq!(
            admitted.scope,
            Scope::new("default", Some("/pay"), None).id()
        );
        assert_eq!(
            admitted.forward_headers,
            headers(&[("content-type", "application/json")])
        );
    }

    #[test]
    fn the_fingerprint_covers_method_and_query() {
        let config = config(&[]);
        let mut request = json_post(&[("idempotency-key", "k")], r#"{"amount":1}"#);
        let first = run(&config, &request).unwrap();
        request.query = Some("amount=999");
        assert_ne!(
            run(&config, &request).unwrap().fingerprint,
            first.fingerprint
        );
        request.query = Some("x=1");
        request.method = "PUT";
        let put = run(&config, &request).unwrap();
        assert_ne!(put.fingerprint, first.fingerprint);
        assert_eq!(put.object_name, first.object_name, "one key, one object");
    }

    #[test]
    fn each_rejection_has_its_status() {
        let config = config(&[]);
        let problem =
            |extra: &[(&str, &str)], body: &str| admit_json(&config, extra, body).unwrap_err();
        assert_eq!(problem(&[], &"x".repeat(65)).status(), 413);
        assert_eq!(problem(&[], "{not json").name(), "invalid-json");
        assert_eq!(
            problem(&[("idempotency-key", "k")], r#"{"a":1,"a":2}"#).name(),
            "invalid-json"
        );
        assert_eq!(problem(&[], "{}").name(), "missing-key");
        assert_eq!(
            problem(&[("idempotency-key", "")], "{}").name(),
            "invalid-key"
        );
        assert_eq!(
            problem(&[("idempotency-key", "caf\u{e9}")], "{}").name(),
            "invalid-key"
        );
        assert_eq!(
            problem(&[("idempotency-key", &"k".repeat(256))], "{}").name(),
            "invalid-key"
        );
    }

    #[test]
    fn the_signature_is_checked_before_the_body_is_read() {
        let config = config(&[
            ("SIGNATURE_SCHEME", "stripe"),
            ("SIGNING_SECRET", "whsec_x"),
        ]);
        let problem = admit_json(
            &config,
            &[("stripe-signature", "t=1,v1=00")],
            r#"{"id":"evt_1"}"#,
        )
        .unwrap_err();
        assert_eq!(problem.name(), "bad-signature");
        let unsigned = admit_json(&config, &[], "{not even json").unwrap_err();
        assert_eq!(
            unsigned.name(),
            "bad-signature",
            "no body parsing before authentication"
        );
    }

    #[test]
    fn a_certificate_that_could_not_be_fetched_is_retryable_not_forged() {
        use PublicKeyChecked::{KeyUnavailable, Rejected, Verified};
        for (checks, all) in [
            (vec![], Rejected),
            (vec![Rejected, Rejected], Rejected),
            (vec![KeyUnavailable], KeyUnavailable),
            (vec![Rejected, KeyUnavailable], KeyUnavailable),
            (vec![KeyUnavailable, Verified], Verified),
            (vec![Verified, Rejected], Verified),
        ] {
            let found = checks.iter().copied().max().unwrap_or(Rejected);
            assert_eq!(found, all, "{checks:?}");
        }
        let unavailable = Problem::SigningKeyUnavailable;
        assert_eq!(unavailable.status(), 503);
        assert_eq!(unavailable.name(), "signing-key-unavailable");
        assert_eq!(unavailable.retry_after_secs(), Some(1));
        assert!(unavailable.detail().contains("retrying is safe"));
    }

    #[test]
    fn raw_bodies_fingerprint_as_bytes() {
        let config = config(&[("KEY_SOURCES", "header:Idempotency-Key")]);
        let mut request = json_post(&[("idempotency-key", "k")], "{ \"a\": 1 }");
        request.headers[0].1 = "text/plain".into();
        let admitted = run(&config, &request).unwrap();
        assert_eq!(
            admitted.fingerprint,
            Fingerprint::of_request("POST", Some("x=1"), &sha256_hex(b"{ \"a\": 1 }"))
        );
    }

    #[test]
    fn tenants_never_share_an_object_under_either_scope() {
        for scope in ["path", "route"] {
            let config = config(&[("TENANT_HEADER", "Authorization"), ("KEY_SCOPE", scope)]);
            assert_eq!(
                admit_json(&config, &[("idempotency-key", "k")], "{}")
                    .unwrap_err()
                    .name(),
                "missing-tenant"
            );
            let as_tenant = |token: &str| {
                admit_json(
                    &config,
                    &[("idempotency-key", "k"), ("authorization", token)],
                    "{}",
                )
                .unwrap()
            };
            let (a, b) = (as_tenant("Bearer a"), as_tenant("Bearer b"));
            assert_ne!(a.object_name, b.object_name, "{scope}");
            assert_ne!(a.scope, b.scope, "{scope}");
            assert_eq!(
                a.tenant_sha256.as_deref(),
                Some(tenant_sha256("Bearer a").as_str())
            );
        }
    }

    #[test]
    fn route_scope_shares_paths_and_path_scope_separates_them() {
        let with_scope = |scope: &str, path: &'static str| {
            let config = config(&[("KEY_SCOPE", scope)]);
            let mut request = json_post(&[("idempotency-key", "k")], "{}");
            request.path = path;
            run(&config, &request).unwrap()
        };
        assert_eq!(
            with_scope("route", "/a").object_name,
            with_scope("route", "/b").object_name
        );
        assert_ne!(
            with_scope("path", "/a").object_name,
            with_scope("path", "/b").object_name
        );
        assert_eq!(
            with_scope("path", "/webhooks/stripe").object_name,
            with_scope("path", "//webhooks/%73tripe/").object_name,
            "one path however it is spelt"
        );
        assert_eq!(
            with_scope("path", "//a/").target.url,
            "http://origin:9/base//a/?x=1",
            "the origin gets the path as sent"
        );
    }

    #[test]
    fn a_byte_identical_retry_has_the_same_fast_key_and_a_change_does_not() {
        let config = config(&[("TENANT_HEADER", "Authorization")]);
        let route = &config.routes[0];
        let key = |request: &Request| {
            let normalized = normalize(request.path);
            let inbound = Inbound {
                method: request.method,
                path: request.path,
                normalized_path: &normalized,
                query: request.query,
                headers: &request.headers,
                body: request.body,
                now: 0,
            };
            fast_replay_key(&authenticate(route, &inbound).unwrap().done().unwrap())
        };
        let base = json_post(
            &[
                ("idempotency-key", "k"),
                ("authorization", "a"),
                ("x-trace", "1"),
            ],
            "{}",
        );
        let same = json_post(
            &[
                ("idempotency-key", "k"),
                ("authorization", "a"),
                ("x-trace", "2"),
            ],
            "{}",
        );
        assert_eq!(
            key(&base),
            key(&same),
            "headers no source reads do not matter"
        );
        for changed in [
            json_post(&[("idempotency-key", "k2"), ("authorization", "a")], "{}"),
            json_post(&[("idempotency-key", "k"), ("authorization", "b")], "{}"),
            json_post(&[("idempotency-key", "k"), ("authorization", "a")], "{ }"),
            json_post(&[("authorization", "a"), ("webhook-id", "k")], "{}"),
        ] {
            assert_ne!(key(&base), key(&changed));
        }
        let mut other_path = json_post(&[("idempotency-key", "k"), ("authorization", "a")], "{}");
        other_path.path = "/other";
        assert_ne!(key(&base), key(&other_path));
    }

    /// A route configured by `vars` (with a large enough body limit).
    fn routed(vars: &[(&str, &str)]) -> Config {
        let mut all = vec![("MAX_BODY_BYTES", "65536")];
        all.extend_from_slice(vars);
        config(&all)
    }

    /// `request` signed by `config`'s route's own scheme at time 0.
    fn signed(config: &Config, mut request: Request<'static>) -> (Request<'static>, Vec<u8>) {
        let mut message = crate::signature::Message {
            headers: request.headers.clone(),
            body: request.body.to_vec(),
        };
        config.routes[0].signature_scheme.sign(&mut message, 0);
        request.headers = message.headers;
        let body = message.body;
        (request, body)
    }

    fn run_owned(config: &Config, request: &Request, body: &[u8]) -> Result<Admitted, Problem> {
        let request = Request {
            method: request.method,
            path: request.path,
            query: request.query,
            headers: request.headers.clone(),
            body,
        };
        run(config, &request)
    }

    #[test]
    fn a_signed_bodys_key_is_its_raw_hash_whatever_its_content_type_says() {
        let config = routed(&[("SIGNATURE_SCHEME", "github"), ("SIGNING_SECRET", "s")]);
        let body: &'static str = "{ \"action\": \"completed\", \"id\": 1 }";
        let (request, bytes) = signed(&config, json_post(&[], body));
        let as_json = run_owned(&config, &request, &bytes).unwrap();
        assert_eq!(as_json.key.as_str(), sha256_hex(body.as_bytes()));
        // A captured delivery re-sent without its (unsigned) Content-Type.
        let mut bare = Request {
            headers: request.headers.clone(),
            ..json_post(&[], body)
        };
        bare.headers.retain(|(name, _)| name != "content-type");
        let as_text = run_owned(&config, &bare, &bytes).unwrap();
        assert_eq!(
            as_text.object_name, as_json.object_name,
            "one key: replayed, not forwarded"
        );
        // The second version keyed it by its canonical JSON.
        let previous = as_json.previous.expect("the key changed");
        assert_eq!(
            previous.key.as_str(),
            sha256_hex(br#"{"action":"completed","id":1}"#)
        );
    }

    #[test]
    fn an_adyen_notifications_key_ignores_unsigned_members() {
        let config = routed(&[
            ("SIGNATURE_SCHEME", "adyen"),
            ("SIGNING_SECRET", &"ab".repeat(32)),
        ]);
        let body = crate::signature::sample_notification("psp42");
        let body: &'static str = Box::leak(body.into_boxed_str());
        let (request, bytes) = signed(&config, json_post(&[], body));
        let genuine = run_owned(&config, &request, &bytes).unwrap();
        assert_eq!(genuine.key.as_str(), "psp42:AUTHORISATION:true");
        let text = String::from_utf8(bytes).unwrap();
        let padded = text.replacen("{\"live\"", "{\"extra\":1,\"live\"", 1);
        assert_ne!(padded, text);
        let changed = run_owned(&config, &request, padded.as_bytes()).unwrap();
        assert_eq!(changed.object_name, genuine.object_name, "the same key");
        assert_ne!(
            changed.fingerprint, genuine.fingerprint,
            "so it is 422, never forwarded"
        );
        assert!(
            genuine.previous.is_some(),
            "the second version hashed the body"
        );
    }

    #[test]
    fn in_api_mode_credentials_scope_keys_and_none_is_anonymous() {
        let api = config(&[("DEDUP_MODE", "api")]);
        let as_caller = |authorization: Option<&str>| {
            let mut extra = vec![("idempotency-key", "order-1")];
            extra.extend(authorization.map(|value| ("authorization", value)));
            run(&api, &json_post(&extra, "{}")).unwrap()
        };
        let (alice, bob, anonymous) = (
            as_caller(Some("Bearer alice")),
            as_caller(Some("Bearer bob")),
            as_caller(None),
        );
        assert_ne!(alice.object_name, bob.object_name);
        assert_ne!(alice.object_name, anonymous.object_name);
        assert_eq!(anonymous.tenant_sha256, None, "no 400: anonymous");
        assert_eq!(
            alice
                .previous
                .as_ref()
                .map(|previous| previous.tenant_sha256.clone()),
            Some(None),
            "the second version had no tenant here"
        );
        assert_eq!(
            anonymous.previous, None,
            "anonymous: as the second version was"
        );
        let shared = config(&[("DEDUP_MODE", "api"), ("TENANT_HEADER", "none")]);
        let key = |authorization| {
            run(
                &shared,
                &json_post(
                    &[("idempotency-key", "k"), ("authorization", authorization)],
                    "{}",
                ),
            )
            .unwrap()
            .object_name
        };
        assert_eq!(
            key("Bearer a"),
            key("Bearer b"),
            "TENANT_HEADER=none shares on purpose"
        );
        let explicit = config(&[("DEDUP_MODE", "api"), ("TENANT_HEADER", "Authorization")]);
        assert_eq!(
            run(&explicit, &json_post(&[("idempotency-key", "k")], "{}"))
                .unwrap_err()
                .name(),
            "missing-tenant"
        );
    }

    #[test]
    fn the_previous_identity_is_the_second_versions_and_absent_when_unchanged() {
        let composite = config(&[("KEY_SOURCES", "json:/a+json:/b")]);
        let admitted = run(&composite, &json_post(&[], r#"{"a":"x:y","b":"z"}"#)).unwrap();
        assert_eq!(admitted.key.as_str(), "x%3Ay:z");
        let previous = admitted.previous.unwrap();
        assert_eq!(previous.key.as_str(), "x:y:z");
        assert_eq!(
            previous.object_name,
            Scope::new("default", Some("/pay"), None).object_name(&previous.key)
        );
        let unchanged = run(&composite, &json_post(&[], r#"{"a":"x","b":"z"}"#)).unwrap();
        assert_eq!(unchanged.previous, None, "no ':' to encode: the same key");
        let plain = run(&config(&[]), &json_post(&[("idempotency-key", "k")], "{}")).unwrap();
        assert_eq!(plain.previous, None);
    }

    #[test]
    fn a_signed_route_takes_keys_tenants_and_scopes_only_from_what_is_signed() {
        let vars = |extra: &[(&'static str, &'static str)]| {
            let mut all = vec![
                ("ORIGIN_URL", "http://o"),
                ("SIGNATURE_SCHEME", "github"),
                ("SIGNING_SECRET", "s"),
            ];
            all.extend_from_slice(extra);
            let map: HashMap<String, String> = all
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let config = Config::from_lookup(|name| map.get(name).cloned()).unwrap();
            match config.broken.first() {
                Some(broken) => Err(broken.problem.clone()),
                None => Ok(config),
            }
        };
        for (name, value) in [
            ("KEY_SOURCES", "header:X-GitHub-Delivery"),
            ("KEY_SOURCES", "json:/id,header:x-other"),
            ("TENANT_HEADER", "X-GitHub-Hook-ID"),
            ("KEY_SCOPE", "path"),
        ] {
            let problem = vars(&[(name, value)]).unwrap_err();
            assert_eq!(problem.name(), "misconfigured", "{name}={value}");
            assert!(problem.detail().starts_with(name), "{}", problem.detail());
            assert!(
                problem.detail().contains("forwarded again"),
                "{}",
                problem.detail()
            );
        }
        assert!(vars(&[("KEY_SOURCES", "json:/hook_id,body-sha256")]).is_ok());
        assert!(vars(&[("TENANT_HEADER", "none")]).is_ok());
        // The id Standard Webhooks signs is a key; scheme-key needs a scheme that makes one.
        let standard = config(&[
            ("SIGNATURE_SCHEME", "standard-webhooks"),
            ("SIGNING_SECRET", "whsec_c2VjcmV0"),
            ("KEY_SOURCES", "header:webhook-id"),
        ]);
        assert_eq!(standard.routes[0].key_sources.len(), 1);
        let map: HashMap<String, String> =
            [("ORIGIN_URL", "http://o"), ("KEY_SOURCES", "scheme-key")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let unsigned = Config::from_lookup(|name| map.get(name).cloned()).unwrap();
        assert_eq!(unsigned.broken[0].problem.name(), "misconfigured");
    }
}
