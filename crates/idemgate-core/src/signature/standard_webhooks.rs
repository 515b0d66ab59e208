//! Standard Webhooks: `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` (space-separated `<version>,<base64>` entries) over
//! "<id>.<timestamp>.<raw body>". Svix sends the same under the names
//! `svix-id`, `svix-timestamp` and `svix-signature` (Clerk, Resend, every
//! Svix customer without white-labelling), and is verified alike.
//!
//! - `v1`: HMAC-SHA256, keyed by the base64 part of a `whsec_` secret;
//! - `v1a`: Ed25519, by a `whpk_` public key (base64 of its 32 bytes) or a
//!   `whsk_` secret key (base64 of seed and public key, 64 bytes), checked
//!   by the runtime's WebCrypto.
//!
//! The id is signed: it is the default key. A delivery that carries both
//! brands must carry one id, or which one was signed cannot be told.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::mac::{any_matches, check_freshness, mac_of, set_header, tag_of};
use super::{
    required_header, setting_error, Message, PublicKey, PublicKeyAlgorithm, PublicKeyCheck,
    Rejection, Scheme, SchemeEntry, SecretBytes, Signed, SignedBody, SignedRequest, Verdict,
};
use crate::headers;

pub const ENTRY: SchemeEntry = SchemeEntry::new(
    "standard-webhooks",
    "header:webhook-id,header:svix-id",
    |settings| {
        let secret = settings.required_secret("standard-webhooks")?;
        let key = decode_secret(secret.expose())
            .map_err(|reason| setting_error("SIGNING_SECRET", reason))?;
        Ok(Box::new(StandardWebhooks { key }))
    },
)
.signing(Signed {
    headers: &[WEBHOOK.id, WEBHOOK.timestamp, SVIX.id, SVIX.timestamp],
    body: SignedBody::Whole,
});

/// The header names of one brand.
struct Brand {
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const WEBHOOK: Brand = Brand {
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

const SVIX: Brand = Brand {
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

/// A route's key: what verifies `v1` or `v1a` signatures.
#[derive(Debug)]
enum Key {
    /// `whsec_`: the HMAC key.
    Hmac(SecretBytes),
    /// `whpk_` (or the public half of a `whsk_`): the Ed25519 public key.
    Ed25519(Vec<u8>),
}

#[derive(Debug)]
struct StandardWebhooks {
    key: Key,
}

/// A route's secret: `whsec_<base64>` (or bare base64) for `v1`;
/// `whpk_<base64 of 32 bytes>` or `whsk_<base64 of 64 bytes>` for `v1a`.
fn decode_secret(secret: &str) -> Result<Key, String> {
    let decoded = |encoded: &str| STANDARD.decode(encoded.trim()).ok();
    if let Some(public) = secret.strip_prefix("whpk_") {
        return match decoded(public) {
            Some(key) if key.len() == 32 => Ok(Key::Ed25519(key)),
            _ => Err("is not whpk_ followed by the base64 of a 32-byte Ed25519 public key".into()),
        };
    }
    if let Some(pair) = secret.strip_prefix("whsk_") {
        return match decoded(pair) {
            // A secret key is its 32-byte seed, then its public key.
            Some(key) if key.len() == 64 => Ok(Key::Ed25519(key[32..].to_vec())),
            _ => Err("is not whsk_ followed by the base64 of a 64-byte Ed25519 key pair".into()),
        };
    }
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    match decoded(encoded) {
        Some(key) if !key.is_empty() => Ok(Key::Hmac(SecretBytes::new(key))),
        _ => Err("is not whsec_ followed by base64".into()),
    }
}

/// What a delivery's headers say, from the brand it was signed under.
struct Sent<'a> {
    id: &'a str,
    timestamp_text: &'a str,
    timestamp: u64,
    signatures: &'a str,
    brand: &'static Brand,
}

/// Reads the brand whose signature header is there (Standard Webhooks'
/// if both are); a second brand's id must be the same id.
fn read<'a>(headers: &'a [(String, String)]) -> Result<Sent<'a>, Rejection> {
    let brand = match (
        headers::get(headers, WEBHOOK.signature),
        headers::get(headers, SVIX.signature),
    ) {
        (None, Some(_)) => &SVIX,
        _ => &WEBHOOK,
    };
    let header = |name: &str| required_header(headers, name);
    let id = header(brand.id)?;
    for other in [&WEBHOOK, &SVIX] {
        if headers::get(headers, other.id).is_some_and(|other_id| other_id != id) {
            return Err(Rejection::malformed(
                other.id,
                "a second id that is not the signed one",
            ));
        }
    }
    let timestamp_text = header(brand.timestamp)?.trim();
    // Both brands' timestamps count as signed: the other's must be this one.
    for other in [&WEBHOOK, &SVIX] {
        if headers::get(headers, other.timestamp)
            .is_some_and(|other_timestamp| other_timestamp.trim() != timestamp_text)
        {
            return Err(Rejection::malformed(
                other.timestamp,
                "a second timestamp that is not the signed one",
            ));
        }
    }
    let timestamp = timestamp_text
        .parse::<u64>()
        .map_err(|_| Rejection::malformed(brand.timestamp, "not a Unix time"))?;
    Ok(Sent {
        id,
        timestamp_text,
        timestamp,
        signatures: header(brand.signature)?,
        brand,
    })
}

