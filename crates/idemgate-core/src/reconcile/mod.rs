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
//! (Stripe's two lists, Square); each file's `SOURCE` says all of it, and [`SOURCES`]
//! lists them. The run itself is `reconcile_runs::run`, against a
//! `RunBackend`; the Worker's per-route Durable Object only adapts it.

pub mod api;
mod github;
mod paddle;
mod paypal;
mod source;
mod square;
mod stripe;
mod stripe_v2;
mod types;
pub mod wire;

pub use api::EventsApi;
pub use source::{Endpoint, FillBy, Listed, ReconcileConfig, Source, SourceEntry, TokenExchange};
pub use types::TypeFilter;
pub use wire::{ApiError, ApiRequest, ApiResponse, ListedEvent, Page, Window};

/// Every provider a route may reconcile against, by the name
/// `reconcile.source` takes. A source's module whose entry is missing here
/// is dead code, which the lints refuse.
pub const SOURCES: &[SourceEntry] = &[
    stripe::SOURCE,
    stripe_v2::SOURCE,
    paddle::SOURCE,
    paypal::SOURCE,
    github::SOURCE,
    square::SOURCE,
];

impl Source {
    /// Stripe's, which the tests name.
    #[allow(non_upper_case_globals)]
    pub const Stripe: Source = Source(&stripe::SOURCE);

    /// Every source, in the order of [`SOURCES`].
    pub fn all() -> impl Iterator<Item = Source> {
        SOURCES.iter().map(Source)
    }

    pub fn parse(name: &str) -> Option<Source> {
        Source::all().find(|source| source.name() == name)
    }
}

/// The value of `Idempotency-Source` on a forward reconciliation made.
pub const RECONCILIATION: &str = "reconciliation";

/// Most runs a route keeps (SPEC §11: the API answers the last 50).
pub const KEPT_RUNS: usize = 50;

#[cfg(test)]
mod source_tests;
