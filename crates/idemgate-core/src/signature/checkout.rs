//! Checkout.com: `Cko-Signature: <hex HMAC-SHA256(signature key, raw body)>`.
//! The event id `id` (`evt_...`) is in the signed body: the default key.

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::SchemeEntry;

const HEADER: &str = "Cko-Signature";

pub const ENTRY: SchemeEntry = SchemeEntry::new("checkout", "json:/id", |settings| {
    let key = key_of(&settings.required_secret("checkout")?);
    Ok(Box::new(BodyHmac::new(key, HEADER, Encoding::Hex)))
});

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER;
    use crate::signature::tests::check;

    // Checkout.com publishes no vector; this one was computed with
    // Python's hmac module over an event shaped like its docs' example.
    const SECRET: &str = "cko_whsk_selftest_0123456789";
    const BODY: &[u8] = br#"{"id":"evt_caxmnvuvbe4elkbdx2imwbnjxu","type":"payment_approved","version":"1.0.29","created_on":"2023-05-22T11:56:04.8821546Z","data":{"id":"pay_griq7wyqkggu7mnk7ecm6ysrl4","amount":20,"currency":"USD"}}"#;
    const SIGNATURE: &str = "7def4d7114e77c593417a73d2df4959b40f1ceecdabcbbc5897ddde26820bccc";

    #[test]
    fn accepts_an_independently_computed_vector() {
        assert_eq!(
            check("checkout", secret(SECRET), Some((HEADER, SIGNATURE)), BODY),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_secret_and_a_missing_header() {
        let mut tampered = BODY.to_vec();
        tampered[10] ^= 1;
        assert!(check(
            "checkout",
            secret(SECRET),
            Some((HEADER, SIGNATURE)),
            &tampered
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert!(
            check("checkout", secret("other"), Some((HEADER, SIGNATURE)), BODY)
                .unwrap_err()
                .starts_with("mismatch")
        );
        assert_eq!(
            check("checkout", secret(SECRET), None, BODY),
            Err(format!("missing header {HEADER}"))
        );
    }
}
