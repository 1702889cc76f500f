"""The database under the stores: one small interface, SQLite here (the embedded default), PostgreSQL in
bot/store/postgres.py. The stores write their SQL once, with `?` placeholders; a backend runs it as its dialect needs.

A write is one `transaction()` at a time (SQLite's BEGIN IMMEDIATE, PostgreSQL's advisory lock), so a
check and the row it allows are one decision even across processes. Every database failure other than a
broken rule of the schema (a bug) becomes StoreUnavailable: nothing was recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

import aiosqlite

from bot.core.errors import BotError

log = logging.getLogger(__name__)

Dialect = Literal["sqlite", "postgresql"]
_T = TypeVar("_T")


class StoreUnavailable(BotError):
    """The database could not be written or read (full, locked, I/O error): nothing was recorded."""


class NotADatabase(BotError):
    """The file is not a SQLite database (another file, named by mistake), or a damaged one: SQLite cannot read
    it at all, and no retry will change that."""

    def __init__(self, path: Path, reason: str, *, damaged: bool) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
        self.damaged = damaged

    @classmethod
    def of(cls, path: Path, error: sqlite3.Error) -> NotADatabase | None:
        """What `error` says of the file, if it says that SQLite cannot read it; else None (locked, full, I/O)."""
        code = getattr(error, "sqlite_errorcode", None)
        if code not in (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT):
            return None
        return cls(path, str(error), damaged=code == sqlite3.SQLITE_CORRUPT)


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


@dataclass(frozen=True)
class Step:
    """One statement of `Database.write_steps`; `needs_row`: stop there (and roll back) unless it returned a row."""

    sql: str
    params: Sequence[Any] = ()
    needs_row: bool = False


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

    async def write_steps(self, steps: Sequence[Step], *, durable: bool = True) -> list[list[Row]] | None:
        """A write transaction of statements known beforehand, in one trip where the backend can: each step's rows.

        None if a `needs_row` step returned no row: it stopped there and rolled back, nothing was written.
        `durable=False`: a write that is redone if a power cut loses it; its commit need not wait for the disk
        (SQLite; a later durable commit makes it durable too). It is never torn: it is there whole, or not at all.
        """
        ...

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def fetch_many(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """The rows of several queries, in order: on SQLite in one trip to its thread."""
        ...

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
    """The `NNNN_name.sql` files of `source` (the shipped `bot/store/migrations/sqlite` by default), in order.

    Raises ValueError unless there are some, numbered 1, 2, … without a gap or a duplicate.
    """
    folder = source if source is not None else resources.files("bot.store.migrations.sqlite")
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


#: Writes in one group commit at most: the callers it answers all wake in one turn of the loop, so a group of
#: 10,000 /video rows stalled it for 320 ms (bench/); this many share a commit and wake in a few ms.
GROUP_LIMIT = 50

#: Every commit waits for the disk, but those of writes that are redone if lost (`write_steps(durable=False)`).
_DURABLE = "PRAGMA synchronous=FULL"

#: How long a write waits for another process's write: well inside Discord's 3 s for a /video row.
BUSY_TIMEOUT_MS = 1500


# -- SQLite ------------------------------------------------------------------------------------------

_Statements = Sequence[tuple[str, tuple[Any, ...], bool]]


@dataclass(frozen=True)
class _Write:
    """One caller's `write_steps`, queued for the next group commit."""

    statements: _Statements
    durable: bool
    written: asyncio.Future[list[list[Row]] | None]




