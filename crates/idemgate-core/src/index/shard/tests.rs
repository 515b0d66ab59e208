use sha2::{Digest, Sha256};

use super::*;

/// An object's name as a key's object has it: 64 hex digits of a hash.
fn object_name(n: u64) -> String {
    hex::encode(Sha256::digest(n.to_be_bytes()))
}

fn row(object: u64, updated_at: u64, version: u64, state: &str) -> TableRow {
    TableRow {
        object: object_name(object),
        route: "r".into(),
        scope: "s".into(),
        key: format!("k{object}"),
        path: None,
        tenant_sha256: None,
        receipt_id: format!("id{object}"),
        state: state.into(),
        attempts: 1,
        last_status: None,
        next_wake_at: None,
        accepted_at: updated_at,
        updated_at,
        version,
    }
}

/// Every row of `shards`, listed page by page with the merged cursor, as
/// the operator API pages them.
fn list_all(shards: &[Vec<TableRow>]) -> Vec<TableRow> {
    let mut cursor: Option<Cursor> = None;
    let mut seen = Vec::new();
    for _ in 0..100 {
        let pages = shards
            .iter()
            .map(|shard| {
                let mut rows: Vec<TableRow> = shard
                    .iter()
                    .filter(|row| {
                        cursor.as_ref().is_none_or(|cursor| {
                            (row.updated_at, &row.object) < (cursor.updated_at, &cursor.object)
                        })
                    })
                    .cloned()
                    .collect();
                rows.sort_by(|a, b| (b.updated_at, &b.object).cmp(&(a.updated_at, &a.object)));
                rows.truncate(PAGE_SIZE as usize);
                rows
            })
            .collect();
        let (rows, next) = merge_pages(pages);
        seen.extend(rows);
        match next {
            Some(next) => cursor = Some(next),
            None => return seen,
        }
    }
    panic!("the listing never ended");
}

#[test]
fn a_merged_listing_shows_every_row_once_newest_first() {
    // 16 shards, 437 rows, many in the same millisecond.
    let mut shards = vec![Vec::new(); 16];
    for n in 0..437u64 {
        let object = row(n * 7919, 1_000 + n / 3, n, "dead");
        shards[shard_of(&object.object, 16) as usize].push(object);
    }
    let listed = list_all(&shards);
    assert_eq!(listed.len(), 437);
    let mut expected: Vec<TableRow> = shards.concat();
    expected.sort_by(|a, b| (b.updated_at, &b.object).cmp(&(a.updated_at, &a.object)));
    assert_eq!(listed, expected);
}

#[test]
fn an_object_in_two_places_is_shown_at_its_highest_version() {
    let old = row(1, 10, 5, "failed");
    let new = row(1, 20, 9, "dead");
    let (rows, next) = merge_pages(vec![vec![old.clone()], vec![new.clone()]]);
    assert_eq!(rows, [new]);
    assert_eq!(next, None);
}

#[test]
fn a_full_page_from_any_shard_means_more_may_follow() {
    let full: Vec<TableRow> = (0..PAGE_SIZE as u64)
        .map(|n| row(n, 1_000 - n, 1, "dead"))
        .collect();
    let (rows, next) = merge_pages(vec![full.clone(), Vec::new()]);
    assert_eq!(rows.len(), PAGE_SIZE as usize);
    assert_eq!(next.unwrap().object, full.last().unwrap().object);
    let (_, next) = merge_pages(vec![full[..3].to_vec(), Vec::new()]);
    assert_eq!(next, None);
    assert_eq!(merge_pages(vec![Vec::new(); 16]), (Vec::new(), None));
}

#[test]
fn shards_spread_objects_evenly_and_stay_put() {
    let mut counts = [0u32; 16];
    for n in 0..16_000u64 {
        let object = object_name(n);
        let shard = shard_of(&object, 16);
        assert_eq!(shard, shard_of(&object, 16), "stable");
        counts[shard as usize] += 1;
    }
    assert!(
        counts.iter().all(|count| (800..1200).contains(count)),
        "{counts:?}"
    );
    assert_eq!(shard_of(&"f".repeat(64), 1), 0);
    assert!(shard_of("not-a-hash", 4) < 4);
    assert_ne!(shard_name("a", 1), shard_name("a", 2));
    assert_ne!(shard_name("a", 1), shard_name("b", 1));
}

#[test]
fn counts_are_summed_over_shards() {
    let count = |state: &str, count: f64, oldest: Option<f64>| StateCount {
        route: "r".into(),
        state: state.into(),
        count,
        oldest,
    };
    let merged = merge_counts(vec![
        vec![
            count("dead", 2.0, Some(50.0)),
            count("failed", 1.0, Some(9.0)),
        ],
        vec![count("dead", 3.0, Some(40.0))],
        vec![count("dead", 1.0, None)],
    ]);
    assert_eq!(
        merged,
        [
            count("dead", 6.0, Some(40.0)),
            count("failed", 1.0, Some(9.0))
        ]
    );
}
