"""A stand-in for Discord that records when each video arrives."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

from bot.core.notices import Notice
from bot.jobs.port import Delivery
from bot.store.jobs import Job

#: Announcements after which a job needs nothing more.
FINAL_EVENTS = frozenset({"failed", "stalled", "undeliverable"})


class RecordingSink:
    """Implements the worker's Deliverer protocol; `finished` is set once every expected job is done."""

    def __init__(self) -> None:
        self.received: dict[str, float] = {}  # service job id -> time.monotonic() of arrival
        self.duplicates = 0
        self.announcements: Counter[str] = Counter()
        self.finished = asyncio.Event()
        self._expected: int | None = None
        self._done = 0

    def expect(self, jobs: int) -> None:
        self._expected = jobs
        self._check()

    async def deliver(self, job: Job, video: Path) -> Delivery:
        arrived = time.monotonic()
        key = job.service_job_id or job.reference
        if key in self.received:
            self.duplicates += 1
        else:
            self.received[key] = arrived
            self._done += 1
        # The file must be there, as an upload would read it.
        video.stat()
        self._check()
        return Delivery(channel_id=job.channel_id, message_id=len(self.received))

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        self.announcements[event] += 1
        if event in FINAL_EVENTS:
            self._done += 1
            self._check()

    async def show_progress(
        self, job: Job, *, position: int | None = None, ready_at: float | None = None
    ) -> None:
        return None

    def _check(self) -> None:
        if self._expected is not None and self._done >= self._expected:
            self.finished.set()
