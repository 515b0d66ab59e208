//! Twilio: `X-Twilio-Signature: <base64 HMAC-SHA1(auth token, content)>`.
//! The content is the URL Twilio called (`SIGNATURE_URL`, as configured in
//! Twilio, plus the request's query string), then, for a form post, every
//! parameter sorted by name as name then value (a repeated name's values
//! de-duplicated and sorted, as Twilio's libraries do). A JSON body is
//! signed through the URL instead: it carries `bodySHA256=<hex SHA-256 of
//! the body>`, which must match. No time is signed; the default key hashes
//! the signed parameters (or the JSON body the URL's hash covers).
//!
//! Not taken: Twilio's newer `X-Twilio-Webhooks-Signature-Settings`
//! (HMAC-SHA256 with a shared key); such a delivery is refused.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use super::mac::{base64_signature, set_header};
use super::{Message, Rejection, Scheme, SchemeEntry, Secret, Signed, SignedRequest, Verdict};
use crate::canonical::sha256_hex;
use crate::form;
use crate::headers;

/// Twilio signs each parameter's name and value run together, with
/// nothing between them or between pairs, so a pair's boundary can
/// move (`a=bc` and `ab=c` sign alike) without breaking the signature:
/// no one field is signed. Only the hash of the sorted signed
/// parameters ([`Scheme::signed_content`], `body-sha256`) is a key
/// source; `form:` and `json:` are refused as unsigned.
pub const ENTRY: SchemeEntry = SchemeEntry::new("twilio", "body-sha256", |settings| {
    let url = settings.required_url(
        "twilio",
        "the webhook URL as configured in Twilio, without its query",
    )?;
    Ok(Box::new(Twilio {
        token: settings.required_secret("twilio")?,
        url,
    }))
})
.signing(Signed::FIELDS);

const HEADER: &str = "X-Twilio-Signature";
const SETTINGS: &str = "X-Twilio-Webhooks-Signature-Settings";

#[derive(Debug)]
struct Twilio {
    token: Secret,
    /// The URL configured in Twilio, without the query.
    url: String,
}

/// What a delivery's signature covers besides its URL.
enum Content {
    /// A form's parameters, name then value, sorted.
    Parameters(Vec<u8>),
    /// Nothing but the URL, whose `bodySHA256` covers the body.
    UrlOnly,
}

impl Twilio {
    /// The spellings of the called URL Twilio may have signed: as
    /// configured, and with its scheme's default port written or left out
    /// (Twilio signs some requests with `:443` and others without, and
    /// its libraries try both).
    fn called_urls(&self, query: Option<&str>) -> Vec<String> {
        let mut urls = vec![self.url.clone()];
        if let Some((scheme, rest)) = self.url.split_once("://") {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let default_port = match scheme.to_ascii_lowercase().as_str() {
                "https" => "443",
                _ => "80",
            };
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            let other = match host.rsplit_once(':') {
                Some((_, port)) if port == default_port => {
                    let without = &authority[..authority.len() - port.len() - 1];
                    format!("{scheme}://{without}{path}")
                }
                Some(_) => String::new(),
                None => format!("{scheme}://{authority}:{default_port}{path}"),
            };
            if !other.is_empty() {
                urls.push(other);
            }
        }
        urls.iter().map(|url| with_query(url, query)).collect()
    }

    fn content(request: &SignedRequest) -> Result<Content, Rejection> {
        let is_form =
            headers::get(request.headers, "content-type").is_some_and(form::is_form_media_type);
        if is_form || request.body.is_empty() {
            return Ok(Content::Parameters(sorted_parameters(
                &String::from_utf8_lossy(request.body),
            )));
        }
        let declared = request
            .query
            .map(form::pairs)
            .unwrap_or_default()
            .into_iter()
            .find(|(name, _)| name == "bodySHA256")
            .map(|(_, value)| value)
            .ok_or_else(|| {
                Rejection::malformed(
                    HEADER,
                    "a body that is not a form needs bodySHA256 in the URL",
                )
            })?;
        match declared.eq_ignore_ascii_case(&sha256_hex(request.body)) {
            true => Ok(Content::UrlOnly),
            false => Err(Rejection::Mismatch),
        }
    }

