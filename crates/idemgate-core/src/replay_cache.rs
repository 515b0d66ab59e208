//! Completed replays one isolate remembers, so that a replay needs no
//! Durable Object round trip (the costly part of it). A completed receipt's
//! stored response is immutable until retention or a purge, so a replay the
//! object answered is kept here for at most [`REPLAY_TTL_MS`] (and never
//! past the receipt's expiry), keyed by the object name and the
//! fingerprint, so a different payload still goes to the object (422).
//! Each hit builds its response from plain bytes in its own request: a
//! Workers request may not touch another request's I/O objects.
//!
//! A purge through the operator API evicts the key in the isolate that
//! serves it; another isolate may replay the purged response for up to
//! [`REPLAY_TTL_MS`]. Replays served here are not counted in the receipt's
//! `duplicates` (the gateway's `cache_hits` counts them).

use std::collections::HashMap;

use crate::receipt::HttpResponse;

/// Longest time a replay is served from an isolate's memory.
pub const REPLAY_TTL_MS: u64 = 10_000;
/// Most replays one isolate keeps; the soonest to expire go first.
pub const MAX_ENTRIES: usize = 1_024;

struct Entry {
    /// The replay, as the object rendered it.
    response: HttpResponse,
    valid_until: u64,
}

#[derive(Default)]
pub struct ReplayCache {
    entries: HashMap<String, Entry>,
}

/// The cache key of a delivery: its object and its payload.
pub fn cache_key(object_name: &str, fingerprint: &str) -> String {
    format!("{object_name}/{fingerprint}")
}

impl ReplayCache {
    pub fn get(&mut self, key: &str, now: u64) -> Option<HttpResponse> {
        match self.entries.get(key) {
            Some(entry) if now < entry.valid_until => Some(entry.response.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `response` (a replay) until `replayable_until` or the TTL.
    pub fn put(&mut self, key: String, response: HttpResponse, replayable_until: u64, now: u64) {
        let valid_until = replayable_until.min(now + REPLAY_TTL_MS);
        if valid_until <= now {
            return;
        }
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(&key) {
            self.entries.retain(|_, entry| entry.valid_until > now);
            if self.entries.len() >= MAX_ENTRIES {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.valid_until)
                    .map(|(key, _)| key.clone());
                if let Some(soonest) = soonest {
                    self.entries.remove(&soonest);
                }
            }
        }
        self.entries.insert(
            key,
            Entry {
                response,
                valid_until,
            },
        );
    }

    /// Forgets every payload of one object (a purge).
    pub fn evict_object(&mut self, object_name: &str) {
        let prefix = format!("{object_name}/");
        self.entries.retain(|key, _| !key.starts_with(&prefix));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(body: &str) -> HttpResponse {
        HttpResponse {
            status: 201,
            headers: vec![("idempotent-replayed".into(), "true".into())],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn entries_live_until_the_ttl_or_the_receipt_expiry() {
        let mut cache = ReplayCache::default();
        cache.put("a/f".into(), reply("x"), u64::MAX, 1_000);
        assert_eq!(
            cache.get("a/f", 1_000 + REPLAY_TTL_MS - 1).unwrap().body,
            b"x"
        );
        assert!(cache.get("a/f", 1_000 + REPLAY_TTL_MS).is_none());
        cache.put("b/f".into(), reply("y"), 1_500, 1_000);
        assert!(cache.get("b/f", 1_499).is_some());
        assert!(
            cache.get("b/f", 1_500).is_none(),
            "never past the receipt's expiry"
        );
        cache.put("c/f".into(), reply("z"), 900, 1_000);
        assert!(cache.is_empty(), "an expired receipt is not cached");
    }

    #[test]
    fn the_payload_is_part_of_the_key_and_purge_evicts_every_payload() {
        let mut cache = ReplayCache::default();
        cache.put(cache_key("obj", "f1"), reply("x"), u64::MAX, 0);
        cache.put(cache_key("obj", "f2"), reply("y"), u64::MAX, 0);
        cache.put(cache_key("other", "f1"), reply("z"), u64::MAX, 0);
        assert!(cache.get(&cache_key("obj", "f3"), 1).is_none());
        cache.evict_object("obj");
        assert_eq!(cache.len(), 1);
        assert!(cache.get(&cache_key("other", "f1"), 1).is_some());
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut cache = ReplayCache::default();
        for index in 0..MAX_ENTRIES as u64 + 10 {
            cache.put(format!("o{index}/f"), reply("x"), 5_000 + index, 0);
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(
            cache.get("o0/f", 1).is_none(),
            "the soonest to expire went first"
        );
    }
}
