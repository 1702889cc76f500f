"""SQLite's side of bot/store/sqlite.py: BEGIN sent with a transaction's first statement, and the group commit of
`write_steps` (what both backends share is tested through the store, in test_store.py)."""

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, cast

import aiosqlite
import pytest

from bot.store.sqlite import _DURABLE, GROUP_LIMIT, SqliteDatabase, Step, StoreUnavailable, _group


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SqliteDatabase]:
    database = await SqliteDatabase.open(tmp_path / "t.sqlite3")
    await database.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    yield database
    await database.close()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts trips to aiosqlite's thread (one entry: Connection._execute)."""
    count = [0]
    real: Callable[..., Awaitable[Any]] = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return count


async def values(db: SqliteDatabase) -> list[int]:
    return [row[0] for row in await db.fetch_all("SELECT v FROM t ORDER BY v")]


def insert(value: int, *then: Step) -> list[Step]:
    return [Step("INSERT INTO t (v) VALUES (?) RETURNING v", (value,)), *then]


async def test_writes_that_queue_together_share_one_trip_and_one_commit(db: SqliteDatabase, trips: list[int]) -> None:
    results = await asyncio.gather(*(db.write_steps(insert(value)) for value in range(20)))
    assert trips[0] == 1, "twenty writes queued at once go in one transaction"
    assert [rows[0][0][0] for rows in results if rows is not None] == list(range(20))
    assert await values(db) == list(range(20))


async def test_a_group_holds_at_most_its_limit_so_few_callers_wake_at_once(
    db: SqliteDatabase, trips: list[int]
) -> None:
    await asyncio.gather(*(db.write_steps(insert(value)) for value in range(GROUP_LIMIT + 1)))
    assert trips[0] == 2
    assert len(await values(db)) == GROUP_LIMIT + 1


async def test_in_a_group_a_write_that_stops_or_fails_is_undone_alone(db: SqliteDatabase, trips: list[int]) -> None:
    stops = Step("UPDATE t SET v = v WHERE v = -1 RETURNING v", needs_row=True)
    outcomes = await asyncio.gather(
        db.write_steps(insert(1)),
        db.write_steps(insert(2, stops)),  # its INSERT is rolled back with it
        db.write_steps(insert(1)),  # the same key again: a broken rule of the schema, raised to its caller
        db.write_steps(insert(4)),
        return_exceptions=True,
    )
    assert trips[0] == 1, "the four were one group"
    assert outcomes[1] is None
    assert isinstance(outcomes[2], sqlite3.IntegrityError)
    assert await values(db) == [1, 4]


async def test_an_error_that_ends_the_groups_transaction_fails_every_write_in_it(db: SqliteDatabase) -> None:
    # RAISE(ROLLBACK) ends the whole transaction, as some I/O errors do: the write before it is gone too.
    await db.execute("CREATE TABLE u (v INTEGER)")
    await db.execute("CREATE TRIGGER u_ends BEFORE INSERT ON u BEGIN SELECT RAISE(ROLLBACK, 'ended'); END")
    outcomes = await asyncio.gather(
        db.write_steps(insert(1)),
        db.write_steps([Step("INSERT INTO u (v) VALUES (2)")]),
        db.write_steps(insert(3)),
        return_exceptions=True,
    )
    # None is told it was recorded, and each is told why.
    assert all(isinstance(outcome, sqlite3.IntegrityError) and "ended" in str(outcome) for outcome in outcomes)
    assert await values(db) == []


async def test_a_group_whose_transaction_cannot_begin_fails_every_write_in_it(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "t.sqlite3")
    await db.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    await db.execute("PRAGMA busy_timeout=50")
    other = sqlite3.connect(tmp_path / "t.sqlite3", isolation_level=None)  # another process, writing
    other.execute("BEGIN IMMEDIATE")
    try:
        outcomes = await asyncio.gather(*(db.write_steps(insert(v)) for v in (1, 2)), return_exceptions=True)
        assert all(isinstance(outcome, StoreUnavailable) for outcome in outcomes), outcomes
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await values(db) == []
    assert await db.write_steps(insert(3)) is not None, "the next group begins"
    await db.close()


async def test_a_write_given_up_before_its_group_left_is_never_made(db: SqliteDatabase) -> None:
    first = asyncio.ensure_future(db.write_steps(insert(1)))
    dropped = asyncio.ensure_future(db.write_steps(insert(2)))
    await asyncio.sleep(0)  # both queued; the group has not left yet
    dropped.cancel()
    await first
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert await values(db) == [1]


