//! Flow control as the engine takes part in it (SPEC §2, v3), against the
//! in-memory backend and a coordinator shared by several keys' objects.

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::block_on;

use super::tests::{async_policy, delivery, engine, gated, policy, poll_once, status, NOW, SECRET};
use super::*;
use crate::config::InFlightPolicy;
use crate::flow::{Coordinator, FlowLimits, UNREACHABLE_RETRY_MS};
use crate::headers::get;
use crate::memory_backend::MemoryBackend;
use crate::receipt::ReceiptState;

const ONE_AT_A_TIME: FlowLimits = FlowLimits {
    max_in_flight: Some(1),
    rate_thousandths: None,
    shards: 1,
};

fn limited(mut policy: Policy) -> Policy {
    policy.flow = Some(ONE_AT_A_TIME);
    policy
}

/// The object of key `key`, sharing `flow` with the other keys' objects.
fn object(key: &str, flow: &Rc<RefCell<Option<Coordinator>>>) -> (Engine<MemoryBackend>, Delivery) {
    let backend = MemoryBackend {
        flow: flow.clone(),
        ..MemoryBackend::new(NOW)
    };
    backend.set_secret("FORWARD_SECRET", SECRET);
    let mut delivery = delivery(key);
    delivery.identity.object = format!("object-{key}");
    delivery.identity.key = key.into();
    (Engine::new(backend), delivery)
}

/// Two keys' async deliveries, accepted, on a route of one permit: the
/// holder's alarm will take it, the waiter's will wait.
fn holder_and_waiter() -> (
    Rc<RefCell<Option<Coordinator>>>,
    Engine<MemoryBackend>,
    Engine<MemoryBackend>,
) {
    let flow: Rc<RefCell<Option<Coordinator>>> = Rc::default();
    let policy = limited(async_policy(&[1_000, 2_000]));
    let (holder, holder_delivery) = object("a", &flow);
    let (waiter, waiter_delivery) = object("b", &flow);
    for engine in [&holder, &waiter] {
        engine
            .backend()
            .routes
            .borrow_mut()
            .push(("default".into(), policy.clone()));
    }
    block_on(holder.deliver(holder_delivery, &policy));
    block_on(waiter.deliver(waiter_delivery, &policy));
    (flow, holder, waiter)
}

/// Holds the coordinator's next answer to `backend`'s object on its way
/// back (the coordinator has decided); sending on the answer lets it on.
fn hold_coordinator_reply(backend: &MemoryBackend) -> futures::channel::oneshot::Sender<()> {
    let (deliver_reply, reply_gate) = futures::channel::oneshot::channel();
    backend.flow_reply_gates.borrow_mut().push_back(reply_gate);
    deliver_reply
}

#[test]
fn a_sync_delivery_over_the_limit_is_429_and_nothing_is_stored_or_sent() {
    let flow = Rc::default();
    let (first, first_delivery) = object("a", &flow);
    let (second, second_delivery) = object("b", &flow);
    let policy = limited(policy(InFlightPolicy::Wait));
    let origin = gated(first.backend());
    let mut held = Box::pin(first.deliver(first_delivery, &policy));
    assert!(poll_once(held.as_mut()).is_none(), "at the origin");
    let busy = block_on(second.deliver(second_delivery.clone(), &policy)).render();
    assert_eq!(busy.status, 429);
    assert!(String::from_utf8_lossy(&busy.body).contains("origin-busy"));
    assert_eq!(get(&busy.headers, "retry-after"), Some("1"));
    assert_eq!(second.receipt(), Ok(None), "nothing stored");
    assert!(second.backend().forwarded.borrow().is_empty());
    origin.send(status(201)).unwrap();
    assert_eq!(poll_once(held.as_mut()).unwrap().decision(), "forwarded");
    // The permit came back: a retry goes through.
    let retried = block_on(second.deliver(second_delivery, &policy));
    assert_eq!(retried.decision(), "forwarded");
}

