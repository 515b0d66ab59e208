use super::*;
use crate::signature::SchemeSettings;
use std::collections::HashMap;

/// The configuration of `pairs`, or the problem of its first broken
/// route (what that route's requests get).
fn config(pairs: &[(&str, &str)]) -> Result<Config, Problem> {
    let config = whole_config(pairs)?;
    match config.broken.first() {
        Some(broken) => Err(broken.problem.clone()),
        None => Ok(config),
    }
}

fn whole_config(pairs: &[(&str, &str)]) -> Result<Config, Problem> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_lookup(|name| map.get(name).cloned())
}

/// The one route of a configuration without `ROUTES`: its problem when it
/// is broken (it then fails alone).
fn route(pairs: &[(&str, &str)]) -> Result<RouteConfig, Problem> {
    let mut all = vec![("ORIGIN_URL", "http://o")];
    all.extend_from_slice(pairs);
    let config = config(&all)?;
    match config.broken.first() {
        Some(broken) => Err(broken.problem.clone()),
        None => Ok(config.routes[0].clone()),
    }
}

fn variable_of(problem: Problem) -> String {
    match problem {
        Problem::Misconfigured { variable, .. } => variable,
        other => panic!("expected misconfigured, got {other:?}"),
    }
}

#[test]
fn without_routes_there_is_one_default_route_at_the_root() {
    let config = config(&[("ORIGIN_URL", "https://api.example.com/")]).unwrap();
    assert!(!config.explicit_routes);
    let route = &config.routes[0];
    assert_eq!((route.name.as_str(), route.path.as_str()), ("default", "/"));
    assert_eq!(route.origin_url, "https://api.example.com");
    assert_eq!(route.mode, DedupMode::Webhook);
    assert_eq!(route.key_sources.len(), 4);
    assert_eq!(route.key_scope, KeyScope::Path);
    assert_eq!(route.delivery, Delivery::Sync);
    assert_eq!(route.in_flight, InFlightPolicy::Wait);
    assert_eq!(route.wait_ms, 10_000);
    assert_eq!(route.max_waiters, 256);
    assert_eq!(route.origin_timeout_ms, 10_000);
    assert_eq!(route.lease_ms, 15_000);
    assert_eq!(route.retention_seconds, 259_200);
    assert_eq!(route.max_body_bytes, 1_048_576);
    assert_eq!(route.max_batch_events, 250);
    assert_eq!(route.max_stored_response_bytes, 65_536);
    assert_eq!(route.signature_tolerance_seconds, 300);
    assert!(!route.log_duplicates);
    assert_eq!(route.forward_secret, None);
    assert!(route.retryable_statuses.contains(503));
    assert!(!route.retryable_statuses.contains(404));
}

#[test]
fn numbers_have_ranges_and_the_lease_outlives_the_timeout() {
    for (name, value) in [
        ("WAIT_MS", "60001"),
        ("MAX_WAITERS", "4097"),
        ("ORIGIN_TIMEOUT_MS", "99"),
        ("ORIGIN_TIMEOUT_MS", "300001"),
        ("ORIGIN_TIMEOUT_MS", "2147483648"),
        ("LEASE_MS", "18446744073709551615"),
        ("LEASE_MS", "10000"),
        // Not by a second: a late timer could let a takeover overlap.
        ("LEASE_MS", "10001"),
        ("LEASE_MS", "10999"),
        ("RETENTION_SECONDS", "59"),
        ("RETENTION_SECONDS", "31536001"),
        ("RETENTION_SECONDS", "18446744073709551615"),
        ("MAX_BODY_BYTES", "0"),
        ("MAX_BODY_BYTES", "4194305"),
        ("MAX_STORED_RESPONSE_BYTES", "1048577"),
        ("MAX_BATCH_EVENTS", "0"),
        ("MAX_BATCH_EVENTS", "501"),
        ("SIGNATURE_TOLERANCE_SECONDS", "0"),
        ("WAIT_MS", "-1"),
        ("WAIT_MS", "1e3"),
    ] {
        assert_eq!(
            variable_of(route(&[(name, value)]).unwrap_err()),
            name,
            "{name}={value}"
        );
    }
    assert_eq!(
        route(&[("ORIGIN_TIMEOUT_MS", "2000")]).unwrap().lease_ms,
        7_000
    );
    assert_eq!(route(&[("LEASE_MS", "11000")]).unwrap().lease_ms, 11_000);
    // Without LEASE_MS, the lease always passes its own rule: 5 s past
    // the timeout, or a tenth of it above 50 s.
    assert_eq!(
        route(&[("ORIGIN_TIMEOUT_MS", "60000")]).unwrap().lease_ms,
        66_000
    );
    assert_eq!(
        route(&[("ORIGIN_TIMEOUT_MS", "300000")]).unwrap().lease_ms,
        330_000
    );
    // Above 10 s of timeout, the margin is a tenth of it.
    let long = [("ORIGIN_TIMEOUT_MS", "100000")];
    assert!(route(&[long[0], ("LEASE_MS", "109999")]).is_err());
    assert_eq!(
        route(&[long[0], ("LEASE_MS", "110000")]).unwrap().lease_ms,
        110_000
    );
    let problem = route(&[
        ("ORIGIN_TIMEOUT_MS", "100"),
        ("LEASE_MS", "59000"),
        ("RETENTION_SECONDS", "60"),
    ]);
    assert_eq!(problem.unwrap().retention_seconds, 60);
    let problem = route(&[
        ("ORIGIN_TIMEOUT_MS", "100"),
        ("LEASE_MS", "60000"),
        ("RETENTION_SECONDS", "60"),
    ]);
    assert_eq!(variable_of(problem.unwrap_err()), "RETENTION_SECONDS");
}

#[test]
fn unknown_choices_are_errors_not_defaults() {
    for (name, value) in [
        ("DEDUP_MODE", "batch"),
        ("IN_FLIGHT", "drop"),
        ("KEY_SCOPE", "tenant"),
        ("DELIVERY", "later"),
        ("KEY_SOURCES", "cookie:x"),
        ("KEY_SOURCES", "header:a,,json:/b"),
        ("SIGNATURE_SCHEME", "md5"),
        ("TENANT_HEADER", "bad header"),
        ("RETRYABLE_STATUSES", "5xx"),
        ("LOG_DUPLICATES", "yes"),
        ("ADMIN_TOKEN", ""),
    ] {
        assert_eq!(
            variable_of(route(&[(name, value)]).unwrap_err()),
            name,
            "{name}={value}"
        );
    }
    assert_eq!(
        route(&[("KEY_SCOPE", "global")]).unwrap().key_scope,
        KeyScope::Route
    );
}

#[test]
fn signed_routes_default_to_signed_keys_and_route_scope() {
    let stripe = route(&[
        ("SIGNATURE_SCHEME", "stripe"),
        ("SIGNING_SECRET", "whsec_x"),
    ])
    .unwrap();
    assert_eq!(
        stripe.key_sources,
        KeySource::parse_list("json:/id").unwrap()
    );
    assert_eq!(stripe.key_scope, KeyScope::Route);
    assert_eq!(
        variable_of(route(&[("SIGNATURE_SCHEME", "stripe")]).unwrap_err()),
        "SIGNING_SECRET"
    );
    let api = route(&[("DEDUP_MODE", "api")]).unwrap();
    assert_eq!(api.key_sources, vec![KeySource::header("Idempotency-Key")]);
}

#[test]
fn async_routes_bound_their_bodies_and_read_their_schedule() {
    let route = route(&[
        ("DELIVERY", "async"),
        ("RETRY_SCHEDULE", "1s,1m,2h,1d"),
        ("ACK_STATUS", "200"),
        ("ACK_BODY", "[accepted]"),
    ])
    .unwrap();
    let Delivery::Async(settings) = &route.delivery else {
        panic!()
    };
    assert_eq!(
        settings.retry_schedule_ms,
        [1_000, 60_000, 7_200_000, 86_400_000]
    );
    assert_eq!(settings.ack_status, 200);
    assert_eq!(settings.ack_body.as_deref(), Some("[accepted]"));
    let default = super::parse_schedule(DEFAULT_RETRY_SCHEDULE).unwrap();
    assert_eq!(default.len(), 9);
    for bad in [
        "0s",
        "10",
        "1w",
        "8d",
        "1s,,1s",
        "-1s",
        "18446744073709551615d",
    ] {
        assert!(super::parse_schedule(bad).is_err(), "{bad}");
    }
    for (name, value) in [
        ("MAX_BODY_BYTES", "1048577"),
        ("ACK_STATUS", "302"),
        ("RETRY_SCHEDULE", "soon"),
        ("GIVE_UP_STATUSES", "410,200"),
        ("GIVE_UP_STATUSES", "x"),
        ("DEAD_RETENTION_SECONDS", "86399"),
        ("DEAD_RETENTION_SECONDS", "31536001"),
    ] {
        let problem = super::tests::route(&[("DELIVERY", "async"), (name, value)]).unwrap_err();
        assert_eq!(variable_of(problem), name, "{value}");
    }
}

