//! One entity's book: the deliveries waiting for their turn, the turn (a
//! lease held by one delivery's object), and the newest time the origin
//! has accepted. Pure: the Worker's order object feeds it calls and the
//! time, stores it whole after each change (one small row), sets its
//! alarm to [`OrderBook::next_alarm`] and sends the wakes it asks for.
//!
//! Why one at a time holds: the turn is granted only while no other is
//! held, and a holder forwards only within its lease. A lease that ends
//! without a word (a crashed holder, a lost call) is not handed on until
//! the holder has said how its delivery stands (pending, delivered or
//! ended): its forward is over by then, and a delivery it completed still
//! counts as delivered, so the next one is marked stale if it is older.
//!
//! Why the oldest goes first: the turn goes only to the head, the entry of
//! the oldest `order_time` (then the earliest accepted). An entry stays in
//! the book until its delivery is delivered or ended, so a failing head
//! waiting for its retry keeps later ones behind it, as a FIFO queue's
//! message group does; a dead letter lets them go.

use serde::{Deserialize, Serialize};

use super::{Ask, HolderStatus, OrderCall, OrderReply, Outcome};
use crate::host::{AlarmStep, Book};

/// When a waiter that is not the head asks again should its wake be lost.
pub const REQUEUE_MS: u64 = 30_000;
/// A head woken and silent since is woken again after this long.
pub const WAKE_AGAIN_MS: u64 = 15_000;
/// An entry whose holder has not been heard of for this long after it
/// said it would ask again is dropped (its object lost the delivery:
/// purged while the call that said so was lost). Longer than any wait
/// between a holder's calls: its retry is on its own schedule, whose
/// time the entry holds.
pub const ABANDON_MS: u64 = 600_000;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub holder: String,
    pub time_ms: u64,
    pub accepted_at: u64,
    pub hold_ms: u64,
    /// It asks again no earlier than this (a retry's time).
    pub not_before: u64,
    /// When its holder last called, or answered a wake.
    pub heard_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub holder: String,
    pub grant: u64,
    pub expires_at: u64,
    /// The lease ended without a word: the holder is asked how its
    /// delivery stands before the turn goes to anyone.
    pub lapsed: bool,
    /// When the holder of a lapsed turn was last asked.
    pub asked_at: u64,
    /// The holder's `order_time`: what the origin has if its forward
    /// under this turn was accepted (0 in a book stored before v5).
    #[serde(default)]
    pub time_ms: u64,
    /// The holder left the book (purged) while its forward may still
    /// have been at the origin: whatever it says later, that forward is
    /// counted as delivered.
    #[serde(default)]
    pub left: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderBook {
    entries: Vec<Entry>,
    turn: Option<Turn>,
    /// The newest `order_time` the origin accepted.
    newest_delivered: Option<u64>,
    next_grant: u64,
    /// When anything last changed: the book is forgotten `retention_ms`
    /// after, once nothing waits (SPEC §12).
    changed_at: u64,
    retention_ms: u64,
    /// The head last woken, and when.
    woken: Option<(String, u64)>,
    /// Holders to wake, since last taken (not stored).
    #[serde(skip)]
    wakes: Vec<String>,
}

/// What the operator sees of an entity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BookView {
    pub waiting: usize,
    pub turn_held: bool,
    pub newest_delivered: Option<u64>,
}

impl OrderBook {
    /// One call of a key's object, as the order object answers it (the
    /// Worker's object and the simulation both take calls here).
    pub fn apply(&mut self, call: &OrderCall, now: u64) -> OrderReply {
        match call {
            OrderCall::Ask(ask) => self.ask(ask, now),
            OrderCall::Done {
                ask,
                grant,
                outcome,
            } => {
                self.done(ask, *grant, *outcome, now);
                OrderReply::Noted
            }
        }
    }

    /// A delivery asks for its turn.
    pub fn ask(&mut self, ask: &Ask, now: u64) -> OrderReply {
        self.settle(now);
        self.enter(ask, now, now);
        let reply = self.answer(ask, now);
        self.dispatch(now);
        reply
    }

    fn answer(&mut self, ask: &Ask, now: u64) -> OrderReply {
        if let Some(turn) = &self.turn {
            if turn.holder != ask.holder {
                return OrderReply::Wait {
                    retry_at: now + REQUEUE_MS,
                };
            }
            if !turn.lapsed {
                // Granted and not given back: a forward under it may still
                // be at the origin, so the holder waits for its lease.
                return OrderReply::Wait {
                    retry_at: turn.expires_at,
                };
            }
            // It asks again, so its delivery is pending, and its lease
            // is over: the turn it lost is free.
            self.turn = None;
        }
        let head = self.head().expect("the asking delivery has an entry");
        if head.holder != ask.holder {
            return OrderReply::Wait {
                retry_at: now + REQUEUE_MS,
            };
        }
        let due_at = self.due_at().unwrap_or(now);
        if due_at > now {
            return OrderReply::Wait { retry_at: due_at };
        }
        self.next_grant += 1;
        self.turn = Some(Turn {
            holder: ask.holder.clone(),
            grant: self.next_grant,
            expires_at: now.saturating_add(ask.lease_ms),
            lapsed: false,
            asked_at: 0,
            time_ms: ask.time_ms,
            left: false,
        });
        self.woken = None;
        OrderReply::Go {
            grant: self.next_grant,
            lease_ms: ask.lease_ms,
            stale: self
                .newest_delivered
                .is_some_and(|newest| ask.time_ms < newest),
        }
    }

