//! Shopify: `X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256(secret, raw body)>`
//! (`Shopify-Hmac-Sha256` on its newer event webhooks, read when the `X-`
//! header is absent, as Shopify's own library does).
//! Shopify signs no time; its ids (`X-Shopify-Webhook-Id`) are unsigned
//! headers, so the default key is the body's hash.

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::SchemeEntry;

const HEADER: &str = "X-Shopify-Hmac-Sha256";

pub const ENTRY: SchemeEntry = SchemeEntry::new("shopify", "body-sha256", |settings| {
    let key = key_of(&settings.required_secret("shopify")?);
    Ok(Box::new(BodyHmac {
        also_header: Some("Shopify-Hmac-Sha256"),
        ..BodyHmac::new(key, HEADER, Encoding::Base64)
    }))
});

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER;
    use crate::signature::tests::check;

    // Shopify publishes no vector in its docs; this one is from its own
    // PHP library's tests: Shopify/shopify-api-php,
    // tests/Webhooks/RegistryTest.php with the key of tests/BaseTestCase.php.
    const SECRET: &str = "7008c5f4da4718b9b45d26d3fcbbb157";
    const BODY: &[u8] = br#"{"foo":"bar"}"#;
    const SIGNATURE: &str = "+R9TwYM4mbLTk3hEAOBkpA7zW2lc9vNFmVKs2u2jtyY=";

    #[test]
    fn accepts_the_vector_of_shopifys_library() {
        assert_eq!(
            check("shopify", secret(SECRET), Some((HEADER, SIGNATURE)), BODY),
            Ok(())
        );
    }

    /// The same signature under the header name of Shopify's event
    /// webhooks (shopify-api 13.0.0 `webhooks.validate` takes it).
    #[test]
    fn accepts_the_event_webhooks_header_name() {
        assert_eq!(
            check(
                "shopify",
                secret(SECRET),
                Some(("Shopify-Hmac-Sha256", SIGNATURE)),
                BODY
            ),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_secret_and_a_missing_header() {
        assert!(check(
            "shopify",
            secret(SECRET),
            Some((HEADER, SIGNATURE)),
            br#"{"foo":"baz"}"#
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert!(check(
            "shopify",
            secret("shpss_other"),
            Some((HEADER, SIGNATURE)),
            BODY
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert_eq!(
            check("shopify", secret(SECRET), None, BODY),
            Err(format!("missing header {HEADER}"))
        );
        assert!(check(
            "shopify",
            secret(SECRET),
            Some((HEADER, "not base64!")),
            BODY
        )
        .unwrap_err()
        .starts_with("malformed"));
    }
}
