//! The simulated world: a virtual clock, per-key storage that survives
//! restarts, alarms the runtime may refuse to set or accept and never
//! fire, the receipt index as D1 keeps it (writes that fail, land late and
//! out of order, or are lost), an origin whose every call the scheduler
//! answers, and the bookkeeping the invariants are checked against.
//!
//! A crash is a restart that can fall between any two writes an object
//! makes, the way a Durable Object fails: storage writes made in one turn
//! (with no `await` between them; an alarm set or a delete all is one
//! when it is issued in that turn) commit together, so a crash falls
//! before a turn's first write, after a turn's writes, or before or after
//! an index write is sent.
//! The instance that crashed is dead from then on: nothing it still does
//! reaches storage, the index, the origin or its caller.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use super::Rng;
use crate::canonical::Fingerprint;
use crate::decision_log::DecisionLog;
use crate::delivery::DeliveryRequest;
use crate::engine::{Backend, Policy};
use crate::flow::{Coordinator, FlowLimits, PermitReply, PermitRequest, CLAIM_MS};
use crate::headers;
use crate::host::value::{MemoryValues, ValueStore};
use crate::host::Host;
use crate::index::{IndexUpdate, TableRow, GONE};
use crate::order::OrderBook;

/// The entity's order object, as the simulation keeps it.
pub type OrderHost = Host<OrderBook, ValueStore<MemoryValues>>;

/// The value of a future that never waits: the order object's storage is
/// memory here.
fn ready<T>(future: impl std::future::Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => unreachable!("memory storage never waits"),
    }
}
use crate::origin::OutboundRequest;
use crate::receipt::{ForwardResult, HttpResponse, Receipt, ReceiptState};
use crate::signature::Secret;

/// One call to the origin.
pub struct OriginCall {
    pub key: usize,
    /// The key's era when the call was made: a purge starts a new one.
    pub era: u64,
    pub fingerprint: Fingerprint,
    pub lease_until: u64,
    pub deadline: u64,
    pub outcome: Rc<RefCell<Option<ForwardResult>>>,
    /// Answered by the origin, or timed out.
    pub settled: bool,
}

/// An alarm the runtime holds for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Alarm {
    pub at: u64,
    /// Accepted by the runtime, which will never fire it.
    pub dropped: bool,
}

/// What the simulation knows about one key.
#[derive(Default)]
pub struct KeyState {
    pub stored: Option<Receipt>,
    pub request: Option<DeliveryRequest>,
    pub alarm: Option<Alarm>,
    /// How often the runtime re-ran the current alarm's failing handler.
    pub alarm_retries: u32,
    /// Bumped by every crash or restart: a backend of an older
    /// incarnation belongs to an instance that is gone.
    pub incarnation: u64,
    /// Whether the instance wrote since its last `await`: writes of one
    /// turn commit together, so no crash falls between them.
    pub turn_open: bool,
    /// Bumped whenever the key becomes new (first forward, purge, expiry).
    pub era: u64,
    /// The highest epoch ever forwarded for the key, across eras: an
    /// origin may fence on it forever.
    pub highest_epoch: u64,
    /// The stored response once the receipt completed, in this era.
    pub completed: Option<(Fingerprint, HttpResponse)>,
    /// When the origin accepted (2xx) which payload, in which era.
    pub accepted: Vec<(Fingerprint, u64, u64)>,
}

/// One receipt's life as the world saw it, by receipt id (invariant 9).
#[derive(Debug, Clone)]
pub struct Life {
    pub key: usize,
    /// Its state as last written.
    pub state: &'static str,
    pub pending: bool,
    /// Its sender got a 2xx for it.
    pub acknowledged: bool,
    /// Deleted (expired or purged).
    pub deleted: bool,
    /// Purged on purpose, with force, by the operator.
    pub forced_out: bool,
}

/// The receipt index as D1 keeps it: `index::sql`'s statements, one row
/// per object, each write landing only over a lower version.
#[derive(Default)]
pub struct D1 {
    pub rows: BTreeMap<String, TableRow>,
}

impl D1 {
    /// `sql::UPSERT` or `sql::REMOVE`: an insert, or on conflict an update
    /// `WHERE excluded.version > receipt_index.version`. A removal is a
    /// tombstone (`gone`, never woken) that keeps the row's other columns.
    /// Answers the row's version when the write changed nothing.
    pub fn apply(&mut self, update: &IndexUpdate) -> Option<u64> {
        let before = self.rows.get(update.object()).map(|row| row.version);
        if before.is_some_and(|version| update.version() <= version) {
            return before;
        }
        match update {
            IndexUpdate::Upsert(row) => match self.rows.get_mut(&row.identity.object) {
                Some(stored) if row.version > stored.version => *stored = row.into(),
                Some(_) => {}
                None => {
                    self.rows.insert(row.identity.object.clone(), row.into());
                }
            },
            IndexUpdate::Remove {
                object,
                version,
                at,
            } => match self.rows.get_mut(object) {
                Some(stored) if *version > stored.version => {
                    stored.state = GONE.into();
                    stored.next_wake_at = None;
                    stored.updated_at = *at;
                    stored.version = *version;
                }
                Some(_) => {}
                None => {
                    self.rows.insert(
                        object.clone(),
                        TableRow {
                            object: object.clone(),
                            route: String::new(),
                            scope: String::new(),
                            key: String::new(),
                            path: None,
                            tenant_sha256: None,
                            receipt_id: String::new(),
                            state: GONE.into(),
                            attempts: 0,
                            last_status: None,
                            next_wake_at: None,
                            accepted_at: *at,
                            updated_at: *at,
                            version: *version,
                        },
                    );
                }
            },
        }
        None
    }

