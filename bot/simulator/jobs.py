"""The simulated job and its clock.

Every job time (``SimJob.created_at``, ``in_progress_at``, ``completed_at``) is on the
``time.monotonic()`` clock. On the default asyncio event loops ``loop.time()`` reads that same clock, so
tests may compare job times with either. Job status is derived from the clock on every read, which means
no background task is needed to advance jobs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal, TypeAlias

from bot.simulator.contract import JOBS_PREFIX, MODEL_ID

JobStatus: TypeAlias = Literal["pending", "in_progress", "completed", "failed"]


@dataclass
class SimJob:
    """One accepted job. Times are `time.monotonic()` seconds; status is a function of the clock."""

    id: str
    prompt: str
    seed: int | None
    created_at: float
    duration: float
    will_fail: bool
    model: str = MODEL_ID

    @property
    def in_progress_at(self) -> float:
        return self.created_at + self.duration / 3

    @property
    def completed_at(self) -> float:
        """The moment the job reaches its terminal state (`completed`, or `failed` if `will_fail`)."""
        return self.created_at + self.duration

    @property
    def poll_path(self) -> str:
        return f"{JOBS_PREFIX}/{self.id}"

    @property
    def content_path(self) -> str:
        return f"{JOBS_PREFIX}/{self.id}/content"

    def status_at(self, now: float) -> JobStatus:
        if now >= self.completed_at:
            return "failed" if self.will_fail else "completed"
        if now >= self.in_progress_at:
            return "in_progress"
        return "pending"

    @property
    def status(self) -> JobStatus:
        return self.status_at(time.monotonic())
