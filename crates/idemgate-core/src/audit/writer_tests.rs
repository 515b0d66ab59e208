//! The audit writer over rows in memory: intent ids, appends, settling,
//! pages and exports, checkpoints and the alarm, as the `AuditLog` object
//! runs them over its SQLite.

use super::checkpoint::{CHECKPOINT_DAILY_MS, CHECKPOINT_EVERY_MS};
use super::rows::{AuditRows, MemoryRows, INTENT_COUNTER};
use super::writer::Writer;
use super::*;

const T: u64 = 1_764_770_000_000;

fn intent_on(route: &str, at: u64) -> Intent {
    Intent {
        at,
        actor: "admin-token".into(),
        action: "purge".into(),
        route: route.into(),
        target: format!("key_sha256={}", key_sha256("evt_1")),
    }
}

fn begin(writer: &mut Writer<impl AuditRows>, intent: Intent, now: u64) -> u64 {
    let line = writer
        .answer(
            AuditCall::Begin {
                intent,
                fail: false,
            },
            now,
        )
        .unwrap();
    serde_json::from_str::<Begun>(&line).unwrap().intent_id
}

fn finish(writer: &mut Writer<impl AuditRows>, intent_id: u64, now: u64) -> Result<Entry, String> {
    let call = AuditCall::Finish {
        intent_id,
        result: "200".into(),
        fail: false,
    };
    writer
        .answer(call, now)
        .map(|line| serde_json::from_str(&line).unwrap())
}

/// An act on `route`, begun and finished at `now`.
fn act(writer: &mut Writer<impl AuditRows>, route: &str, now: u64) -> Entry {
    let id = begin(writer, intent_on(route, now), now);
    finish(writer, id, now).unwrap()
}

fn page(writer: &mut Writer<impl AuditRows>, call: AuditCall) -> Page {
    serde_json::from_str(&writer.answer(call, T).unwrap()).unwrap()
}

fn newest(before: Option<u64>, limit: u32) -> AuditCall {
    AuditCall::Page {
        routes: None,
        before,
        limit,
    }
}

fn seqs(page: &Page) -> Vec<u64> {
    page.entries.iter().map(|entry| entry.seq).collect()
}

#[test]
fn intent_ids_rise_and_are_never_handed_out_twice() {
    let mut writer = Writer::new(MemoryRows::default());
    let first = begin(&mut writer, intent_on("stripe", T), T);
    let second = begin(&mut writer, intent_on("stripe", T), T);
    assert_eq!((first, second), (1, 2));
    finish(&mut writer, second, T).unwrap();
    // The first is settled as `unknown`; its id is not handed out again,
    // and its late result does not join the act after it.
    let later = T + SETTLE_AFTER_MS + 1;
    let third = begin(&mut writer, intent_on("stripe", later), later);
    assert_eq!(third, 3);
    assert_eq!(
        finish(&mut writer, first, later).unwrap_err(),
        "intent 1 is no longer open"
    );
    let rows = writer.into_rows();
    let results: Vec<(&str, u64)> = rows
        .entries
        .values()
        .map(|entry| (entry.result.as_str(), entry.seq))
        .collect();
    assert_eq!(results, [("200", 1), (RESULT_UNKNOWN, 2)]);
    assert_eq!(rows.counters.get(INTENT_COUNTER), Some(&3));
}

#[test]
fn intent_ids_survive_a_reload() {
    let mut writer = Writer::new(MemoryRows::default());
    for _ in 0..3 {
        act(&mut writer, "stripe", T);
    }
    let open = begin(&mut writer, intent_on("stripe", T), T);
    // The object's instance goes; its rows stay.
    let mut reloaded = Writer::new(writer.into_rows());
    let next = begin(&mut reloaded, intent_on("stripe", T), T);
    assert_eq!((open, next), (4, 5));
    let entry = finish(&mut reloaded, open, T).unwrap();
    assert_eq!(entry.seq, 4);

    // A log written before the counter was kept starts above every id it
    // can have handed out.
    let mut rows = reloaded.into_rows();
    rows.counters.clear();
    let mut older = Writer::new(rows);
    assert_eq!(begin(&mut older, intent_on("stripe", T), T), 4 + 5 + 1);
}

