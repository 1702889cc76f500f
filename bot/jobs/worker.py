"""The background worker: poll accepted jobs, download finished videos at once, deliver them.

The poll schedule (bot/jobs/schedule.py) is a heap in memory, planned from the learned job durations
(bot/jobs/durations.py): a new job is first polled near the low end of its model's durations, then every
interval. The worker sleeps until the earliest poll (or until a job is accepted) and sends the due
polls with bounded concurrency, only when the pacer has a free turn, in priority order: polls of
jobs in (or past) their likely completion window before the rest, the longest waiting first
(downloads wait in the pacer itself, so they go first). The next poll of a job counts from the last
one's answer, so it never comes closer than the interval. Planned times reach the database in
batches, for a restart. Completed jobs are downloaded and delivered in tasks of their own, so a slow
upload never holds up polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.core.errors import (
    InsufficientStorage,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    VideoServiceError,
)
from bot.core.lifecycle import FINISHING_STATES, POLLED_STATES, SLOW_AFTER_SECONDS, STALLED_AFTER_SECONDS
from bot.core.log_context import job_fields
from bot.core.notices import Notice
from bot.core.retry import (
    DATABASE_RETRY,
    DOWNLOAD_RETRY,
    NOTICE_RETRY,
    NOTICE_ROUNDS,
    UPLOAD_RETRY,
    RetryPolicy,
    retrying,
)
from bot.core.tasks import LAST_WRITE_SECONDS, BackgroundTasks, finish_despite_cancels
from bot.jobs.durations import DurationModel
from bot.jobs.port import Deliverer, Delivery, DiscordUnavailable, Undeliverable
from bot.jobs.schedule import Plan, PollSchedule
from bot.service.client import VideoServiceClient, remove_abandoned_downloads
from bot.service.pacing import Pacer
from bot.store.jobs import Job, JobState, JobStore, LeaseLost, StoreUnavailable
from bot.store.leases import CLAIM_BATCH, Lease

log = logging.getLogger(__name__)

S = JobState


def _log_failure(task: asyncio.Future[Job]) -> None:
    """A write let go at a stop: its end is nobody's to await any more, but a failure is still logged."""
    if not task.cancelled() and (failure := task.exception()) is not None:
        log.warning("a write let go at the stop failed: %s", failure)


def _on_disk(job: Job) -> bool:
    return job.file_path is not None and Path(job.file_path).is_file()


