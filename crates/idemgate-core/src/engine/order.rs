//! Order per entity, as a key's object takes part in it (SPEC §12, v4):
//! before each attempt of an ordered delivery, its turn from the entity's
//! order object; after it, how it ended. Waiting for the turn is not an
//! attempt: the delivery keeps its schedule, as it does waiting for a
//! flow permit.

use super::{Backend, Engine};
use crate::decision_log::Trace;
use crate::flow::{forward_deadline, forward_timeout, UNREACHABLE_RETRY_MS};
use crate::order::{Ask, HolderStatus, OrderCall, OrderReply, OrderTicket, Outcome};
use crate::receipt::{AsyncTerms, DeliveryKind, Receipt, ReceiptState, Recorded};

/// The turn this object holds for one attempt.
#[derive(Debug)]
pub(super) struct HeldTurn {
    object: String,
    ask: Ask,
    grant: u64,
    /// When the forward must have ended (this object's clock).
    deadline: u64,
    /// Older than a delivery of the entity the origin accepted.
    pub(super) stale: bool,
    pub(super) skip_stale: bool,
}

impl HeldTurn {
    /// The forward's timeout under this turn at `now` (see
    /// [`forward_timeout`]).
    pub(super) fn timeout_ms(&self, now: u64, origin_timeout_ms: u64) -> Option<u64> {
        forward_timeout(self.deadline, now, origin_timeout_ms)
    }
}

/// What an attempt may do, as its entity's order says.
pub(super) enum AttemptTurn {
    Unordered,
    Held(HeldTurn),
    /// Wait until then (or until the order object wakes the object).
    WaitUntil(u64),
}

/// How an attempt's outcome reads to the entity's book; `origin_accepted`:
/// the origin answered 2xx.
pub(super) fn outcome_of(recorded: Option<Recorded>, origin_accepted: bool, now: u64) -> Outcome {
    match recorded {
        Some(Recorded::Completed) => Outcome::Delivered,
        Some(Recorded::Dead) => Outcome::Ended,
        Some(Recorded::Retrying { at }) => Outcome::RetryAt(at),
        // The origin has it, recorded or not (purged in flight, or the
        // write failed): a later, older event of the entity is stale. A
        // delivery still pending asks for its turn again.
        Some(Recorded::Failed) | None if origin_accepted => Outcome::Delivered,
        // Not recorded (purged meanwhile, or the write failed): the book
        // keeps its place and asks the holder when it is next due.
        Some(Recorded::Failed) | None => Outcome::RetryAt(now),
    }
}

impl<B: Backend> Engine<B> {
    fn ask_of(receipt: &Receipt, ticket: &OrderTicket, terms: &AsyncTerms) -> Ask {
        Ask {
            holder: receipt.identity.object.clone(),
            time_ms: ticket.time_ms,
            accepted_at: receipt.first_seen_at,
            hold_ms: ticket.hold_ms,
            lease_ms: terms.lease_ms,
            // As long as any delivery of the entity may be re-driven: a
            // dead letter re-driven late is still marked stale if the
            // origin has a newer event.
            retention_ms: terms.retention_ms.max(terms.dead_retention_ms),
        }
    }

    /// An attempt asks for its entity's turn.
    pub(super) async fn turn_for_attempt(
        &self,
        receipt: &Receipt,
        ticket: Option<&OrderTicket>,
        terms: &AsyncTerms,
    ) -> AttemptTurn {
        let Some(ticket) = ticket else {
            return AttemptTurn::Unordered;
        };
        let ask = Self::ask_of(receipt, ticket, terms);
        let asked_at = self.backend.now_ms();
        let reply = self
            .backend
            .order_call(&ticket.object, OrderCall::Ask(ask.clone()))
            .await;
        match reply {
            Ok(OrderReply::Go {
                grant,
                lease_ms,
                stale,
            }) => AttemptTurn::Held(HeldTurn {
                object: ticket.object.clone(),
                ask,
                grant,
                deadline: forward_deadline(
                    asked_at,
                    lease_ms,
                    terms.lease_ms.saturating_sub(terms.origin_timeout_ms),
                ),
                stale,
                skip_stale: ticket.skip_stale,
            }),
            Ok(OrderReply::Wait { retry_at }) => AttemptTurn::WaitUntil(retry_at),
            // An order that cannot be checked delays; it never lets a
            // delivery overtake.
            Ok(OrderReply::Noted) | Err(_) => {
                AttemptTurn::WaitUntil(asked_at.saturating_add(UNREACHABLE_RETRY_MS))
            }
        }
    }

    /// Tells the entity's book how the attempt under `turn` ended. A call
    /// that fails leaves it to the lease: the book asks this object how
    /// the delivery stands before the turn goes on.
    pub(super) async fn give_back_turn(&self, turn: Option<HeldTurn>, outcome: Outcome) {
        if let Some(turn) = turn {
            let call = OrderCall::Done {
                ask: turn.ask,
                grant: Some(turn.grant),
                outcome,
            };
            let _ = self.backend.order_call(&turn.object, call).await;
        }
    }

    /// A stale delivery on a route that skips them ends `superseded`
    /// (SPEC §12): kept, listed and re-drivable as a dead letter.
    pub(super) async fn supersede(
        &self,
        receipt: Receipt,
        turn: HeldTurn,
        terms: &AsyncTerms,
    ) -> Result<(), String> {
        let now = self.backend.now_ms();
        let ended = self.end_unsent(receipt, now, terms, true).await;
        let outcome = match ended {
            Ok(()) => Outcome::Ended,
            Err(_) => Outcome::RetryAt(now),
        };
        self.give_back_turn(Some(turn), outcome).await;
        ended
    }

    /// An ordered delivery that is purged leaves its entity's book, so the
    /// deliveries behind it need not wait for the book to notice.
    pub(super) async fn leave_order(&self, receipt: &Receipt) {
        let Ok(Some(request)) = self.backend.load_request() else {
            return;
        };
        let Some(ticket) = request.order else {
            return;
        };
        let ask = Self::ask_of(receipt, &ticket, &self.terms_of(receipt));
        let call = OrderCall::Done {
            ask,
            grant: None,
            outcome: Outcome::Ended,
        };
        let _ = self.backend.order_call(&ticket.object, call).await;
    }

    /// How this object's delivery stands, as the entity's book asks.
    pub fn holder_status(&self) -> Result<HolderStatus, String> {
        let now = self.backend.now_ms();
        self.with_receipt(|receipt| match receipt.as_ref() {
            Some(receipt) if receipt.is_pending() => HolderStatus::Pending,
            Some(receipt)
                if receipt.delivery == DeliveryKind::Async
                    && !receipt.is_expired(now)
                    && matches!(receipt.state, ReceiptState::Completed { .. }) =>
            {
                HolderStatus::Delivered
            }
            _ => HolderStatus::Ended,
        })
    }

    /// The entity's book woke this object: its turn has come, or the book
    /// asks how its delivery stands. A waiting delivery is attempted now
    /// (as a flow wake does); the answer is how it stands.
    pub async fn order_ready(&self) -> Result<HolderStatus, String> {
        self.permit_ready().await?;
        self.holder_status()
    }

    /// Counts and logs an accepted delivery that an ordered route could not
    /// order (no value at `order_key` or `order_time`).
    pub(super) fn note_unordered(&self, receipt: &Receipt) {
        self.emit_change("unordered", receipt, Trace::default());
    }
}
