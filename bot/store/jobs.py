"""The job store: one database row per /video request, the ledger of what was charged.

Write-ahead rule: a row exists in `submitting` before a create request leaves the bot, and the
202 moves it to `pending` together with the service's job id and the charge, in one statement.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any, Literal, NoReturn

from bot.config.database_url import is_postgres_url, redacted, sqlite_path_of
from bot.core.errors import BotError
from bot.core.lifecycle import (
    CREDITABLE_STATES,
    DONE_WITH_STATES,
    IN_FLIGHT_STATES,
    MAYBE_CHARGED_STATES,
    NOTHING_SPENT_STATES,
    OWED_A_MESSAGE_STATES,
    POLLED_STATES,
    REDONE_IF_LOST,
    UNSENT_OR_SENDING,
    WAITING_STATES,
    JobState,
    sources_of,
)
from bot.core.notices import RefusalCode
from bot.core.retry import NOTICE_ROUNDS
from bot.core.spending import COUNTED_AT, OUTCOME_RULES
from bot.store.leases import CLAIM_BATCH, CLOCK_SKEW_WARNING_S, Lease, LiveProcess
from bot.store.sqlite import (
    Database,
    DatabaseTooNew,
    Dialect,
    Migration,
    Row,
    SqliteDatabase,
    Step,
    StoreUnavailable,
    load_migrations,
)

__all__ = [
    "Admission",
    "AdmissionRefused",
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
    "Offer",
    "OfferKind",
    "OfferOutcome",
    "Renewal",
    "Row",
    "SpendCap",
    "StoreUnavailable",
    "load_migrations",
]


log = logging.getLogger(__name__)

S = JobState

#: The job events a server's log channel gets (ids, amounts and states only: never a prompt).
AUDITED_STATES: dict[JobState, str] = {S.PENDING: "accepted", S.FAILED: "failed", S.STALLED: "failed",
                                       S.UNKNOWN: "unknown"}

class IllegalTransition(BotError):
    def __init__(self, job_id: int, current: str | None, target: JobState) -> None:
        self.job_id = job_id
        self.current = current
        self.target = target
        super().__init__(f"job #{job_id}: cannot move from {current or 'nowhere'} to {target}")


class JobNotFound(BotError):
    pass


class LeaseLost(BotError):
    """A write for a job whose lease another process holds now (this one stalled past its expiry): refused."""

    def __init__(self, job_id: int, holder: str | None) -> None:
        self.job_id = job_id
        self.holder = holder
        super().__init__(f"job #{job_id}: this process no longer holds its lease (held by {holder or 'nobody'})")


@dataclass(frozen=True)
class Renewal:
    """What one renewal found: the jobs this process still holds, and how many processes are alive."""

    held: frozenset[int]
    live_processes: int


class AdmissionRefused(BotError):
    """A guardrail said no before anything was spent. `retry_at` is a unix time, or None."""

    def __init__(self, code: RefusalCode, retry_at: float | None, **params: object) -> None:
        self.code = code
        self.retry_at = retry_at
        self.params = params
        super().__init__(f"refused: {code}")


CreditRefusal = Literal["not_found", "not_failed", "already_credited"]


class CreditRefused(BotError):
    """`mark_credited` changed nothing: no such job in that server, not a failed charged job, or credited already."""

    def __init__(self, job_id: int, code: CreditRefusal) -> None:
        self.job_id = job_id
        self.code = code
        super().__init__(f"job #{job_id} cannot be marked credited: {code}")


# Slots: a job in flight is two objects for the garbage collector to walk, not three (its `__dict__` gone). At
# 10,000 in flight in bench/, a full collection took 42-47 ms instead of 54-66, and the peak RSS fell by 13 MiB.
@dataclass(frozen=True, slots=True)
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
    price_yen: int = 0  # the catalogue price when it was asked for: what an unanswered request may cost
    credited_at: float | None = None  # support refunded this failed job's charge (marked by a server admin)
    credited_by: int | None = None  # the Discord user who marked it
    progress_at: float | None = None  # when its receipt last showed its place in line and ready time
    lease_owner: str | None = None  # the process working on it (bot/store/leases.py); None: free to claim
    lease_expires_at: float | None = None

    def __repr__(self) -> str:
        # The interaction token is a credential for 15 minutes: keep it out of logs.
        return f"<Job #{self.id} {self.state} service_id={self.service_job_id!r}>"

    @property
    def reference(self) -> str:
        return f"#{self.id}"

    def token_alive(self, now: float) -> bool:
        return bool(self.interaction_token) and (self.interaction_expires_at or 0) > now


_JOB_COLUMNS = tuple(f.name for f in fields(Job))
#: Columns with a handful of values among all jobs: each row read makes new strings of them, one each per job in
#: flight that a full garbage collection visits; interned, all jobs share one.
_REPEATED_TEXT = ("model", "locale", "lease_owner")


#: A live process, with `Lease.live_after`: the pacing's share, the chores' leader and the shards check count by it.
_LIVE = "heartbeat_at > ?"


def _job(row: Row) -> Job:
    values = dict(zip(row.keys(), tuple(row), strict=True))
    for name in _REPEATED_TEXT:
        if (text := values[name]) is not None:
            values[name] = sys.intern(text)
    values["state"] = JobState(values["state"])
    values["slow_notice_sent"] = bool(values["slow_notice_sent"])
    values["waiting_notice_sent"] = bool(values["waiting_notice_sent"])
    return Job(**values)


@dataclass(frozen=True, slots=True)
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
    price_yen: int = 0


@dataclass(frozen=True)
class SpendCap:
    """At most `cap_yen` spent by a server (or one member of it) in the window `[start, end)`."""

    code: RefusalCode  # the refusal when the cap is reached
    cap_yen: int
    start: float  # unix time; a member's quota reset moves it later
    end: float  # when the window resets
    member_only: bool = False


@dataclass(frozen=True)
class Admission:
    """Guardrails checked in the same transaction that writes the row, so two requests cannot both pass."""

    cooldown_seconds: float = 0.0
    max_active_jobs: int | None = None
    caps: tuple[SpendCap, ...] = ()
    price_yen: int = 0


OfferKind = Literal["reroll", "confirm"]
OfferOutcome = Literal["used", "cancelled", "expired"]


@dataclass(frozen=True)
class NewOffer:
    """A button that spends money, waiting for its click: a re-roll of `source_job_id`, or a pending /video."""

    kind: OfferKind
    user_id: int
    guild_id: int | None
    channel_id: int
    locale: str
    expires_at: float
    model: str = ""
    prompt: str = ""
    seed: int | None = None
    source_job_id: int | None = None
    upload_limit_bytes: int | None = None


@dataclass(frozen=True)
class Offer(NewOffer):
    id: int = 0
    created_at: float = 0.0
    used_at: float | None = None
    outcome: OfferOutcome | None = None
    job_id: int | None = None
    message_id: int | None = None  # the message its buttons were shown on (None: not recorded yet)


_OFFER_COLUMNS = tuple(f.name for f in fields(Offer))


_MIGRATIONS: Sequence[Migration] = load_migrations()
#: The same migrations, by the same names and numbers, in PostgreSQL's dialect (tests/store/test_postgres.py compares
#: them, and the schemas they make step by step).
_POSTGRES_MIGRATIONS: Sequence[Migration] = load_migrations(resources.files("bot.store.migrations.postgresql"))

SCHEMA_VERSION = len(_MIGRATIONS)


class JobStore:
    """All SQL of the bot, on one database (SQLite or PostgreSQL, bot/store/sqlite.py), one writer at a time."""

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

    @classmethod
    async def open(cls, path: Path | str, *, clock: Callable[[], float] = time.time) -> JobStore:
        """The SQLite database in the file at `path` (made, and migrated, if needed)."""
        return await cls.on(await SqliteDatabase.open(path), clock=clock)

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

    async def _migrate(self) -> None:
        # Read at call time, so tests can swap the lists.
        await self._db.migrate(_MIGRATIONS if self._db.dialect == "sqlite" else _POSTGRES_MIGRATIONS)

    # -- transactions -------------------------------------------------------------------------

    def _write(self, *, wait: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """One write transaction under the database's lock: one writer at a time (across processes too).

        A full disk, a locked file or an I/O error becomes StoreUnavailable: nothing was recorded.
        `wait=False`: a database another process is writing fails at once instead of after the busy timeout,
        for a periodic write that may skip a round rather than hold up a /video row behind it.
        """
        return self._db.transaction(wait=wait)

    # -- for the other stores on this database (bot/store/servers.py) -----------------------------

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

    # -- writes -------------------------------------------------------------------------------

    async def add_submission(
        self, new: NewJob, admission: Admission | None = None, *, lease: Lease | None = None
    ) -> Job:
        """Write the request down in `received`, after the guardrails pass in the same transaction.

        `lease`: the creating process holds it from the first moment (in the same INSERT), so no other
        process can claim it while it is being sent.
        """
        for _ in range(ADMISSION_TRIES):
            job = await self._admit(new, admission, lease)
            if job is not None:
                return job
        raise StoreUnavailable("other requests kept changing what the guardrails count: try again")

    async def _admit(self, new: NewJob, admission: Admission | None, lease: Lease | None) -> Job | None:
        """The request written down, or AdmissionRefused; None if what refused it changed before it was read."""
        now = self._clock()
        guardrails = _guardrails(new, admission, now) if admission is not None else []
        values = (
            S.RECEIVED, new.model, new.prompt, new.seed, new.user_id, new.guild_id, new.channel_id,
            new.locale, new.upload_limit_bytes, new.interaction_token, new.interaction_expires_at, now, now,
            new.price_yen, lease.owner if lease else None, lease.expires(self._lease_now()) if lease else None,
        )
        # One statement, one trip: the row is written only where every guardrail lets it in (the rules are the
        # SQL conditions, checked in the write's own transaction), and RETURNING gives it back as written.
        where = " AND ".join(guardrail.allows for guardrail in guardrails) or "1 = 1"
        # Interned: a burst of requests waiting for their group commit shares one copy of its few kilobytes.
        results = await self._db.write_steps([Step(
            sys.intern(f"""INSERT INTO jobs (state, model, prompt, seed, user_id, guild_id, channel_id, locale,
                    upload_limit_bytes, interaction_token, interaction_expires_at, created_at, updated_at, price_yen,
                    lease_owner, lease_expires_at)
                SELECT {_marks(values)} WHERE {where} RETURNING *"""),
            (*values, *(value for guardrail in guardrails for value in guardrail.allows_params)),
            needs_row=True,
        )])
        if results is not None:
            return _job(results[0][0])
        # A guardrail said no: which one, and its figures for the message, read with the same conditions.
        row = await self._one(
            "SELECT " + ", ".join(f"{guardrail.allows}, {guardrail.figure}" for guardrail in guardrails),
            tuple(value for guardrail in guardrails for value in (*guardrail.allows_params, *guardrail.figure_params)),
        )
        assert row is not None
        for index, guardrail in enumerate(guardrails):
            if not row[2 * index]:
                raise guardrail.refusal(row[2 * index + 1])
        return None  # let in now: what refused it (a request ending meanwhile) changed since

    async def transition(self, job_id: int, target: JobState, *, owner: str | None = None, **changes: Any) -> Job:
        """Move a job to `target` if the table allows it, updating other columns in the same statement.

        `owner`: only while that process holds the job's lease (LeaseLost otherwise).
        """
        steps = self._move_steps(job_id, target, changes, owner=owner)
        durable = target not in REDONE_IF_LOST or not changes.keys() <= REDONE_COLUMNS
        results = await self._db.write_steps(steps, durable=durable) if steps else None
        if results is None:
            await self._refuse_move(job_id, target, owner)
        return _job(results[0][0])

    async def _move(
        self, job_id: int, target: JobState, changes: Mapping[str, Any], *, owner: str | None = None
    ) -> Job:
        """`transition` inside a write transaction already open (a decision that reads first)."""
        steps = self._move_steps(job_id, target, changes, owner=owner)
        rows = await self._db.fetch_all(steps[0].sql, steps[0].params) if steps else []
        if len(rows) != 1:
            await self._refuse_move(job_id, target, owner)
        for step in steps[1:]:
            await self._db.execute(step.sql, step.params)
        return _job(rows[0])

    def _move_steps(
        self, job_id: int, target: JobState, changes: Mapping[str, Any], *, owner: str | None = None,
        unless: tuple[str, Sequence[Any]] | None = None,
    ) -> list[Step]:
        """The one place a state changes, checked against TRANSITIONS: the UPDATE (RETURNING the row as moved, no
        second read after the commit), then the server's log event when the target is audited; none if no state
        leads to `target`. `unless`: a condition (and its parameters) that leaves the job as it is."""
        sources = sources_of(target)
        if not sources:
            return []  # no state leads to `received` (and PostgreSQL has no empty `IN ()`)
        assignments = _released_when_told({"state": target, "updated_at": self._clock(), **changes})
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        held, held_params = _held_by(owner)
        unless_sql, unless_params = (f" AND NOT {unless[0]}", tuple(unless[1])) if unless else ("", ())
        steps = [Step(
            f"UPDATE jobs SET {sets} WHERE id = ? AND state IN ({_marks(sources)}){held}{unless_sql} RETURNING *",
            (*assignments.values(), job_id, *sources, *held_params, *unless_params),
            needs_row=True,
        )]
        kind = AUDITED_STATES.get(target)
        if kind is not None:
            # In the same transaction as the move, so the server's log can neither miss it nor invent it.
            steps.append(Step(
                """INSERT INTO events (guild_id, kind, job_id, user_id, details, created_at)
                   SELECT guild_id, ?, id, user_id,
                          json_object('state', state, 'yen', charged_yen, 'model', model,
                                      'service_job_id', service_job_id), ?
                   FROM jobs WHERE id = ? AND guild_id IS NOT NULL""",
                (kind, self._clock(), job_id),
            ))
        return steps

    async def _refuse_move(self, job_id: int, target: JobState, owner: str | None) -> NoReturn:
        """Why a move changed nothing: another process holds the job, or the table does not allow it."""
        row = await self._one("SELECT state, lease_owner FROM jobs WHERE id = ?", (job_id,))
        if row is not None and owner is not None and row[1] != owner:
            raise LeaseLost(job_id, row[1])
        raise IllegalTransition(job_id, row[0] if row else None, target)

    async def mark_accepted(
        self, job_id: int, service_job_id: str, charged_yen: int, next_poll_at: float, *,
        owner: str | None = None, lease: Lease | None = None,
    ) -> Job:
        """Record the 202: the service's job id and the charge, in one transaction.

        If another request already holds that job id, the first keeps the job: this one ends failed,
        charged, with both references in its reason, so one file is never posted for two requests.
        Recording it again (a retry after a commit whose answer was lost) changes nothing. With `lease`, the
        process that got the 202 holds the job from here: also a late 202 on a request that another process,
        finding its lease expired, had ended `unknown`.
        """
        def accepted(now: float) -> dict[str, Any]:
            held = {"lease_owner": lease.owner, "lease_expires_at": lease.expires(self._lease_now())} if lease else {}
            return {"service_job_id": service_job_id, "charged_yen": charged_yen, "accepted_at": now,
                    "next_poll_at": next_poll_at, **held}

        # The usual case in one trip: a request being sent, and a job id no request holds yet. Anything else (a
        # late 202 on a request given up as unknown among them) is decided below.
        steps = self._move_steps(
            job_id, S.PENDING, accepted(self._clock()), owner=owner,
            unless=("(EXISTS (SELECT 1 FROM jobs WHERE service_job_id = ?) OR state = ?)", (service_job_id, S.UNKNOWN)),
        )
        results = await self._db.write_steps(steps)
        if results is not None:
            return _job(results[0][0])
        async with self._write():
            holder = await self._one("SELECT id FROM jobs WHERE service_job_id = ?", (service_job_id,))
            now = self._clock()
            if holder is not None and int(holder[0]) == job_id:
                return await self.get(job_id)  # recorded already: the first attempt's commit landed
            if holder is None:
                current = await self._one("SELECT state FROM jobs WHERE id = ?", (job_id,))
                # Its requester was (or is being) told its outcome is unknown: the mark says to tell them it came.
                late = {"last_error": ACCEPTED_LATE} if current is not None and current[0] == S.UNKNOWN else {}
                moved = await self._move(job_id, S.PENDING, accepted(now) | late, owner=owner)
            else:
                moved = await self._move(job_id, S.FAILED, {
                    "charged_yen": charged_yen, "accepted_at": now, "finished_at": now,
                    "last_error": f"the service gave job id {service_job_id}, which request #{holder[0]} already holds",
                }, owner=owner)
        return moved  # the row as moved (RETURNING): the event written after it does not change it

    async def mark_charged_unusable(self, job_id: int, charged_yen: int, shown_id: str) -> Job:
        """A 202 whose job id cannot be used safely: charged, never polled, failed at once."""
        now = self._clock()
        return await self.transition(
            job_id, S.FAILED, charged_yen=charged_yen, accepted_at=now, finished_at=now,
            last_error=f"the service gave an unusable job id {shown_id}",
        )

    async def mark_charged_unreadable(self, job_id: int, charged_yen: int) -> Job:
        """A 202 whose answer could not be read: charged (the ledger follows the key's spend), no job id to poll,
        failed at once. Its `accepted_at` is the time support needs to find the charge."""
        now = self._clock()
        # The time in the reason too: /status and the final message of the sweep show it, for support.
        at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
        return await self.transition(
            job_id, S.FAILED, charged_yen=charged_yen, accepted_at=now, finished_at=now,
            last_error=f"{UNREADABLE_202} ({at})",
        )

    async def mark_told(self, job_id: int, *, owner: str | None = None) -> None:
        """The requester got the final message (or one could never be delivered, after the retries)."""
        await self.update(job_id, owner=owner, told_at=self._clock())

    async def schedule_polls(self, slots: Mapping[int, float], *, owner: str | None = None) -> None:
        """Set the next poll time of many jobs in one transaction (with `owner`: only of jobs it still holds)."""
        held, held_params = _held_by(owner)
        async with self._write():
            await self._db.execute_many(
                f"UPDATE jobs SET next_poll_at = ? WHERE id = ?{held}",
                [(at, job_id, *held_params) for job_id, at in slots.items()],
            )

    async def update(self, job_id: int, *, owner: str | None = None, **changes: Any) -> Job:
        """Change columns other than the state (poll times, message ids, notes).

        `owner`: only while that process holds the job's lease (LeaseLost otherwise).
        """
        if "state" in changes:
            raise ValueError("use transition() to change a job's state")
        assignments = _released_when_told({"updated_at": self._clock(), **changes})
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        held, held_params = _held_by(owner)
        results = await self._db.write_steps([Step(
            f"UPDATE jobs SET {sets} WHERE id = ?{held} RETURNING *", (*assignments.values(), job_id, *held_params),
            needs_row=True,
        )])
        if results is None:
            row = await self._one("SELECT lease_owner FROM jobs WHERE id = ?", (job_id,))
            if row is not None and owner is not None:
                raise LeaseLost(job_id, row[0])
            raise JobNotFound(f"no job #{job_id}")
        return _job(results[0][0])

    async def recover_after_restart(
        self, lease: Lease | None = None, *, max_notice_attempts: int = NOTICE_ROUNDS
    ) -> list[Job]:
        """At start-up, before any command runs: requests the last run left half-done.

        `received` never left the bot: interrupted, nothing spent. `submitting` may have been sent and
        charged: outcome unknown, never resent. Both are then owed a final message (see `untold`).

        `lease`: this process also takes over jobs still to be worked on. On SQLite, which no other process
        can use (bot/store/instance_lock.py), every one of them at once, without waiting for leases to expire. On
        PostgreSQL other processes may be alive and working: only the jobs nobody holds or whose lease
        expired (what `claim_jobs` takes; a dead process's other jobs follow as their leases expire).
        Returns the requests it moved.
        """
        if lease is not None:
            await self._follow_database_clock()
            take_all = not self.shared
            # Beside live processes, a bounded batch: the claims of the lease loop take the rest, without holding
            # every process's writes behind one long transaction.
            async with self._write():
                _, moved = await self._claim(lease, self._lease_now(), limit=None if take_all else CLAIM_BATCH,
                                             take_all=take_all, max_notice_attempts=max_notice_attempts)
            return moved
        moved = []
        for source, (target, reason) in _RECOVERY.items():
            for job in await self.jobs_in_states((source,)):
                moved.append(await self.transition(job.id, target, last_error=reason))
        return moved

    # -- leases (bot/store/leases.py): which process works on which job --------------------------------

    def _lease_now(self) -> float:
        """Now on the timeline every process writes its lease times on: the database server's clock where it
        is followed, else this host's."""
        return self._clock() + self._lease_offset

    async def _follow_database_clock(self) -> None:
        """Measure the database server's clock against this host's, before a round of lease times.

        Processes on several hosts compare each other's lease times. A host whose clock ran a lease ahead
        would find every live process's leases expired and take their jobs (one in the middle of its upload
        would then be posted twice); one behind would write leases already expired for the others. On the
        server's clock they agree, whatever the hosts' clocks say.
        """
        if not self._follow_database:
            return
        before = self._clock()
        row = await self._one("SELECT EXTRACT(EPOCH FROM clock_timestamp())", ())
        after = self._clock()
        assert row is not None
        self._lease_offset = float(row[0]) - (before + after) / 2
        skewed = abs(self._lease_offset) > CLOCK_SKEW_WARNING_S
        if skewed and not self._clock_skewed:
            log.warning(
                "this host's clock is %.1f s %s the database server's: leases are counted on the server's clock; "
                "set this host's time right (NTP)", abs(self._lease_offset),
                "behind" if self._lease_offset > 0 else "ahead of",
            )
        self._clock_skewed = skewed

    async def renew_leases(self, lease: Lease, *, wait: bool = False) -> Renewal:
        """The process's heartbeat and the renewal of every lease it holds, in one transaction.

        One UPDATE renews them all; it returns the jobs still held, so the caller drops those another
        process took. Also counts the live processes (a heartbeat within one lease), itself included,
        and forgets processes silent for ten leases. By default a round is skipped (StoreUnavailable) when
        another process's write holds the database: the next comes long before the expiry. `wait=True`
        for the renewal a worker needs before it may touch a job again.
        """
        await self._follow_database_clock()
        now = self._lease_now()
        async with self._write(wait=wait):
            await self._db.execute(
                """INSERT INTO processes (owner, started_at, heartbeat_at, shards) VALUES (?, ?, ?, ?)
                   ON CONFLICT (owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at""",
                (lease.owner, now, now, lease.shards),
            )
            rows = await self._db.fetch_all(
                "UPDATE jobs SET lease_expires_at = ? WHERE lease_owner = ? RETURNING id",
                (lease.expires(now), lease.owner),
            )
            await self._db.execute("DELETE FROM processes WHERE heartbeat_at < ?", (now - 10 * lease.seconds,))
            live = await self._one(f"SELECT COUNT(*) FROM processes WHERE {_LIVE}", (lease.live_after(now),))
        return Renewal(frozenset(int(row[0]) for row in rows), max(1, int(live[0]) if live else 1))

    async def claim_jobs(
        self, lease: Lease, *, limit: int, max_notice_attempts: int = NOTICE_ROUNDS
    ) -> tuple[list[Job], list[Job]]:
        """Take up to `limit` jobs still to be worked on whose lease expired or that nobody holds.

        One atomic claim, so each job goes to one process; the recovery of what was taken happens in the
        same transaction, so it runs once per request: `received` (never sent) ends interrupted,
        `submitting` (maybe sent) unknown, never resent. Returns (every job claimed, as it is now;
        the ones recovery moved).
        """
        now = self._lease_now()  # the server's clock as the last renewal measured it
        # Read first: a claim with nothing to take (nearly every one) must not take the write lock that a
        # /video row waits for.
        where, params = self._claimable(lease, now, take_all=False, max_notice_attempts=max_notice_attempts)
        if await self._one(f"SELECT 1 FROM jobs WHERE {where} LIMIT 1", params) is None:
            return [], []
        async with self._write():
            return await self._claim(lease, now, limit=limit, take_all=False,
                                     max_notice_attempts=max_notice_attempts)

    @staticmethod
    def _claimable(
        lease: Lease, now: float, *, take_all: bool, max_notice_attempts: int
    ) -> tuple[str, list[Any]]:
        """Jobs still to be worked on (or told) that `lease` may take: all of them, or those nobody holds."""
        working = _marks(IN_FLIGHT_STATES)
        candidates = (*IN_FLIGHT_STATES, *OWED_A_MESSAGE_STATES)
        where = [
            f"state IN ({_marks(candidates)})",
            f"(state IN ({working}) OR (told_at IS NULL AND notice_attempts < ?))",
        ]
        params: list[Any] = [*candidates, *IN_FLIGHT_STATES, max_notice_attempts]
        if not take_all:
            # Never one's own: a lease of ours that expired unnoticed is renewed, not recovered.
            where.append("(lease_owner IS NULL OR (lease_owner <> ? AND lease_expires_at <= ?))")
            params += [lease.owner, now]
        return " AND ".join(where), params

    async def _claim(
        self, lease: Lease, now: float, *, limit: int | None, take_all: bool, max_notice_attempts: int
    ) -> tuple[list[Job], list[Job]]:
        where, params = self._claimable(lease, now, take_all=take_all, max_notice_attempts=max_notice_attempts)
        bound = ""
        if limit is not None:
            bound = "LIMIT ?"
            params.append(limit)
        # The batch is picked once, in a CTE of its own: as `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`,
        # PostgreSQL may run the subquery again for each row it updates, and claim past the limit (seen in a test).
        rows = await self._db.fetch_all(
            f"""WITH picked AS MATERIALIZED (
                    SELECT id FROM jobs WHERE {where} ORDER BY id {bound} {_CLAIM_LOCK[self._db.dialect]})
                UPDATE jobs SET lease_owner = ?, lease_expires_at = ?
                WHERE id IN (SELECT id FROM picked)
                RETURNING id, state""",
            (*params, lease.owner, lease.expires(now)),
        )
        claimed = sorted((int(row[0]), JobState(row[1])) for row in rows)
        moved: list[Job] = []
        for job_id, state in claimed:
            recovery = _RECOVERY.get(state)
            if recovery is not None:
                target, reason = recovery
                moved.append(await self._move(job_id, target, {"last_error": reason}, owner=lease.owner))
        if not claimed:
            return [], moved
        ids = [job_id for job_id, _ in claimed]
        jobs = await self._jobs(f"SELECT * FROM jobs WHERE id IN ({_marks(ids)}) ORDER BY id", ids)
        return jobs, moved

    async def release_leases(self, owner: str) -> int:
        """A clean stop: every lease of `owner` is given up at once (a live process claims them without waiting
        for their expiry), and its heartbeat goes. Returns how many jobs it released."""
        async with self._write():
            released = await self._db.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = ?", (owner,)
            )
            await self._db.execute("DELETE FROM processes WHERE owner = ?", (owner,))
            return released

    async def untold(
        self, *, older_than: float, max_notice_attempts: int, limit: int = 100, owner: str | None = None
    ) -> list[Job]:
        """Requests in a state owed a final message that nobody has sent yet (with `owner`: of its jobs only).

        `older_than` leaves alone the ones the running process is telling right now.
        """
        held, held_params = _held_by(owner)
        return await self._jobs(
            f"SELECT * FROM jobs WHERE told_at IS NULL AND state IN ({_marks(OWED_A_MESSAGE_STATES)}) "
            f"AND updated_at <= ? AND notice_attempts < ?{held} ORDER BY id LIMIT ?",
            (*OWED_A_MESSAGE_STATES, older_than, max_notice_attempts, *held_params, limit),
        )

    async def erase_prompts(self, *, finished_before: float | None = None, guild_id: int | None = None) -> int:
        """Blank the prompts of requests finished before `finished_before`, or of every request of `guild_id`.

        The ledger (ids, amounts, states) stays; a request about to be sent keeps its prompt.
        """
        where = ["prompt != ''", "state != ?"]
        params: list[Any] = [S.RECEIVED]
        if finished_before is not None:
            # Undeliverable is not final (/status may still hand the file over), but it is finished with.
            where.append(f"updated_at < ? AND state IN ({_marks(DONE_WITH_STATES)})")
            params += [finished_before, *DONE_WITH_STATES]
        if guild_id is not None:
            where.append("guild_id = ?")
            params.append(guild_id)
        # An offer's copy of a prompt goes with it: only an offer still open keeps its prompt.
        offer_where = ["prompt != ''", "(used_at IS NOT NULL OR expires_at <= ?)"]
        offer_params: list[Any] = [self._clock()]
        if finished_before is not None:
            offer_where.append("created_at < ?")
            offer_params.append(finished_before)
        if guild_id is not None:
            offer_where.append("guild_id = ?")
            offer_params.append(guild_id)
        # Read first: a chore with nothing to erase must not take the write lock, which /video's row waits for.
        jobs_where, offers_where = " AND ".join(where), " AND ".join(offer_where)
        nothing_in_jobs = await self._one(f"SELECT 1 FROM jobs WHERE {jobs_where} LIMIT 1", params) is None
        if nothing_in_jobs and await self._one(
            f"SELECT 1 FROM offers WHERE {offers_where} LIMIT 1", offer_params
        ) is None:
            return 0
        async with self._write():
            erased = await self._db.execute(f"UPDATE jobs SET prompt = '' WHERE {' AND '.join(where)}", params)
            await self._db.execute(f"UPDATE offers SET prompt = '' WHERE {' AND '.join(offer_where)}", offer_params)
            return erased

    async def guilds_with_prompts(self) -> list[int]:
        """The servers whose requests still hold a prompt."""
        rows = await self._db.fetch_all(
            "SELECT DISTINCT guild_id FROM jobs WHERE prompt != '' AND guild_id IS NOT NULL"
        )
        return [int(row[0]) for row in rows]

    # -- offers (the buttons that spend money) -----------------------------------------------------

    async def add_offer(self, new: NewOffer, *, max_open: int | None = None) -> Offer:
        """Write the offer down. `max_open`: the offers its member may have open at once (every server and DM
        together); past it, AdmissionRefused `too_many_offers`, whose `retry_at` is when the first of them
        closes. Counted and written in one statement, so a burst of clicks cannot pass the bound together."""
        now = self._clock()
        values = {f.name: getattr(new, f.name) for f in fields(NewOffer)}
        values["created_at"] = now
        open_offers = "(SELECT COUNT(*) FROM offers WHERE user_id = ? AND used_at IS NULL AND expires_at > ?)"
        bound, bound_params = ("1 = 1", ()) if max_open is None else (
            f"{open_offers} < ?", (new.user_id, now, max_open))
        async with self._write():
            row = await self._db.fetch_one(
                f"INSERT INTO offers ({', '.join(values)}) SELECT {_marks(tuple(values))} WHERE {bound} RETURNING id",
                (*values.values(), *bound_params),
            )
            if row is None:
                held = await self._one(
                    "SELECT COUNT(*), MIN(expires_at) FROM offers WHERE user_id = ? AND used_at IS NULL "
                    "AND expires_at > ?", (new.user_id, now),
                )
                assert held is not None
                raise AdmissionRefused("too_many_offers", now if held[1] is None else float(held[1]),
                                       open=int(held[0]), limit=max_open)
        offer = await self.get_offer(int(row[0]))
        assert offer is not None
        return offer

    async def get_offer(self, offer_id: int) -> Offer | None:
        row = await self._one(f"SELECT {', '.join(_OFFER_COLUMNS)} FROM offers WHERE id = ?", (offer_id,))
        return Offer(**dict(zip(_OFFER_COLUMNS, tuple(row), strict=True))) if row else None

    async def prune_offers(self, *, closed_before: float) -> int:
        """Delete the offers used, cancelled or expired before `closed_before` (a click on one finds it unknown);
        the jobs they started keep every figure of the ledger. Returns how many went."""
        where = "(used_at IS NOT NULL AND used_at < ?) OR (used_at IS NULL AND expires_at < ?)"
        params = (closed_before, closed_before)
        if await self._one(f"SELECT 1 FROM offers WHERE {where} LIMIT 1", params) is None:
            return 0  # nothing to delete: the write lock, which /video's row waits for, is not taken
        async with self._write():
            return await self._db.execute(f"DELETE FROM offers WHERE {where}", params)

    async def use_offer(self, offer_id: int, outcome: OfferOutcome) -> bool:
        """Use an offer once: True for the one caller whose UPDATE changed the row, False for every other.

        `used` and `cancelled` need it unexpired; `expired` (its timer) needs it past its time. One
        statement decides, so a double click or two members clicking at once cannot both pass.
        """
        now = self._clock()
        expiry = "expires_at <= ?" if outcome == "expired" else "expires_at > ?"
        async with self._write():
            changed = await self._db.execute(
                f"UPDATE offers SET used_at = ?, outcome = ? WHERE id = ? AND used_at IS NULL AND {expiry}",
                (now, outcome, offer_id, now),
            )
            return changed == 1

    async def offer_shown(self, offer_id: int, message_id: int) -> None:
        """The message the offer's buttons were shown on: the one message a click on them counts from."""
        async with self._write():
            await self._db.execute("UPDATE offers SET message_id = ? WHERE id = ?", (message_id, offer_id))

    async def offer_started(self, offer_id: int, job_id: int) -> None:
        """The job the offer's use started (for the record: which click paid for which job)."""
        async with self._write():
            await self._db.execute("UPDATE offers SET job_id = ? WHERE id = ?", (job_id, offer_id))

    async def cancel_unsent(self, job_id: int) -> Job:
        """Its requester cancelled a request not yet sent; raises IllegalTransition once it is on its way.

        Told at once (the click that cancelled it answers), so it is never owed a final message.
        """
        return await self.transition(job_id, S.CANCELLED, told_at=self._clock(), last_error="cancelled")

    async def receipts_to_refresh(
        self, *, now: float, older_than: float, limit: int, owner: str | None = None
    ) -> list[Job]:
        """Waiting jobs whose receipt can still be edited (token alive) and was not refreshed since `older_than`.

        Oldest refresh first, so a bounded number of edits a round reaches every receipt in turn. With `owner`:
        only the jobs that process holds (each process edits the receipts of its own jobs, never twice).
        """
        if limit <= 0:
            return []
        held, held_params = _held_by(owner)
        return await self._jobs(
            f"""SELECT * FROM jobs WHERE state IN ({_marks(POLLED_STATES)}) AND reply_message_id IS NOT NULL
                   AND interaction_expires_at > ? AND COALESCE(progress_at, accepted_at, created_at) <= ?{held}
               ORDER BY COALESCE(progress_at, 0), id LIMIT ?""",
            (*POLLED_STATES, now, older_than, *held_params, limit),
        )

    @property
    def shared(self) -> bool:
        """Whether other processes may use this database (PostgreSQL; a SQLite file serves one)."""
        return self._db.dialect != "sqlite"

    async def live_processes(self, lease: Lease) -> list[LiveProcess]:
        """The processes with a heartbeat within one lease (this one too, once it renewed), oldest first."""
        rows = await self._db.fetch_all(
            f"SELECT owner, started_at, heartbeat_at, shards FROM processes WHERE {_LIVE} ORDER BY started_at, owner",
            (lease.live_after(self._lease_now()),),
        )
        return [
            LiveProcess(str(row[0]), float(row[1]), float(row[2]), None if row[3] is None else str(row[3]))
            for row in rows
        ]

    async def leads_chores(self, lease: Lease) -> bool:
        """Whether `lease`'s process does the chores done once for every process sharing the database (log
        channels, budget alerts, prompt retention): the longest-running live one.

        Needs no write: a dead leader's heartbeat goes stale within one lease and the next oldest takes over.
        With no live heartbeat at all (a process before its first renewal, alone), it leads.
        """
        live = await self.live_processes(lease)
        return not live or live[0].owner == lease.owner

    async def queue_position(self, job_id: int) -> int | None:
        """The job's place among this bot's waiting jobs (1: next), oldest first; None once it is not waiting."""
        marks = _marks(WAITING_STATES)
        row = await self._one(
            f"""SELECT COUNT(*) FROM jobs WHERE id <= ? AND state IN ({marks})
                AND EXISTS (SELECT 1 FROM jobs WHERE id = ? AND state IN ({marks}))""",
            (job_id, *WAITING_STATES, job_id, *WAITING_STATES),
        )
        return int(row[0]) or None if row else None

    async def get_meta(self, key: str) -> str | None:
        row = await self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return str(row[0]) if row else None

    async def delete_meta(self, key: str) -> None:
        async with self._write():
            await self._db.execute("DELETE FROM meta WHERE key = ?", (key,))

    async def set_meta(self, key: str, value: str) -> None:
        async with self._write():
            await self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    async def meta_with_prefix(self, prefix: str) -> dict[str, str]:
        """Every meta row whose key starts with `prefix` (compared exactly, not as a LIKE pattern)."""
        rows = await self._db.fetch_all(
            "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix)
        )
        return {str(row[0]): str(row[1]) for row in rows}

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
        # Not "²" (a digit to isdigit() that int() refuses), and a number a row id can be: both databases keep ids in
        # 64 bits, and a longer one would fail there (20 digits) or in int() itself (over 4,300): not found.
        if local.isascii() and local.isdigit() and len(local) <= MAX_ID_DIGITS and int(local) <= MAX_ROW_ID:
            jobs = await self._jobs("SELECT * FROM jobs WHERE id = ? AND guild_id IS ?", (int(local), guild_id))
            if jobs:
                return jobs[0]
        if "\x00" in text:
            return None  # PostgreSQL's text cannot hold a NUL (it would refuse the query), and no job id has one
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

    async def polled_jobs(self, *, owner: str | None = None) -> list[Job]:
        """Every job the worker polls (with `owner`: that it holds), soonest planned poll first (read at
        start-up, not per poll)."""
        held, held_params = _held_by(owner)
        return await self._jobs(
            f"SELECT * FROM jobs WHERE state IN ({_marks(POLLED_STATES)}){held} ORDER BY next_poll_at, id",
            (*POLLED_STATES, *held_params),
        )

    async def jobs_in_states(self, states: Iterable[JobState], *, owner: str | None = None) -> list[Job]:
        wanted = tuple(states)
        held, held_params = _held_by(owner)
        return await self._jobs(
            f"SELECT * FROM jobs WHERE state IN ({_marks(wanted)}){held} ORDER BY id", (*wanted, *held_params)
        )

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
        rows = await self._db.fetch_all("SELECT state, COUNT(*) FROM jobs GROUP BY state")
        return {JobState(row[0]): int(row[1]) for row in rows}

    # -- usage reports and credits ----------------------------------------------------------------

    async def usage_jobs(self, guild_id: int, start: float, end: float, *, user_id: int | None = None) -> list[Job]:
        """One server's jobs for a usage report over [start, end), oldest first, optionally one member's.

        Every charged job by its acceptance time (exactly the rows `ledger` sums), and every job whose
        outcome is unknown by its request time (it has no acceptance time). Requests never charged
        (rejected, interrupted, not sent yet) are left out.
        """
        counted_at, counted_params = _COUNTED_AT
        where = ["guild_id = ?", f"{counted_at} >= ?", f"{counted_at} < ?"]
        params: list[Any] = [guild_id, *counted_params, start, *counted_params, end]
        if user_id is not None:
            where.append("user_id = ?")
            params.append(user_id)
        return await self._jobs(
            f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY COALESCE(accepted_at, created_at), id", params
        )

    async def mark_credited(self, job_id: int, *, guild_id: int, by_user_id: int) -> Job:
        """Record that support refunded a failed, charged job of this server. Raises CreditRefused otherwise.

        One UPDATE with every condition in its WHERE, so two admins at once cannot both credit it. The charge
        itself stays: the ledger keeps saying what the service charged, and reports show credits beside it.
        """
        creditable = _marks(CREDITABLE_STATES)
        now = self._clock()
        async with self._write():
            changed = await self._db.execute(
                f"""UPDATE jobs SET credited_at = ?, credited_by = ?, updated_at = ?
                   WHERE id = ? AND guild_id = ? AND state IN ({creditable}) AND charged_yen > 0
                   AND credited_at IS NULL""",
                (now, by_user_id, now, job_id, guild_id, *CREDITABLE_STATES),
            )
            row = await self._one("SELECT state, charged_yen, credited_at FROM jobs WHERE id = ? AND guild_id = ?",
                                  (job_id, guild_id))
        if changed != 1:
            if row is None:
                raise CreditRefused(job_id, "not_found")
            if row["credited_at"] is not None:
                raise CreditRefused(job_id, "already_credited")
            raise CreditRefused(job_id, "not_failed")
        return await self.get(job_id)

    async def _one(self, sql: str, params: Sequence[Any]) -> Row | None:
        """The first row of a query that has at most one (a key, or an aggregate)."""
        return await self._db.fetch_one(sql, params)

    async def _jobs(self, sql: str, params: Sequence[Any]) -> list[Job]:
        return [_job(row) for row in await self._db.fetch_all(sql, params)]


#: The columns such a move may set and still be redone: a move that also resets a retry count waits for the disk
#: (lost, the count would stay, and one more failed download after a power cut could end the job failed).
REDONE_COLUMNS = frozenset({"next_poll_at", "finished_at", "file_path"})

#: Writes of a request whose refusal could not be read back as it was (another request changed the count).
ADMISSION_TRIES = 3


@dataclass(frozen=True)
class _Guardrail:
    """One guardrail of the admission: `allows`, a SQL condition (its parameters `allows_params`), holds when
    it lets the request in; `figure` (a SQL value) is what it looked at, for `refusal` to tell the member."""

    allows: str
    allows_params: tuple[Any, ...]
    figure: str
    figure_params: tuple[Any, ...]
    refusal: Callable[[Any], AdmissionRefused]


def _guardrails(new: NewJob, admission: Admission, now: float) -> list[_Guardrail]:
    """The admission's rules for `new`, in the order a refusal names them. Per server: a member's cooldown
    and jobs in flight in one server do not hold them back in another."""
    guardrails: list[_Guardrail] = []
    member = (new.user_id, new.guild_id)
    if admission.cooldown_seconds > 0:
        cooldown = admission.cooldown_seconds
        last = ("(SELECT MAX(created_at) FROM jobs WHERE user_id = ? AND guild_id IS ? "
                f"AND state NOT IN ({_marks(NOTHING_SPENT_STATES)}))")
        last_params = (*member, *NOTHING_SPENT_STATES)
        guardrails.append(_Guardrail(
            f"COALESCE({last} <= ?, 1 = 1)", (*last_params, now - cooldown), last, last_params,
            lambda at: AdmissionRefused("cooldown", float(at) + cooldown),
        ))
    if admission.max_active_jobs is not None:
        limit = admission.max_active_jobs
        in_flight = _marks(IN_FLIGHT_STATES)
        active = f"(SELECT COUNT(*) FROM jobs WHERE user_id = ? AND guild_id IS ? AND state IN ({in_flight}))"
        active_params = (*member, *IN_FLIGHT_STATES)
        guardrails.append(_Guardrail(
            f"{active} < ?", (*active_params, limit), active, active_params,
            lambda count: AdmissionRefused("too_many_active", None, active=int(count), limit=limit),
        ))
    for cap in admission.caps:
        spent, spent_params = _spent(new, cap, admission.price_yen)
        guardrails.append(_Guardrail(
            f"{spent} + ? <= ?", (*spent_params, admission.price_yen, cap.cap_yen), spent, spent_params,
            _cap_reached(cap),
        ))
    return guardrails


def _cap_reached(cap: SpendCap) -> Callable[[Any], AdmissionRefused]:
    def refusal(yen: Any) -> AdmissionRefused:
        spent = int(yen)
        return AdmissionRefused(cap.code, cap.end, spent=spent, cap=cap.cap_yen, left=max(cap.cap_yen - spent, 0))

    return refusal


def _spent(new: NewJob, cap: SpendCap, price_yen: int) -> tuple[str, tuple[Any, ...]]:
    """What counts against `cap` (a SQL value, and its parameters): charges in its window, and what may yet be
    charged.

    Requests not yet answered, and outcomes unknown, count at their price: they may be charged (or may have
    been). Failed jobs count: they were charged, unless support credited them.
    """
    maybe = _marks(MAYBE_CHARGED_STATES)
    unsent = _marks(UNSENT_OR_SENDING)
    member = "AND user_id = ?" if cap.member_only else ""
    return (
        f"""(SELECT COALESCE(SUM(CASE WHEN state IN ({maybe})
                                      THEN (CASE WHEN price_yen > 0 THEN price_yen ELSE ? END)
                                      ELSE charged_yen END), 0)
             FROM jobs
             WHERE guild_id IS ? {member} AND (
                 state IN ({unsent})
                 OR (state = ? AND created_at >= ? AND created_at < ?)
                 OR (charged_yen > 0 AND credited_at IS NULL AND accepted_at >= ? AND accepted_at < ?)))""",
        (
            *MAYBE_CHARGED_STATES, price_yen, new.guild_id,
            *((new.user_id,) if cap.member_only else ()),
            *UNSENT_OR_SENDING, S.UNKNOWN, cap.start, cap.end, cap.start, cap.end,
        ),
    )


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


#: The largest row id either database stores (a signed 64-bit integer), and its number of digits.
MAX_ROW_ID = 2**63 - 1
MAX_ID_DIGITS = len(str(MAX_ROW_ID))


def _counted_at() -> tuple[str, tuple[JobState, ...]]:
    """When a job counts in a usage report, as SQL, NULL when it does not count (and its parameters):
    bot/core/spending.py's rules and times, rendered."""
    cases: list[str] = []
    params: list[JobState] = []
    for rule in OUTCOME_RULES:
        conditions: list[str] = []
        if rule.states is not None:
            conditions.append(f"state IN ({_marks(rule.states)})")
            params += rule.states
        if rule.charged is not None:
            conditions.append("charged_yen > 0" if rule.charged else "charged_yen <= 0")
        at = "NULL" if rule.outcome is None else COUNTED_AT[rule.outcome]
        cases.append(f"WHEN {' AND '.join(conditions) or '1 = 1'} THEN {at}")
    return f"(CASE {' '.join(cases)} END)", tuple(params)


#: A usage report's rows are the jobs this falls in its window for (tests/store/test_jobs_usage.py checks it
#: against bot/core/spending.py's Python reading of the same rules).
_COUNTED_AT = _counted_at()


#: Why a request that never left ends interrupted (at a restart, or by the task stopped before it sent it).
STOPPED_BEFORE_SENDING = "the bot stopped before the request was sent"
#: The note on a request given up as unknown whose 202 came late (`mark_accepted`): its requester is told it came.
ACCEPTED_LATE = "accepted late, after its outcome had been given up as unknown"
#: Why a request whose 202 could not be read failed (`mark_charged_unreadable`).
UNREADABLE_202 = "the service accepted (HTTP 202) and charged it, but its answer could not be read"
#: What a request cut off before its answer becomes, at a restart or when another process takes it over.
_RECOVERY: dict[JobState, tuple[JobState, str]] = {
    S.RECEIVED: (S.INTERRUPTED, STOPPED_BEFORE_SENDING),
    S.SUBMITTING: (S.UNKNOWN, "the bot stopped while the request was being sent"),
}

#: The claim's row lock, by dialect. SQLite's BEGIN IMMEDIATE already makes the claim the only writer. On
#: PostgreSQL every write transaction holds the advisory write lock too, so today this never skips a row; it
#: keeps claims disjoint on its own should writes ever stop being serialized (tests/store/test_leases.py checks both).
_CLAIM_LOCK: dict[Dialect, str] = {"sqlite": "", "postgresql": "FOR UPDATE SKIP LOCKED"}


def _held_by(owner: str | None) -> tuple[str, tuple[str, ...]]:
    """The condition (and its parameter) that limits a statement to jobs `owner` holds; none without one."""
    return ("", ()) if owner is None else (" AND lease_owner = ?", (owner,))


def _released_when_told(assignments: dict[str, Any]) -> dict[str, Any]:
    """A job whose requester got the final message needs no process any more: its lease goes with the write."""
    if assignments.get("told_at") is not None:
        assignments.update(lease_owner=None, lease_expires_at=None)
    return assignments


def _check_columns(assignments: Mapping[str, Any]) -> None:
    unknown = set(assignments) - set(_JOB_COLUMNS)
    if unknown or "id" in assignments:
        raise ValueError(f"not updatable job columns: {sorted(unknown | ({'id'} & set(assignments)))}")

