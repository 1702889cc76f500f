"""The background worker: poll accepted jobs, download finished videos at once, deliver them.

Each job carries its own `next_poll_at`. The worker sleeps until the earliest one (or until a new
job is recorded), claims the due jobs by moving their next slot forward before polling them, and
polls them with bounded concurrency. A request that left late (it waited for a free slot or for
the pacer) has its job's next slot counted from its answer, so it never brings the next one closer.
Completed jobs are downloaded and delivered in tasks of their own, so a slow upload never holds
up polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiohttp
import discord

from bot.errors import (
    BotError,
    InsufficientStorage,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    VideoServiceError,
)
from bot.lifecycle import SLOW_AFTER_SECONDS, STALLED_AFTER_SECONDS
from bot.logs import job_fields
from bot.notices import Notice
from bot.retry import DOWNLOAD_RETRY, NOTICE_RETRY, NOTICE_ROUNDS, UPLOAD_RETRY, RetryPolicy, retrying
from bot.store import Job, JobState, JobStore, StoreUnavailable
from bot.tasks import BackgroundTasks
from bot.video_client import VideoServiceClient

log = logging.getLogger(__name__)

S = JobState


def _reason(exc: BaseException) -> str:
    """A short, key-free description of a failure for the job's record and the log."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class Undeliverable(BotError):
    """Neither the channel nor the requester's DMs would take the video; retrying will not help."""


@dataclass(frozen=True)
class Delivery:
    channel_id: int
    message_id: int
    compressed: bool = False
    via_dm: bool = False


class Deliverer(Protocol):
    """Where finished videos and news about jobs go (Discord in production, a sink in benchmarks)."""

    async def deliver(self, job: Job, video: Path) -> Delivery:
        """Post the video; raise Undeliverable when no place takes it, anything else to retry later."""
        ...

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        """Tell the requester about `event`; raise Undeliverable when no place takes it.

        `via_interaction`: try the original interaction first while its token lives.
        """
        ...

    async def show_progress(self, job: Job) -> None:
        """Refresh the original `/video` reply while its interaction token lives."""
        ...


@dataclass(frozen=True)
class WorkerConfig:
    storage_dir: Path
    poll_interval: float = 20.0
    max_concurrency: int = 8
    keep_delivered_videos: bool = False
    jitter: float = 0.05  # polls of one job are spaced by interval * (1 + up to 5 %)
    # A due job may wait this share of the interval, so jobs due close together share one claim
    # (one write transaction) instead of one each: at 1,000 jobs that is most of the loop's work.
    claim_window: float = 0.025
    slow_after: float = SLOW_AFTER_SECONDS
    give_up_after: float = STALLED_AFTER_SECONDS
    rate_limit_backoff: float = 10.0  # pause when a 429 carries no Retry-After
    download_retry: RetryPolicy = DOWNLOAD_RETRY
    upload_retry: RetryPolicy = UPLOAD_RETRY
    notice_retry: RetryPolicy = NOTICE_RETRY
    notice_rounds: int = NOTICE_ROUNDS
    max_download_bytes: int = 100 * 1024 * 1024
    # No disk space for a finished video: keep trying this often, tell the requester once after
    # `storage_notice_after`, and give up (failed, job id for support) after `storage_wait_limit` from
    # completion, before the service's retention would lose the video anyway.
    storage_retry_seconds: float = 30.0
    storage_notice_after: float = 5 * 60
    storage_wait_limit: float = 60 * 60
    # Requests owed a final message are looked for this often; ones changed more recently than
    # `sweep_grace` are left to whoever is telling them right now.
    sweep_interval: float = 60.0
    sweep_grace: float = 120.0
    idle_wake: float = 30.0  # the loop wakes at least this often, so the heartbeat stays fresh


#: The final message each state is owed (a delivered video is its own).
FINAL_NOTICE: dict[JobState, Notice] = {
    S.FAILED: "failed",
    S.STALLED: "stalled",
    S.UNDELIVERABLE: "undeliverable",
    S.UNKNOWN: "unknown",
    S.INTERRUPTED: "interrupted",
    S.REJECTED: "rejected",
}


