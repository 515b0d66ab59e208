//! The simulated world: a virtual clock, per-key storage that survives
//! restarts, an origin whose every call the scheduler answers, and the
//! bookkeeping the invariants are checked against.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::canonical::Fingerprint;
use crate::decision_log::DecisionLog;
use crate::engine::{Backend, Policy, StoredRequest};
use crate::headers;
use crate::index::IndexUpdate;
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

/// What the simulation knows about one key.
#[derive(Default)]
pub struct KeyState {
    pub stored: Option<Receipt>,
    pub request: Option<StoredRequest>,
    pub alarm: Option<u64>,
    /// Bumped whenever the key becomes new (first forward, purge, expiry).
    pub era: u64,
    /// The highest epoch ever forwarded for the key, across eras: an
    /// origin may fence on it forever.
    pub highest_epoch: u64,
    /// The stored response once the receipt completed, in this era.
    pub completed: Option<(Fingerprint, HttpResponse)>,
    /// When the origin accepted (2xx) which payload, in this era.
    pub accepted: Vec<(Fingerprint, u64)>,
}

pub struct World {
    pub now: Cell<u64>,
    pub lease_ms: u64,
    pub keys: RefCell<Vec<KeyState>>,
    pub calls: RefCell<Vec<OriginCall>>,
    /// The task being polled, to attribute forwards to deliveries.
    pub polling: Cell<Option<usize>>,
    pub calls_by_task: RefCell<Vec<(usize, usize)>>,
    /// How many of the next storage writes fail.
    pub failing_writes: Cell<u32>,
    /// Receipt ids handed out so far.
    pub receipt_ids: Cell<u64>,
    pub violations: RefCell<Vec<String>>,
}

impl World {
    pub fn new(keys: usize, lease_ms: u64, now: u64) -> World {
        World {
            now: Cell::new(now),
            lease_ms,
            keys: RefCell::new((0..keys).map(|_| KeyState::default()).collect()),
            calls: RefCell::new(Vec::new()),
            polling: Cell::new(None),
            calls_by_task: RefCell::new(Vec::new()),
            failing_writes: Cell::new(0),
            receipt_ids: Cell::new(0),
            violations: RefCell::new(Vec::new()),
        }
    }

    pub fn violate(&self, message: String) {
        self.violations.borrow_mut().push(message);
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
                self.keys.borrow_mut()[call.key]
                    .accepted
                    .push((call.fingerprint.clone(), self.now.get()));
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
}

/// One Durable Object's view of the world.
pub struct SimBackend {
    pub world: Rc<World>,
    pub key: usize,
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

impl Backend for SimBackend {
    fn now_ms(&self) -> u64 {
        self.world.now.get()
    }

    fn load(&self) -> Result<Option<Receipt>, String> {
        Ok(self.world.keys.borrow()[self.key].stored.clone())
    }

    fn save(&self, receipt: &Receipt) -> Result<(), String> {
        if self.world.failing_writes.get() > 0 {
            self.world
                .failing_writes
                .set(self.world.failing_writes.get() - 1);
            return Err("injected write failure".into());
        }
        let now = self.world.now.get();
        let mut keys = self.world.keys.borrow_mut();
        let state = &mut keys[self.key];
        let live = state.stored.as_ref().filter(|old| !old.is_expired(now));
        let begins_forward = matches!(receipt.state, ReceiptState::InFlight { .. })
            && live.is_none_or(|old| {
                old.epoch != receipt.epoch || !matches!(old.state, ReceiptState::InFlight { .. })
            });
        if begins_forward {
            match live {
                None => {
                    state.era += 1;
                    state.completed = None;
                    state.accepted.clear();
                }
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
        Ok(())
    }

    fn save_request(&self, request: &StoredRequest) -> Result<(), String> {
        if self.world.failing_writes.get() > 0 {
            return Err("injected write failure".into());
        }
        self.world.keys.borrow_mut()[self.key].request = Some(request.clone());
        Ok(())
    }

    fn load_request(&self) -> Result<Option<StoredRequest>, String> {
        Ok(self.world.keys.borrow()[self.key].request.clone())
    }

    fn delete_request(&self) -> Result<(), String> {
        self.world.keys.borrow_mut()[self.key].request = None;
        Ok(())
    }

    async fn delete_all(&self) -> Result<bool, String> {
        let mut keys = self.world.keys.borrow_mut();
        let state = &mut keys[self.key];
        let existed = state.stored.is_some();
        state.stored = None;
        state.request = None;
        state.alarm = None;
        state.completed = None;
        state.era += 1;
        Ok(existed)
    }

    fn stored_deletable_at(&self) -> Result<Option<u64>, String> {
        Ok(self.world.keys.borrow()[self.key]
            .stored
            .as_ref()
            .and_then(Receipt::deletable_at))
    }

    async fn set_alarm(&self, at_ms: u64) -> Result<(), String> {
        self.world.keys.borrow_mut()[self.key].alarm = Some(at_ms);
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
            drop(keys);
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
        PendingCall {
            world: self.world.clone(),
            index,
        }
        .await
    }

    fn sleep(&self, ms: u64) -> impl Future<Output = ()> {
        Sleep {
            world: self.world.clone(),
            until: self.world.now.get() + ms,
        }
    }

    fn emit(&self, _event: &DecisionLog, _logged: bool) {}

    async fn index(&self, _update: IndexUpdate) -> Result<(), String> {
        Ok(())
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        (name == "FORWARD_SECRET").then(|| Secret::new("simulated-forward-secret".into()))
    }

    fn route_policy(&self, _route: &str) -> Option<Policy> {
        None
    }
}
