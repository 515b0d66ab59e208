use super::*;
use crate::canonical::Fingerprint;

const LEASE: u64 = 15_000;
const RETENTION: u64 = 60_000;
const NOW: u64 = 1_700_000_000_000;

fn fp(text: &str) -> Fingerprint {
    Fingerprint::of_bytes(text.as_bytes())
}

fn answered(status: u16) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status,
        headers: vec![
            ("content-type".into(), "text/plain".into()),
            ("set-cookie".into(), "session=secret".into()),
        ],
        body: b"ok".to_vec(),
    })
}

/// A completed receipt as the first version stored it (from its README).
const V1_RECORD: &str = r#"{"state":"completed","completed_at":1795979799428,
    "response":{"status":201,"headers":[["content-type","application/json"]],"body_bytes":352,"body_stored":true},
    "fingerprint":"c2b11e657e12fd177359627ca89412018e2274d0873cfbfcf1fc50f685582e9e","epoch":1,
    "first_seen_at":1795979799421,"updated_at":1795979799428,"expires_at":1796238999428,"duplicates":1,
    "attempts":[{"epoch":1,"started_at":1795979799421,"ended_at":1795979799428,"status":201,"error":null}],
    "scope":"dad9e5138d4055834414d144ca33d00d53c427a139bce63c4260a270ebc0a18d"}"#;

