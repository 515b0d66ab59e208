//! Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]`, where
//! v1 = hex HMAC-SHA256(secret, "<t>.<raw body>"). Any matching v1 passes
//! (Stripe sends several while a secret is being rolled); other schemes'
//! entries (`v0`) are ignored. The event id `id` is in the signed body.

use super::mac::{TimestampedHeader, TimestampedHeaderScheme, TimestampedMac};
use super::SchemeEntry;

pub const ENTRY: SchemeEntry = SchemeEntry::new("stripe", "json:/id", |settings| {
    Ok(Box::new(TimestampedHeaderScheme {
        format: &FORMAT,
        secret: settings.required_secret("stripe")?,
    }))
});

const FORMAT: TimestampedHeader = TimestampedHeader {
    header: "Stripe-Signature",
    separator: ',',
    time: "t",
    signature: "v1",
    no_time: "no t= timestamp",
    not_a_time: "t is not a Unix time",
    no_signature: "no v1= signature",
    mac: TimestampedMac {
        before_time: b"",
        after_time: b".",
    },
    // Stripe's libraries sign the time as a number, whatever its spelling.
    time_signed_as_sent: false,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::Rejection;

    fn verify(
        secret: &[u8],
        tolerance: u64,
        headers: &[(String, String)],
        body: &[u8],
        now: u64,
    ) -> Result<(), Rejection> {
        FORMAT.verify(secret, tolerance, headers, body, now)
    }

    const SECRET: &[u8] = b"whsec_stripe_test";
    const BODY: &[u8] = br#"{"id":"evt_1","type":"payment_intent.succeeded"}"#;
    const T: u64 = 1_700_000_000;
    // hex HMAC-SHA256(SECRET, "1700000000." + BODY), computed independently
    // with Python's hmac module.
    const V1: &str = "9a23a3e7e09bbabc9257b79dfd9321cee836f37586b8a0c05900133b3693adae";

    fn check(header: Option<&str>, body: &[u8], now: u64) -> Result<(), Rejection> {
        let headers: Vec<(String, String)> = header
            .map(|value| vec![("stripe-signature".to_string(), value.to_string())])
            .unwrap_or_default();
        verify(SECRET, 300, &headers, body, now)
    }

    #[test]
    fn accepts_the_vector_and_any_matching_v1() {
        assert_eq!(check(Some(&format!("t={T},v1={V1}")), BODY, T), Ok(()));
        let rolled = format!("t={T},v1={},v1={V1},v0=abc", "00".repeat(32));
        assert_eq!(check(Some(&rolled), BODY, T + 300), Ok(()));
    }

    #[test]
    fn empty_and_unknown_entries_are_ignored_as_stripes_libraries_do() {
        for header in [
            format!("t={T},v1={V1},"),
            format!("t={T},,v1={V1}"),
            format!("t={T},v1={V1},foo=bar,v0=abc"),
            format!("junk,t={T},v1={V1}"),
        ] {
            assert_eq!(check(Some(&header), BODY, T), Ok(()), "{header}");
        }
    }

    #[test]
    fn rejects_each_failure_with_its_reason() {
        let valid = format!("t={T},v1={V1}");
        assert_eq!(check(None, BODY, T), Err(Rejection::missing(FORMAT.header)));
        assert_eq!(
            check(Some(&valid), b"{\"id\":\"evt_2\"}", T),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(Some(&valid), BODY, T + 600),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(Some(&valid), BODY, T - 600),
            Err(Rejection::Stale { .. })
        ));
        for malformed in [
            format!("v1={V1}"),
            format!("t=soon,v1={V1}"),
            format!("t={T}"),
            "garbage".to_string(),
        ] {
            assert!(
                matches!(
                    check(Some(&malformed), BODY, T),
                    Err(Rejection::Malformed(..))
                ),
                "{malformed}"
            );
        }
        assert_eq!(
            check(Some(&format!("t={T},v1=zz")), BODY, T),
            Err(Rejection::Mismatch)
        );
    }

    #[test]
    fn a_wrong_secret_is_a_mismatch() {
        let headers = vec![("stripe-signature".to_string(), format!("t={T},v1={V1}"))];
        assert_eq!(
            verify(b"whsec_other", 300, &headers, BODY, T),
            Err(Rejection::Mismatch)
        );
    }
}
