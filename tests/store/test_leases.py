"""Several bot processes on one database: leases, claims, recovery once per request, the shared rate limit.

Each test runs on both backends (tests/conftest.py `open_store`): a "process" is a JobStore of its own, two
connections to one SQLite file (which serves one process in production, bot/store/instance_lock.py) or two asyncpg
pools on one PostgreSQL database (where several processes are the point), on one clock. The PostgreSQL-only
tests at the end are about what SQLite's one process never meets: claims racing on two pools, a live
process's leases at another's start-up, a write lock held by another process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import aiohttp
import asyncpg
import pytest

from bot.app import build_client, server_rules
from bot.app import open_store as open_bot_store
from bot.config.shards import ShardPlan
from bot.core.retry import RetryPolicy
from bot.jobs.intake import VideoRequests
from bot.jobs.worker import JobWorker, WorkerConfig
from bot.service.catalogue import BUILT_IN, DEFAULT_MODEL
from bot.service.client import VideoServiceClient
from bot.service.pacing import Pacer
from bot.simulator import VideoServiceSimulator
from bot.simulator.app import DEFAULT_VIDEO_PATH
from bot.store import leases
from bot.store.jobs import IllegalTransition, Job, JobState, JobStore, LeaseLost, NewJob, Renewal, StoreUnavailable
from bot.store.leases import Lease, LiveProcess, ShardsTaken, new_owner, owner_gone, take_shards
from tests.conftest import SIM_KEY, Clock, SimulatorFactory, StoreOpener, pid_namespace_prefix
from tests.frontend.cogs.helpers import bot_settings
from tests.jobs.worker_helpers import (
    PRICE_YEN,
    RecordingDeliverer,
    ShiftedClock,
    TimedClient,
    new_job,
    wait_for_states,
    wait_until,
)

S = JobState
LEASE = 30.0
SAMPLE = DEFAULT_VIDEO_PATH.read_bytes()
FAST = RetryPolicy(attempts=3, deadline=5, base_delay=0.02, max_delay=0.05)
FAST_STEPS = RetryPolicy(attempts=5, deadline=5.0, base_delay=0.05, max_delay=0.05, jitter=0.0)


def lease(name: str) -> Lease:
    return Lease(f"{name}:{new_owner()}", LEASE)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def stores(open_store: StoreOpener, clock: Clock) -> tuple[JobStore, JobStore]:
    """Two processes' stores on one database (of each backend), on one hand-moved clock."""
    return await open_store(clock=clock), await open_store(clock=clock)


@contextlib.asynccontextmanager
async def writing(store: JobStore) -> AsyncIterator[None]:
    """Another process in the middle of a write: its transaction open, and begun (SQLite begins at the first
    statement)."""
    async with store.transaction():
        await store.fetch_all("SELECT 1")
        yield


async def in_state(store: JobStore, state: JobState, holder: Lease, service_job_id: str = "") -> Job:
    """A job of `holder` moved along the lifecycle to `state` (received, submitting, pending or failed)."""
    job = await store.add_submission(new_job(), lease=holder)
    if state == S.RECEIVED:
        return job
    job = await store.transition(job.id, S.SUBMITTING, owner=holder.owner)
    if state == S.SUBMITTING:
        return job
    job = await store.mark_accepted(job.id, service_job_id or f"vid_{job.id}", PRICE_YEN, store.now(),
                                    owner=holder.owner)
    if state == S.FAILED:
        job = await store.transition(job.id, S.FAILED, owner=holder.owner, last_error="failed at the service")
    return job


# -- the store: leases and claims ------------------------------------------------------------------


