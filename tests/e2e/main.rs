//! End-to-end tests: the release worker under `wrangler dev` (real workerd,
//! real Durable Objects), in front of a real HTTP origin started here, driven
//! by real concurrent HTTP requests. Nothing is mocked.
//!
//! A custom harness (libtest-mimic) starts each gateway profile once, runs
//! the trials one at a time (they measure concurrency themselves), and stops
//! every `wrangler dev` when the run ends. `cargo test --test e2e -- NAME`
//! filters as usual.

mod alerts;
mod asynchronous;
mod audit;
mod batches;
mod dedup;
mod demo_origin;
mod failures;
mod flow;
mod index_shards;
mod inputs;
mod money;
mod operator;
mod ordering;
mod passthrough;
mod plaid;
mod providers;
mod reconcile;
mod routes;
mod send;
mod senders;
mod service_origin;
mod support;
mod sweep;
mod ui;
mod upgrade;

use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use libtest_mimic::{Arguments, Trial};
use support::{Gateway, TestOrigin};

/// Secret the default profile signs forwards with.
pub const FORWARD_SECRET: &str = "test-forward-secret";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Defaults (`IN_FLIGHT=wait`), a 64 KiB body limit, a forward secret,
    /// an admin token.
    Wait,
    /// `IN_FLIGHT=conflict`.
    Conflict,
    /// No `ORIGIN_URL` at all.
    Unconfigured,
    /// A 1 s origin timeout, 1 KiB stored responses, an admin token.
    Failing,
    /// `ORIGIN_URL` points at a closed port.
    Unreachable,
    /// The shortest retention (60 s) and a 2 s lease.
    ShortRetention,
    /// `SIGNATURE_SCHEME=stripe`.
    Stripe,
    /// `SIGNATURE_SCHEME=standard-webhooks`, keyed by the spec's test secret.
    StandardWebhooks,
    /// `DEDUP_MODE=api`, `TENANT_HEADER=Authorization`.
    Tenants,
    /// `KEY_SCOPE=global`, `TENANT_HEADER=Authorization`.
    GlobalScope,
    /// `RETRYABLE_STATUSES` with 401 and 404, `MAX_WAITERS=2`.
    Strict,
    /// Every provider and an API route, as `ROUTES` (providers.rs).
    Routes,
    /// `DELIVERY=async` with a compressed retry schedule.
    Async,
    /// Routes with flow-control limits (flow.rs).
    Flow,
}

pub const STRIPE_SECRET: &str = "whsec_e2e_stripe_secret";
pub const STANDARD_WEBHOOKS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The admin token of the profiles that enable the operator API.
pub const ADMIN_TOKEN: &str = "test-admin-token";

pub struct World {
    runtime: tokio::runtime::Runtime,
    pub origin: TestOrigin,
    /// Running gateways, least recently used first. Only a few stay up: a
    /// dozen idle `wrangler dev` processes on two cores slow each start.
    gateways: Mutex<Vec<(Profile, Arc<Gateway>)>>,
}

const LIVE_GATEWAYS: usize = 3;

