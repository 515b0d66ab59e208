use super::book::AlertBook;
use super::message::AlertState;
use super::*;
use crate::signature::{SchemeSettings, SignatureScheme, SignedRequest};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const T0: u64 = 1_800_000_000_000;

fn config(interval_seconds: u64) -> AlertsConfig {
    AlertsConfig {
        sinks: vec![
            Sink {
                url: "https://hooks.slack.com/services/T/B/x".into(),
                format: Format::Slack,
                secret: None,
            },
            Sink {
                url: "https://ops.example/idemgate".into(),
                format: Format::Json,
                secret: Some("ALERT_SECRET".into()),
            },
        ],
        interval_ms: interval_seconds * 1_000,
        thresholds: Thresholds::default(),
    }
}

fn states(book: &mut AlertBook, now: u64) -> Vec<(Condition, AlertState, u64)> {
    let due = book.due(now);
    let sent: Vec<_> = due
        .iter()
        .map(|outgoing| (outgoing.alert.id.clone(), outgoing.sink, Ok(())))
        .collect();
    book.sent(sent, now);
    due.into_iter()
        .filter(|outgoing| outgoing.sink == 0)
        .map(|outgoing| {
            (
                outgoing.alert.condition,
                outgoing.alert.state,
                outgoing.alert.count,
            )
        })
        .collect()
}

