//! What [`super::authenticate`] comes to: a delivery authenticated at
//! once, or one whose public-key signature the runtime's WebCrypto must
//! settle first.

use super::Authenticated;
use crate::problem::Problem;
use crate::signature::PublicKeyCheck;

/// What authentication came to.
pub enum Authentication<'a> {
    Done(Authenticated<'a>),
    Pending(PendingAuthentication<'a>),
}

impl<'a> Authentication<'a> {
    /// The authenticated delivery, for a route whose scheme needs no
    /// public key: tests, benchmarks, and senders that sign with HMAC.
    pub fn done(self) -> Result<Authenticated<'a>, Problem> {
        match self {
            Authentication::Done(authenticated) => Ok(authenticated),
            Authentication::Pending(_) => Err(Problem::BadSignature {
                reason: "a public-key signature needs the runtime to check it".into(),
            }),
        }
    }
}

/// A delivery whose signature only public-key checks can settle: it is
/// authenticated once any one of [`PendingAuthentication::checks`] verifies.
pub struct PendingAuthentication<'a> {
    pub(super) authenticated: Authenticated<'a>,
    pub(super) checks: Vec<PublicKeyCheck>,
}

impl<'a> PendingAuthentication<'a> {
    pub fn checks(&self) -> &[PublicKeyCheck] {
        &self.checks
    }

    /// The runtime's result of [`PendingAuthentication::checks`].
    pub fn complete(self, checked: PublicKeyChecked) -> Result<Authenticated<'a>, Problem> {
        match checked {
            PublicKeyChecked::Verified => Ok(self.authenticated),
            PublicKeyChecked::Rejected => Err(Problem::BadSignature {
                reason: "mismatch: no signature matches the body".into(),
            }),
            PublicKeyChecked::KeyUnavailable => Err(Problem::SigningKeyUnavailable),
        }
    }
}

/// What the runtime found of a delivery's public-key signatures, ordered
/// so that the greatest of its checks' results is the delivery's: any one
/// that verified passes it, and a key that could not be fetched leaves it
/// undecided rather than forged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PublicKeyChecked {
    /// None verified, with every key at hand: forged, or signed with
    /// another key.
    Rejected,
    /// None verified, and a certificate could not be fetched: a genuine
    /// delivery must not be refused as forged for its host's outage, so it
    /// is answered 503 and its sender retries.
    KeyUnavailable,
    /// It verified.
    Verified,
}
