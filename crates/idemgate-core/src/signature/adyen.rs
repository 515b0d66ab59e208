//! Adyen standard webhooks: the signatures are in the body. Every
//! `notificationItems[].NotificationRequestItem` carries
//! `additionalData.hmacSignature`, the base64 HMAC-SHA256, under the
//! hex-decoded HMAC key, of
//! `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`.
//! A notification passes only when every item verifies.
//!
//! The fields are signed as they are: Adyen's documentation once escaped
//! `\` and `:` in them, but Adyen does not (its libraries dropped the
//! escaping: Adyen/adyen-php-api-library PR 165,
//! Adyen/adyen-python-api-library issue 117, and real notifications with
//! `:` in a reference verify only unescaped), and accepting that form too
//! would let `x\:y` in one field read as `x:y` across two.
//!
//! Only those eight fields of each item are signed, not the body: an
//! attacker may add or change any other member. So the key is made from
//! signed fields only (`scheme-key`: each item's pspReference, eventCode
//! and success), and `body-sha256` hashes the items' signed fields.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use hmac::Mac;

use super::mac::{mac_of, tag_of};
use super::{
    setting_error, Message, Rejection, Scheme, SchemeEntry, SecretBytes, Signed, SignedRequest,
    Verdict,
};
use crate::batch::BatchFormat;
use crate::json::{self, Json};

pub const ENTRY: SchemeEntry = SchemeEntry::new("adyen", "scheme-key", |settings| {
    let secret = settings.required_secret("adyen")?;
    let key =
        decode_key(secret.expose()).map_err(|reason| setting_error("SIGNING_SECRET", reason))?;
    Ok(Box::new(Adyen {
        key: SecretBytes::new(key),
    }))
})
.signing(Signed::FIELDS)
.making_scheme_key()
.batching(&FORMAT);

/// Adyen's envelope: `live`, and the items, each signed on its own (so
/// each keeps its `hmacSignature` in its part). The third version keyed a
/// notification by its items joined.
pub const FORMAT: BatchFormat = BatchFormat {
    events: BODY,
    transmission: &[],
    signature_headers: &[],
    joined_before: true,
    // Adyen's acknowledgement ("Accept webhooks": a 2xx with `[accepted]`).
    accepted: Some("[accepted]"),
    // Adyen signs each item's fields alone, never the envelope: a part is
    // `live` and its item ("Verify HMAC signatures").
    envelope: Some(&["live"]),
};

#[derive(Debug)]
struct Adyen {
    key: SecretBytes,
}

impl Scheme for Adyen {
    /// `/notificationItems/<n>/NotificationRequestItem/<signed field>`.
    fn signs_pointer(&self, pointer: &str) -> bool {
        let mut tokens = pointer.split('/').skip(1);
        let item = (tokens.next(), tokens.next(), tokens.next());
        let (Some(BODY), Some(index), Some("NotificationRequestItem")) = item else {
            return false;
        };
        let field: Vec<&str> = tokens.collect();
        index.parse::<usize>().is_ok()
            && match field.as_slice() {
                [name] => SIGNED_FIELDS.contains(name),
                ["amount", "value" | "currency"] => true,
                _ => false,
            }
    }

    /// Each item's signed string, one per line: the body's signed bytes.
    fn signed_content(&self, request: &SignedRequest) -> Option<Vec<u8>> {
        let items = items(request.body)?;
        let lines: Vec<String> = items.iter().map(signed_string).collect();
        Some(lines.join("\n").into_bytes())
    }

    /// `pspReference:eventCode:success` of each item (parts encoded as
    /// composite keys' are), items joined by `,`; a key longer than a key
    /// may be is its SHA-256 instead, as `sha256:<hex>`.
    fn scheme_key(&self, request: &SignedRequest) -> Option<String> {
        let items = items(request.body)?;
        let key = items
            .iter()
            .map(|item| {
                key_parts(item)
                    .map(|part| crate::key::encode_part(&part))
                    .join(":")
            })
            .collect::<Vec<_>>()
            .join(",");
        let fits = key.len() <= crate::key::MAX_KEY_LEN
            && crate::key::IdempotencyKey::parse(&key, "scheme-key").is_ok();
        Some(match fits {
            true => key,
            false => format!("sha256:{}", crate::canonical::sha256_hex(key.as_bytes())),
        })
    }

    fn verify(
        &self,
        request: &SignedRequest,
        _now: u64,
        _tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        verify(self.key.expose(), request.body).map(|()| Verdict::Verified)
    }

