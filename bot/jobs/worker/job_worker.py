"""The worker as one object: its parts together, its life cycle, and the resume after a restart."""

from __future__ import annotations

import asyncio

from bot.core.lifecycle import FINISHING_STATES, POLLED_STATES
from bot.jobs.worker.base import log
from bot.jobs.worker.delivery import Delivering
from bot.jobs.worker.download import Downloading
from bot.jobs.worker.finishing import Finishing
from bot.jobs.worker.leases import LeaseKeeping
from bot.jobs.worker.polling import Polling
from bot.jobs.worker.telling import Telling
from bot.store.jobs import Job, StoreUnavailable


class JobWorker(LeaseKeeping, Polling, Finishing, Downloading, Delivering, Telling):
    """Polls accepted jobs, downloads finished videos at once and delivers them (the package's docstring)."""

    def start(self) -> None:
        if self._main is None or self._main.done():
            self._main = asyncio.create_task(self._run(), name="job-worker")
            self._background.spawn(self._sweep_loop(), "final-messages")
        self.start_leases()

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
