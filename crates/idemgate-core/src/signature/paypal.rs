//! PayPal: `PAYPAL-TRANSMISSION-SIG` is the base64 RSASSA-PKCS1-v1_5
//! SHA-256 signature (`PAYPAL-AUTH-ALGO: SHA256withRSA`) of
//! `<transmission id>|<transmission time>|<webhook id>|<CRC-32 of the body,
//! unsigned decimal>`, by the key of the certificate at `PAYPAL-CERT-URL`.
//! The route's secret is its webhook id. The runtime's WebCrypto checks
//! the signature; the certificate is fetched only from an origin of
//! `SIGNATURE_CERT_HOSTS` (PayPal's live and sandbox API by default), and
//! trusted for that origin and TLS, not for a chain this code checks.
//!
//! The CRC-32 protects the body only against accidents: anyone can make
//! another body with the same CRC. What bounds a replay is the signed
//! transmission time, refused beyond `SIGNATURE_TOLERANCE_SECONDS`, and a
//! key (`json:/id` by default) from a body that matched the checksum.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::mac::check_freshness;
use super::{
    required_header, Message, PublicKey, PublicKeyAlgorithm, PublicKeyCheck, Rejection, Scheme,
    SchemeEntry, Secret, Signed, SignedBody, SignedRequest, Verdict,
};
use crate::headers;
use crate::time::unix_seconds;

pub const ENTRY: SchemeEntry = SchemeEntry::new("paypal", "json:/id", |settings| {
    let hosts = settings
        .cert_hosts
        .clone()
        .unwrap_or_else(|| DEFAULT_CERT_HOSTS.to_string());
    Ok(Box::new(PayPal {
        webhook_id: settings.required_secret("paypal")?,
        cert_hosts: parse_cert_hosts(&hosts)
            .map_err(|reason| super::setting_error("SIGNATURE_CERT_HOSTS", reason))?,
    }))
})
.signing(Signed {
    headers: &["paypal-transmission-id", "paypal-transmission-time"],
    body: SignedBody::Checksum,
});

/// PayPal's live API origins: a route takes one environment's
/// certificates, and the live one unless it names the sandbox's.
pub const DEFAULT_CERT_HOSTS: &str = "https://api.paypal.com,https://api-m.paypal.com";

/// PayPal's sandbox API origins, which a sandbox route names.
pub const SANDBOX_CERT_HOSTS: &str =
    "https://api.sandbox.paypal.com,https://api-m.sandbox.paypal.com";

const ID: &str = "PAYPAL-TRANSMISSION-ID";
const TIME: &str = "PAYPAL-TRANSMISSION-TIME";
const SIGNATURE: &str = "PAYPAL-TRANSMISSION-SIG";
const CERT_URL: &str = "PAYPAL-CERT-URL";
const ALGORITHM: &str = "PAYPAL-AUTH-ALGO";

#[derive(Debug)]
struct PayPal {
    webhook_id: Secret,
    cert_hosts: Vec<String>,
}

/// `https://host[:port]` origins, comma-separated (`http://` only for a
/// loopback host, exactly `127.0.0.1`, `[::1]` or `localhost`, so tests
/// can serve a certificate).
fn parse_cert_hosts(text: &str) -> Result<Vec<String>, String> {
    let origins = text
        .split(',')
        .map(|origin| {
            let origin = origin.trim().trim_end_matches('/');
            crate::api_origin::parse_api_origin(origin)
                .ok_or_else(|| format!("{origin:?} is not an https://host[:port] origin"))
        })
        .collect::<Result<Vec<String>, String>>()?;
    // One environment per route: a live route that took a sandbox
    // certificate would take events anyone can make in a sandbox.
    let of = |list: &str| -> Vec<String> { list.split(',').map(str::to_string).collect() };
    let (live, sandbox) = (of(DEFAULT_CERT_HOSTS), of(SANDBOX_CERT_HOSTS));
    if origins.iter().any(|origin| live.contains(origin))
        && origins.iter().any(|origin| sandbox.contains(origin))
    {
        return Err(
            "names both PayPal's live and sandbox origins: a route takes one environment's certificates"
                .into(),
        );
    }
    Ok(origins)
}