class JobWorker:
    def __init__(
        self,
        store: JobStore,
        client: VideoServiceClient,
        deliverer: Deliverer,
        config: WorkerConfig,
        *,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._client = client
        self._deliverer = deliverer
        self._config = config
        self._clock = clock
        self._on_cycle = on_cycle
        self._wakeup = asyncio.Event()
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._paused_until = 0.0
        self._main: asyncio.Task[None] | None = None
        self._background = BackgroundTasks(log)
        self._finishing: set[int] = set()
        self._polling: set[int] = set()
        self._told_paths: set[int] = set()  # jobs whose ignored service paths were logged already

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._main is None or self._main.done():
            self._main = asyncio.create_task(self._run(), name="job-worker")
            self._background.spawn(self._sweep_loop(), "final-messages")

    @property
    def running(self) -> bool:
        return self._main is not None and not self._main.done()

    async def stop(self) -> None:
        if self._main is not None:
            self._main.cancel()
            await asyncio.gather(self._main, return_exceptions=True)
        self._main = None
        await self._background.cancel_all()

    def wake(self, job: Job | None = None) -> None:
        """A job was recorded: re-plan the sleep."""
        self._wakeup.set()

    # -- main loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        await self.resume()
        while True:
            try:
                self._on_cycle()
                await self._cycle()
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad job or a database hiccup must not stop the worker.
                log.exception("worker cycle failed; continuing")
                await asyncio.sleep(1.0)

    async def resume(self) -> None:
        """After a restart: finish what was downloaded or completed; pending jobs are polled as they fall due."""
        for job in await self._store.jobs_in_states((S.COMPLETED, S.DOWNLOADED)):
            self._spawn_finish(job)
        unfinished = await self._store.jobs_in_states((S.PENDING, S.IN_PROGRESS))
        if unfinished or self._finishing:
            log.info("resuming %d jobs to poll and %d to finish", len(unfinished), len(self._finishing))

    async def _sweep_loop(self) -> None:
        """Every request that ended without its final message gets one: at start-up, then periodically."""
        grace = 0.0  # at start-up nothing is being told yet: take them all
        while True:
            try:
                await self.tell_untold(grace)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("looking for requesters still owed a message failed; continuing")
            grace = self._config.sweep_grace
            await asyncio.sleep(self._config.sweep_interval)

    async def tell_untold(self, grace: float) -> int:
        """Send the final message of every request that is owed one; returns how many were sent."""
        told = 0
        for job in await self._store.untold(
            older_than=self._clock() - grace, max_notice_attempts=self._config.notice_rounds
        ):
            if job.id in self._finishing:
                continue
            log.info("telling the requester of %s (%s) what became of it", job.reference, job.state,
                     extra=job_fields(job))
            told += await self._finalize(job, FINAL_NOTICE[job.state], via_interaction=True)
        return told

    async def _cycle(self) -> None:
        now = self._clock()
        if self._paused_until > now:
            await self._sleep(self._paused_until - now)
            return
        # Taken before the read: the row of any job not being polled right now is read up to date.
        busy = set(self._polling)
        due = await self._store.due_jobs(now, limit=self._config.max_concurrency * 4)
        if not due:
            next_at = await self._store.next_poll_at()
            if next_at is None:
                delay = self._config.idle_wake
            else:
                window = self._config.poll_interval * self._config.claim_window
                delay = min(self._config.idle_wake, next_at - now + window)
            await self._sleep(delay)
            return
        # Claim each slot before polling, so a job is never polled twice per interval. A job whose last
        # poll is still out (a slow answer, a long wait for a free slot) only has its slot moved on:
        # it is never polled twice at once.
        slots = {job.id: self._next_slot(now) for job in due}
        await self._store.schedule_polls(slots)
        for job in due:
            if job.id in busy:
                continue
            await self._slots.acquire()
            self._polling.add(job.id)
            self._background.spawn(self._poll_in_slot(job, slots[job.id]), f"poll-{job.id}")

    async def _sleep(self, seconds: float) -> None:
        self._wakeup.clear()
        if seconds <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout=seconds)

    def _next_slot(self, now: float) -> float:
        return now + self._config.poll_interval * (1 + random.uniform(0, self._config.jitter))

    # -- polling -------------------------------------------------------------------------------

    async def _poll_in_slot(self, job: Job, claimed: float) -> None:
        try:
            await self.poll(job, claimed=claimed)
        finally:
            self._polling.discard(job.id)
            self._slots.release()

    async def poll(self, job: Job, *, claimed: float | None = None) -> None:
        """One status request for one job, and whatever it leads to.

        `claimed` is the next slot already recorded for the job when this poll was planned.
        """
        assert job.service_job_id is not None
        if self._paused_until > self._clock():
            await self._store.update(job.id, next_poll_at=self._paused_until)
            return
        try:
            remote = await self._client.get_job(job.service_job_id, retry=False)
        except RateLimited as exc:
            # The limit is platform-wide: every poll waits, not just this one.
            pause = exc.retry_after if exc.retry_after is not None else self._config.rate_limit_backoff
            now = self._clock()
            self._paused_until = max(self._paused_until, now + pause)
            await self._store.update(job.id, next_poll_at=max(self._paused_until, self._next_slot(now)))
            log.warning("status polling paused for %.1f s after a 429", pause)
            return
        except (ServerError, ServiceUnreachable, ProtocolError, Rejected) as exc:
            # Free to retry at the next slot. The job stays as it is.
            log.warning("polling %s (%s) failed: %s", job.reference, job.service_job_id, exc, extra=job_fields(job))
            await self._store.update(job.id, last_error=str(exc), next_poll_at=self._next_slot(self._clock()))
            await self._check_age(job)
            return

        # The request may have waited for a free slot or for the pacer after its next slot was claimed.
        # If that slot is now less than an interval away, the interval runs from the answer instead.
        if remote.ignored_paths and job.id not in self._told_paths:
            self._told_paths.add(job.id)
            log.warning("%s (%s): not following the paths the service sent: %s", job.reference,
                        job.service_job_id, ", ".join(remote.ignored_paths), extra=job_fields(job))
        answered = self._clock()
        later: dict[str, float] = {}
        if claimed is None or claimed - answered < self._config.poll_interval:
            later["next_poll_at"] = self._next_slot(answered)
        if remote.status == "completed":
            job = await self._store.transition(job.id, S.COMPLETED, finished_at=self._clock())
            await self._show_progress(job)
            self._spawn_finish(job)
        elif remote.status == "failed":
            job = await self._store.transition(
                job.id, S.FAILED, finished_at=self._clock(), last_error="the job failed at the video service"
            )
            log.warning("job %s (%s) failed at the service", job.reference, job.service_job_id, extra=job_fields(job))
            await self._finalize(job, "failed")
            await self._show_progress(job)
        else:
            if remote.status == "in_progress" and job.state == S.PENDING:
                job = await self._store.transition(job.id, S.IN_PROGRESS, **later)
                await self._show_progress(job)
            elif later:
                await self._store.update(job.id, **later)
            await self._check_age(job)

    async def _check_age(self, job: Job) -> None:
        age = self._clock() - (job.accepted_at or job.created_at)
        if age >= self._config.give_up_after:
            job = await self._store.transition(job.id, S.STALLED, last_error="no result after the time limit")
            log.warning("job %s (%s) stalled", job.reference, job.service_job_id, extra=job_fields(job))
            await self._finalize(job, "stalled")
            await self._show_progress(job)
        elif age >= self._config.slow_after and not job.slow_notice_sent:
            await self._store.update(job.id, slow_notice_sent=1)
            await self._announce(job, "slow")

    # -- download and delivery -----------------------------------------------------------------

    def _spawn_finish(self, job: Job) -> None:
        if job.id in self._finishing:
            return
        self._finishing.add(job.id)
        self._background.spawn(self._finish(job), f"finish-{job.id}")

    async def _finish(self, job: Job) -> None:
        """Download, then post; each step retried within its policy, the count kept on the job."""
        try:
            while job.state in (S.COMPLETED, S.DOWNLOADED):
                downloading = job.state == S.COMPLETED
                try:
                    job = await (self._download(job) if downloading else self._deliver(job))
                except InsufficientStorage as exc:
                    job = await self._wait_for_storage(job, exc)
                except (asyncio.CancelledError, StoreUnavailable):
                    raise
                except Exception as exc:
                    job = await self._step_failed(job, exc, downloading=downloading)
        except StoreUnavailable:
            # The job stays where the database last has it; resume() picks it up after a restart.
            log.exception("%s: the database failed while finishing it", job.reference, extra=job_fields(job))
        finally:
            self._finishing.discard(job.id)

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
            expected = isinstance(exc, (VideoServiceError, discord.HTTPException))
            log.warning("%s of %s failed (attempt %d of %d): %s; retrying in %.0f s", what, job.reference, attempts,
                        policy.attempts, reason, delay, exc_info=None if expected else exc, extra=job_fields(job))
            job = await self._store.update(job.id, step_attempts=attempts, step_failing_since=since,
                                           last_error=f"{what} failed: {reason}")
            await asyncio.sleep(delay)
            return job
        log.error("%s of %s failed %d times over %.0f s; giving up: %s", what, job.reference, attempts, now - since,
                  reason, extra=job_fields(job))
        if downloading:
            job = await self._store.transition(
                job.id, S.FAILED, step_attempts=attempts, last_error=f"the video could not be downloaded: {reason}"
            )
            await self._finalize(job, "failed")
        else:
            job = await self._store.transition(
                job.id, S.UNDELIVERABLE, step_attempts=attempts, last_error=f"the video could not be posted: {reason}"
            )
            await self._finalize(job, "undeliverable")
        await self._show_progress(job)
        return job

    async def _wait_for_storage(self, job: Job, exc: InsufficientStorage) -> Job:
        """No room for the video: wait (it is safe at the service for now), say so, and stop in time."""
        waited = self._clock() - (job.finished_at or job.updated_at)
        if waited >= self._config.storage_wait_limit:
            log.error("%s: still no disk space for the video after %.0f s; giving up (%s)", job.reference, waited, exc,
                      extra=job_fields(job))
            job = await self._store.transition(
                job.id, S.FAILED, last_error="the bot had no disk space to keep the video in time"
            )
            await self._finalize(job, "failed")
            await self._show_progress(job)
            return job
        log.warning("%s: no disk space for the video (%s); waiting %.0f s (waited %.0f s so far)", job.reference,
                    exc, self._config.storage_retry_seconds, waited, extra=job_fields(job))
        if waited >= self._config.storage_notice_after and not job.waiting_notice_sent:
            job = await self._store.update(job.id, waiting_notice_sent=1)
            await self._announce(job, "storage_wait")
        await asyncio.sleep(self._config.storage_retry_seconds)
        return await self._store.get(job.id)

    async def _download(self, job: Job) -> Job:
        assert job.service_job_id is not None
        destination = self._config.storage_dir / f"{job.id}.mp4"
        size = await self._client.download(job.service_job_id, destination, max_bytes=self._config.max_download_bytes)
        log.info("downloaded %s (%d bytes)", job.reference, size, extra=job_fields(job))
        job = await self._store.transition(
            job.id, S.DOWNLOADED, file_path=str(destination), step_attempts=0, step_failing_since=None
        )
        await self._show_progress(job)
        return job

    async def _deliver(self, job: Job) -> Job:
        assert job.file_path is not None
        video = Path(job.file_path)
        try:
            delivery = await self._deliverer.deliver(job, video)
        except Undeliverable as exc:
            log.warning("%s could not be delivered: %s; the file stays at %s", job.reference, exc, video,
                        extra=job_fields(job))
            job = await self._store.transition(job.id, S.UNDELIVERABLE, last_error=str(exc))
            await self._finalize(job, "undeliverable")
            await self._show_progress(job)
            return job
        job = await self._store.transition(
            job.id, S.DELIVERED, delivered_channel_id=delivery.channel_id, delivered_message_id=delivery.message_id,
            told_at=self._clock(), step_attempts=0, step_failing_since=None,
        )
        log.info("delivered %s as message %d", job.reference, delivery.message_id, extra=job_fields(job))
        if not self._config.keep_delivered_videos and not delivery.compressed:
            # A compressed copy was posted: the original stays for the operator.
            video.unlink(missing_ok=True)
        await self._show_progress(job)
        return job

    # -- side messages (best effort: they never block a job) -----------------------------------

    def tell(self, job: Job, event: Notice) -> None:
        """Announce `event` to the requester in the background."""
        self._background.spawn(self._tell(job, event), f"tell-{job.id}")

    async def _tell(self, job: Job, event: Notice) -> None:
        await self._announce(job, event)

    async def _finalize(self, job: Job, event: Notice, *, via_interaction: bool = False) -> int:
        """Send a request's final message and record that it was sent; 1 if it was, else 0."""
        if not await self._announce(job, event, via_interaction=via_interaction):
            await self._store.update(job.id, notice_attempts=job.notice_attempts + 1)
            if job.notice_attempts + 1 >= self._config.notice_rounds:
                log.error("gave up telling the requester of %s about %s after %d rounds", job.reference, event,
                          job.notice_attempts + 1, extra=job_fields(job))
            return 0
        await self._store.mark_told(job.id)
        return 1

    async def _announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> bool:
        """Tell the requester, retrying within the notice policy; False if it could not be done."""
        try:
            await retrying(
                self._config.notice_retry,
                lambda: self._deliverer.announce(job, event, via_interaction=via_interaction),
                retry_on=(discord.HTTPException, aiohttp.ClientError, OSError),
                what=f"telling the requester of {job.reference} about {event}",
            )
        except Undeliverable as exc:
            # The channel and the DMs both refused (DMs closed is Discord's 50007): expected, one line.
            log.warning("could not tell the requester of %s about %s: %s", job.reference, event, exc,
                        extra=job_fields(job))
            return False
        except Exception:
            log.exception("could not tell the requester of %s about %s", job.reference, event, extra=job_fields(job))
            return False
        return True

    async def _show_progress(self, job: Job) -> None:
        if not job.token_alive(self._clock()):
            return
        try:
            await self._deliverer.show_progress(job)
        except Exception:
            log.exception("could not update the reply of %s", job.reference, extra=job_fields(job))