impl World {
    pub async fn gateway(&self, profile: Profile) -> Arc<Gateway> {
        {
            let mut gateways = self.gateways.lock().unwrap();
            if let Some(index) = gateways.iter().position(|(p, _)| *p == profile) {
                let entry = gateways.remove(index);
                let gateway = entry.1.clone();
                gateways.push(entry);
                return gateway;
            }
        }
        let origin = self.origin.url();
        let closed = format!("http://127.0.0.1:{}", support::closed_port());
        let routes = providers::routes_json(&origin);
        let flow_routes = flow::routes_json();
        let vars: Vec<(&str, &str)> = match profile {
            Profile::Wait => vec![
                ("ORIGIN_URL", &origin),
                ("MAX_BODY_BYTES", "65536"),
                ("FORWARD_SECRET", FORWARD_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
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
            Profile::ShortRetention => vec![
                ("ORIGIN_URL", &origin),
                ("ORIGIN_TIMEOUT_MS", "1000"),
                ("LEASE_MS", "2000"),
                ("RETENTION_SECONDS", "60"),
                ("FORWARD_SECRET", FORWARD_SECRET),
            ],
            Profile::Stripe => vec![
                ("ORIGIN_URL", &origin),
                ("SIGNATURE_SCHEME", "stripe"),
                ("SIGNING_SECRET", STRIPE_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
                ("FORWARD_SECRET", FORWARD_SECRET),
            ],
            Profile::StandardWebhooks => vec![
                ("ORIGIN_URL", &origin),
                ("SIGNATURE_SCHEME", "standard-webhooks"),
                ("SIGNING_SECRET", STANDARD_WEBHOOKS_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            Profile::Tenants => vec![
                ("ORIGIN_URL", &origin),
                ("DEDUP_MODE", "api"),
                ("TENANT_HEADER", "Authorization"),
                ("FORWARD_SECRET", FORWARD_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            Profile::GlobalScope => vec![
                ("ORIGIN_URL", &origin),
                ("KEY_SCOPE", "global"),
                ("DEDUP_MODE", "api"),
                ("TENANT_HEADER", "Authorization"),
            ],
            Profile::Strict => vec![
                ("ORIGIN_URL", &origin),
                ("RETRYABLE_STATUSES", "401,404,408,425,429,500-599"),
                ("MAX_WAITERS", "2"),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            Profile::Routes => providers::route_vars(&routes, &origin),
            Profile::Flow => vec![
                ("ROUTES", &flow_routes),
                ("ORIGIN_URL", &origin),
                ("ORIGIN_TIMEOUT_MS", "8000"),
                ("FORWARD_SECRET", FORWARD_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
            Profile::Async => vec![
                ("ORIGIN_URL", &origin),
                ("DELIVERY", "async"),
                ("RETRY_SCHEDULE", "1s,1s,2s"),
                // Long enough that a burst's forwards never time out on
                // two busy cores (a timeout is retried: a second forward).
                ("ORIGIN_TIMEOUT_MS", "8000"),
                ("FORWARD_SECRET", FORWARD_SECRET),
                ("ADMIN_TOKEN", ADMIN_TOKEN),
            ],
        };
        let gateway = Arc::new(Gateway::start(&vars).await);
        let mut gateways = self.gateways.lock().unwrap();
        gateways.push((profile, gateway.clone()));
        while gateways.len() > LIVE_GATEWAYS {
            gateways.remove(0);
        }
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
            gateways: Mutex::new(Vec::new()),
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
        money::the_scope_reaches_the_origin_signed,
        money::set_cookie_stays_with_its_caller,
        money::fingerprints_cover_method_query_and_exact_numbers,
        inputs::invalid_json_is_400_and_stores_nothing,
        inputs::oversized_body_is_413,
        inputs::missing_key_is_400,
        inputs::invalid_keys_are_400,
        inputs::json_key_source_on_a_non_json_body_is_415,
        inputs::missing_origin_url_is_500_misconfigured,
        inputs::hostile_bodies_and_keys_are_rejected,
        inputs::duplicate_idempotency_key_headers_are_400,
        inputs::chunked_body_over_the_limit_is_413_without_content_length,
        inputs::conflicting_length_and_chunked_framing_forward_nothing,
        passthrough::get_passes_through_without_dedup_or_idempotency_headers,
        passthrough::operator_health_is_not_forwarded,
        passthrough::unlisted_methods_are_405_problems_and_not_forwarded,
        failures::origin_500_then_200_forwards_again_with_a_higher_epoch,
        failures::retryable_statuses_are_not_cached_and_final_ones_are,
        failures::origin_timeout_is_504_and_the_next_delivery_has_a_higher_epoch,
        failures::waiting_duplicates_get_the_same_failure,
        failures::large_responses_reach_the_first_caller_whole,
        failures::storage_writes_per_delivery_kind,
        operator::receipt_routes_need_the_admin_token,
        audit::each_operator_act_leaves_one_entry_and_the_chain_verifies,
        audit::an_audit_write_that_fails_refuses_the_act,
        audit::a_claimed_identity_is_not_the_actor_until_access_proves_it,
        audit::an_act_sends_the_chains_head_to_the_json_sink,
        audit::redrive_by_filter_counts_first_and_takes_only_its_window,
        operator::receipt_after_a_storm_shows_duplicates_and_attempts,
        operator::purge_makes_the_key_new_and_unknown_keys_are_404,
        operator::edge_replays_match_the_objects_and_are_counted,
        failures::unreachable_origin_is_502_and_the_receipt_is_failed_not_stuck,
        money::retryable_statuses_are_configurable,
        money::waiters_are_bounded,
        senders::stripe_delivery_is_forwarded_once_with_its_signature_and_raw_body,
        senders::stripe_forgeries_are_401_and_store_nothing,
        senders::standard_webhooks_delivery_is_forwarded_once,
        senders::standard_webhooks_forgeries_are_401_and_store_nothing,
        senders::tenants_never_share_a_receipt,
        senders::path_scope_separates_paths_and_route_scope_shares_them,
        providers::every_provider_is_verified_forwarded_once_and_replayed,
        providers::a_signed_delivery_is_one_key_however_its_path_is_spelt,
        providers::a_rotating_route_takes_each_of_its_secrets,
        flow::sixty_deliveries_reach_the_origin_four_at_a_time_each_once,
        flow::twenty_deliveries_to_a_slow_origin_two_at_a_time_without_a_late_wake,
        flow::forty_deliveries_at_ten_per_second_take_over_two_and_a_half_seconds,
        flow::a_sync_delivery_over_the_limit_is_429_and_a_retry_goes_through,
        ordering::eight_events_of_two_entities_reach_a_slow_origin_one_at_a_time_oldest_first,
        ordering::an_event_older_than_one_delivered_is_marked_stale_or_superseded,
        ordering::a_failing_event_holds_its_entitys_later_events_until_it_is_delivered,
        providers::a_paypal_certificate_is_fetched_only_from_an_allowed_host,
        providers::a_paypal_certificate_that_cannot_be_fetched_yet_is_retried,
        providers::a_paypal_transmission_is_forwarded_under_one_event_at_most,
        alerts::dead_letters_and_forgeries_reach_a_person_once_per_interval,
        batches::a_gocardless_batch_is_one_forward_per_event,
        batches::a_batch_of_one_is_answered_as_its_event,
        batches::a_batch_sent_many_times_at_once_forwards_each_event_once,
        batches::a_batch_that_cannot_be_taken_whole_stores_nothing,
        batches::an_async_batch_is_acknowledged_then_each_event_delivered,
        batches::an_adyen_notification_is_one_forward_per_item,
        batches::a_padded_adyen_notification_forwards_only_live_and_each_item,
        plaid::a_plaid_delivery_is_verified_and_forwarded_once,
        plaid::forged_and_stale_plaid_deliveries_are_401,
        plaid::a_plaid_key_that_cannot_be_fetched_yet_is_503_then_accepted,
        plaid::refused_plaid_credentials_are_503_not_401,
        plaid::a_flood_of_made_up_kids_costs_plaid_a_bounded_number_of_calls,
        send::every_provider_is_sent_signed_forwarded_once_and_replayed,
        routes::an_unrouted_path_is_404_whatever_the_method,
        routes::a_path_that_cannot_be_normalised_is_400,
        routes::an_api_route_beside_webhook_routes,
        routes::routes_given_as_a_toml_table,
        routes::a_broken_route_fails_alone_and_health_names_it,
        routes::routes_that_would_forward_twice_or_unverifiably_are_refused,
        asynchronous::a_delivery_is_acknowledged_durable_then_delivered_once,
        asynchronous::an_origin_that_fails_first_gets_the_delivery_once_it_recovers,
        asynchronous::an_origin_that_always_fails_leaves_a_dead_letter_to_redrive,
        asynchronous::a_burst_of_a_thousand_is_delivered_once_per_key,
        asynchronous::a_crash_loses_no_delivery_and_doubles_none,
        asynchronous::a_stale_sender_signature_never_loses_an_acknowledged_delivery,
        sweep::the_release_worker_has_no_test_hook,
        upgrade::a_retry_that_spans_the_upgrade_is_not_forwarded_again,
        sweep::the_sweep_delivers_what_no_alarm_will,
        sweep::the_cron_trigger_wrangler_prints_runs_the_sweep,
        sweep::a_gateway_without_d1_lists_what_it_acknowledged,
        sweep::without_an_index_nothing_is_acknowledged,
        index_shards::an_async_delivery_is_acknowledged_while_every_index_shard_fails,
        index_shards::a_delivery_the_origin_takes_at_once_writes_no_index_row,
        index_shards::an_upgrade_from_the_d1_index_moves_every_row_and_loses_none,
        service_origin::a_service_bound_origin_worker_is_charged_once_and_verifies_every_forward,
        sweep::purges_of_pending_deliveries_take_force_and_dead_letters_redrive_in_bulk,
        ui::the_operator_page_drives_the_operator_api_in_a_browser,
        operator::logs_have_state_changes_and_rejections_but_no_secrets,
        demo_origin::storm_charges_once_per_key_and_every_forward_verifies,
        demo_origin::the_ledger_refuses_the_stale_epoch_of_an_overtaken_forward,
        demo_origin::the_ledger_keeps_tenants_apart_and_refuses_a_changed_body,
        failures::crash_keeps_completed_keys_and_takes_over_in_flight_ones,
        failures::retention_makes_a_key_new_again_with_a_higher_epoch,
        money::an_interleaved_storm_over_a_thousand_connections,
        reconcile::a_stripe_event_never_delivered_reaches_the_origin_once,
        reconcile::a_failed_live_forward_is_forwarded_by_the_run,
        reconcile::the_apis_errors_end_a_run_and_never_show_its_key,
        reconcile::a_github_delivery_that_failed_is_redelivered_through_the_route,
        reconcile::a_paddle_notification_that_never_arrived_is_replayed,
        reconcile::a_square_event_never_delivered_reaches_the_origin_once,
        reconcile::a_paypal_event_that_never_arrived_is_resent,
        reconcile::a_window_longer_than_a_run_is_finished_by_the_next_run,
        reconcile::a_paddle_event_whose_live_forward_failed_is_forwarded_by_the_run,
        reconcile::a_paddle_event_is_asked_for_once_and_a_second_notification_of_it_is_replayed,
        reconcile::a_stripe_thin_event_never_delivered_reaches_the_origin_once,
    ];
    let conclusion = libtest_mimic::run(&args, trials);
    world().gateways.lock().unwrap().clear();
    support::gateway::remove_snapshot();
    conclusion.exit();
}
