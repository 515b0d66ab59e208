-- The second version's receipt index, kept so that an upgrade finds its
-- rows (0002 copies them into receipt_index). `IF NOT EXISTS`: the worker
-- may have created its tables before this ran.
CREATE TABLE IF NOT EXISTS receipts (
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

CREATE INDEX IF NOT EXISTS receipts_by_state ON receipts (route, state, updated_at DESC, object DESC);
