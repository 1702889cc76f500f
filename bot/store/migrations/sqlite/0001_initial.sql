-- The jobs table and a small key-value table for bot metadata.
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    state TEXT NOT NULL,
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    seed INTEGER,
    user_id INTEGER NOT NULL,
    guild_id INTEGER,
    channel_id INTEGER NOT NULL,
    locale TEXT NOT NULL DEFAULT 'en-US',
    service_job_id TEXT UNIQUE,
    charged_yen INTEGER NOT NULL DEFAULT 0 CHECK (charged_yen >= 0),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    accepted_at REAL,
    finished_at REAL,
    next_poll_at REAL,
    slow_notice_sent INTEGER NOT NULL DEFAULT 0,
    file_path TEXT,
    upload_limit_bytes INTEGER,
    interaction_token TEXT,
    interaction_expires_at REAL,
    reply_message_id INTEGER,
    delivered_channel_id INTEGER,
    delivered_message_id INTEGER,
    last_error TEXT
);
CREATE INDEX jobs_by_poll ON jobs (state, next_poll_at);
CREATE INDEX jobs_by_user ON jobs (user_id, guild_id, id);
CREATE INDEX jobs_by_guild_accepted ON jobs (guild_id, accepted_at);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
