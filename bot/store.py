"""The job store: one SQLite row per /video request, the ledger of what was charged.

Write-ahead rule: a row exists in `submitting` before a create request leaves the bot, and the
202 moves it to `pending` together with the service's job id and the charge, in one statement.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import aiosqlite

from bot.errors import BotError
from bot.lifecycle import (
    FINAL_STATES,
    IN_FLIGHT_STATES,
    POLLED_STATES,
    TRANSITIONS,
    UNSENT_OR_SENDING,
    JobState,
    sources_of,
)
from bot.notices import RefusalCode

__all__ = [
    "IN_FLIGHT_STATES",
    "POLLED_STATES",
    "TRANSITIONS",
    "Admission",
    "AdmissionRefused",
    "IllegalTransition",
    "Job",
    "JobNotFound",
    "JobState",
    "JobStore",
    "NewJob",
    "StoreUnavailable",
]


S = JobState


class IllegalTransition(BotError):
    def __init__(self, job_id: int, current: str | None, target: JobState) -> None:
        self.job_id = job_id
        self.current = current
        self.target = target
        super().__init__(f"job #{job_id}: cannot move from {current or 'nowhere'} to {target}")


class JobNotFound(BotError):
    pass


class StoreUnavailable(BotError):
    """The database could not be written or read (full, locked, I/O error): nothing was recorded."""


class AdmissionRefused(BotError):
    """A guardrail said no before anything was spent. `retry_at` is a unix time, or None."""

    def __init__(self, code: RefusalCode, retry_at: float | None, **params: object) -> None:
        self.code = code
        self.retry_at = retry_at
        self.params = params
        super().__init__(f"refused: {code}")


@dataclass(frozen=True)
class Job:
    id: int
    state: JobState
    model: str
    prompt: str
    seed: int | None
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str
    service_job_id: str | None
    charged_yen: int
    created_at: float
    updated_at: float
    accepted_at: float | None
    finished_at: float | None
    next_poll_at: float | None
    slow_notice_sent: bool
    file_path: str | None
    upload_limit_bytes: int | None
    interaction_token: str | None
    interaction_expires_at: float | None
    reply_message_id: int | None
    delivered_channel_id: int | None
    delivered_message_id: int | None
    last_error: str | None
    told_at: float | None = None  # when the requester got the final message
    step_attempts: int = 0  # failed attempts of the current download or upload
    step_failing_since: float | None = None
    notice_attempts: int = 0  # failed rounds of sending the final message
    waiting_notice_sent: bool = False

    def __repr__(self) -> str:
        # The interaction token is a credential for 15 minutes: keep it out of logs.
        return f"<Job #{self.id} {self.state} service_id={self.service_job_id!r}>"

    @property
    def reference(self) -> str:
        return f"#{self.id}"

    def token_alive(self, now: float) -> bool:
        return bool(self.interaction_token) and (self.interaction_expires_at or 0) > now


_JOB_COLUMNS = tuple(f.name for f in fields(Job))


def _job(row: aiosqlite.Row) -> Job:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    values["state"] = JobState(values["state"])
    values["slow_notice_sent"] = bool(values["slow_notice_sent"])
    values["waiting_notice_sent"] = bool(values["waiting_notice_sent"])
    return Job(**values)


@dataclass(frozen=True)
class NewJob:
    """A request about to be written down; `VideoRequests.record` sets the model and checks the input."""

    model: str
    prompt: str
    seed: int | None
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str = "en-US"
    upload_limit_bytes: int | None = None
    interaction_token: str | None = None
    interaction_expires_at: float | None = None


@dataclass(frozen=True)
class Admission:
    """Guardrails checked in the same transaction that writes the row, so two requests cannot both pass."""

    cooldown_seconds: float = 0.0
    max_active_jobs: int | None = None
    guild_daily_cap_yen: int | None = None
    day_start: float = 0.0  # unix time of the start of today in the budget's time zone
    day_end: float = 0.0
    price_yen: int = 0


class DatabaseTooNew(BotError):
    """The database was written by a newer version of the bot: this one must not touch it."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the database is at schema version {found}, but this version of the bot knows only up to {known}: "
            "it was written by a newer version; run that version, or restore a backup"
        )


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


_MIGRATIONS: Sequence[Migration] = load_migrations()

SCHEMA_VERSION = len(_MIGRATIONS)