#[test]
fn duplicates_arriving_while_the_permit_is_asked_for_never_forward_twice() {
    let engine = engine();
    engine.backend().manual_clock.set(true);
    let policy = limited(policy(InFlightPolicy::Wait));
    let origin = gated(engine.backend());
    let (answer_permit, permit_gate) = futures::channel::oneshot::channel();
    engine
        .backend()
        .flow_gates
        .borrow_mut()
        .push_back(permit_gate);
    let mut tasks = super::tests::Tasks::new();
    let first = tasks.spawn(engine.deliver(delivery("a"), &policy));
    // The coordinator has not answered the first yet.
    let second = tasks.spawn(engine.deliver(delivery("a"), &policy));
    assert!(engine.backend().forwarded.borrow().is_empty());
    answer_permit.send(()).unwrap();
    tasks.run();
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    origin.send(status(201)).unwrap();
    tasks.run();
    assert_eq!(tasks.answer(first).unwrap().decision(), "forwarded");
    assert_eq!(tasks.answer(second).unwrap().decision(), "waited");
    assert_eq!(engine.backend().flow_in_use(), 0, "the permit is back");
}

#[test]
fn an_unreachable_coordinator_refuses_sync_and_delays_async() {
    let engine = engine();
    engine.backend().flow_unreachable.set(true);
    let sync = block_on(engine.deliver(delivery("a"), &limited(policy(InFlightPolicy::Wait))));
    assert_eq!(sync.render().status, 429);
    assert!(engine.backend().forwarded.borrow().is_empty());

    let engine = engine_with_route(limited(async_policy(&[1_000])));
    engine.backend().flow_unreachable.set(true);
    let policy = limited(async_policy(&[1_000]));
    assert_eq!(
        block_on(engine.deliver(delivery("a"), &policy)).decision(),
        "queued"
    );
    block_on(engine.on_alarm()).unwrap();
    assert!(engine.backend().forwarded.borrow().is_empty(), "no burst");
    let receipt = engine.receipt().unwrap().unwrap();
    assert_eq!(receipt.attempts.len(), 0, "a wait is not an attempt");
    assert_eq!(
        engine.backend().alarm.get(),
        Some(NOW + UNREACHABLE_RETRY_MS)
    );
    engine.backend().flow_unreachable.set(false);
    engine.backend().now.set(NOW + UNREACHABLE_RETRY_MS);
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}

fn engine_with_route(policy: Policy) -> Engine<MemoryBackend> {
    let engine = engine();
    engine
        .backend()
        .routes
        .borrow_mut()
        .push(("default".into(), policy));
    engine
}

#[test]
fn an_async_delivery_waits_for_its_permit_keeping_its_schedule_and_is_woken() {
    let (flow, holder, waiter) = holder_and_waiter();
    let origin = gated(holder.backend());
    let mut holding = Box::pin(holder.on_alarm());
    assert!(poll_once(holding.as_mut()).is_none(), "at the origin");
    // The other key's alarm: over the limit, so it waits.
    block_on(waiter.on_alarm()).unwrap();
    let waiting = waiter.receipt().unwrap().unwrap();
    assert!(matches!(waiting.state, ReceiptState::Queued { .. }));
    assert_eq!(waiting.waiting_for_permit_since, Some(NOW));
    assert_eq!(waiting.attempts.len(), 0);
    assert_eq!(waiting.schedule_step, 0);
    assert!(waiter.backend().forwarded.borrow().is_empty());
    assert!(
        waiter.backend().alarm.get() > Some(NOW),
        "asks again later, unless woken"
    );
    // The first is answered: its permit is reserved for the waiter.
    waiter.backend().now.set(NOW + 2_000);
    holder.backend().now.set(NOW + 2_000);
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(holding.as_mut()), Some(Ok(())));
    let wakes = flow.borrow_mut().as_mut().unwrap().take_wakes();
    assert_eq!(wakes, vec!["object-b".to_string()]);
    // The wake is answered at once: it only moves the waiter's alarm.
    block_on(waiter.permit_ready()).unwrap();
    assert!(waiter.backend().forwarded.borrow().is_empty());
    assert_eq!(waiter.backend().alarm.get(), Some(NOW + 2_000));
    block_on(waiter.on_alarm()).unwrap();
    assert_eq!(waiter.backend().forwarded.borrow().len(), 1);
    let delivered = waiter.receipt().unwrap().unwrap();
    assert_eq!(delivered.state_name(), "completed");
    assert_eq!(delivered.waiting_for_permit_since, None);
    assert!(waiter.backend().logged().contains(&"waited_for_permit"));
    let waited = waiter
        .backend()
        .events
        .borrow()
        .iter()
        .find(|(event, _)| event.decision == "waited_for_permit")
        .map(|(event, _)| event.waited_ms);
    assert_eq!(waited, Some(Some(2_000)));
}

