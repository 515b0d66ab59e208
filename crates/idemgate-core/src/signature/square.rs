//! Square: `x-square-hmacsha256-signature: <base64 HMAC-SHA256(signature
//! key, notification URL + raw body)>`. The URL is the one registered with
//! Square (`SIGNATURE_URL`), byte for byte: rebuilding it from the request
//! would break behind any proxy or route. No time is signed; the event id
//! `event_id` is in the signed body.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::mac::{any_matches, base64_signature, mac_of, set_header, tag_of};
use super::{Message, Rejection, Scheme, SchemeEntry, Secret, SignedRequest, Verdict};

pub const ENTRY: SchemeEntry = SchemeEntry::new("square", "json:/event_id", |settings| {
    let url = settings.required_url(
        "square",
        "the notification URL registered with Square, byte for byte",
    )?;
    Ok(Box::new(Square {
        key: settings.required_secret("square")?,
        url,
    }))
});

const HEADER: &str = "x-square-hmacsha256-signature";

#[derive(Debug)]
struct Square {
    key: Secret,
    /// The notification URL registered with Square, signed before the body.
    url: String,
}

impl Scheme for Square {
    fn verify(
        &self,
        request: &SignedRequest,
        _now: u64,
        _tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        verify(
            self.key.expose().as_bytes(),
            &self.url,
            request.headers,
            request.body,
        )
        .map(|()| Verdict::Verified)
    }

    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, _now: u64) {
        let tag = tag_of(
            self.key.expose().as_bytes(),
            &[self.url.as_bytes(), &message.body],
        );
        set_header(&mut message.headers, HEADER, STANDARD.encode(tag));
    }
}

fn verify(
    key: &[u8],
    url: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), Rejection> {
    let signature = base64_signature(headers, HEADER)?;
    any_matches(
        &mac_of(key, &[url.as_bytes(), body]),
        std::iter::once(Some(signature)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Square's docs show no worked values; this vector is from Square's own
    // SDK tests: square/square-python-sdk,
    // legacy/tests/utilities/test_webhooks_helper.py (the same values are in
    // square/square-nodejs-sdk, tests/integration/webhooks.test.ts).
    const URL: &str = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
    const KEY: &str = "Ibxx_5AKakO-3qeNVR61Dw";
    const BODY: &str = r#"{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z","data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}"#;
    const SIGNATURE: &str = "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=";

    fn check(key: &str, url: &str, signature: Option<&str>, body: &str) -> Result<(), Rejection> {
        let headers: Vec<(String, String)> = signature
            .map(|value| vec![(HEADER.to_string(), value.to_string())])
            .unwrap_or_default();
        verify(key.as_bytes(), url, &headers, body.as_bytes())
    }

    #[test]
    fn accepts_the_vectors_of_squares_libraries() {
        assert_eq!(check(KEY, URL, Some(SIGNATURE), BODY), Ok(()));
        // The body's `>` and `<` are signed as sent, not as `\u003e`.
        assert_eq!(
            check(
                "signature-key",
                "https://webhook.site/webhooks",
                Some("Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U="),
                r#"{"data":{"type":"webhooks","id":">id<"}}"#
            ),
            Ok(())
        );
    }

    #[test]
    fn the_url_the_key_and_the_body_are_all_signed() {
        let other_url = "https://webhook.site/79a4f3a-dcfa-49ee-bac5-9d0edad886b9";
        assert_eq!(
            check(KEY, other_url, Some(SIGNATURE), BODY),
            Err(Rejection::Mismatch)
        );
        assert_eq!(
            check("MCmhFRxGX82xMwg5FsaoQA", URL, Some(SIGNATURE), BODY),
            Err(Rejection::Mismatch)
        );
        let tampered = BODY.replace("2022-07-13", "2022-06-13");
        assert_eq!(
            check(KEY, URL, Some(SIGNATURE), &tampered),
            Err(Rejection::Mismatch)
        );
        assert_eq!(check(KEY, URL, None, BODY), Err(Rejection::missing(HEADER)));
        assert!(matches!(
            check(KEY, URL, Some("%%%"), BODY),
            Err(Rejection::Malformed(..))
        ));
    }
}
