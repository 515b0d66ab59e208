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
    /// The binding it goes through instead of the network, if any.
    pub via: Option<String>,
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

/// What the forward's signatures cover (SPEC §5, v2).
///
/// `Idempotency-Signature` (`v1`) covers the first seven fields, as it
/// always has, so that an origin on a verifier of that version keeps
/// verifying. `Idempotency-Signature-V2` covers all nine: the seven, then
/// `Idempotency-Source` and `Idempotency-Stale`, which `v1` leaves open to
/// anyone on the path to the origin.
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
    /// `Idempotency-Source`, when the forward carries one.
    pub source: Option<&'a str>,
    /// Whether the forward carries `Idempotency-Stale: true`.
    pub stale: bool,
}

impl SignedForward<'_> {
    /// The seven lines `v1` covers, joined by `\n`.
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

    /// The nine lines `v2` covers: the seven of `v1`, then the
    /// `Idempotency-Source` value and the `Idempotency-Stale` value, each
    /// empty when the header is absent.
    pub fn content_v2(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.content(),
            self.source.unwrap_or(""),
            if self.stale { STALE_VALUE } else { "" }
        )
    }

    /// `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, content)>`.
    pub fn sign(&self, secret: &str) -> String {
        format!(
            "t={},v1={}",
            self.unix_seconds,
            hmac_hex(secret, &self.content())
        )
    }

    /// `t=<unix seconds>,v2=<hex HMAC-SHA256(secret, content_v2)>`, with the
    /// same `t` as [`SignedForward::sign`].
    pub fn sign_v2(&self, secret: &str) -> String {
        format!(
            "t={},v2={}",
            self.unix_seconds,
            hmac_hex(secret, &self.content_v2())
        )
    }
}

/// The only value of `Idempotency-Stale`.
pub const STALE_VALUE: &str = "true";

fn hmac_hex(secret: &str, content: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(content.as_bytes());
    hex::encode(mac.finalize().into_bytes())
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
    /// Sent as `Idempotency-Source` (e.g. `reconciliation`, on a forward
    /// that idemgate's reconciliation made); `None` on a live delivery.
    pub source: Option<&'a str>,
    /// Sent as `Idempotency-Stale: true` on a forward older than one
    /// already delivered for its entity.
    pub stale: bool,
}