    /// Fills in each item's `hmacSignature`; the body is written again in
    /// its canonical form. A body that is not a notification is left as
    /// it is (and will not verify).
    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, _now: u64) {
        let Ok(mut notification) = json::parse(&message.body) else {
            return;
        };
        if let Some(Json::Array(items)) = member_mut(&mut notification, BODY) {
            for entry in items {
                let Some(item) = member_mut(entry, "NotificationRequestItem") else {
                    continue;
                };
                let signature =
                    STANDARD.encode(tag_of(self.key.expose(), &[signed_string(item).as_bytes()]));
                let additional = match member_mut(item, "additionalData") {
                    Some(additional) => additional,
                    None => {
                        if let Json::Object(members) = item {
                            members.push(("additionalData".into(), Json::Object(Vec::new())));
                        }
                        member_mut(item, "additionalData").expect("just added")
                    }
                };
                if let Json::Object(members) = additional {
                    members.retain(|(name, _)| name != "hmacSignature");
                    members.push(("hmacSignature".into(), Json::String(signature.into())));
                }
            }
        }
        message.body = notification.canonical();
    }
}

#[cfg_attr(not(feature = "sign"), allow(dead_code))] // used by `sign` alone
fn member_mut<'v, 'a>(value: &'v mut Json<'a>, name: &str) -> Option<&'v mut Json<'a>> {
    match value {
        Json::Object(members) => members
            .iter_mut()
            .find(|(member, _)| member == name)
            .map(|(_, value)| value),
        _ => None,
    }
}

/// A one-item AUTHORISATION notification for `psp`, unsigned.
#[cfg(test)]
pub(crate) fn sample_notification(psp: &str) -> String {
    format!(
        r#"{{"live":"false","notificationItems":[{{"NotificationRequestItem":{{"pspReference":"{psp}","amount":{{"currency":"EUR","value":1130}},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant","merchantReference":"order-1","success":"true"}}}}]}}"#
    )
}

const BODY: &str = "notificationItems";

/// The HMAC key from Adyen's Customer Area is hex.
pub fn decode_key(secret: &str) -> Result<Vec<u8>, String> {
    match hex::decode(secret.trim()) {
        Ok(key) if !key.is_empty() => Ok(key),
        _ => Err("is not Adyen's hex HMAC key".into()),
    }
}

