//! An in-memory [`Backend`]: a virtual clock, a receipt slot, a scripted
//! origin and switchable storage failures. It lets the engine's logic run
//! in plain `cargo test`, and counts every storage operation. Tests only.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use futures::channel::oneshot;

use crate::decision_log::DecisionLog;
use crate::delivery::DeliveryRequest;
use crate::engine::{Backend, Policy, StorageOps};
use crate::flow::{Coordinator, FlowLimits, PermitReply, PermitRequest};
use crate::index::shard::IndexPlace;
use crate::index::{IndexUpdate, IndexWrite};
use crate::order::{OrderBook, OrderCall, OrderReply};
use crate::origin::OutboundRequest;
use crate::receipt::{ForwardResult, HttpResponse, Receipt};
use crate::signature::Secret;

#[derive(Default)]
pub struct MemoryBackend {
    pub now: Rc<Cell<u64>>,
    pub stored: RefCell<Option<Receipt>>,
    /// The receipt's record as text, when a test stores one that does not parse.
    pub corrupt: Cell<bool>,
    pub request: RefCell<Option<DeliveryRequest>>,
    pub alarm: Cell<Option<u64>>,
    pub fail_writes: Cell<bool>,
    /// Fails alarm writes only (storage writes succeed).
    pub fail_alarms: Cell<bool>,
    /// Fails the receipt's writes only (a row too large, say).
    pub fail_receipt_writes: Cell<bool>,
    pub fail_index: Cell<bool>,
    /// Where each index write went.
    pub index_places: RefCell<Vec<IndexPlace>>,
    /// `INDEX_SHARDS`.
    pub index_shards: Cell<u16>,
    /// Index writes that wait for the test to let them land, in order.
    pub index_gates: RefCell<VecDeque<oneshot::Receiver<()>>>,
    /// Answers the origin gives, in order; a 201 when the script runs out.
    pub script: RefCell<VecDeque<ForwardResult>>,
    pub forwarded: RefCell<Vec<OutboundRequest>>,
    /// The timeout each forward was sent with.
    pub timeouts: RefCell<Vec<u64>>,
    pub ops: Cell<StorageOps>,
    /// Events emitted, and whether each was a log line.
    pub events: RefCell<Vec<(DecisionLog, bool)>>,
    pub index: RefCell<Vec<IndexUpdate>>,
    /// What the engine told health of its rows.
    pub row_reports: RefCell<Vec<crate::index::owed::RowReport>>,
    /// A version every row of the index already holds, as one written
    /// before the clock stepped back would: a write at or below it, or
    /// below a write that landed, changes nothing, as in D1.
    pub index_row_version: Cell<u64>,
    /// The receipt as stored when each forward was sent.
    pub stored_at_send: RefCell<Vec<Option<Receipt>>>,
    /// Forwards that wait for the test to answer them, in order.
    pub gates: RefCell<VecDeque<oneshot::Receiver<ForwardResult>>>,
    /// Sleeps wait for the test to move the clock, instead of moving it.
    pub manual_clock: Cell<bool>,
    /// Worker secrets by name.
    pub secrets: RefCell<Vec<(String, Secret)>>,
    /// The route's flow coordinator, shared by the backends of several
    /// keys in a test; created at the first permit asked for.
    pub flow: Rc<RefCell<Option<Coordinator>>>,
    pub flow_unreachable: Cell<bool>,
    /// Permit requests that wait for the test to let them through.
    pub flow_gates: RefCell<VecDeque<oneshot::Receiver<()>>>,
    /// Permit replies, already decided by the coordinator, that wait for
    /// the test to deliver them.
    pub flow_reply_gates: RefCell<VecDeque<oneshot::Receiver<()>>>,
    /// Random bits from a sequence (SplitMix64 from this seed) rather than
    /// the constant that gives no jitter.
    pub random_seed: Cell<Option<u64>>,
    /// Routes' current policies by name (for receipts without terms).
    pub routes: RefCell<Vec<(String, Policy)>>,
    /// Entities' order books by object name, shared by the backends of
    /// several keys in a test (SPEC §12).
    pub order: Rc<RefCell<BTreeMap<String, OrderBook>>>,
    pub order_unreachable: Cell<bool>,
    /// Holders the books asked to wake (the book's name, the holder's),
    /// in order, shared likewise.
    pub order_wakes: Rc<RefCell<Vec<(String, String)>>>,
    /// This object's entity and its own name, when ordered: each forward
    /// is checked to go under the entity's live turn, held by this object.
    pub order_holder: RefCell<Option<(String, String)>>,
    /// Forwards that went without that turn.
    pub forwards_out_of_turn: Cell<u64>,
}

