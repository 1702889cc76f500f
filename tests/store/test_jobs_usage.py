"""The store's rows for usage reports, and marking a failed job credited."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from bot.core.spending import COUNTED_AT, outcome_of
from bot.store.jobs import CreditRefused, Job, JobState, JobStore, NewJob
from tests.conftest import Clock, StoreOpener

S = JobState
GUILD = 10
OTHER_GUILD = 11
ADMIN = 99




@pytest.fixture
def clock() -> Clock:
    return Clock(0.0)


@pytest.fixture
async def store(open_store: StoreOpener, clock: Clock) -> JobStore:
    """A fresh store of each backend (SQLite and PostgreSQL)."""
    return await open_store(clock=clock)


async def job_in(
    store: JobStore, clock: Clock, state: JobState, *, at: float, created: float | None = None, user: int = 1,
    guild: int = GUILD, charge: int = 250,
) -> Job:
    """A job in `state`, requested at `created` (default `at`) and, when charged, accepted at `at`."""
    clock.now = at if created is None else created
    job = await store.add_submission(NewJob(model="m", prompt="p", seed=None, user_id=user, guild_id=guild,
                                            channel_id=1))
    if state in (S.REJECTED, S.INTERRUPTED):
        return await store.transition(job.id, state)
    if state == S.RECEIVED:
        return job
    await store.transition(job.id, S.SUBMITTING)
    if state in (S.SUBMITTING, S.UNKNOWN):
        return job if state == S.SUBMITTING else await store.transition(job.id, S.UNKNOWN)
    clock.now = at
    await store.mark_accepted(job.id, f"vid_{job.id}", charge, next_poll_at=at + 20)
    steps = {
        S.PENDING: [], S.IN_PROGRESS: [S.IN_PROGRESS], S.FAILED: [S.FAILED], S.STALLED: [S.STALLED],
        S.DELIVERED: [S.COMPLETED, S.DOWNLOADED, S.DELIVERED],
        S.UNDELIVERABLE: [S.COMPLETED, S.DOWNLOADED, S.UNDELIVERABLE],
    }[state]
    for step in steps:
        job = await store.transition(job.id, step, last_error="boom" if step == S.FAILED else None)
    return await store.get(job.id)


async def test_the_migration_adds_the_credit_columns(tmp_path: Path) -> None:
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as raw:
        columns = {row[1]: row[2] for row in raw.execute("PRAGMA table_info(jobs)")}
    assert columns["credited_at"] == "REAL" and columns["credited_by"] == "INTEGER"
    assert (await job_in(store, Clock(0.0), S.FAILED, at=1)).credited_at is None
    await store.close()


async def test_usage_jobs_are_the_charged_ones_by_acceptance_and_the_unknown_ones_by_request(
    store: JobStore, clock: Clock
) -> None:
    inside = [
        await job_in(store, clock, S.DELIVERED, at=100),  # the first instant belongs to the window
        await job_in(store, clock, S.FAILED, at=150),
        await job_in(store, clock, S.IN_PROGRESS, at=160, user=2),
        await job_in(store, clock, S.UNDELIVERABLE, at=170),
        await job_in(store, clock, S.STALLED, at=199.5),
        await job_in(store, clock, S.PENDING, at=101, created=95),  # asked before, charged inside
        await job_in(store, clock, S.UNKNOWN, at=120),
        await job_in(store, clock, S.SUBMITTING, at=130),
    ]
    outside = [
        await job_in(store, clock, S.DELIVERED, at=200),  # the end is not in the window
        await job_in(store, clock, S.DELIVERED, at=99.9),
        await job_in(store, clock, S.PENDING, at=205, created=150),  # asked inside, charged after
        await job_in(store, clock, S.UNKNOWN, at=99),
        await job_in(store, clock, S.UNKNOWN, at=200),
        await job_in(store, clock, S.REJECTED, at=110),
        await job_in(store, clock, S.INTERRUPTED, at=111),
        await job_in(store, clock, S.RECEIVED, at=112),
        await job_in(store, clock, S.DELIVERED, at=150, guild=OTHER_GUILD),
        await job_in(store, clock, S.UNKNOWN, at=150, guild=OTHER_GUILD),
    ]

    found = await store.usage_jobs(GUILD, 100, 200)

    assert sorted(job.id for job in found) == sorted(job.id for job in inside)
    assert not {job.id for job in found} & {job.id for job in outside}
    # Oldest first, by acceptance time (request time for the uncharged).
    times = [job.accepted_at or job.created_at for job in found]
    assert times == sorted(times)


async def test_usage_jobs_of_one_member(store: JobStore, clock: Clock) -> None:
    mine = await job_in(store, clock, S.DELIVERED, at=10, user=1)
    my_unknown = await job_in(store, clock, S.UNKNOWN, at=11, user=1)
    await job_in(store, clock, S.DELIVERED, at=12, user=2)
    await job_in(store, clock, S.UNKNOWN, at=13, user=2)

    assert [job.id for job in await store.usage_jobs(GUILD, 0, 100, user_id=1)] == [mine.id, my_unknown.id]
    assert len(await store.usage_jobs(GUILD, 0, 100)) == 4


async def test_the_charged_rows_sum_to_the_ledger(store: JobStore, clock: Clock) -> None:
    for at, state, charge in ((10, S.DELIVERED, 250), (11, S.FAILED, 250), (12, S.PENDING, 400),
                              (13, S.UNKNOWN, 0), (14, S.REJECTED, 0)):
        await job_in(store, clock, state, at=at, charge=charge)

    found = await store.usage_jobs(GUILD, 0, 100)

    charged = [job for job in found if job.charged_yen > 0]
    assert (len(charged), sum(job.charged_yen for job in charged)) == await store.ledger(guild_id=GUILD) == (3, 900)


async def test_a_failed_charged_job_is_credited_once_by_whom_and_when(store: JobStore, clock: Clock) -> None:
    failed = await job_in(store, clock, S.FAILED, at=50)
    ledger = await store.ledger(guild_id=GUILD)
    clock.now = 1234.5

    credited = await store.mark_credited(failed.id, guild_id=GUILD, by_user_id=ADMIN)

    assert (credited.credited_at, credited.credited_by) == (1234.5, ADMIN)
    assert credited.state == S.FAILED and credited.charged_yen == 250
    # The ledger keeps saying what the service charged.
    assert await store.ledger(guild_id=GUILD) == ledger
    clock.now = 2000
    with pytest.raises(CreditRefused) as again:
        await store.mark_credited(failed.id, guild_id=GUILD, by_user_id=ADMIN + 1)
    assert again.value.code == "already_credited"
    kept = await store.get(failed.id)
    assert (kept.credited_at, kept.credited_by) == (1234.5, ADMIN)


async def test_a_stalled_job_can_be_credited_too(store: JobStore, clock: Clock) -> None:
    stalled = await job_in(store, clock, S.STALLED, at=50)

    assert (await store.mark_credited(stalled.id, guild_id=GUILD, by_user_id=ADMIN)).credited_by == ADMIN


@pytest.mark.parametrize("state", [S.DELIVERED, S.PENDING, S.UNDELIVERABLE, S.UNKNOWN, S.SUBMITTING, S.REJECTED,
                                   S.INTERRUPTED, S.RECEIVED])
async def test_only_a_failed_job_can_be_credited(store: JobStore, clock: Clock, state: JobState) -> None:
    job = await job_in(store, clock, state, at=50)

    with pytest.raises(CreditRefused) as refused:
        await store.mark_credited(job.id, guild_id=GUILD, by_user_id=ADMIN)

    assert refused.value.code == "not_failed"
    assert (await store.get(job.id)).credited_at is None


async def test_a_failed_job_that_was_never_charged_cannot_be_credited(store: JobStore, clock: Clock) -> None:
    # The store's CHECK allows a zero charge; a job that cost nothing has nothing to refund.
    free = await job_in(store, clock, S.FAILED, at=50, charge=0)

    with pytest.raises(CreditRefused) as refused:
        await store.mark_credited(free.id, guild_id=GUILD, by_user_id=ADMIN)

    assert refused.value.code == "not_failed"


async def test_another_servers_job_or_a_missing_one_is_not_found(store: JobStore, clock: Clock) -> None:
    theirs = await job_in(store, clock, S.FAILED, at=50, guild=OTHER_GUILD)

    for job_id in (theirs.id, 9999):
        with pytest.raises(CreditRefused) as refused:
            await store.mark_credited(job_id, guild_id=GUILD, by_user_id=ADMIN)
        assert refused.value.code == "not_found"
    assert (await store.get(theirs.id)).credited_at is None


async def test_two_admins_at_once_credit_it_once(store: JobStore, clock: Clock) -> None:
    failed = await job_in(store, clock, S.FAILED, at=50)

    results = await asyncio.gather(
        *(store.mark_credited(failed.id, guild_id=GUILD, by_user_id=ADMIN + i) for i in range(5)),
        return_exceptions=True,
    )

    winners = [r for r in results if isinstance(r, Job)]
    assert len(winners) == 1
    assert all(isinstance(r, CreditRefused) and r.code == "already_credited" for r in results if r not in winners)
    assert (await store.get(failed.id)).credited_by == winners[0].credited_by


@pytest.mark.parametrize("charge", [0, 250])
async def test_the_reports_rows_are_the_python_rules_rows_for_every_state(store: JobStore, charge: int) -> None:
    """bot/core/spending.py's rules, read in Python, and the store's SQL rendering of them pick the same rows.

    Each state, charged or not, twice: requested inside the window and accepted outside it, and the other way
    round. Rows are written as they are, past the transitions, so every combination is there.
    """
    start, end = 1_000.0, 2_000.0
    expected: set[int] = set()
    for state in S:
        for created, accepted in ((1_500.0, 2_500.0), (500.0, 1_500.0)):
            job = await store.add_submission(NewJob(model="m", prompt="p", seed=None, user_id=1, guild_id=GUILD,
                                                    channel_id=1))
            async with store.transaction():
                await store.execute(
                    "UPDATE jobs SET state = ?, charged_yen = ?, created_at = ?, accepted_at = ? WHERE id = ?",
                    (state, charge, created, accepted if charge else None, job.id),
                )
            kind = outcome_of(state, charge)
            if kind is not None and start <= getattr(await store.get(job.id), COUNTED_AT[kind]) < end:
                expected.add(job.id)

    assert {job.id for job in await store.usage_jobs(GUILD, start, end)} == expected
    assert expected  # the rules count something in either case: the comparison is not of two empty sets