/// The coordinator answers "queued", then reserves a permit for the
/// waiter and wakes it before that answer is back: the wake finds the
/// attempt under way and is not lost (it would cost `REQUEUE_MS`).
#[test]
fn a_wake_that_overtakes_the_queued_answer_is_not_lost() {
    let (flow, holder, waiter) = holder_and_waiter();
    let origin = gated(holder.backend());
    let mut holding = Box::pin(holder.on_alarm());
    assert!(poll_once(holding.as_mut()).is_none(), "at the origin");
    let deliver_reply = hold_coordinator_reply(waiter.backend());
    let mut asking = Box::pin(waiter.on_alarm());
    assert!(poll_once(asking.as_mut()).is_none(), "queued, not yet told");
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(holding.as_mut()), Some(Ok(())));
    let wakes = flow.borrow_mut().as_mut().unwrap().take_wakes();
    assert_eq!(wakes, vec!["object-b".to_string()]);
    block_on(waiter.permit_ready()).unwrap();
    assert!(waiter.backend().forwarded.borrow().is_empty());
    deliver_reply.send(()).unwrap();
    assert_eq!(block_on(asking), Ok(()));
    assert_eq!(
        waiter.backend().forwarded.borrow().len(),
        1,
        "claimed at once"
    );
    assert_eq!(waiter.receipt().unwrap().unwrap().state_name(), "completed");
}

/// A wake for a delivery that waits for its retry, not for a permit, does
/// not bring the retry forward.
#[test]
fn a_wake_never_brings_a_retry_forward() {
    let policy = limited(async_policy(&[10_000]));
    let engine = engine_with_route(policy.clone());
    block_on(engine.deliver(delivery("a"), &policy));
    engine.backend().answer_with(status(500));
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    let receipt = engine.receipt().unwrap().unwrap();
    assert!(receipt.is_pending() && receipt.waiting_for_permit_since.is_none());
    let alarm = engine.backend().alarm.get();
    block_on(engine.permit_ready()).unwrap();
    assert_eq!(
        engine.backend().alarm.get(),
        alarm,
        "the wake does not move a retry's alarm"
    );
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(
        engine.backend().forwarded.borrow().len(),
        1,
        "retried when its schedule says"
    );
}

/// The wake comes while the waiter is still writing its wait (a slow
/// index row): it is answered once that is done, not 30 s later.
#[test]
fn a_wake_while_the_wait_is_written_is_not_lost() {
    let (_flow, holder, waiter) = holder_and_waiter();
    let origin = gated(holder.backend());
    let mut holding = Box::pin(holder.on_alarm());
    assert!(poll_once(holding.as_mut()).is_none(), "at the origin");
    let (land_row, row_gate) = futures::channel::oneshot::channel();
    waiter
        .backend()
        .index_gates
        .borrow_mut()
        .push_back(row_gate);
    let mut waiting = Box::pin(waiter.on_alarm());
    assert!(poll_once(waiting.as_mut()).is_none(), "writing its wait");
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(holding.as_mut()), Some(Ok(())));
    block_on(waiter.permit_ready()).unwrap();
    assert!(waiter.backend().forwarded.borrow().is_empty());
    land_row.send(()).unwrap();
    assert_eq!(block_on(waiting), Ok(()));
    assert_eq!(
        waiter.backend().alarm.get(),
        Some(NOW),
        "its alarm is now, not when it would have asked again"
    );
    block_on(waiter.on_alarm()).unwrap();
    assert_eq!(waiter.backend().forwarded.borrow().len(), 1);
    assert_eq!(waiter.receipt().unwrap().unwrap().state_name(), "completed");
}

#[test]
fn a_late_wake_does_nothing_twice() {
    let engine = engine_with_route(limited(async_policy(&[1_000])));
    let policy = limited(async_policy(&[1_000]));
    block_on(engine.deliver(delivery("a"), &policy));
    block_on(engine.on_alarm()).unwrap();
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
    block_on(engine.permit_ready()).unwrap();
    assert_eq!(engine.backend().forwarded.borrow().len(), 1);
}