/// The bytes every version signs: `<id>.<timestamp>.<body>`.
pub fn signed_content(id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    [id.as_bytes(), b".", timestamp.as_bytes(), b".", body].concat()
}

/// How many entries of a signature header are read: a sender signs with
/// one key, or two while it rotates, so a header of dozens is an attack
/// (each `v1a` entry costs a WebCrypto check against the whole body).
pub const MAX_SIGNATURE_ENTRIES: usize = 5;

/// The signatures of `version` among the first [`MAX_SIGNATURE_ENTRIES`]
/// entries of a signature header.
fn entries<'a>(signatures: &'a str, version: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    signatures
        .split(' ')
        .filter(|entry| !entry.is_empty())
        .take(MAX_SIGNATURE_ENTRIES)
        .filter_map(move |entry| entry.split_once(','))
        .filter(move |(found, _)| *found == version)
        .map(|(_, signature)| signature)
}

impl Scheme for StandardWebhooks {
    fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        let sent = read(request.headers)?;
        let (version, wanted) = match &self.key {
            Key::Hmac(_) => ("v1", "no v1,<base64> entry"),
            Key::Ed25519(_) => ("v1a", "no v1a,<base64> entry"),
        };
        let known = ["v1", "v1a"]
            .iter()
            .any(|known| entries(sent.signatures, known).next().is_some());
        if !known {
            return Err(Rejection::malformed(sent.brand.signature, wanted));
        }
        check_freshness(sent.timestamp, now, tolerance)?;
        let content: std::rc::Rc<[u8]> =
            signed_content(sent.id, sent.timestamp_text, request.body).into();
        match &self.key {
            Key::Hmac(key) => any_matches(
                &mac_of(key.expose(), &[&content]),
                entries(sent.signatures, version).map(|entry| STANDARD.decode(entry).ok()),
            )
            .map(|()| Verdict::Verified),
            Key::Ed25519(public) => {
                let checks: Vec<PublicKeyCheck> = entries(sent.signatures, version)
                    .filter_map(|entry| STANDARD.decode(entry).ok())
                    .filter(|signature| signature.len() == 64)
                    .map(|signature| PublicKeyCheck {
                        algorithm: PublicKeyAlgorithm::Ed25519,
                        key: PublicKey::Raw(public.clone()),
                        message: content.clone(),
                        signature,
                    })
                    .collect();
                match checks.is_empty() {
                    true => Err(Rejection::Mismatch),
                    false => Ok(Verdict::PublicKey(checks)),
                }
            }
        }
    }

    /// Keeps a `webhook-id` the message has (a retry reuses it), else
    /// makes one from the body's hash. A `v1a` route has no private key
    /// here: its sender signs (`signed_content` is what it signs).
    #[cfg(feature = "sign")]
    fn sign(&self, message: &mut Message, now: u64) {
        let Key::Hmac(key) = &self.key else {
            return;
        };
        let id = match headers::get(&message.headers, WEBHOOK.id) {
            Some(id) => id.to_string(),
            None => format!("msg_{}", &crate::canonical::sha256_hex(&message.body)[..24]),
        };
        let t = now.to_string();
        let tag = tag_of(key.expose(), &[&signed_content(&id, &t, &message.body)]);
        set_header(&mut message.headers, WEBHOOK.id, id);
        set_header(&mut message.headers, WEBHOOK.timestamp, t);
        set_header(
            &mut message.headers,
            WEBHOOK.signature,
            format!("v1,{}", STANDARD.encode(tag)),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::tests::public_key_verifies;

    // The Standard Webhooks specification's published test vector.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const MSG_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const T: u64 = 1_614_265_330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE_V1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    // Svix's v1a vector (svix/svix-webhooks, server/svix-server/src/worker.rs
    // test_asymmetric_key_signing; the public key from its README).
    const SECRET_KEY: &str = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    const PUBLIC_KEY: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    const SIGNATURE_V1A: &str = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

    fn headers(
        brand: &Brand,
        id: Option<&str>,
        t: Option<&str>,
        sig: Option<&str>,
    ) -> Vec<(String, String)> {
        [(brand.id, id), (brand.timestamp, t), (brand.signature, sig)]
            .into_iter()
            .filter_map(|(name, value)| value.map(|value| (name.to_string(), value.to_string())))
            .collect()
    }

    fn scheme(secret: &str) -> StandardWebhooks {
        StandardWebhooks {
            key: decode_secret(secret).unwrap(),
        }
    }

    fn check(
        secret: &str,
        list: &[(String, String)],
        body: &[u8],
        now: u64,
    ) -> Result<Verdict, Rejection> {
        scheme(secret).verify(
            &SignedRequest {
                headers: list,
                body,
                query: None,
            },
            now,
            300,
        )
    }

    #[test]
    fn accepts_the_published_vector_under_either_brand() {
        for brand in [&WEBHOOK, &SVIX] {
            let list = headers(brand, Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
            assert_eq!(check(SECRET, &list, BODY, T), Ok(Verdict::Verified));
            let several = format!("v1,AAAA {SIGNATURE_V1} v2,xyz");
            let list = headers(brand, Some(MSG_ID), Some("1614265330"), Some(&several));
            assert_eq!(check(SECRET, &list, BODY, T + 299), Ok(Verdict::Verified));
        }
    }

    #[test]
    fn two_brands_must_name_one_id() {
        let mut both = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
        both.push(("webhook-id".into(), MSG_ID.into()));
        assert_eq!(check(SECRET, &both, BODY, T), Ok(Verdict::Verified));
        // A captured Svix delivery with a forged webhook-id: refused, or
        // the forged id would make it a new key.
        both.last_mut().unwrap().1 = "msg_forged".into();
        assert!(matches!(
            check(SECRET, &both, BODY, T),
            Err(Rejection::Malformed(..))
        ));
    }

    #[test]
    fn rejects_each_failure_with_its_reason() {
        let valid = headers(
            &WEBHOOK,
            Some(MSG_ID),
            Some("1614265330"),
            Some(SIGNATURE_V1),
        );
        assert_eq!(
            check(SECRET, &valid, br#"{"test": 2432232315}"#, T),
            Err(Rejection::Mismatch)
        );
        assert!(matches!(
            check(SECRET, &valid, BODY, T + 600),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(SECRET, &valid, BODY, T - 600),
            Err(Rejection::Stale { .. })
        ));
        let other_id = headers(
            &WEBHOOK,
            Some("msg_other"),
            Some("1614265330"),
            Some(SIGNATURE_V1),
        );
        assert_eq!(check(SECRET, &other_id, BODY, T), Err(Rejection::Mismatch));
        for (name, list) in [
            (
                WEBHOOK.id,
                headers(&WEBHOOK, None, Some("1614265330"), Some(SIGNATURE_V1)),
            ),
            (
                WEBHOOK.timestamp,
                headers(&WEBHOOK, Some(MSG_ID), None, Some(SIGNATURE_V1)),
            ),
            (
                WEBHOOK.id,
                headers(&WEBHOOK, Some(MSG_ID), Some("1614265330"), None),
            ),
        ] {
            assert!(
                matches!(
                    check(SECRET, &list, BODY, T),
                    Err(Rejection::MissingHeader(_))
                ),
                "{name}"
            );
        }
        let malformed = headers(
            &WEBHOOK,
            Some(MSG_ID),
            Some("yesterday"),
            Some(SIGNATURE_V1),
        );
        assert!(matches!(
            check(SECRET, &malformed, BODY, T),
            Err(Rejection::Malformed(..))
        ));
        let no_v1 = headers(&WEBHOOK, Some(MSG_ID), Some("1614265330"), Some("v2,abc"));
        assert!(matches!(
            check(SECRET, &no_v1, BODY, T),
            Err(Rejection::Malformed(..))
        ));
        let other = "whsec_c2VjcmV0LW9mLWFub3RoZXItZW5kcG9pbnQ=";
        assert_eq!(check(other, &valid, BODY, T), Err(Rejection::Mismatch));
    }

    /// Tests that catch, round 4 (break 1): a `whsec_` key reads `v1`
    /// entries and no other version, whatever its name begins with; the
    /// official libraries match the version exactly.
    #[test]
    fn a_v1_key_reads_only_entries_named_v1() {
        let tag = SIGNATURE_V1.strip_prefix("v1,").unwrap();
        for label in ["v1a", "v10", "v1 ", "V1"] {
            let relabelled = format!("{label},{tag}");
            let list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(&relabelled));
            assert!(check(SECRET, &list, BODY, T).is_err(), "{label}");
        }
    }

    /// Tests that catch, round 4 (break 2): a secret without `whsec_` is
    /// the base64 of an HMAC key, whatever its length (32 bytes is also an
    /// Ed25519 key's, which only `whpk_` names); the official libraries
    /// take it so.
    #[test]
    fn a_bare_base64_secret_is_an_hmac_key_whatever_its_length() {
        for raw in [vec![7u8; 32], vec![9u8; 24], vec![3u8; 64]] {
            let bare = STANDARD.encode(&raw);
            assert!(
                matches!(decode_secret(&bare), Ok(Key::Hmac(_))),
                "{} bytes",
                raw.len()
            );
            let tag = tag_of(&raw, &[&signed_content(MSG_ID, "1614265330", BODY)]);
            let signature = format!("v1,{}", STANDARD.encode(tag));
            let list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(&signature));
            assert_eq!(check(&bare, &list, BODY, T), Ok(Verdict::Verified));
            let prefixed = format!("whsec_{bare}");
            assert_eq!(check(&prefixed, &list, BODY, T), Ok(Verdict::Verified));
        }
    }

    /// The review's case (round 4, item 14): both brands' timestamps are
    /// declared signed, so the one not signed must be the signed one.
    #[test]
    fn a_second_brands_timestamp_must_be_the_signed_one() {
        let mut list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(SIGNATURE_V1));
        assert_eq!(check(SECRET, &list, BODY, T), Ok(Verdict::Verified));
        list.push(("webhook-timestamp".into(), "1614265330".into()));
        assert_eq!(check(SECRET, &list, BODY, T), Ok(Verdict::Verified));
        list.pop();
        list.push(("webhook-timestamp".into(), "1614265999".into()));
        assert!(matches!(
            check(SECRET, &list, BODY, T),
            Err(Rejection::Malformed(..))
        ));
    }

    /// The review's case (round 4, item 9): a header of 100 `v1a`
    /// entries made 100 WebCrypto checks, each with its own copy of the
    /// message. Only the first few entries are read, and every check
    /// shares one message.
    #[test]
    fn a_long_signature_header_makes_few_checks_over_one_message() {
        let many = vec![SIGNATURE_V1A; 100].join(" ");
        let list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(&many));
        let Ok(Verdict::PublicKey(checks)) = check(PUBLIC_KEY, &list, BODY, T) else {
            panic!("a public-key verdict");
        };
        assert_eq!(checks.len(), MAX_SIGNATURE_ENTRIES);
        assert!(checks
            .iter()
            .all(|check| std::rc::Rc::ptr_eq(&check.message, &checks[0].message)));
        // A genuine entry past the cap is not read.
        let late = format!(
            "{} {SIGNATURE_V1}",
            ["v1,AAAA"; MAX_SIGNATURE_ENTRIES].join(" ")
        );
        let list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(&late));
        assert_eq!(check(SECRET, &list, BODY, T), Err(Rejection::Mismatch));
    }

    #[test]
    fn v1a_signatures_go_to_webcrypto_and_the_vector_verifies() {
        let both = format!("{SIGNATURE_V1} {SIGNATURE_V1A}");
        for key in [PUBLIC_KEY, SECRET_KEY] {
            let list = headers(&SVIX, Some(MSG_ID), Some("1614265330"), Some(&both));
            let Ok(Verdict::PublicKey(checks)) = check(key, &list, BODY, T) else {
                panic!("{key}: a public-key verdict");
            };
            assert_eq!(checks.len(), 1);
            assert_eq!(
                &checks[0].message[..],
                signed_content(MSG_ID, "1614265330", BODY)
            );
            assert!(public_key_verifies(&checks[0]), "Svix's vector verifies");
            let mut tampered = checks[0].clone();
            tampered.message = [&checks[0].message[..], b" "].concat().into();
            assert!(!public_key_verifies(&tampered));
        }
        // An HMAC route ignores v1a, and the reverse.
        let only_v1a = headers(
            &WEBHOOK,
            Some(MSG_ID),
            Some("1614265330"),
            Some(SIGNATURE_V1A),
        );
        assert_eq!(check(SECRET, &only_v1a, BODY, T), Err(Rejection::Mismatch));
        let only_v1 = headers(
            &WEBHOOK,
            Some(MSG_ID),
            Some("1614265330"),
            Some(SIGNATURE_V1),
        );
        assert_eq!(
            check(PUBLIC_KEY, &only_v1, BODY, T),
            Err(Rejection::Mismatch)
        );
    }

    #[test]
    fn secrets_decode_by_their_prefix() {
        assert!(matches!(decode_secret(SECRET), Ok(Key::Hmac(_))));
        assert!(matches!(
            decode_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
            Ok(Key::Hmac(_))
        ));
        assert!(decode_secret("whsec_***").is_err());
        assert!(decode_secret("whsec_").is_err());
        assert!(decode_secret("whpk_AAAA").is_err(), "not 32 bytes");
        assert!(decode_secret("whsk_AAAA").is_err(), "not 64 bytes");
        let (Ok(Key::Ed25519(from_public)), Ok(Key::Ed25519(from_secret))) =
            (decode_secret(PUBLIC_KEY), decode_secret(SECRET_KEY))
        else {
            panic!()
        };
        assert_eq!(from_public, from_secret, "a whsk_ holds its public key");
    }
}