#[test]
fn a_finished_intent_is_the_next_entry_linked_to_the_head_and_closes() {
    let mut writer = Writer::new(MemoryRows::default());
    let first = act(&mut writer, "stripe", T);
    let id = begin(&mut writer, intent_on("paddle", T + 1), T + 1);
    let second = finish(&mut writer, id, T + 2).unwrap();
    assert_eq!(
        (second.seq, second.prev_hash.as_str()),
        (2, first.hash.as_str())
    );
    assert_eq!(second.hash, second.computed_hash());
    assert_eq!(second.at, T + 1, "the time the act was asked for");
    assert_eq!(
        finish(&mut writer, id, T + 3).unwrap_err(),
        format!("intent {id} is no longer open")
    );
    let head: Head = serde_json::from_str(&writer.answer(AuditCall::Head, T).unwrap()).unwrap();
    assert_eq!((head.seq, head.hash), (2, second.hash));
    assert!(writer.into_rows().intents.is_empty());
}

#[test]
fn a_refused_write_changes_nothing() {
    let mut writer = Writer::new(MemoryRows::default());
    let refused = writer.answer(
        AuditCall::Begin {
            intent: intent_on("stripe", T),
            fail: true,
        },
        T,
    );
    assert_eq!(
        refused.unwrap_err(),
        "the audit log refused the write (test hook)"
    );
    let id = begin(&mut writer, intent_on("stripe", T), T);
    assert_eq!(id, 1);
    let refused = writer.answer(
        AuditCall::Finish {
            intent_id: id,
            result: "200".into(),
            fail: true,
        },
        T,
    );
    assert!(refused.is_err());
    let rows = writer.into_rows();
    assert!(rows.entries.is_empty());
    assert_eq!(rows.intents.len(), 1, "left open, to settle");
}

#[test]
fn any_call_settles_intents_past_their_time_first() {
    let mut writer = Writer::new(MemoryRows::default());
    begin(&mut writer, intent_on("stripe", T), T);
    begin(&mut writer, intent_on("stripe", T + 1_000), T + 1_000);
    let now = T + SETTLE_AFTER_MS + 1;
    let head: Head = serde_json::from_str(&writer.answer(AuditCall::Head, now).unwrap()).unwrap();
    assert_eq!(head.seq, 1, "the young intent waits");
    let rows = writer.into_rows();
    assert_eq!(rows.entries[&1].result, RESULT_UNKNOWN);
    assert_eq!(rows.intents.keys().collect::<Vec<_>>(), [&2]);
}

#[test]
fn pages_run_newest_first_and_the_last_has_no_cursor() {
    let mut writer = Writer::new(MemoryRows::default());
    for _ in 0..5 {
        act(&mut writer, "stripe", T);
    }
    let first = page(&mut writer, newest(None, 2));
    assert_eq!((seqs(&first), first.cursor), (vec![5, 4], Some(4)));
    assert_eq!(first.head.seq, 5);
    let second = page(&mut writer, newest(first.cursor, 2));
    assert_eq!((seqs(&second), second.cursor), (vec![3, 2], Some(2)));
    let last = page(&mut writer, newest(second.cursor, 2));
    assert_eq!((seqs(&last), last.cursor), (vec![1], None));

    // A chain that ends on a page boundary: the full page names a next,
    // which is empty and ends.
    let full = page(&mut writer, newest(Some(3), 2));
    assert_eq!((seqs(&full), full.cursor), (vec![2, 1], Some(1)));
    let after = page(&mut writer, newest(full.cursor, 2));
    assert_eq!((seqs(&after), after.cursor), (vec![], None));
    assert_eq!(after.head.seq, 5, "the head comes with every page");
}

#[test]
fn an_empty_chain_pages_nothing_under_the_genesis_head() {
    let mut writer = Writer::new(MemoryRows::default());
    let empty = page(&mut writer, newest(None, PAGE));
    assert_eq!(empty.entries, []);
    assert_eq!((empty.cursor, empty.head), (None, Head::default()));
    let export = page(&mut writer, AuditCall::Export { after: 0, limit: 3 });
    assert_eq!((seqs(&export), export.cursor), (vec![], None));
}

#[test]
fn an_export_runs_oldest_first_from_its_cursor() {
    let mut writer = Writer::new(MemoryRows::default());
    for _ in 0..5 {
        act(&mut writer, "stripe", T);
    }
    let export = |writer: &mut Writer<MemoryRows>, after| {
        page(writer, AuditCall::Export { after, limit: 2 })
    };
    let first = export(&mut writer, 0);
    assert_eq!((seqs(&first), first.cursor), (vec![1, 2], Some(2)));
    let second = export(&mut writer, 2);
    assert_eq!((seqs(&second), second.cursor), (vec![3, 4], Some(4)));
    let last = export(&mut writer, 4);
    assert_eq!((seqs(&last), last.cursor), (vec![5], None));
}