/// Where PayPal serves its certificates, on an allowed origin.
const CERT_PATH: &str = "/v1/notifications/certs/";

/// Whether `url` is a certificate on one of `origins`: the origin exactly,
/// then PayPal's certificate path, a name of plain characters and no
/// query or fragment. The URL comes from an unauthenticated header, and
/// each one makes a fetch.
fn on_allowed_origin(url: &str, origins: &[String]) -> bool {
    // Bytes, not a str slice: a header may hold any character, and a
    // slice inside one would panic.
    let url = url.as_bytes();
    origins.iter().any(|origin| {
        let Some(rest) = url
            .get(..origin.len())
            .filter(|head| head.eq_ignore_ascii_case(origin.as_bytes()))
            .map(|_| &url[origin.len()..])
        else {
            return false;
        };
        let Some(name) = rest.strip_prefix(CERT_PATH.as_bytes()) else {
            return false;
        };
        !name.is_empty()
            && name.len() <= 128
            && name
                .iter()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-_.".contains(byte))
            && !name.starts_with(b".")
    })
}

/// What PayPal signs for a delivery.
pub fn signed_string(transmission_id: &str, time: &str, webhook_id: &str, body: &[u8]) -> String {
    format!(
        "{transmission_id}|{time}|{webhook_id}|{}",
        crc32fast::hash(body)
    )
}

impl Scheme for PayPal {
    fn verify(
        &self,
        request: &SignedRequest,
        now: u64,
        tolerance: u64,
    ) -> Result<Verdict, Rejection> {
        let header = |name: &str| required_header(request.headers, name).map(str::trim);
        let (id, time, signature) = (header(ID)?, header(TIME)?, header(SIGNATURE)?);
        let (cert_url, algorithm) = (header(CERT_URL)?, header(ALGORITHM)?);
        if algorithm != "SHA256withRSA" {
            return Err(Rejection::malformed(
                ALGORITHM,
                "only SHA256withRSA is taken",
            ));
        }
        let sent_at =
            unix_seconds(time).ok_or_else(|| Rejection::malformed(TIME, "not an RFC 3339 time"))?;
        check_freshness(sent_at, now, tolerance)?;
        // Never fetched from anywhere else: the certificate is the trust.
        if !on_allowed_origin(cert_url, &self.cert_hosts) {
            return Err(Rejection::malformed(
                CERT_URL,
                "not on an origin of SIGNATURE_CERT_HOSTS",
            ));
        }
        let signature = STANDARD
            .decode(signature)
            .map_err(|_| Rejection::malformed(SIGNATURE, "the signature is not base64"))?;
        let message = signed_string(id, time, self.webhook_id.expose(), request.body);
        Ok(Verdict::PublicKey(vec![PublicKeyCheck {
            algorithm: PublicKeyAlgorithm::RsaPkcs1Sha256,
            key: PublicKey::Certificate {
                url: cert_url.to_string(),
            },
            message: message.into_bytes().into(),
            signature,
        }]))
    }

    /// PayPal signs with its private key, which no route holds: its sender
    /// (a test, `scripts/send`) signs [`signed_string`] itself.
    #[cfg(feature = "sign")]
    fn sign(&self, _message: &mut Message, _now: u64) {}

