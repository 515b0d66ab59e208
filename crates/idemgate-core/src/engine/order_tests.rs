//! Order per entity as the engine takes part in it (SPEC §12, v4): real
//! engines of several keys, sharing a clock and their entities' books,
//! driven one step at a time (a wake, an alarm, or the clock moving on).
//! The last test is the order's simulation: seeded interleavings of
//! acceptances, origin failures, retries, restarts, lost calls and
//! re-drives.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use futures::executor::block_on;

use super::tests::{async_policy, delivery, status, NOW, SECRET};
use super::*;
use crate::headers::get;
use crate::memory_backend::MemoryBackend;
use crate::order::{HolderStatus, OrderBook, OrderTicket};

const HOLD: u64 = 2_000;

/// One forward, as the origin saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Sent {
    object: String,
    entity: String,
    time_ms: u64,
    stale: bool,
    status: u16,
    at: u64,
}

/// Keys' objects sharing a clock and their entities' books.
struct Entities {
    clock: Rc<Cell<u64>>,
    books: Rc<RefCell<BTreeMap<String, OrderBook>>>,
    wakes: Rc<RefCell<Vec<(String, String)>>>,
    objects: Vec<(String, Option<Engine<MemoryBackend>>)>,
    /// Each object's entity and time, by name.
    tickets: BTreeMap<String, OrderTicket>,
    sent: Vec<Sent>,
    policy: Policy,
    /// The clock moves at most this far in one step, when set.
    max_jump_ms: Option<u64>,
}

impl Entities {
    fn new(schedule: &[u64]) -> Entities {
        Entities {
            clock: Rc::new(Cell::new(NOW)),
            books: Rc::default(),
            wakes: Rc::default(),
            objects: Vec::new(),
            tickets: BTreeMap::new(),
            sent: Vec::new(),
            max_jump_ms: None,
            policy: Policy {
                ordered: true,
                retention_ms: 86_400_000,
                ..async_policy(schedule)
            },
        }
    }

    fn backend(&self) -> MemoryBackend {
        let backend = MemoryBackend {
            now: self.clock.clone(),
            order: self.books.clone(),
            order_wakes: self.wakes.clone(),
            ..MemoryBackend::default()
        };
        backend.set_secret("FORWARD_SECRET", SECRET);
        backend
    }

    fn engine(&self, name: &str) -> &Engine<MemoryBackend> {
        self.objects
            .iter()
            .find(|(known, _)| known == name)
            .and_then(|(_, engine)| engine.as_ref())
            .expect("a live object")
    }

    /// Accepts the event `name` of `entity` at `time_ms`, with the origin
    /// answering its forwards as `answers` says (then 201).
    fn accept(&mut self, name: &str, entity: &str, time_ms: u64, skip_stale: bool) -> Answer {
        let backend = self.backend();
        let mut delivery = delivery(name);
        delivery.identity.object = name.to_string();
        delivery.identity.key = name.into();
        let ticket = OrderTicket {
            object: entity.to_string(),
            time_ms,
            hold_ms: HOLD,
            skip_stale,
        };
        delivery.request.order = Some(ticket.clone());
        *backend.order_holder.borrow_mut() = Some((entity.to_string(), name.to_string()));
        self.tickets.insert(name.to_string(), ticket);
        let engine = Engine::new(backend);
        let answer = block_on(engine.deliver(delivery, &self.policy));
        self.objects.push((name.to_string(), Some(engine)));
        answer
    }

    fn answer_with(&self, name: &str, answers: &[u16]) {
        for answer in answers {
            self.engine(name).backend().answer_with(status(*answer));
        }
    }

