//! The public key of an X.509 certificate (PayPal's): its
//! SubjectPublicKeyInfo, cut out of the DER by a minimal walk, for
//! WebCrypto's `importKey("spki", ...)`. Nothing of the certificate is
//! checked (not its signature, chain, dates or names): it is trusted
//! because it came over TLS from an allowed host (`SIGNATURE_CERT_HOSTS`).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// The DER of the first certificate in `pem` (or `pem` itself, when it is
/// DER already).
pub fn der_of(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok();
    let Some(text) = text.filter(|text| text.contains("-----BEGIN CERTIFICATE-----")) else {
        return Some(pem.to_vec());
    };
    let body = text
        .split("-----BEGIN CERTIFICATE-----")
        .nth(1)?
        .split("-----END CERTIFICATE-----")
        .next()?;
    let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    STANDARD.decode(compact).ok()
}

/// One TLV at `at`: its tag, and where its value starts and ends.
fn tlv(der: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let tag = *der.get(at)?;
    if tag & 0x1f == 0x1f {
        return None; // multi-byte tags never occur on this path
    }
    let first = *der.get(at + 1)? as usize;
    let mut start = at + 2;
    let length = if first < 0x80 {
        first
    } else {
        let count = first & 0x7f;
        if count == 0 || count > 4 {
            return None;
        }
        let mut length = 0usize;
        for _ in 0..count {
            length = (length << 8) | *der.get(start)? as usize;
            start += 1;
        }
        length
    };
    let end = start.checked_add(length)?;
    (end <= der.len()).then_some((tag, start, end))
}

/// The certificate's SubjectPublicKeyInfo, header included.
pub fn subject_public_key_info(der: &[u8]) -> Option<&[u8]> {
    let (tag, certificate, _) = tlv(der, 0)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, mut at, _) = tlv(der, certificate)?;
    if tag != 0x30 {
        return None;
    }
    if der.get(at) == Some(&0xa0) {
        at = tlv(der, at)?.2; // the explicit version
    }
    // serialNumber, signature, issuer, validity, subject
    for wanted in [0x02, 0x30, 0x30, 0x30, 0x30] {
        let (tag, _, end) = tlv(der, at)?;
        if tag != wanted {
            return None;
        }
        at = end;
    }
    let (tag, _, end) = tlv(der, at)?;
    (tag == 0x30).then(|| &der[at..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate made for this test (openssl req -x509,
    /// RSA 2048): its SPKI is the one `openssl x509 -pubkey` prints.
    const PEM: &str = include_str!("../../tests/fixtures/test-certificate.pem");
    const SPKI_SHA256: &str = include_str!("../../tests/fixtures/test-certificate.spki.sha256");

    #[test]
    fn the_key_is_cut_out_of_the_certificate() {
        let der = der_of(PEM.as_bytes()).unwrap();
        let spki = subject_public_key_info(&der).unwrap();
        assert_eq!(crate::canonical::sha256_hex(spki), SPKI_SHA256.trim());
        assert_eq!(subject_public_key_info(&der_of(&der).unwrap()), Some(spki));
    }

    #[test]
    fn anything_else_is_refused_without_panicking() {
        let der = der_of(PEM.as_bytes()).unwrap();
        for cut in [0, 1, 2, 10, der.len() / 2, der.len() - 1] {
            let _ = subject_public_key_info(&der[..cut]);
        }
        assert_eq!(subject_public_key_info(b"not a certificate"), None);
        assert_eq!(subject_public_key_info(&[0x30, 0x85, 0, 0, 0, 0, 1]), None);
        assert_eq!(
            der_of(b"-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----"),
            None
        );
    }

    /// DER's length forms, each at its edge: short (below 0x80), long with
    /// one to four bytes of length, and what is refused: the indefinite
    /// form (0x80), more than four length bytes, and multi-byte tags.
    #[test]
    fn lengths_and_tags_are_read_at_their_edges() {
        assert_eq!(tlv(&[0x00, 0x00], 0), Some((0x00, 2, 2)));
        assert_eq!(tlv(&[0x04, 0x01, 0xaa], 0), Some((0x04, 2, 3)));
        assert_eq!(tlv(&[0x04, 0x81, 0x01, 0xaa], 0), Some((0x04, 3, 4)));
        assert_eq!(
            tlv(&[0x04, 0x84, 0x00, 0x00, 0x00, 0x01, 0xaa], 0),
            Some((0x04, 6, 7))
        );
        let mut long = vec![0x30, 0x7f];
        long.resize(2 + 0x80, 0);
        assert_eq!(tlv(&long, 0), Some((0x30, 2, 0x81)));
        // 0x80 is the indefinite length, never a length of 128.
        long[1] = 0x80;
        assert_eq!(tlv(&long, 0), None);
        assert_eq!(tlv(&[0x30, 0x80], 0), None);
        assert_eq!(
            tlv(&[0x04, 0x85, 0x00, 0x00, 0x00, 0x00, 0x01, 0xaa], 0),
            None
        );
        assert_eq!(tlv(&[0x1f, 0x01, 0x00], 0), None);
        assert_eq!(tlv(&[0x3f, 0x01, 0x00], 0), None);
    }
}
