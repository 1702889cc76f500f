"""The ledger: what was charged (optionally per server, member, since), a usage report's rows by
bot/core/spending.py's rules, and a failed job marked credited."""

from __future__ import annotations

from typing import Any

from bot.core.lifecycle import CREDITABLE_STATES, JobState
from bot.core.spending import COUNTED_AT, OUTCOME_RULES
from bot.store.jobs.base import StoreBase, _given, _marks
from bot.store.jobs.records import CreditRefused, Job


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


class Ledger(StoreBase):
    """What was charged, and credited."""

    async def ledger(self, *, guild_id: int | None = None, user_id: int | None = None,
                     since: float | None = None) -> tuple[int, int]:
        """(accepted videos, yen charged) from the bot's own records, optionally narrowed."""
        narrowed, params = _given(("guild_id = ?", guild_id), ("user_id = ?", user_id), ("accepted_at >= ?", since))
        where = " AND ".join(["charged_yen > 0", *narrowed])
        row = await self._one(f"SELECT COUNT(*), COALESCE(SUM(charged_yen), 0) FROM jobs WHERE {where}", params)
        return (int(row[0]), int(row[1])) if row else (0, 0)

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