    /// One step: a wake, else every alarm that is due, else the clock on
    /// to the next alarm. `false` when nothing is left to happen.
    fn step(&mut self) -> bool {
        let wakes = std::mem::take(&mut *self.wakes.borrow_mut());
        if !wakes.is_empty() {
            for (book, holder) in wakes {
                let status = match self.live(&holder) {
                    Some(engine) => block_on(engine.order_ready()).unwrap_or(HolderStatus::Pending),
                    None => HolderStatus::Ended,
                };
                let now = self.clock.get();
                let mut books = self.books.borrow_mut();
                let book_state = books.get_mut(&book).expect("the book that woke");
                book_state.heard(&holder, status, now);
                let more = book_state.take_wakes().into_iter();
                self.wakes
                    .borrow_mut()
                    .extend(more.map(|holder| (book.clone(), holder)));
            }
            return true;
        }
        let now = self.clock.get();
        let due: Vec<String> = self
            .objects
            .iter()
            .filter_map(|(name, engine)| {
                let at = engine.as_ref()?.backend().alarm.get()?;
                (at <= now).then(|| name.clone())
            })
            .collect();
        if !due.is_empty() {
            for name in due {
                self.run_alarm(&name);
            }
            return true;
        }
        let next_object = self
            .objects
            .iter()
            .filter_map(|(_, engine)| engine.as_ref()?.backend().alarm.get())
            .min();
        let next_book = self
            .books
            .borrow()
            .values()
            .filter_map(OrderBook::next_alarm)
            .filter(|at| *at > now)
            .min();
        let Some(next) = [next_object, next_book].into_iter().flatten().min() else {
            return false;
        };
        let next = match self.max_jump_ms {
            Some(jump) => next.min(now + jump),
            None => next,
        };
        self.clock.set(next.max(now + 1));
        let now = self.clock.get();
        let mut books = self.books.borrow_mut();
        for (name, book) in books.iter_mut() {
            if book.next_alarm().is_some_and(|at| at <= now) {
                book.on_alarm(now);
                let wakes = book.take_wakes().into_iter();
                self.wakes
                    .borrow_mut()
                    .extend(wakes.map(|holder| (name.clone(), holder)));
            }
        }
        true
    }

    fn live(&self, name: &str) -> Option<&Engine<MemoryBackend>> {
        self.objects
            .iter()
            .find(|(known, _)| known == name)
            .and_then(|(_, engine)| engine.as_ref())
    }

    fn run_alarm(&mut self, name: &str) {
        let engine = self.engine(name);
        let before = engine.backend().forwarded.borrow().len();
        engine.backend().alarm.set(None);
        let _ = block_on(engine.on_alarm());
        let forwarded = engine.backend().forwarded.borrow()[before..].to_vec();
        let statuses: Vec<u16> = engine
            .receipt()
            .ok()
            .flatten()
            .map(|receipt| receipt.attempts.iter().filter_map(|a| a.status).collect())
            .unwrap_or_default();
        let ticket = self.tickets[name].clone();
        for (at, request) in forwarded.iter().enumerate() {
            let status = statuses
                .len()
                .checked_sub(forwarded.len() - at)
                .map_or(0, |index| statuses[index]);
            self.sent.push(Sent {
                object: name.to_string(),
                entity: ticket.object.clone(),
                time_ms: ticket.time_ms,
                stale: get(&request.headers, "idempotency-stale") == Some("true"),
                status,
                at: self.clock.get(),
            });
        }
    }

    /// Runs until no delivery is pending and no wake is on its way.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let pending = self.objects.iter().any(|(_, engine)| {
                engine.as_ref().is_some_and(|engine| {
                    engine
                        .receipt()
                        .ok()
                        .flatten()
                        .is_some_and(|r| r.is_pending())
                })
            });
            if (!pending && self.wakes.borrow().is_empty()) || !self.step() {
                return;
            }
        }
        panic!("the entities never settled");
    }

    /// Runs until `name` has been forwarded `count` times.
    fn run_until_sent(&mut self, name: &str, count: usize) {
        for _ in 0..10_000 {
            if self.sent.iter().filter(|sent| sent.object == name).count() >= count {
                return;
            }
            assert!(self.step(), "{name} was never forwarded {count} times");
        }
    }

    fn state(&self, name: &str) -> &'static str {
        self.engine(name).receipt().unwrap().unwrap().state_name()
    }

    fn order_sent(&self) -> Vec<&str> {
        self.sent.iter().map(|sent| sent.object.as_str()).collect()
    }

    fn logged(&self, name: &str, decision: &str) -> bool {
        self.engine(name)
            .backend()
            .events
            .borrow()
            .iter()
            .any(|(event, _)| event.decision == decision)
    }
}

