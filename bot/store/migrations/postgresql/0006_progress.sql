-- When a waiting job's receipt last got its place in line and ready time, so refreshes go oldest first.
ALTER TABLE jobs ADD COLUMN progress_at DOUBLE PRECISION;
CREATE INDEX jobs_by_progress ON jobs (state, progress_at);
