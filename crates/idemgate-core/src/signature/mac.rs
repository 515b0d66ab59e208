//! What the HMAC schemes share: the MAC itself, the comparison against the
//! signatures a sender sent, the freshness of a signed time, the template
//! of the schemes that sign a time ([`TimestampedMac`]: Stripe, Paddle,
//! Slack), the header shape Stripe and Paddle use, and one base64
//! signature in a header (Square, Twilio).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::{required_header, Rejection};

/// HMAC-SHA256 under `key` of `parts` written one after the other.
pub fn mac_of(key: &[u8], parts: &[&[u8]]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    for part in parts {
        mac.update(part);
    }
    mac
}

/// The tag of [`mac_of`], for signing.
#[cfg_attr(not(feature = "sign"), allow(dead_code))] // used by `sign` alone
pub fn tag_of(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    mac_of(key, parts).finalize().into_bytes().to_vec()
}

/// Passes if any decodable candidate is `mac`'s tag, compared in constant
/// time; senders list several while rolling a secret.
pub fn any_matches(
    mac: &Hmac<Sha256>,
    mut candidates: impl Iterator<Item = Option<Vec<u8>>>,
) -> Result<(), Rejection> {
    if candidates.any(|candidate| {
        candidate.is_some_and(|signature| mac.clone().verify_slice(&signature).is_ok())
    }) {
        Ok(())
    } else {
        Err(Rejection::Mismatch)
    }
}

/// Schemes that sign a timestamp refuse one too far in the past or the future.
pub fn check_freshness(timestamp: u64, now: u64, tolerance: u64) -> Result<(), Rejection> {
    let skew_seconds = timestamp.abs_diff(now);
    if skew_seconds > tolerance {
        return Err(Rejection::Stale {
            skew_seconds,
            tolerance,
        });
    }
    Ok(())
}

/// A scheme that signs `<before><time><after><raw body>` with HMAC-SHA256
/// and sends the time beside its signatures: verified and signed the same
/// way whatever the headers they travel in.
pub struct TimestampedMac {
    pub before_time: &'static [u8],
    pub after_time: &'static [u8],
}

impl TimestampedMac {
    /// A fresh time, then any signature that `decode`s to the tag of what
    /// was signed with that time's text.
    pub fn verify(
        &self,
        secret: &[u8],
        sent: &Timestamped,
        body: &[u8],
        now: u64,
        tolerance: u64,
        decode: fn(&str) -> Option<Vec<u8>>,
    ) -> Result<(), Rejection> {
        check_freshness(sent.seconds, now, tolerance)?;
        any_matches(
            &mac_of(secret, &self.parts(&sent.signed_time, body)),
            sent.signatures.iter().map(|signature| decode(signature)),
        )
    }

    /// The tag of `body` signed at `time` (its text as sent).
    #[cfg_attr(not(feature = "sign"), allow(dead_code))] // used by `sign` alone
    pub fn tag(&self, secret: &[u8], time: &str, body: &[u8]) -> Vec<u8> {
        tag_of(secret, &self.parts(time, body))
    }

    fn parts<'a>(&self, time: &'a str, body: &'a [u8]) -> [&'a [u8]; 4] {
        [self.before_time, time.as_bytes(), self.after_time, body]
    }
}

/// The one base64 signature in the header `name`.
pub fn base64_signature(headers: &[(String, String)], name: &str) -> Result<Vec<u8>, Rejection> {
    STANDARD
        .decode(required_header(headers, name)?.trim())
        .map_err(|_| Rejection::malformed(name, "the signature is not base64"))
}

/// A hex signature's bytes.
pub fn hex_signature(signature: &str) -> Option<Vec<u8>> {
    hex::decode(signature).ok()
}

/// The shape Stripe and Paddle share: one header of `name=value` entries,
/// a signed Unix time and any number of signatures (several while a
/// secret rotates). As their official libraries do, entries of other
/// names, empty ones and ones without `=` are ignored (`t=..,v1=..,`);
/// a missing or non-numeric time is refused.
pub struct TimestampedHeader {
    pub header: &'static str,
    pub separator: char,
    pub time: &'static str,
    pub signature: &'static str,
    /// What is signed around the time.
    pub mac: TimestampedMac,
    /// Whether the time is signed as written in the header (Paddle), or
    /// as the number it is, however it was spelled (Stripe).
    pub time_signed_as_sent: bool,
    pub no_time: &'static str,
    pub not_a_time: &'static str,
    pub no_signature: &'static str,
}

