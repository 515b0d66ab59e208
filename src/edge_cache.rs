//! The isolate's replay cache (adapter state): one [`ReplayCache`] per
//! isolate, shared by its requests.

use std::cell::RefCell;

use idemgate_core::replay_cache::ReplayCache;

thread_local! {
    static REPLAYS: RefCell<ReplayCache> = RefCell::new(ReplayCache::default());
}

pub fn with_replays<T>(f: impl FnOnce(&mut ReplayCache) -> T) -> T {
    REPLAYS.with(|cache| f(&mut cache.borrow_mut()))
}
