"""Keeping waiting members' receipts current: their place in line and when the video is likely ready.

Each receipt is edited at most once a minute, and all of them together within a bot-wide budget of
edits per second, so thousands of waiting jobs never run into Discord's rate limits. Edits go through
the interaction's token while it lives (15 minutes); after that the receipt already points to /status.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.jobs.port import Deliverer
from bot.store.jobs import JobStore

log = logging.getLogger(__name__)

#: (model, accepted_at) -> the likely ready time (bot/jobs/durations.py's estimate, shared with the poll schedule).
ReadyEstimate = Callable[[str, float], float]


@dataclass(frozen=True)
class RefreshLimits:
    every_seconds: float = 60.0  # one receipt is refreshed at most this often
    edits_per_second: float = 2.0  # every receipt refresh of this process together (its own jobs only)


class EditBudget:
    """A token bucket: `take()` says whether one more edit fits the rate right now."""

    def __init__(self, per_second: float, clock: Callable[[], float], *, burst: float | None = None) -> None:
        self._rate = per_second
        self._burst = burst if burst is not None else max(per_second, 1.0)
        self._clock = clock
        self._tokens = self._burst
        self._at = clock()

    def available(self) -> int:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        return int(self._tokens)

    def take(self) -> bool:
        if self.available() < 1:
            return False
        self._tokens -= 1
        return True


class ProgressRefresher:
    def __init__(
        self,
        store: JobStore,
        deliverer: Deliverer,
        estimate_ready: ReadyEstimate | None,
        *,
        limits: RefreshLimits | None = None,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
    ) -> None:
        """`owner`: the process's lease owner; it refreshes the receipts of the jobs it holds only."""
        self._store = store
        self._owner = owner
        self._deliverer = deliverer
        self._estimate = estimate_ready
        self._limits = limits or RefreshLimits()
        self._clock = clock
        self._budget = EditBudget(self._limits.edits_per_second, clock)

    async def refresh(self) -> int:
        """Edit the receipts that are due, as many as the budget allows now; returns how many were edited."""
        now = self._clock()
        due = await self._store.receipts_to_refresh(
            now=now, older_than=now - self._limits.every_seconds, limit=self._budget.available(), owner=self._owner
        )
        edited = 0
        for job in due:
            if not self._budget.take():
                break
            position = await self._store.queue_position(job.id)
            ready_at = self._estimate(job.model, job.accepted_at) if self._estimate and job.accepted_at else None
            # Recorded first: a receipt Discord refuses is not retried before its next turn.
            await self._store.update(job.id, progress_at=now)
            try:
                await self._deliverer.show_progress(job, position=position, ready_at=ready_at)
            except Exception as exc:  # a refresh is a courtesy: the state-change edits and /status remain
                log.warning("request %s: could not refresh its receipt (%s)", job.reference, type(exc).__name__)
                continue
            edited += 1
        return edited
