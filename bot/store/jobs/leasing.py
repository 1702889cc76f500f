"""Which process works on which job (bot/store/leases.py): leases renewed with the heartbeat, the jobs of stopped
processes claimed and recovered, leases released at a clean stop, the live processes and the chores' leader, and
what a restart finds half-done."""

from __future__ import annotations

from typing import Any

from bot.core.lifecycle import IN_FLIGHT_STATES, OWED_A_MESSAGE_STATES, JobState
from bot.core.retry import NOTICE_ROUNDS
from bot.store.jobs.base import StoreBase, _marks, log
from bot.store.jobs.records import Job, Renewal
from bot.store.leases import CLAIM_BATCH, CLOCK_SKEW_WARNING_S, Lease, LiveProcess
from bot.store.sqlite import Dialect

S = JobState


#: A live process, with `Lease.live_after`: the pacing's share, the chores' leader and the shards check count by it.
_LIVE = "heartbeat_at > ?"


#: Why a request that never left ends interrupted (at a restart, or by the task stopped before it sent it).
STOPPED_BEFORE_SENDING = "the bot stopped before the request was sent"


#: What a request cut off before its answer becomes, at a restart or when another process takes it over.
_RECOVERY: dict[JobState, tuple[JobState, str]] = {
    S.RECEIVED: (S.INTERRUPTED, STOPPED_BEFORE_SENDING),
    S.SUBMITTING: (S.UNKNOWN, "the bot stopped while the request was being sent"),
}


#: The claim's row lock, by dialect. SQLite's BEGIN IMMEDIATE already makes the claim the only writer. On
#: PostgreSQL every write transaction holds the advisory write lock too, so today this never skips a row; it
#: keeps claims disjoint on its own should writes ever stop being serialized (tests/store/test_leases.py checks both).
_CLAIM_LOCK: dict[Dialect, str] = {"sqlite": "", "postgresql": "FOR UPDATE SKIP LOCKED"}


