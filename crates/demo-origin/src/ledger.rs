//! The payments ledger: one SQLite database file, one payment per
//! idempotency key (a UNIQUE constraint), and a fence per key holding the
//! highest epoch accepted. Both are checked in the same transaction as the
//! insert, which is what makes the origin safe when idemgate's lease on a
//! key expired while an older forward was still running.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use serde_json::{json, Value};

pub struct Ledger {
    connection: Connection,
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
}

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS fences (
        idempotency_key TEXT PRIMARY KEY,
        highest_epoch INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS payments (
        payment_id INTEGER PRIMARY KEY AUTOINCREMENT,
        idempotency_key TEXT NOT NULL UNIQUE,
        epoch INTEGER NOT NULL,
        request TEXT NOT NULL,
        response TEXT NOT NULL,
        created_at INTEGER NOT NULL
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

    pub fn charge(&mut self, key: &str, epoch: u64, request: &Value) -> rusqlite::Result<Charge> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let highest: Option<u64> = transaction
            .query_row(
                "SELECT highest_epoch FROM fences WHERE idempotency_key = ?1",
                [key],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(highest) = highest.filter(|highest| *highest > epoch) {
            return Ok(Charge::StaleEpoch { highest });
        }
        transaction.execute(
            "INSERT INTO fences (idempotency_key, highest_epoch) VALUES (?1, ?2)
             ON CONFLICT (idempotency_key) DO UPDATE SET highest_epoch = excluded.highest_epoch",
            params![key, epoch],
        )?;
        let earlier: Option<String> = transaction
            .query_row(
                "SELECT response FROM payments WHERE idempotency_key = ?1",
                [key],
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
            "INSERT INTO payments (idempotency_key, epoch, request, response, created_at)
             VALUES (?1, ?2, ?3, '', ?4)",
            params![key, epoch, request.to_string(), unix_seconds()],
        )?;
        let payment_id = transaction.last_insert_rowid();
        let response = json!({
            "payment_id": format!("pay_{payment_id}"),
            "amount": request.get("amount"),
            "currency": request.get("currency"),
            "idempotency_key": key,
            "epoch": epoch,
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

    #[test]
    fn one_payment_per_key_and_the_first_result_for_repeats() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({"amount": 1000, "currency": "eur"});
        let Charge::Created(first) = ledger.charge("k1", 1, &request).unwrap() else {
            panic!()
        };
        assert_eq!(
            ledger.charge("k1", 2, &request).unwrap(),
            Charge::Repeated(first.clone())
        );
        assert!(matches!(
            ledger.charge("k2", 1, &request).unwrap(),
            Charge::Created(_)
        ));
        assert_eq!(ledger.payments().unwrap().len(), 2);
        assert_eq!(ledger.payments().unwrap()[0], first);
    }

    #[test]
    fn a_lower_epoch_than_one_accepted_is_refused() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({"amount": 5});
        assert!(matches!(
            ledger.charge("k", 2, &request).unwrap(),
            Charge::Created(_)
        ));
        assert_eq!(
            ledger.charge("k", 1, &request).unwrap(),
            Charge::StaleEpoch { highest: 2 }
        );
        assert!(matches!(
            ledger.charge("k", 2, &request).unwrap(),
            Charge::Repeated(_)
        ));
        assert_eq!(ledger.payments().unwrap().len(), 1);
    }

    #[test]
    fn a_refused_stale_epoch_does_not_lower_the_fence() {
        let mut ledger = Ledger::in_memory().unwrap();
        let request = json!({});
        ledger.charge("k", 3, &request).unwrap();
        ledger.charge("k", 1, &request).unwrap();
        assert_eq!(
            ledger.charge("k", 2, &request).unwrap(),
            Charge::StaleEpoch { highest: 3 }
        );
    }
}
