//! Receipts whose index row has not landed (SPEC §2b, v5): what health
//! counts and names. A key's object says so when a write of its row
//! fails, again at each failed repair (its alarm, every
//! [`INDEX_REPAIR_MS`]), and that it landed once it has. The register
//! forgets a receipt not heard of for [`OWED_FORGOTTEN_AFTER_MS`], so a
//! lost word, or an object that restarted between the failure and the
//! landing, leaves nothing behind for long; and it lives in memory, filled
//! again within one repair's time after its object restarts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::engine::INDEX_REPAIR_MS;

/// How long a receipt stays counted after its object last said its row
/// had not landed: several repairs' time, so one lost word is not enough
/// to drop it.
pub const OWED_FORGOTTEN_AFTER_MS: u64 = 6 * INDEX_REPAIR_MS;
/// Receipts the register names at most; past it they are counted.
pub const OWED_NAMED: usize = 10_000;

/// A key's object's word on its receipt's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowReport {
    pub route: String,
    pub receipt_id: String,
    /// The state the row should show.
    pub state: String,
    /// Whether it landed (else: a write of it failed).
    pub landed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedRow {
    pub route: String,
    pub receipt_id: String,
    pub state: String,
    /// When its object first said so (ms).
    pub since: u64,
    #[serde(skip)]
    heard_at: u64,
}

/// What health shows: how many rows are owed, and the oldest few by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwedView {
    pub count: usize,
    /// More were reported than the register names: `count` is a floor.
    pub at_least: bool,
    pub receipts: Vec<OwedRow>,
}

/// One route's owed rows, by receipt id.
#[derive(Debug, Default)]
pub struct OwedRows {
    rows: BTreeMap<String, OwedRow>,
    overflowed_at: Option<u64>,
}

impl OwedRows {
    pub fn report(&mut self, reports: &[RowReport], now: u64) {
        self.forget_old(now);
        for report in reports {
            if report.landed {
                self.rows.remove(&report.receipt_id);
                continue;
            }
            if let Some(row) = self.rows.get_mut(&report.receipt_id) {
                row.state.clone_from(&report.state);
                row.heard_at = now;
                continue;
            }
            if self.rows.len() >= OWED_NAMED {
                self.overflowed_at = Some(now);
                continue;
            }
            self.rows.insert(
                report.receipt_id.clone(),
                OwedRow {
                    route: report.route.clone(),
                    receipt_id: report.receipt_id.clone(),
                    state: report.state.clone(),
                    since: now,
                    heard_at: now,
                },
            );
        }
    }

    /// The count, and the `named` oldest.
    pub fn view(&mut self, now: u64, named: usize) -> OwedView {
        self.forget_old(now);
        let mut receipts: Vec<OwedRow> = self.rows.values().cloned().collect();
        receipts.sort_by(|a, b| (a.since, &a.receipt_id).cmp(&(b.since, &b.receipt_id)));
        receipts.truncate(named);
        OwedView {
            count: self.rows.len(),
            at_least: self.overflowed_at.is_some(),
            receipts,
        }
    }

    fn forget_old(&mut self, now: u64) {
        let horizon = now.saturating_sub(OWED_FORGOTTEN_AFTER_MS);
        self.rows.retain(|_, row| row.heard_at > horizon);
        if self.overflowed_at.is_some_and(|at| at <= horizon) {
            self.overflowed_at = None;
        }
    }
}

impl OwedView {
    /// Several routes' views as one: counts summed, the `named` oldest.
    pub fn merge(views: impl IntoIterator<Item = OwedView>, named: usize) -> OwedView {
        let mut merged = OwedView {
            count: 0,
            at_least: false,
            receipts: Vec::new(),
        };
        for view in views {
            merged.count += view.count;
            merged.at_least |= view.at_least;
            merged.receipts.extend(view.receipts);
        }
        merged
            .receipts
            .sort_by(|a, b| (a.since, &a.receipt_id).cmp(&(b.since, &b.receipt_id)));
        merged.receipts.truncate(named);
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str, landed: bool) -> RowReport {
        RowReport {
            route: "default".into(),
            receipt_id: id.into(),
            state: "failed".into(),
            landed,
        }
    }

    #[test]
    fn a_row_is_counted_from_its_failure_until_it_lands() {
        let mut owed = OwedRows::default();
        owed.report(&[report("r1", false), report("r2", false)], 1_000);
        owed.report(&[report("r1", false)], 5_000);
        let view = owed.view(5_000, 10);
        assert_eq!(view.count, 2);
        assert_eq!(view.receipts[0].since, 1_000, "first said, not last");
        owed.report(&[report("r1", true)], 6_000);
        let view = owed.view(6_000, 10);
        assert_eq!(view.count, 1);
        assert_eq!(view.receipts[0].receipt_id, "r2");
    }

    #[test]
    fn a_receipt_not_heard_of_again_is_forgotten() {
        let mut owed = OwedRows::default();
        owed.report(&[report("r1", false), report("r2", false)], 1_000);
        // r1's object repairs (and fails) every 10 s; r2's went quiet.
        let mut now = 1_000;
        while now < 1_000 + OWED_FORGOTTEN_AFTER_MS {
            now += INDEX_REPAIR_MS;
            owed.report(&[report("r1", false)], now);
        }
        let view = owed.view(now, 10);
        assert_eq!(view.count, 1);
        assert_eq!(view.receipts[0].receipt_id, "r1");
    }

    #[test]
    fn past_its_bound_the_register_counts_a_floor() {
        let mut owed = OwedRows::default();
        let reports: Vec<RowReport> = (0..=OWED_NAMED)
            .map(|n| report(&format!("r{n}"), false))
            .collect();
        owed.report(&reports, 1_000);
        let view = owed.view(1_000, 3);
        assert_eq!((view.count, view.at_least), (OWED_NAMED, true));
        assert_eq!(view.receipts.len(), 3);
    }

    #[test]
    fn routes_merge_oldest_first() {
        let mut one = OwedRows::default();
        one.report(&[report("late", false)], 2_000);
        let mut two = OwedRows::default();
        two.report(&[report("early", false)], 1_000);
        let merged = OwedView::merge([one.view(2_000, 5), two.view(2_000, 5)], 1);
        assert_eq!(merged.count, 2);
        assert_eq!(merged.receipts[0].receipt_id, "early");
    }
}
