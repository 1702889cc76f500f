"""What the job store's parts share: the database and its one writer at a time, the clocks, a job by id, and
the helpers of their SQL; abstract, the few calls one part makes of another (`JobStore` has them all)."""

from __future__ import annotations

import abc
import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from bot.core.lifecycle import JobState
from bot.store.jobs.records import Job, JobNotFound, _job
from bot.store.sqlite import Database, Row

#: One logger for every part: the store's lines keep the name hosts filter them by.
log = logging.getLogger("bot.store.jobs")


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


def _given(*conditions: tuple[str, object | None]) -> tuple[list[str], list[Any]]:
    """The conditions whose value is given (None: not narrowed by it), and their parameters, in order."""
    given = [(sql, value) for sql, value in conditions if value is not None]
    return [sql for sql, _ in given], [value for _, value in given]


def _held_by(owner: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameter) that limits a statement to jobs `owner` holds; none without one."""
    return ("", ()) if owner is None else (" AND lease_owner = ?", (owner,))


def _released_when_told(assignments: dict[str, Any]) -> dict[str, Any]:
    """A job whose requester got the final message needs no process any more: its lease goes with the write."""
    if assignments.get("told_at") is not None:
        assignments.update(lease_owner=None, lease_expires_at=None)
    return assignments


class StoreBase(abc.ABC):
    """The database under every part of the job store, its transactions, its clocks, and a job by its id."""

    def __init__(
        self, db: Database, *, clock: Callable[[], float] = time.time, follow_database_clock: bool = False
    ) -> None:
        """`follow_database_clock`: on PostgreSQL, count lease times on the database server's clock (see
        `_follow_database_clock`); a store on a clock of its caller's (a test's) leaves it off."""
        self._db = db
        self._clock = clock
        self._follow_database = follow_database_clock and db.dialect == "postgresql"
        self._lease_offset = 0.0  # the database's clock minus this host's, last measured
        self._clock_skewed = False

    @property
    def database(self) -> Database:
        return self._db

    @property
    def dialect(self) -> str:
        return self._db.dialect

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        return await self._db.schema_version()

    def _write(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """One write transaction under the database's lock: one writer at a time (across processes too).

        A full disk, a locked file or an I/O error becomes StoreUnavailable: nothing was recorded.
        `wait=False`: a database another process is writing fails at once instead of after the busy timeout,
        for a periodic write that may skip a round rather than hold up a /video row behind it.
        """
        return self._db.transaction(wait=wait)

    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """A write transaction shared with the job store's lock: one writer at a time."""
        return self._db.transaction()

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement inside `transaction()`; returns the rows it changed."""
        return await self._db.execute(sql, params)

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Rows by position and by column name (inside `transaction()`: read in it)."""
        return await self._db.fetch_all(sql, params)

    async def fetch_many(self, queries: Sequence[tuple[str, Sequence[Any]]]) -> list[list[Row]]:
        """Several reads at once: on SQLite one trip to its thread (and one wake-up of the loop), not one each."""
        return await self._db.fetch_many(queries)

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        return await self._db.fetch_one(sql, params)

    def now(self) -> float:
        return self._clock()

    @property
    def shared(self) -> bool:
        """Whether other processes may use this database (PostgreSQL; a SQLite file serves one)."""
        return self._db.dialect != "sqlite"

    def _lease_now(self) -> float:
        """Now on the timeline every process writes its lease times on: the database server's clock where it
        is followed, else this host's."""
        return self._clock() + self._lease_offset

    async def get(self, job_id: int) -> Job:
        jobs = await self._jobs("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not jobs:
            raise JobNotFound(f"no job #{job_id}")
        return jobs[0]

    async def _one(self, sql: str, params: Sequence[Any]) -> Row | None:
        """The first row of a query that has at most one (a key, or an aggregate)."""
        return await self._db.fetch_one(sql, params)

    async def _jobs(self, sql: str, params: Sequence[Any]) -> list[Job]:
        return [_job(row) for row in await self._db.fetch_all(sql, params)]

    # -- what the parts need of each other ------------------------------------------------------

    @abc.abstractmethod
    async def transition(self, job_id: int, target: JobState, *, owner: str | None = None, **changes: Any) -> Job:
        """Move a job to `target`, checked against the lifecycle (moves.py)."""

    @abc.abstractmethod
    async def _move(
        self, job_id: int, target: JobState, changes: Mapping[str, Any], *, owner: str | None = None
    ) -> Job:
        """One checked move of a job, with its changes, in the open transaction (moves.py)."""

    @abc.abstractmethod
    async def jobs_in_states(self, states: Iterable[JobState], *, owner: str | None = None) -> list[Job]:
        """The jobs in `states`, optionally only those `owner` holds (reads.py)."""
