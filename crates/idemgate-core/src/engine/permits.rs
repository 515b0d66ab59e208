//! Flow control, as a key's object takes part in it (SPEC §2, v3): a
//! permit from the route's coordinator before each forward, given back
//! once the origin has answered. A sync delivery over a limit is refused
//! before its receipt changes; an async one waits without losing its
//! place or an attempt of its schedule.

use futures::channel::oneshot;

use super::{Backend, Engine};
use crate::answer::Answer;
use crate::decision_log::Trace;
use crate::flow::{
    forward_deadline, forward_timeout, FlowLimits, PermitReply, PermitRequest, LOGGED_WAIT_MS,
    UNREACHABLE_RETRY_MS,
};
use crate::problem::Problem;
use crate::receipt::{DeliveryKind, Receipt};

/// A permit this object holds for one forward.
#[derive(Debug)]
pub(super) struct HeldPermit {
    route: String,
    holder: String,
    grant: u64,
    limits: FlowLimits,
    /// When the forward must have ended (this object's clock): within
    /// the permit's lease at the coordinator.
    deadline: u64,
}

impl HeldPermit {
    /// The forward's timeout under this permit at `now`; `None` when too
    /// little of its lease is left (see [`forward_timeout`]).
    pub(super) fn timeout_ms(&self, now: u64, origin_timeout_ms: u64) -> Option<u64> {
        if crate::mutation::is_active(crate::mutation::Mutation::ForwardPastItsPermit) {
            return Some(origin_timeout_ms);
        }
        forward_timeout(self.deadline, now, origin_timeout_ms)
    }
}

/// What an async attempt may do.
pub(super) enum AttemptPermit {
    /// The route sets no limit.
    Unlimited,
    Held(HeldPermit),
    /// Wait until then (or until the coordinator wakes the object).
    WaitUntil(u64),
}

/// Held while a sync delivery asks for its permit: another delivery of
/// the key that would forward waits for it, then decides again, so that
/// two never forward. Dropping it lets them go.
pub(super) struct ForwardClaim<'a, B: Backend> {
    engine: &'a Engine<B>,
}

impl<B: Backend> Drop for ForwardClaim<'_, B> {
    fn drop(&mut self) {
        for waiting in self.engine.forward_claim.take().unwrap_or_default() {
            let _ = waiting.send(());
        }
    }
}

impl<B: Backend> Engine<B> {
    /// Whether another delivery is asking for a permit to forward this key.
    pub(super) fn forward_claimed(&self) -> bool {
        self.forward_claim.borrow().is_some()
    }

    /// Waits until the delivery asking for a permit has one (and has
    /// stored its receipt in flight) or was refused.
    pub(super) async fn wait_for_forward_claim(&self) {
        let (sender, receiver) = oneshot::channel();
        match self.forward_claim.borrow_mut().as_mut() {
            Some(waiting) => waiting.push(sender),
            None => return,
        }
        let _ = receiver.await;
    }

    /// A sync first delivery asks for its permit; over a limit, or with
    /// the coordinator unreachable, it is refused with nothing stored.
    pub(super) async fn permit_for_sync(
        &self,
        route: &str,
        holder: &str,
        limits: FlowLimits,
        lease_ms: u64,
        origin_timeout_ms: u64,
    ) -> Result<(HeldPermit, ForwardClaim<'_, B>), Answer> {
        *self.forward_claim.borrow_mut() = Some(Vec::new());
        let claim = ForwardClaim { engine: self };
        let asked_at = self.backend.now_ms();
        let margin_ms = lease_ms.saturating_sub(origin_timeout_ms);
        let request = PermitRequest {
            holder: holder.to_string(),
            accepted_at: asked_at,
            lease_ms,
            wait: false,
            limits,
        };
        let busy = |retry_after_ms: u64| {
            Answer::Rejected(Problem::OriginBusy {
                retry_after_secs: retry_after_ms.div_ceil(1_000).max(1),
            })
        };
        match self.backend.acquire_permit(route, request).await {
            Ok(PermitReply::Granted { grant, lease_ms }) => Ok((
                HeldPermit {
                    route: route.to_string(),
                    holder: holder.to_string(),
                    grant,
                    limits,
                    deadline: forward_deadline(asked_at, lease_ms, margin_ms),
                },
                claim,
            )),
            Ok(PermitReply::Busy { retry_after_ms }) => Err(busy(retry_after_ms)),
            Ok(PermitReply::Queued { retry_at }) => {
                Err(busy(retry_at.saturating_sub(self.backend.now_ms())))
            }
            Err(_) => Err(busy(UNREACHABLE_RETRY_MS)),
        }
    }

