//! idemgate: an edge gateway that makes payment deliveries idempotent.
//!
//! The modules follow `SPEC.md`; the pure ones have no `worker` types and
//! are tested natively, the adapters are thin.
//!
//! | module | spec | role |
//! | --- | --- | --- |
//! | [`pipeline`] | §1 | routing, size, key, fingerprint, scope: one short pipeline |
//! | [`config`] | §8 | typed configuration; invalid values are errors |
//! | [`key`] | §3 | key sources, validation, Durable Object names |
//! | [`canonical`] | §1.5 | RFC 8785 canonical JSON and the fingerprint |
//! | [`receipt`] | §2 | receipt states, the decision table, outcome classification |
//! | [`engine`] | §2 | the Durable Object's logic against a `Backend` trait |
//! | [`answer`] | §2, §6 | what each decision renders to: status, headers, body |
//! | [`signature`] | §4 | sender authentication: Stripe, Standard Webhooks |
//! | [`origin`] | §5 | target URL, idempotency headers and their signature |
//! | [`headers`] | §5 | hop-by-hop and `Idempotency-*` filtering |
//! | [`decision_log`] | — | one structured log line per decision |
//! | `log_sink` | — | writes those lines to the console from a microtask (adapter) |
//! | [`problem`] | §6 | every edge error, rendered to problem+json once |
//! | [`admin`] | §7 | operator API (adapter plus pure authorization) |
//! | [`edge_cache`] | §2 | replays kept in the isolate, answered without an object round trip |
//! | [`gateway`] | §1 | the fetch handler (adapter) |
//! | `edge_http` | — | every answer the worker renders, and a delivery's request; one JS call per header list (adapter) |
//! | [`object_call`] | — | what the gateway asks of a key's object over RPC, and the answer |
//! | [`object_client`] | — | the gateway's RPC call to the key's object (adapter) |
//! | [`dedup_object`] | §2 | the Durable Object (adapter: storage, alarms, RPC) |

pub mod admin;
pub mod answer;
pub mod canonical;
pub mod config;
mod convert;
pub mod decision_log;
pub mod dedup_object;
pub mod edge_cache;
mod edge_http;
pub mod engine;
mod env;
pub mod gateway;
pub mod headers;
pub mod key;
mod log_sink;
#[cfg(test)]
mod memory_backend;
mod mutation;
pub mod object_call;
mod object_client;
pub mod origin;
pub mod pipeline;
pub mod problem;
pub mod receipt;
pub mod signature;
#[cfg(test)]
mod simulation;
pub mod stats;

use worker::{event, web_sys, Context, Env};

// The runtime's request as it is: `worker::Request` would read `Request.cf`
// and more on every delivery (see `edge_http`).
#[event(fetch)]
async fn fetch(
    request: web_sys::Request,
    env: Env,
    _context: Context,
) -> worker::Result<web_sys::Response> {
    gateway::handle(request, env).await
}