#[test]
fn deliveries_of_one_entity_reach_the_origin_oldest_first_once_the_hold_is_over() {
    let mut entities = Entities::new(&[1_000]);
    for (name, time) in [("c", 30), ("a", 10), ("b", 20)] {
        assert_eq!(
            entities.accept(name, "in_1", time, false).decision(),
            "queued"
        );
    }
    entities.run();
    assert_eq!(entities.order_sent(), ["a", "b", "c"]);
    assert!(entities.sent.iter().all(|sent| !sent.stale));
    assert!(entities.sent[0].at >= NOW + HOLD, "none before the hold");
    for name in ["a", "b", "c"] {
        assert_eq!(entities.state(name), "completed");
        let receipt = entities.engine(name).receipt().unwrap().unwrap();
        assert_eq!(
            receipt.attempts.len(),
            1,
            "a wait for the turn is no attempt"
        );
    }
}

#[test]
fn an_event_older_than_one_delivered_is_forwarded_marked_stale() {
    let mut entities = Entities::new(&[1_000]);
    entities.accept("newer", "in_1", 50, false);
    entities.run();
    entities.accept("older", "in_1", 40, false);
    entities.run();
    assert_eq!(entities.order_sent(), ["newer", "older"]);
    assert!(!entities.sent[0].stale);
    assert!(entities.sent[1].stale, "marked, under the signature");
    let forwarded = entities.engine("older").backend().forwarded.borrow()[0].clone();
    assert!(get(&forwarded.headers, "idempotency-signature").is_some());
    assert_eq!(entities.state("older"), "completed");
}

#[test]
fn with_skip_a_stale_event_ends_superseded_and_a_redrive_forwards_it_marked() {
    let mut entities = Entities::new(&[1_000]);
    entities.accept("newer", "in_1", 50, true);
    entities.run();
    entities.accept("older", "in_1", 40, true);
    entities.run();
    assert_eq!(entities.order_sent(), ["newer"], "skipped, not forwarded");
    assert_eq!(entities.state("older"), "superseded");
    assert!(entities.logged("older", "superseded"));
    let row = entities
        .engine("older")
        .backend()
        .index
        .borrow()
        .last()
        .cloned();
    assert!(format!("{row:?}").contains("superseded"), "listed: {row:?}");
    // Kept as a dead letter is.
    let receipt = entities.engine("older").receipt().unwrap().unwrap();
    assert!(receipt.expires_at >= entities.clock.get() + 86_400_000);
    // The operator asks for it: forwarded, marked stale.
    block_on(entities.engine("older").redrive()).unwrap();
    entities.run();
    assert_eq!(entities.order_sent(), ["newer", "older"]);
    assert!(entities.sent[1].stale);
    assert_eq!(entities.state("older"), "completed");
}

#[test]
fn a_superseded_event_redriven_after_its_book_is_forgotten_is_still_marked_stale() {
    let mut entities = Entities::new(&[1_000]);
    entities.accept("newer", "in_1", 50, true);
    entities.run();
    entities.accept("older", "in_1", 40, true);
    entities.run();
    assert_eq!(entities.state("older"), "superseded");
    // Days later the entity's book is gone (its retention passed); the
    // superseded receipt is kept as a dead letter is, and re-driven.
    entities.books.borrow_mut().clear();
    block_on(entities.engine("older").redrive()).unwrap();
    entities.run();
    assert_eq!(entities.order_sent(), ["newer", "older"]);
    assert!(entities.sent[1].stale, "what was superseded stays stale");
}

