"""The request pacer: a burst, then one call per 1/rate seconds."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

import pytest

from bot.pacing import Pacer


class FakeClock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def start_times(pacer: Pacer, clock: FakeClock, count: int) -> list[float]:
    """When each of `count` callers arriving together may go."""
    return [clock.now + pacer.reserve() for _ in range(count)]


def test_a_burst_then_one_call_per_interval() -> None:
    clock = FakeClock()
    pacer = Pacer(4.0, burst=3, clock=clock)

    starts = start_times(pacer, clock, 8)

    assert starts[:3] == [clock.now] * 3
    gaps = [later - earlier for earlier, later in pairwise(starts[2:])]
    assert gaps == pytest.approx([0.25] * 5)
    assert pacer.rate == pytest.approx(4.0)


def test_without_burst_every_call_is_spaced() -> None:
    clock = FakeClock()
    pacer = Pacer(10.0, clock=clock)

    starts = start_times(pacer, clock, 5)

    assert [s - clock.now for s in starts] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])


def test_the_burst_comes_back_after_a_quiet_spell() -> None:
    clock = FakeClock()
    pacer = Pacer(2.0, burst=2, clock=clock)
    start_times(pacer, clock, 6)  # drains the burst and queues callers 2.0 s ahead

    clock.now += 3.0  # the last queued caller went at +2.0 s; a second of silence since
    assert [pacer.reserve() for _ in range(3)] == pytest.approx([0.0, 0.0, 0.5])


def test_calls_slower_than_the_rate_never_wait() -> None:
    clock = FakeClock()
    pacer = Pacer(5.0, clock=clock)
    for _ in range(10):
        assert pacer.reserve() == 0.0
        clock.now += 0.2


def test_a_partly_refilled_bucket_spaces_the_next_call() -> None:
    clock = FakeClock()
    pacer = Pacer(10.0, burst=2, clock=clock)
    start_times(pacer, clock, 2)
    clock.now += 0.05  # half an interval later
    assert pacer.reserve() == pytest.approx(0.05)


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_nonsense_settings_are_refused(rate: float, burst: int) -> None:
    with pytest.raises(ValueError):
        Pacer(rate, burst=burst)


async def test_concurrent_waiters_go_one_interval_apart() -> None:
    pacer = Pacer(25.0)  # 40 ms apart
    finished: list[float] = []

    async def call() -> None:
        await pacer.wait()
        finished.append(time.monotonic())

    started = time.monotonic()
    await asyncio.gather(*(call() for _ in range(5)))

    assert finished[0] - started < 0.03
    gaps = [later - earlier for earlier, later in pairwise(finished)]
    assert min(gaps) >= 0.04 - 0.005
    assert finished[-1] - started >= 4 * 0.04 - 0.005
