"""bot/ops/heap.py: start-up frozen out of the collector's scans, and full collections on the bot's schedule."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from bot.ops.heap import NEVER, CollectionPolicy, FullCollections, freeze_start_up

POLICY = CollectionPolicy(every_seconds=60, check_seconds=10, quiet_below=100, at_most_seconds=600)


@pytest.fixture
def unfrozen() -> Iterator[None]:
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process goes on collecting what later tests make
    gc.set_threshold(*thresholds)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_start_up_objects_leave_the_collectors_scans_and_its_garbage_goes_first(unfrozen: None) -> None:
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    garbage = Cycle()
    kept = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    freeze_start_up()
    frozen = gc.get_freeze_count()
    assert frozen > 1000, "the modules, classes and functions start-up made"
    gc.collect()
    assert gc.get_freeze_count() == frozen, "a full collection no longer walks them"
    assert gone() is None, "start-up's garbage was collected, not frozen"
    assert kept.me is kept


def test_a_full_collection_waits_its_interval_then_for_a_quiet_process_at_most_its_limit() -> None:
    clock, tasks, collected = Clock(), [5_000], []
    collections = FullCollections(POLICY, clock=clock, tasks_alive=lambda: tasks[0],
                                  collect=lambda: collected.append(clock.now))
    clock.now += 59
    tasks[0] = 1
    assert not collections.collect_if_due(), "never before its interval, however quiet"
    clock.now += 1
    tasks[0] = 5_000
    assert not collections.collect_if_due(), "a backlog of thousands of tasks: not now"
    clock.now += 530
    tasks[0] = 100
    assert not collections.collect_if_due(), "quiet means fewer than quiet_below"
    tasks[0] = 99
    assert collections.collect_if_due()
    assert collected == [1590.0]
    clock.now += 30
    assert not collections.collect_if_due(), "the interval counts from the last collection"
    tasks[0] = 5_000
    clock.now += 569
    assert not collections.collect_if_due()
    clock.now += 1
    assert collections.collect_if_due(), "a backlog that outlasts at_most_seconds meets one anyway"
    assert collected == [1590.0, 2190.0]


async def test_start_turns_cpythons_full_collections_off_until_stop(unfrozen: None) -> None:
    gc.set_threshold(700, 10, 10)
    collections = FullCollections(POLICY)
    collections.start()
    try:
        assert gc.get_threshold() == (700, 10, NEVER)
        assert gc.get_freeze_count() > 1000, "start-up frozen first"
        full = []

        def count(phase: str, info: dict[str, int]) -> None:
            if phase == "start" and info["generation"] == 2:
                full.append(info)

        gc.callbacks.append(count)
        try:
            # Enough surviving objects for CPython's own trigger (a quarter more than the last full collection's).
            kept = [[index] for index in range(300_000)]
            assert kept and full == [], "no full collection of CPython's own"
        finally:
            gc.callbacks.remove(count)
    finally:
        await collections.stop()
    assert gc.get_threshold() == (700, 10, 10), "the automatic trigger is back"


async def test_the_schedule_collects_and_survives_a_failing_collection(unfrozen: None) -> None:
    calls: list[str] = []

    def collect() -> None:
        calls.append("collect")
        if len(calls) == 1:
            raise RuntimeError("a finalizer went wrong")

    collections = FullCollections(
        CollectionPolicy(every_seconds=0.02, check_seconds=0.01, quiet_below=1_000, at_most_seconds=1),
        collect=collect,
    )
    collections.start()
    try:
        async with asyncio.timeout(5):
            while len(calls) < 2:
                await asyncio.sleep(0.01)
    finally:
        await collections.stop()
    assert calls == ["collect", "collect"]


@pytest.mark.parametrize("change", [
    {"check_seconds": 0}, {"check_seconds": 61}, {"every_seconds": 601}, {"quiet_below": 0},
])
def test_a_policy_that_cannot_work_is_refused(change: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="must"):
        replace(POLICY, **change)
