//! The book's rules, one at a time.

use super::book::{ABANDON_MS, REQUEUE_MS, WAKE_AGAIN_MS};
use super::*;

const HOLD: u64 = 2_000;
const LEASE: u64 = 15_000;

fn ask(holder: &str, time_ms: u64, accepted_at: u64) -> Ask {
    Ask {
        holder: holder.into(),
        time_ms,
        accepted_at,
        hold_ms: HOLD,
        lease_ms: LEASE,
        retention_ms: 60_000,
    }
}

fn go(reply: OrderReply) -> (u64, bool) {
    match reply {
        OrderReply::Go { grant, stale, .. } => (grant, stale),
        other => panic!("expected the turn, got {other:?}"),
    }
}

fn waits(reply: OrderReply) -> u64 {
    match reply {
        OrderReply::Wait { retry_at } => retry_at,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn a_lone_delivery_waits_its_hold_then_goes() {
    let mut book = OrderBook::default();
    let a = ask("a", 10, 1_000);
    assert_eq!(waits(book.ask(&a, 1_000)), 1_000 + HOLD);
    assert_eq!(book.next_alarm(), Some(1_000 + HOLD));
    book.on_alarm(1_000 + HOLD);
    assert_eq!(book.take_wakes(), vec!["a".to_string()]);
    let (_, stale) = go(book.ask(&a, 1_000 + HOLD));
    assert!(!stale);
}

#[test]
fn one_at_a_time_and_the_next_is_woken_when_the_turn_comes_back() {
    let mut book = OrderBook::default();
    let (a, b) = (ask("a", 10, 0), ask("b", 20, 0));
    book.ask(&b, 0);
    book.ask(&a, 0);
    let (grant, _) = go(book.ask(&a, HOLD));
    assert_eq!(waits(book.ask(&b, HOLD)), HOLD + REQUEUE_MS);
    book.take_wakes();
    book.done(&a, Some(grant), Outcome::Delivered, HOLD + 5);
    assert_eq!(book.take_wakes(), vec!["b".to_string()]);
    let (_, stale) = go(book.ask(&b, HOLD + 6));
    assert!(!stale, "20 is newer than 10");
}

#[test]
fn the_oldest_time_goes_first_among_those_that_wait_together() {
    let mut book = OrderBook::default();
    let newer = ask("newer", 50, 0);
    let older = ask("older", 30, 1_500);
    assert_eq!(waits(book.ask(&newer, 0)), HOLD);
    book.ask(&older, 1_500);
    // The newer one's hold is over: the turn goes, to the older.
    book.on_alarm(HOLD);
    assert_eq!(book.take_wakes(), vec!["older".to_string()]);
    waits(book.ask(&newer, HOLD));
    let (grant, stale) = go(book.ask(&older, HOLD));
    assert!(!stale);
    book.done(&older, Some(grant), Outcome::Delivered, HOLD + 10);
    assert_eq!(book.take_wakes(), vec!["newer".to_string()]);
    assert!(!go(book.ask(&newer, HOLD + 11)).1);
}

#[test]
fn an_event_older_than_one_delivered_is_stale() {
    let mut book = OrderBook::default();
    let newer = ask("newer", 50, 0);
    book.ask(&newer, 0);
    let (grant, _) = go(book.ask(&newer, HOLD));
    book.done(&newer, Some(grant), Outcome::Delivered, HOLD + 1);
    let late = ask("late", 30, 10_000);
    book.ask(&late, 10_000);
    let (_, stale) = go(book.ask(&late, 10_000 + HOLD));
    assert!(stale);
    // Equal times are not stale: nothing says which came first.
    let mut book = OrderBook::default();
    let first = ask("first", 50, 0);
    book.ask(&first, 0);
    let (grant, _) = go(book.ask(&first, HOLD));
    book.done(&first, Some(grant), Outcome::Delivered, HOLD);
    let same = ask("same", 50, 5_000);
    book.ask(&same, 5_000);
    assert!(!go(book.ask(&same, 5_000 + HOLD)).1);
}

#[test]
fn a_failing_head_keeps_later_ones_behind_it_until_it_is_dead() {
    let mut book = OrderBook::default();
    let (a, b) = (ask("a", 10, 0), ask("b", 20, 0));
    book.ask(&a, 0);
    book.ask(&b, 0);
    let (grant, _) = go(book.ask(&a, HOLD));
    book.done(&a, Some(grant), Outcome::RetryAt(70_000), HOLD + 100);
    assert!(book.take_wakes().is_empty(), "b waits behind a's retry");
    waits(book.ask(&b, 10_000));
    assert_eq!(book.next_alarm(), Some(70_000));
    let (grant, _) = go(book.ask(&a, 70_000));
    book.done(&a, Some(grant), Outcome::Ended, 70_100);
    assert_eq!(book.take_wakes(), vec!["b".to_string()]);
    assert!(
        !go(book.ask(&b, 70_101)).1,
        "a dead letter delivered nothing"
    );
}

#[test]
fn a_lapsed_turn_goes_on_only_once_its_holder_says_how_it_stands() {
    let mut book = OrderBook::default();
    let (a, b) = (ask("a", 50, 0), ask("b", 30, 0));
    book.ask(&a, 0);
    // a alone: it goes, and then its object falls silent.
    let (_, _) = go(book.ask(&a, HOLD));
    book.ask(&b, HOLD + 1);
    book.take_wakes();
    let lapsed = HOLD + LEASE;
    book.on_alarm(lapsed);
    assert_eq!(book.take_wakes(), vec!["a".to_string()], "a is asked");
    waits(book.ask(&b, lapsed + 1));
    book.on_alarm(lapsed + WAKE_AGAIN_MS);
    assert_eq!(book.take_wakes(), vec!["a".to_string()], "asked again");
    // Its forward was accepted, though the word was lost: b, older, is stale.
    book.heard("a", HolderStatus::Delivered, lapsed + WAKE_AGAIN_MS + 1);
    assert_eq!(book.take_wakes(), vec!["b".to_string()]);
    assert!(go(book.ask(&b, lapsed + WAKE_AGAIN_MS + 2)).1);
}

#[test]
fn a_holder_that_asks_again_after_its_lease_lapsed_frees_the_turn_it_lost() {
    let mut book = OrderBook::default();
    let a = ask("a", 10, 0);
    book.ask(&a, 0);
    let (first, _) = go(book.ask(&a, HOLD));
    assert_eq!(
        waits(book.ask(&a, HOLD + 1)),
        HOLD + LEASE,
        "not twice at once"
    );
    let (second, _) = go(book.ask(&a, HOLD + LEASE));
    assert!(second > first);
}

#[test]
fn a_silent_entry_is_dropped_and_an_idle_book_is_forgotten_after_retention() {
    let mut book = OrderBook::default();
    let (a, b) = (ask("a", 10, 0), ask("b", 20, 0));
    book.ask(&a, 0);
    book.ask(&b, 0);
    let (grant, _) = go(book.ask(&a, HOLD));
    book.done(&a, Some(grant), Outcome::RetryAt(5_000), HOLD);
    // a's object lost the delivery and never says so.
    let silent = 5_000 + ABANDON_MS;
    waits(book.ask(&b, 500_000));
    book.on_alarm(silent);
    book.take_wakes();
    assert_eq!(book.view().waiting, 1);
    let (grant, _) = go(book.ask(&b, silent));
    book.done(&b, Some(grant), Outcome::Delivered, silent + 1);
    assert!(!book.is_forgotten(silent + 60_000));
    assert_eq!(book.next_alarm(), Some(silent + 1 + 60_000));
    assert!(book.is_forgotten(silent + 1 + 60_000));
}

#[test]
fn a_head_that_gave_its_turn_back_to_wait_for_a_permit_goes_when_woken_sooner() {
    // The route's coordinator queued its permit, saying to ask again in
    // 30 s; its wake (a permit reserved for it) comes after 3 s. The
    // book must not hold the head to the 30 s, or the reserved permit
    // would lapse unclaimed.
    let mut book = OrderBook::default();
    let (a, b) = (ask("a", 10, 0), ask("b", 20, 0));
    book.ask(&a, 0);
    book.ask(&b, 0);
    let (grant, _) = go(book.ask(&a, HOLD));
    book.done(&a, Some(grant), Outcome::RetryAt(HOLD + 30_000), HOLD);
    waits(book.ask(&b, HOLD + 1));
    let (_, stale) = go(book.ask(&a, HOLD + 3_000));
    assert!(!stale);
}

#[test]
fn a_book_whose_entries_left_without_a_turn_is_forgotten_too() {
    let mut book = OrderBook::default();
    let a = ask("a", 10, 0);
    waits(book.ask(&a, 0));
    // Purged before its turn: it leaves with no grant ever handed out.
    book.done(&a, None, Outcome::Ended, 100);
    assert_eq!(book.next_alarm(), Some(100 + 60_000));
    assert!(!book.is_forgotten(100 + 59_999));
    assert!(book.is_forgotten(100 + 60_000));
    // A book that never held anything has nothing to forget.
    assert!(!OrderBook::default().is_forgotten(u64::MAX));
}

#[test]
fn calls_and_replies_cross_as_json() {
    let calls = [
        OrderCall::Ask(ask("a", 1, 2)),
        OrderCall::Done {
            ask: ask("a", 1, 2),
            grant: Some(3),
            outcome: Outcome::RetryAt(9),
        },
    ];
    for call in calls {
        assert_eq!(OrderCall::decode(&call.encode()), Ok(call));
    }
    let reply = OrderReply::Go {
        grant: 1,
        lease_ms: 2,
        stale: true,
    };
    assert_eq!(OrderReply::decode(&reply.encode()), Ok(reply));
    assert_eq!(
        HolderStatus::decode(&HolderStatus::Delivered.encode()),
        Ok(HolderStatus::Delivered)
    );
    assert!(OrderCall::decode("{}").is_err());
}

#[test]
fn object_names_separate_routes_scopes_and_entities() {
    let name = object_name("stripe", "s1", "in_1");
    assert!(name.starts_with("idemgate/order/v1|stripe|"));
    assert_ne!(name, object_name("stripe", "s2", "in_1"));
    assert_ne!(name, object_name("stripe", "s1", "in_2"));
    assert_ne!(name, object_name("paddle", "s1", "in_1"));
    assert_eq!(route_of(&name), Some("stripe"));
    assert_eq!(route_of(&object_name("a|b", "s", "k")), Some("a|b"));
    assert_eq!(route_of("idemgate/flow/v1|stripe"), None);
}

/// Found by the simulation: the holder of a lapsed turn is asked about,
/// never dropped as silent, so its entry's silence sets no alarm (one in
/// the past would fire at once, forever).
#[test]
fn a_lapsed_holders_silence_sets_no_alarm_in_the_past() {
    let mut book = OrderBook::default();
    let a = ask("a", 10, 0);
    book.ask(&a, 0);
    go(book.ask(&a, HOLD));
    let later = HOLD + ABANDON_MS * 3;
    book.on_alarm(later);
    assert_eq!(book.take_wakes(), vec!["a".to_string()]);
    assert!(
        book.next_alarm().is_some_and(|at| at > later),
        "{:?}",
        book.next_alarm()
    );
    assert_eq!(book.view().waiting, 1, "asked about, not dropped");
}

#[test]
fn a_head_waiting_for_a_retry_longer_than_the_retention_keeps_its_book() {
    // Retention 60 s; the head's attempt failed and it retries in five
    // minutes. Its book must outlive the retention while it waits, or
    // the next delivery of its entity would find no newest time and no
    // turn held back for the older one.
    let mut book = OrderBook::default();
    let a = ask("a", 10, 0);
    waits(book.ask(&a, 0));
    let (grant, _) = go(book.ask(&a, HOLD));
    book.done(&a, Some(grant), Outcome::RetryAt(HOLD + 300_000), HOLD);
    assert!(!book.is_forgotten(HOLD + 61_000));
    assert_eq!(book.alarm(HOLD + 61_000), AlarmStep::Keep);
    assert_eq!(book.view().waiting, 1);
    // Its retry comes and is delivered: only then does the book go.
    let (grant, _) = go(book.ask(&a, HOLD + 300_000));
    book.done(&a, Some(grant), Outcome::Delivered, HOLD + 300_001);
    assert_eq!(book.alarm(HOLD + 300_001 + 60_000), AlarmStep::Forget);
}

#[test]
fn the_alarm_settles_before_it_decides_to_forget() {
    // The only entry's holder went silent for ABANDON_MS: one alarm drops
    // it and, the retention since the book last changed being over,
    // forgets the book; a moment earlier the entry still counts.
    let start = 1_000;
    let mut book = OrderBook::default();
    waits(book.ask(&ask("a", 10, start), start));
    assert_eq!(book.alarm(start + ABANDON_MS - 1), AlarmStep::Keep);
    assert_eq!(book.view().waiting, 1);
    assert_eq!(book.alarm(start + ABANDON_MS), AlarmStep::Forget);
}

/// A holder purged while its forward is at the origin (the review's
/// item 5): its `Done(Delivered)` is lost, its lease lapses, and its
/// object, purged, answers `Ended`. The origin may have its event, so an
/// older event after it goes marked stale.
#[test]
fn a_holder_purged_under_its_turn_counts_as_delivered_for_its_entity() {
    let mut book = OrderBook::default();
    let (newer, older) = (ask("a", 20, 0), ask("b", 10, 0));
    waits(book.ask(&newer, 0));
    let (_, stale) = go(book.ask(&newer, HOLD));
    assert!(!stale);
    waits(book.ask(&older, HOLD + 1));
    // The force purge: the key's object leaves the book, no grant.
    book.done(&newer, None, Outcome::Ended, HOLD + 10);
    assert!(
        book.view().turn_held,
        "its forward may still be at the origin"
    );
    book.on_alarm(HOLD + LEASE);
    assert_eq!(book.take_wakes(), vec!["a".to_string()]);
    book.heard("a", HolderStatus::Ended, HOLD + LEASE + 1);
    assert_eq!(book.view().newest_delivered, Some(20));
    let (_, stale) = go(book.ask(&older, HOLD + LEASE + 2));
    assert!(stale, "10 is older than what the origin may have");
}

/// A lapsed holder that says `Delivered` with its entry gone still
/// raises the newest time delivered, from its turn.
#[test]
fn a_lapsed_holder_delivered_without_an_entry_still_counts() {
    let mut book = OrderBook::default();
    let (newer, older) = (ask("a", 20, 0), ask("b", 10, 0));
    waits(book.ask(&newer, 0));
    go(book.ask(&newer, HOLD));
    book.done(&newer, None, Outcome::Ended, HOLD + 10);
    book.on_alarm(HOLD + LEASE);
    book.take_wakes();
    book.heard("a", HolderStatus::Delivered, HOLD + LEASE + 1);
    assert_eq!(book.view().newest_delivered, Some(20));
    let (_, stale) = go(book.ask(&older, HOLD + LEASE + 2));
    assert!(stale);
}

/// A holder whose attempt ended it (a dead letter) frees its turn
/// without counting anything: only a purge under the turn is in doubt.
#[test]
fn a_holder_that_ended_its_own_attempt_counts_nothing() {
    let mut book = OrderBook::default();
    let (newer, older) = (ask("a", 20, 0), ask("b", 10, 0));
    waits(book.ask(&newer, 0));
    let (grant, _) = go(book.ask(&newer, HOLD));
    waits(book.ask(&older, HOLD + 1));
    book.done(&newer, Some(grant), Outcome::Ended, HOLD + 10);
    assert_eq!(book.view().newest_delivered, None);
    let (_, stale) = go(book.ask(&older, HOLD + 11));
    assert!(!stale);
}

/// The object's dispatch is the book's: an `Ask` is the ask, a `Done` is
/// noted and hands the turn on (the Worker's object and the simulation
/// both call it).
#[test]
fn a_call_is_applied_as_the_object_answers_it() {
    let mut book = OrderBook::default();
    let a = ask("a", 10, 0);
    waits(book.apply(&OrderCall::Ask(a.clone()), 0));
    let (grant, _) = go(book.apply(&OrderCall::Ask(a.clone()), HOLD));
    let done = OrderCall::Done {
        ask: a,
        grant: Some(grant),
        outcome: Outcome::Delivered,
    };
    assert_eq!(book.apply(&done, HOLD + 1), OrderReply::Noted);
    assert_eq!(book.view().newest_delivered, Some(10));
    assert!(!book.view().turn_held);
}
