"""The worker's polls: due polls handed out in priority order as slots and the pacer allow, each job's status
request and what its answer leads to, the pause a 429 asks for, and the give-up of jobs that take too long."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import math
from collections.abc import Callable

from bot.core.errors import ProtocolError, RateLimited, Rejected, ServerError, ServiceUnreachable
from bot.core.host import check_hint
from bot.core.lifecycle import JobState
from bot.core.log_context import job_fields
from bot.jobs.schedule import Plan
from bot.jobs.worker.base import WorkerBase, log
from bot.store.jobs import LeaseLost

S = JobState


class Polling(WorkerBase):
    """The polls of accepted jobs."""

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
            log.warning("polling %s (%s) failed: %s%s", job.reference, job.service_job_id, exc, check_hint(exc),
                        extra=job_fields(job))
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