/// A field's text as Adyen signs it: strings as they are, numbers in their
/// decimal form, absent or null as empty.
fn field_text(item: &Json, name: &str) -> String {
    match item.get(name) {
        Some(Json::String(text) | Json::Number(text)) => text.to_string(),
        Some(Json::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
}

/// The fields of an item, by name, that its signature covers (with
/// `amount.value` and `amount.currency`).
const SIGNED_FIELDS: &[&str] = &[
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "eventCode",
    "success",
];

fn signed_string(item: &Json) -> String {
    let amount = item.get("amount");
    let amount_field = |name: &str| {
        amount
            .map(|amount| field_text(amount, name))
            .unwrap_or_default()
    };
    let fields = [
        field_text(item, "pspReference"),
        field_text(item, "originalReference"),
        field_text(item, "merchantAccountCode"),
        field_text(item, "merchantReference"),
        amount_field("value"),
        amount_field("currency"),
        field_text(item, "eventCode"),
        field_text(item, "success"),
    ];
    fields.join(":")
}

fn verify_item(key: &[u8], item: &Json) -> Result<(), Rejection> {
    let signature = item
        .pointer("/additionalData/hmacSignature")
        .and_then(Json::as_str)
        .ok_or_else(|| Rejection::malformed(BODY, "an item has no additionalData.hmacSignature"))?;
    let signature = STANDARD
        .decode(signature.trim())
        .map_err(|_| Rejection::malformed(BODY, "an item's hmacSignature is not base64"))?;
    mac_of(key, &[signed_string(item).as_bytes()])
        .verify_slice(&signature)
        .map_err(|_| Rejection::Mismatch)
}

/// The items of a notification that parses (the signature checked them).
fn items(body: &[u8]) -> Option<Vec<Json<'_>>> {
    let notification = json::parse(body).ok()?;
    let Some(Json::Array(items)) = notification.get(BODY) else {
        return None;
    };
    items
        .iter()
        .map(|entry| entry.get("NotificationRequestItem").cloned())
        .collect()
}

fn verify(key: &[u8], body: &[u8]) -> Result<(), Rejection> {
    let notification =
        json::parse(body).map_err(|_| Rejection::malformed(BODY, "the body is not JSON"))?;
    let Some(Json::Array(items)) = notification.get(BODY) else {
        return Err(Rejection::malformed(
            BODY,
            "the body has no notificationItems list",
        ));
    };
    if items.is_empty() {
        return Err(Rejection::malformed(BODY, "the notification has no items"));
    }
    let mut seen = Vec::with_capacity(items.len());
    for entry in items {
        let item = entry.get("NotificationRequestItem").ok_or_else(|| {
            Rejection::malformed(BODY, "an item is not a NotificationRequestItem")
        })?;
        verify_item(key, item)?;
        // A captured item verifies wherever it stands, so a notification
        // that repeats one would be a new key made of an old event.
        let event = key_parts(item);
        if seen.contains(&event) {
            return Err(Rejection::InvalidBatch(
                "the notification holds the same item (pspReference, eventCode, success) twice",
            ));
        }
        seen.push(event);
    }
    Ok(())
}

/// What identifies an item's event: its signed `pspReference`,
/// `eventCode` and `success`.
fn key_parts(item: &Json) -> [String; 3] {
    ["pspReference", "eventCode", "success"].map(|name| field_text(item, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A notification of the given items, each a NotificationRequestItem's fields.
    fn notification(items: &[String]) -> String {
        let items: Vec<String> = items
            .iter()
            .map(|item| format!(r#"{{"NotificationRequestItem":{item}}}"#))
            .collect();
        format!(
            r#"{{"live":"false","notificationItems":[{}]}}"#,
            items.join(",")
        )
    }

    fn item(
        psp: &str,
        original: Option<&str>,
        reference: &str,
        value: u64,
        event: &str,
        signature: &str,
    ) -> String {
        let original = original
            .map(|original| format!(r#""originalReference":{original:?},"#))
            .unwrap_or_default();
        format!(
            r#"{{"additionalData":{{"hmacSignature":"{signature}"}},"amount":{{"currency":"EUR","value":{value}}},"eventCode":"{event}","eventDate":"2024-01-01T00:00:00+01:00","merchantAccountCode":"TestMerchant","merchantReference":{reference:?},{original}"pspReference":"{psp}","success":"true"}}"#
        )
    }

    // Adyen's own library tests: Adyen/adyen-python-api-library,
    // test/UtilTest.py (test_notification_request_item_hmac; the same
    // values are in the Ruby library's spec).
    const KEY: &str = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056";
    const SIGNATURE: &str = "coqCmt/IZ4E3CzPvMY8zTjQVL5hYJUiBRg8UU+iCWo0=";

    fn genuine() -> String {
        item(
            "7914073381342284",
            None,
            "TestPayment-1407325143704",
            1130,
            "AUTHORISATION",
            SIGNATURE,
        )
    }

    fn check(body: &str) -> Result<(), Rejection> {
        verify(&decode_key(KEY).unwrap(), body.as_bytes())
    }

    #[test]
    fn accepts_the_vector_of_adyens_libraries() {
        assert_eq!(
            signed_string(&json::parse(genuine().as_bytes()).unwrap()),
            "7914073381342284::TestMerchant:TestPayment-1407325143704:1130:EUR:AUTHORISATION:true"
        );
        assert_eq!(check(&notification(&[genuine()])), Ok(()));
    }

    #[test]
    fn a_boolean_success_is_signed_as_its_text() {
        let boolean = genuine().replace(r#""success":"true""#, r#""success":true"#);
        assert_ne!(boolean, genuine());
        assert_eq!(check(&notification(&[boolean])), Ok(()));
    }

    fn adyen() -> Adyen {
        Adyen {
            key: SecretBytes::new(decode_key(KEY).unwrap()),
        }
    }

    fn request(body: &str) -> SignedRequest<'_> {
        SignedRequest {
            headers: &[],
            body: body.as_bytes(),
            query: None,
        }
    }

    #[test]
    fn the_key_comes_from_signed_fields_only() {
        let body = notification(&[genuine()]);
        let scheme = adyen();
        assert_eq!(
            scheme.scheme_key(&request(&body)).as_deref(),
            Some("7914073381342284:AUTHORISATION:true")
        );
        // An unsigned member added anywhere leaves key and signed content alone.
        let padded = notification(&[genuine().replace(
            r#""eventDate""#,
            r#""unsigned":"added by an attacker","eventDate""#,
        )]);
        assert_ne!(padded, body);
        assert_eq!(
            check(&padded),
            Ok(()),
            "unsigned members do not break the signature"
        );
        assert_eq!(
            scheme.scheme_key(&request(&padded)),
            scheme.scheme_key(&request(&body))
        );
        assert_eq!(
            scheme.signed_content(&request(&padded)),
            scheme.signed_content(&request(&body))
        );
        // Two items: both in the key.
        let two = notification(&[genuine(), genuine().replace("7914073381342284", "99")]);
        assert_eq!(
            scheme.scheme_key(&request(&two)).as_deref(),
            Some("7914073381342284:AUTHORISATION:true,99:AUTHORISATION:true")
        );
        // Many items: the key would be too long, so it is their hash.
        let many: Vec<String> = (0..20).map(|_| genuine()).collect();
        let hashed = scheme.scheme_key(&request(&notification(&many))).unwrap();
        assert!(
            hashed.starts_with("sha256:") && hashed.len() == 71,
            "{hashed}"
        );
    }

    #[test]
    fn only_pointers_to_signed_fields_are_signed() {
        let scheme = adyen();
        for signed in [
            "/notificationItems/0/NotificationRequestItem/pspReference",
            "/notificationItems/0/NotificationRequestItem/eventCode",
            "/notificationItems/3/NotificationRequestItem/amount/value",
        ] {
            assert!(scheme.signs_pointer(signed), "{signed}");
        }
        for unsigned in [
            "/live",
            "/notificationItems/0/NotificationRequestItem/eventDate",
            "/notificationItems/0/NotificationRequestItem/additionalData/hmacSignature",
            "/notificationItems/x/NotificationRequestItem/pspReference",
            "/notificationItems/0/Other/pspReference",
            "/id",
        ] {
            assert!(!scheme.signs_pointer(unsigned), "{unsigned}");
        }
        assert!(!scheme.signs_form_field("pspReference"));
    }

    #[test]
    fn the_key_is_non_empty_hex() {
        assert!(decode_key("").is_err());
        assert!(decode_key("  ").is_err());
        assert!(decode_key("xyz").is_err());
        assert_eq!(decode_key(" 0a1B ").unwrap(), [0x0a, 0x1b]);
    }

    #[test]
    fn a_colon_in_a_field_verifies_as_adyen_signs_it() {
        // Adyen/adyen-python-api-library, test/mocks/util/colon_notification.json:
        // a real test-platform notification whose merchantReference starts with ':'.
        let key =
            decode_key("74F490DD33F7327BAECC88B2947C011FC02D014A473AAA33A8EC93E4DC069174").unwrap();
        let colon = r#"{"additionalData":{"hmacSignature":"2EQYm7YJpKO4EtHSPu55SQTyWf8dkW5u2nD1tJFpViA="},"amount":{"currency":"EUR","value":1000},"eventCode":"AUTHORISATION","merchantAccountCode":"AntoniStroinski","merchantReference":":slashes are fun","pspReference":"M8NB66SBZSGLNK82","success":"true"}"#;
        assert_eq!(
            verify(&key, notification(&[colon.to_string()]).as_bytes()),
            Ok(())
        );
        // The escaped form of the same item (`:` as `\:`), computed with
        // Python's hmac module: Adyen does not sign it, and it is refused.
        let escaped = colon.replace(
            "2EQYm7YJpKO4EtHSPu55SQTyWf8dkW5u2nD1tJFpViA=",
            "yqMBc4B2kvYV0skt5UGj/NoukgA7uUQzVrDjpuBdd9o=",
        );
        assert_eq!(
            verify(&key, notification(&[escaped]).as_bytes()),
            Err(Rejection::Mismatch)
        );
    }

    #[test]
    fn every_item_must_verify() {
        let forged = item(
            "7914073381342285",
            None,
            "TestPayment-1407325143704",
            1130,
            "AUTHORISATION",
            SIGNATURE,
        );
        assert_eq!(
            check(&notification(&[genuine(), forged])),
            Err(Rejection::Mismatch)
        );
        let tampered = item(
            "7914073381342284",
            None,
            "TestPayment-1407325143704",
            1131,
            "AUTHORISATION",
            SIGNATURE,
        );
        assert_eq!(check(&notification(&[tampered])), Err(Rejection::Mismatch));
        let other_key = decode_key(&"11".repeat(32)).unwrap();
        assert_eq!(
            verify(&other_key, notification(&[genuine()]).as_bytes()),
            Err(Rejection::Mismatch)
        );
    }

    /// The review's case: a captured item repeated makes a notification
    /// that verifies; it is refused (400), not keyed as a new event.
    #[test]
    fn a_notification_that_repeats_an_item_is_refused() {
        let once = notification(&[genuine()]);
        assert_eq!(check(&once), Ok(()));
        for times in [2, 3] {
            let repeated = notification(&vec![genuine(); times]);
            assert!(
                matches!(check(&repeated), Err(Rejection::InvalidBatch(_))),
                "{times} times"
            );
        }
    }

    #[test]
    fn malformed_notifications_are_refused() {
        for body in [
            "not json".to_string(),
            r#"{"live":"false"}"#.to_string(),
            notification(&[]),
            r#"{"notificationItems":[{"Other":{}}]}"#.to_string(),
            notification(&[genuine().replace("hmacSignature", "signature")]),
            notification(&[genuine().replace(SIGNATURE, "***")]),
        ] {
            assert!(
                matches!(check(&body), Err(Rejection::Malformed(..))),
                "{body}"
            );
        }
        assert!(decode_key("not hex").is_err());
    }
}
