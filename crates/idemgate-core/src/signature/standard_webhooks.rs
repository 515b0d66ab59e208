//! Standard Webhooks: `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` (space-separated `v1,<base64>` entries) over
//! "<id>.<timestamp>.<raw body>", keyed by the base64 part of a `whsec_`
//! secret. The id is signed: it is the default key.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::mac::{any_matches, check_freshness, mac_of, set_header, tag_of};
use super::{
    setting_error, Message, Rejection, Scheme, SchemeEntry, SecretBytes, Signed, SignedBody,
    SignedRequest,
};
use crate::headers;

pub const ENTRY: SchemeEntry = SchemeEntry {
    name: "standard-webhooks",
    configure: |settings| {
        let secret = settings.required_secret("standard-webhooks")?;
        let key = decode_secret(secret.expose())
            .map_err(|reason| setting_error("SIGNING_SECRET", reason))?;
        Ok(Box::new(StandardWebhooks {
            key: SecretBytes::new(key),
        }))
    },
};

const ID: &str = "webhook-id";
const TIMESTAMP: &str = "webhook-timestamp";
const SIGNATURE: &str = "webhook-signature";

#[derive(Debug)]
struct StandardWebhooks {
    key: SecretBytes,
}

impl Scheme for StandardWebhooks {
    fn default_key_sources(&self) -> &'static str {
        "header:webhook-id"
    }

    fn signed(&self) -> Signed {
        Signed {
            headers: &[ID, TIMESTAMP],
            body: SignedBody::Whole,
        }
    }

    fn verify(&self, request: &SignedRequest, now: u64, tolerance: u64) -> Result<(), Rejection> {
        verify(
            self.key.expose(),
            tolerance,
            request.headers,
            request.body,
            now,
        )
    }

    /// Keeps a `webhook-id` the message has (a retry reuses it), else
    /// makes one from the body's hash.
    fn sign(&self, message: &mut Message, now: u64) {
        let id = match headers::get(&message.headers, ID) {
            Some(id) => id.to_string(),
            None => format!("msg_{}", &crate::canonical::sha256_hex(&message.body)[..24]),
        };
        let t = now.to_string();
        let tag = tag_of(
            self.key.expose(),
            &[id.as_bytes(), b".", t.as_bytes(), b".", &message.body],
        );
        set_header(&mut message.headers, ID, id);
        set_header(&mut message.headers, TIMESTAMP, t);
        set_header(
            &mut message.headers,
            SIGNATURE,
            format!("v1,{}", STANDARD.encode(tag)),
        );
    }
}

/// The HMAC key of a `whsec_<base64>` secret (the prefix is optional).
pub fn decode_secret(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    match STANDARD.decode(encoded) {
        Ok(key) if !key.is_empty() => Ok(key),
        _ => Err("is not whsec_ followed by base64".into()),
    }
}

fn verify(
    key: &[u8],
    tolerance: u64,
    headers: &[(String, String)],
    body: &[u8],
    now: u64,
) -> Result<(), Rejection> {
    let header = |name: &str| headers::get(headers, name).ok_or_else(|| Rejection::missing(name));
    let id = header(ID)?;
    let timestamp_text = header(TIMESTAMP)?;
    let signatures = header(SIGNATURE)?;
    let timestamp = timestamp_text
        .trim()
        .parse::<u64>()
        .map_err(|_| Rejection::malformed(TIMESTAMP, "not a Unix time"))?;
    let candidates: Vec<&str> = signatures
        .split(' ')
        .filter_map(|entry| entry.strip_prefix("v1,"))
        .collect();
    if candidates.is_empty() {
        return Err(Rejection::malformed(SIGNATURE, "no v1,<base64> entry"));
    }
    check_freshness(timestamp, now, tolerance)?;
    any_matches(
        &mac_of(
            key,
            &[
                id.as_bytes(),
                b".",
                timestamp_text.trim().as_bytes(),
                b".",
                body,
            ],
        ),
        candidates
            .iter()
            .map(|candidate| STANDARD.decode(candidate).ok()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Standard Webhooks specification's published test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const T: u64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE_V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn headers(
        id: Option<&str>,
        timestamp: Option<&str>,
        signature: Option<&str>,
    ) -> Vec<(String, String)> {
        [(ID, id), (TIMESTAMP, timestamp), (SIGNATURE, signature)]
            .into_iter()
            .filter_map(|(name, value)| value.map(|value| (name.to_string(), value.to_string())))
            .collect()
    }

    fn check(list: &[(String, String)], body: &[u8], now: u64) -> Result<(), Rejection> {
        verify(&decode_secret(SECRET).unwrap(), 300, list, body, now)
    }

    #[test]
    fn accepts_the_published_vector() {
        let list = headers(Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
        assert_eq!(check(&list, BODY, T), Ok(()));
        let several = format!("v1,AAAA {SIGNATURE_V1} v2,xyz");
        let list = headers(Some(MSG_ID), Some("1614265330"), Some(&several));
        assert_eq!(check(&list, BODY, T + 299), Ok(()));
    }

    #[test]
    fn rejects_each_failure_with_its_reason() {
        let valid = headers(Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
        assert_eq!(
            check(&valid, br#"{"test": 2432232315}"#, T),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(&valid, BODY, T + 600),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(&valid, BODY, T - 600),
            Err(Rejection::Stale { .. })
        ));
        let other_id = headers(Some("msg_other"), Some("1614265330"), Some(SIGNATURE_V1));
        assert_eq!(check(&other_id, BODY, T), Err(Rejection::Mismatch));
        for (name, list) in [
            (ID, headers(None, Some("1614265330"), Some(SIGNATURE_V1))),
            (TIMESTAMP, headers(Some(MSG_ID), None, Some(SIGNATURE_V1))),
            (SIGNATURE, headers(Some(MSG_ID), Some("1614265330"), None)),
        ] {
            assert_eq!(check(&list, BODY, T), Err(Rejection::missing(name)));
        }
        let malformed = headers(Some(MSG_ID), Some("yesterday"), Some(SIGNATURE_V1));
        assert!(matches!(
            check(&malformed, BODY, T),
            Err(Rejection::Malformed(..))
        ));
        let no_v1 = headers(Some(MSG_ID), Some("1614265330"), Some("v2,abc"));
        assert!(matches!(
            check(&no_v1, BODY, T),
            Err(Rejection::Malformed(..))
        ));
    }

    #[test]
    fn a_wrong_secret_is_a_mismatch() {
        let list = headers(Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
        let other = decode_secret("whsec_c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=").unwrap();
        assert_eq!(
            verify(&other, 300, &list, BODY, T),
            Err(Rejection::Mismatch)
        );
    }

    #[test]
    fn secrets_decode_with_or_without_prefix() {
        assert_eq!(
            decode_secret(SECRET),
            decode_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        );
        assert!(decode_secret("whsec_***").is_err());
        assert!(decode_secret("whsec_").is_err());
    }
}