class JobStore:
    """All SQL of the bot. One connection, one writer at a time."""

    def __init__(self, db: aiosqlite.Connection, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock
        self._write_lock = asyncio.Lock()

    @classmethod
    async def open(cls, path: Path | str, *, clock: Callable[[], float] = time.time) -> JobStore:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, isolation_level=None)  # explicit transactions only
        db.row_factory = aiosqlite.Row
        store = cls(db, clock=clock)
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=FULL")  # a recorded charge must survive a power cut
            # The row is written before the interaction is acknowledged: a locked database must fail fast,
            # well inside Discord's 3 s, rather than let the interaction die.
            await db.execute("PRAGMA busy_timeout=1500")
            await store._migrate()
        except BaseException:
            await db.close()
            raise
        return store

    async def close(self) -> None:
        await self._db.close()

    async def schema_version(self) -> int:
        async with self._db.execute("PRAGMA user_version") as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def _migrate(self) -> None:
        async with self._write_lock:
            known = len(_MIGRATIONS)  # SCHEMA_VERSION, read at call time so tests can swap the list
            while (current := await self.schema_version()) != known:
                if current > known:
                    raise DatabaseTooNew(current, known)
                migration = _MIGRATIONS[current]
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

    # -- transactions -------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[None]:
        """BEGIN IMMEDIATE … COMMIT under the store's lock, so coroutines never interleave a write.

        A full disk, a locked file or an I/O error becomes StoreUnavailable: nothing was recorded.
        """
        async with self._write_lock, _unavailable_on_database_errors():
            await self._db.execute("BEGIN IMMEDIATE")
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

    # -- writes -------------------------------------------------------------------------------

    async def add_submission(self, new: NewJob, admission: Admission | None = None) -> Job:
        """Write the request down in `received`, after the guardrails pass in the same transaction."""
        now = self._clock()
        async with self._write():
            if admission is not None:
                await self._check_admission(new, admission, now)
            cursor = await self._db.execute(
                """INSERT INTO jobs (state, model, prompt, seed, user_id, guild_id, channel_id, locale,
                       upload_limit_bytes, interaction_token, interaction_expires_at, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    S.RECEIVED, new.model, new.prompt, new.seed, new.user_id, new.guild_id, new.channel_id,
                    new.locale, new.upload_limit_bytes, new.interaction_token, new.interaction_expires_at, now, now,
                ),
            )
            job_id = cursor.lastrowid
            assert job_id is not None
        return await self.get(job_id)

    async def _check_admission(self, new: NewJob, admission: Admission, now: float) -> None:
        if admission.cooldown_seconds > 0:
            row = await self._one(
                "SELECT MAX(created_at) FROM jobs WHERE user_id = ? AND state NOT IN (?, ?)",
                (new.user_id, S.REJECTED, S.INTERRUPTED),
            )
            last = row[0] if row else None
            if last is not None and now - last < admission.cooldown_seconds:
                raise AdmissionRefused("cooldown", last + admission.cooldown_seconds)
        if admission.max_active_jobs is not None:
            row = await self._one(
                f"SELECT COUNT(*) FROM jobs WHERE user_id = ? AND state IN ({_marks(IN_FLIGHT_STATES)})",
                (new.user_id, *IN_FLIGHT_STATES),
            )
            active = int(row[0]) if row else 0
            if active >= admission.max_active_jobs:
                raise AdmissionRefused("too_many_active", None, active=active, limit=admission.max_active_jobs)
        if admission.guild_daily_cap_yen is not None and new.guild_id is not None:
            # Requests not yet answered count at full price: they may be charged any moment.
            unsent = _marks(UNSENT_OR_SENDING)
            row = await self._one(
                f"""SELECT COALESCE(SUM(CASE WHEN state IN ({unsent}) THEN ? ELSE charged_yen END), 0) FROM jobs
                   WHERE guild_id = ? AND (state IN ({unsent}) OR (accepted_at >= ? AND accepted_at < ?))""",
                (*UNSENT_OR_SENDING, admission.price_yen, new.guild_id, *UNSENT_OR_SENDING, admission.day_start,
                 admission.day_end),
            )
            spent = int(row[0]) if row else 0
            if spent + admission.price_yen > admission.guild_daily_cap_yen:
                raise AdmissionRefused(
                    "guild_daily_cap", admission.day_end, spent=spent, cap=admission.guild_daily_cap_yen
                )

    async def transition(self, job_id: int, target: JobState, **changes: Any) -> Job:
        """Move a job to `target` if the table allows it, updating other columns in the same statement."""
        async with self._write():
            await self._move(job_id, target, changes)
        return await self.get(job_id)

    async def _move(self, job_id: int, target: JobState, changes: Mapping[str, Any]) -> None:
        """The one place a state changes (inside a write transaction), checked against TRANSITIONS."""
        sources = sources_of(target)
        assignments = {"state": target, "updated_at": self._clock(), **changes}
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        cursor = await self._db.execute(
            f"UPDATE jobs SET {sets} WHERE id = ? AND state IN ({_marks(sources)})",
            (*assignments.values(), job_id, *sources),
        )
        if cursor.rowcount != 1:
            row = await self._one("SELECT state FROM jobs WHERE id = ?", (job_id,))
            raise IllegalTransition(job_id, row[0] if row else None, target)

    async def mark_accepted(self, job_id: int, service_job_id: str, charged_yen: int, next_poll_at: float) -> Job:
        """Record the 202: the service's job id and the charge, in one transaction.

        If another request already holds that job id, the first keeps the job: this one ends failed,
        charged, with both references in its reason, so one file is never posted for two requests.
        """
        async with self._write():
            holder = await self._one("SELECT id FROM jobs WHERE service_job_id = ?", (service_job_id,))
            now = self._clock()
            if holder is None:
                await self._move(job_id, S.PENDING, {
                    "service_job_id": service_job_id, "charged_yen": charged_yen, "accepted_at": now,
                    "next_poll_at": next_poll_at,
                })
            else:
                await self._move(job_id, S.FAILED, {
                    "charged_yen": charged_yen, "accepted_at": now, "finished_at": now,
                    "last_error": f"the service gave job id {service_job_id}, which request #{holder[0]} already holds",
                })
        return await self.get(job_id)

    async def mark_charged_unusable(self, job_id: int, charged_yen: int, shown_id: str) -> Job:
        """A 202 whose job id cannot be used safely: charged, never polled, failed at once."""
        now = self._clock()
        return await self.transition(
            job_id, S.FAILED, charged_yen=charged_yen, accepted_at=now, finished_at=now,
            last_error=f"the service gave an unusable job id {shown_id}",
        )

    async def mark_told(self, job_id: int) -> None:
        """The requester got the final message (or one could never be delivered, after the retries)."""
        await self.update(job_id, told_at=self._clock())

    async def schedule_polls(self, slots: Mapping[int, float]) -> None:
        """Set the next poll time of many jobs in one transaction."""
        async with self._write():
            await self._db.executemany(
                "UPDATE jobs SET next_poll_at = ? WHERE id = ?", [(at, job_id) for job_id, at in slots.items()]
            )

    async def update(self, job_id: int, **changes: Any) -> Job:
        """Change columns other than the state (poll times, message ids, notes)."""
        if "state" in changes:
            raise ValueError("use transition() to change a job's state")
        assignments = {"updated_at": self._clock(), **changes}
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        async with self._write():
            cursor = await self._db.execute(f"UPDATE jobs SET {sets} WHERE id = ?", (*assignments.values(), job_id))
            if cursor.rowcount != 1:
                raise JobNotFound(f"no job #{job_id}")
        return await self.get(job_id)

    async def recover_after_restart(self) -> list[Job]:
        """At start-up, before any command runs: requests the last run left half-done.

        `received` never left the bot: interrupted, nothing spent. `submitting` may have been sent and
        charged: outcome unknown, never resent. Both are then owed a final message (see `untold`).
        """
        moved: list[Job] = []
        for source, target, reason in (
            (S.RECEIVED, S.INTERRUPTED, "the bot stopped before the request was sent"),
            (S.SUBMITTING, S.UNKNOWN, "the bot stopped while the request was being sent"),
        ):
            for job in await self.jobs_in_states((source,)):
                moved.append(await self.transition(job.id, target, last_error=reason))
        return moved

    async def untold(self, *, older_than: float, max_notice_attempts: int, limit: int = 100) -> list[Job]:
        """Requests in a state owed a final message that nobody has sent yet.

        `older_than` leaves alone the ones the running process is telling right now.
        """
        owed = (*FINAL_STATES - {S.DELIVERED}, S.UNDELIVERABLE)
        return await self._jobs(
            f"SELECT * FROM jobs WHERE told_at IS NULL AND state IN ({_marks(owed)}) AND updated_at <= ? "
            "AND notice_attempts < ? ORDER BY id LIMIT ?",
            (*owed, older_than, max_notice_attempts, limit),
        )

    async def get_meta(self, key: str) -> str | None:
        row = await self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return str(row[0]) if row else None

    async def set_meta(self, key: str, value: str) -> None:
        async with self._write():
            await self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    # -- reads --------------------------------------------------------------------------------

    async def get(self, job_id: int) -> Job:
        jobs = await self._jobs("SELECT * FROM jobs WHERE id = ?", (job_id,))
        if not jobs:
            raise JobNotFound(f"no job #{job_id}")
        return jobs[0]

    async def find(self, reference: str, *, guild_id: int | None) -> Job | None:
        """A job by local reference (`#42` or `42`) or by the service's job id, within one server."""
        text = reference.strip()
        local = text.removeprefix("#")
        if local.isdigit():
            jobs = await self._jobs("SELECT * FROM jobs WHERE id = ? AND guild_id IS ?", (int(local), guild_id))
            if jobs:
                return jobs[0]
        jobs = await self._jobs("SELECT * FROM jobs WHERE service_job_id = ? AND guild_id IS ?", (text, guild_id))
        return jobs[0] if jobs else None

    async def due_jobs(self, now: float, limit: int) -> list[Job]:
        return await self._jobs(
            f"SELECT * FROM jobs WHERE state IN ({_marks(POLLED_STATES)}) AND next_poll_at <= ? "
            "ORDER BY next_poll_at LIMIT ?",
            (*POLLED_STATES, now, limit),
        )

    async def next_poll_at(self) -> float | None:
        row = await self._one(
            f"SELECT MIN(next_poll_at) FROM jobs WHERE state IN ({_marks(POLLED_STATES)})", POLLED_STATES
        )
        return float(row[0]) if row and row[0] is not None else None

    async def polled_jobs(self) -> list[Job]:
        """Every job the worker polls, soonest planned poll first (read at start-up, not per poll)."""
        return await self._jobs(
            f"SELECT * FROM jobs WHERE state IN ({_marks(POLLED_STATES)}) ORDER BY next_poll_at, id", POLLED_STATES
        )

    async def jobs_in_states(self, states: Iterable[JobState]) -> list[Job]:
        wanted = tuple(states)
        return await self._jobs(f"SELECT * FROM jobs WHERE state IN ({_marks(wanted)}) ORDER BY id", wanted)

    async def recent_jobs(self, user_id: int, guild_id: int | None, limit: int = 10) -> list[Job]:
        return await self._jobs(
            "SELECT * FROM jobs WHERE user_id = ? AND guild_id IS ? ORDER BY id DESC LIMIT ?",
            (user_id, guild_id, limit),
        )

    async def ledger(self, *, guild_id: int | None = None, user_id: int | None = None,
                     since: float | None = None) -> tuple[int, int]:
        """(accepted videos, yen charged) from the bot's own records, optionally narrowed."""
        where = ["charged_yen > 0"]
        params: list[Any] = []
        if guild_id is not None:
            where.append("guild_id = ?")
            params.append(guild_id)
        if user_id is not None:
            where.append("user_id = ?")
            params.append(user_id)
        if since is not None:
            where.append("accepted_at >= ?")
            params.append(since)
        row = await self._one(
            f"SELECT COUNT(*), COALESCE(SUM(charged_yen), 0) FROM jobs WHERE {' AND '.join(where)}", params
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def state_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (states with none are left out), read from the state index."""
        async with self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state") as cursor:
            return {JobState(row[0]): int(row[1]) for row in await cursor.fetchall()}

    async def _one(self, sql: str, params: Sequence[Any]) -> aiosqlite.Row | None:
        async with self._db.execute(sql, tuple(params)) as cursor:
            return await cursor.fetchone()

    async def _jobs(self, sql: str, params: Sequence[Any]) -> list[Job]:
        async with self._db.execute(sql, tuple(params)) as cursor:
            return [_job(row) for row in await cursor.fetchall()]


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


def _check_columns(assignments: Mapping[str, Any]) -> None:
    unknown = set(assignments) - set(_JOB_COLUMNS)
    if unknown or "id" in assignments:
        raise ValueError(f"not updatable job columns: {sorted(unknown | ({'id'} & set(assignments)))}")


@contextlib.asynccontextmanager
async def _unavailable_on_database_errors() -> AsyncIterator[None]:
    try:
        yield
    except sqlite3.IntegrityError:
        raise  # a broken rule of the schema is a bug, not an outage
    except sqlite3.DatabaseError as exc:
        raise StoreUnavailable(f"the database could not be written: {exc}") from exc
