//! How the engine keeps the receipt's row in its index shard in step with
//! the receipt (see [`crate::index`]): each write is planned with the
//! receipt, carries a version above every earlier one of the object, and
//! is confirmed only once it landed, so a failed or lost write is made
//! again by the alarm within [`INDEX_REPAIR_MS`], by the next transition,
//! by a duplicate, or by the sweep's wake. An acceptance's row is written
//! after its acknowledgement ([`AfterAnswer`]).

use super::{Backend, Engine};

/// How soon the alarm writes again a row that did not land.
pub const INDEX_REPAIR_MS: u64 = 10_000;

/// An index write that follows an acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterAnswer {
    /// The row the acceptance planned.
    Write(Box<IndexUpdate>),
    /// The row a duplicate found unconfirmed: written as the receipt is.
    Reconcile(String),
}
use crate::decision_log::DecisionLog;
use crate::index::owed::RowReport;
use crate::index::shard::{shard_of, IndexPlace};
use crate::index::{update_for, IndexUpdate, IndexWrite, Indexed};
use crate::receipt::Receipt;

impl<B: Backend> Engine<B> {
    /// A version above every index write this object made, across its
    /// lives: the clock's microseconds, as epochs are.
    fn next_index_version(&self, now: u64) -> u64 {
        self.row_deferred.take();
        let version = crate::receipt::next_epoch(self.index_floor.get(), now);
        self.index_floor.set(version);
        version
    }

    /// The index write `receipt` now needs, if any. The receipt then says
    /// what the index will show, unconfirmed until the write lands: it is
    /// stored so, and a reload writes the row again rather than trust it.
    pub(super) fn plan_index(&self, receipt: &mut Receipt) -> Option<IndexUpdate> {
        if let Some(before) = self.row_deferred.take() {
            // The acceptance's row never left: the index still shows what
            // it showed before, and this write replaces that one.
            receipt.indexed = before;
            let mut kept = self.index_after_answer.borrow_mut();
            if matches!(*kept, Some(AfterAnswer::Write(_))) {
                *kept = None;
            }
        }
        self.plan_index_from(receipt, receipt.indexed.clone())
    }

    /// Holds back the acceptance's row, kept for after the answer, while
    /// the first attempt may make it moot; `before` is what the index
    /// showed before it (see [`Engine::after_answer`]).
    pub(super) fn defer_row(&self, before: Indexed) {
        *self.row_deferred.borrow_mut() = Some(before);
    }

    /// Whether the acceptance's row is held back.
    pub(super) fn row_deferred(&self) -> bool {
        self.row_deferred.borrow().is_some()
    }

    /// Lets the acceptance's row go as it was planned.
    pub(super) fn undefer_row(&self) {
        self.row_deferred.take();
    }

    fn plan_index_from(&self, receipt: &mut Receipt, shown: Indexed) -> Option<IndexUpdate> {
        let now = self.backend.now_ms();
        // The floor moves only with a write planned: a plan that writes
        // nothing must not make an earlier write look overtaken.
        let version = crate::receipt::next_epoch(self.index_floor.get(), now);
        let update = update_for(
            &receipt.identity.object,
            Some(receipt),
            &shown,
            version,
            now,
        )?;
        // Any write planned now shows more than the held-back row would.
        self.row_deferred.take();
        self.index_floor.set(version);
        let shard = self.shard_for(receipt.indexed.shard, &receipt.identity.object);
        *self.known_route.borrow_mut() = Some(receipt.identity.route.clone());
        receipt.indexed = Indexed {
            confirmed: false,
            shard: Some(shard),
            ..Indexed::after(&update)
        };
        Some(update)
    }

    /// Writes the index; whether it landed. A failure is logged; the row is
    /// written again later (the receipt says it is unconfirmed).
    pub(super) async fn write_index(&self, update: Option<IndexUpdate>) -> bool {
        let Some(mut update) = update else {
            return true;
        };
        let place = self.index_place(&update);
        let mut written = self.backend.index(update.clone(), &place).await;
        if let Ok(IndexWrite::Outdated { row_version }) = written {
            // The row holds a version this object never planned after this
            // write (one from before a restart or an earlier life, ahead of
            // a clock that stepped back): while this is still the last
            // write planned, it goes again above that version. A write
            // overtaken by this object's own later one is left lost.
            if update.version() == self.index_floor.get() {
                self.index_floor
                    .set(self.index_floor.get().max(row_version));
                update = update.at_version(self.next_index_version(self.backend.now_ms()));
                written = self.backend.index(update.clone(), &place).await;
            }
        }
        let landed = match written {
            Ok(IndexWrite::Landed) => true,
            // Lost to a later write of this object: that one says more.
            Ok(IndexWrite::Outdated { .. }) => update.version() != self.index_floor.get(),
            Err(_) => false,
        };
        // Only the write last planned confirms the receipt's row: an older
        // one (of an earlier life, say) may show the same state and wake,
        // and a later write may yet land over it, or have landed already.
        let last = update.version() == self.index_floor.get();
        if landed && last {
            let shown = Indexed::after(&update);
            let confirmed = self.with_receipt(|receipt| {
                receipt.as_mut().is_some_and(|receipt| {
                    let same = receipt.indexed.state == shown.state
                        && receipt.indexed.next_wake_at == shown.next_wake_at;
                    receipt.indexed.confirmed |= same;
                    receipt.indexed.confirmed
                })
            });
            if confirmed == Ok(true) && self.row_owed.replace(false) {
                self.report_row(&update, &place, true);
            }
        }
        if !landed {
            let mut line = DecisionLog::new("index_failed", 0);
            line.reason = Some("storage-unavailable");
            self.backend.emit(&line, true);
            // A write a later one of this object overtook is not owed:
            // that one says what the row shows.
            if last {
                self.report_row(&update, &place, false);
            }
            self.arm_index_repair().await;
        }
        landed
    }

