-- The receipt index (SPEC §7): one row per receipt an operator may need to
-- find without its key (failed, dead, and async ones until they complete).
-- The key's Durable Object holds the receipt itself; see
-- crates/idemgate-core/src/index.rs for when rows are written.
CREATE TABLE receipts (
    object TEXT PRIMARY KEY,        -- the Durable Object's name
    route TEXT NOT NULL,
    scope TEXT NOT NULL,            -- Idempotency-Scope
    key TEXT NOT NULL,
    path TEXT,                      -- the normalised path, under path scope
    tenant_sha256 TEXT,
    receipt_id TEXT NOT NULL,
    state TEXT NOT NULL,            -- queued, in_flight, failed, dead
    attempts INTEGER NOT NULL,
    last_status INTEGER,
    updated_at INTEGER NOT NULL     -- ms since the Unix epoch
);

CREATE INDEX receipts_by_state ON receipts (route, state, updated_at DESC, object DESC);
