-- What the requester was told, and the retries of each step, kept across restarts.
ALTER TABLE jobs ADD COLUMN told_at DOUBLE PRECISION;
ALTER TABLE jobs ADD COLUMN step_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN step_failing_since DOUBLE PRECISION;
ALTER TABLE jobs ADD COLUMN notice_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN waiting_notice_sent INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET told_at = updated_at
    WHERE state IN ('delivered', 'failed', 'stalled', 'rejected', 'unknown', 'undeliverable');
CREATE INDEX jobs_untold ON jobs (told_at, state);
