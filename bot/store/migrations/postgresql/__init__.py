"""The migrations of bot/store/migrations/sqlite in PostgreSQL's dialect: the same names and numbers, one file each.

Discord ids and row ids are BIGINT (snowflakes pass 32 bits), times DOUBLE PRECISION (unix seconds),
yen and counters INTEGER, flags INTEGER 0/1 as in SQLite. A shipped file is never edited.
"""