    /// `sql::OVERDUE`: objects with work due at or before `before`, oldest
    /// first, never a tombstone.
    pub fn overdue(&self, before: u64, limit: usize) -> Vec<String> {
        let mut due: Vec<(u64, &String)> = self
            .rows
            .values()
            .filter(|row| row.state != GONE)
            .filter_map(|row| row.next_wake_at.map(|at| (at, &row.object)))
            .filter(|(at, _)| *at <= before)
            .collect();
        due.sort();
        due.into_iter()
            .take(limit)
            .map(|(_, object)| object.clone())
            .collect()
    }

    /// `sql::FORGET_TOMBSTONES`.
    pub fn forget_tombstones(&mut self, before: u64) {
        self.rows
            .retain(|_, row| !(row.state == GONE && row.updated_at < before));
    }

    /// The row of `object` that lists something (not a tombstone).
    pub fn listed(&self, object: &str) -> Option<&TableRow> {
        self.rows.get(object).filter(|row| row.state != GONE)
    }
}

/// How often (in percent) an index write fails at once, is lost (the
/// engine hears of a failure later, and it never lands), lands late (out
/// of order with later writes), or lands late while its reply is lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexFaults {
    pub fail: u64,
    pub lost: u64,
    pub late: u64,
    pub reply_lost: u64,
}

/// An index write on its way to D1.
pub struct IndexWrite {
    pub update: IndexUpdate,
    /// When it lands (or, if lost, when its sender gives up on it).
    pub land_at: u64,
    pub lands: bool,
    /// What its sender hears.
    pub reply: Result<(), String>,
    pub done: Rc<RefCell<Option<Result<(), String>>>>,
}

/// Faults injected by the backend, as the schedule sets them.
pub struct Faults {
    /// How many of the next storage writes fail.
    pub failing_writes: Cell<u32>,
    /// `set_alarm` fails until then.
    pub alarms_fail_until: Cell<u64>,
    /// Alarms the runtime accepts until then are never fired (`u64::MAX`:
    /// dropped for good).
    pub alarms_dropped_until: Cell<u64>,
    /// Accepted alarms dropped at random, in percent.
    pub alarm_drop_percent: Cell<u64>,
    /// Every index write to a shard (and its sweep) fails until then, by
    /// shard: one shard down, or all of them.
    pub shard_fails_until: RefCell<[u64; SIM_SHARDS as usize]>,
    pub index: Cell<IndexFaults>,
    /// The longest an index write is late, in ms.
    pub index_delay_ms: Cell<u64>,
    /// Chance of a crash at each point one may fall, in percent.
    pub crash_percent: Cell<u64>,
    rng: RefCell<Rng>,
}

impl Faults {
    /// Whether `shard` is down at `now`.
    pub fn shard_down(&self, shard: u16, now: u64) -> bool {
        now < self.shard_fails_until.borrow()[usize::from(shard)]
    }

    pub fn chance(&self, percent: u64) -> bool {
        percent > 0 && self.rng.borrow_mut().chance(percent)
    }

    fn below(&self, bound: u64) -> u64 {
        self.rng.borrow_mut().below(bound)
    }

    /// Stops every fault but alarms dropped for good.
    pub fn end(&self) {
        self.failing_writes.set(0);
        self.alarms_fail_until.set(0);
        if self.alarms_dropped_until.get() != u64::MAX {
            self.alarms_dropped_until.set(0);
        }
        self.alarm_drop_percent.set(0);
        *self.shard_fails_until.borrow_mut() = [0; SIM_SHARDS as usize];
        self.index.set(IndexFaults::default());
        self.crash_percent.set(0);
    }
}

/// What the faults did, for the report.
#[derive(Debug, Default, Clone, Copy)]
pub struct FaultCounts {
    pub crashes: u64,
    pub alarms_refused: u64,
    pub alarms_dropped: u64,
    pub index_failed: u64,
    pub index_late: u64,
    pub index_lost: u64,
}

