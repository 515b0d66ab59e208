//! The Durable Object's logic, written against a small [`Backend`] trait:
//! the real backend wraps Durable Object storage, alarms, timers and fetch
//! ([`crate::dedup_object`]); tests and simulations bring their own.
//!
//! One engine serves one key. Storage calls are synchronous (SQLite-backed
//! Durable Object storage), so a decision and the write that follows it run
//! with no other delivery in between: that is the serialisation the
//! gateway relies on. Waiters and the receipt cache are in memory only and
//! are rebuilt from storage after a restart.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::{select, Either};

use crate::answer::{Answer, Settled};
use crate::canonical::Fingerprint;
use crate::config::{Config, InFlightPolicy};
use crate::key::IdempotencyKey;
use crate::origin::OutboundRequest;
use crate::problem::Problem;
use crate::receipt::{decide, retry_after_secs, Decision, ForwardResult, Receipt};

/// What the engine needs from the world.
#[allow(async_fn_in_trait)] // single-threaded (wasm32): no Send bound wanted
pub trait Backend {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    fn load(&self) -> Result<Option<Receipt>, String>;
    fn save(&self, receipt: &Receipt) -> Result<(), String>;
    fn delete(&self) -> Result<(), String>;
    async fn scheduled_alarm(&self) -> Result<Option<u64>, String>;
    async fn set_alarm(&self, at_ms: u64) -> Result<(), String>;
    /// Sends the request; gives up after `timeout_ms` with `TimedOut`.
    async fn forward(&self, request: OutboundRequest, timeout_ms: u64) -> ForwardResult;
    fn sleep(&self, ms: u64) -> impl Future<Output = ()>;
}

/// The part of the configuration the Durable Object acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub in_flight: InFlightPolicy,
    pub wait_ms: u64,
    pub origin_timeout_ms: u64,
    pub lease_ms: u64,
    pub retention_ms: u64,
    pub max_stored_response_bytes: u64,
    pub forward_secret: Option<String>,
}

impl From<&Config> for Policy {
    fn from(config: &Config) -> Policy {
        Policy {
            in_flight: config.in_flight,
            wait_ms: config.wait_ms,
            origin_timeout_ms: config.origin_timeout_ms,
            lease_ms: config.lease_ms,
            retention_ms: config.retention_seconds * 1000,
            max_stored_response_bytes: config.max_stored_response_bytes,
            forward_secret: config.forward_secret.clone(),
        }
    }
}

/// One admitted delivery, as handed to the key's Durable Object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    /// The request to send if this delivery is forwarded, without
    /// idemgate's idempotency headers (the epoch is not known yet).
    pub request: OutboundRequest,
}

pub struct Engine<B: Backend> {
    backend: B,
    /// `None` until storage was read once; then the receipt as stored, plus
    /// the duplicates counted since the last write.
    cache: RefCell<Option<Option<Receipt>>>,
    waiters: RefCell<Vec<oneshot::Sender<Settled>>>,
    alarm_known: Cell<bool>,
}

