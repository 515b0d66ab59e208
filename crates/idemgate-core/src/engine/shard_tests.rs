//! Where a key's object writes its index row (SPEC §15, v5): the shard it
//! remembers, whatever `INDEX_SHARDS` says later.

use futures::executor::block_on;

use super::tests::{async_policy, delivery, engine, write_accepted_row, NOW};
use super::Engine;
use crate::index::shard::{shard_of, IndexPlace};
use crate::memory_backend::MemoryBackend;

fn places(backend: &MemoryBackend) -> Vec<IndexPlace> {
    backend.index_places.borrow().clone()
}

#[test]
fn a_receipt_keeps_its_row_in_its_shard_when_index_shards_changes() {
    let engine = engine();
    let backend = engine.backend();
    backend.index_shards.set(16);
    let policy = async_policy(&[10_000]);
    block_on(engine.deliver(delivery("a"), &policy));
    assert!(write_accepted_row(&engine));
    let shard = engine.receipt().unwrap().unwrap().indexed.shard;
    assert_eq!(shard, Some(shard_of("object-1", 16)), "remembered");
    let first = IndexPlace {
        route: "default".into(),
        shard: shard.unwrap(),
    };
    assert_eq!(places(backend), std::slice::from_ref(&first));
    // The deployment moves to 3 shards; a new instance of the object
    // keeps writing where its row is.
    let restarted = Engine::new(MemoryBackend::new(NOW));
    restarted.backend().index_shards.set(3);
    *restarted.backend().stored.borrow_mut() = backend.stored.borrow().clone();
    block_on(restarted.wake("object-1")).unwrap();
    // Purged with force, the removal (written once the receipt is gone)
    // goes there too.
    assert_eq!(block_on(restarted.purge("object-1", true)), Ok(true));
    let written = places(restarted.backend());
    assert_eq!(written.len(), 2, "{written:?}");
    assert!(written.iter().all(|place| *place == first), "{written:?}");
}

#[test]
fn a_new_object_hashes_to_a_shard_of_its_route() {
    let engine = engine();
    engine.backend().index_shards.set(7);
    block_on(engine.deliver(delivery("a"), &async_policy(&[10_000])));
    write_accepted_row(&engine);
    assert_eq!(
        places(engine.backend()),
        [IndexPlace {
            route: "default".into(),
            shard: shard_of("object-1", 7),
        }]
    );
}