    /// The transmission id, which PayPal signs: its signature binds the
    /// body only through a CRC32, so each transmission goes to one key.
    fn single_use_id<'r>(&self, request: &SignedRequest<'r>) -> Option<(&'r str, u64)> {
        let id = headers::get(request.headers, ID)?.trim();
        let time = unix_seconds(headers::get(request.headers, TIME)?.trim())?;
        (!id.is_empty()).then_some((id, time))
    }

    fn cert_hosts(&self) -> &[String] {
        &self.cert_hosts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::tests::public_key_verifies;

    const WEBHOOK_ID: &str = "4JH86294D6297924G";

    fn paypal(hosts: &str) -> PayPal {
        PayPal {
            webhook_id: Secret::new(WEBHOOK_ID.into()),
            cert_hosts: parse_cert_hosts(hosts).unwrap(),
        }
    }

    fn headers(time: &str, cert_url: &str, algorithm: &str) -> Vec<(String, String)> {
        [
            (
                "paypal-transmission-id",
                "dfb3be50-fd74-11e4-8bf3-77339302725b",
            ),
            ("paypal-transmission-time", time),
            ("paypal-transmission-sig", "c2lnbmF0dXJl"),
            ("paypal-cert-url", cert_url),
            ("paypal-auth-algo", algorithm),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
    }

    fn check(
        scheme: &PayPal,
        headers: &[(String, String)],
        now: u64,
    ) -> Result<Verdict, Rejection> {
        scheme.verify(
            &SignedRequest {
                headers,
                body: b"{}",
                query: None,
            },
            now,
            300,
        )
    }

    #[test]
    fn the_signed_string_is_id_time_webhook_id_and_the_bodys_crc() {
        // PayPal's own SDK tests: crc32 of their sample body is 2771810304;
        // here the CRC of a small body, computed with Python's zlib.crc32.
        assert_eq!(
            signed_string("id", "2015-05-18T15:45:13Z", "WH", b"{}"),
            "id|2015-05-18T15:45:13Z|WH|2745614147"
        );
    }

    /// The gateway fetches certificates only from the origins the scheme
    /// names: PayPal's live ones, or the route's own list.
    #[test]
    fn the_scheme_names_the_origins_certificates_come_from() {
        assert_eq!(
            paypal(DEFAULT_CERT_HOSTS).cert_hosts(),
            ["https://api.paypal.com", "https://api-m.paypal.com"]
        );
        assert_eq!(
            paypal(SANDBOX_CERT_HOSTS).cert_hosts(),
            [
                "https://api.sandbox.paypal.com",
                "https://api-m.sandbox.paypal.com"
            ]
        );
        assert_eq!(
            paypal("http://127.0.0.1:8787").cert_hosts(),
            ["http://127.0.0.1:8787"]
        );
    }

    /// The review's case (round 4, item 12): one environment per route. A
    /// live route (the default) refuses a sandbox certificate, and a list
    /// that names both environments is refused.
    #[test]
    fn a_route_takes_one_paypal_environments_certificates() {
        let now = 1_431_963_913;
        let time = "2015-05-18T15:45:13Z";
        let sandbox = "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42";
        assert!(matches!(
            check(
                &paypal(DEFAULT_CERT_HOSTS),
                &headers(time, sandbox, "SHA256withRSA"),
                now
            ),
            Err(Rejection::Malformed(..))
        ));
        assert!(parse_cert_hosts("https://api.paypal.com,https://api.sandbox.paypal.com").is_err());
        assert!(parse_cert_hosts(SANDBOX_CERT_HOSTS).is_ok());
    }

    #[test]
    fn a_certificate_comes_only_from_an_allowed_origin() {
        let scheme = paypal(SANDBOX_CERT_HOSTS);
        let now = 1_431_963_913;
        let time = "2015-05-18T15:45:13Z";
        let allowed = "https://api.sandbox.paypal.com/v1/notifications/certs/CERT-360caa42";
        let Ok(Verdict::PublicKey(checks)) =
            check(&scheme, &headers(time, allowed, "SHA256withRSA"), now)
        else {
            panic!("a public-key verdict");
        };
        assert_eq!(
            checks[0].key,
            PublicKey::Certificate {
                url: allowed.into()
            }
        );
        assert_eq!(
            &checks[0].message[..],
            signed_string(
                "dfb3be50-fd74-11e4-8bf3-77339302725b",
                time,
                WEBHOOK_ID,
                b"{}"
            )
            .into_bytes()
        );
        for refused in [
            "https://api.sandbox.paypal.com.evil.example/certs/x",
            "https://evil.example/v1/notifications/certs/CERT",
            "http://api.paypal.com/v1/notifications/certs/CERT",
            "https://api.paypal.com",
            "https://api.paypal.com@evil.example/x",
            // A character across the origin's end (this panicked once).
            "https://api.paypal.co\u{e9}/x",
            "https://api.sandbox.paypal.co\u{1F600}",
        ] {
            assert!(
                matches!(
                    check(&scheme, &headers(time, refused, "SHA256withRSA"), now),
                    Err(Rejection::Malformed(..))
                ),
                "{refused}"
            );
        }
        let local = paypal("http://127.0.0.1:9999");
        assert!(check(
            &local,
            &headers(
                time,
                "http://127.0.0.1:9999/v1/notifications/certs/cert.pem",
                "SHA256withRSA"
            ),
            now
        )
        .is_ok());
        assert!(
            parse_cert_hosts("http://evil.example").is_err(),
            "http only for a local test host"
        );
        assert!(parse_cert_hosts("https://a.example/path").is_err());
        // The review's case (round 4, item 14): exact hosts, and only
        // PayPal's certificate path, without a query or fragment.
        assert!(parse_cert_hosts("http://localhost.attacker.example").is_err());
        for refused in [
            "http://127.0.0.1:9999/cert.pem",
            "http://127.0.0.1:9999/v1/notifications/certs/",
            "http://127.0.0.1:9999/v1/notifications/certs/cert.pem?x=1",
            "http://127.0.0.1:9999/v1/notifications/certs/cert.pem#x",
            "http://127.0.0.1:9999/v1/notifications/certs/../admin",
            "http://127.0.0.1:99990/v1/notifications/certs/cert.pem",
        ] {
            assert!(
                matches!(
                    check(&local, &headers(time, refused, "SHA256withRSA"), now),
                    Err(Rejection::Malformed(..))
                ),
                "{refused}"
            );
        }
    }

    #[test]
    fn stale_times_and_other_algorithms_are_refused() {
        let scheme = paypal(DEFAULT_CERT_HOSTS);
        let url = "https://api.paypal.com/v1/notifications/certs/CERT-1";
        let time = "2015-05-18T15:45:13Z";
        assert!(matches!(
            check(
                &scheme,
                &headers(time, url, "SHA256withRSA"),
                1_431_963_913 + 301
            ),
            Err(Rejection::Stale { .. })
        ));
        assert!(matches!(
            check(&scheme, &headers(time, url, "SHA1withRSA"), 1_431_963_913),
            Err(Rejection::Malformed(..))
        ));
    }

    #[test]
    fn a_signature_by_the_certificates_key_verifies() {
        use rsa::pkcs8::DecodePrivateKey;
        let der =
            super::super::x509::der_of(include_bytes!("../../tests/fixtures/test-certificate.pem"))
                .unwrap();
        let spki = super::super::x509::subject_public_key_info(&der)
            .unwrap()
            .to_vec();
        let private = rsa::RsaPrivateKey::from_pkcs8_pem(include_str!(
            "../../tests/fixtures/test-certificate.key"
        ))
        .unwrap();
        let message = signed_string(
            "id-1",
            "2026-12-02T00:00:00Z",
            WEBHOOK_ID,
            br#"{"id":"WH-1"}"#,
        );
        use sha2::Digest;
        let signature = private
            .sign(
                rsa::Pkcs1v15Sign::new::<sha2::Sha256>(),
                &sha2::Sha256::digest(message.as_bytes()),
            )
            .unwrap();
        let check = PublicKeyCheck {
            algorithm: PublicKeyAlgorithm::RsaPkcs1Sha256,
            key: PublicKey::Raw(spki),
            message: message.into_bytes().into(),
            signature,
        };
        assert!(public_key_verifies(&check));
        let mut tampered = check.clone();
        let mut message = check.message.to_vec();
        message[0] ^= 1;
        tampered.message = message.into();
        assert!(!public_key_verifies(&tampered));
    }
}