#[test]
fn a_route_tokens_pages_hold_its_routes_alone_and_no_head() {
    let mut writer = Writer::new(MemoryRows::default());
    for route in ["stripe", "paddle", "stripe", "github", "stripe", "paddle"] {
        act(&mut writer, route, T);
    }
    let scoped = |before, limit| AuditCall::Page {
        routes: Some(vec!["stripe".into(), "github".into()]),
        before,
        limit,
    };
    let first = page(&mut writer, scoped(None, 2));
    assert_eq!((seqs(&first), first.cursor), (vec![5, 4], Some(4)));
    let last = page(&mut writer, scoped(first.cursor, 2));
    assert_eq!((seqs(&last), last.cursor), (vec![3, 1], Some(1)));
    let after = page(&mut writer, scoped(last.cursor, 2));
    assert_eq!(seqs(&after), Vec::<u64>::new());

    let answer = first.answer(false);
    assert_eq!(answer["head"], serde_json::Value::Null);
    assert_eq!(answer["cursor"], "4");
    assert!(!answer.to_string().contains(&first.head.hash));
    assert_eq!(first.answer(true)["head"]["seq"], 6);
}

#[test]
fn the_alarm_sends_the_head_after_an_act_and_daily() {
    let mut writer = Writer::new(MemoryRows::default());
    assert_eq!(writer.alarm(T).unwrap(), None, "nothing to anchor");
    assert_eq!(writer.next_alarm(T), None, "nothing to wake for");
    let id = begin(&mut writer, intent_on("stripe", T), T);
    assert_eq!(
        writer.next_alarm(T),
        Some(T + SETTLE_AFTER_MS + 1_000),
        "the open intent's settling"
    );
    finish(&mut writer, id, T).unwrap();
    assert_eq!(writer.next_alarm(T), Some(T), "the first head at once");

    let due = writer.alarm(T).unwrap().expect("due");
    assert_eq!((due.checkpoint.seq, due.checkpoint.at_ms), (1, T));
    writer.checkpoint_sent(due, true, T).unwrap();
    assert_eq!(writer.alarm(T + 1).unwrap(), None);
    assert_eq!(writer.next_alarm(T + 1), Some(T + CHECKPOINT_DAILY_MS));

    // An act within the minute waits for it.
    act(&mut writer, "stripe", T + 10);
    assert_eq!(writer.alarm(T + 10).unwrap(), None);
    assert_eq!(writer.next_alarm(T + 10), Some(T + CHECKPOINT_EVERY_MS));

    // Not delivered everywhere: the head still counts as unsent, tried
    // again a minute on.
    let later = T + CHECKPOINT_EVERY_MS;
    let due = writer.alarm(later).unwrap().expect("due");
    assert_eq!(due.checkpoint.seq, 2);
    writer.checkpoint_sent(due, false, later).unwrap();
    assert_eq!(writer.next_alarm(later), Some(later + CHECKPOINT_EVERY_MS));
    let again = later + CHECKPOINT_EVERY_MS;
    let due = writer.alarm(again).unwrap().expect("due again");
    writer.checkpoint_sent(due, true, again).unwrap();
    assert_eq!(writer.next_alarm(again), Some(again + CHECKPOINT_DAILY_MS));
}

#[test]
fn the_alarm_settles_an_intent_whose_result_never_came() {
    let mut writer = Writer::new(MemoryRows::default());
    begin(&mut writer, intent_on("stripe", T), T);
    let wake = writer.next_alarm(T).unwrap();
    let due = writer
        .alarm(wake)
        .unwrap()
        .expect("the settled entry's head");
    assert_eq!(due.checkpoint.seq, 1);
    let rows = writer.into_rows();
    assert_eq!(rows.entries[&1].result, RESULT_UNKNOWN);
    assert!(rows.intents.is_empty());
}

#[test]
fn only_begin_and_finish_write() {
    let writes: Vec<bool> = [
        AuditCall::Begin {
            intent: intent_on("stripe", T),
            fail: false,
        },
        AuditCall::Finish {
            intent_id: 1,
            result: "200".into(),
            fail: false,
        },
        AuditCall::Head,
        newest(None, PAGE),
        AuditCall::Export {
            after: 0,
            limit: EXPORT_PAGE,
        },
    ]
    .iter()
    .map(AuditCall::writes)
    .collect();
    assert_eq!(writes, [true, true, false, false, false]);
}
