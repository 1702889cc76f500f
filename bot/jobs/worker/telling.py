"""What the requester hears: the final message each request is owed (sent once, recorded, within the notice
policy), news along the way, and the receipt's refresh while its interaction lives."""

from __future__ import annotations

from bot.core.lifecycle import JobState
from bot.core.log_context import job_fields
from bot.core.notices import Notice
from bot.core.retry import retrying
from bot.jobs.port import DiscordUnavailable, Undeliverable
from bot.jobs.worker.base import WorkerBase, log
from bot.store.jobs import Job, LeaseLost, StoreUnavailable

S = JobState


#: The final message each state is owed (a delivered video is its own).
FINAL_NOTICE: dict[JobState, Notice] = {
    S.FAILED: "failed",
    S.STALLED: "stalled",
    S.UNDELIVERABLE: "undeliverable",
    S.UNKNOWN: "unknown",
    S.INTERRUPTED: "interrupted",
    S.REJECTED: "rejected",
}


class Telling(WorkerBase):
    """What the requester hears."""

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
