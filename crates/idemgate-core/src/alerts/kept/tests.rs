//! The alert book through the host, as its object keeps it.

use futures::executor::block_on;

use super::*;
use crate::alerts::{Format, Sink, Thresholds};
use crate::host::value::{MemoryValues, ValueStore};
use crate::host::Host;

const T0: u64 = 1_800_000_000_000;

fn config() -> AlertsConfig {
    AlertsConfig {
        sinks: vec![Sink {
            url: "https://ops.example/idemgate".into(),
            format: Format::Json,
            secret: None,
        }],
        interval_ms: 60_000,
        thresholds: Thresholds::default(),
    }
}

type AlertHost = Host<KeptAlerts, ValueStore<MemoryValues>>;

fn host() -> AlertHost {
    Host::new(ValueStore {
        storage: MemoryValues::default(),
        key: "book",
    })
}

fn dead(route: &str) -> AlertCall {
    AlertCall::Observe(vec![Observation {
        route: route.into(),
        condition: Condition::Dead,
        count: 1,
        detail: "a dead letter".into(),
    }])
}

#[test]
fn a_sign_is_stored_before_its_answer_and_the_alarm_set_to_send_it() {
    let host = host();
    let (view, wakes) = block_on(host.call(&(dead("pay"), config()), T0)).unwrap();
    assert!(wakes.is_empty());
    assert_eq!(view["conditions"][0]["route"], "pay");
    assert_eq!(view["outbox"], 1, "the firing alert waits to be sent");
    let stored = host
        .store()
        .storage
        .values
        .borrow()
        .get("book")
        .cloned()
        .unwrap();
    let reloaded: KeptAlerts = serde_json::from_str(&stored).unwrap();
    assert_eq!(reloaded.book.outbox_len(), 1, "stored before the answer");
    assert_eq!(
        host.store().storage.alarm.get(),
        Some(T0),
        "the alarm sends it now"
    );
}

#[test]
fn the_alarm_sends_what_is_due_and_a_new_instance_reads_the_same_book() {
    let host = host();
    block_on(host.call(&(dead("pay"), config()), T0)).unwrap();
    // The object's alarm: the time passed, then what is due goes out and
    // the book hears what was delivered.
    let config = config();
    let (due, _) = block_on(host.step(T0 + 10, |kept| {
        kept.answer(&AlertCall::Tick, T0 + 10, &config);
        kept.book.due(T0 + 10)
    }))
    .unwrap();
    assert_eq!(due.len(), 1);
    let delivered = due
        .iter()
        .map(|outgoing| (outgoing.alert.id.clone(), outgoing.sink, Ok(())))
        .collect();
    block_on(host.step(T0 + 20, |kept| kept.book.sent(delivered, T0 + 20))).unwrap();
    let restarted = Host::<KeptAlerts, _>::new(ValueStore {
        storage: MemoryValues::default(),
        key: "book",
    });
    let stored = host.store().storage.values.borrow().clone();
    *restarted.store().storage.values.borrow_mut() = stored;
    let view = block_on(restarted.read(KeptAlerts::view)).unwrap();
    assert_eq!(view["outbox"], 0);
    assert_eq!(view["delivered"], 1);
    assert_eq!(view["conditions"][0]["firing"], true);
}

#[test]
fn a_book_stored_by_the_previous_version_reads_as_it_was() {
    let mut book = AlertBook::default();
    book.observe("pay", Condition::Dead, 1, "dead", T0, &config());
    let before = serde_json::to_string(&book).unwrap();
    let kept: KeptAlerts = serde_json::from_str(&before).unwrap();
    assert_eq!(kept.book, book);
    let mut kept = kept;
    assert_eq!(kept.take_changes(), before, "and is stored the same way");
}

#[test]
fn without_alerts_configured_the_object_answers_so() {
    assert_eq!(not_configured()["configured"], false);
}
