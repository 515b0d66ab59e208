//! Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]`,
//! where h1 = hex HMAC-SHA256(endpoint secret, "<ts>:<raw body>"). Any
//! matching `h1` passes (Paddle signs with both secrets while one is
//! rotated); unknown entries are ignored. The timestamp is signed, so a
//! stale one is refused. The event id `event_id` is in the signed body.

use super::mac::{TimestampedHeader, TimestampedHeaderScheme, TimestampedMac};
use super::SchemeEntry;

pub const ENTRY: SchemeEntry = SchemeEntry::new("paddle", "json:/event_id", |settings| {
    Ok(Box::new(TimestampedHeaderScheme {
        format: &FORMAT,
        secret: settings.required_secret("paddle")?,
    }))
});

const FORMAT: TimestampedHeader = TimestampedHeader {
    header: "Paddle-Signature",
    separator: ';',
    time: "ts",
    signature: "h1",
    no_time: "no ts= timestamp",
    not_a_time: "ts is not a Unix time",
    no_signature: "no h1= signature",
    mac: TimestampedMac {
        before_time: b"",
        after_time: b":",
    },
    // Paddle signs the time as it was written in the header.
    time_signed_as_sent: true,
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

    fn check(secret: &str, header: Option<&str>, body: &[u8], now: u64) -> Result<(), Rejection> {
        let headers: Vec<(String, String)> = header
            .map(|value| vec![("paddle-signature".to_string(), value.to_string())])
            .unwrap_or_default();
        verify(secret.as_bytes(), 300, &headers, body, now)
    }

    // Paddle's docs show a header without its body or secret; these
    // vectors are from Paddle's own SDK tests.
    // PaddleHQ/paddle-go-sdk, webhook_verifier_test.go:
    const GO_SECRET: &str =
        "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr";
    const GO_HEADER: &str =
        "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8";
    const GO_BODY: &str = r#"{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}"#;

    #[test]
    fn accepts_the_vector_of_paddles_go_library() {
        assert_eq!(
            check(
                GO_SECRET,
                Some(GO_HEADER),
                GO_BODY.as_bytes(),
                1_710_929_255
            ),
            Ok(())
        );
    }

    #[test]
    fn any_h1_may_match_while_a_secret_rotates() {
        // PaddleHQ/paddle-python-sdk, tests/Unit/Notification/test_Verifier.py:
        // the second h1 is the one the current secret made.
        let header = "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02";
        let secret = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh";
        assert_eq!(
            check(secret, Some(header), b"hello-world", 1_696_195_954),
            Ok(())
        );
        let other = "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4";
        assert_eq!(
            check(other, Some(header), b"hello-world", 1_696_195_954),
            Err(Rejection::Mismatch)
        );
        // PaddleHQ/paddle-node-sdk's vector carries an unknown h2 entry.
        let node = "ts=1698796800;h1=28981e941fae76e53db32f3d2a83cb69db41476595e84e1970a1b5d98f62b261;h2=RANDOM_HASH";
        assert_eq!(
            check(
                "VALID_SECRET",
                Some(node),
                br#"{"data": "value"}"#,
                1_698_796_800
            ),
            Ok(())
        );
    }

    #[test]
    fn empty_and_unknown_entries_are_ignored_as_paddles_libraries_do() {
        let t = 1_710_929_255;
        for header in [
            format!("{GO_HEADER};"),
            GO_HEADER.replace(';', ";;"),
            format!("{GO_HEADER};h2=RANDOM"),
        ] {
            assert_eq!(
                check(GO_SECRET, Some(&header), GO_BODY.as_bytes(), t),
                Ok(()),
                "{header}"
            );
        }
    }

    #[test]
    fn rejects_each_failure_with_its_reason() {
        let body = GO_BODY.as_bytes();
        let t = 1_710_929_255;
        assert_eq!(
            check(GO_SECRET, None, body, t),
            Err(Rejection::missing(FORMAT.header))
        );
        assert_eq!(
            check(GO_SECRET, Some(GO_HEADER), b"{}", t),
            Err(Rejection::Mismatch)
        );
        assert_eq!(
            check("pdl_other", Some(GO_HEADER), body, t),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(GO_SECRET, Some(GO_HEADER), body, t + 301),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(GO_SECRET, Some(GO_HEADER), body, t - 301),
            Err(Rejection::Stale { .. })
        ));
        for malformed in ["h1=00", "ts=soon;h1=00", "ts=1", "garbage"] {
            assert!(
                matches!(
                    check(GO_SECRET, Some(malformed), body, t),
                    Err(Rejection::Malformed(..))
                ),
                "{malformed}"
            );
        }
    }
}
