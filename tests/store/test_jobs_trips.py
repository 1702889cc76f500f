"""Trips to aiosqlite's thread on the hot path of every job: each one wakes the event loop (issue 14's CPU).

Counted by wrapping aiosqlite's one entry to its thread; what the statements do is tested in test_store.py.
"""

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bot.store.jobs import Admission, AdmissionRefused, JobState, JobStore, NewJob, SpendCap
from bot.store.servers import ServerStore
from bot.store.sqlite import SqliteDatabase

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
    assert trips.count == 1  # BEGIN, INSERT … RETURNING, COMMIT in one trip: no read after the commit
    assert job == await store.get(job.id)


async def test_a_request_let_in_by_its_guardrails_is_one_trip_and_a_refused_one_two(
    store: JobStore, trips: Trips
) -> None:
    rules = Admission(cooldown_seconds=60.0, max_active_jobs=1, price_yen=250,
                      caps=(SpendCap("guild_daily_cap", 10_000, 0.0, 2e9),))
    await store.add_submission(new_job(), rules)
    assert trips.count == 1, "the guardrails are conditions of the INSERT itself"
    trips.count = 0
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), rules)
    assert refused.value.code == "cooldown"
    assert trips.count == 2, "the write that let nothing in, then one read of why"


async def test_fetch_all_is_one_trip(store: JobStore, trips: Trips) -> None:
    await store.add_submission(new_job())
    trips.count = 0
    rows = await store.fetch_all("SELECT prompt, user_id FROM jobs")
    assert trips.count == 1
    assert [dict(row) for row in rows] == [{"prompt": "a cat", "user_id": 1}]


async def test_only_moves_that_are_redone_if_lost_skip_the_wait_for_the_disk(store: JobStore) -> None:
    database = store.database
    assert isinstance(database, SqliteDatabase)
    said: list[str] = []
    await database._in_thread(lambda connection: connection.set_trace_callback(said.append))  # on its thread
    job = await store.add_submission(new_job())
    for target in (S.SUBMITTING, S.PENDING, S.IN_PROGRESS, S.COMPLETED, S.DOWNLOADED, S.DELIVERED):
        said.clear()
        await store.transition(job.id, target, **({"service_job_id": "v1"} if target == S.PENDING else {}))
        waits = "PRAGMA synchronous=NORMAL" not in said
        assert waits == (target not in {S.IN_PROGRESS, S.COMPLETED, S.DOWNLOADED}), target
    retried = await store.add_submission(new_job())
    for target in (S.SUBMITTING, S.PENDING, S.COMPLETED):
        await store.transition(retried.id, target, **({"service_job_id": "v2"} if target == S.PENDING else {}))
    await store.update(retried.id, step_attempts=2)
    said.clear()
    await store.transition(retried.id, S.DOWNLOADED, file_path="v.mp4", step_attempts=0, step_failing_since=None)
    assert "PRAGMA synchronous=NORMAL" not in said, "a download that resets a retry count must survive a power cut"


async def test_a_requests_server_rules_are_read_in_one_trip(store: JobStore, trips: Trips) -> None:
    rules = ServerStore(store)
    trips.count = 0
    await rules.request_rules(10, 1)
    assert trips.count == 1
