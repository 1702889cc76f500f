"""A job's rows read: by reference, due for a poll, in given states, a member's recent ones, owed a final
message, receipts to refresh, a place in line, counts by state."""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.lifecycle import OWED_A_MESSAGE_STATES, POLLED_STATES, WAITING_STATES, JobState
from bot.store.jobs.base import StoreBase, _held_by, _marks
from bot.store.jobs.records import Job

#: The largest row id either database stores (a signed 64-bit integer), and its number of digits.
MAX_ROW_ID = 2**63 - 1
MAX_ID_DIGITS = len(str(MAX_ROW_ID))


class Reads(StoreBase):
    """A job's reads."""

    async def find(self, reference: str, *, guild_id: int | None) -> Job | None:
        """A job by local reference (`#42` or `42`) or by the service's job id, within one server.

        One query of one shape whatever the reference and whatever the answer (a row of the caller's, of
        someone else's, or none), so the work done tells nothing of what exists. A local reference wins over a
        service job id that happens to read the same.
        """
        text = reference.strip()
        local = text.removeprefix("#")
        # Not "²" (a digit to isdigit() that int() refuses), and a number a row id can be: both databases keep ids in
        # 64 bits, and a longer one would fail there (20 digits) or in int() itself (over 4,300): not found.
        row_id = (int(local) if local.isascii() and local.isdigit() and len(local) <= MAX_ID_DIGITS
                  and int(local) <= MAX_ROW_ID else None)
        # PostgreSQL's text cannot hold a NUL (it would refuse the query), and no job id has one.
        service_job_id = text if "\x00" not in text else None
        jobs = await self._jobs(
            "SELECT * FROM jobs WHERE guild_id IS ? AND (id = ? OR service_job_id = ?) "
            "ORDER BY CASE WHEN id = ? THEN 0 ELSE 1 END LIMIT 1",
            (guild_id, row_id, service_job_id, row_id),
        )
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

    async def state_counts(self) -> dict[JobState, int]:
        """How many jobs are in each state (states with none are left out), read from the state index."""
        rows = await self._db.fetch_all("SELECT state, COUNT(*) FROM jobs GROUP BY state")
        return {JobState(row[0]): int(row[1]) for row in rows}

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

    async def queue_position(self, job_id: int) -> int | None:
        """The job's place among this bot's waiting jobs (1: next), oldest first; None once it is not waiting."""
        marks = _marks(WAITING_STATES)
        row = await self._one(
            f"""SELECT COUNT(*) FROM jobs WHERE id <= ? AND state IN ({marks})
                AND EXISTS (SELECT 1 FROM jobs WHERE id = ? AND state IN ({marks}))""",
            (job_id, *WAITING_STATES, job_id, *WAITING_STATES),
        )
        return int(row[0]) or None if row else None
