//! The shape GitHub, Shopify, Checkout.com, Razorpay and the generic `hmac`
//! scheme share: one header holding the HMAC-SHA256 of the raw body, hex or
//! base64, perhaps after a fixed prefix. None of them signs a time, so none
//! can refuse an old delivery: the idempotency key does that. Each
//! provider's file says which header, encoding and prefix it uses.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::mac::{any_matches, mac_of, set_header, tag_of};
use super::{Message, Rejection, Scheme, Secret, SignedRequest};
use crate::headers;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

/// One HMAC-SHA256 of the raw body in one header.
#[derive(Debug)]
pub struct BodyHmac {
    pub secret: Secret,
    pub header: String,
    pub encoding: Encoding,
    pub prefix: String,
    pub default_key_sources: &'static str,
}

impl Scheme for BodyHmac {
    fn default_key_sources(&self) -> &'static str {
        self.default_key_sources
    }

    fn verify(&self, request: &SignedRequest, _now: u64, _tolerance: u64) -> Result<(), Rejection> {
        let header = self.header.as_str();
        let value =
            headers::get(request.headers, header).ok_or_else(|| Rejection::missing(header))?;
        let encoded = value
            .trim()
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(|| Rejection::malformed(header, "the signature lacks its prefix"))?;
        let decoded = match self.encoding {
            Encoding::Hex => hex::decode(encoded)
                .map_err(|_| Rejection::malformed(header, "the signature is not hex"))?,
            Encoding::Base64 => STANDARD
                .decode(encoded)
                .map_err(|_| Rejection::malformed(header, "the signature is not base64"))?,
        };
        any_matches(
            &mac_of(self.secret.expose().as_bytes(), &[request.body]),
            std::iter::once(Some(decoded)),
        )
    }

    fn sign(&self, message: &mut Message, _now: u64) {
        let tag = tag_of(self.secret.expose().as_bytes(), &[&message.body]);
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