pub struct World {
    pub now: Cell<u64>,
    pub lease_ms: u64,
    pub keys: RefCell<Vec<KeyState>>,
    pub calls: RefCell<Vec<OriginCall>>,
    /// The task being polled, to attribute forwards to deliveries.
    pub polling: Cell<Option<usize>>,
    pub calls_by_task: RefCell<Vec<(usize, usize)>>,
    pub faults: Faults,
    pub counts: Cell<FaultCounts>,
    /// Keys whose instance crashed during the current poll.
    pub crashed: RefCell<Vec<usize>>,
    /// Set while the operator's forced purge is polled.
    pub force_purging: Cell<bool>,
    /// The origin has recovered: it takes every call at once.
    pub origin_recovered: Cell<bool>,
    pub d1: RefCell<D1>,
    pub index_writes: RefCell<Vec<IndexWrite>>,
    /// Every receipt's life, by receipt id.
    pub lives: RefCell<BTreeMap<String, Life>>,
    /// Receipt ids handed out so far.
    pub receipt_ids: Cell<u64>,
    pub violations: RefCell<Vec<String>>,
    /// `SIM_TRACE=1`: every event is printed.
    pub trace: bool,
    /// The route's policy, when the schedule sets flow-control limits
    /// (the engine reads them as the route's current ones).
    pub route_policy: RefCell<Option<Policy>>,
    /// The route's flow coordinator (its own object, which never
    /// restarts here: `flow::tests` restarts it from its rows).
    pub flow: RefCell<Option<Coordinator>>,
    /// Wakes on their way to keys' objects: (key, when it arrives).
    pub wakes: RefCell<Vec<(usize, u64)>>,
    /// The schedule orders its deliveries (SPEC §12): every key's events
    /// are of one entity, whose book lives here (its own object, which
    /// never restarts here; its state is one stored value).
    pub ordered: Cell<bool>,
    /// The entity's order object: the host of its book, as the Worker's.
    pub order: OrderHost,
    /// The book's wakes on their way: (key, when it arrives).
    pub order_wakes: RefCell<Vec<(usize, u64)>>,
    /// Each payload's event time, by its fingerprint.
    pub order_times: RefCell<Vec<(Fingerprint, u64)>>,
}

impl World {
    pub fn new(keys: usize, lease_ms: u64, now: u64, fault_seed: u64) -> World {
        World {
            now: Cell::new(now),
            lease_ms,
            keys: RefCell::new((0..keys).map(|_| KeyState::default()).collect()),
            calls: RefCell::new(Vec::new()),
            polling: Cell::new(None),
            calls_by_task: RefCell::new(Vec::new()),
            faults: Faults {
                failing_writes: Cell::new(0),
                alarms_fail_until: Cell::new(0),
                alarms_dropped_until: Cell::new(0),
                alarm_drop_percent: Cell::new(0),
                shard_fails_until: RefCell::new([0; SIM_SHARDS as usize]),
                index: Cell::new(IndexFaults::default()),
                index_delay_ms: Cell::new(0),
                crash_percent: Cell::new(0),
                rng: RefCell::new(Rng(fault_seed)),
            },
            counts: Cell::new(FaultCounts::default()),
            crashed: RefCell::new(Vec::new()),
            force_purging: Cell::new(false),
            origin_recovered: Cell::new(false),
            d1: RefCell::new(D1::default()),
            index_writes: RefCell::new(Vec::new()),
            lives: RefCell::new(BTreeMap::new()),
            receipt_ids: Cell::new(0),
            violations: RefCell::new(Vec::new()),
            trace: std::env::var_os("SIM_TRACE").is_some(),
            route_policy: RefCell::new(None),
            flow: RefCell::new(None),
            wakes: RefCell::new(Vec::new()),
            ordered: Cell::new(false),
            order: Host::new(ValueStore {
                storage: MemoryValues::default(),
                key: "book",
            }),
            order_wakes: RefCell::new(Vec::new()),
            order_times: RefCell::new(Vec::new()),
        }
    }

    /// A call to the entity's book at `now`; its wakes go out as the
    /// coordinator's do: most at once, some late, some never.
    pub fn order_apply<T>(&self, call: impl FnOnce(&mut OrderBook, u64) -> T) -> T {
        let now = self.now.get();
        let (answer, wakes) = ready(self.order.step(now, |book| call(book, now)))
            .expect("the book is kept in memory");
        self.send_order_wakes(wakes, now);
        answer
    }

    /// The book's wakes go out as the coordinator's do: most at once, some
    /// late, some never.
    fn send_order_wakes(&self, wakes: Vec<String>, now: u64) {
        for holder in wakes {
            let key: usize = holder["object-".len()..].parse().expect("an object's name");
            let arrives = match self.faults.below(100) {
                0..10 => None,
                10..20 => Some(now + self.faults.below(2 * crate::order::book::WAKE_AGAIN_MS)),
                _ => Some(now + self.faults.below(100)),
            };
            self.note(|| format!("the entity's book wakes key {key}: {arrives:?}"));
            if let Some(at) = arrives {
                self.order_wakes.borrow_mut().push((key, at));
            }
        }
    }

    /// The book's alarm, when due (a forgotten book deletes its object:
    /// the next call finds a fresh one).
    pub fn order_alarm(&self) {
        let now = self.now.get();
        let next = ready(self.order.read(|book| book.next_alarm())).expect("in memory");
        if next.is_some_and(|at| at <= now) {
            let wakes = ready(self.order.alarm(now)).expect("the book is kept in memory");
            self.send_order_wakes(wakes, now);
        }
    }

    /// The book's wakes that arrived by now, taken.
    pub fn arrived_order_wakes(&self) -> Vec<usize> {
        let now = self.now.get();
        let mut arrived = Vec::new();
        self.order_wakes.borrow_mut().retain(|&(key, at)| {
            if at <= now {
                arrived.push(key);
            }
            at > now
        });
        arrived
    }

