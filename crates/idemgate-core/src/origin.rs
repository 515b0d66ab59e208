//! The forward to the origin (SPEC §5): its URL, and the idempotency
//! headers idemgate adds and signs.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::canonical::sha256_hex;
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

/// `ORIGIN_URL` + request path + query. `origin_url` has no trailing slash.
pub fn target_url(origin_url: &str, path: &str, query: Option<&str>) -> String {
    match query {
        Some(query) if !query.is_empty() => format!("{origin_url}{path}?{query}"),
        _ => format!("{origin_url}{path}"),
    }
}

/// `Idempotency-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret,
/// "<t>.<key>.<epoch>.<hex SHA-256 of the raw body>")>`.
pub fn forward_signature(
    secret: &str,
    unix_seconds: u64,
    key: &str,
    epoch: u64,
    body: &[u8],
) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(format!("{unix_seconds}.{key}.{epoch}.{}", sha256_hex(body)).as_bytes());
    format!(
        "t={unix_seconds},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

impl OutboundRequest {
    /// Adds `Idempotency-Key`, `Idempotency-Epoch` and, with a secret,
    /// `Idempotency-Signature`. The inbound `Idempotency-*` headers were
    /// already removed by [`crate::headers::for_origin`].
    pub fn with_idempotency(
        mut self,
        key: &IdempotencyKey,
        epoch: u64,
        forward_secret: Option<&str>,
        unix_seconds: u64,
    ) -> OutboundRequest {
        self.headers
            .push(("idempotency-key".into(), key.to_structured_field()));
        self.headers
            .push(("idempotency-epoch".into(), epoch.to_string()));
        if let Some(secret) = forward_secret {
            let signature =
                forward_signature(secret, unix_seconds, key.as_str(), epoch, &self.body);
            self.headers
                .push(("idempotency-signature".into(), signature));
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeySource;

    #[test]
    fn target_url_appends_path_and_query() {
        assert_eq!(
            target_url("https://o.example/api", "/pay", Some("a=1")),
            "https://o.example/api/pay?a=1"
        );
        assert_eq!(target_url("http://o", "/pay", None), "http://o/pay");
        assert_eq!(target_url("http://o", "/pay", Some("")), "http://o/pay");
    }

    #[test]
    fn forward_signature_test_vector() {
        // Checked independently with Python's hmac module; the README gives it too.
        assert_eq!(
            forward_signature(
                "whsec_test",
                1_700_000_000,
                "order-42",
                1,
                br#"{"amount":1000}"#
            ),
            "t=1700000000,v1=c46fbc568198cf52410b61e17ba4499119045ceefb61c910d5906e4c50549f96"
        );
    }

    #[test]
    fn idempotency_headers_are_added_and_signed_only_with_a_secret() {
        let key = IdempotencyKey::parse("order-42", &KeySource::BodySha256).unwrap();
        let request = OutboundRequest {
            method: "POST".into(),
            url: "http://o/pay".into(),
            headers: vec![],
            body: b"{}".to_vec(),
        };
        let unsigned = request.clone().with_idempotency(&key, 3, None, 1);
        assert_eq!(
            unsigned.headers,
            vec![
                ("idempotency-key".to_string(), "\"order-42\"".to_string()),
                ("idempotency-epoch".to_string(), "3".to_string()),
            ]
        );
        let signed = request.with_idempotency(&key, 3, Some("s"), 1);
        assert_eq!(signed.headers.len(), 3);
        assert!(signed.headers[2].1.starts_with("t=1,v1="));
    }
}