/// The review's case: under `max_in_flight = 1`, a holder's grant is held
/// on its way back until its lease has ended at the coordinator, which
/// has meanwhile granted the slot to another key. The late holder gives
/// the permit back unused and waits: never two forwards at once.
#[test]
fn an_async_grant_that_comes_back_after_its_lease_is_given_back_unused() {
    let (flow, holder, waiter) = holder_and_waiter();
    let deliver_reply = hold_coordinator_reply(holder.backend());
    let mut late = Box::pin(holder.on_alarm());
    assert!(poll_once(late.as_mut()).is_none(), "granted, not yet told");
    // The lease ends at the coordinator; the other key gets the slot.
    let lease_ms = holder.receipt().unwrap().unwrap().terms.unwrap().lease_ms;
    for engine in [&holder, &waiter] {
        engine.backend().now.set(NOW + lease_ms + 1);
    }
    let origin = gated(waiter.backend());
    let mut forwarding = Box::pin(waiter.on_alarm());
    assert!(poll_once(forwarding.as_mut()).is_none(), "at the origin");
    assert_eq!(waiter.backend().forwarded.borrow().len(), 1);
    deliver_reply.send(()).unwrap();
    assert_eq!(block_on(late), Ok(()));
    assert!(
        holder.backend().forwarded.borrow().is_empty(),
        "a grant whose lease ended forwards nothing"
    );
    let waiting = holder.receipt().unwrap().unwrap();
    assert!(waiting.waiting_for_permit_since.is_some());
    assert_eq!(waiting.attempts.len(), 0, "no attempt of its schedule used");
    assert_eq!(
        flow.borrow().as_ref().unwrap().in_use(),
        1,
        "only the forward at the origin holds a permit"
    );
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(forwarding.as_mut()), Some(Ok(())));
}

/// A grant that comes back a little late bounds the forward by what is
/// left of its lease, so the forward ends before the coordinator counts
/// the permit back in.
#[test]
fn a_grant_bounds_the_forward_by_what_is_left_of_its_lease() {
    let (_flow, holder, _waiter) = holder_and_waiter();
    let deliver_reply = hold_coordinator_reply(holder.backend());
    holder.backend().answer_with(status(200));
    let mut asking = Box::pin(holder.on_alarm());
    assert!(poll_once(asking.as_mut()).is_none());
    holder.backend().now.set(NOW + 3_000);
    deliver_reply.send(()).unwrap();
    assert_eq!(block_on(asking), Ok(()));
    let terms = holder.receipt().unwrap().unwrap().terms.unwrap();
    assert_eq!(
        *holder.backend().timeouts.borrow(),
        vec![terms.origin_timeout_ms - 3_000]
    );
}

/// The same for a sync delivery: a grant too late to use is given back,
/// and the sender is told to retry (429), with nothing stored or sent.
#[test]
fn a_sync_grant_that_comes_back_after_its_lease_is_429_and_nothing_is_stored() {
    let flow = Rc::default();
    let (engine, delivery) = object("a", &flow);
    let policy = limited(policy(InFlightPolicy::Wait));
    let deliver_reply = hold_coordinator_reply(engine.backend());
    let mut late = Box::pin(engine.deliver(delivery, &policy));
    assert!(poll_once(late.as_mut()).is_none(), "granted, not yet told");
    engine.backend().now.set(NOW + policy.lease_ms + 1);
    deliver_reply.send(()).unwrap();
    let busy = block_on(late).render();
    assert_eq!(busy.status, 429);
    assert!(String::from_utf8_lossy(&busy.body).contains("origin-busy"));
    assert_eq!(engine.receipt(), Ok(None), "nothing stored");
    assert!(engine.backend().forwarded.borrow().is_empty());
    assert_eq!(engine.backend().flow_in_use(), 0, "the permit is back");
}