    /// An attempt under the turn (or a wait for one) ended as `outcome`.
    pub fn done(&mut self, ask: &Ask, grant: Option<u64>, outcome: Outcome, now: u64) {
        self.settle(now);
        if self
            .turn
            .as_ref()
            .is_some_and(|turn| turn.holder == ask.holder && Some(turn.grant) == grant)
        {
            self.turn = None;
        }
        match outcome {
            Outcome::Delivered => self.delivered(&ask.holder, ask.time_ms),
            Outcome::Ended => {
                // Purged while holding the turn (no grant: the purge, not
                // the attempt, speaks): its forward may be at the origin,
                // so the turn waits for its lease and counts it.
                if let Some(turn) = self.turn.as_mut().filter(|turn| turn.holder == ask.holder) {
                    turn.left = true;
                }
                self.remove(&ask.holder)
            }
            Outcome::RetryAt(at) => self.enter(ask, at, now),
        }
        self.changed_at = now;
        self.dispatch(now);
    }

    /// A woken holder answered how its delivery stands.
    pub fn heard(&mut self, holder: &str, status: HolderStatus, now: u64) {
        self.settle(now);
        let mut lapsed_turn = None;
        if self
            .turn
            .as_ref()
            .is_some_and(|turn| turn.holder == holder && turn.lapsed)
        {
            // Whatever it says, its forward under the lapsed lease is over.
            lapsed_turn = self.turn.take();
        }
        // The time its delivery carried: its entry's, or (its entry gone)
        // the lapsed turn's.
        let time_ms = self
            .entry_mut(holder)
            .map(|entry| entry.time_ms)
            .or(lapsed_turn.as_ref().map(|turn| turn.time_ms));
        match status {
            HolderStatus::Pending => {
                if let Some(entry) = self.entry_mut(holder) {
                    entry.heard_at = now;
                }
            }
            HolderStatus::Delivered => {
                if let Some(time_ms) = time_ms {
                    self.delivered(holder, time_ms);
                }
            }
            // A holder purged under its turn cannot say whether the origin
            // took its forward: it is counted as taken, so an older event
            // after it is marked stale rather than sent as the newest.
            HolderStatus::Ended => match lapsed_turn.filter(|turn| turn.left) {
                Some(turn) => self.delivered(holder, turn.time_ms),
                None => self.remove(holder),
            },
        }
        self.changed_at = now;
        self.dispatch(now);
    }

    /// The object's alarm.
    pub fn on_alarm(&mut self, now: u64) {
        self.settle(now);
        self.dispatch(now);
    }

    /// The object's alarm, and whether the object may now delete itself.
    /// The book settles first (lapsed leases, silent entries), so that
    /// what it forgets is what is true at `now`; it is never forgotten
    /// while an entry waits, however long its retry is after the book's
    /// retention.
    pub fn alarm(&mut self, now: u64) -> AlarmStep {
        self.on_alarm(now);
        match self.is_forgotten(now) {
            true => AlarmStep::Forget,
            false => AlarmStep::Keep,
        }
    }

    /// When the alarm should run next.
    pub fn next_alarm(&self) -> Option<u64> {
        let turn = self.turn.as_ref().map(|turn| match turn.lapsed {
            false => turn.expires_at,
            true => turn.asked_at + WAKE_AGAIN_MS,
        });
        let head = match (&self.turn, self.head(), self.due_at()) {
            (None, Some(head), Some(due_at)) => Some(match &self.woken {
                Some((woken, at)) if *woken == head.holder => due_at.max(at + WAKE_AGAIN_MS),
                _ => due_at,
            }),
            _ => None,
        };
        // The turn's holder is asked about instead (see `settle`).
        let holding = self.turn.as_ref().map(|turn| turn.holder.as_str());
        let abandon = self
            .entries
            .iter()
            .filter(|entry| Some(entry.holder.as_str()) != holding)
            .map(|entry| entry.not_before.max(entry.heard_at) + ABANDON_MS)
            .min();
        let forget = self
            .is_spent()
            .then(|| self.changed_at.saturating_add(self.retention_ms));
        [turn, head, abandon, forget].into_iter().flatten().min()
    }

    /// Nothing waits or holds the turn, and the newest time delivered has
    /// been kept for its retention: the object may delete itself.
    pub fn is_forgotten(&self, now: u64) -> bool {
        self.is_spent() && now >= self.changed_at.saturating_add(self.retention_ms)
    }

