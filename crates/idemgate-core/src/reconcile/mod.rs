//! Reconciliation (SPEC §11, v4): a route's provider still lists the
//! events it never managed to deliver; a run pages that list, asks each
//! event's own Durable Object whether its delivery arrived, and delivers
//! what did not, so that the origin gets every event once however it came.
//!
//! One file per provider, as `signature/` has one per scheme: each says how
//! its events API is asked (endpoint, pagination, time and type filters,
//! authentication), how its pages and errors read, and how a gap is
//! filled: by asking the provider to re-send a signed delivery (GitHub,
//! PayPal, Paddle) or by delivering the event as the API returned it
//! (Stripe, Square). [`run`] is the run itself, against a [`run::RunBackend`];
//! the Worker's per-route Durable Object only adapts it.

pub mod api;
mod github;
mod paddle;
mod paypal;
mod square;
mod stripe;
mod types;
pub mod wire;

pub use api::EventsApi;
pub use types::TypeFilter;
pub use wire::{ApiError, ApiRequest, ApiResponse, ListedEvent, Page, Window};

use serde::{Deserialize, Serialize};

/// The providers whose events API a route may reconcile against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    Stripe,
    Paddle,
    Paypal,
    Github,
    Square,
}

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

const DAY: u64 = 86_400;

impl Source {
    pub const ALL: [Source; 5] = [
        Source::Stripe,
        Source::Paddle,
        Source::Paypal,
        Source::Github,
        Source::Square,
    ];

    pub fn parse(name: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|source| source.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Source::Stripe => "stripe",
            Source::Paddle => "paddle",
            Source::Paypal => "paypal",
            Source::Github => "github",
            Source::Square => "square",
        }
    }

    /// The signature scheme a route reconciled against this provider must
    /// verify: the one whose deliveries the events API lists.
    pub fn scheme(self) -> &'static str {
        self.name()
    }

    pub fn default_api_base(self) -> &'static str {
        match self {
            Source::Stripe => "https://api.stripe.com",
            Source::Paddle => "https://api.paddle.com",
            Source::Paypal => "https://api-m.paypal.com",
            Source::Github => "https://api.github.com",
            Source::Square => "https://connect.squareup.com",
        }
    }

    /// How far back the provider lists events (or lets them be re-sent):
    /// a longer lookback would only list nothing.
    pub fn listed_for_seconds(self) -> u64 {
        match self {
            Source::Stripe => 30 * DAY,
            Source::Paddle => 90 * DAY,
            // PayPal's dashboard keeps 30 days; its API states none.
            Source::Paypal => 30 * DAY,
            Source::Github => 3 * DAY,
            Source::Square => 28 * DAY,
        }
    }

    /// How long after an event the provider itself may still deliver it
    /// (its automatic retries, or a person's redelivery), from its own
    /// documentation. A receipt the run fills must outlive it, or the
    /// provider's late retry finds no receipt and is forwarded again.
    pub fn retry_horizon_seconds(self) -> u64 {
        match self {
            // Stripe: live-mode deliveries are retried for up to three days.
            Source::Stripe => 3 * DAY,
            // Paddle: a live account's notification is retried over three days.
            Source::Paddle => 3 * DAY,
            // PayPal: up to 25 retries over three days.
            Source::Paypal => 3 * DAY,
            // GitHub retries nothing itself, but a delivery can be
            // redelivered by hand while it is listed: three days.
            Source::Github => 3 * DAY,
            // Square: retried for up to 72 hours after the event.
            Source::Square => 3 * DAY,
        }
    }

    /// Whether a run finds an event's receipt through the key the route's
    /// key sources derive from the listed event (all but GitHub, whose
    /// API says itself which deliveries the route answered 2xx).
    pub fn keys_listed_events(self) -> bool {
        self != Source::Github
    }

    /// Whether the provider retries a re-send it was asked for as it does
    /// any delivery (Paddle's replay is a new notification; PayPal's
    /// resend is retried like the first delivery): asked once, the event
    /// is the provider's to deliver. GitHub's redelivery is one attempt,
    /// so each run asks again while none reached the route.
    pub fn retries_resends(self) -> bool {
        matches!(self, Source::Paddle | Source::Paypal)
    }

    /// Whether a re-send carries other bytes than the first delivery
    /// (Paddle: a replay is a new notification with its own
    /// `notification_id` in the body): such a route compares deliveries
    /// by event id, as it does a reconciled one.
    pub fn resends_new_bytes(self) -> bool {
        self == Source::Paddle
    }

    pub fn fills_by(self) -> FillBy {
        match self {
            Source::Stripe | Source::Square => FillBy::Delivering,
            Source::Paddle | Source::Paypal | Source::Github => FillBy::AskingTheProvider,
        }
    }
}

/// The value of `Idempotency-Source` on a forward reconciliation made.
pub const RECONCILIATION: &str = "reconciliation";

/// Most runs a route keeps (SPEC §11: the API answers the last 50).
pub const KEPT_RUNS: usize = 50;

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

    pub fn api(&self) -> EventsApi<'_> {
        EventsApi { config: self }
    }
}
