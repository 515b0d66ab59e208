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
/// Most bytes (bodies, headers and keys) one isolate keeps: a Workers
/// isolate has 128 MB, and 1,024 replays of up to 1 MiB could take all of it.
pub const MAX_BYTES: usize = 8 * 1024 * 1024;
/// A replay larger than this is not kept at all: it would push out many.
pub const MAX_ENTRY_BYTES: usize = 256 * 1024;

struct Entry {
    /// The replay, as the object rendered it.
    response: HttpResponse,
    valid_until: u64,
    bytes: usize,
}

#[derive(Default)]
pub struct ReplayCache {
    entries: HashMap<String, Entry>,
    /// Fast keys ([`crate::pipeline::fast_replay_key`]) of byte-identical
    /// retries, to the entry their delivery was cached under.
    aliases: HashMap<String, String>,
    bytes: usize,
}

fn size_of(key: &str, response: &HttpResponse) -> usize {
    key.len()
        + response.body.len()
        + response
            .headers
            .iter()
            .map(|(name, value)| name.len() + value.len())
            .sum::<usize>()
}

/// The cache key of a delivery: its object and its payload.
pub fn cache_key(object_name: &str, fingerprint: &str) -> String {
    format!("{object_name}/{fingerprint}")
}

impl ReplayCache {
    /// The replay of a byte-identical retry, found without parsing it,
    /// with the key it is cached under (its object and fingerprint).
    pub fn get_fast(&mut self, fast_key: &str, now: u64) -> Option<(String, HttpResponse)> {
        let key = self.aliases.get(fast_key)?.clone();
        match self.get(&key, now) {
            Some(found) => Some((key, found)),
            None => {
                self.aliases.remove(fast_key);
                None
            }
        }
    }

    /// Makes `fast_key` find the entry cached under `key`.
    pub fn alias(&mut self, fast_key: String, key: &str) {
        if self.entries.contains_key(key) && self.aliases.len() < 2 * MAX_ENTRIES {
            self.aliases.insert(fast_key, key.to_string());
        }
    }

    pub fn get(&mut self, key: &str, now: u64) -> Option<HttpResponse> {
        match self.entries.get(key) {
            Some(entry) if now < entry.valid_until => Some(entry.response.clone()),
            Some(_) => {
                self.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `response` (a replay) until `replayable_until` or the TTL,
    /// evicting the soonest to expire while over the entry or byte bound.
    pub fn put(&mut self, key: String, response: HttpResponse, replayable_until: u64, now: u64) {
        let valid_until = replayable_until.min(now.saturating_add(REPLAY_TTL_MS));
        let bytes = size_of(&key, &response);
        if valid_until <= now || bytes > MAX_ENTRY_BYTES {
            return;
        }
        self.remove(&key);
        self.entries.retain(|_, entry| entry.valid_until > now);
        let entries = &self.entries;
        self.aliases
            .retain(|_, target| entries.contains_key(target));
        self.bytes = self.entries.values().map(|entry| entry.bytes).sum();
        while self.entries.len() >= MAX_ENTRIES || self.bytes + bytes > MAX_BYTES {
            let soonest = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.valid_until)
                .map(|(key, _)| key.clone());
            match soonest {
                Some(soonest) => self.remove(&soonest),
                None => break,
            }
        }
        self.bytes += bytes;
        self.entries.insert(
            key,
            Entry {
                response,
                valid_until,
                bytes,
            },
        );
    }

    fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes;
            self.aliases.retain(|_, target| target != key);
        }
    }

    /// Forgets every payload of one object (a purge).
    pub fn evict_object(&mut self, object_name: &str) {
        let prefix = format!("{object_name}/");
        self.entries.retain(|key, _| !key.starts_with(&prefix));
        self.aliases
            .retain(|_, target| !target.starts_with(&prefix));
        self.bytes = self.entries.values().map(|entry| entry.bytes).sum();
    }

    /// Bytes held, as counted against [`MAX_BYTES`].
    pub fn bytes(&self) -> usize {
        self.bytes
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
        cache.alias("fast-1".into(), &cache_key("obj", "f1"));
        assert!(cache.get_fast("fast-1", 1).is_some());
        cache.evict_object("obj");
        assert_eq!(cache.len(), 1);
        assert!(
            cache.get_fast("fast-1", 1).is_none(),
            "a purge evicts the fast key too"
        );
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

    #[test]
    fn the_cache_is_bounded_in_bytes() {
        let mut cache = ReplayCache::default();
        let big = "x".repeat(200 * 1024);
        for index in 0..100u64 {
            cache.put(format!("o{index}/f"), reply(&big), 5_000 + index, 0);
            assert!(cache.bytes() <= MAX_BYTES, "{}", cache.bytes());
        }
        assert!(cache.len() < 50, "{}", cache.len());
        assert!(cache.get("o99/f", 1).is_some(), "the newest stays");
        cache.put(
            "huge/f".into(),
            reply(&"x".repeat(MAX_ENTRY_BYTES + 1)),
            9_000,
            0,
        );
        assert!(cache.get("huge/f", 1).is_none(), "too large to keep");
        let before = cache.bytes();
        cache.evict_object("o99");
        assert!(cache.bytes() < before);
    }
}