/// A sleep that ends when the test has moved the clock far enough.
pub struct ClockSleep {
    now: Rc<Cell<u64>>,
    until: u64,
    /// Whether the sleep moves the clock on itself (a clock no test
    /// drives): when first polled, so that a sleep raced against work
    /// that ends first leaves the clock where it was.
    advances: bool,
}

impl Future for ClockSleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.advances && self.now.get() < self.until {
            self.now.set(self.until);
        }
        if self.now.get() >= self.until {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl MemoryBackend {
    pub fn new(now: u64) -> MemoryBackend {
        let backend = MemoryBackend::default();
        backend.now.set(now);
        backend.index_shards.set(1);
        backend
    }

    /// Permits of the shared coordinator counted now.
    pub fn flow_in_use(&self) -> usize {
        self.flow.borrow().as_ref().map_or(0, Coordinator::in_use)
    }

    pub fn set_secret(&self, name: &str, value: &str) {
        self.secrets.borrow_mut().retain(|(known, _)| known != name);
        self.secrets
            .borrow_mut()
            .push((name.to_string(), Secret::new(value.to_string())));
    }

    pub fn answer_with(&self, result: ForwardResult) {
        self.script.borrow_mut().push_back(result);
    }

    fn count(&self, bump: impl FnOnce(&mut StorageOps)) {
        StorageOps::bump(&self.ops, bump);
    }

    fn write_allowed(&self) -> Result<(), String> {
        self.count(|ops| ops.writes += 1);
        if self.fail_writes.get() {
            Err("injected write failure".into())
        } else {
            Ok(())
        }
    }

    /// The index as D1 keeps it after every write landed in the order it
    /// was made: by object, the state of the highest version (`gone` for
    /// a tombstone).
    pub fn index_rows(&self) -> Vec<(String, String)> {
        let mut rows: Vec<(String, String, u64)> = Vec::new();
        for update in self.index.borrow().iter() {
            let (object, state) = match update {
                IndexUpdate::Upsert(row) => (row.identity.object.clone(), row.state.clone()),
                IndexUpdate::Remove { object, .. } => (object.clone(), "gone".into()),
            };
            match rows.iter_mut().find(|(known, _, _)| *known == object) {
                Some(row) if row.2 < update.version() => *row = (object, state, update.version()),
                Some(_) => {}
                None => rows.push((object, state, update.version())),
            }
        }
        rows.into_iter()
            .map(|(object, state, _)| (object, state))
            .collect()
    }

    /// The decisions logged, in order.
    pub fn logged(&self) -> Vec<&'static str> {
        self.events
            .borrow()
            .iter()
            .filter(|(_, logged)| *logged)
            .map(|(event, _)| event.decision)
            .collect()
    }

    /// Every decision counted, logged or not.
    pub fn counted(&self) -> Vec<&'static str> {
        self.events
            .borrow()
            .iter()
            .map(|(event, _)| event.decision)
            .collect()
    }
}

pub fn created(body: &str) -> ForwardResult {
    ForwardResult::Answered(HttpResponse {
        status: 201,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.as_bytes().to_vec(),
    })
}

