//! The shape GitHub, Shopify, Checkout.com, Razorpay, Adyen's platform
//! webhooks and the generic `hmac` scheme share: one header holding the
//! HMAC-SHA256 of the raw body, hex or base64, perhaps after a fixed
//! prefix. None of them signs a time, so none can refuse an old delivery:
//! the idempotency key does that. Each provider's file says which header,
//! encoding, prefix and key it uses, and how lenient its sender's own
//! libraries are.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;

use super::mac::{any_matches, mac_of, set_header, tag_of};
use super::{Message, Rejection, Scheme, SecretBytes, SignedRequest, Verdict};
use crate::headers;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

/// One HMAC-SHA256 of the raw body in one header.
#[derive(Debug)]
pub struct BodyHmac {
    pub key: SecretBytes,
    pub header: String,
    /// Another name the sender gives the same header (Shopify's newer
    /// webhooks drop the `X-`), read when `header` is absent.
    pub also_header: Option<&'static str>,
    pub encoding: Encoding,
    pub prefix: String,
    /// Several signatures in the header (comma- or space-separated), and
    /// base64 URL-safe or unpadded: where the sender's libraries take them.
    pub lenient: bool,
}

impl BodyHmac {
    /// One tag in `header`, in `encoding`, with no prefix.
    pub fn new(key: SecretBytes, header: &str, encoding: Encoding) -> BodyHmac {
        BodyHmac {
            key,
            header: header.to_string(),
            also_header: None,
            encoding,
            prefix: String::new(),
            lenient: false,
        }
    }

    /// The signature(s) the header holds, decoded; `None` for one that
    /// does not decode (it then matches nothing).
    fn candidates<'a>(&'a self, value: &'a str) -> Result<Vec<Option<Vec<u8>>>, Rejection> {
        let header = self.header.as_str();
        let entries: Vec<&str> = match self.lenient {
            true => value
                .split([',', ' '])
                .filter(|entry| !entry.trim().is_empty())
                .collect(),
            false => vec![value],
        };
        let mut candidates = Vec::new();
        for entry in entries {
            let encoded = entry
                .trim()
                .strip_prefix(self.prefix.as_str())
                .ok_or_else(|| Rejection::malformed(header, "the signature lacks its prefix"))?;
            let decoded = match (self.encoding, self.lenient) {
                (Encoding::Hex, _) => hex::decode(encoded).ok(),
                (Encoding::Base64, false) => STANDARD.decode(encoded).ok(),
                (Encoding::Base64, true) => [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
                    .iter()
                    .find_map(|engine| engine.decode(encoded).ok()),
            };
            candidates.push(decoded);
        }
        if candidates.iter().all(Option::is_none) {
            let what = match self.encoding {
                Encoding::Hex => "the signature is not hex",
                Encoding::Base64 => "the signature is not base64",
            };
            return Err(Rejection::malformed(header, what));
        }
        Ok(candidates)
    }
}

impl Scheme for BodyHmac {
    fn signature_header(&self) -> Option<&str> {
        Some(&self.header)
    }

    fn verify(
        &self,
        request: &SignedRequest,
        _now: u64,
        _tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        let header = self.header.as_str();
        let value = headers::get(request.headers, header)
            .or_else(|| {
                self.also_header
                    .and_then(|also| headers::get(request.headers, also))
            })
            .ok_or_else(|| Rejection::missing(header))?;
        any_matches(
            &mac_of(self.key.expose(), &[request.body]),
            self.candidates(value)?.into_iter(),
        )
        .map(|()| Verdict::Verified)
    }

    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, _now: u64) {
        let tag = tag_of(self.key.expose(), &[&message.body]);
        let encoded = match self.encoding {
            Encoding::Hex => hex::encode(tag),
            Encoding::Base64 => STANDARD.encode(tag),
        };
        set_header(
            &mut message.headers,
            &self.header,
            format!("{}{encoded}", self.prefix),
        );
    }
}

/// A secret used as its bytes, as most senders use theirs.
pub fn key_of(secret: &super::Secret) -> SecretBytes {
    SecretBytes::new(secret.expose().as_bytes().to_vec())
}

#[cfg(test)]
pub(super) mod tests {
    use crate::signature::SchemeSettings;

    pub fn secret(secret: &str) -> SchemeSettings {
        SchemeSettings {
            secret: Some(secret.to_string()),
            ..SchemeSettings::default()
        }
    }
}
