//! The shape GitHub, Shopify, Checkout.com, Razorpay and the generic `hmac`
//! scheme share: one header holding the HMAC-SHA256 of the raw body, hex or
//! base64, perhaps after a fixed prefix. None of them signs a time, so none
//! can refuse an old delivery: the idempotency key does that.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::{any_matches, mac_of, Rejection};
use crate::headers;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

pub fn verify(
    key: &[u8],
    header: &str,
    encoding: Encoding,
    prefix: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), Rejection> {
    let value = headers::get(headers, header).ok_or_else(|| Rejection::missing(header))?;
    let encoded = value
        .trim()
        .strip_prefix(prefix)
        .ok_or_else(|| Rejection::malformed(header, "the signature lacks its prefix"))?;
    let decoded = match encoding {
        Encoding::Hex => hex::decode(encoded)
            .map_err(|_| Rejection::malformed(header, "the signature is not hex"))?,
        Encoding::Base64 => STANDARD
            .decode(encoded)
            .map_err(|_| Rejection::malformed(header, "the signature is not base64"))?,
    };
    any_matches(&mac_of(key, &[body]), std::iter::once(Some(decoded)))
}

#[cfg(test)]
pub(super) mod tests {
    use crate::signature::{verify, SchemeSettings, SignatureScheme};

    /// Verifies `body` under a header of `name: value` with the scheme `scheme`.
    pub fn check(
        scheme: &str,
        settings: SchemeSettings,
        header: Option<(&str, &str)>,
        body: &[u8],
    ) -> Result<(), String> {
        let scheme = SignatureScheme::configure(scheme, &settings).unwrap();
        let headers: Vec<(String, String)> = header
            .map(|(name, value)| vec![(name.to_ascii_lowercase(), value.to_string())])
            .unwrap_or_default();
        verify(&scheme, 300, &headers, body, 0).map_err(|problem| problem.detail())
    }

    pub fn secret(secret: &str) -> SchemeSettings {
        SchemeSettings {
            secret: Some(secret.to_string()),
            ..SchemeSettings::default()
        }
    }

    #[test]
    fn the_generic_scheme_reads_its_header_encoding_and_prefix() {
        let settings = |encoding: &str, prefix: Option<&str>| SchemeSettings {
            header: Some("X-Signature".into()),
            encoding: Some(encoding.into()),
            prefix: prefix.map(str::to_string),
            ..secret("s3cret")
        };
        let body = br#"{"id":1}"#;
        let tag = hmac::Mac::finalize(super::mac_of(b"s3cret", &[body])).into_bytes();
        let as_hex = hex::encode(tag);
        let as_base64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, tag);
        let signed = format!("v1={as_hex}");
        assert_eq!(
            check(
                "hmac",
                settings("hex", Some("v1=")),
                Some(("x-signature", &signed)),
                body
            ),
            Ok(())
        );
        assert_eq!(
            check(
                "hmac",
                settings("base64", None),
                Some(("X-Signature", &as_base64)),
                body
            ),
            Ok(())
        );
        assert!(check(
            "hmac",
            settings("hex", Some("v1=")),
            Some(("x-signature", &as_hex)),
            body
        )
        .unwrap_err()
        .starts_with("malformed X-Signature"));
        assert!(check(
            "hmac",
            settings("hex", None),
            Some(("x-signature", &as_base64)),
            body
        )
        .unwrap_err()
        .starts_with("malformed"));
        assert_eq!(
            check("hmac", settings("hex", None), None, body),
            Err("missing header X-Signature".into())
        );
        assert!(check(
            "hmac",
            settings("hex", None),
            Some(("x-signature", &as_hex)),
            b"{}"
        )
        .unwrap_err()
        .starts_with("mismatch"));
    }
}