    /// The next time the book, or a wake of its on the way, has work.
    pub fn next_order_event(&self) -> Option<u64> {
        if !self.ordered.get() {
            return None;
        }
        let alarm = ready(self.order.read(|book| book.next_alarm())).expect("in memory");
        let wake = self.order_wakes.borrow().iter().map(|(_, at)| *at).min();
        [alarm, wake].into_iter().flatten().min()
    }

    pub fn order_time_of(&self, fingerprint: &Fingerprint) -> Option<u64> {
        self.order_times
            .borrow()
            .iter()
            .find(|(known, _)| known == fingerprint)
            .map(|(_, time)| *time)
    }

    /// The newest event time a key's object recorded as accepted by the
    /// origin (its receipt completed, as stored now, and within its
    /// retention: an entity remembers no longer, SPEC §12).
    fn newest_recorded(&self) -> Option<u64> {
        let now = self.now.get();
        self.keys
            .borrow()
            .iter()
            .filter_map(|state| state.stored.as_ref())
            .filter(|receipt| receipt.stored_response().is_some() && !receipt.is_expired(now))
            .filter_map(|receipt| self.order_time_of(&receipt.fingerprint))
            .max()
    }

    /// A call to the route's coordinator at `now`; the wakes it makes go
    /// out: most arrive at once, some late (past the reservation's claim),
    /// some never.
    pub fn flow_call<T>(&self, limits: FlowLimits, call: impl FnOnce(&mut Coordinator) -> T) -> T {
        let now = self.now.get();
        let (answer, wakes) = {
            let mut flow = self.flow.borrow_mut();
            let flow = flow.get_or_insert_with(|| Coordinator::new(limits, now));
            let answer = call(flow);
            (answer, flow.take_wakes())
        };
        for holder in wakes {
            let key: usize = holder["object-".len()..].parse().expect("an object's name");
            let arrives = match self.faults.below(100) {
                0..10 => None,
                10..20 => Some(now + self.faults.below(2 * CLAIM_MS)),
                _ => Some(now + self.faults.below(100)),
            };
            self.note(|| format!("coordinator wakes key {key}: {arrives:?}"));
            if let Some(at) = arrives {
                self.wakes.borrow_mut().push((key, at));
            }
        }
        answer
    }

    /// The coordinator's alarm, when due: leases that ended come back.
    pub fn flow_alarm(&self) {
        let now = self.now.get();
        let due = self
            .flow
            .borrow()
            .as_ref()
            .and_then(Coordinator::next_alarm)
            .is_some_and(|at| at <= now);
        if due {
            let limits = self.flow_limits().expect("a coordinator has limits");
            self.flow_call(limits, |flow| flow.on_alarm(now));
        }
    }

    pub fn flow_limits(&self) -> Option<FlowLimits> {
        self.route_policy
            .borrow()
            .as_ref()
            .and_then(|policy| policy.flow)
    }

    /// The next time the coordinator or a wake on its way has work.
    pub fn next_flow_event(&self) -> Option<u64> {
        let alarm = self
            .flow
            .borrow()
            .as_ref()
            .and_then(Coordinator::next_alarm);
        let wake = self.wakes.borrow().iter().map(|(_, at)| *at).min();
        [alarm, wake].into_iter().flatten().min()
    }

    /// The wakes that arrived by now, taken.
    pub fn arrived_wakes(&self) -> Vec<usize> {
        let now = self.now.get();
        let mut arrived = Vec::new();
        self.wakes.borrow_mut().retain(|&(key, at)| {
            if at <= now {
                arrived.push(key);
            }
            at > now
        });
        arrived
    }

    /// Forwards at the origin now, of every key: sent, not answered, and
    /// not given up (their timeout ended).
    pub fn forwards_at_origin(&self) -> usize {
        self.open_calls().len()
    }

    pub fn note(&self, what: impl FnOnce() -> String) {
        if self.trace {
            println!("  t={} {}", self.now.get() % 100_000_000, what());
        }
    }

    pub fn violate(&self, message: String) {
        self.violations.borrow_mut().push(message);
    }

    fn count(&self, bump: impl FnOnce(&mut FaultCounts)) {
        let mut counts = self.counts.get();
        bump(&mut counts);
        self.counts.set(counts);
    }

    pub fn task_forwarded(&self, task: usize) -> bool {
        self.calls_by_task.borrow().iter().any(|(t, _)| *t == task)
    }

    /// Settles an outstanding call with the origin's answer.
    pub fn answer(&self, call: usize, result: ForwardResult) {
        let mut calls = self.calls.borrow_mut();
        let call = &mut calls[call];
        if let ForwardResult::Answered(response) = &result {
            if (200..300).contains(&response.status) {
                self.keys.borrow_mut()[call.key].accepted.push((
                    call.fingerprint.clone(),
                    self.now.get(),
                    call.era,
                ));
            }
        }
        *call.outcome.borrow_mut() = Some(result);
        call.settled = true;
    }

    /// Calls the origin has neither answered nor given up on.
    pub fn open_calls(&self) -> Vec<usize> {
        let now = self.now.get();
        self.calls
            .borrow()
            .iter()
            .enumerate()
            .filter(|(_, call)| !call.settled && now < call.deadline)
            .map(|(index, _)| index)
            .collect()
    }

    /// The key's instance is gone: memory lost, storage kept.
    pub fn crash(&self, key: usize) {
        self.note(|| format!("key {key}: crash"));
        self.keys.borrow_mut()[key].incarnation += 1;
        self.crashed.borrow_mut().push(key);
        self.count(|counts| counts.crashes += 1);
    }