#[test]
fn async_routes_read_what_ends_a_delivery_and_how_long_a_dead_one_stays() {
    let route = route(&[
        ("DELIVERY", "async"),
        ("GIVE_UP_STATUSES", "410, 451"),
        ("DEAD_RETENTION_SECONDS", "86400"),
    ])
    .unwrap();
    let Delivery::Async(settings) = &route.delivery else {
        panic!()
    };
    assert!(settings.give_up_statuses.contains(410));
    assert!(!settings.give_up_statuses.contains(404));
    assert_eq!(settings.dead_retention_seconds, 86_400);
    let defaults = super::tests::route(&[("DELIVERY", "async")]).unwrap();
    let Delivery::Async(defaults) = &defaults.delivery else {
        panic!()
    };
    assert_eq!(defaults.dead_retention_seconds, 2_592_000);
    assert!(!(100..=599).any(|status| defaults.give_up_statuses.contains(status)));
}

#[test]
fn a_success_is_never_retryable() {
    for value in ["200", "500-599,201", "100-599"] {
        let problem = route(&[("RETRYABLE_STATUSES", value)]).unwrap_err();
        assert_eq!(variable_of(problem.clone()), "RETRYABLE_STATUSES");
        assert!(problem.detail().contains("a success"), "{value}");
    }
}

#[test]
fn a_routes_forward_secret_is_known_by_its_name() {
    let top = route(&[("FORWARD_SECRET", "s")]).unwrap();
    assert_eq!(top.forward_secret_name.as_deref(), Some("FORWARD_SECRET"));
    let routed = config(&[
        ("ORIGIN_URL", "https://pay.internal"),
        (
            "ROUTES",
            r#"{"a":{"path":"/a","forward_secret":"HOOKS_FORWARD"},"b":{"path":"/b"}}"#,
        ),
        ("HOOKS_FORWARD", "s2"),
    ])
    .unwrap();
    let a = routed.route("a").unwrap();
    assert_eq!(a.forward_secret_name.as_deref(), Some("HOOKS_FORWARD"));
    assert_eq!(a.forward_secret.as_ref().unwrap().expose(), "s2");
    assert_eq!(routed.route("b").unwrap().forward_secret_name, None);
}

#[test]
fn origin_urls_are_checked_without_echoing_them() {
    for bad in [
        "not a url",
        "ftp://x",
        "http://o/?q=1",
        "https://user:hunter2@o.example",
    ] {
        let problem = config(&[("ORIGIN_URL", bad)]).unwrap_err();
        assert!(
            !problem.detail().contains("hunter2"),
            "{}",
            problem.detail()
        );
        assert_eq!(variable_of(problem), "ORIGIN_URL");
    }
    assert_eq!(variable_of(config(&[]).unwrap_err()), "ORIGIN_URL");
    for good in [
        "http://127.0.0.1:9090",
        "https://pay.internal.example/hooks/",
        "http://[::1]:8080/x",
        "http://[::1]/x",
        "https://a-b.c_d",
    ] {
        assert!(config(&[("ORIGIN_URL", good)]).is_ok(), "{good}");
    }
    assert_eq!(
        config(&[("ORIGIN_URL", "https://o.example/base/")])
            .unwrap()
            .routes[0]
            .origin_url,
        "https://o.example/base"
    );
}

const ROUTES: &str = r#"{
    "stripe": {"path": "/webhooks/stripe", "origin": "https://pay.internal/hooks", "signature": "stripe", "signing_secret": "STRIPE_WEBHOOK_SECRET"},
    "api": {"path": "/v1", "mode": "api", "tenant_header": "Authorization", "wait_ms": 5000, "log_duplicates": true},
    "adyen": {"path": "/webhooks/adyen", "delivery": "async", "signature_scheme": "adyen", "signing_secret": "ADYEN_HMAC_KEY", "ack_body": "[accepted]"}
}"#;

fn routes(extra: &[(&str, &str)]) -> Result<Config, Problem> {
    let mut pairs = vec![
        ("ROUTES", ROUTES),
        ("ORIGIN_URL", "https://pay.internal"),
        ("STRIPE_WEBHOOK_SECRET", "whsec_stripe"),
        (
            "ADYEN_HMAC_KEY",
            "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
        ),
        ("WAIT_MS", "2000"),
        ("FORWARD_SECRET", "forward-secret"),
    ];
    pairs.extend_from_slice(extra);
    config(&pairs)
}

#[test]
fn routes_take_their_own_settings_then_the_top_level_then_defaults() {
    let config = routes(&[]).unwrap();
    assert!(config.explicit_routes);
    let stripe = config.route("stripe").unwrap();
    assert_eq!(stripe.origin_url, "https://pay.internal/hooks");
    assert_eq!(stripe.wait_ms, 2_000, "the top-level WAIT_MS");
    assert!(
        stripe.signature_scheme
            == SignatureScheme::configure(
                "stripe",
                &SchemeSettings {
                    secret: Some("whsec_stripe".into()),
                    ..SchemeSettings::default()
                }
            )
            .unwrap()
    );
    let api = config.route("api").unwrap();
    assert_eq!(
        api.origin_url, "https://pay.internal",
        "the top-level ORIGIN_URL"
    );
    assert_eq!(api.wait_ms, 5_000, "its own, a TOML number");
    assert!(api.log_duplicates, "its own, a TOML boolean");
    assert_eq!(
        api.tenant,
        Tenant::Header {
            name: "authorization".into(),
            required: true
        }
    );
    assert!(config.route("adyen").unwrap().is_async());
    assert_eq!(
        config.route_for("/webhooks/stripe/evt").unwrap().name,
        "stripe"
    );
    assert_eq!(config.route_for("/v1/charges").unwrap().name, "api");
    assert_eq!(
        config.route_for("/v2/charges").unwrap_err(),
        Problem::NoRoute
    );
    assert_eq!(
        config.route_for("/webhooks/stripex").unwrap_err(),
        Problem::NoRoute
    );
}

