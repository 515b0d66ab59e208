//! The forward to the origin (SPEC §5): its URL, and the idempotency
//! headers idemgate adds and signs.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::headers::HeaderList;
use crate::key::IdempotencyKey;

/// A request about to leave for the origin, as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRequest {
    pub method: String,
    pub url: String,
    pub headers: HeaderList,
    pub body: Vec<u8>,
}

/// Where a forward goes: the route's origin + the request path (as sent) +
/// the query. `origin_url` has no trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    /// The path and query as the origin receives them: what is signed.
    pub path_and_query: String,
}

pub fn target(origin_url: &str, path: &str, query: Option<&str>) -> Target {
    let base_path = origin_url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|at| &rest[at..]))
        .unwrap_or("");
    let path_and_query = match query {
        Some(query) if !query.is_empty() => format!("{base_path}{path}?{query}"),
        _ => format!("{base_path}{path}"),
    };
    let url = match query {
        Some(query) if !query.is_empty() => format!("{origin_url}{path}?{query}"),
        _ => format!("{origin_url}{path}"),
    };
    Target {
        url,
        path_and_query,
    }
}

/// What `Idempotency-Signature` covers (SPEC §5, v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedForward<'a> {
    pub unix_seconds: u64,
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub scope: &'a str,
    pub key: &'a str,
    pub epoch: u64,
    /// Hex SHA-256 of the raw body.
    pub body_sha256: &'a str,
}

impl SignedForward<'_> {
    /// The seven lines, joined by `\n`.
    pub fn content(&self) -> String {
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n{}",
            self.unix_seconds,
            self.method,
            self.path_and_query,
            self.scope,
            self.key,
            self.epoch,
            self.body_sha256
        )
    }

    /// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, content)>`.
    pub fn sign(&self, secret: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(self.content().as_bytes());
        format!(
            "t={},v1={}",
            self.unix_seconds,
            hex::encode(mac.finalize().into_bytes())
        )
    }
}

/// Everything a forward's idempotency headers say.
#[derive(Debug, Clone, Copy)]
pub struct Idempotency<'a> {
    pub key: &'a IdempotencyKey,
    pub scope: &'a str,
    pub epoch: u64,
    pub path_and_query: &'a str,
    pub body_sha256: &'a str,
    pub forward_secret: Option<&'a str>,
    pub unix_seconds: u64,
}

impl OutboundRequest {
    /// Adds `Idempotency-Key`, `-Scope`, `-Epoch` and, with a secret,
    /// `-Signature`. The inbound `Idempotency-*` headers were already
    /// removed by [`crate::headers::for_origin`].
    pub fn with_idempotency(mut self, idempotency: &Idempotency) -> OutboundRequest {
        self.headers.push((
            "idempotency-key".into(),
            idempotency.key.to_structured_field(),
        ));
        self.headers
            .push(("idempotency-scope".into(), idempotency.scope.to_string()));
        self.headers
            .push(("idempotency-epoch".into(), idempotency.epoch.to_string()));
        if let Some(secret) = idempotency.forward_secret {
            let signature = SignedForward {
                unix_seconds: idempotency.unix_seconds,
                method: &self.method,
                path_and_query: idempotency.path_and_query,
                scope: idempotency.scope,
                key: idempotency.key.as_str(),
                epoch: idempotency.epoch,
                body_sha256: idempotency.body_sha256,
            }
            .sign(secret);
            self.headers
                .push(("idempotency-signature".into(), signature));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::sha256_hex;

    #[test]
    fn the_target_appends_path_and_query_to_the_origin() {
        let to = target("https://o.example/api", "/pay", Some("a=1"));
        assert_eq!(to.url, "https://o.example/api/pay?a=1");
        assert_eq!(to.path_and_query, "/api/pay?a=1");
        let bare = target("http://o:8080", "/pay", Some(""));
        assert_eq!(bare.url, "http://o:8080/pay");
        assert_eq!(bare.path_and_query, "/pay");
    }

    /// The README's test vector, computed independently with Python's hmac
    /// module (the origin crate and the snippets check the same).
    #[test]
    fn forward_signature_test_vector() {
        let body_sha256 = sha256_hex(br#"{"amount":1000}"#);
        let forward = SignedForward {
            unix_seconds: 1_700_000_000,
            method: "POST",
            path_and_query: "/payments?currency=eur",
            scope: "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd",
            key: "order-42",
            epoch: 1_700_000_000_000_000,
            body_sha256: &body_sha256,
        };
        assert_eq!(
            forward.content(),
            format!(
                "1700000000\nPOST\n/payments?currency=eur\n{}\norder-42\n1700000000000000\n{body_sha256}",
                forward.scope
            )
        );
        assert_eq!(forward.sign("whsec_test"), VECTOR);
    }

    const VECTOR: &str =
        "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53";

    #[test]
    fn idempotency_headers_are_added_and_signed_only_with_a_secret() {
        let key = IdempotencyKey::parse("order-42", "test").unwrap();
        let request = OutboundRequest {
            method: "POST".into(),
            url: "http://o/pay".into(),
            headers: vec![],
            body: b"{}".to_vec(),
        };
        let body_sha256 = sha256_hex(b"{}");
        let mut idempotency = Idempotency {
            key: &key,
            scope: "s",
            epoch: 3,
            path_and_query: "/pay",
            body_sha256: &body_sha256,
            forward_secret: None,
            unix_seconds: 1,
        };
        let unsigned = request.clone().with_idempotency(&idempotency);
        assert_eq!(
            unsigned.headers,
            vec![
                ("idempotency-key".to_string(), "\"order-42\"".to_string()),
                ("idempotency-scope".to_string(), "s".to_string()),
                ("idempotency-epoch".to_string(), "3".to_string()),
            ]
        );
        idempotency.forward_secret = Some("k");
        let signed = request.with_idempotency(&idempotency);
        assert_eq!(signed.headers.len(), 4);
        assert!(signed.headers[3].1.starts_with("t=1,v1="));
    }
}