    /// An alarm the runtime accepts now: dropped, or one it will fire.
    /// An alarm the runtime accepted: dropped by the faults, unless
    /// `relied_on` (SPEC §2b, v5: a receipt whose index row has not landed
    /// rests on the platform running its alarm; the sweep's net covers
    /// only rows that landed, so a dropped alarm here is outside what is
    /// promised, not a fault to survive).
    /// Whether `key`'s receipt has a row that has not landed, so that
    /// only its alarm finds it again.
    pub fn rests_on_alarm(&self, key: usize) -> bool {
        self.keys.borrow()[key]
            .stored
            .as_ref()
            .is_some_and(|receipt| !receipt.indexed.confirmed)
    }

    pub fn accept_alarm(&self, at: u64, relied_on: bool) -> Alarm {
        let faults = &self.faults;
        let dropped = !relied_on
            && (self.now.get() < faults.alarms_dropped_until.get()
                || faults.chance(faults.alarm_drop_percent.get()));
        if dropped {
            self.count(|counts| counts.alarms_dropped += 1);
        }
        Alarm { at, dropped }
    }

    /// Lands (or gives up on) every index write due by now, in the order
    /// they are due.
    pub fn land_index_writes(&self) {
        let now = self.now.get();
        let due: Vec<IndexWrite> = {
            let mut writes = self.index_writes.borrow_mut();
            let (due, later): (Vec<_>, Vec<_>) =
                writes.drain(..).partition(|write| write.land_at <= now);
            *writes = later;
            due
        };
        let mut due = due;
        due.sort_by_key(|write| write.land_at);
        for write in due {
            self.note(|| {
                format!(
                    "index {}: {:?}",
                    if write.lands { "lands" } else { "lost" },
                    brief(&write.update)
                )
            });
            if write.lands {
                self.d1.borrow_mut().apply(&write.update);
            }
            *write.done.borrow_mut() = Some(write.reply);
        }
    }

    /// When the next index write lands, if one is on its way.
    pub fn next_landing(&self) -> Option<u64> {
        self.index_writes
            .borrow()
            .iter()
            .map(|write| write.land_at)
            .min()
    }

    /// Notes a receipt as written.
    fn lived(&self, key: usize, receipt: &Receipt) {
        let mut lives = self.lives.borrow_mut();
        let life = lives
            .entry(receipt.identity.receipt_id.clone())
            .or_insert(Life {
                key,
                state: receipt.state_name(),
                pending: false,
                acknowledged: false,
                deleted: false,
                forced_out: false,
            });
        life.state = receipt.state_name();
        life.pending = receipt.is_pending();
    }

    /// A delivery of `receipt_id` was acknowledged to its sender.
    pub fn acknowledged(&self, receipt_id: &str) {
        if let Some(life) = self.lives.borrow_mut().get_mut(receipt_id) {
            life.acknowledged = true;
        }
    }
}

/// An index write, in a trace.
fn brief(update: &IndexUpdate) -> String {
    match update {
        IndexUpdate::Upsert(row) => format!(
            "{} {} {} v{} wake {:?}",
            row.identity.object,
            row.identity.receipt_id,
            row.state,
            row.version,
            row.next_wake_at.map(|at| at % 100_000_000)
        ),
        IndexUpdate::Remove {
            object, version, ..
        } => format!("{object} remove v{version}"),
    }
}

/// One Durable Object instance's view of the world.
pub struct SimBackend {
    pub world: Rc<World>,
    pub key: usize,
    /// The key's incarnation when this instance started.
    pub incarnation: u64,
}

pub struct Sleep {
    world: Rc<World>,
    until: u64,
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.world.now.get() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

struct PendingCall {
    world: Rc<World>,
    index: usize,
}

impl Future for PendingCall {
    type Output = ForwardResult;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<ForwardResult> {
        let mut calls = self.world.calls.borrow_mut();
        let call = &mut calls[self.index];
        if let Some(result) = call.outcome.borrow().clone() {
            return Poll::Ready(result);
        }
        if self.world.now.get() >= call.deadline {
            call.settled = true;
            return Poll::Ready(ForwardResult::TimedOut);
        }
        Poll::Pending
    }
}

/// The reply to an index write, once it lands or is given up on.
struct IndexReply {
    done: Rc<RefCell<Option<Result<(), String>>>>,
}

impl Future for IndexReply {
    type Output = Result<(), String>;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), String>> {
        match self.done.borrow_mut().take() {
            Some(reply) => Poll::Ready(reply),
            None => Poll::Pending,
        }
    }
}

const CRASHED: &str = "the object crashed";

/// The route's index shards: keys hash to either, each down on its own.
pub const SIM_SHARDS: u16 = 2;

impl SimBackend {
    fn alive(&self) -> bool {
        self.world.keys.borrow()[self.key].incarnation == self.incarnation
    }

    /// A crash may fall here: then this instance is dead.
    fn crash_point(&self) -> bool {
        let faults = &self.world.faults;
        if !faults.chance(faults.crash_percent.get()) {
            return false;
        }
        self.world.crash(self.key);
        true
    }

