-- The message an offer's buttons were shown on: a click on any other message is refused (bot/community/trust.py,
-- `bot_message`). NULL until the message is recorded, and for offers made before this column.
ALTER TABLE offers ADD COLUMN message_id BIGINT;
