"""A job's row written: a request written down (its guardrails in the same statement), its moves checked against
the lifecycle and audited, its updates, a pending create cancelled, old prompts erased."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from bot.core.lifecycle import DONE_WITH_STATES, REDONE_IF_LOST, JobState, sources_of
from bot.store.jobs.admission import ADMISSION_TRIES, _guardrails
from bot.store.jobs.base import StoreBase, _given, _held_by, _marks, _released_when_told
from bot.store.jobs.records import (
    Admission,
    IllegalTransition,
    Job,
    JobNotFound,
    LeaseLost,
    NewJob,
    _check_columns,
    _job,
)
from bot.store.leases import Lease
from bot.store.sqlite import Step, StoreUnavailable

S = JobState


#: The job events a server's log channel gets (ids, amounts and states only: never a prompt).
AUDITED_STATES: dict[JobState, str] = {S.PENDING: "accepted", S.FAILED: "failed", S.STALLED: "failed",
                                       S.UNKNOWN: "unknown"}


#: The columns such a move may set and still be redone: a move that also resets a retry count waits for the disk
#: (lost, the count would stay, and one more failed download after a power cut could end the job failed).
REDONE_COLUMNS = frozenset({"next_poll_at", "finished_at", "file_path"})


#: The note on a request given up as unknown whose 202 came late (`mark_accepted`): its requester is told it came.
ACCEPTED_LATE = "accepted late, after its outcome had been given up as unknown"
#: Why a request whose 202 could not be read failed (`mark_charged_unreadable`).
UNREADABLE_202 = "the service accepted (HTTP 202) and charged it, but its answer could not be read"


class Moves(StoreBase):
    """A job's writes."""

    async def add_submission(
        self, new: NewJob, admission: Admission | None = None, *, lease: Lease | None = None
    ) -> Job:
        """Write the request down in `received`, after the guardrails pass in the same transaction.

        `lease`: the creating process holds it from the first moment (in the same INSERT), so no other
        process can claim it while it is being sent.
        """
        for _ in range(ADMISSION_TRIES):
            job = await self._admit(new, admission, lease)
            if job is not None:
                return job
        raise StoreUnavailable("other requests kept changing what the guardrails count: try again")

    async def _admit(self, new: NewJob, admission: Admission | None, lease: Lease | None) -> Job | None:
        """The request written down, or AdmissionRefused; None if what refused it changed before it was read."""
        now = self._clock()
        guardrails = _guardrails(new, admission, now) if admission is not None else []
        values = (
            S.RECEIVED, new.model, new.prompt, new.seed, new.user_id, new.guild_id, new.channel_id,
            new.locale, new.upload_limit_bytes, new.interaction_token, new.interaction_expires_at, now, now,
            new.price_yen, lease.owner if lease else None, lease.expires(self._lease_now()) if lease else None,
        )
        # One statement, one trip: the row is written only where every guardrail lets it in (the rules are the
        # SQL conditions, checked in the write's own transaction), and RETURNING gives it back as written.
        where = " AND ".join(guardrail.allows for guardrail in guardrails) or "1 = 1"
        # Interned: a burst of requests waiting for their group commit shares one copy of its few kilobytes.
        results = await self._db.write_steps([Step(
            sys.intern(f"""INSERT INTO jobs (state, model, prompt, seed, user_id, guild_id, channel_id, locale,
                    upload_limit_bytes, interaction_token, interaction_expires_at, created_at, updated_at, price_yen,
                    lease_owner, lease_expires_at)
                SELECT {_marks(values)} WHERE {where} RETURNING *"""),
            (*values, *(value for guardrail in guardrails for value in guardrail.allows_params)),
            needs_row=True,
        )])
        if results is not None:
            return _job(results[0][0])
        # A guardrail said no: which one, and its figures for the message, read with the same conditions.
        row = await self._one(
            "SELECT " + ", ".join(f"{guardrail.allows}, {guardrail.figure}" for guardrail in guardrails),
            tuple(value for guardrail in guardrails for value in (*guardrail.allows_params, *guardrail.figure_params)),
        )
        assert row is not None
        for index, guardrail in enumerate(guardrails):
            if not row[2 * index]:
                raise guardrail.refusal(row[2 * index + 1])
        return None  # let in now: what refused it (a request ending meanwhile) changed since

    async def transition(self, job_id: int, target: JobState, *, owner: str | None = None, **changes: Any) -> Job:
        """Move a job to `target` if the table allows it, updating other columns in the same statement.

        `owner`: only while that process holds the job's lease (LeaseLost otherwise).
        """
        steps = self._move_steps(job_id, target, changes, owner=owner)
        durable = target not in REDONE_IF_LOST or not changes.keys() <= REDONE_COLUMNS
        results = await self._db.write_steps(steps, durable=durable) if steps else None
        if results is None:
            await self._refuse_move(job_id, target, owner)
        return _job(results[0][0])

    async def _move(
        self, job_id: int, target: JobState, changes: Mapping[str, Any], *, owner: str | None = None
    ) -> Job:
        """`transition` inside a write transaction already open (a decision that reads first)."""
        steps = self._move_steps(job_id, target, changes, owner=owner)
        rows = await self._db.fetch_all(steps[0].sql, steps[0].params) if steps else []
        if len(rows) != 1:
            await self._refuse_move(job_id, target, owner)
        for step in steps[1:]:
            await self._db.execute(step.sql, step.params)
        return _job(rows[0])

    def _move_steps(
        self, job_id: int, target: JobState, changes: Mapping[str, Any], *, owner: str | None = None,
        unless: tuple[str, Sequence[Any]] | None = None,
    ) -> list[Step]:
        """The one place a state changes, checked against TRANSITIONS: the UPDATE (RETURNING the row as moved, no
        second read after the commit), then the server's log event when the target is audited; none if no state
        leads to `target`. `unless`: a condition (and its parameters) that leaves the job as it is."""
        sources = sources_of(target)
        if not sources:
            return []  # no state leads to `received` (and PostgreSQL has no empty `IN ()`)
        assignments = _released_when_told({"state": target, "updated_at": self._clock(), **changes})
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        held, held_params = _held_by(owner)
        unless_sql, unless_params = (f" AND NOT {unless[0]}", tuple(unless[1])) if unless else ("", ())
        steps = [Step(
            f"UPDATE jobs SET {sets} WHERE id = ? AND state IN ({_marks(sources)}){held}{unless_sql} RETURNING *",
            (*assignments.values(), job_id, *sources, *held_params, *unless_params),
            needs_row=True,
        )]
        kind = AUDITED_STATES.get(target)
        if kind is not None:
            # In the same transaction as the move, so the server's log can neither miss it nor invent it.
            steps.append(Step(
                """INSERT INTO events (guild_id, kind, job_id, user_id, details, created_at)
                   SELECT guild_id, ?, id, user_id,
                          json_object('state', state, 'yen', charged_yen, 'model', model,
                                      'service_job_id', service_job_id), ?
                   FROM jobs WHERE id = ? AND guild_id IS NOT NULL""",
                (kind, self._clock(), job_id),
            ))
        return steps

    async def _refuse_move(self, job_id: int, target: JobState, owner: str | None) -> NoReturn:
        """Why a move changed nothing: another process holds the job, or the table does not allow it."""
        row = await self._one("SELECT state, lease_owner FROM jobs WHERE id = ?", (job_id,))
        if row is not None and owner is not None and row[1] != owner:
            raise LeaseLost(job_id, row[1])
        raise IllegalTransition(job_id, row[0] if row else None, target)

    async def mark_accepted(
        self, job_id: int, service_job_id: str, charged_yen: int, next_poll_at: float, *,
        owner: str | None = None, lease: Lease | None = None,
    ) -> Job:
        """Record the 202: the service's job id and the charge, in one transaction.

        If another request already holds that job id, the first keeps the job: this one ends failed,
        charged, with both references in its reason, so one file is never posted for two requests.
        Recording it again (a retry after a commit whose answer was lost) changes nothing. With `lease`, the
        process that got the 202 holds the job from here: also a late 202 on a request that another process,
        finding its lease expired, had ended `unknown`.
        """
        def accepted(now: float) -> dict[str, Any]:
            held = {"lease_owner": lease.owner, "lease_expires_at": lease.expires(self._lease_now())} if lease else {}
            return {"service_job_id": service_job_id, "charged_yen": charged_yen, "accepted_at": now,
                    "next_poll_at": next_poll_at, **held}

        # The usual case in one trip: a request being sent, and a job id no request holds yet. Anything else (a
        # late 202 on a request given up as unknown among them) is decided below.
        steps = self._move_steps(
            job_id, S.PENDING, accepted(self._clock()), owner=owner,
            unless=("(EXISTS (SELECT 1 FROM jobs WHERE service_job_id = ?) OR state = ?)", (service_job_id, S.UNKNOWN)),
        )
        results = await self._db.write_steps(steps)
        if results is not None:
            return _job(results[0][0])
        async with self._write():
            holder = await self._one("SELECT id FROM jobs WHERE service_job_id = ?", (service_job_id,))
            now = self._clock()
            if holder is not None and int(holder[0]) == job_id:
                return await self.get(job_id)  # recorded already: the first attempt's commit landed
            if holder is None:
                current = await self._one("SELECT state FROM jobs WHERE id = ?", (job_id,))
                # Its requester was (or is being) told its outcome is unknown: the mark says to tell them it came.
                late = {"last_error": ACCEPTED_LATE} if current is not None and current[0] == S.UNKNOWN else {}
                moved = await self._move(job_id, S.PENDING, accepted(now) | late, owner=owner)
            else:
                moved = await self._move(job_id, S.FAILED, {
                    "charged_yen": charged_yen, "accepted_at": now, "finished_at": now,
                    "last_error": f"the service gave job id {service_job_id}, which request #{holder[0]} already holds",
                }, owner=owner)
        return moved  # the row as moved (RETURNING): the event written after it does not change it

    async def mark_charged_unusable(self, job_id: int, charged_yen: int, shown_id: str, *, at: float | None = None
                                    ) -> Job:
        """A 202 whose job id cannot be used safely: charged, never polled, failed at once. `at`: when the 202
        came (now by default; a record retried later keeps the time its requester was told)."""
        now = self._clock() if at is None else at
        return await self._charged_failure(
            job_id, charged_yen=charged_yen, accepted_at=now, finished_at=now,
            last_error=f"the service gave an unusable job id {shown_id}",
        )

    async def mark_charged_unreadable(self, job_id: int, charged_yen: int, *, at: float | None = None) -> Job:
        """A 202 whose answer could not be read: charged (the ledger follows the key's spend), no job id to poll,
        failed at once. Its `accepted_at` (`at`, now by default) is the time support needs to find the charge."""
        now = self._clock() if at is None else at
        # The time in the reason too: /status and the final message of the sweep show it, for support.
        shown = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now))
        return await self._charged_failure(
            job_id, charged_yen=charged_yen, accepted_at=now, finished_at=now,
            last_error=f"{UNREADABLE_202} ({shown})",
        )

    async def _charged_failure(self, job_id: int, **changes: Any) -> Job:
        """The move of a charged 202 to `failed`; recording it again (a retry after a commit whose answer was
        lost) changes nothing."""
        try:
            return await self.transition(job_id, S.FAILED, **changes)
        except IllegalTransition:
            current = await self.get(job_id)
            if current.state == S.FAILED and current.charged_yen == changes["charged_yen"]:
                return current
            raise

    async def mark_told(self, job_id: int, *, owner: str | None = None) -> None:
        """The requester got the final message (or one could never be delivered, after the retries)."""
        await self.update(job_id, owner=owner, told_at=self._clock())

    async def schedule_polls(self, slots: Mapping[int, float], *, owner: str | None = None) -> None:
        """Set the next poll time of many jobs in one transaction (with `owner`: only of jobs it still holds)."""
        held, held_params = _held_by(owner)
        async with self._write():
            await self._db.execute_many(
                f"UPDATE jobs SET next_poll_at = ? WHERE id = ?{held}",
                [(at, job_id, *held_params) for job_id, at in slots.items()],
            )

    async def update(self, job_id: int, *, owner: str | None = None, **changes: Any) -> Job:
        """Change columns other than the state (poll times, message ids, notes).

        `owner`: only while that process holds the job's lease (LeaseLost otherwise).
        """
        if "state" in changes:
            raise ValueError("use transition() to change a job's state")
        assignments = _released_when_told({"updated_at": self._clock(), **changes})
        _check_columns(assignments)
        sets = ", ".join(f"{column} = ?" for column in assignments)
        held, held_params = _held_by(owner)
        results = await self._db.write_steps([Step(
            f"UPDATE jobs SET {sets} WHERE id = ?{held} RETURNING *", (*assignments.values(), job_id, *held_params),
            needs_row=True,
        )])
        if results is None:
            row = await self._one("SELECT lease_owner FROM jobs WHERE id = ?", (job_id,))
            if row is not None and owner is not None:
                raise LeaseLost(job_id, row[0])
            raise JobNotFound(f"no job #{job_id}")
        return _job(results[0][0])

    async def cancel_unsent(self, job_id: int) -> Job:
        """Its requester cancelled a request not yet sent; raises IllegalTransition once it is on its way.

        Told at once (the click that cancelled it answers), so it is never owed a final message.
        """
        return await self.transition(job_id, S.CANCELLED, told_at=self._clock(), last_error="cancelled")

    async def erase_prompts(self, *, finished_before: float | None = None, guild_id: int | None = None) -> int:
        """Blank the prompts of requests finished before `finished_before`, or of every request of `guild_id`.

        The ledger (ids, amounts, states) stays; a request about to be sent keeps its prompt.
        """
        where = ["prompt != ''", "state != ?"]
        params: list[Any] = [S.RECEIVED]
        if finished_before is not None:
            # Undeliverable is not final (/status may still hand the file over), but it is finished with.
            where.append(f"updated_at < ? AND state IN ({_marks(DONE_WITH_STATES)})")
            params += [finished_before, *DONE_WITH_STATES]
        if guild_id is not None:
            where.append("guild_id = ?")
            params.append(guild_id)
        # An offer's copy of a prompt goes with it: only an offer still open keeps its prompt.
        narrowed, narrowed_params = _given(("created_at < ?", finished_before), ("guild_id = ?", guild_id))
        offer_where = ["prompt != ''", "(used_at IS NOT NULL OR expires_at <= ?)", *narrowed]
        offer_params: list[Any] = [self._clock(), *narrowed_params]
        # Read first: a chore with nothing to erase must not take the write lock, which /video's row waits for.
        jobs_where, offers_where = " AND ".join(where), " AND ".join(offer_where)
        nothing_in_jobs = await self._one(f"SELECT 1 FROM jobs WHERE {jobs_where} LIMIT 1", params) is None
        if nothing_in_jobs and await self._one(
            f"SELECT 1 FROM offers WHERE {offers_where} LIMIT 1", offer_params
        ) is None:
            return 0
        async with self._write():
            erased = await self._db.execute(f"UPDATE jobs SET prompt = '' WHERE {' AND '.join(where)}", params)
            await self._db.execute(f"UPDATE offers SET prompt = '' WHERE {' AND '.join(offer_where)}", offer_params)
            return erased

    async def guilds_with_prompts(self) -> list[int]:
        """The servers whose requests still hold a prompt."""
        rows = await self._db.fetch_all(
            "SELECT DISTINCT guild_id FROM jobs WHERE prompt != '' AND guild_id IS NOT NULL"
        )
        return [int(row[0]) for row in rows]
