//! End-to-end tests: the release worker under `wrangler dev` (real workerd,
//! real Durable Objects), in front of a real HTTP origin started here, driven
//! by real concurrent HTTP requests. Nothing is mocked.
//!
//! A custom harness (libtest-mimic) starts each gateway profile once, runs
//! the trials one at a time (they measure concurrency themselves), and stops
//! every `wrangler dev` when the run ends. `cargo test --test e2e -- NAME`
//! filters as usual.

mod dedup;
mod failures;
mod inputs;
mod passthrough;
mod support;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Trial};
use support::{Gateway, TestOrigin};

/// Secret the default profile signs forwards with.
pub const FORWARD_SECRET: &str = "test-forward-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Defaults (`IN_FLIGHT=wait`), a 64 KiB body limit, a forward secret.
    Wait,
    /// `IN_FLIGHT=conflict`.
    Conflict,
    /// No `ORIGIN_URL` at all.
    Unconfigured,
    /// A 1 s origin timeout, 1 KiB stored responses, an admin token.
    Failing,
    /// `ORIGIN_URL` points at a closed port.
    Unreachable,
    /// A 1 s lease under a 5 s origin timeout, so a hung forward is taken over.
    ShortLease,
    /// `RETENTION_SECONDS=3`.
    ShortRetention,
}

/// The admin token of the profiles that enable the operator API.
pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct World {
    runtime: tokio::runtime::Runtime,
    pub origin: TestOrigin,
    gateways: Mutex<HashMap<Profile, Arc<Gateway>>>,
}

impl World {
    pub async fn gateway(&self, profile: Profile) -> Arc<Gateway> {
        if let Some(gateway) = self.gateways.lock().unwrap().get(&profile) {
            return gateway.clone();
        }
        let origin = self.origin.url();
        let closed = format!("http://127.0.0.1:{}", support::closed_port());
        let vars: Vec<(&str, &str)> = match profile {
            Profile::Wait => vec![
                ("ORIGIN_URL", &origin),
                ("MAX_BODY_BYTES", "65536"),
                ("FORWARD_SECRET", FORWARD_SECRET),
            ],
            Profile::Conflict => vec![("ORIGIN_URL", &origin), ("IN_FLIGHT", "conflict")],
            Profile::Unconfigured => vec![],
            Profile::Failing => vec![
                ("ORIGIN_URL", &origin),
                ("ORIGIN_TIMEOUT_MS", "1000"),
                ("MAX_STORED_RESPONSE_BYTES", "1024"),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            Profile::Unreachable => vec![("ORIGIN_URL", &closed), ("ADMIN_TOKEN", ADMIN_TOKEN)],
            Profile::ShortLease => vec![
                ("ORIGIN_URL", &origin),
                ("ORIGIN_TIMEOUT_MS", "5000"),
                ("LEASE_MS", "1000"),
            ],
            Profile::ShortRetention => {
                vec![("ORIGIN_URL", &origin), ("RETENTION_SECONDS", "3")]
            }
        };
        let gateway = Arc::new(Gateway::start(&vars).await);
        self.gateways
            .lock()
            .unwrap()
            .insert(profile, gateway.clone());
        gateway
    }

    pub fn run<F, Fut>(&'static self, test: F)
    where
        F: FnOnce(&'static World) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.runtime.block_on(test(self));
    }
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let origin = runtime.block_on(TestOrigin::start());
        World {
            runtime,
            origin,
            gateways: Mutex::new(HashMap::new()),
        }
    })
}

macro_rules! trials {
    ($($module:ident :: $name:ident),* $(,)?) => {
        vec![$(
            Trial::test(concat!(stringify!($module), "::", stringify!($name)), || {
                world().run($module::$name);
                Ok(())
            })
        ),*]
    };
}

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let trials = trials![
        dedup::storm_of_1000_under_wait_forwards_once_per_key,
        dedup::conflict_policy_answers_409_then_replays,
        dedup::replay_matches_the_first_answer_and_ignores_json_layout,
        dedup::changed_payload_is_422_and_not_forwarded,
        dedup::forward_carries_idempotency_headers_and_drops_forged_ones,
        inputs::invalid_json_is_400_and_stores_nothing,
        inputs::oversized_body_is_413,
        inputs::missing_key_is_400,
        inputs::invalid_keys_are_400,
        inputs::json_key_source_on_a_non_json_body_is_415,
        inputs::missing_origin_url_is_500_misconfigured,
        failures::origin_500_then_200_forwards_again_with_the_next_epoch,
        failures::retryable_statuses_are_not_cached_and_final_ones_are,
        failures::origin_timeout_is_504_and_the_next_delivery_has_epoch_2,
        failures::unreachable_origin_is_502_and_the_receipt_is_failed_not_stuck,
        failures::waiting_duplicates_get_the_same_failure,
        failures::lease_takeover_wins_over_the_late_answer_of_a_hung_forward,
        failures::crash_keeps_completed_keys_and_takes_over_in_flight_ones,
        failures::retention_makes_a_key_new_again,
        failures::large_responses_reach_the_first_caller_whole,
        failures::storage_writes_per_delivery_kind,
        passthrough::get_passes_through_without_dedup_or_idempotency_headers,
        passthrough::operator_health_is_not_forwarded,
    ];
    let conclusion = libtest_mimic::run(&args, trials);
    world().gateways.lock().unwrap().clear();
    conclusion.exit();
}