    fn mac(&self, url: &str, content: &Content) -> Hmac<Sha1> {
        let mut mac = Hmac::<Sha1>::new_from_slice(self.token.expose().as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(url.as_bytes());
        if let Content::Parameters(parameters) = content {
            mac.update(parameters);
        }
        mac
    }
}

fn with_query(url: &str, query: Option<&str>) -> String {
    match query {
        Some(query) if !query.is_empty() => format!("{url}?{query}"),
        _ => url.to_string(),
    }
}

/// A form's parameters as Twilio signs them: sorted by name, a repeated
/// name's values de-duplicated and sorted, each name then value.
fn sorted_parameters(body: &str) -> Vec<u8> {
    let mut pairs = form::pairs(body);
    pairs.sort_unstable();
    pairs.dedup();
    pairs
        .iter()
        .flat_map(|(name, value)| [name.as_bytes(), value.as_bytes()])
        .flatten()
        .copied()
        .collect()
}

impl Scheme for Twilio {
    /// The sorted parameters a form's signature covers (a JSON body is
    /// covered whole, through the URL's hash).
    fn signed_content(&self, request: &SignedRequest) -> Option<Vec<u8>> {
        match Twilio::content(request).ok()? {
            Content::Parameters(parameters) => Some(parameters),
            Content::UrlOnly => None,
        }
    }

    fn verify(
        &self,
        request: &SignedRequest,
        _now: u64,
        _tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        if headers::get(request.headers, SETTINGS).is_some() {
            return Err(Rejection::malformed(
                SETTINGS,
                "shared-key signatures are not taken: sign with the auth token",
            ));
        }
        let signature = base64_signature(request.headers, HEADER)?;
        let content = Twilio::content(request)?;
        let matches = self
            .called_urls(request.query)
            .iter()
            .any(|url| self.mac(url, &content).verify_slice(&signature).is_ok());
        match matches {
            true => Ok(Verdict::Verified),
            false => Err(Rejection::Mismatch),
        }
    }

