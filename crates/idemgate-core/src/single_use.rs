//! Signed ids a delivery may be forwarded under once (SPEC §4): a sender
//! whose signature does not bind the body (PayPal signs a CRC32 of it,
//! which anyone can match) still signs an id for each transmission. Within
//! the signed time's tolerance a captured transmission verifies with any
//! body of the same CRC32, and so under any event id the forger writes;
//! the key would be new each time. So each transmission id is claimed by
//! the first key it is delivered under, in a Durable Object of its own,
//! for as long as it could still verify, and refused under any other.
//!
//! The claim names the key's object, not the body: the same event sent
//! again under the same transmission (a retry of the sender, a storm) is
//! the same claimant and goes on to its receipt, which replays it.

use serde::{Deserialize, Serialize};

use crate::canonical::sha256_hex;

/// A transmission's claim, as its object keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The object of the key the transmission was first delivered under.
    pub claimant: String,
    /// When a replay of the transmission can no longer verify (ms).
    pub until: u64,
}

/// What a claim comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimDecision {
    /// Unclaimed (or its claim ran out): this key takes it.
    Take,
    /// Already this key's: go on.
    Held,
    /// Another key's: a transmission replayed with another body.
    Refused,
}

pub fn decide_claim(existing: Option<&Claim>, claimant: &str, now: u64) -> ClaimDecision {
    match existing {
        Some(claim) if claim.until > now && claim.claimant == claimant => ClaimDecision::Held,
        Some(claim) if claim.until > now => ClaimDecision::Refused,
        _ => ClaimDecision::Take,
    }
}

/// The name of the object that holds `id`'s claim on `route`: 64 hex
/// digits like a key's object, from another derivation, so the two never
/// meet. Per route, not per key scope: a tenant header or a path is not
/// signed, and a transmission replayed under another must meet its claim.
pub fn object_name(route: &str, id: &str) -> String {
    let encoded = format!(
        "idemgate/single-use/v1|{}:{}|{}:{}",
        route.len(),
        route,
        id.len(),
        id
    );
    sha256_hex(encoded.as_bytes())
}

/// The answer to a transmission delivered again under another key: a
/// forgery (the signature verified only because it binds a CRC32).
pub fn replayed() -> crate::problem::Problem {
    crate::problem::Problem::BadSignature {
        reason: "replayed: this signed transmission was already delivered with another body (PayPal signs only a CRC32 of it)".into(),
    }
}

/// How long after its signed time's tolerance a claim is kept: clocks
/// differ, and a claim kept a little long costs a row for a minute.
pub const CLAIM_MARGIN_MS: u64 = 60_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transmission_is_one_keys_until_it_could_no_longer_verify() {
        let claim = Claim {
            claimant: "object-a".into(),
            until: 1_000,
        };
        assert_eq!(decide_claim(None, "object-a", 0), ClaimDecision::Take);
        assert_eq!(
            decide_claim(Some(&claim), "object-a", 999),
            ClaimDecision::Held
        );
        assert_eq!(
            decide_claim(Some(&claim), "object-b", 999),
            ClaimDecision::Refused,
            "the same transmission under another key"
        );
        assert_eq!(
            decide_claim(Some(&claim), "object-b", 1_000),
            ClaimDecision::Take
        );
    }

    #[test]
    fn claim_objects_are_named_apart_from_key_objects() {
        let name = object_name("scope", "id");
        assert_eq!(name.len(), 64);
        assert_ne!(name, object_name("scope", "id2"));
        assert_ne!(name, object_name("scope2", "id"));
        let key = crate::key::IdempotencyKey::parse("id", "test").unwrap();
        let scope = crate::key::Scope::new("route", None, None);
        assert_ne!(object_name("route", "id"), scope.object_name(&key));
    }
}
