"""A downloaded video posted through the port (bot/jobs/port.py), and the post recorded once: a post made is
never made again by this process, even when its record waits for the database."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bot.core.lifecycle import JobState
from bot.core.log_context import job_fields
from bot.core.retry import retrying
from bot.core.tasks import LAST_WRITE_SECONDS, finish_despite_cancels
from bot.jobs.port import Delivery, Undeliverable
from bot.jobs.worker.base import WorkerBase, log
from bot.store.jobs import Job, StoreUnavailable

S = JobState


def _log_failure(task: asyncio.Future[Job]) -> None:
    """A write let go at a stop: its end is nobody's to await any more, but a failure is still logged."""
    if not task.cancelled() and (failure := task.exception()) is not None:
        log.warning("a write let go at the stop failed: %s", failure)


class PostUnrecorded(Exception):
    """A video was posted, and the database did not take its record within DATABASE_RETRY: the job stays
    `downloaded`, and the next start posts it again (Discord's nonce merges a repeat within minutes)."""

    def __init__(self, job: Job, delivery: Delivery, cause: StoreUnavailable) -> None:
        super().__init__(f"{job.reference} was posted as message {delivery.message_id}, but the database did not "
                         f"take its record: {cause}")


class Delivering(WorkerBase):
    """A downloaded job's post."""

    async def _deliver(self, job: Job) -> Job:
        assert job.file_path is not None
        video = Path(job.file_path)
        try:
            delivery = await self._deliverer.deliver(job, video)
        except Undeliverable as exc:
            log.warning("%s could not be delivered: %s; the file stays at %s", job.reference, exc, video,
                        extra=job_fields(job))
            job = await self._transition(job.id, S.UNDELIVERABLE, last_error=str(exc))
            await self._finalize(job, "undeliverable")
            await self._show_progress(job)
            return job
        # Posted: from here only its record is missing, and a step tried again (after a database error, or a
        # restart after a stop that cut the write off) would post it twice.
        recording = asyncio.ensure_future(self._record_delivery(job, delivery, video))
        try:
            job = await asyncio.shield(recording)
        except asyncio.CancelledError:
            # Stopping: the record gets a bounded moment to land (a database that hangs must not hold the stop).
            await finish_despite_cancels(asyncio.wait({recording}, timeout=LAST_WRITE_SECONDS))
            if not recording.done():
                recording.cancel()
                recording.add_done_callback(_log_failure)
                log.error("%s was posted as message %d, but the bot stopped before it was recorded; the next start "
                          "posts it again", job.reference, delivery.message_id, extra=job_fields(job))
            elif not recording.cancelled() and (failure := recording.exception()) is not None:
                log.error("%s was posted as message %d, but its record failed while the bot stopped", job.reference,
                          delivery.message_id, exc_info=failure, extra=job_fields(job))
            raise
        await self._show_progress(job)
        return job

    async def _record_delivery(self, job: Job, delivery: Delivery, video: Path) -> Job:
        """Record a post made, within the database's retry policy (PostUnrecorded past it), then remove the file
        unless it is kept."""
        tries = 0

        async def record() -> Job:
            nonlocal tries
            tries += 1
            if tries > 1:
                # A write that failed may have committed all the same (its answer lost): never record it twice.
                current = await self._store.get(job.id)
                if current.state == S.DELIVERED and current.delivered_message_id == delivery.message_id:
                    return current
            return await self._transition(
                job.id, S.DELIVERED, delivered_channel_id=delivery.channel_id,
                delivered_message_id=delivery.message_id, told_at=self._clock(), step_attempts=0,
                step_failing_since=None,
            )

        try:
            job = await retrying(self._config.database_retry, record, retry_on=(StoreUnavailable,),
                                 what=f"recording the post of {job.reference} (message {delivery.message_id})")
        except StoreUnavailable as exc:
            raise PostUnrecorded(job, delivery, exc) from exc
        log.info("delivered %s as message %d", job.reference, delivery.message_id, extra=job_fields(job))
        if not self._config.keep_delivered_videos and not delivery.compressed:
            # A compressed copy was posted: the original stays for the operator.
            video.unlink(missing_ok=True)
        return job