    /// Signs a form body (or an empty one) at the configured URL.
    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, _now: u64) {
        let content =
            Content::Parameters(sorted_parameters(&String::from_utf8_lossy(&message.body)));
        let tag = self.mac(&self.url, &content).finalize().into_bytes();
        set_header(&mut message.headers, HEADER, STANDARD.encode(tag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Twilio's own library tests: twilio/twilio-python,
    // tests/unit/test_request_validator.py.
    const TOKEN: &str = "12345";
    const URL: &str = "https://mycompany.com/myapp.php";
    const QUERY: &str = "foo=1&bar=2";
    const FORM: &str = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&To=%2B18005551212";

    /// The review's case (round 4, item 11): the same signature covers
    /// `a=bc` and `ab=c`, so no form field may be a key.
    #[test]
    fn no_form_field_or_pointer_is_a_signed_key_source() {
        let scheme = twilio();
        for field in ["CallSid", "MessageSid", "Body"] {
            assert!(!scheme.signs_form_field(field), "{field}");
        }
        assert!(!scheme.signs_pointer("/id"));
        let joined = |body: &str| {
            let mut signed = Vec::new();
            for (name, value) in crate::form::pairs(body) {
                signed.extend_from_slice(name.as_bytes());
                signed.extend_from_slice(value.as_bytes());
            }
            signed
        };
        assert_eq!(joined("a=bc"), joined("ab=c"), "what Twilio signs");
    }

    fn twilio() -> Twilio {
        Twilio {
            token: Secret::new(TOKEN.into()),
            url: URL.into(),
        }
    }

    fn check(
        signature: &str,
        content_type: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Result<Verdict, Rejection> {
        let headers = vec![
            ("x-twilio-signature".to_string(), signature.to_string()),
            ("content-type".to_string(), content_type.to_string()),
        ];
        twilio().verify(
            &SignedRequest {
                headers: &headers,
                body,
                query,
            },
            0,
            300,
        )
    }

    const FORM_TYPE: &str = "application/x-www-form-urlencoded";

    /// Twilio signs some requests with the default port in the URL and
    /// some without: each spelling verifies under the other. The signature
    /// is twilio-node 6.3.1's `getExpectedTwilioSignature` over
    /// `https://hooks.example.com:443/twilio/sms`.
    #[test]
    fn the_default_port_may_be_written_or_left_out() {
        let signature = "4rN/QZizU6Y1GnpZSgyuUGOm9LI=";
        let body = b"MessageSid=SM1&Body=hello";
        for url in [
            "https://hooks.example.com/twilio/sms",
            "https://hooks.example.com:443/twilio/sms",
        ] {
            let twilio = Twilio {
                token: Secret::new("f1e2d3c4b5a6978869504a3b2c1d0e9f".into()),
                url: url.into(),
            };
            let headers = vec![
                ("x-twilio-signature".to_string(), signature.to_string()),
                ("content-type".to_string(), FORM_TYPE.to_string()),
            ];
            let request = SignedRequest {
                headers: &headers,
                body,
                query: None,
            };
            assert_eq!(
                twilio.verify(&request, 0, 300),
                Ok(Verdict::Verified),
                "{url}"
            );
        }
        let other_port = Twilio {
            token: Secret::new("f1e2d3c4b5a6978869504a3b2c1d0e9f".into()),
            url: "https://hooks.example.com:8443/twilio/sms".into(),
        };
        assert_eq!(
            other_port.called_urls(None),
            vec!["https://hooks.example.com:8443/twilio/sms".to_string()]
        );
        let twilio = |url: &str| Twilio {
            token: Secret::new("f1e2d3c4b5a6978869504a3b2c1d0e9f".into()),
            url: url.into(),
        };
        assert_eq!(
            twilio("https://hooks.example.com:443/twilio/sms").called_urls(Some("a=1")),
            [
                "https://hooks.example.com:443/twilio/sms?a=1",
                "https://hooks.example.com/twilio/sms?a=1"
            ]
        );
        assert_eq!(
            twilio("http://user@hooks.example.com/sms").called_urls(Some("")),
            [
                "http://user@hooks.example.com/sms",
                "http://user@hooks.example.com:80/sms"
            ],
            "an empty query adds no `?`"
        );
    }

    #[test]
    fn accepts_the_vectors_of_twilios_library() {
        assert_eq!(
            check(
                "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
                FORM_TYPE,
                Some(QUERY),
                FORM.as_bytes()
            ),
            Ok(Verdict::Verified)
        );
        // A repeated parameter: its values de-duplicated and sorted.
        assert_eq!(
            check(
                "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
                FORM_TYPE,
                Some(QUERY),
                b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234&Digits=1234"
            ),
            Ok(Verdict::Verified)
        );
        // A JSON body, covered by the URL's bodySHA256.
        let body = br#"{"property": "value", "boolean": true}"#;
        let query = "foo=1&bar=2&bodySHA256=0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
        assert_eq!(
            check(
                "a9nBmqA0ju/hNViExpshrM61xv4=",
                "application/json",
                Some(query),
                body
            ),
            Ok(Verdict::Verified)
        );
        assert_eq!(
            check(
                "a9nBmqA0ju/hNViExpshrM61xv4=",
                "application/json",
                Some(query),
                br#"{"property": "other", "boolean": true}"#
            ),
            Err(Rejection::Mismatch),
            "a body whose hash is not the signed one"
        );
    }

    #[test]
    fn the_url_the_parameters_and_the_token_are_all_signed() {
        let genuine = "RSOYDt4T1cUTdK1PDd93/VVr8B8=";
        assert_eq!(
            check(genuine, FORM_TYPE, Some("foo=1&bar=3"), FORM.as_bytes()),
            Err(Rejection::Mismatch)
        );
        let tampered = FORM.replace("Digits=1234", "Digits=1235");
        assert_eq!(
            check(genuine, FORM_TYPE, Some(QUERY), tampered.as_bytes()),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(genuine, "application/json", Some(QUERY), b"{}"),
            Err(Rejection::Malformed(..))
        ));
        assert!(matches!(
            check("%%%", FORM_TYPE, Some(QUERY), FORM.as_bytes()),
            Err(Rejection::Malformed(..))
        ));
    }

    #[test]
    fn the_key_hashes_the_sorted_parameters() {
        let headers = vec![("content-type".to_string(), FORM_TYPE.to_string())];
        let reordered = "To=%2B18005551212&Digits=1234&CallSid=CA1234567890ABCDE&From=%2B14158675309&Caller=%2B14158675309";
        let content = |body: &str| {
            twilio().signed_content(&SignedRequest {
                headers: &headers,
                body: body.as_bytes(),
                query: None,
            })
        };
        assert_eq!(content(FORM), content(reordered));
        assert!(content(FORM)
            .unwrap()
            .starts_with(b"CallSidCA1234567890ABCDECaller+14158675309"));
    }
}
