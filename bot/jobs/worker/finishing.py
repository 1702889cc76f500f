"""A finished job's steps, in a task of its own so a slow upload never holds up polling: its download, then its
post, each failure counted on the job within its retry policy (a database outage within its own)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from bot.core.errors import InsufficientStorage, VideoServiceError
from bot.core.host import check_hint
from bot.core.lifecycle import FINISHING_STATES, JobState
from bot.core.log_context import job_fields
from bot.jobs.port import DiscordUnavailable
from bot.jobs.worker.base import WorkerBase, log
from bot.jobs.worker.delivery import PostUnrecorded
from bot.store.jobs import Job, LeaseLost, StoreUnavailable

S = JobState


def _on_disk(job: Job) -> bool:
    return job.file_path is not None and Path(job.file_path).is_file()


def _reason(exc: BaseException) -> str:
    """A short, key-free description of a failure for the job's record and the log."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class Finishing(WorkerBase):
    """A finished job's steps."""

    def _spawn_finish(self, job: Job) -> None:
        if job.id in self._finishing:
            return
        self._finishing.add(job.id)
        self._background.spawn(self._finish(job), f"finish-{job.id}")

    async def _finish(self, job: Job) -> None:
        """Download, then post; each step retried within its policy, the count kept on the job."""
        failures = 0
        failing_since = 0.0
        try:
            while job.state in FINISHING_STATES:
                try:
                    if not await self._holds(job.id):
                        if self._lease is not None and job.id not in self._held:
                            log.warning("%s: another process holds it now; leaving it to them", job.reference,
                                        extra=job_fields(job))
                            return
                        await asyncio.sleep(self._lease.renew_every if self._lease is not None else 1.0)
                        continue
                    job = await self._finish_step(job)
                    failures = 0  # the policy counts one outage, not every blip in the job's life
                except StoreUnavailable as exc:
                    # The step stays where the database has it (a post already made records itself in
                    # _deliver): try it again here, within the policy; nothing else in this process would.
                    failures += 1
                    now = time.monotonic()
                    failing_since = now if failures == 1 else failing_since
                    policy = self._config.database_retry
                    delay = policy.delay(failures)
                    if not policy.allows(failures, now - failing_since, delay):
                        log.error("%s: the database failed %d times in %.0f s while finishing it (%s); it waits "
                                  "for the next start", job.reference, failures, now - failing_since, exc,
                                  extra=job_fields(job))
                        return
                    log.warning("%s: the database failed while finishing it (%s); trying again in %.0f s",
                                job.reference, exc, delay, extra=job_fields(job))
                    await asyncio.sleep(delay)
                    with contextlib.suppress(StoreUnavailable):  # still failing: the next round counts it
                        job = await self._store.get(job.id)
                except PostUnrecorded as exc:
                    log.error("%s; it waits for the next start, which posts it again", exc, extra=job_fields(job))
                    return
        except LeaseLost as exc:
            log.warning("%s; leaving it to the process that holds it", exc, extra=job_fields(job))
        finally:
            self._finishing.discard(job.id)

    async def _finish_step(self, job: Job) -> Job:
        """The next step of a completed job: its download, or its post; failures counted within their policy."""
        # Hosts do not share a disk: a downloaded job taken over from another process has its file on
        # that process's disk. The service still keeps it, and a second download costs nothing.
        downloading = job.state == S.COMPLETED or not _on_disk(job)
        try:
            return await (self._download(job) if downloading else self._deliver(job))
        except InsufficientStorage as exc:
            return await self._wait_for_storage(job, exc)
        except (asyncio.CancelledError, StoreUnavailable, LeaseLost, PostUnrecorded):
            raise
        except Exception as exc:
            return await self._step_failed(job, exc, downloading=downloading)

    async def _step_failed(self, job: Job, exc: Exception, *, downloading: bool) -> Job:
        """Count a failed download or upload on the job; past the policy, end it and tell the requester."""
        policy = self._config.download_retry if downloading else self._config.upload_retry
        what = "download" if downloading else "upload"
        now = self._clock()
        attempts = job.step_attempts + 1
        since = job.step_failing_since if job.step_failing_since is not None else now
        delay = policy.delay(attempts)
        reason = _reason(exc)
        if policy.allows(attempts, now - since, delay):
            expected = isinstance(exc, (VideoServiceError, DiscordUnavailable))
            log.warning("%s of %s failed (attempt %d of %d): %s; retrying in %.0f s%s", what, job.reference, attempts,
                        policy.attempts, reason, delay, check_hint(exc), exc_info=None if expected else exc,
                        extra=job_fields(job))
            job = await self._update(job.id, step_attempts=attempts, step_failing_since=since,
                                     last_error=f"{what} failed: {reason}")
            await asyncio.sleep(delay)
            return job
        log.error("%s of %s failed %d times over %.0f s; giving up: %s", what, job.reference, attempts, now - since,
                  reason, extra=job_fields(job))
        if downloading:
            job = await self._download_failed(
                job, step_attempts=attempts, last_error=f"the video could not be downloaded: {reason}"
            )
        else:
            job = await self._transition(
                job.id, S.UNDELIVERABLE, step_attempts=attempts, last_error=f"the video could not be posted: {reason}"
            )
            await self._finalize(job, "undeliverable")
        await self._show_progress(job)
        return job
