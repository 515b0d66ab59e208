//! What the operator API and the edge ask of a key's receipt, beside its
//! deliveries: the duplicates an isolate absorbed, how long an answer may
//! be replayed from a cache, the receipt as shown, whether an act still
//! names its life, and the purge (SPEC §7).

use super::{Backend, Engine};
use crate::decision_log::DecisionLog;
use crate::problem::Problem;
use crate::receipt::Receipt;

impl<B: Backend> Engine<B> {
    /// Counts duplicates a gateway isolate answered on this key's behalf;
    /// kept in memory and written with the receipt's next write.
    pub fn absorb(&self, duplicates: u64) {
        let _ = self.with_receipt(|receipt| {
            if let Some(receipt) = receipt {
                receipt.duplicates += duplicates;
            }
        });
    }

    /// Until when the answer just given may be replayed from an isolate's
    /// cache: the receipt's expiry, when it is completed with its body kept.
    pub fn replayable_until(&self) -> Option<u64> {
        self.with_receipt(|receipt| {
            let receipt = receipt.as_ref()?;
            let stored = receipt.stored_response()?;
            stored.body_stored.then_some(receipt.expires_at)
        })
        .ok()
        .flatten()
    }

    /// The receipt as the operator API shows it, duplicates included.
    pub fn receipt(&self) -> Result<Option<Receipt>, String> {
        let now = self.backend.now_ms();
        self.with_receipt(|receipt| receipt.clone().filter(|r| !r.is_expired(now)))
    }

    /// Whether the key's receipt is the life `expected` names (when it
    /// names one): an operator act read from an older page, or from an
    /// index row, must not touch a newer life of the key (SPEC §7, v4).
    /// No receipt at all is left to the act itself (404).
    pub fn check_life(&self, expected: Option<&str>) -> Result<(), Problem> {
        let Some(expected) = expected else {
            return Ok(());
        };
        let current = self
            .with_receipt(|receipt| {
                receipt
                    .as_ref()
                    .map(|receipt| receipt.identity.receipt_id.clone())
            })
            .map_err(|message| Problem::StorageUnavailable { message })?;
        match current {
            Some(current) if current != expected => Err(Problem::ReceiptChanged),
            _ => Ok(()),
        }
    }

    /// Deletes everything the object stores (a receipt that no longer
    /// parses too); returns whether there was a receipt. A pending async
    /// delivery was acknowledged to its sender: purging it discards it, so
    /// it takes `force` (SPEC §7, v3), as does a receipt that cannot be
    /// read and may be one. `object` names the index row to remove.
    pub async fn purge(&self, object: &str, force: bool) -> Result<bool, Problem> {
        let storage = |message| Problem::StorageUnavailable { message };
        // The state of a pending delivery, if the object holds one.
        let pending = match self.with_receipt(|receipt| receipt.clone()) {
            Ok(receipt) => receipt
                .filter(Receipt::is_pending)
                .map(|receipt| receipt.state_name()),
            Err(_) => {
                *self.cache.borrow_mut() = None;
                // Unreadable, and nothing says it may go: it may be pending.
                match self.backend.stored_deletable_at().map_err(storage)? {
                    Some(_) => None,
                    None => Some("unreadable"),
                }
            }
        };
        if let (Some(state), false) = (pending, force) {
            return Err(Problem::PendingDelivery {
                state: state.to_string(),
            });
        }
        let known = self.cache.borrow().clone().flatten();
        if let Some(receipt) = known.as_ref().filter(|receipt| receipt.is_pending()) {
            // Read before the request is deleted with the rest.
            self.leave_order(receipt).await;
        }
        let existed = self.backend.delete_all().await.map_err(storage)?;
        *self.cache.borrow_mut() = Some(None);
        self.alarm_known.set(false);
        if existed {
            self.write_index(Some(self.planned_removal(object))).await;
            let mut line = DecisionLog::new("purged", 0);
            if let Some(receipt) = known {
                line.route = Some(receipt.identity.route);
                line.scope = Some(receipt.identity.scope);
                line.receipt_id = Some(receipt.identity.receipt_id);
                line.epoch = Some(receipt.epoch);
            }
            self.backend.emit(&line, true);
        }
        Ok(existed)
    }
}
