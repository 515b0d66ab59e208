//! The table of sources: each row says what its provider's file decides,
//! and what the rows say together holds.

use super::source::DAY;
use super::*;

#[test]
fn each_source_is_found_by_its_name_in_the_tables_order() {
    let names: Vec<&str> = Source::all().map(Source::name).collect();
    assert_eq!(
        names,
        [
            "stripe",
            "stripe-v2",
            "paddle",
            "paypal",
            "github",
            "square"
        ]
    );
    for source in Source::all() {
        assert_eq!(Source::parse(source.name()), Some(source));
        // Each lists its own scheme's deliveries; both of Stripe's lists
        // are of deliveries signed with Stripe-Signature.
        let scheme = source.name().strip_suffix("-v2").unwrap_or(source.name());
        assert_eq!(source.scheme(), scheme);
        assert!(source.default_api_base().starts_with("https://"));
    }
    assert_eq!(Source::parse("stripe"), Some(Source::Stripe));
    assert_eq!(Source::parse("Stripe"), None);
    assert_eq!(format!("{:?}", Source::Stripe), "stripe");
}

#[test]
fn a_source_that_can_be_asked_to_resend_is_asked_and_the_others_are_delivered() {
    let by = |fill: FillBy| -> Vec<&str> {
        Source::all()
            .filter(|source| source.fills_by() == fill)
            .map(Source::name)
            .collect()
    };
    assert_eq!(by(FillBy::Delivering), ["stripe", "stripe-v2", "square"]);
    assert_eq!(
        by(FillBy::AskingTheProvider),
        ["paddle", "paypal", "github"]
    );
    let retried: Vec<&str> = Source::all()
        .filter(|source| source.retries_resends())
        .map(Source::name)
        .collect();
    assert_eq!(retried, ["paddle", "paypal"]);
    // A source whose events the run delivers is never asked for a re-send,
    // so whether the provider retries one says nothing of it.
    for source in Source::all().filter(|source| source.fills_by() == FillBy::Delivering) {
        assert!(!source.retries_resends() && !source.resends_new_bytes());
    }
}

#[test]
fn only_a_source_that_lists_deliveries_is_not_keyed_by_its_events() {
    for source in Source::all() {
        let deliveries = source.entry().lists == Listed::Deliveries;
        assert_eq!(deliveries, source.name() == "github");
        assert_eq!(source.keys_listed_events(), !deliveries);
    }
}

#[test]
fn a_lookback_fits_each_providers_listing_and_its_retries_fit_the_listing() {
    for source in Source::all() {
        assert!(source.listed_for_seconds() >= source.retry_horizon_seconds());
        assert_eq!(source.retry_horizon_seconds(), 3 * DAY, "{source:?}");
    }
}

#[test]
fn endpoints_are_checked_by_the_source_that_names_them() {
    let valid = |name: &str, endpoint: &str| match Source::parse(name).unwrap().entry().endpoint {
        Endpoint::Required { valid, .. } | Endpoint::OrSigningSecret { valid, .. } => {
            valid(endpoint)
        }
        Endpoint::Unused => false,
    };
    assert!(valid("github", "repos/acme/shop/hooks/42"));
    assert!(valid("github", "orgs/acme/hooks/7"));
    assert!(valid("github", "app/hook"));
    for wrong in [
        "repos/acme/../hooks/1",
        "repos/acme/shop/hooks/x",
        "hooks/1",
        "",
    ] {
        assert!(!valid("github", wrong), "{wrong}");
    }
    assert!(valid("paddle", "ntfset_01h8"));
    assert!(!valid("paddle", "ntfset 01"));
    assert!(valid("paypal", "8PT597110X687430LKGECATA"));
    assert!(!valid("paypal", &"x".repeat(129)));
    for name in ["stripe", "stripe-v2", "square"] {
        assert!(matches!(
            Source::parse(name).unwrap().entry().endpoint,
            Endpoint::Unused
        ));
    }
    assert!(matches!(
        Source::parse("paypal").unwrap().entry().endpoint,
        Endpoint::OrSigningSecret { .. }
    ));
}
