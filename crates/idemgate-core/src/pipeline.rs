//! SPEC §1 as a sequence of small steps, each returning early with its
//! problem. Everything here is pure; the Worker's `gateway` does the I/O around it.

use serde_json::Value;

use crate::canonical::{is_json_media_type, parse_json, Fingerprint};
use crate::config::Config;
use crate::headers::{self, HeaderList};
use crate::key::{derive_key, IdempotencyKey, KeyInput, Scope};
use crate::origin::target_url;
use crate::problem::Problem;
use crate::signature;

pub const OPERATOR_PREFIX: &str = "/__idemgate/";

/// Step 1: what kind of request this is, from its method and path alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/__idemgate/...`: never forwarded, never deduplicated.
    Operator,
    /// GET, HEAD, OPTIONS: proxied unchanged, no Durable Object.
    Passthrough,
    /// POST, PUT, PATCH, DELETE.
    Deduplicate,
    Reject(Problem),
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

pub fn route(method: &str, path: &str) -> Route {
    if path.starts_with(OPERATOR_PREFIX) {
        return Route::Operator;
    }
    match method.to_ascii_uppercase().as_str() {
        "GET" | "HEAD" | "OPTIONS" => Route::Passthrough,
        "POST" | "PUT" | "PATCH" | "DELETE" => Route::Deduplicate,
        _ => Route::Reject(Problem::MethodNotAllowed {
            method: method.to_string(),
        }),
    }
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
    config: &Config,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> Result<BodyFraming, Problem> {
    let declared = content_length.and_then(|value| value.trim().parse::<u64>().ok());
    match declared {
        Some(length) if length > config.max_body_bytes => Err(Problem::PayloadTooLarge {
            limit: config.max_body_bytes,
        }),
        Some(_) if transfer_encoding.is_none() => Ok(BodyFraming::Declared),
        _ => Ok(BodyFraming::Streamed),
    }
}

/// A deduplicated request as the pipeline sees it.
pub struct Inbound<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// Unix seconds, for the freshness of sender signatures.
    pub now: u64,
}

/// A delivery that passed every check: ready for its Durable Object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    /// Name of the Durable Object that holds this key's receipt.
    pub object_name: String,
    pub origin_url: String,
    /// The sender's headers as the origin will see them, before idemgate's own.
    pub forward_headers: HeaderList,
}

