"""The naive poller the worker is measured against.

A fixed tick: every interval, read the active jobs and poll each one after the other, then download
and deliver the finished ones inline. No per-job schedule, no concurrency, no pacing and no
back-off: a job refused with 429 simply waits for the next tick. Ticks are anchored like
discord.py's `tasks.loop`: a round that overruns starts the next one at once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from bot.core.errors import VideoServiceError
from bot.jobs.port import Deliverer
from bot.service.client import VideoServiceClient
from bot.store.jobs import Job, JobState, JobStore

S = JobState
ACTIVE = (S.PENDING, S.IN_PROGRESS, S.COMPLETED, S.DOWNLOADED)


class NaiveLoop:
    def __init__(
        self,
        store: JobStore,
        client: VideoServiceClient,
        deliverer: Deliverer,
        *,
        storage_dir: Path,
        interval: float,
    ) -> None:
        self._store = store
        self._client = client
        self._deliverer = deliverer
        self._storage_dir = storage_dir
        self._interval = interval

    async def run(self) -> None:
        next_tick = time.monotonic()
        while True:
            for job in await self._store.jobs_in_states(ACTIVE):
                await self._step(job)
            next_tick += self._interval
            await asyncio.sleep(max(0.0, next_tick - time.monotonic()))

    async def _step(self, job: Job) -> None:
        try:
            if job.state in (S.COMPLETED, S.DOWNLOADED):
                await self._finish(job, None)
                return
            assert job.service_job_id is not None
            remote = await self._client.get_job(job.service_job_id, retry=False)
            if remote.status == "completed":
                job = await self._store.transition(job.id, S.COMPLETED, finished_at=time.time())
                await self._finish(job, None)
            elif remote.status == "failed":
                job = await self._store.transition(job.id, S.FAILED, finished_at=time.time())
                await self._deliverer.announce(job, "failed")
            elif remote.status == "in_progress" and job.state == S.PENDING:
                await self._store.transition(job.id, S.IN_PROGRESS)
        except VideoServiceError:
            return  # tried again next tick

    async def _finish(self, job: Job, content_path: str | None) -> None:
        assert job.service_job_id is not None
        if job.state == S.COMPLETED:
            video = self._storage_dir / f"{job.id}.mp4"
            await self._client.download(job.service_job_id, video, max_bytes=100 * 1024 * 1024)
            job = await self._store.transition(job.id, S.DOWNLOADED, file_path=str(video))
        assert job.file_path is not None
        video = Path(job.file_path)
        delivery = await self._deliverer.deliver(job, video)
        await self._store.transition(
            job.id, S.DELIVERED, delivered_channel_id=delivery.channel_id, delivered_message_id=delivery.message_id
        )
        video.unlink(missing_ok=True)