impl<B: Backend> Engine<B> {
    pub fn new(backend: B) -> Engine<B> {
        Engine {
            backend,
            cache: RefCell::new(None),
            waiters: RefCell::new(Vec::new()),
            alarm_known: Cell::new(false),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub async fn deliver(&self, delivery: Delivery, policy: &Policy) -> Answer {
        let wait_deadline = self.backend.now_ms() + policy.wait_ms;
        let mut counted = false;
        loop {
            let now = self.backend.now_ms();
            let decided = self.with_receipt(|receipt| {
                let decision = decide(receipt.as_ref(), &delivery.fingerprint, now);
                let duplicate = matches!(decision, Decision::Replay | Decision::InFlight { .. });
                if let (true, false, Some(receipt)) = (duplicate, counted, receipt.as_mut()) {
                    receipt.duplicates += 1;
                }
                let stored = match decision {
                    Decision::Replay => {
                        receipt.as_ref().and_then(Receipt::stored_response).cloned()
                    }
                    _ => None,
                };
                (decision, stored)
            });
            let (decision, stored) = match decided {
                Ok(decided) => decided,
                Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
            };
            match decision {
                Decision::Forward { epoch, .. } => {
                    return self.forward(delivery, epoch, policy).await;
                }
                Decision::Mismatch => return Answer::Rejected(Problem::FingerprintMismatch),
                Decision::Replay => {
                    let stored = stored.expect("a completed receipt has a response");
                    return Answer::Replayed(stored);
                }
                Decision::InFlight { lease_expires_at } => {
                    counted = true;
                    let retry_after_secs = retry_after_secs(lease_expires_at, now);
                    match policy.in_flight {
                        InFlightPolicy::Conflict => {
                            return Answer::Rejected(Problem::InFlight { retry_after_secs })
                        }
                        InFlightPolicy::Ack => return Answer::Acknowledged,
                        InFlightPolicy::Wait if now >= wait_deadline => {
                            return Answer::Rejected(Problem::InFlight { retry_after_secs })
                        }
                        InFlightPolicy::Wait => {
                            // Wake at the outcome, at the wait deadline, or when the
                            // lease ends; after a lease end, decide again (takeover).
                            let until = wait_deadline.min(lease_expires_at);
                            if let Some(settled) = self.wait_for_outcome(until - now).await {
                                return Answer::Waited(settled);
                            }
                        }
                    }
                }
            }
        }
    }

    /// Runs `f` on the cached receipt, reading storage the first time.
    fn with_receipt<T>(&self, f: impl FnOnce(&mut Option<Receipt>) -> T) -> Result<T, String> {
        let mut cache = self.cache.borrow_mut();
        if cache.is_none() {
            *cache = Some(self.backend.load()?);
        }
        Ok(f(cache.as_mut().expect("filled above")))
    }

    /// Writes `receipt`; on failure the cache is dropped, so the next
    /// delivery decides from what storage really holds.
    fn store(&self, receipt: Receipt) -> Result<(), String> {
        match self.backend.save(&receipt) {
            Ok(()) => {
                *self.cache.borrow_mut() = Some(Some(receipt));
                Ok(())
            }
            Err(message) => {
                *self.cache.borrow_mut() = None;
                Err(message)
            }
        }
    }

    async fn forward(&self, delivery: Delivery, epoch: u64, policy: &Policy) -> Answer {
        let now = self.backend.now_ms();
        let previous = match self.with_receipt(Option::take) {
            Ok(previous) => previous,
            Err(message) => return Answer::Rejected(Problem::StorageUnavailable { message }),
        };
        let receipt = Receipt::begin_forward(
            previous,
            delivery.fingerprint,
            epoch,
            now,
            policy.lease_ms,
            policy.retention_ms,
        );
        let deadline = receipt.next_deadline();
        // The receipt is durable before anything is sent: a restart after
        // this point never forgets that the key was accepted.
        if let Err(message) = self.store(receipt) {
            return Answer::Rejected(Problem::StorageUnavailable { message });
        }
        self.ensure_alarm(deadline).await;

        let request = delivery.request.with_idempotency(
            &delivery.key,
            epoch,
            policy.forward_secret.as_deref(),
            now / 1000,
        );
        let result = self
            .backend
            .forward(request, policy.origin_timeout_ms)
            .await;
        self.record(epoch, &result, policy);

        let settled = match result {
            ForwardResult::Answered(response) => Settled::Response(Rc::new(response)),
            ForwardResult::TimedOut => Settled::Problem(Problem::OriginTimeout {
                after_ms: policy.origin_timeout_ms,
            }),
            ForwardResult::Unreachable(message) => {
                Settled::Problem(Problem::OriginUnreachable { message })
            }
        };
        for waiter in self.waiters.borrow_mut().drain(..) {
            let _ = waiter.send(settled.clone());
        }
        Answer::Forwarded(settled)
    }

    /// Stores the outcome of the forward at `epoch`, unless a later forward
    /// took the key over meanwhile. The caller gets the origin's answer
    /// either way: it happened, whether or not it could be recorded.
    fn record(&self, epoch: u64, result: &ForwardResult, policy: &Policy) {
        let now = self.backend.now_ms();
        let recorded = self.with_receipt(|slot| {
            let mut receipt = slot.clone()?;
            receipt
                .record(
                    epoch,
                    result,
                    now,
                    policy.retention_ms,
                    policy.max_stored_response_bytes,
                )
                .ok()?;
            Some(receipt)
        });
        if let Ok(Some(receipt)) = recorded {
            // A failed write leaves the key in flight until its lease ends;
            // the next delivery then forwards again with a higher epoch.
            let _ = self.store(receipt);
        }
    }

    async fn wait_for_outcome(&self, ms: u64) -> Option<Settled> {
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = self.waiters.borrow_mut();
            waiters.retain(|waiter| !waiter.is_canceled());
            waiters.push(sender);
        }
        let timeout = std::pin::pin!(self.backend.sleep(ms));
        match select(receiver, timeout).await {
            Either::Left((Ok(settled), _)) => Some(settled),
            _ => None,
        }
    }

    /// Makes sure an alarm is set; it reschedules itself until the receipt
    /// is due, so one alarm per key is enough. One storage read per
    /// object lifetime tells whether one is already set.
    async fn ensure_alarm(&self, at_ms: u64) {
        if self.alarm_known.get() {
            return;
        }
        let scheduled = self.backend.scheduled_alarm().await.ok().flatten();
        if scheduled.is_some() || self.backend.set_alarm(at_ms).await.is_ok() {
            self.alarm_known.set(true);
        }
    }

    /// The retention alarm: deletes the receipt once it is due, otherwise
    /// sets the alarm again for when it will be. Late or repeated alarms
    /// are harmless.
    pub async fn on_alarm(&self) -> Result<(), String> {
        self.alarm_known.set(false);
        let now = self.backend.now_ms();
        let due = self.with_receipt(|receipt| {
            receipt
                .as_ref()
                .map(|receipt| (receipt.is_expired(now), receipt.next_deadline()))
        })?;
        match due {
            None => Ok(()),
            Some((true, _)) => {
                self.backend.delete()?;
                *self.cache.borrow_mut() = Some(None);
                Ok(())
            }
            Some((false, deadline)) => {
                self.backend.set_alarm(deadline).await?;
                self.alarm_known.set(true);
                Ok(())
            }
        }
    }

    /// The receipt as the operator API shows it, duplicates included.
    pub fn receipt(&self) -> Result<Option<Receipt>, String> {
        let now = self.backend.now_ms();
        self.with_receipt(|receipt| receipt.clone().filter(|r| !r.is_expired(now)))
    }

    /// Deletes the receipt; returns whether there was one.
    pub fn purge(&self) -> Result<bool, String> {
        let existed = self.receipt()?.is_some();
        self.backend.delete()?;
        *self.cache.borrow_mut() = Some(None);
        Ok(existed)
    }
}
