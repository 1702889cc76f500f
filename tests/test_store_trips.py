"""Trips to aiosqlite's thread on the hot path of every job: each one wakes the event loop (issue 14's CPU).

Counted by wrapping aiosqlite's one entry to its thread; what the statements do is tested in test_store.py.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bot.store import JobState, JobStore, NewJob

S = JobState


class Trips:
    def __init__(self) -> None:
        self.count = 0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[JobStore]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    yield store
    await store.close()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Trips:
    counter = Trips()
    real: Callable[..., Awaitable[Any]] = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        counter.count += 1
        return await real(self, fn, *args, **kwargs)

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return counter


def new_job() -> NewJob:
    return NewJob(model="m", prompt="a cat", seed=7, user_id=1, guild_id=10, channel_id=100)


async def test_a_transition_is_one_statement_in_its_transaction(store: JobStore, trips: Trips) -> None:
    job = await store.add_submission(new_job())
    trips.count = 0
    moved = await store.transition(job.id, S.SUBMITTING)
    assert trips.count == 1  # BEGIN, one UPDATE … RETURNING, COMMIT in one trip: no read after the commit
    assert moved.state == S.SUBMITTING
    assert (await store.get(job.id)).state == S.SUBMITTING  # and it is committed


async def test_an_audited_transition_keeps_its_event_in_the_same_transaction(store: JobStore, trips: Trips) -> None:
    job = await store.add_submission(new_job())
    await store.transition(job.id, S.SUBMITTING)
    trips.count = 0
    accepted = await store.mark_accepted(job.id, "vid_1", 50, next_poll_at=123.0)
    # BEGIN, the UPDATE (unless another request holds the id), the event, COMMIT in one trip; the row comes back
    # from the UPDATE.
    assert trips.count == 1
    assert accepted.state == S.PENDING and accepted.service_job_id == "vid_1" and accepted.next_poll_at == 123.0
    events = await store.fetch_all("SELECT kind, job_id FROM events")
    assert [dict(row) for row in events] == [{"kind": "accepted", "job_id": job.id}]


async def test_a_new_request_comes_back_from_its_insert(store: JobStore, trips: Trips) -> None:
    job = await store.add_submission(new_job())
    assert trips.count == 2  # BEGIN with the INSERT … RETURNING, then COMMIT: no read after the commit
    assert job == await store.get(job.id)


async def test_fetch_all_is_one_trip(store: JobStore, trips: Trips) -> None:
    await store.add_submission(new_job())
    trips.count = 0
    rows = await store.fetch_all("SELECT prompt, user_id FROM jobs")
    assert trips.count == 1
    assert [dict(row) for row in rows] == [{"prompt": "a cat", "user_id": 1}]
