-- Facts about the deployment itself. `third_version_since`: when this
-- version of idemgate first ran against this database; for a retention
-- after it, a delivery whose key the second version derived differently
-- is also looked up where that version kept it (README, "Upgrading").
CREATE TABLE IF NOT EXISTS idemgate_meta (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
