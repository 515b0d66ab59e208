//! Who acted, proved (adapter; SPEC §13, v5): the `Cf-Access-Jwt-Assertion`
//! of an operator's call, read by [`idemgate_core::access`] and its RS256
//! signature checked with WebCrypto under the team's key, fetched from
//! `ACCESS_TEAM`'s `/cdn-cgi/access/certs` and kept in this isolate for an
//! hour (asked again at most once a minute for a key id it lacks, so a
//! made-up `kid` costs no more).

use idemgate_core::access::{read_assertion, AccessConfig, AccessKey, ASSERTION_HEADER};
use idemgate_core::headers::{self, HeaderList};

/// How long the team's keys are kept.
const KEYS_TTL_MS: u64 = 3_600_000;
/// How soon keys are asked again for a key id they lack.
const REFETCH_AFTER_MS: u64 = 60_000;
/// The team's certs are a few kilobytes.
const MAX_CERTS_BYTES: u32 = 65_536;

/// The email an Access token on the call proves, if `access` is set and
/// the token verifies; `None` otherwise (the actor is then the token used).
pub async fn verified_email(
    access: Option<&AccessConfig>,
    header_list: &HeaderList,
) -> Option<String> {
    let access = access?;
    let token = headers::get(header_list, ASSERTION_HEADER)?;
    let now = worker::Date::now().as_millis();
    let assertion = read_assertion(token, access, now / 1_000).ok()?;
    let key = key(access, &assertion.kid, now).await?;
    crate::public_key::rs256_verifies(&key.n, &key.e, &assertion.signature, &assertion.message)
        .await
        .then_some(assertion.email)
}

/// The team's key `kid`, from this isolate's keys or fetched.
async fn key(access: &AccessConfig, kid: &str, now: u64) -> Option<AccessKey> {
    let (found, fetch) = crate::isolate::with(|isolate| {
        let keys = isolate.access_keys.borrow();
        match &keys.kept {
            Some((team, at, keys)) if *team == access.team => {
                let found = keys.iter().find(|key| key.kid == kid).cloned();
                let stale = now.saturating_sub(*at) >= KEYS_TTL_MS;
                let may_refetch = now.saturating_sub(*at) >= REFETCH_AFTER_MS;
                (found.clone(), stale || (found.is_none() && may_refetch))
            }
            _ => (None, true),
        }
    });
    if !fetch {
        return found;
    }
    let fetched = crate::public_key::fetch_bounded(&access.certs_url(), MAX_CERTS_BYTES)
        .await
        .and_then(|body| idemgate_core::access::read_certs(&body).ok());
    let Some(keys) = fetched else {
        // The keys could not be read: those kept (if any) still stand.
        return found;
    };
    let key = keys.iter().find(|key| key.kid == kid).cloned();
    crate::isolate::with(|isolate| {
        isolate.access_keys.borrow_mut().kept = Some((access.team.clone(), now, keys));
    });
    key
}