class Leasing(StoreBase):
    """Which process works on which job."""

    async def _follow_database_clock(self) -> None:
        """Measure the database server's clock against this host's, before a round of lease times.

        Processes on several hosts compare each other's lease times. A host whose clock ran a lease ahead
        would find every live process's leases expired and take their jobs (one in the middle of its upload
        would then be posted twice); one behind would write leases already expired for the others. On the
        server's clock they agree, whatever the hosts' clocks say.
        """
        if not self._follow_database:
            return
        before = self._clock()
        row = await self._one("SELECT EXTRACT(EPOCH FROM clock_timestamp())", ())
        after = self._clock()
        assert row is not None
        self._lease_offset = float(row[0]) - (before + after) / 2
        skewed = abs(self._lease_offset) > CLOCK_SKEW_WARNING_S
        if skewed and not self._clock_skewed:
            log.warning(
                "this host's clock is %.1f s %s the database server's: leases are counted on the server's clock; "
                "set this host's time right (NTP)", abs(self._lease_offset),
                "behind" if self._lease_offset > 0 else "ahead of",
            )
        self._clock_skewed = skewed

    async def renew_leases(self, lease: Lease, *, wait: bool = False) -> Renewal:
        """The process's heartbeat and the renewal of every lease it holds, in one transaction.

        One UPDATE renews them all; it returns the jobs still held, so the caller drops those another
        process took. Also counts the live processes (a heartbeat within one lease), itself included,
        and forgets processes silent for ten leases. By default a round is skipped (StoreUnavailable) when
        another process's write holds the database: the next comes long before the expiry. `wait=True`
        for the renewal a worker needs before it may touch a job again.
        """
        await self._follow_database_clock()
        now = self._lease_now()
        async with self._write(wait=wait):
            await self._db.execute(
                """INSERT INTO processes (owner, started_at, heartbeat_at, shards) VALUES (?, ?, ?, ?)
                   ON CONFLICT (owner) DO UPDATE SET heartbeat_at = excluded.heartbeat_at""",
                (lease.owner, now, now, lease.shards),
            )
            rows = await self._db.fetch_all(
                "UPDATE jobs SET lease_expires_at = ? WHERE lease_owner = ? RETURNING id",
                (lease.expires(now), lease.owner),
            )
            await self._db.execute("DELETE FROM processes WHERE heartbeat_at < ?", (now - 10 * lease.seconds,))
            live = await self._one(f"SELECT COUNT(*) FROM processes WHERE {_LIVE}", (lease.live_after(now),))
        return Renewal(frozenset(int(row[0]) for row in rows), max(1, int(live[0]) if live else 1))

    async def claim_jobs(
        self, lease: Lease, *, limit: int, max_notice_attempts: int = NOTICE_ROUNDS
    ) -> tuple[list[Job], list[Job]]:
        """Take up to `limit` jobs still to be worked on whose lease expired or that nobody holds.

        One atomic claim, so each job goes to one process; the recovery of what was taken happens in the
        same transaction, so it runs once per request: `received` (never sent) ends interrupted,
        `submitting` (maybe sent) unknown, never resent. Returns (every job claimed, as it is now;
        the ones recovery moved).
        """
        now = self._lease_now()  # the server's clock as the last renewal measured it
        # Read first: a claim with nothing to take (nearly every one) must not take the write lock that a
        # /video row waits for.
        where, params = self._claimable(lease, now, take_all=False, max_notice_attempts=max_notice_attempts)
        if await self._one(f"SELECT 1 FROM jobs WHERE {where} LIMIT 1", params) is None:
            return [], []
        async with self._write():
            return await self._claim(lease, now, limit=limit, take_all=False,
                                     max_notice_attempts=max_notice_attempts)

    @staticmethod
    def _claimable(
        lease: Lease, now: float, *, take_all: bool, max_notice_attempts: int
    ) -> tuple[str, list[Any]]:
        """Jobs still to be worked on (or told) that `lease` may take: all of them, or those nobody holds."""
        working = _marks(IN_FLIGHT_STATES)
        candidates = (*IN_FLIGHT_STATES, *OWED_A_MESSAGE_STATES)
        where = [
            f"state IN ({_marks(candidates)})",
            f"(state IN ({working}) OR (told_at IS NULL AND notice_attempts < ?))",
        ]
        params: list[Any] = [*candidates, *IN_FLIGHT_STATES, max_notice_attempts]
        if not take_all:
            # Never one's own: a lease of ours that expired unnoticed is renewed, not recovered.
            where.append("(lease_owner IS NULL OR (lease_owner <> ? AND lease_expires_at <= ?))")
            params += [lease.owner, now]
        return " AND ".join(where), params

    async def _claim(
        self, lease: Lease, now: float, *, limit: int | None, take_all: bool, max_notice_attempts: int
    ) -> tuple[list[Job], list[Job]]:
        where, params = self._claimable(lease, now, take_all=take_all, max_notice_attempts=max_notice_attempts)
        bound = ""
        if limit is not None:
            bound = "LIMIT ?"
            params.append(limit)
        # The batch is picked once, in a CTE of its own: as `WHERE id IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`,
        # PostgreSQL may run the subquery again for each row it updates, and claim past the limit (seen in a test).
        rows = await self._db.fetch_all(
            f"""WITH picked AS MATERIALIZED (
                    SELECT id FROM jobs WHERE {where} ORDER BY id {bound} {_CLAIM_LOCK[self._db.dialect]})
                UPDATE jobs SET lease_owner = ?, lease_expires_at = ?
                WHERE id IN (SELECT id FROM picked)
                RETURNING id, state""",
            (*params, lease.owner, lease.expires(now)),
        )
        claimed = sorted((int(row[0]), JobState(row[1])) for row in rows)
        moved: list[Job] = []
        for job_id, state in claimed:
            recovery = _RECOVERY.get(state)
            if recovery is not None:
                target, reason = recovery
                moved.append(await self._move(job_id, target, {"last_error": reason}, owner=lease.owner))
        if not claimed:
            return [], moved
        ids = [job_id for job_id, _ in claimed]
        jobs = await self._jobs(f"SELECT * FROM jobs WHERE id IN ({_marks(ids)}) ORDER BY id", ids)
        return jobs, moved

    async def release_leases(self, owner: str) -> int:
        """A clean stop: every lease of `owner` is given up at once (a live process claims them without waiting
        for their expiry), and its heartbeat goes. Returns how many jobs it released."""
        async with self._write():
            released = await self._db.execute(
                "UPDATE jobs SET lease_owner = NULL, lease_expires_at = NULL WHERE lease_owner = ?", (owner,)
            )
            await self._db.execute("DELETE FROM processes WHERE owner = ?", (owner,))
            return released

    async def live_processes(self, lease: Lease) -> list[LiveProcess]:
        """The processes with a heartbeat within one lease (this one too, once it renewed), oldest first."""
        rows = await self._db.fetch_all(
            f"SELECT owner, started_at, heartbeat_at, shards FROM processes WHERE {_LIVE} ORDER BY started_at, owner",
            (lease.live_after(self._lease_now()),),
        )
        return [
            LiveProcess(str(row[0]), float(row[1]), float(row[2]), None if row[3] is None else str(row[3]))
            for row in rows
        ]

    async def leads_chores(self, lease: Lease) -> bool:
        """Whether `lease`'s process does the chores done once for every process sharing the database (log
        channels, budget alerts, prompt retention): the longest-running live one.

        Needs no write: a dead leader's heartbeat goes stale within one lease and the next oldest takes over.
        With no live heartbeat at all (a process before its first renewal, alone), it leads.
        """
        live = await self.live_processes(lease)
        return not live or live[0].owner == lease.owner

    async def recover_after_restart(
        self, lease: Lease | None = None, *, max_notice_attempts: int = NOTICE_ROUNDS
    ) -> list[Job]:
        """At start-up, before any command runs: requests the last run left half-done.

        `received` never left the bot: interrupted, nothing spent. `submitting` may have been sent and
        charged: outcome unknown, never resent. Both are then owed a final message (see `untold`).

        `lease`: this process also takes over jobs still to be worked on. On SQLite, which no other process
        can use (bot/store/instance_lock.py), every one of them at once, without waiting for leases to expire. On
        PostgreSQL other processes may be alive and working: only the jobs nobody holds or whose lease
        expired (what `claim_jobs` takes; a dead process's other jobs follow as their leases expire).
        Returns the requests it moved.
        """
        if lease is not None:
            await self._follow_database_clock()
            take_all = not self.shared
            # Beside live processes, a bounded batch: the claims of the lease loop take the rest, without holding
            # every process's writes behind one long transaction.
            async with self._write():
                _, moved = await self._claim(lease, self._lease_now(), limit=None if take_all else CLAIM_BATCH,
                                             take_all=take_all, max_notice_attempts=max_notice_attempts)
            return moved
        moved = []
        for source, (target, reason) in _RECOVERY.items():
            for job in await self.jobs_in_states((source,)):
                moved.append(await self.transition(job.id, target, last_error=reason))
        return moved
