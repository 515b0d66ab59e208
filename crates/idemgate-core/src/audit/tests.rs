use super::*;
use crate::operator::redrive_filter::time_bound;

fn intent(actor: &str, action: &str) -> Intent {
    Intent {
        at: 1_764_770_000_000,
        actor: actor.into(),
        action: action.into(),
        route: "stripe".into(),
        target: format!("key_sha256={}", key_sha256("evt_1")),
    }
}

#[test]
fn the_first_entry_links_to_sixty_four_zeros_and_seq_one() {
    let mut chain = Chain::default();
    let entry = chain.append(&intent("admin-token", "purge"), "200");
    assert_eq!(entry.seq, 1);
    assert_eq!(entry.prev_hash, GENESIS);
    assert_eq!(chain.head().seq, 1);
    assert_eq!(chain.head().hash, entry.hash);
    let second = chain.append(&intent("admin-token", "redrive"), "202");
    assert_eq!(
        (second.seq, second.prev_hash.as_str()),
        (2, entry.hash.as_str())
    );
}

#[test]
fn the_hash_covers_prev_hash_a_newline_and_the_canonical_entry_without_hash() {
    let mut chain = Chain::default();
    let entry = chain.append(&intent("ops@example.com", "purge"), "200");
    let canonical = String::from_utf8(entry.canonical_unhashed()).unwrap();
    // Names sorted, no spaces, no `hash`.
    assert_eq!(
        canonical,
        format!(
            "{{\"action\":\"purge\",\"actor\":\"ops@example.com\",\"at\":1764770000000,\
             \"prev_hash\":\"{GENESIS}\",\"result\":\"200\",\"route\":\"stripe\",\"seq\":1,\
             \"target\":\"key_sha256={}\"}}",
            key_sha256("evt_1")
        )
    );
    let expected = hex::encode(Sha256::digest(format!("{GENESIS}\n{canonical}")));
    assert_eq!(entry.hash, expected);
}

#[test]
fn canonical_strings_escape_as_rfc_8785_does() {
    let mut chain = Chain::default();
    let entry = chain.append(&intent("zoë \"x\"\u{7}/💳", "purge"), "200");
    let canonical = String::from_utf8(entry.canonical_unhashed()).unwrap();
    assert!(
        canonical.contains(r#""actor":"zoë \"x\"\u0007/💳""#),
        "{canonical}"
    );
}

#[test]
fn the_writer_and_the_origin_verifier_agree_and_name_the_first_broken_entry() {
    let mut chain = Chain::default();
    let entries: Vec<serde_json::Value> = (0..6)
        .map(|n| chain.append(&intent("admin-token", "purge"), &format!("{}", 200 + n)))
        .map(|entry| serde_json::to_value(entry).unwrap())
        .collect();
    let verified = idemgate_origin::audit::verify_chain(&entries).unwrap();
    assert_eq!(
        (verified.head_seq, verified.head_hash.as_str()),
        (6, chain.head().hash.as_str())
    );

    let mut edited = entries.clone();
    edited[3]["target"] = "key_sha256=00".into();
    let broken = idemgate_origin::audit::verify_chain(&edited).unwrap_err();
    assert_eq!((broken.index, broken.seq), (3, Some(4)));
    assert_eq!(broken.fault, idemgate_origin::audit::Fault::Hash);

    let mut deleted = entries.clone();
    deleted.remove(1);
    let broken = idemgate_origin::audit::verify_chain(&deleted).unwrap_err();
    assert_eq!((broken.index, broken.seq), (1, Some(3)));
    assert_eq!(broken.fault, idemgate_origin::audit::Fault::Seq);
}

#[test]
fn time_bounds_are_milliseconds_or_rfc_3339() {
    assert_eq!(
        time_bound("since", "1764770000000").unwrap(),
        1_764_770_000_000
    );
    assert_eq!(
        time_bound("since", "2025-12-03T14:00:00Z").unwrap(),
        1_764_770_400_000
    );
    assert_eq!(
        time_bound("since", "2025-12-03T15:00:00.250+01:00").unwrap(),
        1_764_770_400_250
    );
    for wrong in ["", "yesterday", "2025-12-03", "-5", "1e3"] {
        assert!(time_bound("since", wrong).is_err(), "{wrong}");
    }
}

#[test]
fn open_intents_past_their_time_are_settled_as_unknown_in_order() {
    let mut chain = Chain::default();
    let first = chain.append(&intent("admin-token", "purge"), "204");
    let at = |at: u64| Intent {
        at,
        ..intent("ops@example.com", "redrive")
    };
    let now = 10 * SETTLE_AFTER_MS;
    let open = vec![
        (7, at(now - SETTLE_AFTER_MS - 1)),
        (3, at(now - 2 * SETTLE_AFTER_MS)),
        (9, at(now - 1_000)),
    ];
    let settled = chain.settle(&open, now);
    let ids: Vec<u64> = settled.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [3, 7], "the young intent waits; the old ones in order");
    assert_eq!(settled[0].1.prev_hash, first.hash);
    assert_eq!(settled[0].1.seq, 2);
    assert_eq!(settled[1].1.seq, 3);
    assert!(settled
        .iter()
        .all(|(_, entry)| entry.result == RESULT_UNKNOWN));
    assert_eq!(chain.head().seq, 3);
}

/// The review's item 16 (round 5): a route token's page told the
/// deployment's head `seq`, how many acts every route made.
#[test]
fn a_route_tokens_page_has_no_head() {
    let mut chain = Chain::default();
    let entry = chain.append(&intent("route-token:stripe", "purge"), "200");
    for _ in 0..41 {
        chain.append(&intent("admin-token", "purge"), "200");
    }
    let page = Page {
        entries: vec![entry],
        cursor: None,
        head: chain.head().clone(),
    };
    let scoped = page.answer(false);
    assert_eq!(scoped["head"], serde_json::Value::Null);
    assert_eq!(scoped["entries"].as_array().map(Vec::len), Some(1));
    assert!(!scoped.to_string().contains(&chain.head().hash));
    let whole = page.answer(true);
    assert_eq!(whole["head"]["seq"], 42);
}

/// The review's item 15 (round 5): an intent settled as `unknown` left
/// the table, the next act got its id back, and a late result of the
/// first would have joined the second.
#[test]
fn an_intent_id_is_never_handed_out_twice() {
    assert_eq!(next_intent_id(None, 0, 0), 1, "a new log");
    // Intent 1 settled (its entry is seq 1), none open: the next is 2.
    assert_eq!(next_intent_id(Some(1), 1, 0), 2);
    // Two open, the counter ahead of them.
    assert_eq!(next_intent_id(Some(7), 5, 6), 8);
    // A log written before the counter was kept: above every id it can
    // have handed out (its entries and its open intents).
    assert_eq!(next_intent_id(None, 5, 2), 8);
}

/// A page of the chain: the cursor of the next page is the last entry's
/// `seq` when the page is full, none when it is the last (and none for a
/// page of nothing, whatever its limit).
#[test]
fn a_full_page_names_the_next_and_a_short_one_ends_the_chain() {
    let mut chain = Chain::default();
    let entries: Vec<Entry> = (0..3)
        .map(|_| chain.append(&intent("admin-token", "purge"), "204"))
        .collect();
    assert_eq!(Page::cursor_of(&entries, 3), Some(3));
    assert_eq!(Page::cursor_of(&entries[..2], 3), None);
    assert_eq!(Page::cursor_of(&[], 0), None);
    assert_eq!(Page::cursor_of(&entries[..1], 1), Some(1));
}
