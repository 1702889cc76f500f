-- The price the request was made at, so an unanswered request counts against quotas at its own price.
ALTER TABLE jobs ADD COLUMN price_yen INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_by_member_accepted ON jobs (guild_id, user_id, accepted_at);
-- A failed, charged job that the service's support refunded: when and by whom it was marked credited.
-- The charge stays in charged_yen, so the ledger still equals what the service charged.
ALTER TABLE jobs ADD COLUMN credited_at DOUBLE PRECISION;
ALTER TABLE jobs ADD COLUMN credited_by BIGINT;
