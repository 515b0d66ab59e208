//! GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(secret, raw body)>`.
//! GitHub signs no time and no id; its default key is the body's hash
//! (`X-GitHub-Delivery` is not signed).

use super::body_hmac::{key_of, BodyHmac, Encoding};
use super::SchemeEntry;

const HEADER: &str = "X-Hub-Signature-256";
const PREFIX: &str = "sha256=";

pub const ENTRY: SchemeEntry = SchemeEntry::new("github", "body-sha256", |settings| {
    let key = key_of(&settings.required_secret("github")?);
    Ok(Box::new(BodyHmac {
        prefix: PREFIX.to_string(),
        ..BodyHmac::new(key, HEADER, Encoding::Hex)
    }))
});

#[cfg(test)]
mod tests {
    use super::super::body_hmac::tests::secret;
    use super::HEADER as HEADER_NAME;
    use crate::signature::tests::check;

    // GitHub's published test vector: "Validating webhook deliveries",
    // https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries
    const SECRET: &str = "It's a Secret to Everybody";
    const BODY: &[u8] = b"Hello, World!";
    const SIGNATURE: &str =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";

    #[test]
    fn accepts_githubs_published_vector() {
        assert_eq!(
            check(
                "github",
                secret(SECRET),
                Some((HEADER_NAME, SIGNATURE)),
                BODY
            ),
            Ok(())
        );
    }

    #[test]
    fn rejects_tampering_a_wrong_secret_and_a_missing_header() {
        let tampered = check(
            "github",
            secret(SECRET),
            Some((HEADER_NAME, SIGNATURE)),
            b"Hello, World?",
        );
        assert!(tampered.unwrap_err().starts_with("mismatch"));
        let wrong = check(
            "github",
            secret("another"),
            Some((HEADER_NAME, SIGNATURE)),
            BODY,
        );
        assert!(wrong.unwrap_err().starts_with("mismatch"));
        assert_eq!(
            check("github", secret(SECRET), None, BODY),
            Err("missing header X-Hub-Signature-256".into())
        );
        let unprefixed = &SIGNATURE["sha256=".len()..];
        assert!(check(
            "github",
            secret(SECRET),
            Some((HEADER_NAME, unprefixed)),
            BODY
        )
        .unwrap_err()
        .starts_with("malformed"));
    }
}
