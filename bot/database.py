"""The database under the stores: one small interface, SQLite here (the embedded default), PostgreSQL in
bot/postgres.py. The stores write their SQL once, with `?` placeholders; a backend runs it as its dialect needs.

A write is one `transaction()` at a time (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock), so a
check and the row it allows are one decision even across processes. Every database failure other than a
broken rule of the schema (a bug) becomes StoreUnavailable: nothing was recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, Protocol

import aiosqlite

from bot.errors import BotError

Dialect = Literal["sqlite", "postgresql"]


class StoreUnavailable(BotError):
    """The database could not be written or read (full, locked, I/O error): nothing was recorded."""


class DatabaseTooNew(BotError):
    """The database was written by a newer version of the bot: this one must not touch it."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the database is at schema version {found}, but this version of the bot knows only up to {known}: "
            "it was written by a newer version; run that version, or restore a backup"
        )


class Row(Protocol):
    """A result row: by position (`row[0]`) and by column name (`row["state"]`); `keys()` names the columns."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...

    def keys(self) -> Iterable[str]: ...


class Database(Protocol):
    """What the stores need of a database. Statements use `?` placeholders."""

    dialect: Dialect

    def transaction(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """One write transaction at a time; statements and reads inside it run in it.

        `wait=False`: when another process is writing, fail soon (StoreUnavailable) instead of after the usual wait.
        """
        ...

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """One statement (inside `transaction()`); returns the rows it changed."""
        ...

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None: ...

    async def migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply the migrations the database lacks, each once, in order; raises DatabaseTooNew."""
        ...

    async def schema_version(self) -> int: ...

    async def close(self) -> None: ...


# -- migrations ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


_MIGRATION_NAME = re.compile(r"(\d{4})_[a-z0-9_]+\.sql")


def load_migrations(source: Traversable | None = None) -> tuple[Migration, ...]:
    """The `NNNN_name.sql` files of `source` (the shipped `bot/migrations` by default), in order.

    Raises ValueError unless there are some, numbered 1, 2, … without a gap or a duplicate.
    """
    folder = source if source is not None else resources.files("bot.migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION_NAME.fullmatch(entry.name)
        if match is None:
            if entry.name.endswith(".sql"):
                raise ValueError(f"migration {entry.name!r} is not named NNNN_name.sql")
            continue
        found.append(Migration(int(match[1]), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    numbers = [m.version for m in found]
    if not numbers:
        raise ValueError("no migrations found: was the package installed without its .sql files?")
    if numbers != list(range(1, len(found) + 1)):
        raise ValueError(f"migrations must be numbered from 1 without gaps or duplicates, found {numbers}")
    return tuple(found)


#: How long a write waits for another process's write: well inside Discord's 3 s for a /video row.
BUSY_TIMEOUT_MS = 1500


# -- SQLite ------------------------------------------------------------------------------------------


class SqliteDatabase:
    """One aiosqlite connection in WAL mode; one writer at a time (an asyncio lock, then BEGIN IMMEDIATE)."""

    dialect: Dialect = "sqlite"

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str) -> SqliteDatabase:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)  # explicit transactions only
        db.row_factory = aiosqlite.Row
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=FULL")  # a recorded charge must survive a power cut
            # The row is written before the interaction is acknowledged: a locked database must fail fast,
            # well inside Discord's 3 s, rather than let the interaction die.
            await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except BaseException:
            await db.close()
            raise
        return cls(db)

    @property
    def connection(self) -> aiosqlite.Connection:
        """The raw connection, for SQLite-only tests and tools (PRAGMAs)."""
        return self._db

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        rows = await self._db.execute_fetchall("PRAGMA user_version")
        row = next(iter(rows), None)
        return int(row[0]) if row else 0

    async def migrate(self, migrations: Sequence[Migration]) -> None:
        async with self._write_lock:
            known = len(migrations)
            while (current := await self.schema_version()) != known:
                if current > known:
                    raise DatabaseTooNew(current, known)
                migration = migrations[current]
                # One script, one transaction, never split on `;` (a string or a trigger body may hold one).
                # sqlite3's executescript only COMMITs a transaction already open before it (none is here),
                # then runs the statements as written; on an error it stops and leaves BEGIN open.
                script = (
                    f"BEGIN IMMEDIATE;\n{migration.sql}\n;\n"
                    f"PRAGMA user_version = {migration.version};\nCOMMIT;"
                )
                try:
                    await self._db.executescript(script)
                except BaseException as exc:
                    # Some errors (disk full, I/O) already rolled back; ROLLBACK then would fail.
                    if self._db.in_transaction:
                        await self._db.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.Error) and await self.schema_version() > current:
                        continue  # another process applied it while we waited for the lock
                    raise

    @contextlib.asynccontextmanager
    async def _write(self, wait: bool) -> AsyncIterator[None]:
        async with self._write_lock:
            with _sqlite_errors():
                if wait:
                    await self._db.execute("BEGIN IMMEDIATE")
                else:
                    await self._db.execute("PRAGMA busy_timeout=0")
                    try:
                        await self._db.execute("BEGIN IMMEDIATE")
                    finally:
                        await self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
                try:
                    yield
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):  # a failed BEGIN/COMMIT may leave no transaction
                        await self._db.execute("ROLLBACK")
                    raise
                try:
                    await self._db.execute("COMMIT")
                except sqlite3.Error:
                    with contextlib.suppress(sqlite3.Error):
                        await self._db.execute("ROLLBACK")
                    raise

    def transaction(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """BEGIN IMMEDIATE … COMMIT under the lock, so coroutines never interleave a write.

        `wait=False`: a database another process is writing fails at once (StoreUnavailable) instead of after
        the busy timeout, for a periodic write that may skip a round rather than hold up a /video row.
        """
        return self._write(wait)

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        with _sqlite_errors():
            cursor = await self._db.execute(sql, tuple(params))
        return int(cursor.rowcount)

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with _sqlite_errors():
            await self._db.executemany(sql, [tuple(row) for row in rows])

    # Reads are one trip to aiosqlite's thread each (execute, fetch and close there): a cursor's
    # execute, fetch and close from here were three, each a wake-up of the loop (the bulk of its CPU).

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        with _sqlite_errors():
            return list(await self._db.execute_fetchall(sql, tuple(params)))

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None


@contextlib.contextmanager
def _sqlite_errors() -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError:
        raise  # a broken rule of the schema is a bug, not an outage
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"the database could not be written: {exc}") from exc