    /// Holders to wake: the head when its turn came, or the holder of a
    /// lapsed turn, to hear how its delivery stands.
    pub fn take_wakes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.wakes)
    }

    pub fn view(&self) -> BookView {
        BookView {
            waiting: self.entries.len(),
            turn_held: self.turn.is_some(),
            newest_delivered: self.newest_delivered,
        }
    }

    /// Whether `holder` holds the turn, its lease live at `now`.
    pub fn turn_is(&self, holder: &str, now: u64) -> bool {
        self.turn
            .as_ref()
            .is_some_and(|turn| turn.holder == holder && !turn.lapsed && now < turn.expires_at)
    }

    /// Nothing waits or holds the turn, but the book was used (a turn
    /// granted, or an entry come and gone without one): a fresh book has
    /// nothing to forget.
    fn is_spent(&self) -> bool {
        self.entries.is_empty()
            && self.turn.is_none()
            && (self.next_grant > 0 || self.changed_at > 0)
    }

    /// Leases that ended lapse; entries whose holders went silent go.
    fn settle(&mut self, now: u64) {
        if let Some(turn) = self.turn.as_mut() {
            if !turn.lapsed && turn.expires_at <= now {
                turn.lapsed = true;
                turn.asked_at = 0;
            }
        }
        let holding = self.turn.as_ref().map(|turn| turn.holder.clone());
        self.entries.retain(|entry| {
            Some(&entry.holder) == holding.as_ref()
                || entry.not_before.max(entry.heard_at) + ABANDON_MS > now
        });
    }

    /// Wakes the head when its turn has come, or asks a lapsed turn's
    /// holder how its delivery stands.
    fn dispatch(&mut self, now: u64) {
        match self.turn.as_mut() {
            Some(turn) if turn.lapsed => {
                if turn.asked_at == 0 || now >= turn.asked_at + WAKE_AGAIN_MS {
                    turn.asked_at = now;
                    self.wakes.push(turn.holder.clone());
                }
            }
            Some(_) => {}
            None => {
                let (Some(head), Some(due_at)) = (self.head(), self.due_at()) else {
                    return;
                };
                let recently = self
                    .woken
                    .as_ref()
                    .is_some_and(|(woken, at)| *woken == head.holder && now < at + WAKE_AGAIN_MS);
                if due_at <= now && !recently {
                    let holder = head.holder.clone();
                    self.woken = Some((holder.clone(), now));
                    self.wakes.push(holder);
                }
            }
        }
    }

    /// The entry whose turn is next: the oldest time, then the earliest
    /// accepted (then the holder's name, so every replay agrees).
    fn head(&self) -> Option<&Entry> {
        self.entries.iter().min_by(|a, b| {
            (a.time_ms, a.accepted_at, &a.holder).cmp(&(b.time_ms, b.accepted_at, &b.holder))
        })
    }

    /// When the head may go: once it asks again, and once some delivery
    /// has waited its hold (none waits longer for an older one that may
    /// still come).
    fn due_at(&self) -> Option<u64> {
        let head = self.head()?;
        let held_until = self
            .entries
            .iter()
            .map(|entry| entry.accepted_at.saturating_add(entry.hold_ms))
            .min()?;
        Some(head.not_before.max(held_until))
    }

    fn enter(&mut self, ask: &Ask, not_before: u64, now: u64) {
        self.retention_ms = self.retention_ms.max(ask.retention_ms);
        self.changed_at = now;
        let entry = Entry {
            holder: ask.holder.clone(),
            time_ms: ask.time_ms,
            accepted_at: ask.accepted_at,
            hold_ms: ask.hold_ms,
            not_before,
            heard_at: now,
        };
        match self.entry_mut(&ask.holder) {
            Some(known) => *known = entry,
            None => self.entries.push(entry),
        }
    }

    fn delivered(&mut self, holder: &str, time_ms: u64) {
        self.newest_delivered = Some(
            self.newest_delivered
                .map_or(time_ms, |newest| newest.max(time_ms)),
        );
        self.remove(holder);
    }

    fn remove(&mut self, holder: &str) {
        self.entries.retain(|entry| entry.holder != holder);
        if self
            .woken
            .as_ref()
            .is_some_and(|(woken, _)| woken == holder)
        {
            self.woken = None;
        }
    }

    fn entry_mut(&mut self, holder: &str) -> Option<&mut Entry> {
        self.entries.iter_mut().find(|entry| entry.holder == holder)
    }
}

/// The order object is a host of this book, kept as one value.
impl Book for OrderBook {
    type Call = OrderCall;
    type Reply = OrderReply;
    type Changes = String;

    fn apply(&mut self, call: &OrderCall, now: u64) -> OrderReply {
        OrderBook::apply(self, call, now)
    }

    fn alarm(&mut self, now: u64) -> AlarmStep {
        OrderBook::alarm(self, now)
    }

    fn next_alarm(&self) -> Option<u64> {
        OrderBook::next_alarm(self)
    }

    fn take_wakes(&mut self) -> Vec<String> {
        OrderBook::take_wakes(self)
    }

    fn take_changes(&mut self) -> String {
        serde_json::to_string(self).expect("a book serializes")
    }
}