/// Steps 2 to 5: size, sender authentication, key, fingerprint and scope.
/// The first failing check answers; nothing reaches a Durable Object.
pub fn admit(config: &Config, inbound: &Inbound) -> Result<Admitted, Problem> {
    if inbound.body.len() as u64 > config.max_body_bytes {
        return Err(Problem::PayloadTooLarge {
            limit: config.max_body_bytes,
        });
    }
    signature::verify(
        &config.signature_scheme,
        config.signature_tolerance_seconds,
        inbound.headers,
        inbound.body,
        inbound.now,
    )?;
    let content_type = headers::get(inbound.headers, "content-type");
    let json: Option<Value> = match content_type {
        Some(media_type) if is_json_media_type(media_type) => Some(parse_json(inbound.body)?),
        _ => None,
    };
    let fingerprint = match &json {
        Some(value) => Fingerprint::of_json(value),
        None => Fingerprint::of_bytes(inbound.body),
    };
    let key = derive_key(
        &config.key_sources,
        &KeyInput {
            headers: inbound.headers,
            content_type,
            json: json.as_ref(),
            fingerprint: &fingerprint,
        },
    )?;
    let tenant = match &config.tenant_header {
        Some(name) => {
            Some(
                headers::get(inbound.headers, name).ok_or_else(|| Problem::MissingTenant {
                    header: name.clone(),
                })?,
            )
        }
        None => None,
    };
    let scope = Scope {
        kind: config.key_scope,
        path: inbound.path,
        tenant,
    };
    Ok(Admitted {
        object_name: scope.object_name(&key),
        key,
        fingerprint,
        origin_url: target_url(&config.origin_url, inbound.path, inbound.query),
        forward_headers: headers::for_origin(inbound.headers),
    })
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
        ] {
            let parsed = url::Url::parse(raw).unwrap();
            let serialized = parsed.as_str();
            assert_eq!(
                path_and_query(serialized),
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

    fn admit_json(
        config: &Config,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Result<Admitted, Problem> {
        let mut list = headers(&[("content-type", "application/json")]);
        list.extend(headers(extra));
        admit(
            config,
            &Inbound {
                method: "POST",
                path: "/pay",
                query: Some("x=1"),
                headers: &list,
                body: body.as_bytes(),
                now: 0,
            },
        )
    }

    #[test]
    fn routes_by_method_and_operator_prefix() {
        assert_eq!(route("GET", "/x"), Route::Passthrough);
        assert_eq!(route("head", "/x"), Route::Passthrough);
        assert_eq!(route("OPTIONS", "/x"), Route::Passthrough);
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            assert_eq!(route(method, "/x"), Route::Deduplicate);
        }
        assert_eq!(route("POST", "/__idemgate/health"), Route::Operator);
        assert!(matches!(route("TRACE", "/x"), Route::Reject(p) if p.status() == 405));
    }

    #[test]
    fn declared_length_over_the_limit_is_413() {
        let config = config(&[]);
        assert_eq!(
            body_framing(&config, Some("64"), None),
            Ok(BodyFraming::Declared)
        );
        assert_eq!(
            body_framing(&config, Some("65"), None)
                .unwrap_err()
                .status(),
            413
        );
    }

    #[test]
    fn a_body_without_a_binding_length_is_streamed() {
        let config = config(&[]);
        for (length, encoding) in [
            (None, None),
            (None, Some("chunked")),
            (Some("10"), Some("chunked")),
            (Some("ten"), None),
        ] {
            assert_eq!(
                body_framing(&config, length, encoding),
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
            &[("idempotency-key", "\"k1\""), ("idempotency-epoch", "7")],
            r#"{"b":1, "a":2}"#,
        )
        .unwrap();
        assert_eq!(admitted.key.as_str(), "k1");
        assert_eq!(
            admitted.fingerprint,
            Fingerprint::of_bytes(br#"{"a":2,"b":1}"#)
        );
        assert_eq!(admitted.origin_url, "http://origin:9/base/pay?x=1");
        assert_eq!(
            admitted.forward_headers,
            headers(&[("content-type", "application/json")])
        );
    }

    #[test]
    fn each_rejection_has_its_status() {
        let config = config(&[]);
        let status = |extra: &[(&str, &str)], body: &str| {
            admit_json(&config, extra, body).unwrap_err().status()
        };
        assert_eq!(status(&[], &"x".repeat(65)), 413);
        assert_eq!(status(&[], "{not json"), 400);
        assert_eq!(status(&[], "{}"), 400);
        assert_eq!(status(&[("idempotency-key", "")], "{}"), 400);
        assert_eq!(status(&[("idempotency-key", "caf\u{e9}")], "{}"), 400);
        assert_eq!(status(&[("idempotency-key", &"k".repeat(256))], "{}"), 400);
    }

    #[test]
    fn the_signature_is_checked_before_the_key() {
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
    fn raw_bodies_fingerprint_as_bytes() {
        let config = config(&[("KEY_SOURCES", "header:Idempotency-Key")]);
        let list = headers(&[("content-type", "text/plain"), ("idempotency-key", "k")]);
        let admitted = admit(
            &config,
            &Inbound {
                method: "POST",
                path: "/p",
                query: None,
                headers: &list,
                body: b"{ \"a\": 1 }",
                now: 0,
            },
        )
        .unwrap();
        assert_eq!(admitted.fingerprint, Fingerprint::of_bytes(b"{ \"a\": 1 }"));
    }

    #[test]
    fn tenant_header_is_required_when_configured_and_scopes_the_object() {
        let config = config(&[("TENANT_HEADER", "Authorization")]);
        assert_eq!(
            admit_json(&config, &[("idempotency-key", "k")], "{}")
                .unwrap_err()
                .name(),
            "missing-tenant"
        );
        let a = admit_json(
            &config,
            &[("idempotency-key", "k"), ("authorization", "Bearer a")],
            "{}",
        );
        let b = admit_json(
            &config,
            &[("idempotency-key", "k"), ("authorization", "Bearer b")],
            "{}",
        );
        assert_ne!(a.unwrap().object_name, b.unwrap().object_name);
    }
}