    /// A synchronous write: refused once dead; the first of a turn may be
    /// preceded by a crash (the turn's writes then never happen).
    fn begin_write(&self) -> Result<(), String> {
        if !self.alive() {
            return Err(CRASHED.into());
        }
        let first = {
            let mut keys = self.world.keys.borrow_mut();
            !std::mem::replace(&mut keys[self.key].turn_open, true)
        };
        if first && self.crash_point() {
            return Err(CRASHED.into());
        }
        Ok(())
    }

    /// An `await`: the turn's writes are committed.
    fn end_turn(&self) {
        if self.alive() {
            self.world.keys.borrow_mut()[self.key].turn_open = false;
        }
    }

    fn injected_failure(&self) -> bool {
        let failing = &self.world.faults.failing_writes;
        if failing.get() > 0 {
            failing.set(failing.get() - 1);
            return true;
        }
        false
    }
}

/// What a dead instance's asynchronous operations return: nothing, ever.
async fn never<T>() -> T {
    std::future::pending().await
}

impl Backend for SimBackend {
    fn now_ms(&self) -> u64 {
        self.world.now.get()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        if !self.alive() {
            return Err(CRASHED.into());
        }
        Ok(self.world.keys.borrow()[self.key].stored.clone())
    }

    fn save(&self, receipt: &Receipt, request: Option<&DeliveryRequest>) -> Result<(), String> {
        self.begin_write()?;
        if self.injected_failure() {
            return Err("injected write failure".into());
        }
        // The request goes in the receipt's own write, and goes with it.
        {
            let mut keys = self.world.keys.borrow_mut();
            if let Some(request) = request {
                keys[self.key].request = Some(request.clone());
            }
            if !receipt.keeps_request() {
                keys[self.key].request = None;
            }
        }
        let now = self.world.now.get();
        let mut keys = self.world.keys.borrow_mut();
        let state = &mut keys[self.key];
        // A new receipt id is a new life of the key (after a purge, or
        // over an expired receipt, which a lost alarm may leave stored).
        let new_life = state
            .stored
            .as_ref()
            .is_none_or(|old| old.identity.receipt_id != receipt.identity.receipt_id);
        if new_life {
            state.era += 1;
            state.completed = None;
        }
        let live = state.stored.as_ref().filter(|old| !old.is_expired(now));
        let begins_forward = matches!(receipt.state, ReceiptState::InFlight { .. })
            && live.is_none_or(|old| {
                old.epoch != receipt.epoch || !matches!(old.state, ReceiptState::InFlight { .. })
            });
        if begins_forward {
            match live {
                None => {}
                Some(old) if old.fingerprint != receipt.fingerprint => {
                    let message = format!(
                        "I4 key {}: a different payload was forwarded while a receipt existed",
                        self.key
                    );
                    drop(keys);
                    self.world.violate(message);
                    keys = self.world.keys.borrow_mut();
                }
                Some(_) => {}
            }
        }
        let state = &mut keys[self.key];
        if let Some(stored) = receipt.stored_response() {
            state.completed = Some((receipt.fingerprint.clone(), stored.response.clone()));
        }
        state.stored = Some(receipt.clone());
        drop(keys);
        self.world.note(|| {
            format!(
                "key {}: save {} {} epoch {}",
                self.key,
                receipt.identity.receipt_id,
                receipt.state_name(),
                receipt.epoch
            )
        });
        self.world.lived(self.key, receipt);
        Ok(())
    }

    fn load_request(&self) -> Result<Option<DeliveryRequest>, String> {
        if !self.alive() {
            return Err(CRASHED.into());
        }
        Ok(self.world.keys.borrow()[self.key].request.clone())
    }

    async fn delete_all(&self) -> Result<bool, String> {
        if self.begin_write().is_err() {
            return never().await;
        }
        let deleted = {
            let mut keys = self.world.keys.borrow_mut();
            let state = &mut keys[self.key];
            let deleted = state.stored.take();
            state.request = None;
            state.alarm = None;
            state.completed = None;
            state.era += 1;
            deleted
        };
        self.world.note(|| format!("key {}: delete all", self.key));
        if let Some(receipt) = &deleted {
            let forced = self.world.force_purging.get();
            let acknowledged = {
                let mut lives = self.world.lives.borrow_mut();
                let life = lives
                    .get_mut(&receipt.identity.receipt_id)
                    .expect("a stored receipt was written");
                life.deleted = true;
                life.forced_out = forced;
                life.acknowledged
            };
            if receipt.is_pending() && !forced {
                let invariant = if acknowledged { "I9" } else { "I8" };
                self.world.violate(format!(
                    "{invariant} key {}: a pending delivery ({}) was deleted, not by a forced purge",
                    self.key,
                    receipt.state_name()
                ));
            }
        }
        self.end_turn();
        if self.crash_point() {
            return never().await;
        }
        Ok(deleted.is_some())
    }

