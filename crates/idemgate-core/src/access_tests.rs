use super::*;

const NOW: u64 = 1_800_000_000;
const AUD: &str = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2";
const TEAM: &str = "https://acme.cloudflareaccess.com";

fn config() -> AccessConfig {
    parse(Some(TEAM), Some(AUD)).unwrap().unwrap()
}

fn token(header: &str, claims: &str) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header),
        URL_SAFE_NO_PAD.encode(claims),
        URL_SAFE_NO_PAD.encode([7u8; 256])
    )
}

fn claims(aud: &str, iss: &str, exp: u64) -> String {
    format!(
        r#"{{"aud":{aud},"email":"ceo@corp.example","exp":{exp},"iat":{},"nbf":{},"iss":"{iss}","type":"app","identity_nonce":"x","sub":"7335d417","country":"US"}}"#,
        NOW - 10,
        NOW - 10
    )
}

const HEADER: &str = r#"{"alg":"RS256","kid":"7a8b9c","typ":"JWT"}"#;

#[test]
fn both_or_neither_and_each_checked() {
    assert_eq!(parse(None, None), Ok(None));
    assert_eq!(config().certs_url(), format!("{TEAM}/cdn-cgi/access/certs"));
    assert_eq!(parse(Some(TEAM), None).unwrap_err().0, "ACCESS_AUD");
    assert_eq!(parse(None, Some(AUD)).unwrap_err().0, "ACCESS_TEAM");
    for team in [
        "http://acme.cloudflareaccess.com",
        "https://acme.example/x",
        "acme",
    ] {
        assert_eq!(
            parse(Some(team), Some(AUD)).unwrap_err().0,
            "ACCESS_TEAM",
            "{team}"
        );
    }
    assert!(parse(Some("http://127.0.0.1:9000"), Some(AUD))
        .unwrap()
        .is_some());
    assert!(parse(Some(&format!("{TEAM}/")), Some(AUD))
        .unwrap()
        .is_some());
    assert_eq!(parse(Some(TEAM), Some("a b")).unwrap_err().0, "ACCESS_AUD");
}

#[test]
fn a_token_for_this_application_and_team_names_its_email() {
    let aud = format!("[\"{AUD}\"]");
    let token = token(HEADER, &claims(&aud, TEAM, NOW + 3_600));
    let assertion = read_assertion(&token, &config(), NOW).unwrap();
    assert_eq!(assertion.kid, "7a8b9c");
    assert_eq!(assertion.email, "ceo@corp.example");
    assert_eq!(assertion.signature, vec![7u8; 256]);
    let signed = token.rsplit_once('.').unwrap().0;
    assert_eq!(assertion.message, signed.as_bytes());
    // The audience may be one string.
    let one = token_with(&claims(&format!("\"{AUD}\""), TEAM, NOW + 3_600));
    assert!(read_assertion(&one, &config(), NOW).is_ok());
}

fn token_with(claims: &str) -> String {
    token(HEADER, claims)
}

/// The review's item 10 (round 5): what the caller claims is not who
/// acted. Each of these is not trusted.
#[test]
fn a_token_that_does_not_hold_is_not_trusted() {
    let aud = format!("[\"{AUD}\"]");
    for (why, token) in [
        (
            "another application",
            token_with(&claims("[\"other-aud\"]", TEAM, NOW + 60)),
        ),
        (
            "another team",
            token_with(&claims(&aud, "https://evil.cloudflareaccess.com", NOW + 60)),
        ),
        ("expired", token_with(&claims(&aud, TEAM, NOW - 61))),
        (
            "HS256",
            token(
                r#"{"alg":"HS256","kid":"k"}"#,
                &claims(&aud, TEAM, NOW + 60),
            ),
        ),
        (
            "none",
            token(r#"{"alg":"none","kid":"k"}"#, &claims(&aud, TEAM, NOW + 60)),
        ),
        (
            "no kid",
            token(r#"{"alg":"RS256"}"#, &claims(&aud, TEAM, NOW + 60)),
        ),
        (
            "no email",
            token_with(&format!(
                r#"{{"aud":{aud},"exp":{},"iss":"{TEAM}"}}"#,
                NOW + 60
            )),
        ),
        (
            "not yet",
            token_with(&format!(
                r#"{{"aud":{aud},"email":"a@b","exp":{},"nbf":{},"iss":"{TEAM}"}}"#,
                NOW + 600,
                NOW + 120
            )),
        ),
        ("two parts", "a.b".to_string()),
        ("not base64", "!.!.!".to_string()),
    ] {
        assert!(read_assertion(&token, &config(), NOW).is_err(), "{why}");
    }
}

#[test]
fn the_teams_rsa_keys_are_read_from_its_certs() {
    let body =
        br#"{"keys":[{"kid":"k1","kty":"RSA","alg":"RS256","use":"sig","e":"AQAB","n":"nnn"},
        {"kid":"k2","kty":"EC","crv":"P-256","x":"x","y":"y"}],
        "public_cert":{"kid":"k1","cert":"-----BEGIN CERTIFICATE-----"},"public_certs":[]}"#;
    let keys = read_certs(body).unwrap();
    assert_eq!(
        keys,
        [AccessKey {
            kid: "k1".into(),
            n: "nnn".into(),
            e: "AQAB".into()
        }]
    );
    assert!(read_certs(b"[]").is_err());
}

#[test]
fn the_actor_is_the_proved_email_or_the_token_used() {
    assert_eq!(
        actor(Some("ceo@corp.example"), &TokenUsed::Deployment),
        "ceo@corp.example"
    );
    assert_eq!(actor(None, &TokenUsed::Deployment), "admin-token");
    assert_eq!(
        actor(Some(" "), &TokenUsed::Route("stripe".into())),
        "route-token:stripe"
    );
    assert_eq!(
        actor(None, &TokenUsed::Route("stripe".into())),
        "route-token:stripe"
    );
}
