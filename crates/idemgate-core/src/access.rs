//! Who acted, proved (SPEC §13, v5): behind Cloudflare Access, the
//! `Cf-Access-Jwt-Assertion` token names the person, and the audit log
//! takes that name only when the token verifies: RS256 under a key the
//! team publishes at `/cdn-cgi/access/certs`, for this application's
//! audience (`ACCESS_AUD`), issued by the team (`ACCESS_TEAM`), not
//! expired. A `Cf-Access-Authenticated-User-Email` header alone is what
//! the caller says: on a hostname Access does not front (`workers.dev`, a
//! preview) anyone holding a token could send it.
//!
//! Pure: the token is read and its claims checked here; the signature
//! goes to the runtime's WebCrypto with the key its `kid` names.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::Deserialize;

/// The actor when the deployment's token was used and no Cloudflare Access
/// identity was proved ([`actor`]).
pub const TOKEN_ACTOR: &str = "admin-token";

/// The request header Access adds to what it lets through.
pub const ASSERTION_HEADER: &str = "cf-access-jwt-assertion";
/// How far a token's times may be off this clock.
const LEEWAY_SECONDS: u64 = 60;

/// `ACCESS_TEAM` and `ACCESS_AUD`, both set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessConfig {
    /// The team's origin, `https://<team>.cloudflareaccess.com` (a
    /// loopback `http://` origin in tests): the tokens' issuer.
    pub team: String,
    /// The application's audience tag.
    pub aud: String,
}

impl AccessConfig {
    /// Where the team publishes its signing keys.
    pub fn certs_url(&self) -> String {
        format!("{}/cdn-cgi/access/certs", self.team)
    }
}

/// `ACCESS_TEAM` and `ACCESS_AUD` as read: both, or neither. An `Err`
/// names the variable at fault and why.
pub fn parse(
    team: Option<&str>,
    aud: Option<&str>,
) -> Result<Option<AccessConfig>, (&'static str, String)> {
    let (team, aud) = match (team.map(str::trim), aud.map(str::trim)) {
        (None, None) => return Ok(None),
        (Some(team), Some(aud)) => (team, aud),
        (Some(_), None) => {
            return Err((
                "ACCESS_AUD",
                "is required with ACCESS_TEAM: the application's audience tag".into(),
            ))
        }
        (None, Some(_)) => {
            return Err((
                "ACCESS_TEAM",
                "is required with ACCESS_AUD: https://<team>.cloudflareaccess.com".into(),
            ))
        }
    };
    let team = crate::api_origin::parse_api_origin(team.trim_end_matches('/')).ok_or((
        "ACCESS_TEAM",
        "must be the team's https:// origin (https://<team>.cloudflareaccess.com), without a path"
            .to_string(),
    ))?;
    let aud_shaped = (1..=128).contains(&aud.len())
        && aud
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte));
    if !aud_shaped {
        return Err((
            "ACCESS_AUD",
            "must be the application's audience tag (letters, digits, - and _)".into(),
        ));
    }
    Ok(Some(AccessConfig {
        team,
        aud: aud.to_string(),
    }))
}

/// A token whose claims hold: what its signature must still prove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    /// The signing key's id.
    pub kid: String,
    pub email: String,
    /// The signed bytes: the token's header and claims as sent.
    pub message: Vec<u8>,
    /// The RS256 signature.
    pub signature: Vec<u8>,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: String,
}

#[derive(Deserialize)]
struct Claims {
    aud: Audience,
    email: String,
    exp: u64,
    #[serde(default)]
    nbf: Option<u64>,
    iss: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// Reads `token` and checks every claim that needs no key, at `now`
/// (Unix seconds). The `Err` says why it is not trusted (never shown to
/// the caller: an untrusted token only means the actor is the token used).
pub fn read_assertion(token: &str, config: &AccessConfig, now: u64) -> Result<Assertion, String> {
    let mut parts = token.trim().split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a compact JWT".into());
    };
    let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).map_err(|_| "not base64url");
    let header_json: Header = serde_json::from_slice(&decode(header)?)
        .map_err(|_| "a header without alg and kid".to_string())?;
    if header_json.alg != "RS256" || header_json.kid.is_empty() {
        return Err("not RS256 with a kid".into());
    }
    let claims_json: Claims = serde_json::from_slice(&decode(claims)?)
        .map_err(|_| "claims without aud, email, exp or iss".to_string())?;
    let audiences = match &claims_json.aud {
        Audience::One(aud) => std::slice::from_ref(aud),
        Audience::Many(auds) => auds.as_slice(),
    };
    if !audiences.contains(&config.aud) {
        return Err("another application's token".into());
    }
    if claims_json.iss.trim_end_matches('/') != config.team {
        return Err("another team's token".into());
    }
    if claims_json.exp.saturating_add(LEEWAY_SECONDS) <= now {
        return Err("expired".into());
    }
    if claims_json
        .nbf
        .is_some_and(|nbf| nbf > now.saturating_add(LEEWAY_SECONDS))
    {
        return Err("not yet valid".into());
    }
    if claims_json.email.trim().is_empty() {
        return Err("no email".into());
    }
    Ok(Assertion {
        kid: header_json.kid,
        email: claims_json.email,
        message: format!("{header}.{claims}").into_bytes(),
        signature: decode(signature)?,
    })
}

/// One of the team's signing keys, as its JWK's RSA modulus and exponent
/// (base64url), for WebCrypto.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct AccessKey {
    pub kid: String,
    pub n: String,
    pub e: String,
}

#[derive(Deserialize)]
struct Certs {
    keys: Vec<serde_json::Value>,
}

/// The RSA keys of a `/cdn-cgi/access/certs` answer (`keys`, JWKs); any
/// other key is left out.
pub fn read_certs(body: &[u8]) -> Result<Vec<AccessKey>, String> {
    let certs: Certs = serde_json::from_slice(body).map_err(|_| "not a set of keys".to_string())?;
    Ok(certs
        .keys
        .into_iter()
        .filter(|key| key["kty"] == "RSA")
        .filter_map(|key| serde_json::from_value(key).ok())
        .collect())
}

/// Which token authorised an act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenUsed {
    /// The deployment's `ADMIN_TOKEN`.
    Deployment,
    /// A route's own `admin_token`.
    Route(String),
}

/// The audit entry's `actor`: the proved email, or the kind of token used.
pub fn actor(verified_email: Option<&str>, token: &TokenUsed) -> String {
    match (verified_email.map(str::trim), token) {
        (Some(email), _) if !email.is_empty() => email.to_string(),
        (_, TokenUsed::Deployment) => TOKEN_ACTOR.to_string(),
        (_, TokenUsed::Route(route)) => format!("route-token:{route}"),
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