def _reason(exc: BaseException) -> str:
    """A short, key-free description of a failure for the job's record and the log."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class PostUnrecorded(Exception):
    """A video was posted, and the database did not take its record within DATABASE_RETRY: the job stays
    `downloaded`, and the next start posts it again (Discord's nonce merges a repeat within minutes)."""

    def __init__(self, job: Job, delivery: Delivery, cause: StoreUnavailable) -> None:
        super().__init__(f"{job.reference} was posted as message {delivery.message_id}, but the database did not "
                         f"take its record: {cause}")


@dataclass(frozen=True)
class WorkerConfig:
    storage_dir: Path
    poll_interval: float = 20.0
    max_concurrency: int = 8
    keep_delivered_videos: bool = False
    # Planned poll times reach the database in one batch this often (a restart resumes from them).
    flush_interval: float = 5.0
    slow_after: float = SLOW_AFTER_SECONDS
    give_up_after: float = STALLED_AFTER_SECONDS
    rate_limit_backoff: float = 10.0  # pause when a 429 carries no Retry-After
    max_rate_limit_pause: float = 300.0  # the longest pause a 429's Retry-After may ask of the polls
    database_retry: RetryPolicy = DATABASE_RETRY  # a completed job's step whose record the database failed
    abandoned_download_after: float = 3600.0  # a partial download not written this long was left by a kill
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
    claim_batch: int = CLAIM_BATCH  # jobs taken over from dead processes per claim, at most


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
        durations: DurationModel | None = None,
        pacer: Pacer | None = None,
        lease: Lease | None = None,
    ) -> None:
        """`durations`: the shared model of job durations; `pacer`: the client's, so polls wait their turn here.

        `lease`: this process's identity when several may share the database: the worker then touches only
        jobs whose lease it holds, renews them, claims those of dead processes, and paces at its share of
        the key's rate. Without one it is the database's only worker (and touches every job).
        """
        self._store = store
        self._client = client
        self._deliverer = deliverer
        self._config = config
        self._clock = clock
        self._on_cycle = on_cycle
        self._wakeup = asyncio.Event()
        self.durations = durations if durations is not None else DurationModel.for_interval(config.poll_interval)
        self._schedule = PollSchedule(self.durations, config.poll_interval)
        self._pacer = pacer
        self._ready: list[tuple[float, int, Plan]] = []  # due polls waiting for a slot or the pacer
        self._in_flight = 0
        self._rescan = True
        self._flushed_at = -math.inf
        self._paused_until = 0.0
        self._main: asyncio.Task[None] | None = None
        self._background = BackgroundTasks(log)
        self._leases_running = False
        self._finishing: set[int] = set()
        self._polling: set[int] = set()
        self._told_paths: set[int] = set()  # jobs whose ignored service paths were logged already
        self._telling: set[int] = set()  # final messages being sent right now (the sweep and a claim meet here)
        self._told_unrecorded: set[int] = set()  # final messages sent whose record the database failed
        self._lease = lease
        self._owner = lease.owner if lease is not None else None
        self._held: set[int] = set()  # the jobs whose lease this process holds, as of the last renewal
        self._held_until = -math.inf  # the last renewal vouches for them until then
        self._renewing = asyncio.Lock()

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._main is None or self._main.done():
            self._main = asyncio.create_task(self._run(), name="job-worker")
            self._background.spawn(self._sweep_loop(), "final-messages")
        self.start_leases()

    def start_leases(self) -> None:
        """Renew this process's leases from now on (before the worker starts: requests are written, and sent,
        holding them as soon as commands run, which can be long before every shard is ready)."""
        if self._lease is not None and not self._leases_running:
            self._leases_running = True
            self._background.spawn(self._lease_loop(), "leases")

    @property
    def running(self) -> bool:
        return self._main is not None and not self._main.done()

    async def stop(self) -> None:
        if self._main is not None:
            self._main.cancel()
            await asyncio.gather(self._main, return_exceptions=True)
        self._main = None
        await self._background.cancel_all()
        self._leases_running = False
        try:
            await self._flush(self._clock(), force=True)
        except Exception:
            log.exception("could not record the poll schedule while stopping; polls resume from the last one")

    async def release_leases(self) -> None:
        """A clean stop, after `stop`: every job goes back at once, so a live process takes it without waiting."""
        if self._lease is None:
            return
        try:
            released = await self._store.release_leases(self._lease.owner)
        except Exception:
            log.exception("could not release this process's leases; they expire in %.0f s", self._lease.seconds)
            return
        self._held.clear()
        self._held_until = -math.inf
        log.info("released the leases of %d jobs", released)

    def wake(self, job: Job | None = None) -> None:
        """A job was accepted (plan its first poll from its model's durations), or look for new ones."""
        if job is not None and self._lease is not None:
            if job.lease_owner != self._owner:
                return  # written by another process (or taken over meanwhile): not ours to poll
            self._held.add(job.id)
        if job is not None and job.state in POLLED_STATES and job.id not in self._schedule:
            self._schedule.add(job)
        elif job is None:
            self._rescan = True
        self._wakeup.set()

    # -- main loop -----------------------------------------------------------------------------

    async def _run(self) -> None:
        resumed = False
        while True:
            try:
                if not resumed:  # inside the guard: a database hiccup at start-up must not end the worker
                    await self.resume()
                    resumed = True
                self._on_cycle()
                await self._cycle()
            except asyncio.CancelledError:
                raise
            except Exception:
                # One bad job or a database hiccup must not stop the worker.
                log.exception("worker cycle failed; continuing")
                await asyncio.sleep(1.0)

    async def resume(self) -> None:
        """After a restart: finish what was downloaded or completed; pending jobs are polled as they fall due.

        Leased: only the jobs this process holds (the start-up takeover's, or claimed now from dead processes).
        """
        await self.durations.load(self._store)
        if self._lease is not None:
            try:
                await self.keep_leases()
            except StoreUnavailable as exc:
                # Its leases are renewed before a job is touched, and claims come again every round.
                log.warning("could not renew or claim leases at start-up (%s); trying again shortly", exc)
        for job in await self._store.jobs_in_states(FINISHING_STATES, owner=self._owner):
            self._mark_held(job)
            self._spawn_finish(job)
        unfinished = await self._store.jobs_in_states(POLLED_STATES, owner=self._owner)
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
            try:
                await self._remove_abandoned_downloads()
            except Exception:
                log.exception("could not look for abandoned partial downloads; continuing")
            grace = self._config.sweep_grace
            await asyncio.sleep(self._config.sweep_interval)

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

    async def tell_untold(self, grace: float) -> int:
        """Send the final message of every request that is owed one (leased: of this process's jobs);
        returns how many were sent."""
        return await self._tell_owed(await self._store.untold(
            older_than=self._clock() - grace, max_notice_attempts=self._config.notice_rounds, owner=self._owner
        ))

    async def _tell_owed(self, jobs: list[Job]) -> int:
        told = 0
        for job in jobs:
            event = FINAL_NOTICE.get(job.state)
            if event is None or job.id in self._finishing or job.id in self._telling:
                continue
            self._mark_held(job)
            self._telling.add(job.id)
            try:
                log.info("telling the requester of %s (%s) what became of it", job.reference, job.state,
                         extra=job_fields(job))
                told += await self._finalize(job, event, via_interaction=True)
            except StoreUnavailable as exc:
                # One unrecorded message must not hold up the others' (nor be sent again: _finalize remembers).
                log.warning("%s: could not record its final message (%s); the next sweep tries again",
                            job.reference, exc, extra=job_fields(job))
            finally:
                self._telling.discard(job.id)
        return told

    # -- leases (several processes on one database) ----------------------------------------------

    async def _lease_loop(self) -> None:
        """Renew this process's leases and claim those of dead processes, every third of a lease."""
        assert self._lease is not None
        loop = asyncio.get_running_loop()
        next_round = loop.time()
        while True:
            # At fixed times, not a round's length after the last one ended: rounds do not drift toward expiry.
            next_round += self._lease.renew_every
            await asyncio.sleep(max(0.0, next_round - loop.time()))
            await self.lease_round()

    async def lease_round(self) -> None:
        """One round of the lease loop; a failure is logged and the next round tries again."""
        assert self._lease is not None
        # After a skipped round this one waits its turn at the database: a third would come after the expiry.
        overdue = self._clock() + self._lease.renew_every > self._held_until
        try:
            await self._renew(force=True, wait=overdue)
        except StoreUnavailable as exc:
            # Routine on a busy shared database: this renewal is skipped, the claims still run.
            log.warning("could not renew the leases this round (%s); trying again in %.0f s",
                        exc, self._lease.renew_every)
        except Exception:
            log.exception("renewing the leases failed; trying again in %.0f s", self._lease.renew_every)
        try:
            await self._claim()
        except Exception:
            log.exception("claiming the jobs of stopped processes failed; trying again next round")

    async def keep_leases(self) -> None:
        """One round: renew (the heartbeat, the pacing share, the jobs lost dropped), then claim and recover the
        jobs nobody holds any more, and adopt them."""
        await self._renew(force=True)
        await self._claim()

    async def _renew(self, *, force: bool = False, wait: bool = False) -> None:
        assert self._lease is not None
        async with self._renewing:
            started = self._clock()
            if not force and started < self._held_until:
                return  # renewed by another caller while this one waited
            before = set(self._held)
            renewal = await self._store.renew_leases(self._lease, wait=wait)
            # Jobs added while the renewal ran (accepted just now) stay; the ones gone were taken or told.
            self._held = (self._held - before) | renewal.held
            # Vouched for until one renewal before expiry: a process that stalls stops before another takes over.
            self._held_until = started + self._lease.seconds - self._lease.renew_every
            if self._pacer is not None:
                rate = self._pacer.share(renewal.live_processes)
                log.debug("%d live processes; pacing at %.2f requests/s", renewal.live_processes, rate)
        self._drop_lost()

    def _drop_lost(self) -> None:
        """Forget the planned polls of jobs another process took (after this one's lease expired)."""
        for job_id in [job_id for job_id in self._schedule if job_id not in self._held]:
            log.warning("job #%d: another process holds it now; no longer polling it", job_id)
            self._schedule.drop(job_id)

    async def _claim(self) -> None:
        assert self._lease is not None
        jobs, recovered = await self._store.claim_jobs(
            self._lease, limit=self._config.claim_batch, max_notice_attempts=self._config.notice_rounds
        )
        for job in recovered:
            log.warning("request %s was cut off when the process holding it stopped: %s, not resent",
                        job.reference, job.state, extra=job_fields(job))
        if not jobs:
            return
        log.info("took over %d jobs whose process stopped", len(jobs))
        self._held.update(job.id for job in jobs)
        owed: list[Job] = []
        for job in jobs:
            if job.state in POLLED_STATES:
                if job.id not in self._schedule and job.id not in self._polling:
                    self._schedule.add(job, job.next_poll_at if job.next_poll_at is not None else self._clock())
            elif job.state in FINISHING_STATES:
                self._spawn_finish(job)
            elif job.told_at is None:
                owed.append(job)
        if owed:
            # Told now, not at the next sweep: their requesters have waited a lease already.
            self._background.spawn(self._tell_taken_over(owed), "tell-taken-over")
        self._wakeup.set()

    async def _tell_taken_over(self, jobs: list[Job]) -> None:
        """`_tell_owed` as a background task (which returns nothing)."""
        await self._tell_owed(jobs)

    def _mark_held(self, job: Job) -> None:
        """A job read as this process's (by owner): held, as of that read."""
        if self._lease is not None and job.lease_owner == self._owner:
            self._held.add(job.id)

    async def _holds(self, job_id: int) -> bool:
        """Whether this process may touch the job now: always without a lease; leased, while it holds the job's
        lease, renewed first if the last renewal is too old to vouch for it (after a stall, say)."""
        if self._lease is None:
            return True
        if self._clock() >= self._held_until:
            try:
                await self._renew(wait=True)  # a job waits on it: the usual wait, not the periodic round's skip
            except StoreUnavailable:
                log.warning("could not renew the leases; leaving job #%d alone for now", job_id)
                return False
            if self._clock() >= self._held_until:
                return False
        return job_id in self._held

    async def _transition(self, job_id: int, target: JobState, **changes: object) -> Job:
        """A state change of a job this worker works on: refused (LeaseLost) once another process holds it."""
        return await self._store.transition(job_id, target, owner=self._owner, **changes)

    async def _update(self, job_id: int, **changes: object) -> Job:
        return await self._store.update(job_id, owner=self._owner, **changes)

    async def _cycle(self) -> None:
        # Cleared before the work, never in the sleep: a poll that ends meanwhile must wake the next sleep.
        self._wakeup.clear()
        now = self._clock()
        if self._rescan:
            self._rescan = False
            await self._adopt_unplanned()
        await self._flush(now)
        if self._paused_until > now:
            await self._sleep(self._paused_until - now)
            return
        for due, plan in self._schedule.pop_due(now):
            # Earliest first by the moment each poll became worth sending (its due time, or its likely window's
            # opening if later): jobs in or past their window before the rest, and none waits for ever.
            heapq.heappush(self._ready, (self._schedule.worth_from(plan, due), plan.job.id, plan))
        # Dispatch only when a slot is free and the pacer would let a request leave now: what waits
        # stays here in priority order, and downloads (which wait in the pacer itself) go first.
        while self._ready and self._in_flight < self._config.max_concurrency:
            wait = self._pacer.ready_in() if self._pacer is not None else 0.0
            if wait > 0:
                await self._sleep(wait)
                return
            _, job_id, plan = heapq.heappop(self._ready)
            self._schedule.sending(plan, self._clock())
            self._in_flight += 1
            self._background.spawn(self._poll_in_slot(plan), f"poll-{job_id}")
        if self._ready:
            await self._sleep(self._config.idle_wake)  # a finished poll wakes the loop
            return
        next_at = self._schedule.next_due()
        delay = self._config.idle_wake if next_at is None else min(self._config.idle_wake, next_at - now)
        delay = min(delay, max(0.0, self._flushed_at + self._config.flush_interval - now))
        await self._sleep(delay)

    async def _adopt_unplanned(self) -> None:
        """Jobs to poll that the schedule does not know yet (recorded by another path, or before a restart)."""
        for job in await self._store.polled_jobs(owner=self._owner):
            self._mark_held(job)
            if job.id not in self._schedule and job.id not in self._polling:
                self._schedule.add(job, job.next_poll_at if job.next_poll_at is not None else self._clock())

    async def _flush(self, now: float, *, force: bool = False) -> None:
        """Write the planned poll times (and what the durations model learned) in one batch."""
        if not force and now < self._flushed_at + self._config.flush_interval:
            return
        self._flushed_at = now
        changed = self._schedule.take_changed()
        if changed:
            await self._store.schedule_polls(changed, owner=self._owner)
        await self._schedule.durations.save(self._store)

    async def _sleep(self, seconds: float) -> None:
        if seconds <= 0:
            return
        # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation that meets the event being
        # set, and stop() then waited forever for a worker that went on running (seen once in CI).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wakeup.wait()

    # -- polling -------------------------------------------------------------------------------

    async def _poll_in_slot(self, plan: Plan) -> None:
        job_id = plan.job.id
        self._polling.add(job_id)
        released = False

        def release() -> None:
            # The slot bounds requests in flight: it is free once the answer is in, before the database work.
            nonlocal released
            if not released:
                released = True
                self._in_flight -= 1
                self._wakeup.set()

        try:
            await self.poll(plan, on_answer=release)
        except LeaseLost as exc:
            # Another process took the job while this one stalled: it is theirs now, and their poll.
            log.warning("%s; no longer polling it", exc)
            self._schedule.drop(job_id)
        except Exception:
            # Its outcome was not recorded (the database failed): poll again one interval on, never sooner.
            if job_id in self._schedule and plan.due == math.inf:
                self._schedule.retry(plan, self._clock() + self._config.poll_interval)
            raise
        finally:
            self._polling.discard(job_id)
            release()

    async def poll(self, plan: Plan, *, on_answer: Callable[[], None] = lambda: None) -> None:
        """One status request for one planned job, and whatever it leads to; `on_answer` once the reply is in."""
        job = plan.job
        assert job.service_job_id is not None
        if not await self._holds(job.id):
            if self._lease is not None and job.id not in self._held:
                log.warning("%s: another process holds it now; not polling it", job.reference, extra=job_fields(job))
                self._schedule.drop(job.id)
            else:
                self._schedule.retry(plan, self._clock() + self._config.poll_interval)
            return
        if self._paused_until > self._clock():
            self._schedule.retry(plan, self._paused_until)
            return
        try:
            try:
                remote = await self._client.get_job(job.service_job_id, retry=False)
            finally:
                on_answer()
        except RateLimited as exc:
            # The limit is platform-wide: every poll waits, not just this one.
            pause = exc.retry_after if exc.retry_after is not None else self._config.rate_limit_backoff
            # Bounded: a service asking for a day (or for ever) must not stop every poll and the give-up with it.
            pause = min(pause, self._config.max_rate_limit_pause)
            now = self._clock()
            self._paused_until = max(self._paused_until, now + pause)
            self._schedule.retry(plan, max(self._paused_until, now + self._config.poll_interval))
            log.warning("status polling paused for %.1f s after a 429", pause)
            await self._check_age(plan)
            return
        except (ServerError, ServiceUnreachable, ProtocolError, Rejected) as exc:
            # Free to retry at the next slot. The job stays as it is.
            log.warning("polling %s (%s) failed: %s", job.reference, job.service_job_id, exc, extra=job_fields(job))
            self._schedule.retry(plan, self._clock() + self._config.poll_interval)
            plan.job = job = await self._update(job.id, last_error=str(exc))
            await self._check_age(plan)
            return

        if remote.ignored_paths and job.id not in self._told_paths:
            self._told_paths.add(job.id)
            log.warning("%s (%s): not following the paths the service sent: %s", job.reference,
                        job.service_job_id, ", ".join(remote.ignored_paths), extra=job_fields(job))
        answered = self._clock()
        if remote.status == "completed":
            job = await self._transition(job.id, S.COMPLETED, finished_at=answered)
            self._schedule.finished(plan, answered, completed=True)
            await self._show_progress(job)
            self._spawn_finish(job)
        elif remote.status == "failed":
            job = await self._transition(
                job.id, S.FAILED, finished_at=answered, last_error="the job failed at the video service"
            )
            self._schedule.finished(plan, answered, completed=False)
            log.warning("job %s (%s) failed at the service", job.reference, job.service_job_id, extra=job_fields(job))
            await self._finalize(job, "failed")
            await self._show_progress(job)
        else:
            # The next slot counts from this answer: a request that waited never brings the next one closer.
            due = self._schedule.running(plan, answered)
            if remote.status == "in_progress" and job.state == S.PENDING:
                plan.job = job = await self._transition(job.id, S.IN_PROGRESS, next_poll_at=due)
                await self._show_progress(job)
            await self._check_age(plan)

    async def _check_age(self, plan: Plan) -> None:
        job = plan.job
        age = self._clock() - (job.accepted_at or job.created_at)
        if age >= self._config.give_up_after:
            job = await self._transition(job.id, S.STALLED, last_error="no result after the time limit")
            self._schedule.drop(job.id)
            log.warning("job %s (%s) stalled", job.reference, job.service_job_id, extra=job_fields(job))
            await self._finalize(job, "stalled")
            await self._show_progress(job)
        elif age >= self._config.slow_after and not job.slow_notice_sent:
            plan.job = job = await self._update(job.id, slow_notice_sent=1)
            await self._announce(job, "slow")

    # -- download and delivery -----------------------------------------------------------------

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
            log.warning("%s of %s failed (attempt %d of %d): %s; retrying in %.0f s", what, job.reference, attempts,
                        policy.attempts, reason, delay, exc_info=None if expected else exc, extra=job_fields(job))
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

    # -- side messages (best effort: they never block a job) -----------------------------------

    def tell(self, job: Job, event: Notice) -> None:
        """Announce `event` to the requester in the background."""
        self._background.spawn(self._tell(job, event), f"tell-{job.id}")

    async def _tell(self, job: Job, event: Notice) -> None:
        await self._announce(job, event)

    async def _finalize(self, job: Job, event: Notice, *, via_interaction: bool = False) -> int:
        """Send a request's final message and record that it was sent; 1 if it was, else 0.

        Leased: only while this process holds the job, so a process that lost it never tells twice.
        """
        if not await self._holds(job.id):
            log.info("not telling the requester of %s now: this process does not hold it", job.reference,
                     extra=job_fields(job))
            return 0
        try:
            if job.id not in self._told_unrecorded:
                if not await self._announce(job, event, via_interaction=via_interaction):
                    await self._update(job.id, notice_attempts=job.notice_attempts + 1)
                    if job.notice_attempts + 1 >= self._config.notice_rounds:
                        log.error("gave up telling the requester of %s about %s after %d rounds", job.reference,
                                  event, job.notice_attempts + 1, extra=job_fields(job))
                    return 0
                # Told: until the database records it, this process remembers, and never tells it again.
                self._told_unrecorded.add(job.id)
            await self._store.mark_told(job.id, owner=self._owner)
            self._told_unrecorded.discard(job.id)
        except LeaseLost as exc:
            self._told_unrecorded.discard(job.id)
            log.warning("%s; its final message is theirs to record", exc, extra=job_fields(job))
            return 0
        return 1

    async def _announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> bool:
        """Tell the requester, retrying within the notice policy; False if it could not be done."""
        try:
            await retrying(
                self._config.notice_retry,
                lambda: self._deliverer.announce(job, event, via_interaction=via_interaction),
                retry_on=(DiscordUnavailable, OSError),
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