async def test_a_new_request_is_written_holding_its_process_lease(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    store, _ = stores
    a = lease("a")
    job = await store.add_submission(new_job(), lease=a)
    assert (job.lease_owner, job.lease_expires_at) == (a.owner, clock.now + LEASE)
    unleased = await store.add_submission(new_job())
    assert (unleased.lease_owner, unleased.lease_expires_at) == (None, None)


async def test_a_claim_takes_only_expired_or_free_leases_and_never_the_claimers_own(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    a, b = lease("a"), lease("b")
    held = await in_state(first, S.PENDING, a)
    free = await in_state(first, S.PENDING, a)
    await first.update(free.id, lease_owner=None, lease_expires_at=None)  # written before leases existed

    claimed, _ = await second.claim_jobs(b, limit=10)
    assert [job.id for job in claimed] == [free.id], "a live process's lease is never taken"
    clock.now += LEASE - 1
    assert await second.claim_jobs(b, limit=10) == ([], [])
    own, _ = await first.claim_jobs(a, limit=10)
    assert own == [], "an owner does not claim its own expired lease: it renews it"
    clock.now += 1
    claimed, _ = await second.claim_jobs(b, limit=10)
    assert [(job.id, job.lease_owner, job.lease_expires_at) for job in claimed] == [
        (held.id, b.owner, clock.now + LEASE)
    ]
    assert claimed[0].state == S.PENDING


async def test_two_processes_claiming_at_once_take_each_job_once_in_bounded_batches(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    dead, b, c = lease("dead"), lease("b"), lease("c")
    jobs = [await in_state(first, S.PENDING, dead) for _ in range(7)]
    clock.now += LEASE + 1

    rounds = [await asyncio.gather(first.claim_jobs(b, limit=3), second.claim_jobs(c, limit=3)) for _ in range(3)]

    by_b = [job.id for (b_claimed, _), _ in rounds for job in b_claimed]
    by_c = [job.id for _, (c_claimed, _) in rounds for job in c_claimed]
    assert all(len(claimed) <= 3 for pair in rounds for claimed, _ in pair)
    assert not set(by_b) & set(by_c)
    assert sorted(by_b + by_c) == [job.id for job in jobs]


async def test_a_stale_owners_writes_are_refused_once_another_process_took_the_job(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    a, b = lease("a"), lease("b")
    job = await in_state(first, S.PENDING, a)
    clock.now += LEASE + 1
    await second.claim_jobs(b, limit=10)

    with pytest.raises(LeaseLost) as lost:
        await first.transition(job.id, S.COMPLETED, owner=a.owner)
    assert lost.value.holder == b.owner
    with pytest.raises(LeaseLost):
        await first.update(job.id, owner=a.owner, last_error="a stale poll")
    with pytest.raises(LeaseLost):
        await first.mark_told(job.id, owner=a.owner)
    await first.schedule_polls({job.id: 123.0}, owner=a.owner)
    unchanged = await second.get(job.id)
    assert (unchanged.state, unchanged.last_error, unchanged.told_at) == (S.PENDING, None, None)
    assert unchanged.next_poll_at != 123.0
    # The holder's writes go through.
    moved = await second.transition(job.id, S.COMPLETED, owner=b.owner)
    assert moved.state == S.COMPLETED


async def test_a_taken_over_request_is_recovered_once_and_never_sent(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    dead, b = lease("dead"), lease("b")
    unsent = await in_state(first, S.RECEIVED, dead)
    sending = await in_state(first, S.SUBMITTING, dead)
    clock.now += LEASE + 1

    claimed, moved = await second.claim_jobs(b, limit=10)

    assert [(job.id, job.state) for job in moved] == [(unsent.id, S.INTERRUPTED), (sending.id, S.UNKNOWN)]
    assert [(job.id, job.state, job.lease_owner) for job in claimed] == [
        (unsent.id, S.INTERRUPTED, b.owner), (sending.id, S.UNKNOWN, b.owner)
    ]
    # The dead process's write-ahead (if it ever woke up) is refused: the create is never sent.
    with pytest.raises((LeaseLost, IllegalTransition)):
        await first.transition(unsent.id, S.SUBMITTING, owner=dead.owner)
    owed = await second.untold(older_than=clock.now, max_notice_attempts=5, owner=b.owner)
    assert [job.id for job in owed] == [unsent.id, sending.id], "the taker owes their requesters the message"
    # `b` died too before telling them: a third process takes them to tell, with nothing left to recover.
    clock.now += LEASE + 1
    claimed, moved = await first.claim_jobs(lease("c"), limit=10)
    assert [(job.id, job.state) for job in claimed] == [(unsent.id, S.INTERRUPTED), (sending.id, S.UNKNOWN)]
    assert moved == [], "recovery runs once per request"
    await first.mark_told(unsent.id)
    await first.mark_told(sending.id)
    clock.now += LEASE + 1
    assert await second.claim_jobs(b, limit=10) == ([], []), "a told request needs no process"


async def test_renewal_keeps_the_leases_counts_live_processes_and_shows_a_lost_job(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    a, b = lease("a"), lease("b")
    taken = await in_state(first, S.PENDING, a)  # the lower id: the first a claim takes
    kept = await in_state(first, S.PENDING, a)

    renewal = await first.renew_leases(a)
    assert (renewal.held, renewal.live_processes) == (frozenset({kept.id, taken.id}), 1)
    assert (await second.renew_leases(b)).live_processes == 2
    clock.now += LEASE + 1
    # `a` stalled: `b` alone is alive, and takes one of its jobs before `a` renews.
    renewal = await second.renew_leases(b)
    assert renewal.live_processes == 1
    await second.claim_jobs(b, limit=1)
    renewal = await first.renew_leases(a)
    assert renewal.held == {kept.id}, "renewal tells the stalled process which job it lost"
    assert (await first.get(kept.id)).lease_expires_at == clock.now + LEASE


def on_shards(name: str, plan: ShardPlan) -> Lease:
    return Lease(f"{name}:{new_owner()}", LEASE, plan.token)


async def test_a_process_on_a_shard_a_live_one_runs_is_refused_as_soon_as_that_one_beats_again(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    running, starting = ShardPlan(4, (0, 1)), ShardPlan(4, (1, 2))
    a, b = on_shards("a", running), on_shards("b", starting)
    await first.renew_leases(a)
    clock.now += 1
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # the first process lives on, and renews every third of a lease
        slept.append(seconds)
        before = clock.now
        clock.now += seconds
        if int(clock.now // a.renew_every) > int(before // a.renew_every):
            await first.renew_leases(a)

    with pytest.raises(ShardsTaken) as refused:
        await take_shards(second, b, starting, sleep=sleep)
    assert a.owner in str(refused.value) and "SHARD_IDS" in str(refused.value)
    assert "shards 0, 1 of 4" in str(refused.value) and "shards 1, 2 of 4" in str(refused.value)
    # Refused once it beat again: within a third of a lease, not after waiting one out.
    assert 0 < sum(slept) <= a.renew_every + LEASE / 12


async def test_a_crashed_runs_heartbeat_is_waited_out_and_other_shards_or_later_starts_are_not_waited_for(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    plan = ShardPlan(2, (0,))
    crashed = on_shards("crashed", plan)
    await first.renew_leases(crashed)  # then nothing: it was killed
    clock.now += 1
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    await take_shards(second, on_shards("again", plan), plan, sleep=sleep)
    assert LEASE - 1 <= sum(slept) <= LEASE * 4 / 3, "until its heartbeat is a lease old, and no longer"

    # A live process on the other shard, or with no shard at all (a tool), is no reason to wait.
    clock.now += LEASE + 1  # the one that took the shard stopped too
    other, tool = on_shards("other", ShardPlan(2, (1,))), Lease(f"tool:{new_owner()}", LEASE)
    await first.renew_leases(other)
    await first.renew_leases(tool)
    clock.now += 1  # both started before the next one
    slept.clear()
    starting = on_shards("next", plan)
    await take_shards(second, starting, plan, sleep=sleep)
    assert slept == []
    # Which wrote its row at once: a process starting on the same shard after it is refused, and leaves no row
    # behind for the next to wait out.
    clock.now += 1
    refused = on_shards("after", plan)
    with pytest.raises(ShardsTaken, match=starting.owner):
        await take_shards(first, refused, plan, sleep=_beating(second))
    assert refused.owner not in {process.owner for process in await first.live_processes(refused)}
    # A process that started after this one on the same shard waits for this one, not the reverse.
    clock.now += LEASE + 1
    mine = on_shards("mine", plan)
    await second.renew_leases(mine)
    clock.now += 1
    await first.renew_leases(on_shards("later", plan))
    await take_shards(second, mine, plan, sleep=sleep)
    assert slept == []


def dead_pid() -> int:
    """The pid of a process of this host that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def owner_with_pid(pid: int) -> str:
    """The owner id a process of this host, in this PID namespace, would have with this pid."""
    host, _pid, rest = new_owner().split(":", 2)
    return f"{host}:{pid}:{rest}"


async def _sleep_on(clock: Clock, slept: list[float], seconds: float) -> None:
    slept.append(seconds)
    clock.now += seconds


@pytest.mark.parametrize("pid", ["ended", "this one"])
async def test_a_crashed_run_of_this_host_is_taken_over_at_once_with_its_jobs(
    stores: tuple[JobStore, JobStore], clock: Clock, pid: str
) -> None:
    first, second = stores
    plan = ShardPlan(2, (0,))
    # Killed a moment ago: a process that no longer runs here, or one that had this very pid.
    crashed = Lease(owner_with_pid(dead_pid() if pid == "ended" else os.getpid()), LEASE, plan.token)
    await first.renew_leases(crashed)
    job = await in_state(first, S.PENDING, crashed)
    clock.now += 1
    slept: list[float] = []

    again = on_shards("again", plan)
    await take_shards(second, again, plan, sleep=partial(_sleep_on, clock, slept))
    assert slept == [], "its heartbeat is not waited out"
    assert crashed.owner not in {process.owner for process in await second.live_processes(again)}
    claimed, _recovered = await second.claim_jobs(again, limit=10)
    assert [taken.id for taken in claimed] == [job.id]  # its jobs are free at once


async def test_a_predecessor_recorded_in_this_processs_data_folder_is_taken_over_at_once(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    """A container restarted in place: PID 1 again, in a new PID namespace, on the same data volume, whose owner
    record (bot/store/owner_record.py) names the run before it."""
    first, second = stores
    plan = ShardPlan(2, (0,))
    host, _pid, random, space = new_owner().split(":")
    crashed = Lease(f"{host}:1:{random}:{space.split('.')[0]}.4026530000", LEASE, plan.token)
    await first.renew_leases(crashed)
    clock.now += 1
    slept: list[float] = []
    await take_shards(second, on_shards("again", plan), plan, sleep=partial(_sleep_on, clock, slept),
                      predecessor=crashed.owner)
    assert slept == []
    # The same heartbeat, not named as this process's predecessor, is waited for: it may be a live container's.
    clock.now += LEASE + 1
    await first.renew_leases(crashed)
    clock.now += 1
    with pytest.raises(ShardsTaken, match=crashed.owner):
        await take_shards(second, on_shards("later", plan), plan, sleep=_beating(first), predecessor="other")


async def test_a_live_process_of_this_host_or_one_of_another_host_is_still_waited_for(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    plan = ShardPlan(2, (0,))
    for owner in (owner_with_pid(os.getppid()), f"other-host:{os.getpid()}:0badc0de"):
        clock.now += LEASE + 1
        rival = Lease(owner, LEASE, plan.token)
        await first.renew_leases(rival)
        clock.now += 1
        with pytest.raises(ShardsTaken, match=owner):
            await take_shards(second, on_shards("again", plan), plan, sleep=_beating(first))


def test_a_live_process_in_another_pid_namespace_with_this_host_name_is_not_taken_for_dead() -> None:
    """Containers on the host's network (`network_mode: host`, hostNetwork) share its host name: a live one whose pid
    does not run here is no dead run of this host."""
    prefix = pid_namespace_prefix()
    if prefix is None:
        pytest.skip("no `unshare --pid` here (util-linux, and root or user namespaces, are needed)")
    pid = dead_pid()  # a pid that runs nowhere here: the other namespace's process gets it there
    script = "from bot.store.leases import new_owner; import time; print(new_owner(), flush=True); time.sleep(60)"
    with subprocess.Popen(
        [*prefix, "sh", "-c", f'echo {pid - 1} > /proc/sys/kernel/ns_last_pid; "$0" -c "$1"; true', sys.executable,
         script],
        stdout=subprocess.PIPE, text=True,
    ) as other:
        try:
            assert other.stdout is not None
            owner = other.stdout.readline().strip()
            host, number, _rest = owner.split(":", 2)
            assert host == socket.gethostname()
            if int(number) != pid:
                pytest.skip("cannot choose the pid in the other namespace here (ns_last_pid)")
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)  # as seen from here, that pid runs nowhere
            assert not owner_gone(owner), "it is alive, in its own namespace"
        finally:
            other.kill()


@pytest.mark.parametrize("proof", ["an older version's", "another boot's", "another PID namespace's", "none"])
def test_an_owner_of_this_host_name_without_this_processs_boot_and_pid_namespace_is_not_taken_for_dead(
    proof: str
) -> None:
    """Two machines of one name, or two PID namespaces: that its pid runs nowhere here, or is this one's, proves
    nothing."""
    host, _pid, random, space = new_owner().split(":")
    boot, namespace = space.split(".")
    proofs = {"an older version's": None, "another boot's": f"{'0' * len(boot)}.{namespace}",
              "another PID namespace's": f"{boot}.1", "none": "?"}[proof]
    for pid in (dead_pid(), os.getpid()):
        owner = f"{host}:{pid}:{random}" + (f":{proofs}" if proofs is not None else "")
        assert not owner_gone(owner), owner


def test_a_process_that_cannot_read_its_boot_or_pid_namespace_waits_for_every_owner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = owner_with_pid(dead_pid())
    assert owner_gone(before)
    monkeypatch.setattr(leases, "BOOT_ID", tmp_path / "missing")
    assert new_owner().endswith(":?")
    assert not owner_gone(before), "unreadable here: nothing proves that pid is this namespace's"
    assert not owner_gone(owner_with_pid(dead_pid()))


async def test_the_live_processes_show_their_shards_and_an_unreadable_row_is_taken_for_any_shard(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    first, second = stores
    a = on_shards("a", ShardPlan(4, (2, 3)))
    await first.renew_leases(a)
    clock.now += 1
    assert [(p.owner, p.shards) for p in await second.live_processes(a)] == [(a.owner, "4:2,3")]
    clock.now += LEASE
    assert await second.live_processes(a) == [], "silent for a lease: no longer alive"
    await first.renew_leases(Lease(f"odd:{new_owner()}", LEASE, "four:2"))  # no process of this version wrote it
    clock.now += 1
    with pytest.raises(ShardsTaken, match="'four:2'"):
        await take_shards(second, on_shards("b", ShardPlan(4, (0,))), ShardPlan(4, (0,)), sleep=_beating(first))
    assert isinstance((await second.live_processes(a))[0], LiveProcess)


def _beating(store: JobStore) -> Any:
    """A sleep during which every live process renews (so each looks alive at once)."""

    async def sleep(seconds: float) -> None:
        for process in await store.live_processes(Lease("any", LEASE)):
            await store.renew_leases(Lease(process.owner, LEASE, process.shards))

    return sleep


async def test_a_clean_stop_releases_every_lease_at_once_and_a_told_job_needs_none(
    stores: tuple[JobStore, JobStore],
) -> None:
    first, second = stores
    a, b = lease("a"), lease("b")
    working = await in_state(first, S.PENDING, a)
    told = await in_state(first, S.FAILED, a)
    await first.mark_told(told.id, owner=a.owner)
    assert (await first.get(told.id)).lease_owner is None
    await first.renew_leases(a)

    assert await first.release_leases(a.owner) == 1
    claimed, _ = await second.claim_jobs(b, limit=10)
    assert [job.id for job in claimed] == [working.id], "released: taken at once; a told job stays free"
    assert (await second.renew_leases(b)).live_processes == 1, "its heartbeat went with it"


async def test_the_start_up_takeover_takes_every_lease_on_sqlite_and_only_a_dead_processs_on_postgresql(
    stores: tuple[JobStore, JobStore], clock: Clock, open_store: StoreOpener
) -> None:
    """SQLite has one process (bot/store/instance_lock.py): the last run's leases are all its own, taken at once. On
    PostgreSQL another process may be alive and working: its jobs (even one it is sending) are left alone."""
    first, second = stores
    previous, live, now = lease("previous"), lease("live"), lease("now")
    pending = await in_state(first, S.PENDING, previous)
    unsent = await in_state(first, S.RECEIVED, previous)
    failed = await in_state(first, S.FAILED, previous)
    clock.now += 1
    working = await in_state(second, S.PENDING, live)
    sending = await in_state(second, S.SUBMITTING, live)  # its create may be on the wire right now
    clock.now += LEASE - 1  # `previous` expired just now; `live` has a second left
    restarted = await open_store(clock=clock)

    moved = await restarted.recover_after_restart(now)

    if restarted.dialect == "sqlite":
        assert [(job.id, job.state) for job in moved] == [(unsent.id, S.INTERRUPTED), (sending.id, S.UNKNOWN)]
        taken = [pending.id, unsent.id, failed.id, working.id, sending.id]
    else:
        assert [(job.id, job.state) for job in moved] == [(unsent.id, S.INTERRUPTED)]
        taken = [pending.id, unsent.id, failed.id]
        for job in (working, sending):
            left = await restarted.get(job.id)
            assert (left.state, left.lease_owner, left.lease_expires_at) == (
                job.state, live.owner, job.lease_expires_at
            ), "a live process's job is never taken"
    for job_id in taken:
        assert (await restarted.get(job_id)).lease_owner == now.owner


async def test_a_renewal_while_another_process_writes_fails_at_once_and_changes_nothing(
    stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    """The renewal's transaction barely waits (`transaction(wait=False)`): the round is skipped, the next
    one comes long before the leases expire. A /video row never queues long behind a heartbeat."""
    first, second = stores
    a, b = lease("a"), lease("b")
    held = await in_state(second, S.PENDING, b)
    clock.now += 5

    async with writing(first):  # another process in the middle of a write
        with pytest.raises(StoreUnavailable) as busy:
            await second.renew_leases(b)
        with pytest.raises(StoreUnavailable):
            async with second.database.transaction(wait=False):
                await second.database.execute("DELETE FROM processes")  # SQLite begins at the first statement
                pytest.fail("a no-wait transaction began while another process held the write lock")
    if second.dialect == "postgresql":
        # Gave up on the lock after the no-wait's short lock timeout, not by some other failure.
        assert isinstance(busy.value.__cause__, asyncpg.exceptions.LockNotAvailableError), busy.value

    assert (await first.get(held.id)).lease_expires_at == clock.now - 5 + LEASE, "nothing renewed"
    assert (await first.renew_leases(a)).live_processes == 1, "no heartbeat was written for `b`"
    renewal = await second.renew_leases(b)  # the next round, once the other write ended
    assert (renewal.held, renewal.live_processes) == (frozenset({held.id}), 2)
    assert (await first.get(held.id)).lease_expires_at == clock.now + LEASE


async def test_after_a_skipped_round_the_next_renewal_waits_for_the_database(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third round would come after the expiry: the one after a skipped round waits its turn instead."""
    first, _second = stores
    a = lease("a")
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), RecordingDeliverer(),
                       WorkerConfig(storage_dir=tmp_path), clock=clock, lease=a)
    await worker.lease_round()  # renewed
    waits: list[bool] = []
    renew = first.renew_leases

    async def busy_unless_waiting(held: Lease, *, wait: bool = False) -> Renewal:
        waits.append(wait)
        if not wait:
            raise StoreUnavailable("another process's write holds the database")
        return await renew(held, wait=wait)

    monkeypatch.setattr(first, "renew_leases", busy_unless_waiting)
    clock.now += a.renew_every
    await worker.lease_round()  # skipped: the last renewal still vouches for the leases
    clock.now += a.renew_every
    await worker.lease_round()  # overdue: waits
    assert waits == [False, True]
    assert worker._clock() < worker._held_until, "renewed in time"


async def test_a_lease_round_whose_renewal_is_skipped_still_takes_over_a_dead_processs_jobs(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = stores
    a, dead = lease("a"), lease("dead")
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), RecordingDeliverer(),
                       WorkerConfig(storage_dir=tmp_path), clock=clock, lease=a)
    orphan = await in_state(second, S.PENDING, dead)
    clock.now += LEASE + 1  # the dead process's lease ran out

    async def busy(*args: object, **kwargs: object) -> None:
        raise StoreUnavailable("the database is busy")

    monkeypatch.setattr(first, "renew_leases", busy)
    await worker.lease_round()  # logged, not raised: the loop goes on
    assert (await second.get(orphan.id)).lease_owner == a.owner, "claimed although the renewal was skipped"
    assert orphan.id in worker._schedule


async def test_a_worker_whose_renewal_meets_another_processs_write_skips_the_round_and_keeps_its_jobs(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path
) -> None:
    first, second = stores
    a = lease("a")
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), RecordingDeliverer(),
                       WorkerConfig(storage_dir=tmp_path), clock=clock, lease=a)
    job = await in_state(first, S.PENDING, a)
    worker.wake(job)
    await worker.keep_leases()

    async with writing(second):
        with pytest.raises(StoreUnavailable):  # the lease loop logs it and tries again next round
            await worker.keep_leases()
        assert job.id in worker._schedule, "a skipped renewal drops nothing"
        assert await worker._holds(job.id), "still vouched for by the last renewal"
        clock.now += LEASE - a.renew_every  # no renewal came through for two rounds
        assert not await worker._holds(job.id), "a lease it cannot vouch for is left alone"

    assert await worker._holds(job.id), "renewed once the other write ended"
    assert (await second.get(job.id)).lease_expires_at == clock.now + LEASE


# -- workers: sharing, dying, taking over ------------------------------------------------------------


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def client_for(sim: VideoServiceSimulator, http: aiohttp.ClientSession) -> TimedClient:
    return TimedClient(http, sim.base_url, SIM_KEY, timeout_seconds=2, create_retry=FAST, read_retry=FAST)


@pytest.fixture
async def workers() -> AsyncIterator[list[JobWorker]]:
    started: list[JobWorker] = []
    yield started
    for worker in started:
        await worker.stop()


def make_worker(
    workers: list[JobWorker], store: JobStore, client: VideoServiceClient, deliverer: RecordingDeliverer,
    holder: Lease, storage_dir: Path, *, clock: ShiftedClock, **config: Any
) -> JobWorker:
    options: dict[str, Any] = {
        "storage_dir": storage_dir, "poll_interval": 0.1, "download_retry": FAST_STEPS, "upload_retry": FAST_STEPS,
        "notice_retry": FAST_STEPS, "idle_wake": 0.2, **config,
    }
    worker = JobWorker(store, client, deliverer, WorkerConfig(**options), clock=clock, lease=holder)
    workers.append(worker)
    return worker


async def accepted(store: JobStore, client: VideoServiceClient, holder: Lease, clock: ShiftedClock) -> Job:
    """A /video request of `holder`'s process, sent once and accepted, its first poll due now."""
    job = await store.add_submission(new_job(), lease=holder)
    job = await store.transition(job.id, S.SUBMITTING, owner=holder.owner)
    remote = await client.create(job.prompt, job.seed)
    return await store.mark_accepted(job.id, remote.id, PRICE_YEN, next_poll_at=clock(), owner=holder.owner)


async def test_two_workers_share_the_jobs_without_polling_or_posting_one_twice(
    start_simulator: SimulatorFactory, http: aiohttp.ClientSession, tmp_path: Path, workers: list[JobWorker],
    open_store: StoreOpener,
) -> None:
    sim = await start_simulator(job_seconds=0.3, max_budget=None)
    clock = ShiftedClock()
    store, store_b = await open_store(clock=clock), await open_store(clock=clock)
    try:
        a, b = lease("a"), lease("b")
        client_a, client_b = client_for(sim, http), client_for(sim, http)
        to_a, to_b = RecordingDeliverer(), RecordingDeliverer()
        jobs_a = [await accepted(store, client_a, a, clock) for _ in range(3)]
        jobs_b = [await accepted(store_b, client_b, b, clock) for _ in range(3)]
        first = make_worker(workers, store, client_a, to_a, a, tmp_path / "a", clock=clock)
        second = make_worker(workers, store_b, client_b, to_b, b, tmp_path / "b", clock=clock)
        first.start()
        second.start()

        await wait_for_states(store, [job.id for job in jobs_a + jobs_b], [S.DELIVERED])

        assert sorted(d.job_id for d in to_a.deliveries) == [job.id for job in jobs_a]
        assert sorted(d.job_id for d in to_b.deliveries) == [job.id for job in jobs_b]
        polled_by_a = set(client_a.starts_by_job())
        polled_by_b = set(client_b.starts_by_job())
        assert polled_by_a == {job.service_job_id for job in jobs_a}
        assert polled_by_b == {job.service_job_id for job in jobs_b}
        assert (sim.creates_received, sim.download_requests) == (6, 6)
    finally:
        for worker in workers:
            await worker.stop()


async def test_a_survivor_finishes_a_dead_workers_jobs_after_the_lease_expires_and_tells_each_once(
    start_simulator: SimulatorFactory, http: aiohttp.ClientSession, tmp_path: Path, workers: list[JobWorker],
    open_store: StoreOpener,
) -> None:
    sim = await start_simulator(job_seconds=0.6, max_budget=None)
    clock = ShiftedClock()
    store, survivor_store = await open_store(clock=clock), await open_store(clock=clock)  # the dead's, the survivor's
    try:
        dead, survivor = lease("dead"), lease("survivor")
        client_dead, client_survivor = client_for(sim, http), client_for(sim, http)
        to_dead, to_survivor = RecordingDeliverer(), RecordingDeliverer()
        # The dead process ran a moment (a poll: still running), then died without releasing anything.
        running = await accepted(store, client_dead, dead, clock)
        gone = make_worker(workers, store, client_dead, to_dead, dead, tmp_path / "dead", clock=clock,
                           poll_interval=60.0)
        gone.start()
        await wait_until(lambda: _polled(client_dead))
        await gone.stop()
        dead_calls = len(client_dead.status_calls)
        # What else it held as it died: a request never sent, one maybe sent, one owed its final message,
        # and a video downloaded onto its host's disk.
        unsent = await in_state(store, S.RECEIVED, dead)
        sending = await in_state(store, S.SUBMITTING, dead)
        failed = await in_state(store, S.FAILED, dead)
        elsewhere = await accepted(store, client_dead, dead, clock)
        await done_at_service(sim, elsewhere)
        await store.transition(elsewhere.id, S.COMPLETED, owner=dead.owner, finished_at=clock())
        other_disk = tmp_path / "dead-host" / "videos" / f"{elsewhere.id}.mp4"
        await store.transition(elsewhere.id, S.DOWNLOADED, owner=dead.owner, file_path=str(other_disk))
        creates, downloads = sim.creates_received, sim.download_requests

        survivor_worker = make_worker(workers, survivor_store, client_survivor, to_survivor, survivor,
                                      tmp_path / "survivor", clock=clock)
        survivor_worker.start()
        await asyncio.sleep(0.3)
        assert to_survivor.announcements == [] and client_survivor.status_calls == [], "not before the expiry"
        assert (await store.get(unsent.id)).state == S.RECEIVED

        clock.offset += LEASE + 60  # past the expiry, and past the dead process's next planned poll
        await survivor_worker.keep_leases()

        ids = [running.id, elsewhere.id]
        await wait_for_states(store, ids, [S.DELIVERED])
        await wait_until(lambda: _all_told(store, [unsent.id, sending.id, failed.id]))
        assert sorted(d.job_id for d in to_survivor.deliveries) == sorted(ids)
        assert all(d.data == SAMPLE for d in to_survivor.deliveries)
        assert to_dead.deliveries == [] and len(client_dead.status_calls) == dead_calls
        assert (await store.get(unsent.id)).state == S.INTERRUPTED
        assert (await store.get(sending.id)).state == S.UNKNOWN
        # Each requester told once, by the survivor; nothing sent again, the far file downloaded again.
        assert sorted((a.job_id, a.event) for a in to_survivor.announcements) == sorted(
            [(unsent.id, "interrupted"), (sending.id, "unknown"), (failed.id, "failed")]
        )
        assert sim.creates_received == creates
        assert sim.download_requests == downloads + 2  # the running job's, and the far file's again
        # Later rounds (the sweep, more claims) tell nobody again.
        await survivor_worker.keep_leases()
        assert await survivor_worker.tell_untold(0.0) == 0
        assert len(to_survivor.announcements) == 3
    finally:
        for worker in workers:
            await worker.stop()


async def _polled(client: TimedClient) -> bool:
    return bool(client.status_calls)


async def _all_told(store: JobStore, job_ids: list[int]) -> bool:
    return all([(await store.get(job_id)).told_at is not None for job_id in job_ids])


async def test_a_worker_that_lost_its_lease_drops_the_job_before_touching_it_again(
    start_simulator: SimulatorFactory, http: aiohttp.ClientSession, tmp_path: Path, workers: list[JobWorker],
    open_store: StoreOpener,
) -> None:
    sim = await start_simulator(job_seconds=0.4, max_budget=None)
    clock = ShiftedClock()
    store, store_b = await open_store(clock=clock), await open_store(clock=clock)
    try:
        a, b = lease("a"), lease("b")
        client_a, client_b = client_for(sim, http), client_for(sim, http)
        to_a, to_b = RecordingDeliverer(), RecordingDeliverer()
        job = await accepted(store, client_a, a, clock)
        stalled = make_worker(workers, store, client_a, to_a, a, tmp_path / "a", clock=clock, poll_interval=60.0)
        stalled.start()
        await wait_until(lambda: _polled(client_a))  # polled once; the next poll a minute on

        # `a` stalls past its lease (its renewals did not come): `b` takes the job.
        clock.offset += LEASE + 1
        taker = make_worker(workers, store_b, client_b, to_b, b, tmp_path / "b", clock=clock, poll_interval=60.0)
        taker.start()
        await wait_until(lambda: _held_by(store, job, b))
        await done_at_service(sim, job)
        clock.offset += 61  # both would poll it now

        await wait_for_states(store, [job.id], [S.DELIVERED])
        await wait_until(lambda: _forgotten(stalled, job))  # `a` came to its planned poll, and let it go
        assert [d.job_id for d in to_b.deliveries] == [job.id] and to_a.deliveries == []
        assert len(client_a.status_calls) == 1, "the process that lost the job never polled it again"
        assert to_a.announcements == []
    finally:
        for worker in workers:
            await worker.stop()


async def done_at_service(sim: VideoServiceSimulator, job: Job) -> None:
    assert job.service_job_id is not None
    await asyncio.sleep(max(0.0, sim.jobs[job.service_job_id].completed_at - time.monotonic()) + 0.01)


async def _forgotten(worker: JobWorker, job: Job) -> bool:
    return job.id not in worker._schedule


async def _held_by(store: JobStore, job: Job, holder: Lease) -> bool:
    return (await store.get(job.id)).lease_owner == holder.owner


@pytest.mark.parametrize("service_keeps_it", [True, False])
async def test_a_downloaded_video_missing_from_this_disk_is_downloaded_again_never_created_again(
    start_simulator: SimulatorFactory, http: aiohttp.ClientSession, tmp_path: Path, workers: list[JobWorker],
    service_keeps_it: bool, open_store: StoreOpener,
) -> None:
    sim = await start_simulator(job_seconds=0.2, max_budget=None)
    clock = ShiftedClock()
    store = await open_store(clock=clock)
    try:
        a = lease("a")
        client = client_for(sim, http)
        job = await accepted(store, client, a, clock)
        await done_at_service(sim, job)
        await store.transition(job.id, S.COMPLETED, owner=a.owner, finished_at=clock())
        elsewhere = tmp_path / "other-host" / f"{job.id}.mp4"
        await store.transition(job.id, S.DOWNLOADED, owner=a.owner, file_path=str(elsewhere))
        if not service_keeps_it:
            sim.inject("download", 404, times=100)
        deliverer = RecordingDeliverer()
        worker = make_worker(workers, store, client, deliverer, a, tmp_path / "videos", clock=clock)
        worker.start()

        if service_keeps_it:
            [done] = await wait_for_states(store, [job.id], [S.DELIVERED])
            assert [d.data for d in deliverer.deliveries] == [SAMPLE]
            assert sim.download_requests == 1 and done.file_path == str(tmp_path / "videos" / f"{job.id}.mp4")
        else:
            [ended] = await wait_for_states(store, [job.id], [S.UNDELIVERABLE])
            await wait_until(lambda: _all_told(store, [job.id]))
            assert deliverer.deliveries == [] and deliverer.events_for(job.id) == ["undeliverable"]
            assert sim.download_requests == FAST_STEPS.attempts
            assert "could not be downloaded" in (ended.last_error or "")
        assert sim.creates_received == 1
    finally:
        for worker in workers:
            await worker.stop()


async def test_a_renewal_that_finds_a_job_taken_drops_it_from_the_schedule(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path
) -> None:
    first, second = stores
    a, b = lease("a"), lease("b")
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), RecordingDeliverer(),
                       WorkerConfig(storage_dir=tmp_path), clock=clock, lease=a)
    job = await in_state(first, S.PENDING, a)
    worker.wake(job)
    await worker.keep_leases()
    assert job.id in worker._schedule
    clock.now += LEASE + 1  # `a` stalled; `b` takes the job
    await second.claim_jobs(b, limit=10)

    await worker.keep_leases()

    assert job.id not in worker._schedule


async def test_a_worker_that_lost_a_job_neither_posts_it_nor_tells_its_requester(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path
) -> None:
    """What a task of the stale process still running would do with the job: nothing, once renewal says so."""
    first, second = stores
    a, b = lease("a"), lease("b")
    deliverer = RecordingDeliverer()
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), deliverer, WorkerConfig(storage_dir=tmp_path),
                       clock=clock, lease=a)
    video = tmp_path / "video.mp4"
    video.write_bytes(SAMPLE)
    ready = await in_state(first, S.PENDING, a)
    await first.transition(ready.id, S.COMPLETED, owner=a.owner)
    ready = await first.transition(ready.id, S.DOWNLOADED, owner=a.owner, file_path=str(video))
    failed = await in_state(first, S.FAILED, a)
    await worker.keep_leases()
    clock.now += LEASE + 1  # `a` stalled; `b` takes both
    await second.claim_jobs(b, limit=10)

    await worker._finish(ready)
    assert await worker._finalize(failed, "failed") == 0

    assert deliverer.deliveries == [] and deliverer.announcements == []
    assert (await second.get(ready.id)).state == S.DOWNLOADED and video.exists()
    assert (await second.get(failed.id)).notice_attempts == 0


