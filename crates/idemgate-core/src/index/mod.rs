//! The receipt index (SPEC §7): a D1 table an operator lists receipts by
//! state from, without knowing their keys. The key's Durable Object stays
//! the truth; the index is written only on the transitions a listing
//! needs, so a happy sync delivery costs no index write:
//!
//! - a sync receipt is indexed when it fails, and leaves the index when it
//!   completes (a retry in flight keeps its `failed` row);
//! - an async receipt is indexed from acceptance (`queued`) through each
//!   attempt (`in_flight`, `failed`) to `dead`, and leaves the index when
//!   it completes: three writes for a delivery that succeeds at once.
//!
//! Rows are keyed by the Durable Object's name, so a purge removes its row
//! without reading (or being able to parse) the receipt.

use serde::{Deserialize, Serialize};

use crate::receipt::{DeliveryKind, Receipt, ReceiptState};

/// The migration the README's commands and the tests apply (`migrations/`).
pub const TABLE: &str = "receipts";

/// States an operator can list.
pub const LISTABLE_STATES: &[&str] = &["queued", "in_flight", "failed", "dead"];

/// Rows per page of a listing.
pub const PAGE_SIZE: u32 = 50;

/// One row: enough to read, purge or re-drive the receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexRow {
    pub object: String,
    pub route: String,
    pub scope: String,
    pub key: String,
    pub path: Option<String>,
    pub tenant_sha256: Option<String>,
    pub receipt_id: String,
    pub state: String,
    pub attempts: u64,
    pub last_status: Option<u16>,
    pub updated_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexUpdate {
    Upsert(IndexRow),
    Delete { object: String },
}

/// The state the index should show for `receipt` (`None`: no row).
/// `current` is what the row shows now.
pub fn wanted_state(receipt: Option<&Receipt>, current: Option<&str>) -> Option<String> {
    let receipt = receipt?;
    match (receipt.delivery, &receipt.state) {
        (_, ReceiptState::Completed { .. }) => None,
        (DeliveryKind::Async, state) => Some(state.name().to_string()),
        (DeliveryKind::Sync, ReceiptState::Failed { .. }) => Some("failed".into()),
        // A sync retry in flight keeps its failed row until it settles.
        (DeliveryKind::Sync, _) => current.map(str::to_string),
    }
}

/// The write that brings the index from `current` to what `receipt` needs,
/// if any. `object` names the row.
pub fn update_for(
    object: &str,
    receipt: Option<&Receipt>,
    current: Option<&str>,
) -> Option<IndexUpdate> {
    let wanted = wanted_state(receipt, current);
    match (wanted, current, receipt) {
        (None, None, _) => None,
        (None, Some(_), _) => Some(IndexUpdate::Delete {
            object: object.to_string(),
        }),
        (Some(state), Some(now), _) if state == now => None,
        (Some(state), _, Some(receipt)) => Some(IndexUpdate::Upsert(IndexRow {
            object: object.to_string(),
            route: receipt.identity.route.clone(),
            scope: receipt.identity.scope.clone(),
            key: receipt.identity.key.clone(),
            path: receipt.identity.path.clone(),
            tenant_sha256: receipt.identity.tenant_sha256.clone(),
            receipt_id: receipt.identity.receipt_id.clone(),
            state,
            attempts: receipt.attempts.len() as u64,
            last_status: receipt.last_status(),
            updated_at: receipt.updated_at,
        })),
        (Some(_), _, None) => None,
    }
}

/// A page boundary: rows after the last one shown, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub updated_at: u64,
    pub object: String,
}

impl Cursor {
    /// `<updated_at>.<object>`: opaque to callers, and printable.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.updated_at, self.object)
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let (at, object) = text.split_once('.')?;
        let valid = object.len() == 64 && object.bytes().all(|b| b.is_ascii_hexdigit());
        let updated_at = at.parse().ok()?;
        valid.then(|| Cursor {
            updated_at,
            object: object.to_string(),
        })
    }
}

/// The listing's query: rows of `route` in `state`, newest first, after
/// `cursor`. Parameters in order: route, state, then the cursor's two.
pub fn list_query(cursor: Option<&Cursor>) -> String {
    let after = if cursor.is_some() {
        " AND (updated_at < ?3 OR (updated_at = ?3 AND object < ?4))"
    } else {
        ""
    };
    format!(
        "SELECT object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, updated_at \
         FROM {TABLE} WHERE route = ?1 AND state = ?2{after} \
         ORDER BY updated_at DESC, object DESC LIMIT {PAGE_SIZE}"
    )
}

pub const UPSERT: &str = "INSERT INTO receipts \
     (object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, updated_at) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (object) DO UPDATE SET route = excluded.route, scope = excluded.scope, key = excluded.key, \
     path = excluded.path, tenant_sha256 = excluded.tenant_sha256, receipt_id = excluded.receipt_id, \
     state = excluded.state, attempts = excluded.attempts, last_status = excluded.last_status, \
     updated_at = excluded.updated_at";

pub const DELETE: &str = "DELETE FROM receipts WHERE object = ?1";

#[cfg(test)]
mod tests {
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

    /// Replays a receipt's life, counting the index writes it causes.
    fn writes(receipt: &mut Receipt, results: &[u16]) -> Vec<String> {
        let mut current: Option<String> = None;
        let mut log = Vec::new();
        let step = |receipt: &Receipt, current: &mut Option<String>, log: &mut Vec<String>| {
            match update_for("obj", Some(receipt), current.as_deref()) {
                Some(IndexUpdate::Upsert(row)) => {
                    log.push(format!("upsert {}", row.state));
                    *current = Some(row.state);
                }
                Some(IndexUpdate::Delete { .. }) => {
                    log.push("delete".into());
                    *current = None;
                }
                None => {}
            }
        };
        if receipt.delivery == DeliveryKind::Async {
            step(receipt, &mut current, &mut log);
        }
        for (epoch, code) in results.iter().enumerate() {
            receipt.begin_forward(epoch as u64 + 1, 0, 1_000, 60_000);
            step(receipt, &mut current, &mut log);
            receipt
                .record(epoch as u64 + 1, &status(*code), &policy(), 1)
                .unwrap();
            step(receipt, &mut current, &mut log);
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
            ["upsert failed", "delete"]
        );
    }

    #[test]
    fn an_async_delivery_is_listed_from_acceptance_to_completion() {
        assert_eq!(
            writes(&mut receipt(DeliveryKind::Async), &[201]),
            ["upsert queued", "upsert in_flight", "delete"]
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
    fn a_purge_deletes_the_row_without_the_receipt() {
        assert_eq!(
            update_for("obj", None, Some("dead")),
            Some(IndexUpdate::Delete {
                object: "obj".into()
            })
        );
        assert_eq!(update_for("obj", None, None), None);
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
        assert!(list_query(Some(&cursor)).contains("?4"));
        assert!(!list_query(None).contains("?3"));
    }
}
