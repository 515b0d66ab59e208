//! What a source of reconciliation is (its entry, which each provider's
//! file writes) and what a route's `reconcile` table configures: the
//! ground the providers' files, the API and the table stand on.

use std::fmt;

use super::types::TypeFilter;
use super::wire::{ApiError, ApiRequest, ApiResponse, Page, Window};

pub(super) const DAY: u64 = 86_400;

/// One row of the table of sources (`reconcile::SOURCES`), in its
/// provider's file: everything a route's
/// configuration and a run know of that provider's events API.
pub struct SourceEntry {
    /// The name `reconcile.source` takes.
    pub name: &'static str,
    /// The signature scheme a route reconciled against it must verify: the
    /// one whose deliveries the API lists (`stripe` for both of Stripe's
    /// lists).
    pub scheme: &'static str,
    pub default_api_base: &'static str,
    /// How far back the provider lists events (or lets them be re-sent):
    /// a longer lookback would only list nothing.
    pub listed_for_seconds: u64,
    /// How long after an event the provider itself may still deliver it
    /// (its automatic retries, or a person's redelivery), from its own
    /// documentation. A receipt the run fills must outlive it, or the
    /// provider's late retry finds no receipt and is forwarded again.
    pub retry_horizon_seconds: u64,
    pub lists: Listed,
    /// Whether the provider retries a re-send it was asked for as it does
    /// any delivery: asked once, the event is the provider's to deliver.
    /// Otherwise (a redelivery of one attempt) each run asks again while
    /// none reached the route.
    pub retries_resends: bool,
    /// Whether a re-send carries other bytes than the first delivery: such
    /// a route compares deliveries by event id, as it does a reconciled
    /// one.
    pub resends_new_bytes: bool,
    /// What the route's `endpoint` names, if anything.
    pub endpoint: Endpoint,
    /// Where the API's error body says its words (the first found).
    pub error_text: &'static [&'static str],
    /// A request to run first for an access token, and how its answer
    /// reads; `None` when the key is used as it is.
    pub token: Option<TokenExchange>,
    /// The request for the page at `cursor` (the first with `None`), with
    /// `credential` (the key, or the token).
    pub list: fn(&ReconcileConfig, &str, Window, Option<&str>) -> ApiRequest,
    /// The page an answer holds, or the API's error.
    pub read_page: fn(&ReconcileConfig, Window, &ApiResponse) -> Result<Page, ApiError>,
    /// The request that asks the provider to re-send a listed event (its
    /// `resend_id`), with `credential`; `None` for a provider that is not
    /// asked: the run delivers the event itself ([`FillBy`]).
    pub resend: Option<fn(&ReconcileConfig, &str, &str) -> ApiRequest>,
}

/// What a provider's API lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Events, each placed in the window by its own time; a run finds an
    /// event's receipt through the key the route's key sources derive
    /// from it.
    Events,
    /// A hook's deliveries and what the route answered each (GitHub): an
    /// event's deliveries may span pages, so the run places it by its
    /// first delivery once all of it is read, and whether it arrived is
    /// the API's to say (the list has no body to key).
    Deliveries,
}

/// Which of the account's endpoints is the route's (`reconcile.endpoint`).
#[derive(Debug, Clone, Copy)]
pub enum Endpoint {
    /// None: an `endpoint` is refused.
    Unused,
    /// Required: `what` it names, and whether a value is one.
    Required {
        what: &'static str,
        valid: fn(&str) -> bool,
    },
    /// Taken from the route's signing secret when left out (PayPal's
    /// webhook id): what a wrong one is told, and whether a value is one.
    OrSigningSecret {
        wrong: &'static str,
        valid: fn(&str) -> bool,
    },
}

/// An access token asked for before a run's first page (PayPal's OAuth
/// client credentials).
#[derive(Debug, Clone, Copy)]
pub struct TokenExchange {
    /// The request, from the API's origin and the route's key.
    pub request: fn(&str, &str) -> ApiRequest,
    pub read: fn(&ApiResponse) -> Result<String, ApiError>,
}

/// A provider whose events API a route may reconcile against: a row of
/// the table of sources.
#[derive(Clone, Copy)]
pub struct Source(pub(super) &'static SourceEntry);

/// How a run delivers an event that never arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillBy {
    /// idemgate delivers the event as the API returned it, marked
    /// `Idempotency-Source: reconciliation`.
    Delivering,
    /// The provider is asked to re-send its signed delivery, which then
    /// arrives through the route like any other.
    AskingTheProvider,
}

impl Source {
    pub fn entry(self) -> &'static SourceEntry {
        self.0
    }

    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// The signature scheme a route reconciled against this provider must
    /// verify: the one whose deliveries the events API lists.
    pub fn scheme(self) -> &'static str {
        self.0.scheme
    }

    pub fn default_api_base(self) -> &'static str {
        self.0.default_api_base
    }

    pub fn listed_for_seconds(self) -> u64 {
        self.0.listed_for_seconds
    }

    pub fn retry_horizon_seconds(self) -> u64 {
        self.0.retry_horizon_seconds
    }

    /// Whether a run finds an event's receipt through the key the route's
    /// key sources derive from the listed event ([`Listed::Events`]).
    pub fn keys_listed_events(self) -> bool {
        self.0.lists == Listed::Events
    }

    pub fn retries_resends(self) -> bool {
        self.0.retries_resends
    }

    pub fn resends_new_bytes(self) -> bool {
        self.0.resends_new_bytes
    }

    /// A provider that can be asked to re-send is asked; one that cannot
    /// has its events delivered by the run.
    pub fn fills_by(self) -> FillBy {
        match self.0.resend {
            Some(_) => FillBy::AskingTheProvider,
            None => FillBy::Delivering,
        }
    }
}

/// One source per name.
impl PartialEq for Source {
    fn eq(&self, other: &Source) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Source {}

impl fmt::Debug for Source {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A route's `reconcile` table, checked (SPEC §11).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "sign", derive(PartialEq, Eq))]
pub struct ReconcileConfig {
    pub source: Source,
    /// The name of the secret holding the API key (shown; its value never).
    pub api_key_name: String,
    pub api_key: crate::signature::Secret,
    pub types: TypeFilter,
    pub every_seconds: u64,
    pub lookback_seconds: u64,
    pub grace_seconds: u64,
    /// The API's origin, without a trailing slash.
    pub api_base: String,
    /// Which of the account's endpoints is the route's: GitHub's hook
    /// (`repos/OWNER/REPO/hooks/ID`, `orgs/ORG/hooks/ID` or `app/hook`),
    /// Paddle's notification destination (`ntfset_…`), PayPal's webhook
    /// id (the route's signing secret).
    pub endpoint: Option<String>,
}

impl ReconcileConfig {
    /// The window a run that starts at `now` (Unix seconds) lists.
    pub fn window(&self, now: u64) -> Window {
        Window {
            from: now.saturating_sub(self.lookback_seconds),
            to: now.saturating_sub(self.grace_seconds),
        }
    }

    /// What a run's cursor belongs to: the source, the API's origin, the
    /// endpoint and the types. A cursor of other ones is not followed.
    pub fn cursor_scope(&self) -> String {
        crate::canonical::sha256_hex(
            format!(
                "{}\n{}\n{}\n{}",
                self.source.name(),
                self.api_base,
                self.endpoint.as_deref().unwrap_or(""),
                self.types.patterns().join(",")
            )
            .as_bytes(),
        )
    }
}