/// A signed time as sent: its text as signed, as seconds, and the
/// signatures.
pub struct Timestamped<'a> {
    pub signed_time: std::borrow::Cow<'a, str>,
    pub seconds: u64,
    pub signatures: Vec<&'a str>,
}

impl TimestampedHeader {
    pub fn parse<'a>(&self, headers: &'a [(String, String)]) -> Result<Timestamped<'a>, Rejection> {
        let value = required_header(headers, self.header)?;
        let mut time_text = None;
        let mut signatures = Vec::new();
        for entry in value.split(self.separator) {
            match entry.trim().split_once('=') {
                Some((name, text)) if name == self.time => time_text = Some(text),
                Some((name, signature)) if name == self.signature => signatures.push(signature),
                _ => {}
            }
        }
        let time_text = time_text.ok_or_else(|| Rejection::malformed(self.header, self.no_time))?;
        let seconds = time_text
            .parse::<u64>()
            .map_err(|_| Rejection::malformed(self.header, self.not_a_time))?;
        if signatures.is_empty() {
            return Err(Rejection::malformed(self.header, self.no_signature));
        }
        let signed_time = match self.time_signed_as_sent {
            true => std::borrow::Cow::Borrowed(time_text),
            false => std::borrow::Cow::Owned(seconds.to_string()),
        };
        Ok(Timestamped {
            signed_time,
            seconds,
            signatures,
        })
    }

    /// Verifies a delivery signed in this header's shape with hex tags.
    pub fn verify(
        &self,
        secret: &[u8],
        tolerance: u64,
        headers: &[(String, String)],
        body: &[u8],
        now: u64,
    ) -> Result<(), Rejection> {
        let sent = self.parse(headers)?;
        self.mac
            .verify(secret, &sent, body, now, tolerance, hex_signature)
    }

    /// Signs `headers` for `body` at `now`: `<time>=<now><separator><signature>=<hex tag>`.
    #[cfg_attr(not(feature = "sign"), allow(dead_code))] // used by `sign` alone
    pub fn sign(&self, secret: &[u8], headers: &mut Vec<(String, String)>, body: &[u8], now: u64) {
        let time = now.to_string();
        let tag = self.mac.tag(secret, &time, body);
        let value = format!(
            "{}={time}{}{}={}",
            self.time,
            self.separator,
            self.signature,
            hex::encode(tag)
        );
        set_header(headers, self.header, value);
    }
}

/// Sets `name` to `value` in `headers`, replacing any earlier value.
#[cfg_attr(not(feature = "sign"), allow(dead_code))] // used by `sign` alone
pub fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: String) {
    headers.retain(|(header, _)| !header.eq_ignore_ascii_case(name));
    headers.push((name.to_ascii_lowercase(), value));
}

/// A scheme that is one [`TimestampedHeader`] over the raw body and
/// nothing else (Stripe, Paddle): its format and its secret. Each such
/// sender's file names its format (and, in its entry, its key); this
/// holds what they would write alike.
pub struct TimestampedHeaderScheme {
    pub format: &'static TimestampedHeader,
    pub secret: super::Secret,
}

/// Names the format by its header; never the secret.
impl std::fmt::Debug for TimestampedHeaderScheme {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("TimestampedHeaderScheme")
            .field("header", &self.format.header)
            .field("secret", &self.secret)
            .finish()
    }
}

impl super::Scheme for TimestampedHeaderScheme {
    fn verify(
        &self,
        request: &super::SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<super::Verdict, Rejection> {
        self.format
            .verify(
                self.secret.expose().as_bytes(),
                tolerance,
                request.headers,
                request.body,
                now,
            )
            .map(|()| super::Verdict::Verified)
    }

    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut super::Message, now: u64) {
        self.format.sign(
            self.secret.expose().as_bytes(),
            &mut message.headers,
            &message.body,
            now,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freshness_is_symmetric_and_inclusive() {
        assert!(check_freshness(1_000, 1_300, 300).is_ok());
        assert!(check_freshness(1_300, 1_000, 300).is_ok());
        assert!(check_freshness(1_000, 1_301, 300).is_err());
        assert!(check_freshness(1_301, 1_000, 300).is_err());
    }
}