    /// Tells health whether the receipt's row landed (see
    /// [`crate::index::owed`]); a row whose receipt is gone is nobody's.
    fn report_row(&self, update: &IndexUpdate, place: &IndexPlace, landed: bool) {
        let receipt_id = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .map(|receipt| receipt.identity.receipt_id.clone())
        });
        let Ok(Some(receipt_id)) = receipt_id else {
            return;
        };
        if !landed {
            self.row_owed.set(true);
        }
        let state = match update {
            IndexUpdate::Upsert(row) => row.state.clone(),
            IndexUpdate::Remove { .. } => crate::index::GONE.to_string(),
        };
        self.backend.report_row(RowReport {
            route: place.route.clone(),
            receipt_id,
            state,
            landed,
        });
    }

    /// The shard this object's row goes to: the one it is in, else the
    /// one `object` hashes to among the route's shards now.
    fn shard_for(&self, known: Option<u16>, object: &str) -> u16 {
        let shard = known
            .or(self.index_shard.get())
            .unwrap_or_else(|| shard_of(object, self.backend.index_shards()));
        self.index_shard.set(Some(shard));
        shard
    }

    /// Where `update` is written: its route (the row's, the receipt's, or
    /// the call's; an empty one when none is known, which no shard takes)
    /// and its shard.
    fn index_place(&self, update: &IndexUpdate) -> IndexPlace {
        let route = match update {
            IndexUpdate::Upsert(row) => Some(row.identity.route.clone()),
            IndexUpdate::Remove { .. } => None,
        }
        .or_else(|| {
            self.with_receipt(|receipt| {
                receipt
                    .as_ref()
                    .map(|receipt| receipt.identity.route.clone())
            })
            .ok()
            .flatten()
        })
        .or_else(|| self.known_route.borrow().clone())
        .unwrap_or_default();
        let shard = self.shard_for(None, update.object());
        IndexPlace { route, shard }
    }

    /// Brings the alarm within [`INDEX_REPAIR_MS`] while the receipt's row
    /// has not landed: the alarm writes it again (SPEC §2b, v5), however
    /// far the receipt's own next step is.
    async fn arm_index_repair(&self) {
        let now = self.backend.now_ms();
        let wake = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .filter(|receipt| !receipt.indexed.confirmed)
                .map(|receipt| receipt.next_wake())
        });
        if let Ok(Some(wake)) = wake {
            let armed = self
                .set_alarm(wake.min(now.saturating_add(INDEX_REPAIR_MS)))
                .await
                .is_ok();
            self.repair_unarmed.set(!armed);
        }
    }

    /// Whether the receipt's row has not landed and no alarm was set to
    /// write it again: the alarm handler then fails, so that the runtime
    /// runs it again (SPEC §2b, v5: the alarm is all that finds it).
    pub(super) fn repair_unarmed(&self) -> bool {
        let unconfirmed = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .is_some_and(|receipt| !receipt.indexed.confirmed)
        });
        self.repair_unarmed.get() && unconfirmed != Ok(false)
    }

    /// Keeps `write` for [`Engine::write_index_after_answer`].
    pub(super) fn write_after_answer(&self, write: AfterAnswer) {
        *self.index_after_answer.borrow_mut() = Some(write);
    }

    /// Whether an index write waits for the answer to leave.
    pub fn has_index_after_answer(&self) -> bool {
        self.index_after_answer.borrow().is_some() && !self.row_deferred()
    }

    /// The index write kept for after the answer, if any: whether it landed
    /// (a failure has moved the alarm near, which writes it again).
    pub async fn write_index_after_answer(&self) -> bool {
        // Held back, it is the first attempt's to write or drop.
        if self.row_deferred() {
            return true;
        }
        let write = self.index_after_answer.take();
        match write {
            None => true,
            Some(AfterAnswer::Write(update)) => self.write_index(Some(*update)).await,
            Some(AfterAnswer::Reconcile(object)) => self.reconcile_index(&object).await,
        }
    }

    /// Writes the row `receipt` needs whatever the receipt says the index
    /// shows: the sweep's wake, which finds rows that lag their receipt.
    /// With no receipt, `object`'s row is removed.
    pub(super) async fn reconcile_index(&self, object: &str) -> bool {
        let planned = self.with_receipt(|receipt| match receipt.as_mut() {
            Some(receipt) => {
                let stale = Indexed {
                    confirmed: false,
                    ..receipt.indexed.clone()
                };
                self.plan_index_from(receipt, stale)
            }
            None => {
                let now = self.backend.now_ms();
                Some(IndexUpdate::Remove {
                    object: object.to_string(),
                    version: self.next_index_version(now),
                    at: now,
                })
            }
        });
        match planned {
            Ok(update) => self.write_index(update).await,
            Err(_) => false,
        }
    }

    /// A removal of `object`'s row (a purge, an expiry).
    pub(super) fn planned_removal(&self, object: &str) -> IndexUpdate {
        let now = self.backend.now_ms();
        IndexUpdate::Remove {
            object: object.to_string(),
            version: self.next_index_version(now),
            at: now,
        }
    }
}
