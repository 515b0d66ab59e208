-- The receipt index (SPEC §7, §2b): one row per receipt an operator may
-- need to find without its key, and that the scheduled sweep wakes when
-- its next step is overdue. The key's Durable Object holds the receipt;
-- crates/idemgate-core/src/index/ says when rows are written. The worker
-- runs these same statements on first use (a test keeps the two equal),
-- so either order works.
CREATE TABLE IF NOT EXISTS receipt_index (
    object TEXT PRIMARY KEY,        -- the Durable Object's name
    route TEXT NOT NULL,
    scope TEXT NOT NULL,            -- Idempotency-Scope
    key TEXT NOT NULL,
    path TEXT,                      -- the normalised path, under path scope
    tenant_sha256 TEXT,
    receipt_id TEXT NOT NULL,
    state TEXT NOT NULL,            -- queued, in_flight, failed, dead; gone: a tombstone
    attempts INTEGER NOT NULL,
    last_status INTEGER,
    next_wake_at INTEGER,           -- when the object next has work: the sweep wakes it past this
    accepted_at INTEGER NOT NULL,   -- ms since the Unix epoch
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL        -- a write lands only over a lower version
);

CREATE INDEX IF NOT EXISTS receipt_index_by_state ON receipt_index (route, state, updated_at DESC, object DESC);

CREATE INDEX IF NOT EXISTS receipt_index_by_wake ON receipt_index (next_wake_at) WHERE next_wake_at IS NOT NULL;

-- Rows the second version wrote, at version 0, due at once: the sweep
-- wakes each object, which writes its row as it is now.
INSERT OR IGNORE INTO receipt_index (object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, next_wake_at, accepted_at, updated_at, version) SELECT object, route, scope, key, path, tenant_sha256, receipt_id, state, attempts, last_status, updated_at, updated_at, updated_at, 0 FROM receipts;