async def test_a_request_another_process_holds_is_never_sent_by_its_writer(
    simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession, tmp_path: Path, open_store: StoreOpener
) -> None:
    settings = bot_settings(simulator.base_url, SIM_KEY, tmp_path / "bot.sqlite3", VIDEO_COOLDOWN_SECONDS="0",
                            MAX_ACTIVE_JOBS_PER_USER="10")
    clock = Clock(time.time())
    store, other = await open_store(clock=clock), await open_store(clock=clock)
    a, b = lease("a"), lease("b")
    client = build_client(settings, http_session, paced=False)
    requests = VideoRequests(store, client, settings, server_rules(store, settings), catalogue=BUILT_IN, lease=a,
                             clock=clock)
    request = NewJob(model=DEFAULT_MODEL.id, prompt="a kite", seed=None, user_id=1, guild_id=10, channel_id=100)
    taken_over = await requests.record(request)
    assert taken_over.lease_owner == a.owner
    moved = await requests.record(request)
    # `a` stalled past its lease while both waited for their turn: `b` took the first (and recovered it).
    clock.now += LEASE + 1
    await other.claim_jobs(b, limit=1)
    with pytest.raises(LeaseLost):
        await requests.send(taken_over)
    # Were a lease ever moved without its recovery, the write-ahead would still refuse.
    await other.update(moved.id, lease_owner=b.owner)
    with pytest.raises(LeaseLost):
        await requests.send(moved)
    assert simulator.creates_received == 0 and simulator.spend == 0
    assert (await store.get(taken_over.id)).state == S.INTERRUPTED
    assert (await store.get(moved.id)).state == S.RECEIVED


