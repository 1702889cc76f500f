"""The job store: one database row per /video request, the ledger of what was charged.

Write-ahead rule: a row exists in `submitting` before a create request leaves the bot, and the
202 moves it to `pending` together with the service's job id and the charge, in one statement.

`JobStore` is the one interface; its parts, one concern each, are the modules of this package: moves.py (a job's
writes) with admission.py (its guardrails' SQL), reads.py, leasing.py (which process works on which job),
offers.py, ledger.py and meta.py, on base.py's database and helpers; records.py holds the rows' types.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from bot.config.database_url import is_postgres_url, redacted, sqlite_path_of
from bot.core.lifecycle import JobState
from bot.store.jobs.leasing import STOPPED_BEFORE_SENDING, Leasing
from bot.store.jobs.ledger import Ledger
from bot.store.jobs.meta import MetaRows
from bot.store.jobs.moves import ACCEPTED_LATE, UNREADABLE_202, Moves
from bot.store.jobs.offers import Offers
from bot.store.jobs.reads import Reads
from bot.store.jobs.records import (
    Admission,
    AdmissionRefused,
    CreditRefusal,
    CreditRefused,
    IllegalTransition,
    Job,
    JobNotFound,
    LeaseLost,
    NewJob,
    NewOffer,
    Offer,
    OfferKind,
    OfferOutcome,
    Renewal,
    SpendCap,
)
from bot.store.sqlite import (
    Database,
    DatabaseTooNew,
    Migration,
    NotADatabase,
    Row,
    SqliteDatabase,
    StoreUnavailable,
    load_migrations,
)

__all__ = [
    "ACCEPTED_LATE",
    "SCHEMA_VERSION",
    "STOPPED_BEFORE_SENDING",
    "UNREADABLE_202",
    "Admission",
    "AdmissionRefused",
    "CreditRefusal",
    "CreditRefused",
    "Database",
    "DatabaseTooNew",
    "IllegalTransition",
    "Job",
    "JobNotFound",
    "JobState",
    "JobStore",
    "LeaseLost",
    "Migration",
    "NewJob",
    "NewOffer",
    "NotADatabase",
    "Offer",
    "OfferKind",
    "OfferOutcome",
    "Renewal",
    "Row",
    "SpendCap",
    "StoreUnavailable",
    "load_migrations",
]

_MIGRATIONS: Sequence[Migration] = load_migrations()


#: The same migrations, by the same names and numbers, in PostgreSQL's dialect (tests/store/test_postgres.py compares
#: them, and the schemas they make step by step).
_POSTGRES_MIGRATIONS: Sequence[Migration] = load_migrations(resources.files("bot.store.migrations.postgresql"))


SCHEMA_VERSION = len(_MIGRATIONS)


class JobStore(Moves, Reads, Leasing, Offers, Ledger, MetaRows):
    """All SQL of the bot, on one database (SQLite or PostgreSQL, bot/store/sqlite.py), one writer at a time."""

    @classmethod
    async def open(cls, path: Path | str, *, clock: Callable[[], float] = time.time) -> JobStore:
        """The SQLite database in the file at `path` (made, and migrated, if needed).

        Raises NotADatabase for a file SQLite cannot read as a database (another file, or a damaged one).
        """
        try:
            return await cls.on(await SqliteDatabase.open(path), clock=clock)
        except sqlite3.DatabaseError as exc:
            unreadable = NotADatabase.of(Path(path), exc)
            if unreadable is None:
                raise
            raise unreadable from None

    @classmethod
    async def open_url(
        cls, url: str, *, clock: Callable[[], float] = time.time, follow_database_clock: bool = False
    ) -> JobStore:
        """The database at `sqlite:///PATH` or `postgresql://USER:PASSWORD@HOST:PORT/NAME`, migrated."""
        path = sqlite_path_of(url)
        if path is not None:
            return await cls.open(path, clock=clock)
        if not is_postgres_url(url):
            raise ValueError(f"not a sqlite:/// or postgresql:// database address: {redacted(url)}")
        from bot.store.postgres import PostgresDatabase  # asyncpg is loaded only by the bots that use it

        database = await PostgresDatabase.open(url)
        return await cls.on(database, clock=clock, follow_database_clock=follow_database_clock)

    @classmethod
    async def on(
        cls, db: Database, *, clock: Callable[[], float] = time.time, follow_database_clock: bool = False
    ) -> JobStore:
        """The store on an open database, after migrating it; closes the database if that fails."""
        store = cls(db, clock=clock, follow_database_clock=follow_database_clock)
        try:
            await store._migrate()
        except BaseException:
            await db.close()
            raise
        return store

    async def _migrate(self) -> None:
        # Read at call time, so tests can swap the lists.
        await self._db.migrate(_MIGRATIONS if self._db.dialect == "sqlite" else _POSTGRES_MIGRATIONS)
