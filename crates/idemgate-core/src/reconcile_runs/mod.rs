//! Reconciliation's runs (SPEC §11): a run against a provider's events API
//! and the keys' objects ([`run`]), and what a route's object keeps
//! between runs ([`route_runs`]). Apart from [`crate::reconcile`] (the
//! providers' APIs as data, which the configuration reads too) because a
//! run admits deliveries as the pipeline does and asks the engine's
//! question of a key: it stands above both, as the gateway does.

pub mod route_runs;
pub mod run;
