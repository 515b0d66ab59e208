//! A forward and its outcome, for sync and async deliveries alike: the
//! request goes to the origin alongside the receipt's index write (never
//! waiting on it), the outcome is recorded while the permit goes back,
//! and the index write that went with the send finishes last.

use std::future::Future;

use futures::future::{join, select, Either};

use super::permits::HeldPermit;
use super::{Backend, Engine};
use crate::index::IndexUpdate;
use crate::origin::OutboundRequest;
use crate::receipt::{DeliveryKind, ForwardResult, RecordPolicy, Recorded};

/// One forward, ready to leave: its receipt is stored in flight at `epoch`.
pub(super) struct Forward<'a, F, A> {
    pub epoch: u64,
    pub request: OutboundRequest,
    pub timeout_ms: u64,
    /// When the forward began (its receipt's write).
    pub started_at: u64,
    /// The index row of the in-flight state.
    pub index: Option<IndexUpdate>,
    pub permit: Option<HeldPermit>,
    /// Sent with the request (a sync receipt's retention alarm).
    pub alongside: F,
    /// Once the origin answered, before the outcome is written.
    pub after_send: A,
    /// The recording terms, given a random number (the stored response's
    /// jitter) drawn once the origin answered.
    pub record_policy: &'a dyn Fn(u64) -> RecordPolicy,
}

/// What came of a [`Forward`].
pub(super) struct Forwarded {
    pub result: ForwardResult,
    /// How the outcome was recorded; `None` when the forward no longer
    /// owned the key (taken over, purged) or the write failed.
    pub recorded: Option<Recorded>,
    /// How long the origin took.
    pub origin_ms: u64,
}

impl<B: Backend> Engine<B> {
    pub(super) async fn forward_and_record<F, A>(&self, forward: Forward<'_, F, A>) -> Forwarded
    where
        F: Future<Output = ()>,
        A: FnOnce(),
    {
        let Forward {
            epoch,
            request,
            timeout_ms,
            started_at,
            index,
            permit,
            alongside,
            after_send,
            record_policy,
        } = forward;
        // The in-flight row (the operator's count of deliveries at the
        // origin) goes alongside the forward, but the outcome never waits
        // for it: a slow index would hold the origin's answer unrecorded,
        // and a restart then would forward a delivery the origin took.
        let send = join(alongside, self.backend.forward(request, timeout_ms));
        let index_write = std::pin::pin!(self.write_index(index));
        let ((_, result), unfinished_index_write) =
            match select(std::pin::pin!(send), index_write).await {
                Either::Left((sent, index_write)) => (sent, Some(index_write)),
                Either::Right((_, send)) => (send.await, None),
            };
        after_send();
        let origin_ms = self.backend.now_ms().saturating_sub(started_at);
        let record_policy = record_policy(self.backend.random());
        let (recorded, ()) = join(
            self.record(epoch, &result, &record_policy),
            self.release(permit),
        )
        .await;
        if let Some(index_write) = unfinished_index_write {
            // Older than the outcome's own write: its version loses to it.
            index_write.await;
        }
        Forwarded {
            result,
            recorded,
            origin_ms,
        }
    }

    /// Stores the outcome of the forward at `epoch`, unless a later forward
    /// took the key over meanwhile (or it was purged); returns how it was
    /// recorded, `None` when this forward no longer owned the key. The
    /// caller gets the origin's answer either way: it happened, whether or
    /// not it could be recorded.
    async fn record(
        &self,
        epoch: u64,
        result: &ForwardResult,
        record_policy: &RecordPolicy,
    ) -> Option<Recorded> {
        let now = self.backend.now_ms();
        let recorded = self.with_receipt(|slot| {
            let mut receipt = slot.clone()?;
            let recorded = receipt.record(epoch, result, record_policy, now).ok()?;
            Some((receipt, recorded))
        });
        let Ok(Some((mut receipt, recorded))) = recorded else {
            return None;
        };
        let index = self.plan_index(&mut receipt);
        let asynchronous = receipt.delivery == DeliveryKind::Async;
        let wake = receipt.next_wake();
        // A failed write leaves the key in flight until its lease ends; the
        // next delivery (or the alarm) then forwards with a higher epoch.
        // A completed delivery's request goes with the same write.
        let stored = self.store(receipt).is_ok();
        // An async receipt's alarm delivers it; a sync one's frees it, and
        // is set again here only when nothing says it is set (its write
        // failed with the send, or the object restarted since).
        if stored && (asynchronous || !self.alarm_known.get()) {
            let _ = self.set_alarm(wake).await;
        }
        // Only a stored state is indexed: after a failed write the row
        // stays as the receipt is (in flight), where the sweep finds it.
        if stored {
            self.write_index(index).await;
        }
        Some(recorded)
    }
}
