//! A key's object answers its callers ([`ObjectCall`]: the gateway, the
//! operator API, a flow coordinator's or an order object's wake, a
//! reconciliation run): each operation to the engine step that does it,
//! and the step's outcome rendered as the reply. The Worker's class only
//! carries the call and the reply over RPC.

use super::{Backend, Engine, Presence};
use crate::answer::{render_problem, Answer};
use crate::object_call::{ObjectCall, ObjectOp, Reply};
use crate::operator::view::ReceiptView;
use crate::problem::Problem;
use crate::receipt::{HttpResponse, Receipt};

impl<B: Backend> Engine<B> {
    /// Answers `call` (with `body`, a delivery's). A signed transmission's
    /// claim ([`ObjectOp::ClaimOnce`]) is not a key's: its object answers
    /// it apart ([`crate::single_use`]).
    pub async fn answer(&self, call: ObjectCall, body: Vec<u8>) -> Reply {
        self.absorb(call.absorbed);
        *self.known_route.borrow_mut() = Some(call.route.clone());
        let object = call.object.clone();
        match call.op {
            ObjectOp::ReadReceipt => reply(self.read_receipt()),
            ObjectOp::Purge { force, receipt_id } => {
                reply(self.purge_life(&object, force, receipt_id.as_deref()).await)
            }
            ObjectOp::Redrive { receipt_id } => {
                reply(self.redrive_life(receipt_id.as_deref()).await)
            }
            ObjectOp::Wake => reply(match self.wake(&object).await {
                Ok(()) => empty(204),
                Err(message) => render_problem(&Problem::StorageUnavailable { message }),
            }),
            ObjectOp::HasReceipt => reply(match self.presence() {
                Ok(Presence::Arrived) => empty(200),
                Ok(Presence::Absent) => empty(404),
                Ok(Presence::Failed) => empty(409),
                Err(message) => render_problem(&Problem::StorageUnavailable { message }),
            }),
            ObjectOp::ClaimOnce { .. } => reply(render_problem(&Problem::NotFound)),
            ObjectOp::OrderReady => reply(match self.order_ready().await {
                Ok(status) => HttpResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: status.encode().into_bytes(),
                },
                Err(message) => render_problem(&Problem::StorageUnavailable { message }),
            }),
            ObjectOp::PermitReady => reply(match self.permit_ready().await {
                Ok(()) => empty(204),
                Err(message) => render_problem(&Problem::StorageUnavailable { message }),
            }),
            ObjectOp::Deliver { .. } => {
                let policy = match self.backend.delivery_policy(&call.route) {
                    Ok(policy) => policy,
                    Err(problem) => return reply(render_problem(&problem)),
                };
                let delivery = match call.into_delivery(body) {
                    Ok(delivery) => delivery,
                    Err(problem) => return reply(render_problem(&problem)),
                };
                let if_absent = delivery.if_absent;
                let answer = match (delivery.if_known, delivery.if_absent) {
                    (true, _) => self.deliver_if_known(delivery, &policy).await,
                    (_, true) => self.deliver_if_absent(delivery, &policy).await,
                    _ => Some(self.deliver(delivery, &policy).await),
                };
                let Some(answer) = answer else {
                    return Reply {
                        unknown_key: !if_absent,
                        already_received: if_absent,
                        ..reply(empty(204))
                    };
                };
                let replayable_until = match answer {
                    Answer::Replayed(_) => self.replayable_until(),
                    _ => None,
                };
                Reply {
                    replayable_until,
                    ..reply(answer.render())
                }
            }
        }
    }

    /// Only the life `expected` names, if it names one: checked and acted
    /// on in one turn, with no await between.
    async fn purge_life(&self, object: &str, force: bool, expected: Option<&str>) -> HttpResponse {
        if let Err(problem) = self.check_life(expected) {
            return render_problem(&problem);
        }
        match self.purge(object, force).await {
            Ok(true) => empty(204),
            Ok(false) => render_problem(&Problem::NotFound),
            Err(problem) => render_problem(&problem),
        }
    }

    async fn redrive_life(&self, expected: Option<&str>) -> HttpResponse {
        if let Err(problem) = self.check_life(expected) {
            return render_problem(&problem);
        }
        match self.redrive().await {
            Ok(receipt) => self.receipt_view(202, &receipt),
            Err(problem) => render_problem(&problem),
        }
    }

    fn read_receipt(&self) -> HttpResponse {
        match self.receipt() {
            Ok(Some(receipt)) => self.receipt_view(200, &receipt),
            Ok(None) => render_problem(&Problem::NotFound),
            Err(message) => render_problem(&Problem::StorageUnavailable { message }),
        }
    }

    /// The operator's view: the receipt, its stored request while kept,
    /// and the storage operations of the object's current lifetime.
    fn receipt_view(&self, status: u16, receipt: &Receipt) -> HttpResponse {
        let kept = matches!(receipt.state_name(), "dead" | "superseded");
        let request = match receipt.is_pending() || kept {
            true => self.backend.load_request().ok().flatten(),
            false => None,
        };
        let masked = self
            .backend
            .route_policy(&receipt.identity.route)
            .map(|policy| policy.masked_headers);
        let masked: Option<Vec<&str>> = masked
            .as_ref()
            .map(|names| names.iter().map(String::as_str).collect());
        let view = ReceiptView::of(
            receipt,
            request.as_ref(),
            self.backend.storage_ops(),
            masked.as_deref(),
        );
        HttpResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(&view).expect("a receipt view serializes"),
        }
    }
}

fn reply(response: HttpResponse) -> Reply {
    Reply::of(response)
}

fn empty(status: u16) -> HttpResponse {
    HttpResponse::empty(status)
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::*;
    use crate::memory_backend::MemoryBackend;

    fn call(op: ObjectOp) -> ObjectCall {
        ObjectCall {
            route: "default".into(),
            object: "obj".into(),
            absorbed: 0,
            op,
        }
    }

    /// Each operation reaches its engine step and comes back rendered, as
    /// the Worker's object answers it; a claim is not a key's.
    #[test]
    fn a_key_without_a_receipt_answers_each_operation() {
        let engine = Engine::new(MemoryBackend::new(1_800_000_000_000));
        let status = |op| {
            block_on(engine.answer(call(op), Vec::new()))
                .response
                .status
        };
        assert_eq!(status(ObjectOp::HasReceipt), 404);
        assert_eq!(status(ObjectOp::ReadReceipt), 404);
        assert_eq!(status(ObjectOp::Wake), 204);
        assert_eq!(
            status(ObjectOp::Purge {
                force: false,
                receipt_id: None
            }),
            404
        );
        assert_eq!(
            status(ObjectOp::ClaimOnce {
                claimant: "k".into(),
                until: 1
            }),
            404
        );
    }
}