#[test]
fn the_book_remembers_as_long_as_a_dead_letter_may_be_redriven() {
    let mut entities = Entities::new(&[1_000]);
    entities.policy.retention_ms = 60_000;
    entities.accept("newer", "in_1", 50, false);
    entities.run();
    let books = entities.books.borrow();
    let book = books.get("in_1").expect("the entity's book");
    let forget_at = book.next_alarm().expect("the book's forgetting");
    assert!(
        forget_at >= entities.clock.get() + 86_400_000 - 1_000,
        "kept for DEAD_RETENTION_SECONDS (a day here), not RETENTION_SECONDS (60 s)"
    );
}

#[test]
fn an_event_time_more_than_a_day_ahead_is_delivered_unordered_and_counted() {
    let mut entities = Entities::new(&[1_000]);
    let years_ahead = NOW + 3 * 365 * 86_400_000;
    assert_eq!(
        entities
            .accept("ahead", "in_1", years_ahead, true)
            .decision(),
        "queued"
    );
    assert!(entities.logged("ahead", "unordered"));
    assert!(
        entities.books.borrow().is_empty(),
        "its entity was not asked"
    );
    entities.run();
    assert_eq!(entities.state("ahead"), "completed");
    // A day ahead is still a time (clocks differ).
    entities.accept("soon", "in_2", NOW + 3_600_000, false);
    assert!(!entities.logged("soon", "unordered"));
}

#[test]
fn a_failing_event_holds_its_entitys_later_ones_until_it_is_delivered() {
    let mut entities = Entities::new(&[5_000, 5_000]);
    entities.accept("first", "in_1", 10, false);
    entities.accept("second", "in_1", 20, false);
    entities.answer_with("first", &[503]);
    entities.run();
    assert_eq!(entities.order_sent(), ["first", "first", "second"]);
    assert_eq!(entities.sent[0].status, 503);
    assert!(
        entities.sent[2].at >= entities.sent[1].at,
        "second only after first's retry succeeded"
    );
    assert!(!entities.sent[2].stale);
    let second = entities.engine("second").receipt().unwrap().unwrap();
    assert_eq!(second.attempts.len(), 1, "its waits used no retry step");
}

#[test]
fn a_dead_letter_lets_its_entitys_later_ones_go() {
    let mut entities = Entities::new(&[5_000]);
    entities.accept("first", "in_1", 10, false);
    entities.accept("second", "in_1", 20, false);
    entities.answer_with("first", &[503, 503]);
    entities.run();
    assert_eq!(entities.order_sent(), ["first", "first", "second"]);
    assert_eq!(entities.state("first"), "dead");
    assert_eq!(entities.state("second"), "completed");
    assert!(!entities.sent[2].stale, "a dead letter delivered nothing");
}

#[test]
fn entities_do_not_wait_for_each_other() {
    let mut entities = Entities::new(&[600_000]);
    entities.accept("a1", "in_a", 10, false);
    entities.accept("b1", "in_b", 10, false);
    entities.accept("a2", "in_a", 20, false);
    entities.answer_with("a1", &[503]);
    entities.run();
    let b1 = entities
        .sent
        .iter()
        .find(|sent| sent.object == "b1")
        .unwrap();
    let a2 = entities
        .sent
        .iter()
        .find(|sent| sent.object == "a2")
        .unwrap();
    assert!(b1.at < NOW + 600_000, "b is not held by a's retry");
    assert!(a2.at >= NOW + 600_000, "a2 is");
}

#[test]
fn a_purged_delivery_leaves_its_entitys_book() {
    let mut entities = Entities::new(&[3_600_000]);
    entities.accept("first", "in_1", 10, false);
    entities.accept("second", "in_1", 20, false);
    entities.answer_with("first", &[503]);
    entities.run_until_sent("first", 1);
    for _ in 0..20 {
        entities.step();
    }
    assert_eq!(
        entities.order_sent(),
        ["first"],
        "second waits for first's retry"
    );
    block_on(entities.engine("first").purge("first", true)).unwrap();
    let purged_at = entities.clock.get();
    entities.run_until_sent("second", 1);
    let second = entities.sent.last().unwrap();
    assert!(second.at < purged_at + 60_000, "not an hour later");
}