    fn stored_deletable_at(&self) -> Result<Option<u64>, String> {
        if !self.alive() {
            return Err(CRASHED.into());
        }
        Ok(self.world.keys.borrow()[self.key]
            .stored
            .as_ref()
            .and_then(Receipt::deletable_at))
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        if self.begin_write().is_err() {
            return never().await;
        }
        if self.world.now.get() < self.world.faults.alarms_fail_until.get() {
            self.world.count(|counts| counts.alarms_refused += 1);
            self.end_turn();
            return Err("injected alarm failure".into());
        }
        let alarm = self
            .world
            .accept_alarm(at_ms, self.world.rests_on_alarm(self.key));
        self.world
            .note(|| format!("key {}: alarm set {:?}", self.key, alarm));
        {
            let mut keys = self.world.keys.borrow_mut();
            keys[self.key].alarm = Some(alarm);
            keys[self.key].alarm_retries = 0;
        }
        self.end_turn();
        if self.crash_point() {
            return never().await;
        }
        Ok(())
    }

    fn random(&self) -> u64 {
        // Deterministic: the schedule replays from its seed alone.
        self.world.now.get().wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7
    }

    fn new_receipt_id(&self, _now_ms: u64) -> String {
        let id = self.world.receipt_ids.get() + 1;
        self.world.receipt_ids.set(id);
        format!("receipt-{id}")
    }

    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult {
        self.end_turn();
        if !self.alive() {
            return never().await;
        }
        let now = self.world.now.get();
        let epoch: u64 = headers::get(&request.headers, "idempotency-epoch")
            .and_then(|epoch| epoch.parse().ok())
            .unwrap_or(0);
        let fingerprint = Fingerprint::of_bytes(&request.body);
        {
            let mut keys = self.world.keys.borrow_mut();
            let state = &mut keys[self.key];
            let era = state.era;
            let mut problems = Vec::new();
            if epoch <= state.highest_epoch {
                problems.push(format!(
                    "I1 key {}: forward at epoch {epoch} after epoch {}",
                    self.key, state.highest_epoch
                ));
            }
            state.highest_epoch = state.highest_epoch.max(epoch);
            if state
                .stored
                .as_ref()
                .is_some_and(|receipt| receipt.fingerprint != fingerprint)
            {
                problems.push(format!(
                    "I4 key {}: a different payload was forwarded while a receipt existed",
                    self.key
                ));
            }
            if matches!(&state.completed, Some((done, _)) if *done == fingerprint) {
                problems.push(format!(
                    "I3 key {}: a completed key was forwarded again",
                    self.key
                ));
            }
            let live_elsewhere = self.world.calls.borrow().iter().any(|call| {
                call.key == self.key
                    && call.era == era
                    && !call.settled
                    && now < call.lease_until
                    && now < call.deadline
            });
            if live_elsewhere {
                problems.push(format!(
                    "I2 key {}: a second forward while another's lease is live",
                    self.key
                ));
            }
            if let Some(max) = self
                .world
                .flow_limits()
                .and_then(|limits| limits.max_in_flight)
            {
                let at_origin = self.world.forwards_at_origin() + 1;
                if at_origin > max as usize {
                    problems.push(format!(
                        "I11 key {}: {at_origin} forwards at the origin at once under max_in_flight {max}",
                        self.key
                    ));
                }
            }
            drop(keys);
            if self.world.ordered.get() {
                if !self.world.open_calls().is_empty() {
                    problems.push(format!(
                        "I12 key {}: a second forward of the entity while another is at the origin",
                        self.key
                    ));
                }
                let stale = headers::get(&request.headers, "idempotency-stale") == Some("true");
                let time = self.world.order_time_of(&fingerprint);
                let newest = self.world.newest_recorded();
                if let (Some(time), Some(newest)) = (time, newest) {
                    if time < newest && !stale {
                        problems.push(format!(
                            "I13 key {}: an event of time {time} forwarded unmarked after one of {newest} was delivered",
                            self.key
                        ));
                    }
                }
            }
            for problem in problems {
                self.world.violate(problem);
            }
        }
        let outcome = Rc::new(RefCell::new(None));
        let index = {
            let mut calls = self.world.calls.borrow_mut();
            let era = self.world.keys.borrow()[self.key].era;
            calls.push(OriginCall {
                key: self.key,
                era,
                fingerprint,
                lease_until: now + self.world.lease_ms,
                deadline: now + timeout_ms,
                outcome,
                settled: false,
            });
            calls.len() - 1
        };
        if let Some(task) = self.world.polling.get() {
            self.world.calls_by_task.borrow_mut().push((task, index));
        }
        self.world
            .note(|| format!("key {}: forward call {index} epoch {epoch}", self.key));
        if self.world.origin_recovered.get() {
            let body = format!("settled by call {index}").into_bytes();
            self.world.answer(
                index,
                ForwardResult::Answered(HttpResponse {
                    status: 201,
                    headers: vec![("content-type".into(), "text/plain".into())],
                    body,
                }),
            );
        }
        PendingCall {
            world: self.world.clone(),
            index,
        }
        .await
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        self.end_turn();
        let until = match self.alive() {
            true => self.world.now.get() + ms,
            false => u64::MAX,
        };
        Sleep {
            world: self.world.clone(),
            until,
        }
    }

    fn emit(&self, _event: &DecisionLog, _logged: bool) {}