    /// An async attempt asks for its permit, as the route's limits are now.
    pub(super) async fn permit_for_attempt(&self, receipt: &Receipt) -> AttemptPermit {
        let route = &receipt.identity.route;
        let Some(limits) = self
            .backend
            .route_policy(route)
            .and_then(|policy| policy.flow)
        else {
            return AttemptPermit::Unlimited;
        };
        let terms = self.terms_of(receipt);
        let request = PermitRequest {
            holder: receipt.identity.object.clone(),
            accepted_at: receipt.first_seen_at,
            lease_ms: terms.lease_ms,
            wait: true,
            limits,
        };
        let now = self.backend.now_ms();
        match self.backend.acquire_permit(route, request).await {
            Ok(PermitReply::Granted { grant, lease_ms }) => AttemptPermit::Held(HeldPermit {
                route: route.clone(),
                holder: receipt.identity.object.clone(),
                grant,
                limits,
                deadline: forward_deadline(
                    now,
                    lease_ms,
                    terms.lease_ms.saturating_sub(terms.origin_timeout_ms),
                ),
            }),
            Ok(PermitReply::Queued { retry_at }) => AttemptPermit::WaitUntil(retry_at),
            Ok(PermitReply::Busy { retry_after_ms }) => {
                AttemptPermit::WaitUntil(now.saturating_add(retry_after_ms))
            }
            // A limit that cannot be checked delays; it never lets a
            // burst through.
            Err(_) => AttemptPermit::WaitUntil(now.saturating_add(UNREACHABLE_RETRY_MS)),
        }
    }

    /// The attempt waits for its permit until `at`: stored with its
    /// schedule untouched, the alarm and the index row moved to `at` (a
    /// wait is not overdue for the sweep).
    pub(super) async fn wait_for_permit(&self, receipt: Receipt, at: u64) -> Result<(), String> {
        self.wait_until(receipt, at, "waiting_for_permit").await
    }

    /// The attempt waits for its entity's turn (SPEC §12), as for a
    /// permit: no step of its schedule is used.
    pub(super) async fn wait_for_turn(&self, receipt: Receipt, at: u64) -> Result<(), String> {
        self.wait_until(receipt, at, "waiting_for_order").await
    }

    async fn wait_until(
        &self,
        mut receipt: Receipt,
        at: u64,
        logged: &'static str,
    ) -> Result<(), String> {
        let now = self.backend.now_ms();
        let first_wait = receipt.waiting_for_permit_since.is_none();
        receipt.wait_for_permit(at, now);
        let index = self.plan_index(&mut receipt);
        self.store(receipt.clone())?;
        self.set_alarm(at).await?;
        self.write_index(index).await;
        if first_wait {
            self.emit_change(logged, &receipt, Trace::default());
        }
        Ok(())
    }

    /// Logs a delivery that waited for its permit longer than a second.
    pub(super) fn note_wait(&self, receipt: &Receipt, now: u64) {
        if let Some(since) = receipt.waiting_for_permit_since {
            let waited_ms = now.saturating_sub(since);
            if waited_ms > LOGGED_WAIT_MS {
                self.emit_change(
                    "waited_for_permit",
                    receipt,
                    Trace {
                        waited_ms: Some(waited_ms),
                        ..Trace::default()
                    },
                );
            }
        }
    }

    /// Gives a permit back once the origin has answered.
    pub(super) async fn release(&self, permit: Option<HeldPermit>) {
        if let Some(permit) = permit {
            self.backend
                .release_permit(&permit.route, &permit.holder, permit.grant, permit.limits)
                .await;
        }
    }

    /// The coordinator reserved this object's permit. The wake only
    /// schedules the waiting delivery's attempt (its alarm, now) and is
    /// answered at once: the coordinator never waits on a forward, and a
    /// wake is never late because another is slow. An attempt asking for
    /// its permit right now asks again instead. Anything else is left as
    /// it is (a wake may come late, or twice). The wake itself lives only
    /// in memory: an object that restarts before its alarm asks again
    /// when its wait ends, as after a lost wake.
    pub async fn permit_ready(&self) -> Result<(), String> {
        self.woken.set(true);
        if self.attempting.get() {
            return Ok(());
        }
        let waiting = self.with_receipt(|receipt| {
            receipt.as_ref().is_some_and(|receipt| {
                receipt.delivery == DeliveryKind::Async
                    && receipt.waiting_for_permit_since.is_some()
                    && receipt.is_pending()
            })
        })?;
        match waiting {
            true => self.set_alarm(self.backend.now_ms()).await,
            false => {
                self.woken.set(false);
                Ok(())
            }
        }
    }
}
