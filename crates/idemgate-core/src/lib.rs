//! idemgate's pure core: everything that decides, with no `worker` types,
//! so the compiler keeps the decision logic pure and `cargo test` runs it
//! natively. The deployable Worker (the repository's root crate) only
//! adapts it to the runtime.
//!
//! | module | spec | role |
//! | --- | --- | --- |
//! | [`routes`] | §0 | path normalisation and route matching |
//! | [`pipeline`] | §1 | method, size, signature, key, fingerprint, scope: one short pipeline |
//! | [`config`] | §8 | typed configuration; invalid values are errors |
//! | [`key`] | §3 | key sources, validation, scope and Durable Object names |
//! | [`json`] | §1.5 | a strict JSON reader and the RFC 8785 canonical form |
//! | [`form`] | §3 | form-encoded bodies and query strings |
//! | [`canonical`] | §1.5 | the fingerprint over method, query and canonical body |
//! | [`receipt`] | §2, §2b | receipt states, the decision tables, epochs, outcome classification, retry schedule |
//! | [`engine`] | §2, §2b | the Durable Object's logic against a [`engine::Backend`] trait |
//! | [`flow`] | §2 | flow control: a route's permits, leases, waiters and rate |
//! | [`answer`] | §2, §6 | what each decision renders to: status, headers, body |
//! | [`signature`] | §4 | sender authentication, one file per scheme |
//! | [`single_use`] | §4 | signed transmission ids forwarded under one key at most (PayPal) |
//! | [`origin`] | §5 | target URL, idempotency headers and their signature |
//! | [`api_origin`] | §4 | the origins a route may name for a sender's API or certificates |
//! | [`headers`] | §5 | hop-by-hop and `Idempotency-*` filtering |
//! | [`problem`] | §6 | every edge error, rendered to problem+json once |
//! | [`operator`] | §7 | operator authorization, receipt addressing, listings |
//! | [`index`] | §7 | the D1 receipt index: which transitions write it, its queries |
//! | [`decision_log`] | §9 | one structured log line per decision |
//! | [`object_call`] | — | what the gateway asks of a key's object over RPC, and the answer |
//! | [`replay_cache`] | §2 | replays an isolate answers without an object round trip |
//! | [`sweep`] | §2b | the scheduled sweep that wakes overdue receipts |
//! | [`upgrade`] | §3 | finding receipts the second version kept under other names |
//! | [`reconcile`] | §11 | the providers' events APIs, and a reconciliation run |
//! | `simulation` | §2 | deterministic simulation of the engine (tests only) |

// The unit tests share support files with the integration tests, which
// name the crate.
#[cfg(test)]
extern crate self as idemgate_core;

pub mod access;
pub mod alerts;
pub mod answer;
pub mod api_origin;
pub mod audit;
pub mod batch;
pub mod canonical;
pub mod config;
pub mod decision_log;
pub mod delivery;
pub mod engine;
pub mod flow;
pub mod form;
pub mod gateway;
pub mod headers;
pub mod host;
pub mod index;
pub mod json;
pub mod key;
#[cfg(test)]
mod memory_backend;
mod mutation;
pub mod object_call;
pub mod operator;
pub mod order;
pub mod origin;
pub mod pipeline;
pub mod problem;
pub mod receipt;
pub mod reconcile;
pub mod reconcile_runs;
pub mod replay_cache;
pub mod routes;
pub mod signature;
#[cfg(test)]
mod simulation;
pub mod single_use;
pub mod sweep;
pub mod time;
pub mod upgrade;

/// Runs `test` on its own thread and fails it if it has not finished in
/// `seconds`: a broken comparison can turn a wait into an endless loop,
/// and a hang must fail, not stall the suite.
#[cfg(test)]
pub(crate) fn within<T: Send + 'static>(
    seconds: u64,
    test: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (sender, receiver) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _ = sender.send(test());
    });
    match receiver.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            // The test panicked: its own message is the failure.
            std::panic::resume_unwind(handle.join().expect_err("a panicked test"))
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("did not finish within {seconds} s: a hang is a failure")
        }
    }
}
