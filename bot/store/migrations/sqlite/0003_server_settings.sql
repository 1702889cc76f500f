-- Per-server settings set by the server's admins, the rules they keep, and the events they audit.
CREATE TABLE server_settings (
    guild_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,  -- JSON
    updated_at REAL NOT NULL,
    updated_by INTEGER NOT NULL,
    PRIMARY KEY (guild_id, key)
);
CREATE TABLE blocklist (
    guild_id INTEGER NOT NULL,
    term TEXT NOT NULL,  -- as typed, normalized (NFKC, case-folded)
    added_by INTEGER NOT NULL,
    added_at REAL NOT NULL,
    PRIMARY KEY (guild_id, term)
);
CREATE TABLE members (
    guild_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    blocked_at REAL,
    blocked_by INTEGER,
    quota_reset_at REAL,  -- quotas count only what was spent after this instant
    PRIMARY KEY (guild_id, user_id)
);
-- What happened, for the server's log channel and its settings history; posted once, in order.
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    guild_id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    job_id INTEGER,
    user_id INTEGER,
    details TEXT NOT NULL DEFAULT '{}',  -- JSON: ids, amounts and reason codes, never prompts
    created_at REAL NOT NULL,
    posted_at REAL
);
CREATE INDEX events_unposted ON events (posted_at, id);
CREATE INDEX events_by_guild_kind ON events (guild_id, kind, id);
-- The price the request was made at, so an unanswered request counts against quotas at its own price.
ALTER TABLE jobs ADD COLUMN price_yen INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_by_member_accepted ON jobs (guild_id, user_id, accepted_at);