#[test]
fn an_accepted_delivery_without_order_values_is_delivered_unordered_and_counted() {
    let entities = Entities::new(&[1_000]);
    let engine = Engine::new(entities.backend());
    let answer = block_on(engine.deliver(delivery("x"), &entities.policy));
    assert_eq!(answer.decision(), "queued");
    let counted = engine
        .backend()
        .events
        .borrow()
        .iter()
        .any(|(event, logged)| event.decision == "unordered" && *logged);
    assert!(counted);
    assert!(entities.books.borrow().is_empty(), "no book asked");
}

#[test]
fn an_unreachable_order_object_delays_and_lets_nothing_overtake() {
    let mut entities = Entities::new(&[1_000]);
    entities.accept("a", "in_1", 10, false);
    let engine = entities.engine("a");
    engine.backend().order_unreachable.set(true);
    engine.backend().alarm.set(None);
    block_on(engine.on_alarm()).unwrap();
    assert!(engine.backend().forwarded.borrow().is_empty());
    let receipt = engine.receipt().unwrap().unwrap();
    assert!(receipt.attempts.is_empty(), "a wait is not an attempt");
    assert_eq!(
        engine.backend().alarm.get(),
        Some(entities.clock.get() + crate::flow::UNREACHABLE_RETRY_MS)
    );
    engine.backend().order_unreachable.set(false);
    entities.run();
    assert_eq!(entities.order_sent(), ["a"]);
}

/// The order's simulation: for each seed, deliveries of two entities
/// accepted at random times with random event times, an origin that
/// fails at random, objects that restart at random between steps
/// (dropping everything but storage), calls to the books that are lost
/// at random, and re-drives of what ended. Checked: at most one forward
/// per entity at the origin at a time (each forward goes under its
/// entity's live turn, held by its own object: the backend checks it at
/// the send), no delivery older than one its entity's origin
/// accepted is forwarded without the stale mark, and every accepted
/// delivery ends completed, dead or superseded, none lost.
#[test]
fn any_interleaving_keeps_one_at_a_time_marks_the_stale_and_loses_nothing() {
    let seeds: u64 = std::env::var("ORDER_SIM_SEEDS")
        .ok()
        .and_then(|seeds| seeds.parse().ok())
        .unwrap_or(200);
    let mut seen = Seen::default();
    for seed in 0..seeds {
        simulate(seed, &mut seen);
    }
    // The schedules reached what they are for.
    if seeds >= 200 {
        assert!(seen.stale_forwards > 0, "{seen:?}");
        assert!(seen.superseded > 0, "{seen:?}");
        assert!(seen.restarts > 0 && seen.lost_calls > 0, "{seen:?}");
        assert!(seen.retries > 0 && seen.redrives > 0, "{seen:?}");
    }
}

/// What the schedules did, summed over seeds.
#[derive(Debug, Default)]
struct Seen {
    stale_forwards: u64,
    superseded: u64,
    restarts: u64,
    lost_calls: u64,
    retries: u64,
    redrives: u64,
}

fn simulate(seed: u64, seen: &mut Seen) {
    let mut rng = SplitMix(seed);
    let mut entities = Entities::new(&[1_000, 4_000]);
    let skip = rng.below(2) == 0;
    let deliveries = 3 + rng.below(6) as usize;
    let mut accepted = Vec::new();
    // Acceptances come close together: the clock moves on by at most a
    // second a step between them.
    entities.max_jump_ms = Some(1_000);
    for index in 0..deliveries {
        let name = format!("k{index}");
        let entity = ["in_a", "in_b"][rng.below(2) as usize];
        let time = rng.below(6) * 10;
        entities.accept(&name, entity, time, skip);
        let answers: Vec<u16> = (0..rng.below(3))
            .map(|_| [503, 500, 201][rng.below(3) as usize])
            .collect();
        entities.answer_with(&name, &answers);
        accepted.push(name);
        // Some steps between acceptances, and sometimes a restart.
        for _ in 0..rng.below(8) {
            entities.step();
            let lost = rng.below(10) == 0;
            seen.lost_calls += u64::from(lost);
            entities.lose_calls(lost);
            if rng.below(12) == 0 {
                let victim = format!("k{}", rng.below(accepted.len() as u64));
                entities.restart(&victim);
                seen.restarts += 1;
            }
        }
    }
    entities.lose_calls(false);
    entities.max_jump_ms = None;
    entities.run();
    // Re-drive what ended without the origin's 2xx; it goes again.
    for name in &accepted {
        let state = entities.state(name);
        seen.superseded += u64::from(state == "superseded");
        if matches!(state, "dead" | "superseded") && rng.below(2) == 0 {
            block_on(entities.engine(name).redrive()).unwrap();
            seen.redrives += 1;
        }
    }
    entities.run();
    seen.stale_forwards += entities.sent.iter().filter(|sent| sent.stale).count() as u64;
    seen.retries += entities
        .sent
        .iter()
        .filter(|sent| !(200..300).contains(&sent.status))
        .count() as u64;
    check(&entities, &accepted, seed);
}