#[test]
fn a_bad_route_names_itself_and_its_field() {
    let cases = [
        (
            r#"{"stripe":{"path":"/s","signature":"strip","signing_secret":"S"}}"#,
            "ROUTES.stripe.signature",
        ),
        (
            r#"{"stripe":{"path":"/s","signature":"stripe"}}"#,
            "ROUTES.stripe.signing_secret",
        ),
        (
            r#"{"stripe":{"path":"/s","signature":"stripe","signing_secret":"UNSET"}}"#,
            "ROUTES.stripe.signing_secret",
        ),
        (
            r#"{"a":{"path":"/a","singing_secret":"S"}}"#,
            "ROUTES.a.singing_secret",
        ),
        (r#"{"a":{"origin":"http://o"}}"#, "ROUTES.a.path"),
        (r#"{"a":{"path":"a"}}"#, "ROUTES.a.path"),
        (r#"{"a":{"path":"/__idemgate/x"}}"#, "ROUTES.a.path"),
        (r#"{"a":{"path":"/a%2Fb"}}"#, "ROUTES.a.path"),
        (r#"{"a":{"path":"/a"},"b":{"path":"/a/"}}"#, "ROUTES.b.path"),
        (r#"{"A":{"path":"/a"}}"#, "ROUTES.A"),
        (r#"{"a":{"path":"/a","wait_ms":[1]}}"#, "ROUTES.a.wait_ms"),
        (r#"{"a":{"path":"/a","lease_ms":10}}"#, "ROUTES.a.lease_ms"),
        (r#"{"a":"/a"}"#, "ROUTES.a"),
        (r#"["/a"]"#, "ROUTES"),
        (r#"{}"#, "ROUTES"),
        ("{not json", "ROUTES"),
    ];
    for (routes, variable) in cases {
        let problem = config(&[
            ("ROUTES", routes),
            ("ORIGIN_URL", "http://o"),
            ("S", "whsec_s"),
        ])
        .unwrap_err();
        assert_eq!(variable_of(problem), variable, "{routes}");
    }
    let problem = config(&[("ROUTES", r#"{"a":{"path":"/a"}}"#)]).unwrap_err();
    assert_eq!(variable_of(problem), "ROUTES.a.origin_url");
}

#[test]
fn a_named_secret_is_never_echoed() {
    let problem = config(&[
        (
            "ROUTES",
            r#"{"s":{"path":"/s","signature":"standard-webhooks","signing_secret":"SW"}}"#,
        ),
        ("ORIGIN_URL", "http://o"),
        ("SW", "whsec_not base64 but secret!"),
    ])
    .unwrap_err();
    assert_eq!(variable_of(problem.clone()), "ROUTES.s.signing_secret");
    assert!(
        !problem.detail().contains("secret!"),
        "{}",
        problem.detail()
    );
}

#[test]
fn limits_hold_at_their_boundaries() {
    let ack = |body: String| route(&[("DELIVERY", "async"), ("ACK_BODY", body.as_str())]);
    assert!(ack("x".repeat(4_096)).is_ok());
    assert_eq!(variable_of(ack("x".repeat(4_097)).unwrap_err()), "ACK_BODY");
    assert_eq!(super::parse_schedule("7d").unwrap(), [7 * 86_400_000]);
    assert!(super::parse_schedule("1s").is_ok());
    let delays = |count: usize| vec!["1s"; count].join(",");
    assert_eq!(super::parse_schedule(&delays(20)).unwrap().len(), 20);
    assert!(super::parse_schedule(&delays(21)).is_err());
    assert!(!route(&[]).unwrap().is_async());
}

#[test]
fn a_setting_is_named_as_it_was_spelt() {
    for field in ["signature", "signature_scheme"] {
        let routes = format!(r#"{{"a":{{"path":"/a","{field}":"md5"}}}}"#);
        let problem = config(&[("ROUTES", routes.as_str()), ("ORIGIN_URL", "http://o")]);
        assert_eq!(
            variable_of(problem.unwrap_err()),
            format!("ROUTES.a.{field}")
        );
    }
    let blank = route(&[("DEDUP_MODE", "  ")]).unwrap_err();
    assert!(
        blank.detail().contains("set but empty"),
        "{}",
        blank.detail()
    );
    assert_eq!(variable_of(blank), "DEDUP_MODE", "blank is not unset");
    // A derived error names the field as the route spelt it.
    let env = |_: &str| None;
    let spelt = |field: &str| -> String {
        let fields = [
            ("path".into(), Json::String("/a".into())),
            (field.into(), Json::String("x".into())),
        ];
        let settings = Settings {
            env: &env,
            route: Some(("a", &fields)),
        };
        settings.label("SIGNATURE_SCHEME")
    };
    assert_eq!(spelt("signature"), "ROUTES.a.signature");
    assert_eq!(spelt("signature_scheme"), "ROUTES.a.signature_scheme");
    assert_eq!(spelt("other"), "ROUTES.a.signature_scheme");
    // A route's path is its own: never the top level's (a shell's PATH).
    let problem = config(&[
        ("ROUTES", r#"{"a":{"origin":"http://o"}}"#),
        ("PATH", "/usr/bin"),
    ]);
    assert_eq!(variable_of(problem.unwrap_err()), "ROUTES.a.path");
}

#[test]
fn origin_urls_need_a_host_and_a_port_that_is_a_number() {
    for bad in [
        "http://:80",
        "http://o:",
        "http://o:8a",
        "http://o:65536",
        "http://[::1",
        "http://[::1]:99999",
        "http://[::1]:x",
        "http://o/a b",
        "http://o/\u{7}",
        "http://o/caf\u{e9}",
        "http://o:+80",
    ] {
        assert_eq!(
            variable_of(config(&[("ORIGIN_URL", bad)]).unwrap_err()),
            "ORIGIN_URL",
            "{bad:?}"
        );
    }
    assert!(config(&[("ORIGIN_URL", "http://o:65535")]).is_ok());
    // Only a leading `[` opens an IPv6 literal; a stray `]` is in the port.
    let stray = config(&[("ORIGIN_URL", "http://x:1]")]).unwrap_err();
    assert!(stray.detail().contains("port"), "{}", stray.detail());
}

#[test]
fn a_broken_route_fails_alone() {
    let config = whole_config(&[
        ("ORIGIN_URL", "http://o"),
        (
            "ROUTES",
            r#"{"good":{"path":"/good"},"bad":{"path":"/good/bad","signature":"strip"},"secret":{"path":"/s","signature":"stripe","signing_secret":"whsec_live_4eC39HqLyjWDarjtT1zdp7dc"}}"#,
        ),
    ])
    .unwrap();
    assert_eq!(config.routes.len(), 1);
    assert_eq!(config.route_for("/good/x").unwrap().name, "good");
    // A broken route keeps its path: its requests never fall to /good.
    let problem = config.route_for("/good/bad/x").unwrap_err();
    assert_eq!(variable_of(problem), "ROUTES.bad.signature");
    let problem = config.route_for("/s").unwrap_err();
    assert_eq!(variable_of(problem.clone()), "ROUTES.secret.signing_secret");
    assert!(problem
        .detail()
        .contains("holds a value, not the name of a secret"));
    assert!(!problem.detail().contains("4eC39"), "{}", problem.detail());
    assert_eq!(
        config
            .broken
            .iter()
            .map(|route| route.name.as_str())
            .collect::<Vec<_>>(),
        ["bad", "secret"]
    );
    assert!(config.broken_route("bad").is_some());
    assert!(config.route("bad").is_none());
}

#[test]
fn routing_that_is_unknown_refuses_the_whole_configuration() {
    for routes in [
        "{not json",
        r#"{"a":{"path":"/a"},"b":{}}"#,
        r#"{"a":{"path":"/a"},"b":{"path":"no-slash"}}"#,
        r#"{"a":{"path":"/a"},"b":{"path":"/a/"}}"#,
        r#"{"a":"not a table"}"#,
    ] {
        let problem = whole_config(&[("ORIGIN_URL", "http://o"), ("ROUTES", routes)]).unwrap_err();
        assert_eq!(problem.name(), "misconfigured", "{routes}");
    }
    // Without ROUTES the one route is broken alone: the operator API works.
    let config = whole_config(&[("ORIGIN_URL", "ftp://o"), ("ADMIN_TOKEN", "t")]).unwrap();
    assert_eq!(config.broken[0].name, "default");
    assert!(config.admin_token.is_some());
}

#[test]
fn a_value_where_a_secrets_name_belongs_is_never_echoed() {
    let named = |value: &str| {
        let routes =
            format!(r#"{{"a":{{"path":"/a","signature":"github","signing_secret":{value:?}}}}}"#);
        config(&[("ORIGIN_URL", "http://o"), ("ROUTES", &routes)]).unwrap_err()
    };
    for value in [
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "sk_live_abc",
        "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
        "bXktc2VjcmV0LXZhbHVlLWlzLWxvbmc=",
    ] {
        let problem = named(value);
        assert!(
            problem.detail().contains("holds a value"),
            "{value}: {}",
            problem.detail()
        );
        assert!(
            !problem.detail().contains(&value[3..value.len().min(11)]),
            "{}",
            problem.detail()
        );
    }
    let problem = named("my-secret");
    assert!(problem.detail().contains("is not the name of a secret"));
    assert!(!problem.detail().contains("my-secret"));
    // Where a name is echoed, one that looks like a secret is not.
    let problem = config(&[
        ("ORIGIN_URL", "http://o"),
        ("SIGNATURE_SCHEME", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    ])
    .unwrap_err();
    assert!(
        !problem.detail().contains("MfKQ9r8"),
        "{}",
        problem.detail()
    );
    assert!(settings::is_secret_name("STRIPE_WEBHOOK_SECRET"));
    for name in [
        "STRIPE_WEBHOOK_SECRET_2024",
        "ADYEN_HMAC_KEY",
        "FORWARD_SECRET",
    ] {
        assert!(!settings::looks_like_secret(name), "{name}");
    }
    assert!(!settings::is_secret_name(""));
    assert!(!settings::is_secret_name(&"A".repeat(65)));
}

#[test]
fn a_route_may_name_several_signing_secrets_and_any_one_verifies() {
    use crate::signature::{Message, SchemeSettings, SignatureScheme, SignedRequest, Verdict};
    let signed_by = |secret: &str| {
        let mut message = Message {
            headers: Vec::new(),
            body: br#"{"action":"completed"}"#.to_vec(),
        };
        SignatureScheme::configure(
            "github",
            &SchemeSettings {
                secret: Some(secret.into()),
                ..SchemeSettings::default()
            },
        )
        .unwrap()
        .sign(&mut message, 0);
        message
    };
    let verdict = |route: &RouteConfig, message: &Message| {
        route.signature_scheme.verify(
            &SignedRequest {
                headers: &message.headers,
                body: &message.body,
                query: None,
            },
            0,
            300,
        )
    };
    let routed = config(&[
        ("ORIGIN_URL", "http://o"),
        (
            "ROUTES",
            r#"{"gh":{"path":"/gh","signature":"github","signing_secret":["GH_NEW","GH_OLD"]}}"#,
        ),
        ("GH_NEW", "new-secret"),
        ("GH_OLD", "old-secret"),
    ])
    .unwrap();
    let top = route(&[
        ("SIGNATURE_SCHEME", "github"),
        ("SIGNING_SECRET", "new-secret"),
        ("SIGNING_SECRET_PREVIOUS", "old-secret"),
    ])
    .unwrap();
    for route in [routed.route("gh").unwrap(), &top] {
        for secret in ["new-secret", "old-secret"] {
            assert_eq!(
                verdict(route, &signed_by(secret)),
                Ok(Verdict::Verified),
                "{secret}"
            );
        }
        assert!(verdict(route, &signed_by("third")).is_err());
        // The current secret signs (a test delivery, scripts/send).
        let mut message = Message {
            headers: Vec::new(),
            body: br#"{"action":"completed"}"#.to_vec(),
        };
        route.signature_scheme.sign(&mut message, 0);
        assert_eq!(message, signed_by("new-secret"));
    }
    for (list, reason) in [
        (r#"[]"#, "names no secret"),
        (r#"["GH_NEW", 7]"#, "is a list of the names of secrets"),
        (r#"["GH_NEW", "GH_MISSING"]"#, "which is not set"),
    ] {
        let routes =
            format!(r#"{{"gh":{{"path":"/gh","signature":"github","signing_secret":{list}}}}}"#);
        let problem = config(&[
            ("ORIGIN_URL", "http://o"),
            ("ROUTES", &routes),
            ("GH_NEW", "n"),
        ])
        .unwrap_err();
        assert_eq!(variable_of(problem.clone()), "ROUTES.gh.signing_secret");
        assert!(problem.detail().contains(reason), "{}", problem.detail());
    }
}

// --- A route's `reconcile` table (SPEC §11) ---

/// The value of the API key's secret: it must never be shown.
const RECONCILE_KEY: &str = "rk_live_51HxReconcileKeyValue0123";
/// The value of the route's signing secret (PayPal's: the webhook id).
const WEBHOOK_SECRET: &str = "WH8PT597110X687430LKGECATA";

/// Route `r` verifying `scheme`, with `fields` added to its table (each
/// starting with a comma) and `reconcile` (JSON) as its `reconcile`; the
/// secrets `WEBHOOK_SECRET` and `RECONCILE_KEY` are set.
fn reconciled_with(
    scheme: &str,
    fields: &str,
    reconcile: &str,
) -> Result<crate::reconcile::ReconcileConfig, Problem> {
    let url = match scheme {
        "square" => r#","signature_url":"https://hooks.example/square""#,
        _ => "",
    };
    let routes = format!(
        r#"{{"r":{{"path":"/r","signature":"{scheme}","signing_secret":"WEBHOOK_SECRET"{url}{fields},"reconcile":{reconcile}}}}}"#
    );
    let config = config(&[
        ("ORIGIN_URL", "http://o"),
        ("ROUTES", &routes),
        ("WEBHOOK_SECRET", WEBHOOK_SECRET),
        ("RECONCILE_KEY", RECONCILE_KEY),
        ("FORWARD_SECRET", "forward-secret"),
    ])?;
    Ok(config.routes[0]
        .reconcile
        .clone()
        .expect("the route has a reconcile table"))
}

fn reconciled(scheme: &str, reconcile: &str) -> Result<crate::reconcile::ReconcileConfig, Problem> {
    reconciled_with(scheme, "", reconcile)
}

/// Its problem's detail, checked to name no secret's value.
fn detail_without_secrets(problem: &Problem) -> String {
    let detail = problem.detail();
    for secret in [RECONCILE_KEY, WEBHOOK_SECRET, "Reconcile", "abc123def"] {
        assert!(!detail.contains(secret), "{secret} shown in: {detail}");
    }
    detail
}

#[test]
fn a_reconcile_table_parses_with_the_documented_defaults() {
    let stripe = reconciled(
        "stripe",
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["payment_intent.*","charge.refunded"]}"#,
    )
    .unwrap();
    assert_eq!(stripe.source, crate::reconcile::Source::Stripe);
    assert_eq!(stripe.api_key_name, "RECONCILE_KEY");
    // The key is read from the secret it names, not taken as written.
    assert_eq!(stripe.api_key.expose(), RECONCILE_KEY);
    assert_eq!(
        (
            stripe.every_seconds,
            stripe.lookback_seconds,
            stripe.grace_seconds
        ),
        (600, 172_800, 600)
    );
    assert_eq!(stripe.api_base, "https://api.stripe.com");
    assert_eq!(stripe.endpoint, None);
    assert!(stripe.types.matches("payment_intent.succeeded"));
    assert!(stripe.types.matches("charge.refunded"));
    assert!(!stripe.types.matches("charge.succeeded"));
    // The window a run starting at `now` lists.
    let window = stripe.window(1_000_000);
    assert_eq!(
        (window.from, window.to),
        (1_000_000 - 172_800, 1_000_000 - 600)
    );

    for (scheme, base, endpoint) in [
        ("stripe-v2", "https://api.stripe.com", ""),
        ("square", "https://connect.squareup.com", ""),
        (
            "paddle",
            "https://api.paddle.com",
            r#","endpoint":"ntfset_01h""#,
        ),
        ("paypal", "https://api-m.paypal.com", ""),
        (
            "github",
            "https://api.github.com",
            r#","endpoint":"repos/o/r/hooks/12""#,
        ),
    ] {
        let reconcile =
            format!(r#"{{"source":"{scheme}","api_key":"RECONCILE_KEY","types":["*"]{endpoint}}}"#);
        // stripe-v2 lists what a Stripe-signed route takes.
        let signature = scheme.strip_suffix("-v2").unwrap_or(scheme);
        let config = reconciled(signature, &reconcile).unwrap();
        assert_eq!(config.source.name(), scheme);
        assert_eq!(config.api_base, base, "{scheme}");
        // Every provider keeps at least 2 days: the default lookback holds.
        assert_eq!(config.lookback_seconds, 172_800, "{scheme}");
    }
}

#[test]
fn every_field_of_a_reconcile_table_is_checked_and_blamed_by_its_own_name() {
    const KEY: &str = r#""api_key":"RECONCILE_KEY""#;
    const TYPES: &str = r#""types":["charge.*"]"#;
    let stripe = |rest: &str| format!(r#"{{"source":"stripe",{KEY},{TYPES}{rest}}}"#);
    let cases: Vec<(&str, &str, String, &str)> = vec![
        // (scheme, extra route fields, reconcile, the field blamed)
        ("stripe", "", format!("{{{KEY},{TYPES}}}"), "source"),
        (
            "stripe",
            "",
            format!(r#"{{"source":"braintree",{KEY},{TYPES}}}"#),
            "source",
        ),
        // A route verifying Stripe cannot reconcile against Paddle's list:
        // the deliveries listed would be another endpoint's.
        (
            "stripe",
            "",
            format!(r#"{{"source":"paddle",{KEY},{TYPES},"endpoint":"ntfset_1"}}"#),
            "source",
        ),
        (
            "github",
            "",
            format!(r#"{{"source":"stripe",{KEY},{TYPES}}}"#),
            "source",
        ),
        // Stripe's thin events are Stripe-signed: stripe-v2 needs a
        // route that verifies Stripe, as stripe does.
        (
            "github",
            "",
            format!(r#"{{"source":"stripe-v2",{KEY},{TYPES}}}"#),
            "source",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe-v2",{KEY},{TYPES},"endpoint":"we_1"}}"#),
            "endpoint",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{TYPES}}}"#),
            "api_key",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe","api_key":"UNSET_KEY",{TYPES}}}"#),
            "api_key",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe","api_key":"stripe_key",{TYPES}}}"#),
            "api_key",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe","api_key":7,{TYPES}}}"#),
            "api_key",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{KEY}}}"#),
            "types",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{KEY},"types":[]}}"#),
            "types",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{KEY},"types":["charge.*",7]}}"#),
            "types",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{KEY},"types":"charge.*"}}"#),
            "types",
        ),
        (
            "stripe",
            "",
            format!(r#"{{"source":"stripe",{KEY},"types":["a*b"]}}"#),
            "types",
        ),
        ("stripe", "", stripe(r#","every_seconds":59"#), "every_seconds"),
        (
            "stripe",
            "",
            stripe(r#","every_seconds":86401"#),
            "every_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","every_seconds":"often""#),
            "every_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","every_seconds":-600"#),
            "every_seconds",
        ),
        // A lookback within an hour of the retention: an event listed
        // after its receipt expired would be delivered a second time.
        (
            "stripe",
            r#","retention_seconds":7200"#,
            stripe(r#","lookback_seconds":3601"#),
            "lookback_seconds",
        ),
        // The default lookback (2 days) needs a retention of 2 days and an
        // hour: the route's own retention is checked against the default.
        (
            "stripe",
            r#","retention_seconds":172800"#,
            stripe(""),
            "lookback_seconds",
        ),
        // Longer than the provider lists: such a run would list nothing more.
        (
            "github",
            r#","retention_seconds":31536000"#,
            r#"{"source":"github","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"repos/o/r/hooks/1","lookback_seconds":259201}"#.to_string(),
            "lookback_seconds",
        ),
        (
            "stripe",
            r#","retention_seconds":31536000"#,
            stripe(r#","lookback_seconds":2592001"#),
            "lookback_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","lookback_seconds":59"#),
            "lookback_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","lookback_seconds":3600,"grace_seconds":3600"#),
            "grace_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","lookback_seconds":3600,"grace_seconds":7200"#),
            "grace_seconds",
        ),
        (
            "stripe",
            "",
            stripe(r#","grace_seconds":86401"#),
            "grace_seconds",
        ),
        // Plain http only to a loopback host (a local fake): the key must
        // not cross a network in the clear.
        (
            "stripe",
            "",
            stripe(r#","api_base":"http://example.com""#),
            "api_base",
        ),
        (
            "stripe",
            "",
            stripe(r#","api_base":"https://api.stripe.com/v1""#),
            "api_base",
        ),
        (
            "stripe",
            "",
            stripe(r#","api_base":"http://localhost.attacker.example""#),
            "api_base",
        ),
        (
            "stripe",
            "",
            stripe(r#","api_base":"https://user:pw@api.stripe.com""#),
            "api_base",
        ),
        (
            "stripe",
            "",
            stripe(r#","endpoint":"we_123""#),
            "endpoint",
        ),
        (
            "github",
            "",
            format!(r#"{{"source":"github",{KEY},{TYPES}}}"#),
            "endpoint",
        ),
        (
            "github",
            "",
            format!(r#"{{"source":"github",{KEY},{TYPES},"endpoint":"repos/a/b/hooks/x"}}"#),
            "endpoint",
        ),
        (
            "github",
            "",
            format!(r#"{{"source":"github",{KEY},{TYPES},"endpoint":"../x"}}"#),
            "endpoint",
        ),
        // A hook path that climbs out of the API's tree would send the
        // token's redeliveries elsewhere.
        (
            "github",
            "",
            format!(r#"{{"source":"github",{KEY},{TYPES},"endpoint":"repos/../b/hooks/1"}}"#),
            "endpoint",
        ),
        (
            "github",
            "",
            format!(r#"{{"source":"github",{KEY},{TYPES},"endpoint":"repos/a/b/hooks/1/"}}"#),
            "endpoint",
        ),
        (
            "paddle",
            "",
            format!(r#"{{"source":"paddle",{KEY},{TYPES}}}"#),
            "endpoint",
        ),
        (
            "paddle",
            "",
            format!(r#"{{"source":"paddle",{KEY},{TYPES},"endpoint":"ntfset/../x"}}"#),
            "endpoint",
        ),
        (
            "stripe",
            "",
            stripe(r#","lookback":3600"#),
            "lookback",
        ),
    ];
    for (scheme, fields, reconcile, field) in cases {
        let problem = reconciled_with(scheme, fields, &reconcile)
            .expect_err(&format!("{scheme} {fields} {reconcile}"));
        detail_without_secrets(&problem);
        assert_eq!(
            variable_of(problem),
            format!("ROUTES.r.reconcile.{field}"),
            "{scheme} {fields} {reconcile}"
        );
    }
}

#[test]
fn a_reconcile_setting_at_its_bounds_is_taken() {
    let stripe = |rest: &str| {
        format!(r#"{{"source":"stripe","api_key":"RECONCILE_KEY","types":["charge.*"]{rest}}}"#)
    };
    let at = reconciled(
        "stripe",
        &stripe(r#","every_seconds":60,"grace_seconds":0"#),
    )
    .unwrap();
    assert_eq!((at.every_seconds, at.grace_seconds), (60, 0));
    let at = reconciled("stripe", &stripe(r#","every_seconds":86400"#)).unwrap();
    assert_eq!(at.every_seconds, 86_400);
    // Exactly an hour short of the retention is enough (v5: a retention
    // that also outlives Stripe's three days of retries; it was 7,200 s
    // with a lookback of 3,600).
    let at = reconciled_with(
        "stripe",
        r#","retention_seconds":262800"#,
        &stripe(r#","lookback_seconds":259200,"grace_seconds":3599"#),
    )
    .unwrap();
    assert_eq!((at.lookback_seconds, at.grace_seconds), (259_200, 3_599));
    // Exactly what the provider keeps.
    let at = reconciled_with(
        "github",
        r#","retention_seconds":31536000"#,
        r#"{"source":"github","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"repos/o/r/hooks/1","lookback_seconds":259200}"#,
    )
    .unwrap();
    assert_eq!(at.lookback_seconds, 259_200);
    // A local fake of the API, over plain http on loopback.
    let local = reconciled("stripe", &stripe(r#","api_base":"http://127.0.0.1:8787""#)).unwrap();
    assert_eq!(local.api_base, "http://127.0.0.1:8787");
    for hook in ["repos/o-1/r.js/hooks/12", "orgs/acme/hooks/3", "app/hook"] {
        let reconcile = format!(
            r#"{{"source":"github","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"{hook}"}}"#
        );
        assert_eq!(
            reconciled("github", &reconcile)
                .unwrap()
                .endpoint
                .as_deref(),
            Some(hook)
        );
    }
}

/// The review's item 2 (round 5): `retention_seconds = 86400` with
/// `lookback_seconds = 82800` was accepted, and an event filled at minute
/// 10 and retried live by Stripe on day 2 found no receipt: forwarded
/// twice. The receipt must outlive the provider's own retries.
#[test]
fn a_filled_receipt_must_outlive_the_providers_own_retries() {
    let stripe =
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":82800}"#;
    let problem = reconciled_with("stripe", r#","retention_seconds":86400"#, stripe).unwrap_err();
    let detail = detail_without_secrets(&problem);
    assert!(
        detail.contains("259200 s") && detail.contains("at least 258600"),
        "{detail}"
    );
    assert_eq!(
        crate::problem::misconfigured_variable(&problem),
        Some("ROUTES.r.reconcile")
    );
    // The defaults are safe: three days of retention, ten minutes of grace.
    assert!(reconciled(
        "stripe",
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"]}"#
    )
    .is_ok());
    // Grace counts: a run fills an event no sooner than grace after it.
    let graced = r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":169200,"grace_seconds":86400}"#;
    assert!(reconciled_with("stripe", r#","retention_seconds":172800"#, graced).is_ok());
    let short = r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":169200,"grace_seconds":86399}"#;
    assert!(reconciled_with("stripe", r#","retention_seconds":172800"#, short).is_err());
    // Dead letters on an async route count too.
    let async_short = r#","delivery":"async","dead_retention_seconds":172800"#;
    let problem = reconciled_with(
        "stripe",
        async_short,
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":3600}"#,
    )
    .unwrap_err();
    assert!(
        problem.detail().contains("DEAD_RETENTION_SECONDS"),
        "{}",
        problem.detail()
    );
}

/// The review's item 4 (round 5): a PayPal route keyed by
/// `header:paypal-transmission-id,json:/id` was accepted; the run's
/// delivery has no headers, fell through to the event id, asked for a
/// resend, and the resend (a new transmission id) was a new key.
#[test]
fn a_reconciled_route_reads_the_event_id_ahead_of_what_a_listed_event_lacks() {
    let paypal = r#"{"source":"paypal","api_key":"RECONCILE_KEY","types":["*"]}"#;
    for (key_sources, first) in [
        (
            "header:paypal-transmission-id,json:/id",
            "header:paypal-transmission-id",
        ),
        ("body-sha256,json:/id", "body-sha256"),
        (
            "json:/id+header:paypal-transmission-id",
            "json:/id+header:paypal-transmission-id",
        ),
    ] {
        let fields = format!(r#","key_sources":"{key_sources}""#);
        let problem = reconciled_with("paypal", &fields, paypal).unwrap_err();
        assert_eq!(
            crate::problem::misconfigured_variable(&problem),
            Some("ROUTES.r.key_sources"),
            "{key_sources}"
        );
        assert!(problem.detail().contains(first), "{}", problem.detail());
    }
    for key_sources in ["json:/id", "json:/id,header:paypal-transmission-id"] {
        let fields = format!(r#","key_sources":"{key_sources}""#);
        assert!(
            reconciled_with("paypal", &fields, paypal).is_ok(),
            "{key_sources}"
        );
    }
    // GitHub's API says itself which deliveries were answered: its key
    // (the delivery's id, a header) is the route's as ever.
    let github = r#"{"source":"github","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"repos/o/r/hooks/1"}"#;
    assert!(reconciled("github", github).is_ok());
}

/// The review's item 14 (round 5): batch parts and events a run delivers
/// carry no signature of the sender's; without `FORWARD_SECRET` the origin
/// could verify nothing of them.
#[test]
fn forward_secret_is_required_where_a_forward_carries_no_senders_signature() {
    let without = |routes: &str| {
        let vars: HashMap<&str, &str> = [
            ("ORIGIN_URL", "http://o"),
            ("ROUTES", routes),
            ("WEBHOOK_SECRET", WEBHOOK_SECRET),
            ("RECONCILE_KEY", RECONCILE_KEY),
            (
                "ADYEN_HMAC_KEY",
                "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
            ),
        ]
        .into_iter()
        .collect();
        let config =
            Config::from_lookup(|name| vars.get(name).map(|value| value.to_string())).unwrap();
        config
            .broken
            .iter()
            .map(|broken| broken.problem.detail())
            .collect::<Vec<_>>()
    };
    for (routes, why) in [
        (
            r#"{"r":{"path":"/r","signature":"gocardless","signing_secret":"WEBHOOK_SECRET"}}"#,
            "sends batches",
        ),
        (
            r#"{"r":{"path":"/r","signature":"adyen","signing_secret":"ADYEN_HMAC_KEY"}}"#,
            "sends batches",
        ),
        (
            r#"{"r":{"path":"/r","signature":"stripe","signing_secret":"WEBHOOK_SECRET","reconcile":{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"]}}}"#,
            "reconciled from stripe",
        ),
        (
            r#"{"r":{"path":"/r","signature":"stripe","signing_secret":"WEBHOOK_SECRET","reconcile":{"source":"stripe-v2","api_key":"RECONCILE_KEY","types":["*"]}}}"#,
            "reconciled from stripe-v2",
        ),
        (
            r#"{"r":{"path":"/r","signature":"square","signing_secret":"WEBHOOK_SECRET","signature_url":"https://hooks.example/square","reconcile":{"source":"square","api_key":"RECONCILE_KEY","types":["*"]}}}"#,
            "reconciled from square",
        ),
    ] {
        let broken = without(routes);
        assert_eq!(broken.len(), 1, "{routes}");
        assert!(
            broken[0].contains("FORWARD_SECRET") || broken[0].contains("forward_secret"),
            "{}",
            broken[0]
        );
        assert!(broken[0].contains(why), "{}", broken[0]);
    }
    // A provider's own re-send is signed by it, and so is a plain route.
    for routes in [
        r#"{"r":{"path":"/r","signature":"stripe","signing_secret":"WEBHOOK_SECRET"}}"#,
        r#"{"r":{"path":"/r","signature":"paddle","signing_secret":"WEBHOOK_SECRET","reconcile":{"source":"paddle","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"ntfset_1"}}}"#,
    ] {
        assert_eq!(without(routes), Vec::<String>::new(), "{routes}");
    }
}

/// Stripe's thin events (SPEC v5 §11): `stripe-v2` is taken where
/// `stripe` is, on a route that verifies Stripe, and is a list of its own.
#[test]
fn a_stripe_v2_table_is_taken_on_a_stripe_route_and_is_a_source_of_its_own() {
    let table = |source: &str| {
        format!(
            r#"{{"source":"{source}","api_key":"RECONCILE_KEY","types":["v1.billing.meter.*"]}}"#
        )
    };
    let v2 = reconciled("stripe", &table("stripe-v2")).unwrap();
    assert_eq!(v2.source.name(), "stripe-v2");
    assert_eq!(v2.source.scheme(), "stripe");
    assert_eq!(v2.source.retry_horizon_seconds(), 3 * 86_400);
    assert_eq!(v2.api_base, "https://api.stripe.com");
    assert_eq!(
        (v2.every_seconds, v2.lookback_seconds, v2.grace_seconds),
        (600, 172_800, 600)
    );
    // A cursor of one of Stripe's lists is never followed on the other.
    let v1 = reconciled("stripe", &table("stripe")).unwrap();
    assert_ne!(v2.cursor_scope(), v1.cursor_scope());
    for scheme in ["paddle", "shopify", "github"] {
        let problem = reconciled(scheme, &table("stripe-v2")).unwrap_err();
        let detail = problem.detail();
        assert!(
            detail.contains("stripe-v2 lists the deliveries of SIGNATURE_SCHEME=stripe"),
            "{detail}"
        );
        assert_eq!(variable_of(problem), "ROUTES.r.reconcile.source");
    }
    // The default retention holds the three days of an event destination's
    // retries; a shorter one is refused as for stripe.
    let short = reconciled_with(
        "stripe",
        r#","retention_seconds":86400"#,
        r#"{"source":"stripe-v2","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":3600}"#,
    )
    .unwrap_err();
    assert!(
        short
            .detail()
            .contains("stripe-v2 may deliver an event itself"),
        "{}",
        short.detail()
    );
    // The first key source must read the event id from the body.
    let keyed = reconciled_with(
        "stripe",
        r#","key_sources":"header:stripe-signature,json:/id""#,
        &table("stripe-v2"),
    );
    assert!(keyed.is_err());
}

#[test]
fn a_reconcile_that_is_not_a_table_is_misconfigured() {
    for reconcile in [r#""stripe""#, "[]", "true", "600"] {
        let problem = reconciled("stripe", reconcile).unwrap_err();
        assert_eq!(variable_of(problem), "ROUTES.r.reconcile", "{reconcile}");
    }
}

#[test]
fn a_route_without_a_signature_cannot_be_reconciled() {
    // Its deliveries are no provider's: no events API lists them.
    let problem = config(&[
        ("ORIGIN_URL", "http://o"),
        (
            "ROUTES",
            r#"{"r":{"path":"/r","reconcile":{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"]}}}"#,
        ),
        ("RECONCILE_KEY", RECONCILE_KEY),
    ])
    .unwrap_err();
    assert_eq!(variable_of(problem), "ROUTES.r.reconcile.source");
}

#[test]
fn a_key_written_where_its_secrets_name_belongs_is_refused_and_never_shown() {
    for value in ["rk_live_abc123def456ghi789", RECONCILE_KEY] {
        let reconcile = format!(r#"{{"source":"stripe","api_key":"{value}","types":["*"]}}"#);
        let problem = reconciled("stripe", &reconcile).unwrap_err();
        let detail = detail_without_secrets(&problem);
        assert!(!detail.contains(value), "{detail}");
        assert!(detail.contains("not the name of a secret"), "{detail}");
        assert_eq!(variable_of(problem), "ROUTES.r.reconcile.api_key");
    }
}

#[test]
fn an_api_key_naming_an_unset_secret_says_its_name_and_no_value() {
    let problem = reconciled(
        "stripe",
        r#"{"source":"stripe","api_key":"UNSET_KEY","types":["*"]}"#,
    )
    .unwrap_err();
    let detail = detail_without_secrets(&problem);
    assert!(detail.contains("UNSET_KEY"), "{detail}");
    assert!(detail.contains("not set"), "{detail}");
    // A secret set to nothing is not set either.
    let routes = r#"{"r":{"path":"/r","signature":"stripe","signing_secret":"WEBHOOK_SECRET","reconcile":{"source":"stripe","api_key":"EMPTY_KEY","types":["*"]}}}"#;
    let problem = config(&[
        ("ORIGIN_URL", "http://o"),
        ("ROUTES", routes),
        ("WEBHOOK_SECRET", WEBHOOK_SECRET),
        ("EMPTY_KEY", ""),
    ])
    .unwrap_err();
    assert_eq!(variable_of(problem), "ROUTES.r.reconcile.api_key");
}

#[test]
fn an_unknown_field_of_reconcile_is_named_but_a_secret_looking_one_is_not_shown() {
    let problem = reconciled(
        "stripe",
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"rk_live_abc123def456ghi789":1}"#,
    )
    .unwrap_err();
    detail_without_secrets(&problem);
    let variable = variable_of(problem);
    assert!(variable.starts_with("ROUTES.r.reconcile."), "{variable}");
    assert!(!variable.contains("abc123"), "{variable}");
}

#[test]
fn paypal_resends_to_the_webhook_its_signing_secret_names_unless_an_endpoint_is_given() {
    let paypal = reconciled(
        "paypal",
        r#"{"source":"paypal","api_key":"RECONCILE_KEY","types":["PAYMENT.CAPTURE.COMPLETED"]}"#,
    )
    .unwrap();
    // PayPal's signing secret is the webhook id: the resend names it.
    assert_eq!(paypal.endpoint.as_deref(), Some(WEBHOOK_SECRET));
    let explicit = reconciled(
        "paypal",
        r#"{"source":"paypal","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"5GP028458E2496506"}"#,
    )
    .unwrap();
    assert_eq!(explicit.endpoint.as_deref(), Some("5GP028458E2496506"));
    let problem = reconciled(
        "paypal",
        r#"{"source":"paypal","api_key":"RECONCILE_KEY","types":["*"],"endpoint":"../x"}"#,
    )
    .unwrap_err();
    // PayPal does use an endpoint: the detail says what it must be.
    assert!(
        !problem.detail().contains("is not used"),
        "{}",
        problem.detail()
    );
    assert_eq!(variable_of(problem), "ROUTES.r.reconcile.endpoint");
}

#[test]
fn a_broken_reconcile_table_breaks_its_route_alone() {
    let routes = r#"{
        "r": {"path": "/r", "signature": "stripe", "signing_secret": "WEBHOOK_SECRET", "reconcile": {"source": "stripe"}},
        "other": {"path": "/other"}
    }"#;
    let config = whole_config(&[
        ("ORIGIN_URL", "http://o"),
        ("ROUTES", routes),
        ("WEBHOOK_SECRET", WEBHOOK_SECRET),
    ])
    .unwrap();
    assert_eq!(config.routes.len(), 1);
    assert_eq!(config.routes[0].name, "other");
    assert!(config.routes[0].reconcile.is_none());
    assert_eq!(
        variable_of(config.broken_route("r").unwrap().clone()),
        "ROUTES.r.reconcile.api_key"
    );
}

/// An async route's dead letters may be kept shorter than its receipts:
/// the lookback must leave an hour of theirs too, or a dead letter that
/// expired would be delivered again.
#[test]
fn an_async_routes_lookback_is_shorter_than_its_dead_letters_retention_too() {
    // (v5: dead letters kept 3 days, as Stripe's own retries need; they
    // were kept one day here, with a lookback of one.)
    let async_route =
        r#","delivery":"async","retention_seconds":604800,"dead_retention_seconds":259200"#;
    let too_long =
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":259200}"#;
    let problem = reconciled_with("stripe", async_route, too_long).unwrap_err();
    assert!(
        detail_without_secrets(&problem).contains("DEAD_RETENTION_SECONDS"),
        "{}",
        problem.detail()
    );
    let shorter =
        r#"{"source":"stripe","api_key":"RECONCILE_KEY","types":["*"],"lookback_seconds":255600}"#;
    assert!(reconciled_with("stripe", async_route, shorter).is_ok());
}

/// A Plaid route names two secrets (the API secret and the client id)
/// and may name its API base; without the client id, or with a base that
/// is not https (or a loopback http), it is misconfigured and says which
/// field, never the values.
#[test]
fn a_plaid_route_names_its_client_id_and_api_base() {
    let vars = |routes: &str| {
        config(&[
            ("ROUTES", routes),
            ("ORIGIN_URL", "http://o"),
            ("PLAID_SECRET", "plaid-secret-value"),
            ("PLAID_CLIENT", "plaid-client-value"),
        ])
    };
    let good = vars(
        r#"{"plaid":{"path":"/plaid","signature":"plaid","signing_secret":"PLAID_SECRET","plaid_client_id":"PLAID_CLIENT","signature_api_base":"https://sandbox.plaid.com"}}"#,
    )
    .unwrap();
    let plaid = &good.routes[0];
    assert_eq!(plaid.signature_scheme.name(), "plaid");
    assert_eq!(
        plaid.key_sources,
        crate::key::KeySource::parse_list("body-sha256").unwrap()
    );
    let shown = format!("{plaid:?}");
    assert!(!shown.contains("plaid-client-value") && !shown.contains("plaid-secret-value"));
    for (routes, field) in [
        (
            r#"{"plaid":{"path":"/plaid","signature":"plaid","signing_secret":"PLAID_SECRET"}}"#,
            "ROUTES.plaid.plaid_client_id",
        ),
        (
            r#"{"plaid":{"path":"/plaid","signature":"plaid","signing_secret":"PLAID_SECRET","plaid_client_id":"UNSET"}}"#,
            "ROUTES.plaid.plaid_client_id",
        ),
        (
            r#"{"plaid":{"path":"/plaid","signature":"plaid","signing_secret":"PLAID_SECRET","plaid_client_id":"plaid-client-value"}}"#,
            "ROUTES.plaid.plaid_client_id",
        ),
        (
            r#"{"plaid":{"path":"/plaid","signature":"plaid","plaid_client_id":"PLAID_CLIENT"}}"#,
            "ROUTES.plaid.signing_secret",
        ),
        (
            r#"{"plaid":{"path":"/plaid","signature":"plaid","signing_secret":"PLAID_SECRET","plaid_client_id":"PLAID_CLIENT","signature_api_base":"http://plaid.example"}}"#,
            "ROUTES.plaid.signature_api_base",
        ),
    ] {
        let problem = vars(routes).unwrap_err();
        assert!(!problem.detail().contains("-value"), "{}", problem.detail());
        assert_eq!(variable_of(problem), field, "{routes}");
    }
    // Without ROUTES: the top-level variables, the client id a secret.
    let top = route(&[
        ("SIGNATURE_SCHEME", "plaid"),
        ("SIGNING_SECRET", "plaid-secret-value"),
        ("PLAID_CLIENT_ID", "plaid-client-value"),
        ("SIGNATURE_API_BASE", "http://127.0.0.1:8791"),
    ])
    .unwrap();
    assert_eq!(top.signature_scheme.name(), "plaid");
    let problem = route(&[
        ("SIGNATURE_SCHEME", "plaid"),
        ("SIGNING_SECRET", "plaid-secret-value"),
    ])
    .unwrap_err();
    assert_eq!(variable_of(problem), "PLAID_CLIENT_ID");
}

// --- Order per entity (SPEC §12) ---

/// A Stripe route's `ORDER_*` fields (JSON members, starting with a comma).
fn ordered(fields: &str) -> Result<RouteConfig, Problem> {
    let routes = format!(
        r#"{{"r":{{"path":"/r","signature":"stripe","signing_secret":"WEBHOOK_SECRET","delivery":"async"{fields}}}}}"#
    );
    let config = config(&[
        ("ROUTES", routes.as_str()),
        ("ORIGIN_URL", "https://pay.internal"),
        ("WEBHOOK_SECRET", "whsec_test"),
    ])?;
    Ok(config.routes[0].clone())
}

#[test]
fn an_ordered_route_reads_its_sources_its_hold_and_what_it_does_with_stale_ones() {
    let route =
        ordered(r#","order_key":"json:/data/object/id","order_time":"json:/created""#).unwrap();
    let order = route.order.unwrap();
    assert_eq!(order.key.label(), "json:/data/object/id");
    assert_eq!(order.time.label(), "json:/created");
    assert_eq!((order.skip_stale, order.hold_ms), (false, DEFAULT_HOLD_MS));
    let route = ordered(
        r#","order_key":"json:/data/object/id","order_time":"json:/created","on_stale":"skip","order_hold_ms":60000"#,
    )
    .unwrap();
    let order = route.order.unwrap();
    assert_eq!((order.skip_stale, order.hold_ms), (true, MAX_HOLD_MS));
    assert_eq!(ordered("").unwrap().order, None);
}

#[test]
fn order_settings_that_cannot_hold_are_misconfigured_and_blamed_by_name() {
    let both = r#","order_key":"json:/data/object/id","order_time":"json:/created""#;
    let cases = [
        (
            r#","order_key":"json:/data/object/id""#,
            "ROUTES.r.order_key",
        ),
        (r#","order_time":"json:/created""#, "ROUTES.r.order_time"),
        (r#","on_stale":"skip""#, "ROUTES.r.on_stale"),
        (&format!(r#"{both},"on_stale":"drop""#), "ROUTES.r.on_stale"),
        (
            &format!(r#"{both},"order_hold_ms":60001"#),
            "ROUTES.r.order_hold_ms",
        ),
        // Stripe signs the body only: a header could be changed in transit.
        (
            r#","order_key":"header:x-entity","order_time":"json:/created""#,
            "ROUTES.r.order_key",
        ),
        (
            r#","order_key":"body-sha256","order_time":"json:/created""#,
            "ROUTES.r.order_key",
        ),
        (
            r#","order_key":"json:/data/object/id","order_time":"json:/a+json:/b""#,
            "ROUTES.r.order_time",
        ),
        (
            r#","order_key":"json:data","order_time":"json:/created""#,
            "ROUTES.r.order_key",
        ),
    ];
    for (fields, blamed) in cases {
        let problem = ordered(fields).expect_err(fields);
        assert_eq!(variable_of(problem), blamed, "{fields}");
    }
    let sync =
        r#"{"r":{"path":"/r","order_key":"json:/id","order_time":"json:/created"}}"#.to_string();
    let problem = config(&[("ROUTES", sync.as_str()), ("ORIGIN_URL", "https://o")]).unwrap_err();
    assert_eq!(variable_of(problem), "ROUTES.r.order_key", "a sync route");
}

/// `FLOW_SHARDS` (SPEC §15, v5): the route's limits over that many
/// coordinators; a share below 1 is misconfigured; `INDEX_SHARDS`
/// likewise bounded.
#[test]
fn flow_shards_split_a_routes_limits_and_refuse_a_share_below_one() {
    let limited = route(&[("MAX_IN_FLIGHT", "8"), ("FLOW_SHARDS", "8")]).unwrap();
    assert_eq!(limited.flow.unwrap().shards, 8);
    assert_eq!(limited.flow.unwrap().max_in_flight, Some(8));
    let unsharded = route(&[("MAX_IN_FLIGHT", "8")]).unwrap();
    assert_eq!(unsharded.flow.unwrap().shards, 1);
    let problem = route(&[("MAX_IN_FLIGHT", "4"), ("FLOW_SHARDS", "8")]).unwrap_err();
    assert_eq!(
        crate::problem::misconfigured_variable(&problem),
        Some("FLOW_SHARDS")
    );
    let problem = route(&[("RATE_PER_SECOND", "1.5"), ("FLOW_SHARDS", "2")]).unwrap_err();
    assert_eq!(
        crate::problem::misconfigured_variable(&problem),
        Some("FLOW_SHARDS")
    );
    assert_eq!(
        config(&[("ORIGIN_URL", "http://o")]).unwrap().index_shards,
        16
    );
    assert_eq!(
        config(&[("ORIGIN_URL", "http://o"), ("INDEX_SHARDS", "4")])
            .unwrap()
            .index_shards,
        4
    );
    assert!(config(&[("ORIGIN_URL", "http://o"), ("INDEX_SHARDS", "0")]).is_err());
    assert!(config(&[("ORIGIN_URL", "http://o"), ("INDEX_SHARDS", "257")]).is_err());
}

/// SPEC §5 (v5): `origin` names a service binding (a URL optional) or an
/// mTLS certificate binding (a URL required); a binding the Worker lacks
/// breaks its route alone, named as its setting.
#[test]
fn an_origin_may_name_a_service_or_an_mtls_binding() {
    use super::{BindingKind, OriginBinding};
    let routes = r#"{
        "svc": {"path": "/svc", "origin": "service:PAYMENTS_API"},
        "svc-url": {"path": "/svc2", "origin": "service:PAYMENTS_API", "origin_url": "https://payments.internal/v1"},
        "cert": {"path": "/cert", "origin": "mtls:ORIGIN_CERT", "origin_url": "https://pay.example"},
        "plain": {"path": "/plain", "origin": "https://pay.example/hooks"}
    }"#;
    let config = config(&[("ROUTES", routes)]).unwrap();
    let svc = config.route("svc").unwrap();
    assert_eq!(
        svc.origin_binding,
        Some(OriginBinding {
            kind: BindingKind::Service,
            name: "PAYMENTS_API".into()
        })
    );
    assert_eq!(svc.origin_url, "https://payments_api");
    assert_eq!(
        config.route("svc-url").unwrap().origin_url,
        "https://payments.internal/v1"
    );
    let cert = config.route("cert").unwrap();
    assert_eq!(
        cert.origin_binding.as_ref().unwrap().kind,
        BindingKind::Mtls
    );
    assert_eq!(cert.origin_url, "https://pay.example");
    assert_eq!(config.route("plain").unwrap().origin_binding, None);
    assert_eq!(
        config.route("plain").unwrap().origin_url,
        "https://pay.example/hooks"
    );
    // An mTLS binding needs a URL; a binding's name is a name.
    let refused = |origin: &str| {
        let routes = format!(r#"{{"r": {{"path": "/r", "origin": "{origin}"}}}}"#);
        let problem = whole_config(&[("ROUTES", &routes)])
            .unwrap()
            .broken
            .first()
            .map(|broken| broken.problem.clone())
            .unwrap();
        crate::problem::misconfigured_variable(&problem).map(str::to_string)
    };
    assert_eq!(refused("mtls:CERT").as_deref(), Some("ROUTES.r.origin"));
    assert_eq!(
        refused("service:not-a-name").as_deref(),
        Some("ROUTES.r.origin")
    );
    assert_eq!(refused("ftp://x").as_deref(), Some("ROUTES.r.origin"));
    // A binding the Worker does not have breaks that route alone.
    let mut config = config;
    config.refuse_missing_bindings(|name| name == "PAYMENTS_API");
    assert!(config.route("svc").is_some());
    assert!(config.route("cert").is_none());
    let broken = config.broken_route("cert").unwrap();
    assert_eq!(
        crate::problem::misconfigured_variable(broken),
        Some("ROUTES.cert.origin")
    );
}