impl OutboundRequest {
    /// Adds `Idempotency-Key`, `-Scope`, `-Epoch`, `-Source` and `-Stale`
    /// (each only when the forward has one) and, with a secret,
    /// `-Signature` and `-Signature-V2`. The inbound `Idempotency-*`
    /// headers were already removed by [`crate::headers::for_origin`].
    pub fn with_idempotency(mut self, idempotency: &Idempotency) -> OutboundRequest {
        self.headers.push((
            "idempotency-key".into(),
            idempotency.key.to_structured_field(),
        ));
        self.headers
            .push(("idempotency-scope".into(), idempotency.scope.to_string()));
        self.headers
            .push(("idempotency-epoch".into(), idempotency.epoch.to_string()));
        if let Some(source) = idempotency.source {
            self.headers
                .push(("idempotency-source".into(), source.to_string()));
        }
        if idempotency.stale {
            self.headers
                .push(("idempotency-stale".into(), STALE_VALUE.to_string()));
        }
        if let Some(secret) = idempotency.forward_secret {
            let forward = SignedForward {
                unix_seconds: idempotency.unix_seconds,
                method: &self.method,
                path_and_query: idempotency.path_and_query,
                scope: idempotency.scope,
                key: idempotency.key.as_str(),
                epoch: idempotency.epoch,
                body_sha256: idempotency.body_sha256,
                source: idempotency.source,
                stale: idempotency.stale,
            };
            let (v1, v2) = (forward.sign(secret), forward.sign_v2(secret));
            self.headers.push(("idempotency-signature".into(), v1));
            self.headers.push(("idempotency-signature-v2".into(), v2));
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
    fn readme_forward(body_sha256: &str) -> SignedForward<'_> {
        SignedForward {
            unix_seconds: 1_700_000_000,
            method: "POST",
            path_and_query: "/payments?currency=eur",
            scope: "aabe82377599cfe24a321be32fb823296555d5c4aa830b3d009e5faf378715fd",
            key: "order-42",
            epoch: 1_700_000_000_000_000,
            body_sha256,
            source: None,
            stale: false,
        }
    }

    #[test]
    fn forward_signature_test_vector() {
        let body_sha256 = sha256_hex(br#"{"amount":1000}"#);
        let forward = readme_forward(&body_sha256);
        assert_eq!(
            forward.content(),
            format!(
                "1700000000\nPOST\n/payments?currency=eur\n{}\norder-42\n1700000000000000\n{body_sha256}",
                forward.scope
            )
        );
        assert_eq!(forward.sign("whsec_test"), VECTOR);
        // Source and Stale are not in v1's content: what it signs is as it was.
        let reconciled = SignedForward {
            source: Some("reconciliation"),
            stale: true,
            ..forward
        };
        assert_eq!(reconciled.sign("whsec_test"), VECTOR);
    }

    const VECTOR: &str =
        "t=1700000000,v1=8e1ea884ae2ecdc87e84868792f99660b4abc821116df7295a93d13d6a0afa53";

    /// v2 of the README's forward, and of it as reconciliation would send
    /// it late, both computed independently with Python's hmac module:
    /// `hmac.new(b"whsec_test", (content + "\n" + source + "\n" + stale).encode(), hashlib.sha256)`.
    #[test]
    fn forward_signature_v2_test_vectors() {
        let body_sha256 = sha256_hex(br#"{"amount":1000}"#);
        let forward = readme_forward(&body_sha256);
        assert_eq!(forward.content_v2(), format!("{}\n\n", forward.content()));
        assert_eq!(forward.sign_v2("whsec_test"), VECTOR_V2);
        let cases = [
            (
                Some("reconciliation"),
                false,
                "453a2a58aca50d63d819775e2e603a11c2e823abb15655f5ea1b2027c5753df6",
            ),
            (
                None,
                true,
                "56b30e12aab2a9d30be15d238228e57793153e4819cb131b9e4c73b2d3e8efdc",
            ),
            (
                Some("reconciliation"),
                true,
                "a33ab68fdcf7820d9d99e1598b334049da0695db6e718e0636ac6ae2698b0e18",
            ),
        ];
        for (source, stale, v2) in cases {
            let signed = SignedForward {
                source,
                stale,
                ..forward
            };
            assert_eq!(
                signed.content_v2(),
                format!(
                    "{}\n{}\n{}",
                    forward.content(),
                    source.unwrap_or(""),
                    if stale { "true" } else { "" }
                )
            );
            assert_eq!(
                signed.sign_v2("whsec_test"),
                format!("t=1700000000,v2={v2}")
            );
        }
    }

    const VECTOR_V2: &str =
        "t=1700000000,v2=97b6ee9585b362364454abe474303feee33744719d8c5cd8c28e0ee5342d8bd1";

    fn names(request: &OutboundRequest) -> Vec<&str> {
        request
            .headers
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    #[test]
    fn idempotency_headers_are_added_and_signed_only_with_a_secret() {
        let key = IdempotencyKey::parse("order-42", "test").unwrap();
        let request = OutboundRequest {
            method: "POST".into(),
            url: "http://o/pay".into(),
            headers: vec![],
            body: b"{}".to_vec(),
            via: None,
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
            source: None,
            stale: false,
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
        let signed = request.clone().with_idempotency(&idempotency);
        assert_eq!(
            names(&signed),
            [
                "idempotency-key",
                "idempotency-scope",
                "idempotency-epoch",
                "idempotency-signature",
                "idempotency-signature-v2"
            ]
        );
        assert!(signed.headers[3].1.starts_with("t=1,v1="));
        assert!(signed.headers[4].1.starts_with("t=1,v2="));
        assert_eq!(signed.headers[3].1.len(), signed.headers[4].1.len());
    }

    #[test]
    fn source_and_stale_are_sent_only_when_set_and_signed_by_v2_only() {
        let key = IdempotencyKey::parse("order-42", "test").unwrap();
        let request = OutboundRequest {
            method: "POST".into(),
            url: "http://o/pay".into(),
            headers: vec![],
            body: b"{}".to_vec(),
            via: None,
        };
        let body_sha256 = sha256_hex(b"{}");
        let live = Idempotency {
            key: &key,
            scope: "s",
            epoch: 3,
            path_and_query: "/pay",
            body_sha256: &body_sha256,
            forward_secret: Some("k"),
            unix_seconds: 1,
            source: None,
            stale: false,
        };
        let reconciled = Idempotency {
            source: Some("reconciliation"),
            stale: true,
            ..live
        };
        let sent = request.clone().with_idempotency(&reconciled);
        assert_eq!(
            names(&sent),
            [
                "idempotency-key",
                "idempotency-scope",
                "idempotency-epoch",
                "idempotency-source",
                "idempotency-stale",
                "idempotency-signature",
                "idempotency-signature-v2"
            ]
        );
        assert_eq!(sent.headers[3].1, "reconciliation");
        assert_eq!(sent.headers[4].1, "true");
        let only_source = request.clone().with_idempotency(&Idempotency {
            stale: false,
            ..reconciled
        });
        assert!(names(&only_source).contains(&"idempotency-source"));
        assert!(!names(&only_source).contains(&"idempotency-stale"));
        let only_stale = request.clone().with_idempotency(&Idempotency {
            source: None,
            ..reconciled
        });
        assert!(!names(&only_stale).contains(&"idempotency-source"));
        assert!(names(&only_stale).contains(&"idempotency-stale"));
        // v1 is the same with or without them; v2 tells them apart.
        let live_sent = request.with_idempotency(&live);
        let value = |request: &OutboundRequest, name: &str| {
            request
                .headers
                .iter()
                .find(|(header, _)| header == name)
                .map(|(_, value)| value.clone())
                .unwrap()
        };
        assert_eq!(
            value(&sent, "idempotency-signature"),
            value(&live_sent, "idempotency-signature")
        );
        let v2s = [&sent, &only_source, &only_stale, &live_sent]
            .map(|request| value(request, "idempotency-signature-v2"));
        for (at, v2) in v2s.iter().enumerate() {
            assert!(!v2s[at + 1..].contains(v2), "{v2s:?}");
        }
    }
}