#[test]
fn alerts_parse_from_the_variables_and_blame_the_one_at_fault() {
    let vars = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        parse(move |name| {
            pairs
                .iter()
                .find(|(found, _)| found == name)
                .map(|(_, value)| value.clone())
        })
    };
    assert_eq!(vars(&[]), Ok(None));
    let sinks = r#"[{"url": "https://hooks.slack.com/services/T/B/x", "format": "slack"},
        {"url": "https://ops.example/idemgate", "format": "json", "secret": "ALERT_SECRET"}]"#;
    let parsed = vars(&[
        ("ALERTS", sinks),
        ("ALERT_SECRET", SECRET),
        ("ALERT_INTERVAL_SECONDS", "60"),
        ("ALERT_THRESHOLDS", r#"{"signature_failures": 5}"#),
    ])
    .unwrap()
    .unwrap();
    assert_eq!(parsed.sinks, config(60).sinks);
    assert_eq!(parsed.interval_ms, 60_000);
    assert_eq!(parsed.thresholds.signature_failures, 5);
    assert_eq!(parsed.thresholds.oldest_pending_seconds, 900);
    for (pairs, variable, says) in [
        (vec![("ALERTS", "{}")], "ALERTS", "list"),
        (vec![("ALERTS", "[]")], "ALERTS", "no sink"),
        (
            vec![("ALERTS", sinks)],
            "ALERTS",
            "ALERT_SECRET, which is not set",
        ),
        (
            vec![("ALERTS", sinks), ("ALERT_SECRET", "plain")],
            "ALERTS",
            "whsec_",
        ),
        (
            vec![(
                "ALERTS",
                r#"[{"url":"http://ops.example/x","format":"slack"}]"#,
            )],
            "ALERTS",
            "https",
        ),
        (
            vec![(
                "ALERTS",
                r#"[{"url":"https://o.example/x","format":"json"}]"#,
            )],
            "ALERTS",
            "needs a secret",
        ),
        (
            vec![(
                "ALERTS",
                r#"[{"url":"https://o.example/x","format":"xml"}]"#,
            )],
            "ALERTS",
            "format",
        ),
        (
            vec![(
                "ALERTS",
                r#"[{"url":"https://o.example/x","format":"slack","to":1}]"#,
            )],
            "ALERTS",
            "no setting",
        ),
        (
            vec![
                (
                    "ALERTS",
                    r#"[{"url":"https://o.example/x","format":"slack"}]"#,
                ),
                ("ALERT_INTERVAL_SECONDS", "0"),
            ],
            "ALERT_INTERVAL_SECONDS",
            "1 to 86400",
        ),
        (
            vec![
                (
                    "ALERTS",
                    r#"[{"url":"https://o.example/x","format":"slack"}]"#,
                ),
                ("ALERT_THRESHOLDS", r#"{"dead": 2}"#),
            ],
            "ALERT_THRESHOLDS",
            "no threshold",
        ),
    ] {
        let (name, reason) = vars(&pairs).unwrap_err();
        assert_eq!(name, variable, "{pairs:?}");
        assert!(reason.contains(says), "{pairs:?}: {reason}");
        assert!(!reason.contains("MfKQ9r8"), "no secret in a reason");
    }
    let loopback = vars(&[(
        "ALERTS",
        r#"[{"url":"http://127.0.0.1:8787/alerts","format":"slack"}]"#,
    )]);
    assert!(loopback.unwrap().is_some(), "http to loopback, for tests");
}

/// The review's item 9 (round 5): health quoted a refused sink's URL,
/// user, password and a Slack webhook's token with it. A sink is named
/// by its position and host only.
#[test]
fn a_refused_sink_is_named_by_its_position_and_host_only() {
    let parse_alerts = |alerts: &str| parse(|name| (name == "ALERTS").then(|| alerts.to_string()));
    let credentialed = r#"[{"url":"https://hooks.slack.com/services/T0AB/B0CD/OkSlackToken123","format":"slack"},
        {"url":"https://ops-user:S3cretPassw0rd@ops.example/idemgate?key=QueryKey99","format":"slack"}]"#;
    let (variable, reason) = parse_alerts(credentialed).unwrap_err();
    assert_eq!(variable, "ALERTS");
    assert!(reason.starts_with("sink 2 (ops.example): "), "{reason}");
    for hidden in ["ops-user", "S3cretPassw0rd", "idemgate", "QueryKey99"] {
        assert!(!reason.contains(hidden), "{hidden} in {reason}");
    }
    let slack_over_http =
        r#"[{"url":"http://hooks.slack.com/services/T0AB/B0CD/SlackToken123","format":"slack"}]"#;
    let (_, reason) = parse_alerts(slack_over_http).unwrap_err();
    assert!(reason.starts_with("sink 1 (hooks.slack.com): "), "{reason}");
    assert!(
        !reason.contains("SlackToken123") && !reason.contains("services"),
        "{reason}"
    );
    // Refused as API bases are: an address by number.
    let metadata = r#"[{"url":"https://169.254.169.254/latest","format":"slack"}]"#;
    let (_, reason) = parse_alerts(metadata).unwrap_err();
    assert!(reason.starts_with("sink 1 (169.254.169.254): "), "{reason}");
    // Any other fault names the sink the same way.
    let (_, reason) =
        parse_alerts(r#"[{"url":"https://o.example/T0K3N","format":"xml"}]"#).unwrap_err();
    assert!(
        reason.starts_with("sink 1 (o.example): ") && !reason.contains("T0K3N"),
        "{reason}"
    );
}

#[test]
fn a_send_error_quoting_the_sink_url_is_scrubbed() {
    let url = "https://ops-user:S3cretPassw0rd@ops.example/idemgate/Path0Token";
    let error = format!("fetch to {url} failed: ops-user:S3cretPassw0rd rejected; S3cretPassw0rd");
    let scrubbed = scrub_sink_error(&error, 1, url);
    assert!(scrubbed.contains("sink 2 (ops.example)"), "{scrubbed}");
    for hidden in ["S3cretPassw0rd", "Path0Token", "ops-user"] {
        assert!(!scrubbed.contains(hidden), "{hidden} in {scrubbed}");
    }
}

#[test]
fn dead_letters_make_one_alert_per_interval_with_the_count_then_resolved() {
    let config = config(300);
    let mut book = AlertBook::default();
    book.observe(
        "pay",
        Condition::Dead,
        1,
        "a receipt became dead",
        T0,
        &config,
    );
    assert_eq!(
        states(&mut book, T0),
        [(Condition::Dead, AlertState::Firing, 1)]
    );
    for second in 1..=9 {
        book.observe(
            "pay",
            Condition::Dead,
            1,
            "dead",
            T0 + second * 1_000,
            &config,
        );
    }
    book.tick(T0 + 10_000, &config);
    assert_eq!(states(&mut book, T0 + 10_000), [], "not a storm");
    // An interval after the first alert the condition clears 9 s later:
    // one message, `resolved` with the count since the last (v5; it was
    // `firing` 9, then `resolved` 0 nine seconds apart).
    book.tick(T0 + 300_000, &config);
    assert_eq!(states(&mut book, T0 + 300_000), [], "about to clear");
    assert_eq!(book.next_wake(&config), Some(T0 + 309_000));
    book.tick(T0 + 309_000, &config);
    assert_eq!(
        states(&mut book, T0 + 309_000),
        [(Condition::Dead, AlertState::Resolved, 9)],
        "an interval without a dead letter, with the count since the last alert"
    );
    assert!(book.view().iter().all(|view| !view.firing));
}

/// The review's item 7: six dead letters within a second, interval 60 s,
/// gave `firing` 1 at once and then, at 62 s, `firing` 5 and `resolved`
/// together. Now: `firing` 1, then one `resolved` carrying the 5.
#[test]
fn a_burst_is_told_as_firing_then_one_resolved_with_its_count() {
    let config = config(60);
    let mut book = AlertBook::default();
    let mut told = Vec::new();
    for n in 0..6 {
        book.observe("pay", Condition::Dead, 1, "dead", T0 + n * 150, &config);
        told.extend(states(&mut book, T0 + n * 150));
    }
    let mut now = T0 + 750;
    while let Some(next) = book.next_wake(&config).filter(|at| *at < T0 + 600_000) {
        assert!(next > now, "no wake in the past");
        now = next;
        book.tick(now, &config);
        told.extend(states(&mut book, now));
    }
    assert_eq!(
        told,
        [
            (Condition::Dead, AlertState::Firing, 1),
            (Condition::Dead, AlertState::Resolved, 5)
        ]
    );
}

/// Signs that keep coming get one `firing` update per interval, each at
/// most a tenth of an interval late, never two within an interval.
#[test]
fn a_condition_that_keeps_firing_is_told_once_per_interval() {
    let config = config(60);
    let mut book = AlertBook::default();
    let mut told = Vec::new();
    for second in 0..300u64 {
        let now = T0 + second * 1_000;
        if second % 5 == 0 {
            book.observe("pay", Condition::Dead, 1, "dead", now, &config);
        }
        book.tick(now, &config);
        for alert in states(&mut book, now) {
            told.push((second, alert.1));
        }
    }
    let seconds: Vec<u64> = told.iter().map(|(second, _)| *second).collect();
    assert_eq!(seconds, [0, 60, 120, 180, 240]);
    assert!(told.iter().all(|(_, state)| *state == AlertState::Firing));
}

#[test]
fn signature_failures_fire_at_the_threshold_in_five_minutes_and_clear_below_it() {
    let config = config(300);
    let mut book = AlertBook::default();
    for n in 0..19 {
        book.observe(
            "pay",
            Condition::SignatureFailures,
            1,
            "401",
            T0 + n * 10_000,
            &config,
        );
    }
    assert_eq!(states(&mut book, T0 + 200_000), [], "19 of 20");
    book.observe(
        "pay",
        Condition::SignatureFailures,
        1,
        "401",
        T0 + 200_000,
        &config,
    );
    assert_eq!(
        states(&mut book, T0 + 200_000),
        [(Condition::SignatureFailures, AlertState::Firing, 20)]
    );
    // Spread out, 20 in over five minutes is no alert.
    let mut slow = AlertBook::default();
    for n in 0..30 {
        slow.observe(
            "pay",
            Condition::SignatureFailures,
            1,
            "401",
            T0 + n * 20_000,
            &config,
        );
    }
    assert_eq!(states(&mut slow, T0 + 600_000), []);
    // Cleared at 320 s, it is told an interval after its firing (v5: one
    // message per interval; it was told at once).
    book.tick(T0 + 320_000, &config);
    assert_eq!(states(&mut book, T0 + 320_000), []);
    assert_eq!(book.next_wake(&config), Some(T0 + 500_000));
    book.tick(T0 + 500_000, &config);
    assert_eq!(
        states(&mut book, T0 + 500_000),
        [(Condition::SignatureFailures, AlertState::Resolved, 0)]
    );
}

#[test]
fn origin_failures_fire_once_they_have_lasted() {
    let config = AlertsConfig {
        thresholds: Thresholds {
            origin_failures_seconds: 60,
            ..Thresholds::default()
        },
        ..config(30)
    };
    let mut book = AlertBook::default();
    for n in 0..=5 {
        book.observe(
            "pay",
            Condition::OriginFailures,
            1,
            "503",
            T0 + n * 10_000,
            &config,
        );
    }
    assert_eq!(states(&mut book, T0 + 50_000), [], "50 s of 60");
    book.observe(
        "pay",
        Condition::OriginFailures,
        1,
        "503",
        T0 + 60_000,
        &config,
    );
    assert_eq!(
        states(&mut book, T0 + 60_000),
        [(Condition::OriginFailures, AlertState::Firing, 7)]
    );
    // Not firing, it wakes the book only to forget it, never at once.
    let mut quiet = AlertBook::default();
    quiet.observe("pay", Condition::OriginFailures, 3, "503", T0, &config);
    assert_eq!(quiet.next_wake(&config), Some(T0 + SIGNATURE_WINDOW_MS));
    // A gap of an interval starts the count of seconds again.
    let mut gapped = AlertBook::default();
    gapped.observe("pay", Condition::OriginFailures, 1, "503", T0, &config);
    gapped.observe(
        "pay",
        Condition::OriginFailures,
        1,
        "503",
        T0 + 40_000,
        &config,
    );
    gapped.observe(
        "pay",
        Condition::OriginFailures,
        1,
        "503",
        T0 + 70_000,
        &config,
    );
    assert_eq!(states(&mut gapped, T0 + 70_000), []);
}

#[test]
fn an_alert_that_cannot_be_sent_is_retried_then_given_up_and_the_outbox_is_bounded() {
    let config = config(300);
    let mut book = AlertBook::default();
    book.observe("pay", Condition::Dead, 1, "dead", T0, &config);
    let due = book.due(T0);
    assert_eq!(due.len(), 2, "one per sink");
    book.sent(
        vec![
            (due[0].alert.id.clone(), due[0].sink, Ok(())),
            (
                due[1].alert.id.clone(),
                due[1].sink,
                Err("answered 500".into()),
            ),
        ],
        T0,
    );
    assert_eq!((book.outbox_len(), book.delivered), (1, 1));
    assert_eq!(book.due(T0 + 1_000).len(), 0, "backed off");
    let next = book.next_wake(&config).unwrap();
    assert!(next > T0 && next <= T0 + 10_000, "{next}");
    let again = book.due(next);
    assert_eq!(again[0].attempts, 1);
    assert_eq!(again[0].last_error.as_deref(), Some("answered 500"));
    assert_eq!(book.due(T0 + book::GIVE_UP_AFTER_MS).len(), 0);
    assert_eq!((book.outbox_len(), book.given_up), (0, 1));
    for n in 0..book::MAX_OUTBOX as u64 {
        book.observe(
            &format!("r{n}"),
            Condition::Misconfigured,
            1,
            "x",
            T0,
            &config,
        );
    }
    assert_eq!(book.outbox_len(), book::MAX_OUTBOX);
    assert_eq!(book.given_up, 1 + book::MAX_OUTBOX as u64);
}

#[test]
fn a_failing_alert_backs_off_doubling_each_time_up_to_five_minutes() {
    let config = config(300);
    let mut book = AlertBook::default();
    book.observe("pay", Condition::Dead, 1, "dead", T0, &config);
    let mut now = T0;
    let mut gaps = Vec::new();
    for _ in 0..9 {
        let due: Vec<_> = book
            .due(now)
            .into_iter()
            .map(|outgoing| (outgoing.alert.id, outgoing.sink, Err("answered 500".into())))
            .collect();
        assert_eq!(due.len(), 2, "both sinks fail again at {now}");
        book.sent(due, now);
        // The outbox's own times (the condition's clearing is a wake too).
        let waiting = book.due(now + 3_600_000);
        let next = waiting
            .iter()
            .map(|outgoing| outgoing.next_at)
            .min()
            .unwrap();
        assert!(waiting.iter().all(|outgoing| outgoing.next_at == next));
        gaps.push((next - now) / 1_000);
        now = next;
    }
    assert_eq!(gaps, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
}

#[test]
fn a_full_outbox_drops_its_oldest_alerts_and_keeps_the_newest() {
    let config = config(300);
    let mut book = AlertBook::default();
    let extra = 7;
    for n in 0..(book::MAX_OUTBOX / 2 + extra) as u64 {
        book.observe(
            &format!("r{n:04}"),
            Condition::Misconfigured,
            1,
            "x",
            T0 + n,
            &config,
        );
    }
    assert_eq!(book.outbox_len(), book::MAX_OUTBOX);
    assert_eq!(book.given_up, 2 * extra as u64);
    let routes: Vec<String> = book
        .due(T0 + 1_000)
        .into_iter()
        .filter(|outgoing| outgoing.sink == 0)
        .map(|outgoing| outgoing.alert.route)
        .collect();
    assert_eq!(routes.first().map(String::as_str), Some("r0007"));
    assert_eq!(routes.last().map(String::as_str), Some("r0256"));
}

#[test]
fn a_json_alert_is_signed_as_standard_webhooks_at_each_attempt() {
    let config = config(300);
    let mut book = AlertBook::default();
    book.observe(
        "pay",
        Condition::Dead,
        2,
        "two receipts became dead",
        T0,
        &config,
    );
    let due = book.due(T0);
    let json = due.iter().find(|outgoing| outgoing.sink == 1).unwrap();
    let now = T0 / 1_000 + 3_600;
    let request = json
        .alert
        .request(&config.sinks[1], Some(SECRET), now)
        .unwrap();
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["type"], "idemgate.alert");
    assert_eq!(body["condition"], "dead");
    assert_eq!(
        (body["state"].as_str(), body["count"].as_u64()),
        (Some("firing"), Some(2))
    );
    let scheme = SignatureScheme::configure(
        "standard-webhooks",
        &SchemeSettings {
            secret: Some(SECRET.into()),
            ..SchemeSettings::default()
        },
    )
    .unwrap();
    let signed = SignedRequest {
        headers: &request.headers,
        body: &request.body,
        query: None,
    };
    assert!(scheme.verify(&signed, now, 300).is_ok(), "signed when sent");
    assert!(
        scheme.verify(&signed, now + 600, 300).is_err(),
        "hence signed again on a retry"
    );
    let slack = json.alert.request(&config.sinks[0], None, now).unwrap();
    let text: serde_json::Value = serde_json::from_slice(&slack.body).unwrap();
    assert!(text["text"]
        .as_str()
        .unwrap()
        .contains("`dead` on route `pay`"));
}

#[test]
fn decisions_are_signs_of_conditions() {
    assert_eq!(Condition::of_decision("dead", None), Some(Condition::Dead));
    assert_eq!(
        Condition::of_decision("failed", None),
        Some(Condition::OriginFailures)
    );
    assert_eq!(
        Condition::of_decision("rejected", Some("bad-signature")),
        Some(Condition::SignatureFailures)
    );
    assert_eq!(
        Condition::of_decision("rejected", Some("origin-busy")),
        Some(Condition::OriginBusy)
    );
    assert_eq!(
        Condition::of_decision("rejected", Some("misconfigured")),
        Some(Condition::Misconfigured)
    );
    assert_eq!(Condition::of_decision("forwarded", None), None);
    assert_eq!(
        Condition::of_decision("rejected", Some("invalid-json")),
        None
    );
}

/// The review's flood (SPEC §15, v5): 100,000 forged 401s 3 ms apart,
/// each its own observation. The book counts them per second, so its size
/// stays bounded; and a `dead` letter on another route still goes out.
#[test]
fn a_flood_of_forgeries_keeps_the_book_small_and_another_routes_dead_letter_goes_out() {
    let config = config(60);
    let mut book = AlertBook::default();
    let mut largest = 0;
    for n in 0..100_000u64 {
        book.observe(
            "pay",
            Condition::SignatureFailures,
            1,
            "401",
            T0 + n * 3,
            &config,
        );
        if n % 1_000 == 0 {
            largest = largest.max(serde_json::to_string(&book).unwrap().len());
            let _ = book.due(T0 + n * 3);
        }
    }
    let end = T0 + 300_000;
    book.observe("refunds", Condition::Dead, 1, "dead", end, &config);
    let size = serde_json::to_string(&book).unwrap().len();
    assert!(
        largest.max(size) < 64 * 1024,
        "the book stays small: {largest} bytes at most, {size} at the end"
    );
    let due = book.due(end);
    assert!(
        due.iter().any(|outgoing| outgoing.alert.route == "refunds"
            && outgoing.alert.condition == Condition::Dead),
        "the other route's dead letter is due"
    );
}
