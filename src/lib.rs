//! idemgate's deployable Worker: the adapters around the pure core
//! ([`idemgate_core`]), which decides everything. Nothing here is tested
//! natively (the `worker` types are JavaScript-backed); the end-to-end
//! tests drive the built worker under `wrangler dev`.
//!
//! | module | role |
//! | --- | --- |
//! | [`gateway`] | the fetch handler: the runtime's side (`Edge`) of the core's gateway, and rendering |
//! | `admin` | the operator API's I/O (§7) |
//! | `edge_http` | every answer the worker renders, every request it reads or sends (fetch, proxy); one JS call per header list |
//! | `isolate` | what one isolate keeps between requests: configuration, replays, counters, certificates, metrics |
//! | `events` | decision events (SPEC §9): stats, Analytics Engine, log lines |
//! | `receipt_index` | the receipt index: a row written to its shard; listings, counts and the summary asked of every shard of the route, and of an earlier version's D1 index while it is bound (§7, §15) |
//! | [`index_shard`] | a shard of a route's receipt index (`IndexShard`): the index's table in its SQLite, its statements over RPC, its alarm that runs the sweep (§15) |
//! | `index_db` | where an index statement runs: a shard over RPC, the shard's own SQLite, or an earlier version's D1 index |
//! | `sweep` | the sweep, run by each index shard's alarm: wakes overdue receipts (§2b); the Cron Trigger's moves of a D1 index's rows into the shards |
//! | `object_client` | the gateway's RPC call to the key's object |
//! | `object_rpc` | the RPC shape the alert, audit, flow and reconciliation objects share: a line in, a line out |
//! | `public_key` | Ed25519 and RSA signatures by WebCrypto, PayPal's certificates |
//! | [`dedup_object`] | the key's Durable Object: its RPC calls, alarm and single-use claims |
//! | `durable_backend` | the object's `Backend`: SQLite storage, alarms, timers, `fetch` to the origin, the index, the coordinator |
//! | `flow_coordinator` | a route's flow coordinator: permits in the object's SQLite, its alarm, its wakes |
//! | `flow_client` | the RPC call to a route's flow coordinator |
//! | [`reconcile_object`] | a route's reconciliation: its cursor, lock and runs; a run's I/O (§11) |
//! | `audit_client`, [`audit_object`] | the audit log (§13): every operator act on record before its answer; its one writer, `AuditLog` |
//! | `bulk_redrive` | re-drive by filter and its dry run (§7, v4) |
//! | `reconcile_client` | the RPC call to a route's reconciliation object; the Cron Trigger's ticks |
//! | [`alert_object`] | alerts, one object per route and one for the deployment: the alert book, its alarm, the sinks (§13) |
//! | `alerts` | signs of trouble noted by isolates and objects, sent after each answer to the alert object that keeps them (the route's, or the deployment's for `misconfigured`) |
//! | `env` | the configuration, read once per isolate from `env` |
//! | `log_sink` | writes decision log lines to the console, from a microtask |
//! | `stats` | per-isolate counters (`/__idemgate/stats`) |

mod access;
mod admin;
pub mod alert_object;
mod alerts;
mod audit_checkpoint;
mod audit_client;
pub mod audit_object;
mod bulk_redrive;
pub mod dedup_object;
mod durable_backend;
mod edge_http;
mod env;
mod events;
mod flow_client;
mod flow_coordinator;
pub mod gateway;
mod index_db;
pub mod index_shard;
mod isolate;
mod log_sink;
mod object_client;
mod object_rpc;
mod object_storage;
pub mod order_object;
mod public_key;
mod receipt_index;
mod reconcile_client;
pub mod reconcile_object;
mod stats;
mod sweep;
#[cfg(feature = "test-hooks")]
mod test_hooks;

use worker::{event, web_sys, Context, Env, ScheduleContext, ScheduledEvent};

// The runtime's request as it is: `worker::Request` would read `Request.cf`
// and more on every delivery (see `edge_http`).
#[event(fetch)]
async fn fetch(
    request: web_sys::Request,
    env: Env,
    context: Context,
) -> worker::Result<web_sys::Response> {
    let answer = gateway::handle(request, env.clone()).await;
    // Signs of trouble go to the alert object after the answer has left.
    if alerts::pending() {
        context.wait_until(alerts::flush(env));
    }
    answer
}

/// The Cron Trigger (`[triggers] crons`, every minute): the sweep, and a
/// tick of each reconciled route's object (it runs when a run is due).
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _context: ScheduleContext) {
    futures::join!(
        sweep::run(&env),
        reconcile_client::tick_all(&env),
        alerts::tick(&env)
    );
    alerts::flush(env).await;
}