class SqliteDatabase:
    """One aiosqlite connection in WAL mode; one writer at a time (an asyncio lock, then BEGIN IMMEDIATE).

    Every statement is a trip to aiosqlite's thread and back, a wake-up of the loop that costs more CPU than
    most statements: a transaction's BEGIN travels with its first statement, and `write_steps` runs a whole
    transaction in one trip.
    """

    dialect: Dialect = "sqlite"

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db
        self._write_lock = asyncio.Lock()
        # Set in the task that holds the write lock until its first statement opens the transaction: a read
        # of another task meanwhile must neither open it nor run in it.
        self._opening: contextvars.ContextVar[_Opening | None] = contextvars.ContextVar(
            f"sqlite_opening_{id(self)}", default=None
        )
        # Writes of `write_steps` waiting for the next group commit, and the task that makes it.
        self._queued: list[_Write] = []
        self._committer: asyncio.Task[None] | None = None
        self._closing = False

    @classmethod
    async def open(cls, path: Path | str) -> SqliteDatabase:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)  # explicit transactions only
        db.row_factory = aiosqlite.Row
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute(_DURABLE)  # a recorded charge must survive a power cut
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
        self._closing = True
        if self._committer is not None:
            # Queued writes land first; shielded, so a close that is itself cancelled never cuts them off.
            await asyncio.shield(asyncio.gather(self._committer, return_exceptions=True))
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

    async def _in_thread(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """`work` on aiosqlite's thread, with the connection: one trip, whatever it runs.

        aiosqlite has no public call for this; `_execute` is the one its own methods use.
        """
        connection = self._db._conn
        return cast(_T, await self._db._execute(work, connection))  # type: ignore[no-untyped-call]

    @contextlib.asynccontextmanager
    async def _write(self, wait: bool) -> AsyncIterator[None]:
        async with self._write_lock:
            opening = _Opening(wait)
            token = self._opening.set(opening)
            try:
                with _sqlite_errors():
                    try:
                        yield
                    except BaseException:
                        if opening.sent:
                            # Queued behind the statement that opened it, even one still running when cancelled.
                            await self._in_thread(_roll_back)
                        raise
                    if opening.sent:  # nothing was run: nothing was opened
                        await self._in_thread(_commit)
            finally:
                self._opening.reset(token)

    def transaction(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """BEGIN IMMEDIATE … COMMIT under the lock, so coroutines never interleave a write.

        `wait=False`: a database another process is writing fails at once (StoreUnavailable) instead of after
        the busy timeout, for a periodic write that may skip a round rather than hold up a /video row.
        """
        return self._write(wait)

    def _run(self, work: Callable[[sqlite3.Connection], _T]) -> Callable[[sqlite3.Connection], _T]:
        """`work`, preceded by this task's BEGIN if its transaction is not open yet."""
        opening = self._opening.get()
        if opening is None or opening.sent:
            return work
        opening.sent = True
        wait = opening.wait

        def begun_then_work(connection: sqlite3.Connection) -> _T:
            _begin(connection, wait=wait)
            return work(connection)

        return begun_then_work

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        values = tuple(params)
        with _sqlite_errors():
            return await self._in_thread(self._run(lambda connection: _rowcount(connection.execute(sql, values))))

    async def execute_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        values = [tuple(row) for row in rows]
        with _sqlite_errors():
            await self._in_thread(self._run(lambda connection: _rowcount(connection.executemany(sql, values))))

    async def write_steps(self, steps: Sequence[Step], *, durable: bool = True) -> list[list[Row]] | None:
        """Group commit: the writes that queue while one is on its way go together in the next trip, each in a
        savepoint of one transaction, under one commit (one fsync) for all."""
        if self._closing:
            raise StoreUnavailable("the database is closing")
        statements = [(step.sql, tuple(step.params), step.needs_row) for step in steps]
        written: asyncio.Future[list[list[Row]] | None] = asyncio.get_running_loop().create_future()
        self._queued.append(_Write(statements, durable, written))
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._commit_queued(), name="sqlite-group-commit")
        with _sqlite_errors():
            return await written

    async def _commit_queued(self) -> None:
        while self._queued:
            async with self._write_lock:
                # A caller that gave up before its turn is left out; one already on its way is written.
                waiting = [write for write in self._queued if not write.written.done()]
                batch, self._queued = waiting[:GROUP_LIMIT], waiting[GROUP_LIMIT:]
                if not batch:
                    continue
                try:
                    outcomes = await self._in_thread(functools.partial(
                        _group, writes=[write.statements for write in batch],
                        durable=any(write.durable for write in batch),
                    ))
                except BaseException as exc:
                    for write in batch:
                        if not write.written.done():
                            write.written.set_exception(exc if isinstance(exc, Exception) else StoreUnavailable(
                                "the write was interrupted: it may or may not have been recorded"))
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for write, outcome in zip(batch, outcomes, strict=True):
                    if write.written.done():
                        continue
                    if isinstance(outcome, Exception):
                        write.written.set_exception(outcome)
                    else:
                        write.written.set_result(outcome)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        values = tuple(params)
        with _sqlite_errors():
            return await self._in_thread(self._run(lambda connection: connection.execute(sql, values).fetchall()))

    async def fetch_many(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        values = [(sql, tuple(params)) for sql, params in queries]

        def fetch(connection: sqlite3.Connection) -> list[list[Row]]:
            return [connection.execute(sql, params).fetchall() for sql, params in values]

        with _sqlite_errors():
            return await self._in_thread(self._run(fetch))

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        rows = await self.fetch_all(sql, params)
        return rows[0] if rows else None


@dataclass
class _Opening:
    """A write transaction whose BEGIN has not been sent yet."""

    wait: bool
    sent: bool = False


# The functions below run on aiosqlite's thread.


def _begin(connection: sqlite3.Connection, *, wait: bool) -> None:
    if wait:
        connection.execute("BEGIN IMMEDIATE")
        return
    connection.execute("PRAGMA busy_timeout=0")
    try:
        connection.execute("BEGIN IMMEDIATE")
    finally:
        connection.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


def _commit(connection: sqlite3.Connection) -> None:
    try:
        connection.execute("COMMIT")
    except sqlite3.Error:
        _roll_back(connection)
        raise


def _roll_back(connection: sqlite3.Connection) -> None:
    """Undo the open transaction, if any: a failed BEGIN opened none, and some errors (disk full) undo their own."""
    if connection.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")


def _rowcount(cursor: sqlite3.Cursor) -> int:
    count = int(cursor.rowcount)
    cursor.close()
    return count


def _group(
    connection: sqlite3.Connection, writes: Sequence[_Statements], *, durable: bool
) -> list[list[list[Row]] | Exception | None]:
    """Several callers' writes in one transaction, each in a savepoint: one that stops, or fails on its own,
    is undone alone. An error that ends the transaction (or the commit's) fails them all: none was recorded.

    Not `durable`: committed without waiting for the disk (WAL with synchronous=NORMAL: a power cut may lose it,
    never tear it). The connection is back to FULL for every other write.
    """
    if not durable:
        connection.execute("PRAGMA synchronous=NORMAL")
    try:
        return _grouped(connection, writes)
    finally:
        if not durable:
            _restore_durable(connection)


def _restore_durable(connection: sqlite3.Connection) -> None:
    """Back to FULL after a group that did not wait for the disk. If that fails, the group's outcome still
    stands (it was committed), and the connection is closed: every later write fails loudly (StoreUnavailable)
    rather than commits without waiting for the disk."""
    try:
        connection.execute(_DURABLE)
    except sqlite3.Error:
        log.exception("SQLite could not be set back to wait for the disk; closing the connection")
        connection.close()


def _grouped(connection: sqlite3.Connection, writes: Sequence[_Statements]) -> list[list[list[Row]] | Exception | None]:
    _begin(connection, wait=True)
    outcomes: list[list[list[Row]] | Exception | None] = []
    try:
        for statements in writes:
            connection.execute("SAVEPOINT write")
            outcome: list[list[Row]] | Exception | None
            try:
                outcome = _steps(connection, statements)
            except Exception as exc:
                if not connection.in_transaction:
                    raise
                outcome = exc
            if outcome is None or isinstance(outcome, Exception):
                connection.execute("ROLLBACK TO write")
            connection.execute("RELEASE write")
            outcomes.append(outcome)
    except BaseException:
        _roll_back(connection)
        raise
    _commit(connection)
    return outcomes


def _steps(connection: sqlite3.Connection, statements: _Statements) -> list[list[Row]] | None:
    results: list[list[Row]] = []
    for sql, values, needs_row in statements:
        rows: list[Row] = connection.execute(sql, values).fetchall()
        results.append(rows)
        if needs_row and not rows:
            return None
    return results


@contextlib.contextmanager
def _sqlite_errors() -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError:
        raise  # a broken rule of the schema is a bug, not an outage
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"the database could not be written: {exc}") from exc
