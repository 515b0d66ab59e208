//! Which writes a receipt's life makes, and what SQLite (D1's engine)
//! keeps of them when they land late, twice or out of order.

use rusqlite::{params, Connection};

use super::sql;
use super::*;
use crate::canonical::Fingerprint;
use crate::receipt::{
    AsyncTerms, ForwardResult, HttpResponse, Identity, RecordPolicy, RetryableStatuses,
};

fn receipt(delivery: DeliveryKind) -> Receipt {
    let mut receipt = Receipt::new(
        Identity {
            receipt_id: "r".into(),
            route: "stripe".into(),
            object: "obj".into(),
            scope: "s".into(),
            key: "evt_1".into(),
            path: None,
            tenant_sha256: None,
        },
        Fingerprint::of_bytes(b"a"),
        delivery,
        ReceiptState::Queued { next_attempt_at: 0 },
        0,
        60_000,
    );
    receipt.terms = (delivery == DeliveryKind::Async).then(|| AsyncTerms {
        retry_schedule_ms: vec![1_000],
        ..AsyncTerms::default()
    });
    receipt
}

fn status(status: u16) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status,
        headers: vec![],
        body: vec![],
    })
}

fn policy() -> RecordPolicy {
    RecordPolicy {
        retryable: RetryableStatuses::default(),
        retention_ms: 60_000,
        max_stored_response_bytes: 0,
        random: 10,
    }
}

/// Replays a receipt's life, naming the index writes it causes.
fn writes(receipt: &mut Receipt, results: &[u16]) -> Vec<String> {
    let mut current = Indexed::default();
    let mut version = 0;
    let mut log = Vec::new();
    let mut step = |receipt: &Receipt, log: &mut Vec<String>| {
        version += 1;
        if let Some(update) = update_for("obj", Some(receipt), &current, version, 0) {
            log.push(match &update {
                IndexUpdate::Upsert(row) => format!("upsert {}", row.state),
                IndexUpdate::Remove { .. } => "remove".into(),
            });
            current = Indexed::after(&update);
        }
    };
    if receipt.delivery == DeliveryKind::Async {
        step(receipt, &mut log);
    }
    for (epoch, code) in results.iter().enumerate() {
        receipt.begin_forward(epoch as u64 + 1, 0, 1_000, 60_000);
        step(receipt, &mut log);
        receipt
            .record(epoch as u64 + 1, &status(*code), &policy(), 1)
            .unwrap();
        step(receipt, &mut log);
    }
    log
}

#[test]
fn a_happy_sync_delivery_writes_nothing() {
    assert!(writes(&mut receipt(DeliveryKind::Sync), &[201]).is_empty());
}

#[test]
fn a_failed_sync_receipt_is_listed_until_it_completes() {
    assert_eq!(
        writes(&mut receipt(DeliveryKind::Sync), &[503, 503, 201]),
        ["upsert failed", "remove"]
    );
}

#[test]
fn an_async_delivery_is_listed_from_acceptance_to_completion() {
    assert_eq!(
        writes(&mut receipt(DeliveryKind::Async), &[201]),
        ["upsert queued", "upsert in_flight", "remove"]
    );
    assert_eq!(
        writes(&mut receipt(DeliveryKind::Async), &[503, 503]),
        [
            "upsert queued",
            "upsert in_flight",
            "upsert failed",
            "upsert in_flight",
            "upsert dead"
        ]
    );
}

#[test]
fn rows_say_when_their_object_next_has_work() {
    let mut queued = receipt(DeliveryKind::Async);
    queued.queue(5_000, 0);
    let Some(IndexUpdate::Upsert(row)) =
        update_for("obj", Some(&queued), &Indexed::default(), 1, 0)
    else {
        panic!()
    };
    assert_eq!(row.next_wake_at, Some(5_000));
    assert_eq!(row.version, 1);
    // The same state with a later wake (a dead letter's warning passed) is
    // written again, or the sweep would wake it every minute.
    let shown = Indexed::after(&IndexUpdate::Upsert(row));
    assert_eq!(update_for("obj", Some(&queued), &shown, 2, 0), None);
    queued.queue(9_000, 0);
    assert!(update_for("obj", Some(&queued), &shown, 2, 0).is_some());
}