# -- the shared rate limit ----------------------------------------------------------------------------


async def test_each_live_process_paces_at_its_share_of_the_keys_rate(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path
) -> None:
    pacers = Pacer(20.0, clock=clock), Pacer(20.0, clock=clock)
    config = WorkerConfig(storage_dir=tmp_path)
    a, b = (
        JobWorker(store, MagicMock(spec=VideoServiceClient), RecordingDeliverer(), config, clock=clock,
                  pacer=pacer, lease=lease(name))
        for store, pacer, name in zip(stores, pacers, "ab", strict=True)
    )
    await a.keep_leases()
    assert pacers[0].rate == pytest.approx(20.0), "alone, the whole rate"
    await b.keep_leases()
    await a.keep_leases()
    assert [p.rate for p in pacers] == pytest.approx([10.0, 10.0]), "two live heartbeats: half each"
    clock.now += LEASE + 1  # `a` died without a word
    await b.keep_leases()
    assert pacers[1].rate == pytest.approx(20.0)


def test_a_pacer_slows_from_the_slot_already_reserved_when_its_rate_drops() -> None:
    clock = Clock(1_000.0)
    pacer = Pacer(10.0, clock=clock)
    assert pacer.reserve() == 0.0
    pacer.set_rate(5.0)
    assert pacer.reserve() == pytest.approx(0.2), "the next slot is one new interval after the last"
    assert pacer.share(2) == pytest.approx(5.0)
    assert pacer.share(1) == pytest.approx(10.0)
    with pytest.raises(ValueError):
        pacer.set_rate(0.0)


