//! Adyen's Balance Platform and Management webhooks: `HmacSignature:
//! <base64 HMAC-SHA256(hex-decoded HMAC key, raw body)>`. No time is signed;
//! the whole body is, so its hash is the default key. Adyen's own library
//! decodes the signature before comparing, so URL-safe or unpadded base64
//! passes here too.

use super::body_hmac::{BodyHmac, Encoding};
use super::{setting_error, SchemeEntry, SecretBytes};

pub const ENTRY: SchemeEntry = SchemeEntry::new("adyen-platform", "body-sha256", |settings| {
    let secret = settings.required_secret("adyen-platform")?;
    let key = super::adyen::decode_key(secret.expose())
        .map_err(|reason| setting_error("SIGNING_SECRET", reason))?;
    Ok(Box::new(BodyHmac {
        lenient: true,
        ..BodyHmac::new(SecretBytes::new(key), HEADER, Encoding::Base64)
    }))
});

const HEADER: &str = "HmacSignature";

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER;
    use crate::signature::tests::check;

    // The key of Adyen's own library tests (Adyen/adyen-node-api-library,
    // hmacValidator.spec.ts); the body is made here and its signature was
    // computed with Python's hmac module. Adyen's library itself checks
    // such deliveries in the official-library tests.
    const KEY: &str = "11223344D785FBAE710E7F943F307971BB61B21281C98C9129B3D4018A57B2EB";
    const BODY: &[u8] = br#"{"data":{"balancePlatform":"YOUR_BALANCE_PLATFORM","accountHolder":{"id":"AH3227C223222C5GXQXF658WB","status":"active"}},"environment":"test","type":"balancePlatform.accountHolder.created"}"#;
    const SIGNATURE: &str = "0oHQfu3vCnWKGDw48xEfWM0rrS7zsNSRP3B+GoPzZwE=";

    #[test]
    fn accepts_an_independently_computed_vector() {
        assert_eq!(
            check(
                "adyen-platform",
                secret(KEY),
                Some((HEADER, SIGNATURE)),
                BODY
            ),
            Ok(())
        );
        let unpadded = SIGNATURE.trim_end_matches('=');
        assert_eq!(
            check(
                "adyen-platform",
                secret(KEY),
                Some((HEADER, unpadded)),
                BODY
            ),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_key_and_a_missing_header() {
        let mut tampered = BODY.to_vec();
        tampered[20] ^= 1;
        assert!(check(
            "adyen-platform",
            secret(KEY),
            Some((HEADER, SIGNATURE)),
            &tampered
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert!(check(
            "adyen-platform",
            secret(&"00".repeat(32)),
            Some((HEADER, SIGNATURE)),
            BODY
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert_eq!(
            check("adyen-platform", secret(KEY), None, BODY),
            Err(format!("missing header {HEADER}"))
        );
    }
}
