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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.errors import (
    BotError,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
)
from bot.store import Job, JobState, JobStore
from bot.video_client import VideoServiceClient

log = logging.getLogger(__name__)

S = JobState


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

    async def announce(self, job: Job, event: str) -> None:
        """Tell the requester about `failed`, `slow`, `stalled`, `undeliverable` or `unknown`."""
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
    slow_after: float = 30 * 60
    give_up_after: float = 6 * 3600
    rate_limit_backoff: float = 10.0  # pause when a 429 carries no Retry-After
    retry_delays: tuple[float, ...] = (2.0, 5.0, 15.0, 30.0, 60.0)  # downloads and uploads
    # A download the service keeps refusing (404/410: the video expired) will not come back.
    download_refusals_before_failing: int = 5
    idle_wake: float = 30.0  # the loop wakes at least this often, so the heartbeat stays fresh


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
        self._tasks: set[asyncio.Task[None]] = set()
        self._finishing: set[int] = set()
        self._polling: set[int] = set()
        self._download_refusals: dict[int, int] = {}

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._main is None or self._main.done():
            self._main = asyncio.create_task(self._run(), name="job-worker")

    @property
    def running(self) -> bool:
        return self._main is not None and not self._main.done()

    async def stop(self) -> None:
        tasks = [task for task in (self._main, *self._tasks) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._main = None
        self._tasks.clear()

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
            self._track(asyncio.create_task(self._poll_in_slot(job, slots[job.id]), name=f"poll-{job.id}"))

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
            log.warning("polling %s (%s) failed: %s", job.reference, job.service_job_id, exc)
            await self._store.update(job.id, last_error=str(exc), next_poll_at=self._next_slot(self._clock()))
            await self._check_age(job)
            return

        # The request may have waited for a free slot or for the pacer after its next slot was claimed.
        # If that slot is now less than an interval away, the interval runs from the answer instead.
        answered = self._clock()
        later: dict[str, float] = {}
        if claimed is None or claimed - answered < self._config.poll_interval:
            later["next_poll_at"] = self._next_slot(answered)
        if remote.status == "completed":
            job = await self._store.transition(job.id, S.COMPLETED, finished_at=self._clock())
            await self._show_progress(job)
            self._spawn_finish(job)
        elif remote.status == "failed":
            job = await self._store.transition(job.id, S.FAILED, finished_at=self._clock())
            log.warning("job %s (%s) failed at the service", job.reference, job.service_job_id)
            await self._announce(job, "failed")
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
            log.warning("job %s (%s) stalled", job.reference, job.service_job_id)
            await self._announce(job, "stalled")
            await self._show_progress(job)
        elif age >= self._config.slow_after and not job.slow_notice_sent:
            await self._store.update(job.id, slow_notice_sent=1)
            await self._announce(job, "slow")

    # -- download and delivery -----------------------------------------------------------------

    def _spawn_finish(self, job: Job, content_path: str | None = None) -> None:
        if job.id in self._finishing:
            return
        self._finishing.add(job.id)
        self._track(asyncio.create_task(self._finish(job, content_path), name=f"finish-{job.id}"))

    async def _finish(self, job: Job, content_path: str | None) -> None:
        try:
            if job.state == S.COMPLETED:
                job = await self._retrying(job, "download", lambda: self._download(job, content_path))
            if job.state == S.DOWNLOADED:
                job = await self._retrying(job, "delivery", lambda: self._deliver(job))
        finally:
            self._finishing.discard(job.id)

    async def _retrying(self, job: Job, what: str, step: Callable[[], Awaitable[Job]]) -> Job:
        """Run a free, repeatable step until it succeeds; the delays are capped, the attempts are not."""
        attempt = 0
        while True:
            try:
                return await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                delay = self._config.retry_delays[min(attempt, len(self._config.retry_delays) - 1)]
                log.exception("%s of %s failed; retrying in %.0f s", what, job.reference, delay)
                attempt += 1
                await asyncio.sleep(delay)

    async def _download(self, job: Job, content_path: str | None) -> Job:
        assert job.service_job_id is not None
        destination = self._config.storage_dir / f"{job.id}.mp4"
        try:
            size = await self._client.download(job.service_job_id, destination, max_bytes=100 * 1024 * 1024)
        except Rejected as exc:
            refusals = self._download_refusals[job.id] = self._download_refusals.get(job.id, 0) + 1
            if refusals < self._config.download_refusals_before_failing:
                raise
            # Paid for but gone: the requester gets the job id for support, as for a failed job.
            self._download_refusals.pop(job.id, None)
            job = await self._store.transition(
                job.id, S.FAILED, last_error=f"the service no longer gives the video: {exc}"
            )
            log.error("%s (%s): download refused %d times; marked failed", job.reference, job.service_job_id,
                      refusals)
            await self._announce(job, "failed")
            await self._show_progress(job)
            return job
        self._download_refusals.pop(job.id, None)
        log.info("downloaded %s (%d bytes)", job.reference, size)
        job = await self._store.transition(job.id, S.DOWNLOADED, file_path=str(destination))
        await self._show_progress(job)
        return job

    async def _deliver(self, job: Job) -> Job:
        assert job.file_path is not None
        video = Path(job.file_path)
        try:
            delivery = await self._deliverer.deliver(job, video)
        except Undeliverable as exc:
            log.warning("%s could not be delivered: %s; the file stays at %s", job.reference, exc, video)
            job = await self._store.transition(job.id, S.UNDELIVERABLE, last_error=str(exc))
            await self._announce(job, "undeliverable")
            await self._show_progress(job)
            return job
        job = await self._store.transition(
            job.id, S.DELIVERED, delivered_channel_id=delivery.channel_id, delivered_message_id=delivery.message_id
        )
        log.info("delivered %s as message %d", job.reference, delivery.message_id)
        if not self._config.keep_delivered_videos and not delivery.compressed:
            # A compressed copy was posted: the original stays for the operator.
            video.unlink(missing_ok=True)
        await self._show_progress(job)
        return job

    # -- side messages (best effort: they never block a job) -----------------------------------

    def tell(self, job: Job, event: str) -> None:
        """Announce `event` to the requester in the background."""
        self._track(asyncio.create_task(self._announce(job, event), name=f"tell-{job.id}"))

    async def _announce(self, job: Job, event: str) -> None:
        try:
            await self._deliverer.announce(job, event)
        except Exception:
            log.exception("could not tell the requester of %s about %s", job.reference, event)

    async def _show_progress(self, job: Job) -> None:
        if not job.token_alive(self._clock()):
            return
        try:
            await self._deliverer.show_progress(job)
        except Exception:
            log.exception("could not update the reply of %s", job.reference)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("worker task %s failed", task.get_name(), exc_info=task.exception())
