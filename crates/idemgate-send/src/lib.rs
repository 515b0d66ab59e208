//! `scripts/send`: signs a realistic sample delivery of a provider with the
//! secret its route names in `.dev.vars`, and posts it to the local
//! gateway, as the provider would (the way `stripe trigger` does), so an
//! origin can be tried end to end under `wrangler dev`.
//!
//! - [`dotenv`]: `.dev.vars`, read as wrangler reads it;
//! - [`route`]: the route a provider's delivery goes to, configured by
//!   the core exactly as the worker configures it;
//! - [`fixture`] and [`template`]: sample deliveries in `fixtures/`, with
//!   fresh ids and times per event;
//! - [`sign`]: signed by the core's `sign`, or here for the public-key
//!   senders (Standard Webhooks `v1a`, PayPal);
//! - [`http`], [`state`] and [`cli`]: sending, the last event of each
//!   route (`--same-event`), and the command line.

pub mod cli;
pub mod dotenv;
pub mod fixture;
pub mod http;
pub mod provider;
pub mod route;
pub mod sign;
pub mod state;
pub mod template;