/// A wake for an object that is not waiting for a permit changes nothing,
/// and a wake is answered without running any attempt.
#[test]
fn a_wake_never_runs_an_attempt_in_its_own_call() {
    let (flow, holder, waiter) = holder_and_waiter();
    let origin = gated(holder.backend());
    let mut holding = Box::pin(holder.on_alarm());
    assert!(poll_once(holding.as_mut()).is_none(), "at the origin");
    block_on(waiter.on_alarm()).unwrap();
    let asked_again_at = waiter.backend().alarm.get();
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(holding.as_mut()), Some(Ok(())));
    assert_eq!(flow.borrow_mut().as_mut().unwrap().take_wakes().len(), 1);
    // The wake's own call holds no forward: a gated origin would hang it.
    let _never = gated(waiter.backend());
    let mut wake = Box::pin(waiter.permit_ready());
    assert_eq!(poll_once(wake.as_mut()), Some(Ok(())));
    assert!(waiter.backend().forwarded.borrow().is_empty());
    assert_ne!(waiter.backend().alarm.get(), asked_again_at);
}

/// Found by the main simulation once it ran flow control: an attempt asks
/// for its permit; while the coordinator's "queued" is on its way back,
/// the operator force-purges the key and a new delivery of it is
/// accepted (a new life). The old attempt's wait must write nothing: it
/// stored the old life over the new one, losing an acknowledged delivery.
#[test]
fn a_wait_answered_after_the_key_began_a_new_life_writes_nothing() {
    let (_flow, holder, waiter) = holder_and_waiter();
    let origin = gated(holder.backend());
    let mut holding = Box::pin(holder.on_alarm());
    assert!(poll_once(holding.as_mut()).is_none(), "at the origin");
    let deliver_reply = hold_coordinator_reply(waiter.backend());
    let mut asking = Box::pin(waiter.on_alarm());
    assert!(poll_once(asking.as_mut()).is_none(), "queued, not yet told");
    let old = waiter.receipt().unwrap().unwrap().identity.receipt_id;
    assert_eq!(block_on(waiter.purge("object-b", true)), Ok(true));
    waiter.backend().now.set(NOW + 1_000);
    let mut again = delivery("b");
    again.identity.object = "object-b".into();
    again.identity.key = "b".into();
    let policy = limited(async_policy(&[1_000, 2_000]));
    assert_eq!(
        block_on(waiter.deliver(again, &policy)).render().status,
        202
    );
    let new = waiter.receipt().unwrap().unwrap().identity.receipt_id;
    assert_ne!(new, old);
    deliver_reply.send(()).unwrap();
    assert_eq!(block_on(asking), Ok(()));
    assert_eq!(
        waiter.receipt().unwrap().unwrap().identity.receipt_id,
        new,
        "the new life stands"
    );
    origin.send(status(200)).unwrap();
    assert_eq!(poll_once(holding.as_mut()), Some(Ok(())));
}

/// Tests that catch, round 4 (break 4): the coordinator grants a permit,
/// but the receipt moved on while its answer was on its way (the operator
/// purged it): the permit goes back at once, not at its lease's end.
#[test]
fn a_permit_granted_for_a_receipt_that_moved_on_goes_back_at_once() {
    let (flow, holder, _waiter) = holder_and_waiter();
    let deliver_reply = hold_coordinator_reply(holder.backend());
    let mut asking = Box::pin(holder.on_alarm());
    assert!(
        poll_once(asking.as_mut()).is_none(),
        "granted, not yet told"
    );
    assert_eq!(flow.borrow().as_ref().unwrap().in_use(), 1);
    assert_eq!(block_on(holder.purge("object-a", true)), Ok(true));
    deliver_reply.send(()).unwrap();
    assert_eq!(block_on(asking), Ok(()));
    assert!(holder.backend().forwarded.borrow().is_empty());
    assert_eq!(flow.borrow().as_ref().unwrap().in_use(), 0, "given back");
}

/// Tests that catch, round 4 (break 5): a sync delivery holds its permit,
/// and its receipt cannot be written: 503, nothing sent, and the permit
/// goes back at once.
#[test]
fn a_sync_permit_goes_back_when_the_receipt_cannot_be_written() {
    let flow = Rc::default();
    let (engine, delivery) = object("a", &flow);
    let policy = limited(policy(InFlightPolicy::Wait));
    engine.backend().fail_writes.set(true);
    let refused = block_on(engine.deliver(delivery, &policy)).render();
    assert_eq!(refused.status, 503);
    assert!(engine.backend().forwarded.borrow().is_empty());
    assert_eq!(engine.backend().flow_in_use(), 0, "the permit is back");
}
