"""`python -m bot migrate-db`: copy a SQLite database's whole history into an empty PostgreSQL database.

The tables are read from the SQLite file's own schema (every table the migrations made, whatever they
are by then), so a table added later is copied without a change here. The copy is all or nothing: the
target's emptiness is checked, every row written, each id sequence moved past the copied ids, and the
row counts and the ledger compared, all in one PostgreSQL write transaction; a difference rolls it back.

The source is only read: opened read-only, under the bot's own process lock (bot/store/instance_lock.py), so
the copy is never of a database a running bot is changing, and a bot cannot start on it meanwhile.
This module is a tool over the schema itself, like the migrations: its SQL names tables it discovers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

from bot.config.database_url import is_postgres_url, redacted
from bot.core.errors import BotError
from bot.core.money import format_yen
from bot.store.instance_lock import AlreadyRunning, single_process
from bot.store.jobs import SCHEMA_VERSION, DatabaseTooNew, JobStore
from bot.store.sqlite import Database, SqliteDatabase, StoreUnavailable

#: Rows read from SQLite and sent to PostgreSQL at a time: one round of executemany each.
BATCH_ROWS = 2_000
#: The table that records PostgreSQL's schema version (the migrations' own), never copied or counted.
_POSTGRES_VERSION_TABLE = "schema_version"


class MigrateRefused(BotError):
    """The copy was not started, or was rolled back: the target holds nothing of it. The message says why."""


@dataclass(frozen=True)
class TableCopy:
    name: str
    source_rows: int
    target_rows: int


@dataclass(frozen=True)
class MigrateReport:
    source: Path
    target: str  # redacted: never the password
    schema_version: int
    tables: tuple[TableCopy, ...]
    source_ledger: tuple[int, int]  # (charged videos, yen) as `JobStore.ledger` counts them
    target_ledger: tuple[int, int]
    committed: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.committed and self.source_ledger == self.target_ledger and all(
            t.source_rows == t.target_rows for t in self.tables
        )

    def lines(self) -> list[str]:
        width = max((len(t.name) for t in self.tables), default=0)
        out = [f"migrate-db: {self.source} (schema {self.schema_version}) -> {self.target}"]
        for table in self.tables:
            mark = "" if table.source_rows == table.target_rows else "  MISMATCH"
            out.append(f"  {table.name:<{width}}  {table.source_rows:>10,} rows in SQLite, "
                       f"{table.target_rows:>10,} in PostgreSQL{mark}")
        for side, (videos, charged) in (("SQLite", self.source_ledger), ("PostgreSQL", self.target_ledger)):
            out.append(f"  ledger in {side}: {videos:,} charged videos, {format_yen(charged)}")
        total = sum(t.target_rows for t in self.tables)
        if self.ok:
            out.append(f"migrate-db: OK, {total:,} rows in {self.seconds:.1f} s. Point DATABASE_URL at the new "
                       "database and start the bot; keep the SQLite file as a backup")
        elif self.committed:
            out.append("migrate-db: FAILED: the copy differs from its source (see above)")
        else:
            out.append("migrate-db: FAILED: the copy differed from its source and was rolled back; "
                       "the target is as it was")
        return out


async def migrate_database(source: Path, target_url: str, *, batch_rows: int = BATCH_ROWS) -> MigrateReport:
    """Copy every table of the SQLite database at `source` into the empty PostgreSQL database at `target_url`.

    Raises MigrateRefused (a running bot, a missing or foreign file, another schema version, a target with
    rows), DatabaseTooNew, or StoreUnavailable; returns the report, whose `ok` says whether both sides agree.
    """
    shown = redacted(target_url)
    if not is_postgres_url(target_url):
        raise MigrateRefused(f"--to must be a postgresql://USER:PASSWORD@HOST:PORT/DATABASE address, not {shown}")
    if not source.is_file():
        raise MigrateRefused(f"no SQLite database at {source}: give its path with --from (or set DATABASE_PATH)")
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(single_process(source))
        except AlreadyRunning as exc:
            who = f" (process {exc.holder})" if exc.holder else ""
            raise MigrateRefused(f"the bot is running on {source}{who}: stop it, then migrate "
                                 "(the copy must be of a database nothing writes)") from None
        except OSError as exc:
            raise MigrateRefused(f"cannot take the bot's lock beside {source}: {exc.strerror or exc}") from None
        async with _read_only(source) as reader:
            return await _migrate(reader, source, target_url, shown, batch_rows)
    raise AssertionError("unreachable")  # mypy: ExitStack may swallow exceptions


@contextlib.asynccontextmanager
async def _read_only(path: Path) -> AsyncIterator[aiosqlite.Connection]:
    try:
        connection = await aiosqlite.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    except aiosqlite.Error as exc:
        raise MigrateRefused(f"cannot open {path} read-only: {exc}") from None
    connection.row_factory = aiosqlite.Row
    try:
        try:
            # One snapshot for the whole copy (`pause` and `resume` may write beside the lock).
            await connection.execute("BEGIN")
            await connection.execute_fetchall("SELECT COUNT(*) FROM sqlite_master")
        except aiosqlite.Error as exc:
            raise MigrateRefused(f"{path} is not a SQLite database that can be read: {exc}") from None
        yield connection
    finally:
        await connection.close()


# -- the source's schema ------------------------------------------------------------------------------


async def _source_version(reader: aiosqlite.Connection, source: Path) -> int:
    rows = await reader.execute_fetchall("PRAGMA user_version")
    found = int(next(iter(rows))[0])
    if found > SCHEMA_VERSION:
        raise DatabaseTooNew(found, SCHEMA_VERSION)
    if found == 0:
        raise MigrateRefused(f"{source} is not a database of this bot (it has no schema version)")
    if found < SCHEMA_VERSION:
        raise MigrateRefused(
            f"{source} is at schema version {found}, this version of the bot at {SCHEMA_VERSION}: start this "
            "version of the bot once on it (it upgrades the database as it starts), stop it, then migrate"
        )
    return found


async def _source_tables(reader: aiosqlite.Connection) -> list[str]:
    """The schema's tables, SQLite's own left out, each after the tables its foreign keys name."""
    rows = await reader.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
    )
    names = [str(row[0]) for row in rows]
    needs: dict[str, set[str]] = {}
    for name in names:
        keys = await reader.execute_fetchall(f"PRAGMA foreign_key_list({_quoted(name)})")
        needs[name] = {str(key["table"]) for key in keys} & set(names) - {name}
    ordered: list[str] = []
    while len(ordered) < len(names):
        ready = [n for n in names if n not in ordered and needs[n] <= set(ordered)]
        if not ready:  # a cycle: PostgreSQL will name the key it breaks
            ready = [n for n in names if n not in ordered]
        ordered.extend(ready)
    return ordered


async def _source_columns(reader: aiosqlite.Connection, table: str) -> list[str]:
    return [str(row["name"]) for row in await reader.execute_fetchall(f"PRAGMA table_info({_quoted(table)})")]


async def _source_sequences(reader: aiosqlite.Connection) -> dict[str, int]:
    """AUTOINCREMENT's high-water marks: an id once used stays used, even if its row is gone."""
    exists = await reader.execute_fetchall("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'")
    if not exists:
        return {}
    return {str(row[0]): int(row[1]) for row in await reader.execute_fetchall("SELECT name, seq FROM sqlite_sequence")}


