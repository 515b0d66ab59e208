//! The sweep (SPEC §2b, v3; §15, v5): no alarm is ever the only thing
//! standing between an acknowledged delivery whose index row has landed
//! and its delivery. Each index shard runs it from its own alarm, set at
//! the earliest wake its rows wait for plus [`GRACE_MS`]: it reads the
//! shard's rows for objects whose next step is overdue and wakes each
//! ([`crate::engine::Engine::wake`]), which runs that step itself and puts
//! its index row right. Waking twice does nothing twice, so overlapping
//! runs are harmless. A receipt whose row has not landed is outside the
//! sweep: its own alarm writes the row until it does.
//!
//! A run stays within one alarm invocation's subrequest limit: one query
//! of the shard's table, at most [`Sweep::limit`] (`SWEEP_LIMIT`) wakes, one
//! tombstone cleanup; while its page was full, the shard's alarm runs
//! again a second later. The default of 40 wakes fits the free plan's 50
//! subrequests per invocation; on the Paid plan `SWEEP_LIMIT` may go to
//! 900. A row whose wake failed is backed off ([`retry_wake_at`]). After
//! an upgrade from a D1 index, the Cron Trigger moves at most
//! `SWEEP_LIMIT` of its rows into the shards a minute, by waking their
//! objects (each writes its row into its shard).

/// Work due this long ago is overdue: an alarm normally does it within a
/// second, and the sweep need not race it.
pub const GRACE_MS: u64 = 10_000;

/// A tombstone is dropped once no write still in flight can be older:
/// index writes are made within a request, which lasts minutes at most.
pub const TOMBSTONE_TTL_MS: u64 = 3_600_000;

/// `SWEEP_LIMIT`'s default and bounds.
pub const DEFAULT_LIMIT: u32 = 40;
pub const MAX_LIMIT: u32 = 900;

/// Wakes sent at once: each may hold an origin's answer for up to its
/// timeout, and a run has minutes, not hours.
pub const WAKES_AT_ONCE: usize = 8;

/// How long a row whose wake failed waits before the sweep tries it
/// again: at least a minute, at most a day.
pub const MIN_RETRY_MS: u64 = 60_000;
pub const MAX_RETRY_MS: u64 = 86_400_000;

/// When the sweep next tries a row whose wake failed at `now`: a quarter
/// of the time since its object last wrote the row (`updated_at`) later,
/// between a minute and a day. The sweep takes the oldest rows first, so
/// a row that fails every time (a receipt nothing can read, whose object
/// never writes its row again) would otherwise take a place in every
/// run's page for ever, and `SWEEP_LIMIT` of them would starve every
/// other lost alarm; backed off, it goes further back with each failure,
/// while a row its object just wrote (a re-drive, say) that fails once is
/// tried again within minutes.
pub fn retry_wake_at(now: u64, updated_at: u64) -> u64 {
    let age = now.saturating_sub(updated_at);
    now.saturating_add((age / 4).clamp(MIN_RETRY_MS, MAX_RETRY_MS))
}

/// One run's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// Rows whose `next_wake_at` is at or before this are overdue.
    pub overdue_before: u64,
    /// At most this many objects are woken.
    pub limit: u32,
    /// Tombstones written before this are forgotten.
    pub forget_tombstones_before: u64,
}

impl Sweep {
    /// The run at `now` (ms), waking at most `limit` objects.
    pub fn at(now: u64, limit: u32) -> Sweep {
        Sweep {
            overdue_before: now.saturating_sub(GRACE_MS),
            limit,
            forget_tombstones_before: now.saturating_sub(TOMBSTONE_TTL_MS),
        }
    }
}

/// What a run did, for its log line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SweepReport {
    /// Overdue rows found (at most the limit).
    pub overdue: usize,
    /// Objects woken that answered.
    pub woken: usize,
    /// Wakes that failed (the next run tries again).
    pub failed: usize,
    /// Whether the page was full: more may be overdue than one run wakes.
    pub backlog: bool,
}

impl SweepReport {
    pub fn of(overdue: usize, woken: usize, limit: u32) -> SweepReport {
        SweepReport {
            overdue,
            woken,
            failed: overdue.saturating_sub(woken),
            backlog: overdue >= limit as usize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_wakes_work_overdue_by_the_grace_and_forgets_old_tombstones() {
        let sweep = Sweep::at(1_000_000_000, 40);
        assert_eq!(sweep.overdue_before, 1_000_000_000 - 10_000);
        assert_eq!(sweep.forget_tombstones_before, 1_000_000_000 - 3_600_000);
        assert_eq!(sweep.limit, 40);
        assert_eq!(Sweep::at(5, 1).overdue_before, 0, "no underflow");
    }

    /// The review's case (round 4, item 4): a row that always fails to
    /// wake moves back, further each time, so it never holds a place in
    /// every run's page.
    #[test]
    fn a_row_that_fails_to_wake_is_tried_later_the_older_it_is() {
        let now = 10 * 86_400_000;
        assert_eq!(retry_wake_at(now, now - 1_000), now + MIN_RETRY_MS);
        assert_eq!(retry_wake_at(now, now - 3_600_000), now + 900_000);
        assert_eq!(retry_wake_at(now, 0), now + MAX_RETRY_MS);
        // Each failure pushes it past every row due before it: retried at
        // a later time than the run that failed it would look at again.
        let mut due = now;
        for _ in 0..5 {
            let next = retry_wake_at(due, 0);
            assert!(next > due + GRACE_MS);
            due = next;
        }
    }

    #[test]
    fn a_full_page_says_there_is_a_backlog() {
        assert_eq!(
            SweepReport::of(40, 38, 40),
            SweepReport {
                overdue: 40,
                woken: 38,
                failed: 2,
                backlog: true
            }
        );
        assert!(!SweepReport::of(3, 3, 40).backlog);
    }
}
