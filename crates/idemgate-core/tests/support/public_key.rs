//! What the runtime's WebCrypto does with a public-key check, done with
//! the RustCrypto crates for the native tests: the unit tests and the
//! integration tests include this one file (each uses what it needs).
#![allow(dead_code)]

use idemgate_core::signature::plaid::{Jwk, KeyRequest};
use idemgate_core::signature::{PublicKey, PublicKeyAlgorithm, PublicKeyCheck};

/// Whether `check`'s signature verifies. A certificate's key comes from
/// `certificate`, given the certificate's URL (`None`: no such
/// certificate, so nothing verifies).
pub fn verifies(check: &PublicKeyCheck, certificate: impl Fn(&str) -> Option<Vec<u8>>) -> bool {
    verifies_with(check, certificate, |_| None)
}

/// [`verifies`], with Plaid's keys from `plaid` (`None`: Plaid knows no
/// such key).
pub fn verifies_with(
    check: &PublicKeyCheck,
    certificate: impl Fn(&str) -> Option<Vec<u8>>,
    plaid: impl Fn(&KeyRequest) -> Option<Jwk>,
) -> bool {
    match (&check.algorithm, &check.key) {
        (PublicKeyAlgorithm::EcdsaP256Sha256, PublicKey::Raw(point)) => es256(point, check),
        (PublicKeyAlgorithm::EcdsaP256Sha256, PublicKey::Plaid(request)) => {
            plaid(request).is_some_and(|jwk| es256(&jwk.sec1(), check))
        }
        (PublicKeyAlgorithm::Ed25519, PublicKey::Raw(key)) => ed25519(key, check),
        (PublicKeyAlgorithm::RsaPkcs1Sha256, PublicKey::Raw(spki)) => rsa_sha256(spki, check),
        (PublicKeyAlgorithm::RsaPkcs1Sha256, PublicKey::Certificate { url }) => {
            certificate(url).is_some_and(|spki| rsa_sha256(&spki, check))
        }
        _ => false,
    }
}

/// ECDSA P-256 with SHA-256 of a SEC1 point, the signature `r || s` (as
/// WebCrypto takes it).
fn es256(point: &[u8], check: &PublicKeyCheck) -> bool {
    use p256::ecdsa::signature::Verifier;
    let (Ok(key), Ok(signature)) = (
        p256::ecdsa::VerifyingKey::from_sec1_bytes(point),
        p256::ecdsa::Signature::from_slice(&check.signature),
    ) else {
        return false;
    };
    key.verify(&check.message, &signature).is_ok()
}

/// [`verifies`] where no certificate is at hand.
pub fn public_key_verifies(check: &PublicKeyCheck) -> bool {
    verifies(check, |_| None)
}

fn ed25519(key: &[u8], check: &PublicKeyCheck) -> bool {
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};
    let (Ok(key), Ok(signature)) = (
        <[u8; 32]>::try_from(key),
        <[u8; 64]>::try_from(check.signature.as_slice()),
    ) else {
        return false;
    };
    VerifyingKey::from_bytes(&key).is_ok_and(|key| {
        key.verify(&check.message, &Signature::from_bytes(&signature))
            .is_ok()
    })
}

fn rsa_sha256(spki: &[u8], check: &PublicKeyCheck) -> bool {
    use rsa::pkcs8::DecodePublicKey;
    use sha2::Digest;
    rsa::RsaPublicKey::from_public_key_der(spki).is_ok_and(|key| {
        key.verify(
            rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
            &sha2::Sha256::digest(&check.message),
            &check.signature,
        )
        .is_ok()
    })
}