async def test_a_transaction_that_fails_after_its_first_statement_is_rolled_back(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "u.sqlite3")
    try:
        await db.execute("CREATE TABLE t (v INTEGER)")
        with pytest.raises(RuntimeError):
            async with db.transaction():
                await db.execute("INSERT INTO t VALUES (1)")
                raise RuntimeError("the body failed")
        assert not db.connection.in_transaction
        assert await db.fetch_all("SELECT v FROM t") == []

        # Cancelled while its first statement (and the BEGIN sent with it) is still on aiosqlite's thread.
        async def write() -> None:
            async with db.transaction():
                await db.execute("INSERT INTO t VALUES (2)")
                await asyncio.sleep(3600)

        task = asyncio.create_task(write())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with db.transaction():  # the next write begins: nothing was left open
            await db.execute("INSERT INTO t VALUES (3)")
        assert [row[0] for row in await db.fetch_all("SELECT v FROM t")] == [3]
    finally:
        await db.close()


async def test_a_read_of_another_task_never_begins_a_pending_transaction(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "u.sqlite3")
    try:
        await db.execute("CREATE TABLE t (v INTEGER)")
        entered, release = asyncio.Event(), asyncio.Event()

        async def write() -> None:
            async with db.transaction():
                entered.set()
                await release.wait()
                await db.execute("INSERT INTO t VALUES (1)")

        task = asyncio.create_task(write())
        await entered.wait()
        assert await db.fetch_all("SELECT v FROM t") == []
        assert not db.connection.in_transaction, "the reader's trip carried the writer's BEGIN"
        release.set()
        await task
        assert not db.connection.in_transaction
        assert [row[0] for row in await db.fetch_all("SELECT v FROM t")] == [1]
    finally:
        await db.close()


async def test_only_a_group_of_writes_that_are_redone_if_lost_commits_without_waiting_for_the_disk(
    db: SqliteDatabase,
) -> None:
    said: list[str] = []
    await db._in_thread(lambda connection: connection.set_trace_callback(said.append))  # on its thread

    keys = iter(range(100))

    async def syncs(*durable: bool) -> list[str]:
        said.clear()
        await asyncio.gather(*(db.write_steps(insert(next(keys)), durable=d) for d in durable))
        return [line for line in said if line.startswith("PRAGMA synchronous") or line == "COMMIT"]

    assert await syncs(False) == ["PRAGMA synchronous=NORMAL", "COMMIT", "PRAGMA synchronous=FULL"]
    assert await syncs(True) == ["COMMIT"]
    assert await syncs(False, True) == ["COMMIT"], "one write that must survive a power cut makes the group wait"
    rows = await db.connection.execute_fetchall("PRAGMA synchronous")
    assert [tuple(row) for row in rows] == [(2,)], "every other write waits for the disk again (FULL)"


async def test_a_close_that_is_cancelled_still_lets_queued_writes_land(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "t.sqlite3")
    await db.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    writing = asyncio.create_task(db.write_steps(insert(1)))
    await asyncio.sleep(0)  # queued: its group is on its way
    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0)
    closing.cancel()
    assert [[tuple(row) for row in rows] for rows in await writing or []] == [[(1,)]]
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert await values(db) == [1]
    await db.close()


async def test_a_write_after_close_began_is_refused_as_unavailable(tmp_path: Path) -> None:
    db = await SqliteDatabase.open(tmp_path / "t.sqlite3")
    await db.close()
    with pytest.raises(StoreUnavailable):
        await db.write_steps(insert(1))


class _RestoreFails:
    """A connection whose return to synchronous=FULL fails (an I/O error), otherwise SQLite's own."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self.real = real

    @property
    def in_transaction(self) -> bool:
        return self.real.in_transaction

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        if sql == _DURABLE:
            raise sqlite3.OperationalError("disk I/O error")
        return self.real.execute(sql, params)

    def close(self) -> None:
        self.real.close()


def test_a_group_committed_without_the_disk_stands_if_full_cannot_be_restored_and_the_connection_closes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.sqlite3"
    real = sqlite3.connect(path, isolation_level=None)
    real.execute("CREATE TABLE t (v INTEGER PRIMARY KEY)")
    outcomes = _group(cast(sqlite3.Connection, _RestoreFails(real)),
                      [[("INSERT INTO t (v) VALUES (?) RETURNING v", (1,), False)]], durable=False)
    [written] = outcomes
    assert isinstance(written, list), "committed: reported recorded, not failed"
    assert [[tuple(row) for row in rows] for rows in written] == [[(1,)]]
    with pytest.raises(sqlite3.ProgrammingError):
        real.execute("SELECT 1")  # closed: no later write commits without waiting for the disk
    again = sqlite3.connect(path)
    assert again.execute("SELECT v FROM t").fetchall() == [(1,)]
    again.close()
