-- Use-once offers behind the buttons that spend money: a re-roll's confirmation, or a /video waiting for
-- Generate (confirm before spending). A click uses an offer with one UPDATE that only an unused, unexpired
-- row passes, so a double click or two members clicking at once start one job.
CREATE TABLE offers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('reroll', 'confirm')),
    source_job_id INTEGER REFERENCES jobs (id),  -- a re-roll: the job whose prompt and model it repeats
    model TEXT NOT NULL,  -- as asked: "" for the server's default
    prompt TEXT NOT NULL,  -- a confirmation's prompt; '' for a re-roll (read from its job when used)
    seed INTEGER,
    user_id INTEGER NOT NULL,  -- who may use it
    guild_id INTEGER,
    channel_id INTEGER NOT NULL,
    locale TEXT NOT NULL,
    upload_limit_bytes INTEGER,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL,
    outcome TEXT,  -- 'used', 'cancelled' or 'expired' once used_at is set
    job_id INTEGER REFERENCES jobs (id)  -- the job its use started
);
CREATE INDEX offers_open ON offers (expires_at) WHERE used_at IS NULL;
