"""A completed job's video onto this host's disk: downloaded (again, for a job taken over from another host),
waiting for disk space within its limits, or ended when it cannot be had; and what a killed download left."""

from __future__ import annotations

import asyncio
import time

from bot.core.errors import InsufficientStorage
from bot.core.lifecycle import JobState
from bot.core.log_context import job_fields
from bot.jobs.worker.base import WorkerBase, log
from bot.service.download import remove_abandoned_downloads
from bot.store.jobs import Job

S = JobState


class Downloading(WorkerBase):
    """A finished job's download."""

    async def _wait_for_storage(self, job: Job, exc: InsufficientStorage) -> Job:
        """No room for the video: wait (it is safe at the service for now), say so, and stop in time."""
        waited = self._clock() - (job.finished_at or job.updated_at)
        if waited >= self._config.storage_wait_limit:
            log.error("%s: still no disk space for the video after %.0f s; giving up (%s)", job.reference, waited, exc,
                      extra=job_fields(job))
            job = await self._download_failed(job, last_error="the bot had no disk space to keep the video in time")
            await self._show_progress(job)
            return job
        log.warning("%s: no disk space for the video (%s); waiting %.0f s (waited %.0f s so far)", job.reference,
                    exc, self._config.storage_retry_seconds, waited, extra=job_fields(job))
        if waited >= self._config.storage_notice_after and not job.waiting_notice_sent:
            job = await self._update(job.id, waiting_notice_sent=1)
            await self._announce(job, "storage_wait")
        await asyncio.sleep(self._config.storage_retry_seconds)
        return await self._store.get(job.id)

    async def _download_failed(self, job: Job, **changes: object) -> Job:
        """No video after the policy: `failed` (charged, job id for support). A download again of a video taken
        over from another host ends `undeliverable`: the lifecycle has no way back from `downloaded`."""
        if job.state == S.DOWNLOADED:
            job = await self._transition(job.id, S.UNDELIVERABLE, **changes)
            await self._finalize(job, "undeliverable")
        else:
            job = await self._transition(job.id, S.FAILED, **changes)
            await self._finalize(job, "failed")
        return job

    async def _download(self, job: Job) -> Job:
        assert job.service_job_id is not None
        destination = self._config.storage_dir / f"{job.id}.mp4"
        again = job.state == S.DOWNLOADED
        if again:
            log.info("%s: its file %s is not on this host's disk; downloading it again", job.reference,
                     job.file_path, extra=job_fields(job))
        size = await self._client.download(job.service_job_id, destination, max_bytes=self._config.max_download_bytes)
        log.info("downloaded %s (%d bytes)", job.reference, size, extra=job_fields(job))
        fresh: dict[str, object] = {"file_path": str(destination)}
        if job.step_attempts or job.step_failing_since is not None:
            fresh |= {"step_attempts": 0, "step_failing_since": None}  # a count to reset: that move waits for the disk
        if again:
            job = await self._update(job.id, **fresh)
            return job
        job = await self._transition(job.id, S.DOWNLOADED, **fresh)
        await self._show_progress(job)
        return job

    async def _remove_abandoned_downloads(self) -> None:
        """What a kill -9 mid-download left on the disk: up to a video's size each, never used again."""
        directory = self._config.storage_dir
        if not directory.is_dir():
            return
        removed = await asyncio.to_thread(
            remove_abandoned_downloads, directory, unwritten_for=self._config.abandoned_download_after,
            now=time.time(),
        )
        if removed:
            log.info("removed %d partial downloads abandoned by an earlier run", removed)
