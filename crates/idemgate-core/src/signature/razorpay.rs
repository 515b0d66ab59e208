//! Razorpay: `X-Razorpay-Signature: <hex HMAC-SHA256(webhook secret, raw body)>`.
//! Its event id (`x-razorpay-event-id`) is an unsigned header and the body
//! holds none, so the default key is the body's hash.

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::SchemeEntry;

const HEADER: &str = "X-Razorpay-Signature";

pub const ENTRY: SchemeEntry = SchemeEntry::new("razorpay", "body-sha256", |settings| {
    let key = key_of(&settings.required_secret("razorpay")?);
    Ok(Box::new(BodyHmac::new(key, HEADER, Encoding::Hex)))
});

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER;
    use crate::signature::tests::check;

    // Razorpay publishes no vector in its docs; this one is from its own
    // Node.js library's tests: razorpay/razorpay-node,
    // test/utils/razorpay-utils.spec.js.
    const SECRET: &str = "123456";
    const BODY: &[u8] = br#"{"a":1,"b":2,"c":{"d":3}}"#;
    const SIGNATURE: &str = "2fe04e22977002e6c7cb553adab8b460cb9e2a4970d5953cb27a8472752e3bbc";

    #[test]
    fn accepts_the_vector_of_razorpays_library() {
        assert_eq!(
            check("razorpay", secret(SECRET), Some((HEADER, SIGNATURE)), BODY),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_secret_and_a_missing_header() {
        assert!(check(
            "razorpay",
            secret(SECRET),
            Some((HEADER, SIGNATURE)),
            br#"{"a":1,"b":2,"c":{"d":4}}"#
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert!(check(
            "razorpay",
            secret("654321"),
            Some((HEADER, SIGNATURE)),
            BODY
        )
        .unwrap_err()
        .starts_with("mismatch"));
        assert_eq!(
            check("razorpay", secret(SECRET), None, BODY),
            Err(format!("missing header {HEADER}"))
        );
    }
}
