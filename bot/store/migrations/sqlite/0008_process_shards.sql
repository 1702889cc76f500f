-- The Discord shards each live process runs (bot/shards.py's token; NULL for one that runs none, such as a
-- tool): a process refuses to start on shards a live one already runs.
ALTER TABLE processes ADD COLUMN shards TEXT;
