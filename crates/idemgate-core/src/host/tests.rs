//! The host's steps, on the order book kept in memory.

use futures::executor::block_on;

use super::value::{MemoryValues, ValueStore};
use super::*;
use crate::order::{Ask, OrderBook, OrderCall, OrderReply, Outcome};

type OrderHost = Host<OrderBook, ValueStore<MemoryValues>>;

fn host() -> OrderHost {
    Host::new(ValueStore {
        storage: MemoryValues::default(),
        key: "book",
    })
}

fn ask(holder: &str) -> Ask {
    Ask {
        holder: holder.into(),
        time_ms: 10,
        accepted_at: 1_000,
        hold_ms: 2_000,
        lease_ms: 15_000,
        retention_ms: 60_000,
    }
}

fn stored(host: &OrderHost) -> OrderBook {
    let values = host.store().storage.values.borrow();
    serde_json::from_str(values.get("book").expect("stored")).unwrap()
}

#[test]
fn a_call_is_stored_before_its_answer_and_the_alarm_follows_the_book() {
    let host = host();
    let (reply, wakes) = block_on(host.call(&OrderCall::Ask(ask("a")), 1_000)).unwrap();
    assert_eq!(reply, OrderReply::Wait { retry_at: 3_000 });
    assert!(wakes.is_empty());
    assert_eq!(stored(&host).view().waiting, 1, "stored before the answer");
    assert_eq!(host.store().storage.alarm.get(), Some(3_000));
    // The alarm wakes the head, whose hold is over.
    let wakes = block_on(host.alarm(3_000)).unwrap();
    assert_eq!(wakes, ["a"]);
}

#[test]
fn a_failed_write_answers_an_error_and_the_book_is_read_again() {
    let host = host();
    block_on(host.call(&OrderCall::Ask(ask("a")), 1_000)).unwrap();
    host.store().storage.failing_puts.set(1);
    let lost = block_on(host.call(&OrderCall::Ask(ask("b")), 1_001));
    assert!(lost.is_err(), "no answer the store does not hold");
    // Read again from storage: b was never stored.
    let waiting = block_on(host.read(|book| book.view().waiting)).unwrap();
    assert_eq!(waiting, 1);
}

#[test]
fn a_book_with_nothing_to_keep_is_forgotten_by_its_alarm() {
    let host = host();
    let a = ask("a");
    block_on(host.call(&OrderCall::Ask(a.clone()), 1_000)).unwrap();
    let done = OrderCall::Done {
        ask: a,
        grant: None,
        outcome: Outcome::Ended,
    };
    block_on(host.call(&done, 1_100)).unwrap();
    assert_eq!(host.store().storage.alarm.get(), Some(1_100 + 60_000));
    assert!(block_on(host.alarm(1_100 + 60_000)).unwrap().is_empty());
    assert!(host.store().storage.values.borrow().is_empty(), "deleted");
}

#[test]
fn a_step_of_its_own_is_stored_as_a_call_is() {
    let host = host();
    block_on(host.call(&OrderCall::Ask(ask("a")), 1_000)).unwrap();
    let puts = host.store().storage.puts.get();
    let (waiting, _) = block_on(host.step(1_001, |book| book.view().waiting)).unwrap();
    assert_eq!(waiting, 1);
    assert_eq!(host.store().storage.puts.get(), puts + 1);
}