impl Backend for MemoryBackend {
    fn storage_ops(&self) -> StorageOps {
        self.ops.get()
    }

    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        self.count(|ops| ops.reads += 1);
        if self.corrupt.get() {
            return Err("the stored receipt does not parse".into());
        }
        Ok(self.stored.borrow().clone())
    }

    fn save(&self, receipt: &Receipt, request: Option<&DeliveryRequest>) -> Result<(), String> {
        self.write_allowed()?;
        if self.fail_receipt_writes.get() {
            return Err("injected receipt write failure".into());
        }
        *self.stored.borrow_mut() = Some(receipt.clone());
        if let Some(request) = request {
            *self.request.borrow_mut() = Some(request.clone());
        }
        if !receipt.keeps_request() {
            *self.request.borrow_mut() = None;
        }
        self.corrupt.set(false);
        Ok(())
    }

    fn load_request(&self) -> Result<Option<DeliveryRequest>, String> {
        self.count(|ops| ops.reads += 1);
        Ok(self.request.borrow().clone())
    }

    async fn delete_all(&self) -> Result<bool, String> {
        self.write_allowed()?;
        let existed = self.stored.borrow().is_some();
        *self.stored.borrow_mut() = None;
        *self.request.borrow_mut() = None;
        self.alarm.set(None);
        self.corrupt.set(false);
        Ok(existed)
    }

    fn stored_deletable_at(&self) -> Result<Option<u64>, String> {
        Ok(self
            .stored
            .borrow()
            .as_ref()
            .and_then(Receipt::deletable_at))
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        self.count(|ops| ops.alarm_writes += 1);
        if self.fail_writes.get() || self.fail_alarms.get() {
            return Err("injected alarm failure".into());
        }
        self.alarm.set(Some(at_ms));
        Ok(())
    }

    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult {
        if let Some((entity, holder)) = self.order_holder.borrow().as_ref() {
            let books = self.order.borrow();
            let in_turn = books
                .get(entity)
                .is_some_and(|book| book.turn_is(holder, self.now.get()));
            if !in_turn {
                self.forwards_out_of_turn
                    .set(self.forwards_out_of_turn.get() + 1);
            }
        }
        self.forwarded.borrow_mut().push(request);
        self.timeouts.borrow_mut().push(timeout_ms);
        self.stored_at_send
            .borrow_mut()
            .push(self.stored.borrow().clone());
        let gate = self.gates.borrow_mut().pop_front();
        if let Some(gate) = gate {
            return gate.await.unwrap_or(ForwardResult::TimedOut);
        }
        self.script
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| created(r#"{"payment_id":"pay_1"}"#))
    }

    /// Virtual time: sleeping moves the clock and returns at once, or
    /// with a manual clock waits for the test to move it.
    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        ClockSleep {
            now: self.now.clone(),
            until: self.now.get() + ms,
            advances: !self.manual_clock.get(),
        }
    }

    fn random(&self) -> u64 {
        let Some(seed) = self.random_seed.get() else {
            return 10; // no jitter: 90 + 10 = 100% of each delay
        };
        let next = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        self.random_seed.set(Some(next));
        let mut z = next;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn new_receipt_id(&self, now_ms: u64) -> String {
        format!("receipt-{now_ms}")
    }

    fn emit(&self, event: &DecisionLog, logged: bool) {
        self.events.borrow_mut().push((event.clone(), logged));
    }

    fn report_row(&self, report: crate::index::owed::RowReport) {
        self.row_reports.borrow_mut().push(report);
    }

    fn index_shards(&self) -> u16 {
        self.index_shards.get()
    }

    async fn index(&self, update: IndexUpdate, place: &IndexPlace) -> Result<IndexWrite, String> {
        self.count(|ops| ops.index_writes += 1);
        self.index_places.borrow_mut().push(place.clone());
        let gate = self.index_gates.borrow_mut().pop_front();
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        if self.fail_index.get() {
            return Err("injected index failure".into());
        }
        let row_version = self
            .index
            .borrow()
            .iter()
            .filter(|landed| landed.object() == update.object())
            .map(IndexUpdate::version)
            .max()
            .unwrap_or(0)
            .max(self.index_row_version.get());
        if update.version() <= row_version {
            return Ok(IndexWrite::Outdated { row_version });
        }
        self.index.borrow_mut().push(update);
        Ok(IndexWrite::Landed)
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        self.secrets
            .borrow()
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, secret)| secret.clone())
    }

    fn route_policy(&self, route: &str) -> Option<Policy> {
        self.routes
            .borrow()
            .iter()
            .find(|(known, _)| known == route)
            .map(|(_, policy)| policy.clone())
    }

    async fn acquire_permit(
        &self,
        _route: &str,
        request: PermitRequest,
    ) -> Result<PermitReply, String> {
        let gate = self.flow_gates.borrow_mut().pop_front();
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        if self.flow_unreachable.get() {
            return Err("the coordinator could not be reached".into());
        }
        let now = self.now.get();
        let reply = {
            let mut flow = self.flow.borrow_mut();
            let coordinator = flow.get_or_insert_with(|| Coordinator::new(request.limits, now));
            coordinator.acquire(&request, now)
        };
        let gate = self.flow_reply_gates.borrow_mut().pop_front();
        if let Some(gate) = gate {
            let _ = gate.await;
        }
        Ok(reply)
    }

    async fn order_call(&self, object: &str, call: OrderCall) -> Result<OrderReply, String> {
        if self.order_unreachable.get() {
            return Err("the order object could not be reached".into());
        }
        let now = self.now.get();
        let mut books = self.order.borrow_mut();
        let book = books.entry(object.to_string()).or_default();
        let reply = match call {
            OrderCall::Ask(ask) => book.ask(&ask, now),
            OrderCall::Done {
                ask,
                grant,
                outcome,
            } => {
                book.done(&ask, grant, outcome, now);
                OrderReply::Noted
            }
        };
        let wakes = book.take_wakes().into_iter();
        self.order_wakes
            .borrow_mut()
            .extend(wakes.map(|holder| (object.to_string(), holder)));
        Ok(reply)
    }

    async fn release_permit(&self, _route: &str, holder: &str, grant: u64, limits: FlowLimits) {
        if self.flow_unreachable.get() {
            return;
        }
        if let Some(coordinator) = self.flow.borrow_mut().as_mut() {
            coordinator.release(holder, grant, limits, self.now.get());
        }
    }
}
