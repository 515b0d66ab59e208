//! A fake of Cloudflare Access for the audit log's actor (SPEC §13, v5),
//! written from Cloudflare's "Validate JWTs" reference: the team serves
//! its signing keys at `/cdn-cgi/access/certs` as `{"keys": [JWK, ...],
//! "public_cert": ..., "public_certs": [...]}`, and Access adds an RS256
//! `Cf-Access-Jwt-Assertion` (header `kid`, claims `aud` (a list), `email`,
//! `exp`, `iat`, `nbf`, `iss` the team's origin) to what it lets through.
//! The key is the test certificate's, made for these tests; the test
//! origin serves it as the team.

use std::sync::LazyLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rsa::traits::PublicKeyParts;
use sha2::{Digest, Sha256};

/// The application's audience tag the tests' gateway is set with.
pub const ACCESS_AUD: &str = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2";
const KID: &str = "e2e-access-key";

static SIGNER: LazyLock<rsa::RsaPrivateKey> = LazyLock::new(|| {
    use rsa::pkcs8::DecodePrivateKey;
    rsa::RsaPrivateKey::from_pkcs8_pem(include_str!(
        "../../../crates/idemgate-core/tests/fixtures/test-certificate.key"
    ))
    .unwrap()
});

/// What the team serves at `/cdn-cgi/access/certs`.
pub fn certs() -> String {
    let public = SIGNER.to_public_key();
    serde_json::json!({
        "keys": [{
            "kid": KID,
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            "e": URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()),
            "n": URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
        }],
        "public_cert": {"kid": KID, "cert": "(not read)"},
        "public_certs": [{"kid": KID, "cert": "(not read)"}],
    })
    .to_string()
}

/// An assertion for `email` from the team at `team`, for `aud`, signed
/// with the team's key (or, `forged`, with another).
pub fn assertion(team: &str, aud: &str, email: &str, forged: bool) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let header = serde_json::json!({"alg": "RS256", "kid": KID, "typ": "JWT"});
    let claims = serde_json::json!({
        "aud": [aud],
        "email": email,
        "exp": now + 3_600,
        "iat": now,
        "nbf": now,
        "iss": team,
        "type": "app",
        "identity_nonce": "e2e",
        "sub": "7335d417-61da-459d-899c-0a01c76a2f94",
        "country": "US",
    });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let digest = Sha256::digest(signed.as_bytes());
    let mut signature = SIGNER
        .sign(rsa::Pkcs1v15Sign::new::<Sha256>(), &digest)
        .unwrap();
    if forged {
        signature[10] ^= 1;
    }
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature))
}
