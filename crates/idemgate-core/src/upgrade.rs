//! Upgrading from the second version (SPEC §3, v3 "Upgrading"). This
//! version derives some keys and scopes differently: `body-sha256` on
//! signed routes, Adyen's key, encoded composite parts, api mode's tenant.
//! A sender's retry that spans the upgrade would then land on a new object
//! and be forwarded again. So for a retention after this version first ran
//! against the deployment's index, a delivery whose previous identity
//! differs ([`crate::pipeline::Admitted::previous`]) is first offered to the
//! object the second version used, which answers it only if it holds a
//! receipt of the key (a replay, a wait, a 422), and otherwise takes
//! nothing.

/// The index's record of when this version first ran (ms).
pub const SINCE: &str = "third_version_since";

/// Whether a delivery at `now` on a route keeping receipts `retention_ms`
/// is also looked up under its previous identity. `since` is when this
/// version first ran; unknown (no index, or it did not answer), it is
/// looked up: one more object request is cheaper than a second charge.
pub fn looks_up_previous(since: Option<u64>, now: u64, retention_ms: u64) -> bool {
    match since {
        Some(since) => now < since.saturating_add(retention_ms),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lookup_lasts_one_retention_from_the_first_run() {
        let day = 86_400_000;
        assert!(looks_up_previous(Some(1_000), 1_000, 3 * day));
        assert!(looks_up_previous(Some(1_000), 1_000 + 3 * day - 1, 3 * day));
        assert!(!looks_up_previous(Some(1_000), 1_000 + 3 * day, 3 * day));
        assert!(looks_up_previous(None, u64::MAX, day), "unknown: looked up");
        assert!(looks_up_previous(Some(u64::MAX), 5, day), "no overflow");
    }
}
