"""The worker's leases, when several processes share the database: renewed every third of a lease, the jobs of
stopped processes claimed and adopted, and whether this process may touch a job now."""

from __future__ import annotations

import asyncio
import math

from bot.core.lifecycle import FINISHING_STATES, POLLED_STATES
from bot.core.log_context import job_fields
from bot.jobs.worker.base import WorkerBase, log
from bot.store.jobs import Job, StoreUnavailable


class LeaseKeeping(WorkerBase):
    """This process's leases, kept."""

    def start_leases(self) -> None:
        """Renew this process's leases from now on (before the worker starts: requests are written, and sent,
        holding them as soon as commands run, which can be long before every shard is ready)."""
        if self._lease is not None and not self._leases_running:
            self._leases_running = True
            self._background.spawn(self._lease_loop(), "leases")

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
