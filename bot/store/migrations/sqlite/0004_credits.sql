-- A failed, charged job that the service's support refunded: when and by whom it was marked credited.
-- The charge stays in charged_yen, so the ledger still equals what the service charged.
ALTER TABLE jobs ADD COLUMN credited_at REAL;
ALTER TABLE jobs ADD COLUMN credited_by INTEGER;
