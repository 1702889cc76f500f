-- Several processes on one database: each job is worked on by the process holding its lease, and each
-- live process keeps a heartbeat row (the service's rate limit is shared among the live ones).
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_expires_at REAL;
CREATE INDEX jobs_by_lease ON jobs (lease_owner, lease_expires_at);
CREATE TABLE processes (
    owner TEXT PRIMARY KEY,
    started_at REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