    /// The key's index shard, over the network (each key's row is in one
    /// of [`SIM_SHARDS`], so one table holds them all, and each shard has
    /// its own outages and sweep): the write fails at once, or is sent and
    /// lands now, later (after writes sent after it), or never; its reply
    /// may be lost. A crash may fall before it is sent or after.
    async fn index(
        &self,
        update: IndexUpdate,
        place: &crate::index::shard::IndexPlace,
    ) -> Result<crate::index::IndexWrite, String> {
        self.end_turn();
        let mut outdated = None;
        if !self.alive() || self.crash_point() {
            return never().await;
        }
        let world = &self.world;
        let faults = &world.faults;
        let now = world.now.get();
        let odds = faults.index.get();
        let roll = faults.below(100);
        let delay = 1 + faults.below(faults.index_delay_ms.get().max(1));
        let sent = |lands: bool, reply: Result<(), String>| {
            let done = Rc::new(RefCell::new(None));
            world.index_writes.borrow_mut().push(IndexWrite {
                update: update.clone(),
                land_at: now + delay,
                lands,
                reply,
                done: done.clone(),
            });
            done
        };
        let down = faults.shard_down(place.shard, now);
        let fate = if down || roll < odds.fail {
            "fails"
        } else if roll < odds.fail + odds.lost + odds.late + odds.reply_lost {
            "is late"
        } else {
            "lands"
        };
        world.note(|| format!("key {}: index write {fate}: {}", self.key, brief(&update)));
        let done = if down || roll < odds.fail {
            world.count(|counts| counts.index_failed += 1);
            Rc::new(RefCell::new(Some(Err("injected index failure".into()))))
        } else if roll < odds.fail + odds.lost {
            world.count(|counts| counts.index_lost += 1);
            sent(false, Err("the index write timed out".into()))
        } else if roll < odds.fail + odds.lost + odds.late {
            world.count(|counts| counts.index_late += 1);
            sent(true, Ok(()))
        } else if roll < odds.fail + odds.lost + odds.late + odds.reply_lost {
            world.count(|counts| counts.index_late += 1);
            sent(true, Err("the index's reply was lost".into()))
        } else {
            if let Some(row_version) = world.d1.borrow_mut().apply(&update) {
                outdated = Some(row_version);
            }
            Rc::new(RefCell::new(Some(Ok(()))))
        };
        if self.crash_point() {
            return never().await;
        }
        IndexReply { done }.await.map(|()| match outdated {
            Some(row_version) => crate::index::IndexWrite::Outdated { row_version },
            None => crate::index::IndexWrite::Landed,
        })
    }

    fn index_shards(&self) -> u16 {
        SIM_SHARDS
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        (name == "FORWARD_SECRET").then(|| Secret::new("simulated-forward-secret".into()))
    }

    fn route_policy(&self, _route: &str) -> Option<Policy> {
        self.world.route_policy.borrow().clone()
    }

    /// The route's coordinator, over the network: the call may fail, and
    /// its answer may come back at once or far later, past the lease it
    /// granted (the coordinator meanwhile counts the permit back in and
    /// grants the slot again).
    async fn acquire_permit(
        &self,
        _route: &str,
        request: PermitRequest,
    ) -> Result<PermitReply, String> {
        self.end_turn();
        if !self.alive() || self.crash_point() {
            return never().await;
        }
        let world = &self.world;
        if world.faults.chance(3) {
            return Err("the coordinator could not be reached".into());
        }
        let now = world.now.get();
        let reply = world.flow_call(request.limits, |flow| flow.acquire(&request, now));
        let held = match world.faults.below(100) {
            0..10 => world.faults.below(2 * request.lease_ms + 1),
            _ => 0,
        };
        world.note(|| {
            format!(
                "key {}: coordinator answers {reply:?}, back in {held} ms",
                self.key
            )
        });
        if held > 0 {
            Sleep {
                world: world.clone(),
                until: now + held,
            }
            .await;
        }
        if !self.alive() {
            return never().await;
        }
        Ok(reply)
    }

    /// The entity's book: unreachable at times, its reply late (past
    /// the turn's lease) or lost after it decided.
    async fn order_call(
        &self,
        _object: &str,
        call: crate::order::OrderCall,
    ) -> Result<crate::order::OrderReply, String> {
        self.end_turn();
        if !self.alive() || self.crash_point() {
            return never().await;
        }
        let world = &self.world;
        if world.faults.chance(3) {
            return Err("the order object could not be reached".into());
        }
        let reply = world.order_apply(|book, now| book.apply(&call, now));
        let now = world.now.get();
        let held = match world.faults.below(100) {
            0..10 => world.faults.below(2 * world.lease_ms + 1),
            _ => 0,
        };
        world.note(|| {
            format!(
                "key {}: the book answers {reply:?}, back in {held} ms",
                self.key
            )
        });
        if held > 0 {
            Sleep {
                world: world.clone(),
                until: now + held,
            }
            .await;
        }
        if !self.alive() {
            return never().await;
        }
        if world.faults.chance(3) {
            return Err("the order object's reply was lost".into());
        }
        Ok(reply)
    }

    /// A release may be lost: the permit then waits out its lease.
    async fn release_permit(&self, _route: &str, holder: &str, grant: u64, limits: FlowLimits) {
        self.end_turn();
        if !self.alive() || self.world.faults.chance(5) {
            return;
        }
        let now = self.world.now.get();
        self.world
            .flow_call(limits, |flow| flow.release(holder, grant, limits, now));
    }
}