#[test]
fn a_first_version_receipt_does_not_parse_but_still_expires() {
    assert!(serde_json::from_str::<Receipt>(V1_RECORD).is_err());
    assert_eq!(
        Receipt::deletable_at_of_unparsed(V1_RECORD),
        Some(1_796_238_999_428)
    );
    let in_flight = r#"{"state":"in_flight","lease_expires_at":9000,"owner":7,"expires_at":5000}"#;
    assert_eq!(Receipt::deletable_at_of_unparsed(in_flight), Some(9000));
    assert_eq!(Receipt::deletable_at_of_unparsed("{\"state\""), None);
    // This version's pending async delivery is never freed this way,
    // however long past its expires_at (a long retry, a re-drive).
    let pending =
        r#"{"state":"queued","next_attempt_at":9000,"delivery":"async","expires_at":5000}"#;
    assert_eq!(Receipt::deletable_at_of_unparsed(pending), None);
    assert_eq!(
        Receipt::deletable_at_of_unparsed(r#"{"expires_at":"soon"}"#),
        None
    );
}

#[test]
fn the_last_status_is_that_of_the_latest_attempt_that_got_one() {
    let mut receipt = in_flight(NOW);
    assert_eq!(receipt.last_status(), None);
    receipt
        .record(receipt.epoch, &answered(503), &policy(), NOW + 1)
        .unwrap();
    assert_eq!(receipt.last_status(), Some(503));
    receipt.begin_forward(
        next_epoch(receipt.epoch, NOW + 2),
        NOW + 2,
        LEASE,
        RETENTION,
    );
    assert_eq!(
        receipt.last_status(),
        Some(503),
        "the attempt in flight has none yet"
    );
    receipt
        .record(receipt.epoch, &ForwardResult::TimedOut, &policy(), NOW + 3)
        .unwrap();
    assert_eq!(receipt.last_status(), Some(503), "a timeout has none");
    receipt.begin_forward(
        next_epoch(receipt.epoch, NOW + 4),
        NOW + 4,
        LEASE,
        RETENTION,
    );
    receipt
        .record(receipt.epoch, &answered(201), &policy(), NOW + 5)
        .unwrap();
    assert_eq!(receipt.last_status(), Some(201));
}

#[test]
fn the_stored_body_goes_back_into_a_completed_receipt_only() {
    let mut receipt = in_flight(NOW);
    assert!(receipt.stored_response_mut().is_none());
    receipt
        .record(receipt.epoch, &answered(201), &policy(), NOW + 1)
        .unwrap();
    // Storage keeps the body beside the record; loading puts it back.
    receipt.stored_response_mut().unwrap().response.body = b"from storage".to_vec();
    assert_eq!(
        receipt.stored_response().unwrap().response.body,
        b"from storage"
    );
}

fn policy() -> RecordPolicy {
    RecordPolicy {
        retryable: RetryableStatuses::default(),
        retention_ms: RETENTION,
        max_stored_response_bytes: 1024,
        random: 10, // no jitter: 90 + 10 = 100%
    }
}

/// What the async receipts of these tests were accepted with.
fn terms() -> AsyncTerms {
    AsyncTerms {
        retry_schedule_ms: vec![10_000, 60_000],
        retention_ms: RETENTION,
        dead_retention_ms: 10 * DAY_MS,
        max_stored_response_bytes: 1024,
        ..AsyncTerms::default()
    }
}

fn receipt(delivery: DeliveryKind) -> Receipt {
    let mut receipt = Receipt::new(
        Identity {
            receipt_id: String::new(),
            route: String::new(),
            object: String::new(),
            scope: String::new(),
            key: "k".into(),
            path: None,
            tenant_sha256: None,
        },
        fp("a"),
        delivery,
        ReceiptState::Queued {
            next_attempt_at: NOW,
        },
        NOW,
        RETENTION,
    );
    if delivery == DeliveryKind::Async {
        receipt.terms = Some(terms());
    }
    receipt
}

/// A sync receipt in flight at epoch 1, forwarded at `now`.
fn in_flight(now: u64) -> Receipt {
    let mut receipt = receipt(DeliveryKind::Sync);
    receipt.begin_forward(1, now, LEASE, RETENTION);
    receipt
}

fn ended(status: u16) -> Receipt {
    let mut receipt = in_flight(NOW);
    receipt
        .record(1, &answered(status), &policy(), NOW + 100)
        .unwrap();
    receipt
}

#[test]
fn no_receipt_forwards() {
    assert_eq!(
        decide(None, &fp("a"), NOW),
        Decision::Forward { takeover: false }
    );
}

#[test]
fn an_expired_receipt_is_a_new_key_whatever_its_payload() {
    let receipt = ended(200);
    for payload in ["a", "other"] {
        assert_eq!(
            decide(Some(&receipt), &fp(payload), NOW + 100 + RETENTION),
            Decision::Forward { takeover: false }
        );
    }
    assert_eq!(
        decide(Some(&receipt), &fp("a"), NOW + 99 + RETENTION),
        Decision::Replay
    );
}

#[test]
fn the_lease_ends_exactly_at_lease_expires_at() {
    let receipt = in_flight(NOW);
    let end = NOW + LEASE;
    assert_eq!(
        decide(Some(&receipt), &fp("a"), end - 1),
        Decision::InFlight {
            lease_expires_at: end
        },
        "live one millisecond before"
    );
    assert_eq!(
        decide(Some(&receipt), &fp("a"), end),
        Decision::Forward { takeover: true },
        "taken over at the end itself"
    );
    assert!(!lease_expired(end, end - 1));
    assert!(lease_expired(end, end));
}

#[test]
fn completed_replays_and_failed_forwards_again() {
    assert_eq!(
        decide(Some(&ended(201)), &fp("a"), NOW + 200),
        Decision::Replay
    );
    assert_eq!(
        decide(Some(&ended(503)), &fp("a"), NOW + 200),
        Decision::Forward { takeover: false }
    );
}

#[test]
fn a_different_fingerprint_is_a_mismatch_in_every_state() {
    let live = in_flight(NOW);
    let mut expired_lease = in_flight(NOW);
    expired_lease.expires_at = u64::MAX;
    for (receipt, now) in [
        (live, NOW + 1),
        (expired_lease, NOW + LEASE + 1),
        (ended(200), NOW + 200),
        (ended(500), NOW + 200),
    ] {
        assert_eq!(decide(Some(&receipt), &fp("b"), now), Decision::Mismatch);
    }
}

#[test]
fn a_live_lease_outlives_retention() {
    let mut receipt = receipt(DeliveryKind::Sync);
    receipt.begin_forward(1, 0, 10_000, 3_000);
    assert!(!receipt.is_expired(5_000));
    assert!(matches!(
        decide(Some(&receipt), &fp("a"), 5_000),
        Decision::InFlight { .. }
    ));
    assert!(!receipt.is_expired(9_999));
    assert!(receipt.is_expired(10_000));
}

#[test]
fn epochs_rise_within_a_life_and_across_lives() {
    assert_eq!(next_epoch(0, NOW), NOW * 1_000);
    assert_eq!(
        next_epoch(NOW * 1_000, NOW),
        NOW * 1_000 + 1,
        "the same millisecond"
    );
    assert_eq!(next_epoch(NOW * 1_000 + 7, NOW + 1), (NOW + 1) * 1_000);
    // A purge forgets the receipt: the next life starts from the clock,
    // above every epoch of the life before.
    let before_purge = next_epoch(next_epoch(0, NOW), NOW);
    assert!(next_epoch(0, NOW + 1) > before_purge);
    assert!(
        next_epoch(0, 4_102_444_800_000) < 1 << 53,
        "below 2^53 in 2100"
    );
    assert_eq!(next_epoch(u64::MAX, u64::MAX), u64::MAX, "never wraps");
}

#[test]
fn retryable_statuses_decide_the_outcome() {
    let default = RetryableStatuses::default();
    for status in [200, 201, 204, 301, 302, 400, 401, 402, 404, 409, 422] {
        assert!(default.completes(status), "{status}");
    }
    for status in [408, 425, 429, 500, 502, 503, 504, 599] {
        assert!(!default.completes(status), "{status}");
    }
    let strict = RetryableStatuses::parse("401, 404,408,425,429,500-599").unwrap();
    assert!(!strict.completes(401) && !strict.completes(404) && strict.completes(403));
    for bad in ["", "5xx", "99", "600", "500-499", "1-2-3"] {
        assert!(RetryableStatuses::parse(bad).is_err(), "{bad}");
    }
    let single = RetryableStatuses::parse("409-409").unwrap();
    assert!(!single.completes(409) && single.completes(408) && single.completes(410));
    let mut receipt = in_flight(NOW);
    let strict_policy = RecordPolicy {
        retryable: strict,
        ..policy()
    };
    assert_eq!(
        receipt.record(1, &answered(404), &strict_policy, NOW + 1),
        Ok(Recorded::Failed)
    );
    assert_eq!(receipt.state_name(), "failed");
}

#[test]
fn recording_an_answer_completes_or_fails() {
    assert_eq!(ended(200).state_name(), "completed");
    assert_eq!(ended(409).state_name(), "completed");
    assert_eq!(ended(429).state_name(), "failed");
    let mut receipt = in_flight(NOW);
    receipt
        .record(1, &ForwardResult::TimedOut, &policy(), NOW + 10)
        .unwrap();
    assert_eq!(receipt.state_name(), "failed");
    assert_eq!(receipt.attempts[0].error.as_deref(), Some("timeout"));
    assert_eq!(receipt.expires_at, NOW + 10 + RETENTION);
}

#[test]
fn set_cookie_is_never_stored() {
    let stored = ended(201).stored_response().unwrap().clone();
    assert_eq!(
        stored.response.headers,
        vec![("content-type".to_string(), "text/plain".to_string())]
    );
}

#[test]
fn a_late_answer_of_a_taken_over_forward_is_stale() {
    let mut receipt = in_flight(NOW);
    receipt.begin_forward(2, NOW + LEASE, LEASE, RETENTION);
    assert_eq!(receipt.attempts.len(), 2);
    let stale = receipt.record(1, &answered(200), &policy(), NOW + LEASE + 5);
    assert_eq!(stale, Err(Stale { current_epoch: 2 }));
    assert_eq!(receipt.state_name(), "in_flight");
    receipt
        .record(2, &answered(201), &policy(), NOW + LEASE + 6)
        .unwrap();
    assert_eq!(receipt.stored_response().unwrap().response.status, 201);
    assert_eq!(receipt.attempts[0].status, None);
    assert_eq!(receipt.attempts[1].status, Some(201));
}

#[test]
fn a_late_answer_from_before_a_purge_is_stale() {
    // The key was purged while epoch E was in flight, and is in flight
    // again: the new life's epoch is higher, so E no longer owns it.
    let old = next_epoch(0, NOW);
    let mut again = receipt(DeliveryKind::Sync);
    again.begin_forward(next_epoch(0, NOW + 500), NOW + 500, LEASE, RETENTION);
    assert!(again
        .record(old, &answered(500), &policy(), NOW + 600)
        .is_err());
    assert_eq!(again.state_name(), "in_flight");
}

#[test]
fn recording_twice_is_stale() {
    let mut receipt = ended(200);
    assert!(receipt
        .record(1, &answered(500), &policy(), NOW + 200)
        .is_err());
    assert_eq!(receipt.state_name(), "completed");
}

#[test]
fn large_bodies_are_not_stored() {
    let mut receipt = in_flight(NOW);
    let tight = RecordPolicy {
        max_stored_response_bytes: 1,
        ..policy()
    };
    receipt.record(1, &answered(200), &tight, NOW + 1).unwrap();
    let stored = receipt.stored_response().unwrap();
    assert!(!stored.body_stored);
    assert_eq!(stored.body_bytes, 2);
    assert!(stored.response.body.is_empty());
}

#[test]
fn attempts_are_bounded_and_history_kept_across_forwards() {
    let mut receipt = in_flight(0);
    receipt.duplicates = 7;
    for epoch in 2..=40 {
        receipt
            .record(epoch - 1, &answered(503), &policy(), epoch)
            .unwrap();
        receipt.begin_forward(epoch, epoch, LEASE, RETENTION);
    }
    assert_eq!(receipt.attempts.len(), MAX_ATTEMPTS_KEPT);
    assert_eq!(receipt.attempts.last().unwrap().epoch, 40);
    assert_eq!(receipt.duplicates, 7);
    assert_eq!(receipt.first_seen_at, NOW);
}

#[test]
fn async_failures_follow_the_schedule_then_die() {
    let mut receipt = receipt(DeliveryKind::Async);
    assert_eq!(receipt.deletable_at(), None, "queued: never deleted");
    assert_eq!(
        next_async_step(&receipt, NOW),
        AsyncStep::Attempt { takeover: false }
    );
    receipt.begin_forward(1, NOW, LEASE, RETENTION);
    assert_eq!(receipt.deletable_at(), None);
    assert_eq!(
        next_async_step(&receipt, NOW + 1),
        AsyncStep::WaitUntil(NOW + LEASE)
    );
    assert_eq!(
        receipt.record(1, &answered(503), &policy(), NOW + 10),
        Ok(Recorded::Retrying {
            at: NOW + 10 + 10_000
        })
    );
    assert_eq!(receipt.deletable_at(), None, "failed with a retry ahead");
    assert_eq!(
        next_async_step(&receipt, NOW + 10_009),
        AsyncStep::WaitUntil(NOW + 10_010)
    );
    assert_eq!(
        next_async_step(&receipt, NOW + 10_010),
        AsyncStep::Attempt { takeover: false }
    );
    receipt.begin_forward(2, NOW + 10_010, LEASE, RETENTION);
    assert_eq!(
        receipt.record(2, &ForwardResult::TimedOut, &policy(), NOW + 10_020),
        Ok(Recorded::Retrying {
            at: NOW + 10_020 + 60_000
        })
    );
    receipt.begin_forward(3, NOW + 70_020, LEASE, RETENTION);
    assert_eq!(
        receipt.record(3, &answered(500), &policy(), NOW + 70_030),
        Ok(Recorded::Dead)
    );
    assert_eq!(receipt.state_name(), "dead");
    assert_eq!(
        receipt.deletable_at(),
        Some(NOW + 70_030 + 10 * DAY_MS),
        "a dead letter is kept DEAD_RETENTION_SECONDS, not RETENTION_SECONDS"
    );
    receipt.queue(NOW + 80_000, NOW + 80_000);
    assert_eq!((receipt.state_name(), receipt.schedule_step), ("queued", 0));
}

/// An async receipt in flight at epoch 1, accepted with `terms`.
fn async_in_flight(terms: AsyncTerms) -> Receipt {
    let mut receipt = receipt(DeliveryKind::Async);
    receipt.terms = Some(terms);
    receipt.begin_forward(1, NOW, LEASE, RETENTION);
    receipt
}

#[test]
fn only_a_2xx_delivers_an_async_attempt() {
    // The sender's own signature may have gone stale by a retry, and an
    // origin that checks it answers 400: that must not end the delivery.
    for status in [400, 401, 404, 409, 422, 301, 304, 100] {
        let mut receipt = async_in_flight(terms());
        assert_eq!(
            receipt.record(1, &answered(status), &policy(), NOW + 1),
            Ok(Recorded::Retrying {
                at: NOW + 1 + 10_000
            }),
            "{status}"
        );
        assert!(receipt.is_pending(), "{status}");
    }
    for status in [200, 201, 202, 204, 299] {
        let mut receipt = async_in_flight(terms());
        assert_eq!(
            receipt.record(1, &answered(status), &policy(), NOW + 1),
            Ok(Recorded::Completed),
            "{status}"
        );
    }
}

#[test]
fn give_up_statuses_end_an_async_delivery_at_once() {
    let give_up = AsyncTerms {
        give_up: StatusSet::parse("410,451").unwrap(),
        ..terms()
    };
    let mut receipt = async_in_flight(give_up.clone());
    assert_eq!(
        receipt.record(1, &answered(410), &policy(), NOW + 1),
        Ok(Recorded::Dead)
    );
    assert_eq!(receipt.schedule_step, 0, "no retry was used");
    let mut other = async_in_flight(give_up);
    assert!(matches!(
        other.record(1, &answered(404), &policy(), NOW + 1),
        Ok(Recorded::Retrying { .. })
    ));
    let mut timed_out = async_in_flight(AsyncTerms {
        give_up: StatusSet::parse("500-599").unwrap(),
        ..terms()
    });
    assert!(
        matches!(
            timed_out.record(1, &ForwardResult::TimedOut, &policy(), NOW + 1),
            Ok(Recorded::Retrying { .. })
        ),
        "a timeout is never a status to give up on"
    );
}

#[test]
fn a_dead_letters_expiry_is_announced_a_day_before() {
    let mut receipt = async_in_flight(AsyncTerms {
        retry_schedule_ms: vec![],
        ..terms()
    });
    receipt.record(1, &answered(503), &policy(), NOW).unwrap();
    let expires_at = NOW + 10 * DAY_MS;
    assert_eq!(receipt.expires_at, expires_at);
    assert_eq!(receipt.expiry_warning_at(), Some(expires_at - DAY_MS));
    assert_eq!(receipt.next_wake(), expires_at - DAY_MS);
    assert_eq!(
        next_async_step(&receipt, expires_at - DAY_MS - 1),
        AsyncStep::WaitUntil(expires_at - DAY_MS)
    );
    assert_eq!(
        next_async_step(&receipt, expires_at - DAY_MS),
        AsyncStep::WarnExpiry
    );
    if let ReceiptState::Dead { expiry_warned, .. } = &mut receipt.state {
        *expiry_warned = true;
    }
    assert_eq!(receipt.next_wake(), expires_at);
    assert_eq!(
        next_async_step(&receipt, expires_at - 1),
        AsyncStep::WaitUntil(expires_at)
    );
    assert_eq!(next_async_step(&receipt, expires_at), AsyncStep::Expire);
    // Kept for one day: announced as it dies.
    let mut short = async_in_flight(AsyncTerms {
        retry_schedule_ms: vec![],
        dead_retention_ms: DAY_MS,
        ..terms()
    });
    short.record(1, &answered(503), &policy(), NOW).unwrap();
    assert!(matches!(
        short.state,
        ReceiptState::Dead {
            expiry_warned: true,
            ..
        }
    ));
    assert_eq!(short.next_wake(), NOW + DAY_MS);
}

#[test]
fn a_second_version_record_parses_and_is_marked_as_such() {
    let mut receipt = async_in_flight(terms());
    receipt.terms = None;
    let mut record: serde_json::Value = serde_json::to_value(&receipt).unwrap();
    record.as_object_mut().unwrap().remove("record_version");
    let parsed: Receipt = serde_json::from_value(record).unwrap();
    assert_eq!(parsed.record_version, 2);
    assert_eq!(parsed.terms, None);
    assert_eq!(
        serde_json::to_value(async_in_flight(terms())).unwrap()["record_version"],
        RECORD_VERSION
    );
}

#[test]
fn an_async_lease_left_by_a_crash_is_taken_over_by_the_alarm() {
    let mut receipt = receipt(DeliveryKind::Async);
    receipt.begin_forward(1, NOW, LEASE, RETENTION);
    assert_eq!(
        next_async_step(&receipt, NOW + LEASE),
        AsyncStep::Attempt { takeover: true }
    );
    assert!(
        !receipt.is_expired(u64::MAX),
        "an accepted delivery is never forgotten"
    );
}

#[test]
fn async_duplicates_share_the_acknowledgement() {
    let receipt = receipt(DeliveryKind::Async);
    assert_eq!(decide_async(None, &fp("a"), NOW), AsyncDecision::Accept);
    assert_eq!(
        decide_async(Some(&receipt), &fp("a"), NOW),
        AsyncDecision::Duplicate
    );
    assert_eq!(
        decide_async(Some(&receipt), &fp("b"), NOW),
        AsyncDecision::Mismatch
    );
}

#[test]
fn a_key_left_unfinished_by_a_sync_route_is_accepted_when_it_becomes_async() {
    let live = in_flight(NOW);
    assert_eq!(
        decide_async(Some(&live), &fp("a"), NOW + LEASE - 1),
        AsyncDecision::InFlight {
            lease_expires_at: NOW + LEASE
        },
        "its sync forward may yet fail: no acknowledgement"
    );
    assert_eq!(
        decide_async(Some(&live), &fp("a"), NOW + LEASE),
        AsyncDecision::Accept,
        "a forward cut short"
    );
    let failed = ended(503);
    assert_eq!(
        decide_async(Some(&failed), &fp("a"), NOW + 200),
        AsyncDecision::Accept
    );
    let completed = ended(201);
    assert_eq!(
        decide_async(Some(&completed), &fp("a"), NOW + 200),
        AsyncDecision::Duplicate,
        "the origin has it"
    );
    assert_eq!(
        decide_async(Some(&failed), &fp("b"), NOW + 200),
        AsyncDecision::Mismatch
    );
}

#[test]
fn jitter_stays_within_ten_percent() {
    let schedule = [10_000];
    let delays: Vec<u64> = (0..21)
        .map(|random| retry_delay(&schedule, 0, random).unwrap())
        .collect();
    assert_eq!(delays.iter().min(), Some(&9_000));
    assert_eq!(delays.iter().max(), Some(&11_000));
    assert_eq!(retry_delay(&schedule, 1, 0), None);
    assert_eq!(
        retry_delay(&[7 * 86_400_000], 0, u64::MAX),
        Some(7 * 86_400_000 * 105 / 100)
    );
}

#[test]
fn retry_after_rounds_up_to_whole_seconds() {
    assert_eq!(retry_after_secs(10_000, 8_500), 2);
    assert_eq!(retry_after_secs(10_000, 10_000), 1);
    assert_eq!(retry_after_secs(10_000, 20_000), 1);
}

#[test]
fn receipt_json_names_the_state_and_leaves_the_body_out() {
    let json = serde_json::to_value(ended(200)).unwrap();
    assert_eq!(json["state"], "completed");
    assert_eq!(json["response"]["status"], 200);
    assert_eq!(json["delivery"], "sync");
    assert!(json["response"].get("body").is_none());
    let back: Receipt = serde_json::from_value(json).unwrap();
    assert_eq!(back.epoch, 1);
}

/// The stored form, field for field, in every state: what earlier versions
/// wrote and still read (the record is a flat object, the state's name in
/// `state` and its fields beside it).
#[test]
fn the_stored_record_keeps_its_fields_in_every_state() {
    let response = StoredResponse::keep(
        &HttpResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{}".to_vec(),
        },
        1024,
    );
    let states = [
        (
            ReceiptState::Queued { next_attempt_at: 5 },
            serde_json::json!({"state": "queued", "next_attempt_at": 5}),
        ),
        (
            ReceiptState::InFlight {
                lease_expires_at: 6,
            },
            serde_json::json!({"state": "in_flight", "lease_expires_at": 6}),
        ),
        (
            ReceiptState::Completed {
                completed_at: 7,
                response,
            },
            serde_json::json!({"state": "completed", "completed_at": 7, "response": {
                "status": 201, "headers": [["content-type", "application/json"]],
                "body_bytes": 2, "body_stored": true}}),
        ),
        (
            ReceiptState::Failed {
                failed_at: 8,
                next_attempt_at: None,
            },
            serde_json::json!({"state": "failed", "failed_at": 8}),
        ),
        (
            ReceiptState::Failed {
                failed_at: 8,
                next_attempt_at: Some(9),
            },
            serde_json::json!({"state": "failed", "failed_at": 8, "next_attempt_at": 9}),
        ),
        (
            ReceiptState::Dead {
                dead_at: 10,
                expiry_warned: false,
                superseded: false,
            },
            serde_json::json!({"state": "dead", "dead_at": 10, "expiry_warned": false}),
        ),
    ];
    for (state, fields) in states {
        let mut receipt = receipt(DeliveryKind::Sync);
        receipt.identity = Identity {
            receipt_id: "r".into(),
            route: "default".into(),
            object: "o".into(),
            scope: "s".into(),
            key: "k".into(),
            path: None,
            tenant_sha256: None,
        };
        receipt.state = state;
        let mut expected = serde_json::json!({
            "record_version": RECORD_VERSION,
            "receipt_id": "r", "route": "default", "object": "o", "scope": "s", "key": "k",
            "delivery": "sync", "fingerprint": receipt.fingerprint.as_str(),
            "epoch": 0, "first_seen_at": NOW, "updated_at": NOW,
            "expires_at": NOW + RETENTION, "duplicates": 0, "attempts": [],
            "schedule_step": 0, "indexed": serde_json::to_value(&receipt.indexed).unwrap(),
        });
        for (name, value) in fields.as_object().unwrap() {
            expected[name] = value.clone();
        }
        let stored = serde_json::to_value(&receipt).unwrap();
        assert_eq!(stored, expected);
        let mut back: Receipt = serde_json::from_value(stored).unwrap();
        if let ReceiptState::Completed { response, .. } = &mut back.state {
            response.response.body = b"{}".to_vec();
        }
        assert_eq!(back, receipt);
    }
}

#[test]
fn a_record_is_read_only_with_a_key_and_a_fingerprint_that_are_valid() {
    let receipt = receipt(DeliveryKind::Sync);
    let stored = serde_json::to_value(&receipt).unwrap();
    assert_eq!(
        serde_json::from_value::<Receipt>(stored.clone()).unwrap(),
        receipt
    );
    for (field, value) in [
        ("key", "two words"),
        ("key", ""),
        ("fingerprint", "not-hex"),
    ] {
        let mut changed = stored.clone();
        changed[field] = value.into();
        assert!(
            serde_json::from_value::<Receipt>(changed).is_err(),
            "{field} = {value:?}"
        );
    }
}
