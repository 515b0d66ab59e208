//! Slack (Events API, slash commands, interactivity): `X-Slack-Signature:
//! v0=<hex HMAC-SHA256(signing secret, "v0:<timestamp>:<raw body>")>`, the
//! time in `X-Slack-Request-Timestamp`, refused outside the tolerance in
//! either direction (as Slack's Python SDK does). Slack retries an event
//! with the same `event_id`: the default key. A `url_verification`
//! challenge has none, nor has a slash command or an interactivity
//! callback (a form, not JSON), so each is keyed by its body's hash and
//! still reaches the origin, which answers it.

use super::mac::{hex_signature, set_header, Timestamped, TimestampedMac};
use super::{
    required_header, Message, Rejection, Scheme, SchemeEntry, Secret, Signed, SignedBody,
    SignedRequest, Verdict,
};

/// The event's `event_id` (a JSON event), else the body's hash: a
/// slash command or an interactivity callback is a form, which a
/// `json:` source would refuse (415) before the hash is reached.
pub const ENTRY: SchemeEntry = SchemeEntry::new("slack", "scheme-key,body-sha256", |settings| {
    Ok(Box::new(Slack {
        secret: settings.required_secret("slack")?,
    }))
})
.signing(Signed {
    headers: &["x-slack-request-timestamp"],
    body: SignedBody::Whole,
})
.making_scheme_key();

const SIGNATURE: &str = "X-Slack-Signature";
const MAC: TimestampedMac = TimestampedMac {
    before_time: b"v0:",
    after_time: b":",
};
const TIMESTAMP: &str = "X-Slack-Request-Timestamp";

#[derive(Debug)]
struct Slack {
    secret: Secret,
}

impl Scheme for Slack {
    /// A JSON event's `event_id` (the key `json:/event_id` made, so
    /// receipts stored under it are found); nothing for a form.
    fn scheme_key(&self, request: &SignedRequest) -> Option<String> {
        let event = crate::json::parse(request.body).ok()?;
        event.get("event_id")?.as_str().map(str::to_string)
    }

    fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        let header = |name: &str| required_header(request.headers, name);
        let signature = header(SIGNATURE)?;
        let timestamp_text = header(TIMESTAMP)?.trim();
        let timestamp = timestamp_text
            .parse::<u64>()
            .map_err(|_| Rejection::malformed(TIMESTAMP, "not a Unix time"))?;
        let signature = signature
            .trim()
            .strip_prefix("v0=")
            .ok_or_else(|| Rejection::malformed(SIGNATURE, "not v0=<hex>"))?;
        let sent = Timestamped {
            signed_time: timestamp_text.into(),
            seconds: timestamp,
            signatures: vec![signature],
        };
        MAC.verify(
            self.secret.expose().as_bytes(),
            &sent,
            request.body,
            now,
            tolerance,
            hex_signature,
        )
        .map(|()| Verdict::Verified)
    }

    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, now: u64) {
        let t = now.to_string();
        let tag = MAC.tag(self.secret.expose().as_bytes(), &t, &message.body);
        set_header(&mut message.headers, TIMESTAMP, t);
        set_header(
            &mut message.headers,
            SIGNATURE,
            format!("v0={}", hex::encode(tag)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's published example ("Verifying requests from Slack"), as its
    // Python SDK's tests use it.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const T: u64 = 1_531_420_618;
    const BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    const SIGNATURE_V0: &str =
        "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

    fn check(
        signature: Option<&str>,
        t: Option<&str>,
        body: &[u8],
        now: u64,
    ) -> Result<Verdict, Rejection> {
        let headers: Vec<(String, String)> = [
            ("x-slack-signature", signature),
            ("x-slack-request-timestamp", t),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|value| (name.to_string(), value.to_string())))
        .collect();
        Slack {
            secret: Secret::new(SECRET.into()),
        }
        .verify(
            &SignedRequest {
                headers: &headers,
                body,
                query: None,
            },
            now,
            300,
        )
    }

    fn scheme_key_of(body: &[u8]) -> Option<String> {
        let headers = Vec::new();
        Slack {
            secret: Secret::new(SECRET.into()),
        }
        .scheme_key(&SignedRequest {
            headers: &headers,
            body,
            query: None,
        })
    }

    /// The review's case (round 4, item 13): Slack's published example is
    /// a slash command, a form. Its key comes from its body's hash; an
    /// event's from its `event_id`, as `json:/event_id` made it.
    #[test]
    fn a_form_has_no_scheme_key_and_an_event_has_its_id() {
        assert_eq!(scheme_key_of(BODY), None);
        assert_eq!(
            scheme_key_of(br#"{"type":"event_callback","event_id":"Ev08MFMKH6"}"#),
            Some("Ev08MFMKH6".into())
        );
        assert_eq!(
            scheme_key_of(br#"{"type":"url_verification","challenge":"x"}"#),
            None
        );
    }

    #[test]
    fn accepts_slacks_published_example() {
        assert_eq!(
            check(Some(SIGNATURE_V0), Some("1531420618"), BODY, T),
            Ok(Verdict::Verified)
        );
    }

    #[test]
    fn rejects_each_failure_with_its_reason() {
        let t = Some("1531420618");
        assert_eq!(
            check(Some(SIGNATURE_V0), t, b"token=x", T),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(Some(SIGNATURE_V0), t, BODY, T + 301),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(Some(SIGNATURE_V0), t, BODY, T - 301),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(None, t, BODY, T),
            Err(Rejection::MissingHeader(_))
        ));
        assert!(matches!(
            check(Some(SIGNATURE_V0), None, BODY, T),
            Err(Rejection::MissingHeader(_))
        ));
        let v1 = SIGNATURE_V0.replace("v0=", "v1=");
        assert!(matches!(
            check(Some(&v1), t, BODY, T),
            Err(Rejection::Malformed(..))
        ));
        assert_eq!(
            check(Some(SIGNATURE_V0), Some("1531420619"), BODY, T),
            Err(Rejection::Mismatch),
            "the time is signed"
        );
    }
}