async def _count(fetch: Callable[[str], Any], table: str) -> int:
    rows = await fetch(f"SELECT COUNT(*) FROM {_quoted(table)}")
    return int(next(iter(rows))[0])


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- the target's schema --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Column:
    name: str
    data_type: str
    serial: bool  # an identity column, or one fed by a sequence


async def _target_tables(db: Database) -> list[str]:
    rows = await db.fetch_all("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
    return [str(row[0]) for row in rows if row[0] != _POSTGRES_VERSION_TABLE]


async def _target_columns(db: Database, table: str) -> dict[str, _Column]:
    rows = await db.fetch_all(
        """SELECT column_name, data_type, is_identity = 'YES' OR COALESCE(column_default, '') LIKE 'nextval(%'
           FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?""",
        (table,),
    )
    return {str(row[0]): _Column(str(row[0]), str(row[1]), bool(row[2])) for row in rows}


async def _tables_with_rows(db: Database) -> list[str]:
    return [table for table in await _target_tables(db) if await _count(db.fetch_all, table)]


def _converter(data_type: str) -> Callable[[Any], Any]:
    """SQLite keeps a value as it was given; PostgreSQL's columns are typed (a whole REAL such as 3.0 in an
    integer column, an integer in a floating one, 0/1 in a boolean one)."""
    if data_type in ("bigint", "integer", "smallint"):
        return lambda v: int(v) if isinstance(v, float) and v.is_integer() else v
    if data_type in ("double precision", "real"):
        return lambda v: float(v) if isinstance(v, int) else v
    if data_type == "boolean":
        return lambda v: bool(v) if isinstance(v, int) else v
    if data_type == "text":
        return lambda v: str(v) if isinstance(v, int | float) else v
    return lambda v: v


# -- the copy -----------------------------------------------------------------------------------------


class _Differs(Exception):
    """Rolls the copy back: the target would not equal its source."""

    def __init__(self, tables: tuple[TableCopy, ...], ledger: tuple[int, int]) -> None:
        self.tables = tables
        self.ledger = ledger


async def _migrate(
    reader: aiosqlite.Connection, source: Path, target_url: str, shown: str, batch_rows: int
) -> MigrateReport:
    started = time.monotonic()
    version = await _source_version(reader, source)
    tables = await _source_tables(reader)
    columns = {table: await _source_columns(reader, table) for table in tables}
    sequences = await _source_sequences(reader)
    counts = {table: await _count(reader.execute_fetchall, table) for table in tables}
    # The ledger as the bot counts it, read-only (JobStore.on would migrate; this file is not to change).
    source_ledger = await JobStore(SqliteDatabase(reader)).ledger()

    from bot.store.postgres import PostgresDatabase  # asyncpg is loaded only for a PostgreSQL database

    database = await PostgresDatabase.open(target_url, min_size=1, max_size=2)
    try:
        # Before migrating it: a database in use is left exactly as it was.
        if busy := await _tables_with_rows(database):
            raise MigrateRefused(_busy_message(shown, busy))
    except BaseException:
        await database.close()
        raise
    target = await JobStore.on(database)  # to this bot's schema (the source's, checked above)
    try:
        try:
            async with database.transaction():
                # Again under the write lock: a bot started on the target meanwhile cannot slip a row in.
                if busy := await _tables_with_rows(database):
                    raise MigrateRefused(_busy_message(shown, busy))
                known = set(await _target_tables(database))
                copied: list[TableCopy] = []
                for table in tables:
                    if table not in known:
                        raise MigrateRefused(f"the target has no table {table!r}: is it this version's schema?")
                    target_columns = await _target_columns(database, table)
                    if missing := [c for c in columns[table] if c not in target_columns]:
                        raise MigrateRefused(f"the target's table {table!r} lacks the columns {missing}")
                    await _copy_table(reader, database, table, [target_columns[c] for c in columns[table]],
                                      batch_rows)
                    await _move_sequences(database, table, target_columns, sequences.get(table, 0))
                    copied.append(TableCopy(table, counts[table], await _count(database.fetch_all, table)))
                target_ledger = await target.ledger()
                if target_ledger != source_ledger or any(t.source_rows != t.target_rows for t in copied):
                    raise _Differs(tuple(copied), target_ledger)
        except _Differs as differs:
            return MigrateReport(source, shown, version, differs.tables, source_ledger, differs.ledger,
                                 committed=False, seconds=time.monotonic() - started)
    finally:
        await target.close()
    return MigrateReport(source, shown, version, tuple(copied), source_ledger, target_ledger, committed=True,
                         seconds=time.monotonic() - started)


def _busy_message(shown: str, tables: Sequence[str]) -> str:
    return (f"the target {shown} already holds rows (in {', '.join(tables)}): migrate only into an empty "
            "database; nothing was written")


async def _copy_table(
    reader: aiosqlite.Connection, database: Database, table: str, columns: Sequence[_Column], batch_rows: int
) -> None:
    names = ", ".join(_quoted(c.name) for c in columns)
    insert = f"INSERT INTO {_quoted(table)} ({names}) VALUES ({', '.join('?' for _ in columns)})"
    converters = [_converter(c.data_type) for c in columns]
    cursor = await reader.execute(f"SELECT {names} FROM {_quoted(table)}")
    try:
        while batch := await cursor.fetchmany(batch_rows):
            rows = [[convert(value) for convert, value in zip(converters, row, strict=True)] for row in batch]
            try:
                await _insert(database, insert, rows)
            except StoreUnavailable:
                raise
            except Exception as exc:  # a value PostgreSQL's column refuses: say which table, roll it all back
                raise MigrateRefused(f"table {table!r}: PostgreSQL refused a row: {type(exc).__name__}: {exc}; "
                                     "nothing was written") from exc
    finally:
        await cursor.close()


async def _insert(database: Database, insert: str, rows: list[list[Any]]) -> None:
    await database.execute_many(insert, rows)


async def _move_sequences(database: Database, table: str, columns: dict[str, _Column], used: int) -> None:
    """Each id sequence past the copied ids (and past ids SQLite handed out whose rows are gone)."""
    for column in columns.values():
        if not column.serial:
            continue
        row = await database.fetch_one(f"SELECT MAX({_quoted(column.name)}) FROM {_quoted(table)}")
        highest = max(int(row[0]) if row and row[0] is not None else 0, used)
        if highest > 0:
            await database.fetch_one(
                "SELECT setval(pg_get_serial_sequence(?, ?), ?)", (_quoted(table), column.name, highest)
            )