#[test]
fn an_unconfirmed_row_is_written_again() {
    let queued = receipt(DeliveryKind::Async);
    let unknown = Indexed {
        confirmed: false,
        ..Indexed::after(&update_for("obj", Some(&queued), &Indexed::default(), 1, 0).unwrap())
    };
    assert!(update_for("obj", Some(&queued), &unknown, 2, 0).is_some());
    let gone_unknown = Indexed {
        state: None,
        next_wake_at: None,
        confirmed: false,
        shard: None,
    };
    assert!(
        matches!(
            update_for("obj", None, &gone_unknown, 3, 7),
            Some(IndexUpdate::Remove {
                version: 3,
                at: 7,
                ..
            })
        ),
        "a failed removal is retried"
    );
}

#[test]
fn a_purge_removes_the_row_without_the_receipt() {
    let dead = Indexed {
        state: Some("dead".into()),
        next_wake_at: Some(1),
        confirmed: true,
        shard: None,
    };
    assert_eq!(
        update_for("obj", None, &dead, 9, 100),
        Some(IndexUpdate::Remove {
            object: "obj".into(),
            version: 9,
            at: 100,
        })
    );
    assert_eq!(update_for("obj", None, &Indexed::default(), 9, 100), None);
}

#[test]
fn second_version_receipts_index_state_is_written_again() {
    #[derive(serde::Deserialize)]
    struct Holder {
        #[serde(default, deserialize_with = "Indexed::read_stored")]
        indexed: Indexed,
    }
    let read = |json: &str| serde_json::from_str::<Holder>(json).unwrap().indexed;
    assert_eq!(read("{}"), Indexed::default());
    let v2 = read(r#"{"indexed":"dead"}"#);
    assert_eq!(v2.state.as_deref(), Some("dead"));
    assert!(!v2.confirmed);
    let v3 = read(r#"{"indexed":{"state":"failed","next_wake_at":5}}"#);
    assert_eq!(v3.next_wake_at, Some(5));
    assert!(v3.confirmed);
}

#[test]
fn cursors_round_trip_and_refuse_garbage() {
    let cursor = Cursor {
        updated_at: 1_700_000_000_000,
        object: "a".repeat(64),
    };
    assert_eq!(Cursor::decode(&cursor.encode()), Some(cursor.clone()));
    for bad in ["", "x.y", "1.abc", &format!("x.{}", "a".repeat(64))] {
        assert_eq!(Cursor::decode(bad), None, "{bad}");
    }
}

/// A SQLite database with the index's schema, as the migrations make it.
fn database() -> Connection {
    let connection = Connection::open_in_memory().unwrap();
    for statement in sql::schema() {
        connection.execute(&statement, []).unwrap();
    }
    connection
}

fn apply(connection: &Connection, update: &IndexUpdate) {
    let (statement, params) = sql::write_of(update);
    connection
        .execute(statement, rusqlite::params_from_iter(params))
        .unwrap();
}

fn shown(connection: &Connection) -> Option<(String, i64)> {
    connection
        .query_row(
            "SELECT state, version FROM receipt_index WHERE object = 'obj'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .ok()
}

fn row(state: &str, version: u64) -> IndexUpdate {
    let mut receipt = receipt(DeliveryKind::Async);
    receipt.queue(10, 0);
    let Some(IndexUpdate::Upsert(mut row)) =
        update_for("obj", Some(&receipt), &Indexed::default(), version, 0)
    else {
        panic!()
    };
    row.state = state.into();
    IndexUpdate::Upsert(row)
}

#[test]
fn a_late_write_never_brings_back_an_older_state_or_a_removed_row() {
    let db = database();
    let remove = IndexUpdate::Remove {
        object: "obj".into(),
        version: 3,
        at: 50,
    };
    apply(&db, &row("queued", 1));
    apply(&db, &row("in_flight", 2));
    apply(&db, &remove);
    assert_eq!(shown(&db), Some(("gone".into(), 3)));
    // The queued upsert that was slow, landing after the removal.
    apply(&db, &row("queued", 1));
    apply(&db, &row("in_flight", 2));
    assert_eq!(shown(&db), Some(("gone".into(), 3)), "no ghost row");
    // A new life of the key writes at a higher version.
    apply(&db, &row("queued", 4));
    assert_eq!(shown(&db), Some(("queued".into(), 4)));
    // Out of order within a life: the newer state stays.
    apply(&db, &row("failed", 6));
    apply(&db, &row("in_flight", 5));
    assert_eq!(shown(&db), Some(("failed".into(), 6)));
    // A removal that arrives first still wins over the older upsert.
    let other = database();
    apply(&other, &remove);
    apply(&other, &row("dead", 2));
    assert_eq!(shown(&other), Some(("gone".into(), 3)));
}

#[test]
fn the_sweep_finds_overdue_rows_but_no_tombstone_and_forgets_old_tombstones() {
    let db = database();
    apply(&db, &row("queued", 1));
    let overdue = |before: i64| -> Vec<String> {
        let mut statement = db.prepare(sql::OVERDUE).unwrap();
        statement
            .query_map(params![before, 100], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(overdue(9), Vec::<String>::new(), "due at 10");
    assert_eq!(overdue(10), ["obj"]);
    apply(
        &db,
        &IndexUpdate::Remove {
            object: "obj".into(),
            version: 2,
            at: 50,
        },
    );
    assert_eq!(overdue(1_000), Vec::<String>::new());
    db.execute(sql::FORGET_TOMBSTONES, params![50]).unwrap();
    assert!(shown(&db).is_some(), "not older than the bound");
    db.execute(sql::FORGET_TOMBSTONES, params![51]).unwrap();
    assert!(shown(&db).is_none());
}

/// The sweep backs off a row whose wake failed, unless its object wrote
/// the row since (a higher version): then the object's row stands.
#[test]
fn the_sweep_backs_off_a_failed_row_only_as_it_read_it() {
    let db = database();
    apply(&db, &row("queued", 1));
    let wake_of = || -> Option<i64> {
        db.query_row(
            "SELECT next_wake_at FROM receipt_index WHERE object = 'obj'",
            [],
            |row| row.get(0),
        )
        .unwrap()
    };
    assert_eq!(wake_of(), Some(10));
    db.execute(sql::BACK_OFF, params!["obj", 500, 1]).unwrap();
    assert_eq!(wake_of(), Some(500), "backed off as read at version 1");
    apply(&db, &row("queued", 2));
    db.execute(sql::BACK_OFF, params!["obj", 900, 1]).unwrap();
    assert_eq!(wake_of(), Some(10), "the object wrote it since: kept");
}

#[test]
fn the_schema_runs_twice_and_keeps_second_version_rows() {
    let db = database();
    db.execute(
        "INSERT INTO receipts (object, route, scope, key, receipt_id, state, attempts, updated_at) \
         VALUES ('v2', 'stripe', 's', 'evt', 'r', 'dead', 3, 77)",
        [],
    )
    .unwrap();
    for statement in sql::schema() {
        db.execute(&statement, []).unwrap();
    }
    let copied: (String, i64, i64) = db
        .query_row(
            "SELECT state, next_wake_at, version FROM receipt_index WHERE object = 'v2'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        copied,
        ("dead".into(), 77, 0),
        "due at once, below any write"
    );
    let summary: Vec<(String, String, i64)> = db
        .prepare(sql::SUMMARY)
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(summary, [("stripe".into(), "dead".into(), 1)]);
}