# -- PostgreSQL: what several live processes on one database meet ------------------------------------


@pytest.fixture
async def pg_stores(postgres_store_url: str, clock: Clock) -> AsyncIterator[tuple[JobStore, JobStore]]:
    """Two processes on one PostgreSQL database: two stores, each with its own pool."""
    first = await JobStore.open_url(postgres_store_url, clock=clock)
    second = await JobStore.open_url(postgres_store_url, clock=clock)
    yield first, second
    await first.close()
    await second.close()


async def test_claims_racing_on_two_pools_take_every_job_exactly_once(
    pg_stores: tuple[JobStore, JobStore], clock: Clock
) -> None:
    """Many claims at once from two processes, each a transaction on its own connection: disjoint, and complete.

    Two guards keep the claims disjoint, each enough alone (checked by removing one, then both): the write
    transaction's advisory lock (one claim at a time) and the claim's FOR UPDATE SKIP LOCKED (a row another
    claim locked is skipped, one it took meanwhile is re-checked and no longer matches). With neither, two
    claims took one job.
    """
    first, second = pg_stores
    dead = lease("dead")
    jobs = [await in_state(first, S.PENDING, dead) for _ in range(40)]
    clock.now += LEASE + 1
    holders = [(first, lease("b")), (first, lease("c")), (second, lease("d")), (second, lease("e"))]

    rounds = await asyncio.gather(*(store.claim_jobs(holder, limit=3) for store, holder in holders * 5))

    claimed = [(job.id, job.lease_owner) for jobs_claimed, _ in rounds for job in jobs_claimed]
    ids = [job_id for job_id, _ in claimed]
    assert len(ids) == len(set(ids)), "no job claimed twice"
    assert sorted(ids) == [job.id for job in jobs], "every claimable job claimed"
    for job_id, owner in claimed:
        assert (await second.get(job_id)).lease_owner == owner, "held by the process that was told it took it"