fn check(entities: &Entities, accepted: &[String], seed: u64) {
    let mut newest: BTreeMap<&str, u64> = BTreeMap::new();
    for sent in &entities.sent {
        if let Some(newer) = newest.get(sent.entity.as_str()) {
            assert!(
                sent.time_ms >= *newer || sent.stale,
                "seed {seed}: {sent:?} is older than {newer}, unmarked"
            );
        }
        if (200..300).contains(&sent.status) {
            let known = newest.entry(sent.entity.as_str()).or_insert(sent.time_ms);
            *known = (*known).max(sent.time_ms);
        }
    }
    for name in accepted {
        assert_eq!(
            entities.engine(name).backend().forwards_out_of_turn.get(),
            0,
            "seed {seed}: {name} forwarded without its entity's turn"
        );
        let Some(receipt) = entities.engine(name).receipt().unwrap() else {
            panic!(
                "seed {seed}: {name} has no receipt; sent {:?}",
                entities.sent
            );
        };
        let state = receipt.state_name();
        assert!(
            matches!(state, "completed" | "dead" | "superseded"),
            "seed {seed}: {name} is {state}, never delivered"
        );
        let delivered = entities
            .sent
            .iter()
            .filter(|sent| sent.object == *name && (200..300).contains(&sent.status))
            .count();
        assert!(delivered <= 1, "seed {seed}: {name} accepted twice");
        assert_eq!(state == "completed", delivered == 1, "seed {seed}: {name}");
    }
}

impl Entities {
    /// Calls to every book fail (lost) while `lost`.
    fn lose_calls(&self, lost: bool) {
        for (_, engine) in &self.objects {
            if let Some(engine) = engine {
                engine.backend().order_unreachable.set(lost);
            }
        }
    }

    /// The object restarts: memory gone, storage kept, its alarm still set.
    fn restart(&mut self, name: &str) {
        let slot = self
            .objects
            .iter_mut()
            .find(|(known, _)| known == name)
            .expect("a known object");
        let backend = slot.1.take().expect("live").into_backend();
        slot.1 = Some(Engine::new(backend));
    }
}

/// SplitMix64: a seeded sequence, so a failing seed replays exactly.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % bound
    }
}

#[test]
fn what_the_origin_accepted_counts_as_delivered_recorded_or_not() {
    use super::order::outcome_of;
    use crate::order::Outcome;
    use crate::receipt::Recorded;
    // Purged while at the origin, or its outcome's write failed: the
    // origin has it, so a later, older event of the entity is stale.
    assert_eq!(outcome_of(None, true, 5), Outcome::Delivered);
    assert_eq!(
        outcome_of(Some(Recorded::Failed), true, 5),
        Outcome::Delivered
    );
    assert_eq!(outcome_of(None, false, 5), Outcome::RetryAt(5));
    assert_eq!(
        outcome_of(Some(Recorded::Retrying { at: 9 }), false, 5),
        Outcome::RetryAt(9)
    );
    assert_eq!(
        outcome_of(Some(Recorded::Completed), true, 5),
        Outcome::Delivered
    );
}
