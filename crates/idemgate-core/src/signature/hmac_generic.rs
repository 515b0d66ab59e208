//! The generic `hmac` scheme, for senders not listed: the HMAC-SHA256 of
//! the raw body in the header `SIGNATURE_HEADER`, `SIGNATURE_ENCODING`
//! `hex` (any case) or `base64` (standard or URL-safe, padded or not),
//! after an optional `SIGNATURE_PREFIX` (`sha256=`); several signatures,
//! comma- or space-separated, pass when any one matches. Nothing else is
//! signed, so the default key is the body's hash.

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::{setting_error, SchemeEntry, SchemeSettings, SettingError};
use crate::headers::is_header_name;

pub const ENTRY: SchemeEntry = SchemeEntry::new("hmac", "body-sha256", |settings| {
    Ok(Box::new(configure(settings)?))
});

fn configure(settings: &SchemeSettings) -> Result<BodyHmac, SettingError> {
    let header = settings
        .header
        .clone()
        .ok_or_else(|| setting_error("SIGNATURE_HEADER", "is required by SIGNATURE_SCHEME=hmac"))?;
    if !is_header_name(&header) {
        return Err(setting_error("SIGNATURE_HEADER", "is not a header name"));
    }
    let encoding = match settings.encoding.as_deref() {
        Some(text) if text.eq_ignore_ascii_case("hex") => Encoding::Hex,
        Some(text) if text.eq_ignore_ascii_case("base64") => Encoding::Base64,
        Some(text) => {
            return Err(setting_error(
                "SIGNATURE_ENCODING",
                format!("{text:?} is not one of hex, base64"),
            ))
        }
        None => {
            return Err(setting_error(
                "SIGNATURE_ENCODING",
                "is required by SIGNATURE_SCHEME=hmac (hex or base64)",
            ))
        }
    };
    let key = key_of(&settings.required_secret("hmac")?);
    Ok(BodyHmac {
        prefix: settings.prefix.clone().unwrap_or_default(),
        lenient: true,
        ..BodyHmac::new(key, &header, encoding)
    })
}

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use crate::signature::tests::check;
    use crate::signature::{SchemeSettings, SignatureScheme};

    #[test]
    fn the_generic_scheme_reads_its_header_encoding_and_prefix() {
        let settings = |encoding: &str, prefix: Option<&str>| SchemeSettings {
            header: Some("X-Signature".into()),
            encoding: Some(encoding.into()),
            prefix: prefix.map(str::to_string),
            ..secret("s3cret")
        };
        let body = br#"{"id":1}"#;
        let tag =
            hmac::Mac::finalize(crate::signature::mac::mac_of(b"s3cret", &[body])).into_bytes();
        let as_hex = hex::encode(tag);
        let as_base64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, tag);
        let signed = format!("v1={as_hex}");
        assert_eq!(
            check(
                "hmac",
                settings("hex", Some("v1=")),
                Some(("x-signature", &signed)),
                body
            ),
            Ok(())
        );
        assert_eq!(
            check(
                "hmac",
                settings("base64", None),
                Some(("X-Signature", &as_base64)),
                body
            ),
            Ok(())
        );
        assert!(check(
            "hmac",
            settings("hex", Some("v1=")),
            Some(("x-signature", &as_hex)),
            body
        )
        .unwrap_err()
        .starts_with("malformed X-Signature"));
        assert!(check(
            "hmac",
            settings("hex", None),
            Some(("x-signature", &as_base64)),
            body
        )
        .unwrap_err()
        .starts_with("malformed"));
        assert_eq!(
            check("hmac", settings("hex", None), None, body),
            Err("missing header X-Signature".into())
        );
        assert!(check(
            "hmac",
            settings("hex", None),
            Some(("x-signature", &as_hex)),
            b"{}"
        )
        .unwrap_err()
        .starts_with("mismatch"));
    }

    #[test]
    fn the_generic_scheme_checks_its_settings() {
        let bad_encoding = SchemeSettings {
            header: Some("X-Sig".into()),
            encoding: Some("base32".into()),
            ..secret("s")
        };
        let setting_of = |settings: &SchemeSettings| {
            SignatureScheme::configure("hmac", settings)
                .map(|_| ())
                .unwrap_err()
                .setting
        };
        assert_eq!(setting_of(&bad_encoding), "SIGNATURE_ENCODING");
        let bad_header = SchemeSettings {
            header: Some("X Sig".into()),
            encoding: Some("hex".into()),
            ..secret("s")
        };
        assert_eq!(setting_of(&bad_header), "SIGNATURE_HEADER");
    }

    #[test]
    fn the_generic_scheme_takes_several_signatures_and_any_base64() {
        let body = br#"{"id":1}"#;
        let tag = crate::signature::mac::tag_of(b"s3cret", &[body]);
        let settings = |encoding: &str| SchemeSettings {
            header: Some("X-Signature".into()),
            encoding: Some(encoding.into()),
            ..secret("s3cret")
        };
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        use base64::Engine;
        let wrong = STANDARD.encode([0u8; 32]);
        for value in [
            URL_SAFE_NO_PAD.encode(&tag),
            format!("{wrong},{}", STANDARD.encode(&tag)),
            format!("{wrong} {}", URL_SAFE_NO_PAD.encode(&tag)),
        ] {
            assert_eq!(
                check(
                    "hmac",
                    settings("base64"),
                    Some(("x-signature", &value)),
                    body
                ),
                Ok(()),
                "{value}"
            );
        }
        let upper = hex::encode_upper(&tag);
        assert_eq!(
            check("hmac", settings("hex"), Some(("x-signature", &upper)), body),
            Ok(())
        );
        assert!(check(
            "hmac",
            settings("base64"),
            Some(("x-signature", &wrong)),
            body
        )
        .unwrap_err()
        .starts_with("mismatch"));
    }
}
