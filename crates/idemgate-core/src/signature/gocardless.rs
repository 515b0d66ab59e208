//! GoCardless: `Webhook-Signature: <hex HMAC-SHA256(webhook endpoint
//! secret, raw body)>` ("Webhooks", https://developer.gocardless.com/api-reference#webhooks).
//! One request holds up to 250 events, `{"events": [...], "meta":
//! {"webhook_id": ...}}`: a batch (SPEC §4, v4), cut into one delivery per
//! event, each keyed by its event's id (`json:/events/0/id` of the part
//! holding that event alone). GoCardless signs no time: a replayed batch
//! is held off by its events' keys for as long as they are kept
//! (`RETENTION_SECONDS`): a batch captured and replayed after that is new.

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::SchemeEntry;
use crate::batch::BatchFormat;

const HEADER: &str = "Webhook-Signature";

/// GoCardless's envelope: the events, and `meta`, about the webhook that
/// carried them (a re-sent event may come in another).
pub const FORMAT: BatchFormat = BatchFormat {
    events: "events",
    transmission: &["meta"],
    signature_headers: &["webhook-signature"],
    joined_before: false,
    accepted: None,
    // GoCardless signs the whole body: every member is the sender's.
    envelope: None,
};

pub const ENTRY: SchemeEntry = SchemeEntry::new("gocardless", "json:/events/0/id", |settings| {
    let key = key_of(&settings.required_secret("gocardless")?);
    Ok(Box::new(BodyHmac::new(key, HEADER, Encoding::Hex)))
})
.batching(&FORMAT);

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER;
    use crate::signature::tests::check;

    // Computed with `openssl dgst -sha256 -hmac` (an implementation apart
    // from this one); the Node tests check what the core signs against
    // GoCardless's own library (gocardless-nodejs's `webhooks.parse`).
    const SECRET: &str = "ElfOgjPDN7G9seOWm6cKHmDQzNDLCe3BnClOC2fs";
    const BODY: &[u8] = br#"{"events":[{"id":"EV0001","action":"confirmed","resource_type":"payments","links":{"payment":"PM0001"}}],"meta":{"webhook_id":"WB0001"}}"#;
    const SIGNATURE: &str = "a15936077c2b3b358f2122e50a9ad73dc1fd34cfe32269c989bcf08a84f9d345";

    #[test]
    fn accepts_an_independently_computed_signature() {
        assert_eq!(
            check(
                "gocardless",
                secret(SECRET),
                Some((HEADER, SIGNATURE)),
                BODY
            ),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_secret_and_a_missing_header() {
        let mut tampered = BODY.to_vec();
        tampered[20] ^= 1;
        let refused = |result: Result<(), String>| result.unwrap_err();
        assert!(refused(check(
            "gocardless",
            secret(SECRET),
            Some((HEADER, SIGNATURE)),
            &tampered
        ))
        .starts_with("mismatch"));
        assert!(refused(check(
            "gocardless",
            secret("other"),
            Some((HEADER, SIGNATURE)),
            BODY
        ))
        .starts_with("mismatch"));
        assert_eq!(
            check("gocardless", secret(SECRET), None, BODY),
            Err("missing header Webhook-Signature".into())
        );
    }
}
