//! The payments ledger: one SQLite database file, one payment per scope and
//! idempotency key (a UNIQUE constraint), and a fence per scope and key
//! holding the highest epoch accepted and the body hash of the first
//! request. All are checked in the same transaction as the insert, which is
//! what makes the origin safe when idemgate's lease on a key expired while
//! an older forward was still running, and keeps one tenant's (or path's)
//! key from ever answering another's.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::{json, Value};

pub struct Ledger {
    connection: Connection,
}

/// What a forward says of itself, verified (or trusted, without a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    pub scope: String,
    pub key: String,
    pub epoch: u64,
    pub body_sha256: String,
}

/// What a charge request came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Charge {
    /// A new payment; its response.
    Created(Value),
    /// The key was charged before: the first result, nothing charged again.
    Repeated(Value),
    /// A higher epoch of this key was already accepted: refused.
    StaleEpoch { highest: u64 },
    /// The key was first used with another body: refused.
    BodyMismatch,
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS fences (
        scope TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        highest_epoch INTEGER NOT NULL,
        body_sha256 TEXT NOT NULL,
        PRIMARY KEY (scope, idempotency_key)
    );
    CREATE TABLE IF NOT EXISTS payments (
        payment_id INTEGER PRIMARY KEY AUTOINCREMENT,
        scope TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        request TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (scope, idempotency_key)
    );";

impl Ledger {
    pub fn open(path: &Path) -> rusqlite::Result<Ledger> {
        Ledger::with(Connection::open(path)?)
    }

    #[cfg(test)]
    pub fn in_memory() -> rusqlite::Result<Ledger> {
        Ledger::with(Connection::open_in_memory()?)
    }

    fn with(connection: Connection) -> rusqlite::Result<Ledger> {
        connection.execute_batch(SCHEMA)?;
        Ok(Ledger { connection })
    }

    /// One forward of (scope, key) at `epoch` with a body of `body_sha256`.
    pub fn charge(&mut self, forward: &Forward, request: &Value) -> rusqlite::Result<Charge> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let fence: Option<(u64, String)> = transaction
            .query_row(
                "SELECT highest_epoch, body_sha256 FROM fences WHERE scope = ?1 AND idempotency_key = ?2",
                params![forward.scope, forward.key],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        match &fence {
            Some((highest, _)) if *highest > forward.epoch => {
                return Ok(Charge::StaleEpoch { highest: *highest })
            }
            Some((_, first_body)) if *first_body != forward.body_sha256 => {
                return Ok(Charge::BodyMismatch)
            }
            _ => {}
        }
        transaction.execute(
            "INSERT INTO fences (scope, idempotency_key, highest_epoch, body_sha256) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (scope, idempotency_key) DO UPDATE SET highest_epoch = excluded.highest_epoch",
            params![forward.scope, forward.key, forward.epoch, forward.body_sha256],
        )?;
        let earlier: Option<String> = transaction
            .query_row(
                "SELECT response FROM payments WHERE scope = ?1 AND idempotency_key = ?2",
                params![forward.scope, forward.key],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(response) = earlier {
            transaction.commit()?;
            return Ok(Charge::Repeated(
                serde_json::from_str(&response).unwrap_or(Value::Null),
            ));
        }
        transaction.execute(
            "INSERT INTO payments (scope, idempotency_key, epoch, request, response, created_at)
             VALUES (?1, ?2, ?3, ?4, '', ?5)",
            params![
                forward.scope,
                forward.key,
                forward.epoch,
                request.to_string(),
                unix_seconds()
            ],
        )?;
        let payment_id = transaction.last_insert_rowid();
        let response = json!({
            "payment_id": format!("pay_{payment_id}"),
            "amount": request.get("amount"),
            "currency": request.get("currency"),
            "idempotency_key": forward.key,
            "scope": forward.scope,
            "epoch": forward.epoch,
        });
        transaction.execute(
            "UPDATE payments SET response = ?1 WHERE payment_id = ?2",
            params![response.to_string(), payment_id],
        )?;
        transaction.commit()?;
        Ok(Charge::Created(response))
    }

    /// Every payment, oldest first.
    pub fn payments(&self) -> rusqlite::Result<Vec<Value>> {
        let mut statement = self
            .connection
            .prepare("SELECT response FROM payments ORDER BY payment_id")?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        rows.map(|row| row.map(|text| serde_json::from_str(&text).unwrap_or(Value::Null)))
            .collect()
    }
}

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(scope: &str, key: &str, epoch: u64, body: &str) -> Forward {
        Forward {
            scope: scope.into(),
            key: key.into(),
            epoch,
            body_sha256: body.into(),
        }
    }

    #[test]
    fn one_payment_per_scope_and_key_and_the_first_result_for_repeats() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({"amount": 1000, "currency": "eur"});
        let Charge::Created(first) = ledger
            .charge(&forward("a", "k1", 1, "h"), &request)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            ledger
                .charge(&forward("a", "k1", 2, "h"), &request)
                .unwrap(),
            Charge::Repeated(first.clone())
        );
        assert!(matches!(
            ledger
                .charge(&forward("a", "k2", 1, "h"), &request)
                .unwrap(),
            Charge::Created(_)
        ));
        // Another tenant's (or path's) scope with the same key is its own payment.
        let Charge::Created(other) = ledger
            .charge(&forward("b", "k1", 1, "h"), &request)
            .unwrap()
        else {
            panic!()
        };
        assert_ne!(other["payment_id"], first["payment_id"]);
        assert_eq!(ledger.payments().unwrap().len(), 3);
        assert_eq!(ledger.payments().unwrap()[0], first);
    }

    #[test]
    fn a_lower_epoch_than_one_accepted_is_refused() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({"amount": 5});
        assert!(matches!(
            ledger.charge(&forward("s", "k", 2, "h"), &request).unwrap(),
            Charge::Created(_)
        ));
        assert_eq!(
            ledger.charge(&forward("s", "k", 1, "h"), &request).unwrap(),
            Charge::StaleEpoch { highest: 2 }
        );
        assert!(matches!(
            ledger.charge(&forward("s", "k", 2, "h"), &request).unwrap(),
            Charge::Repeated(_)
        ));
        assert_eq!(ledger.payments().unwrap().len(), 1);
    }

    #[test]
    fn a_different_body_under_one_key_is_refused() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({});
        ledger
            .charge(&forward("s", "k", 1, "first"), &request)
            .unwrap();
        assert_eq!(
            ledger
                .charge(&forward("s", "k", 2, "second"), &request)
                .unwrap(),
            Charge::BodyMismatch
        );
        assert_eq!(ledger.payments().unwrap().len(), 1);
    }

    #[test]
    fn a_refused_stale_epoch_does_not_lower_the_fence() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({});
        ledger.charge(&forward("s", "k", 3, "h"), &request).unwrap();
        ledger.charge(&forward("s", "k", 1, "h"), &request).unwrap();
        assert_eq!(
            ledger.charge(&forward("s", "k", 2, "h"), &request).unwrap(),
            Charge::StaleEpoch { highest: 3 }
        );
    }
}
