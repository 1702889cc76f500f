"""Receipts of waiting jobs: a place in line and a ready time, each at most once a minute, all within a budget."""

from __future__ import annotations

from pathlib import Path

from bot.jobs.progress import EditBudget, ProgressRefresher, RefreshLimits
from bot.store.jobs import JobState, JobStore, NewJob
from tests.conftest import Clock
from tests.jobs.worker_helpers import RecordingDeliverer


def test_the_edit_budget_holds_the_rate() -> None:
    clock = Clock(0.0)
    budget = EditBudget(2.0, clock)
    assert [budget.take() for _ in range(3)] == [True, True, False]
    clock.now += 0.5
    assert [budget.take() for _ in range(2)] == [True, False]
    clock.now += 100  # an idle bot does not save up a burst
    assert sum(budget.take() for _ in range(10)) == 2


async def waiting_job(store: JobStore, clock: Clock, n: int, *, token_alive: bool = True) -> int:
    job = await store.add_submission(NewJob(
        model="m", prompt=f"boat {n}", seed=None, user_id=n, guild_id=1, channel_id=1, interaction_token="tok",
        interaction_expires_at=clock.now + (900 if token_alive else -1),
    ))
    await store.transition(job.id, JobState.SUBMITTING)
    await store.mark_accepted(job.id, f"vid-{n}", 250, clock.now)
    await store.update(job.id, reply_message_id=1000 + n)
    return job.id


async def test_receipts_are_refreshed_oldest_first_once_a_minute_within_the_budget(tmp_path: Path) -> None:
    clock = Clock(1_800_000_000.0)
    store = await JobStore.open(tmp_path / "bot.sqlite3", clock=clock)
    deliverer = RecordingDeliverer(clock=clock)
    refresher = ProgressRefresher(store, deliverer, lambda model, accepted_at: accepted_at + 120,
                                  limits=RefreshLimits(every_seconds=60, edits_per_second=2), clock=clock)
    try:
        ids = [await waiting_job(store, clock, n) for n in range(1, 6)]
        expired = await waiting_job(store, clock, 9, token_alive=False)
        assert await refresher.refresh() == 0  # nothing is a minute old yet

        clock.now += 60
        edited: list[int] = []
        for _ in range(3):  # 2 edits a second: 5 receipts take three rounds a second apart
            await refresher.refresh()
            edited = [edit.job_id for edit in deliverer.progress]
            clock.now += 1
        assert edited == ids  # each once, oldest first; the expired token's receipt never
        assert expired not in edited
        first = deliverer.progress[0]
        assert first.position == 1 and first.ready_at == 1_800_000_000.0 + 120
        assert [edit.position for edit in deliverer.progress] == [1, 2, 3, 4, 5]

        clock.now += 30
        assert await refresher.refresh() == 0  # none again within the minute
        clock.now += 30
        assert await refresher.refresh() == 2  # a minute on: again, within the budget
    finally:
        await store.close()