async def test_leases_are_renewed_before_the_worker_starts(
    stores: tuple[JobStore, JobStore], clock: Clock, tmp_path: Path
) -> None:
    """Commands run (and write requests holding the lease) before every shard is ready and the worker starts:
    the renewals start at setup, once however often they are asked for."""
    first, _second = stores
    quick = Lease("early", seconds=0.3)
    worker = JobWorker(first, MagicMock(spec=VideoServiceClient), RecordingDeliverer(),
                       WorkerConfig(storage_dir=tmp_path), clock=clock, lease=quick)
    worker.start_leases()
    worker.start_leases()
    try:
        async with asyncio.timeout(5):
            while not await first.fetch_all("SELECT owner FROM processes WHERE owner = ?", ("early",)):
                await asyncio.sleep(0.05)
        assert not worker.running, "the worker itself has not started"
        assert len([t for t in asyncio.all_tasks() if t.get_name() == "leases"]) == 1
    finally:
        await worker.stop()


@pytest.mark.parametrize("skew", [2 * LEASE, -2 * LEASE], ids=["ahead", "behind"])
async def test_hosts_whose_clocks_disagree_count_leases_on_the_database_servers_clock(
    postgres_store_url: str, skew: float, caplog: pytest.LogCaptureFixture
) -> None:
    """A process on a host whose clock runs two leases ahead (or behind) of the others': on its own clock it would
    take a live process's jobs at start-up (ahead), or write leases already expired for the others (behind). Both
    follow the server's clock, and neither takes the other's live jobs. (Checked by opening both stores without
    following the server's clock: the host ahead takes the job, and the right one takes the job of a host behind.)"""
    right = await JobStore.open_url(postgres_store_url, follow_database_clock=True)
    shift = [skew]
    off = await JobStore.open_url(postgres_store_url, clock=lambda: time.time() + shift[0], follow_database_clock=True)
    try:
        a, b = lease("right"), lease("off")
        await right.renew_leases(a)
        held_by_right = await in_state(right, S.PENDING, a)
        with caplog.at_level("WARNING", logger="bot.store.jobs"):
            # The host off the clock starts: its take-over of dead processes' jobs comes first.
            assert await off.recover_after_restart(b) == [], "a live process's job is not a dead one's"
            held_by_off = await in_state(off, S.PENDING, b)
            shift[0] = 2 * skew  # its clock jumps again: each renewal measures it anew
            await off.renew_leases(b)
        assert await off.claim_jobs(b, limit=10) == ([], []), "the live process's job stays with it"
        assert await right.claim_jobs(a, limit=10) == ([], []), "so does the job of the process off the clock"
        assert (await right.renew_leases(a)).held == {held_by_right.id}
        assert (await off.renew_leases(b)).held == {held_by_off.id}
        # Its lease is written on the server's clock, where the other process reads it.
        expires = (await right.get(held_by_off.id)).lease_expires_at
        assert expires is not None and abs(expires - (time.time() + LEASE)) < 5
        warnings = [record.getMessage() for record in caplog.records if "clock is" in record.getMessage()]
        assert len(warnings) == 1, "said once, by the host off the clock"
        assert f"s {'ahead of' if skew > 0 else 'behind'} the database server's" in warnings[0]
        assert float(warnings[0].split()[4]) == pytest.approx(abs(skew), abs=1)
    finally:
        await right.close()
        await off.close()


async def test_the_bots_store_on_postgresql_follows_the_servers_clock(postgres_store_url: str, tmp_path: Path) -> None:
    """The composition root opens the store so: a host two leases ahead still writes leases on the server's clock."""
    settings = bot_settings("http://127.0.0.1:9", SIM_KEY, tmp_path / "unused.sqlite3", DATABASE_URL=postgres_store_url)
    store = await open_bot_store(settings, clock=lambda: time.time() + 2 * LEASE)
    try:
        holder = lease("bot")
        await store.renew_leases(holder)
        job = await in_state(store, S.PENDING, holder)
        assert job.lease_expires_at is not None and abs(job.lease_expires_at - (time.time() + LEASE)) < 5
    finally:
        await store.close()
