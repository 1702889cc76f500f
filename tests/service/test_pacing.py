"""The request pacer: a burst, then one call per 1/rate seconds."""

from __future__ import annotations

import asyncio
import time
from itertools import pairwise

import aiohttp
import pytest

from bot.service.client import VideoServiceClient
from bot.service.pacing import Pacer, Turns, create_turns, service_pacer
from bot.simulator import VideoServiceSimulator
from tests.conftest import SIM_KEY


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


@pytest.mark.parametrize(("slack", "last"), [(0.0, 0.50), (0.25, 0.415)])
async def test_with_slack_a_caller_a_little_late_keeps_the_schedule(slack: float, last: float) -> None:
    """As the worker does: ask when a request may leave, wake 20 ms late, send. Without slack each late wake-up
    moves every later slot out (5 calls take 80 ms more than the rate); with it, the rate is kept."""
    clock = FakeClock(0.0)

    async def sleep(seconds: float) -> None:
        clock.now += seconds

    pacer = Pacer(10.0, slack=slack, clock=clock, sleep=sleep)
    left: list[float] = []
    for _ in range(5):
        clock.now += pacer.ready_in() + 0.02
        await pacer.wait()
        left.append(clock.now)
    assert left[-1] == pytest.approx(last)


def test_slack_never_lets_two_calls_closer_than_its_share_of_an_interval() -> None:
    clock = FakeClock()
    pacer = Pacer(10.0, slack=0.25, clock=clock)

    starts = start_times(pacer, clock, 11)

    gaps = [later - earlier for earlier, later in pairwise(starts)]
    assert min(gaps) == pytest.approx(0.075)
    assert starts[-1] - starts[0] == pytest.approx(1.0 - 0.025), "on average, still one call per interval"


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


async def test_a_turn_taken_ahead_holds_the_next_one_until_its_request_is_sent() -> None:
    pacer = Pacer(1000.0, burst=100, clock=FakeClock())  # the clock stands still, and every slot is free at once
    holding = [asyncio.Event(), asyncio.Event()]
    done = asyncio.Event()

    async def caller(n: int) -> None:
        turn = await pacer.take_turn()
        holding[n].set()
        await done.wait()  # the task lives on without sending
        turn.release()

    first = await pacer.take_turn()
    second = asyncio.create_task(caller(0))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not holding[0].is_set(), "a second create must not get a turn while the first one's is still unused"
    first.release()
    first.release()  # a second release gives nothing back twice
    await holding[0].wait()
    third = asyncio.create_task(caller(1))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not holding[1].is_set(), "the double release above freed one turn only"
    done.set()
    await asyncio.gather(second, third)


@pytest.mark.parametrize(("rate", "turns"), [(1.0, 1), (20.0, 1), (25.0, 1), (100.0, 5), (1000.0, 50)])
def test_creates_turns_grow_with_the_rate_and_stay_one_at_the_default(rate: float, turns: int) -> None:
    assert create_turns(rate) == turns


async def test_the_service_pacer_lets_its_turns_out_at_once_and_holds_the_next() -> None:
    pacer = service_pacer(1000.0)
    turns = [await pacer.take_turn() for _ in range(create_turns(1000.0))]  # 1 ms apart: the rate's own spacing
    extra = asyncio.create_task(pacer.take_turn())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not extra.done(), "one turn more than the rate's share must wait for a create to be sent"
    turns[0].release()
    await asyncio.wait_for(extra, 1.0)
    for turn in turns:
        turn.release()


async def test_a_turn_never_used_is_given_back_when_its_task_ends() -> None:
    pacer = Pacer(1000.0, burst=100, clock=FakeClock())

    async def take_and_fail() -> None:
        await pacer.take_turn()
        raise RuntimeError("the write-ahead failed: no create follows")

    with pytest.raises(RuntimeError):
        await asyncio.create_task(take_and_fail())
    async with asyncio.timeout(1.0):
        turn = await pacer.take_turn()
    assert not turn.released, "a turn lives as long as the task that took it"
    turn.release()


async def test_the_client_gives_the_turn_back_as_it_sends_the_create(
    simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession
) -> None:
    pacer = Pacer(1000.0, burst=100, clock=FakeClock())
    client = VideoServiceClient(http_session, simulator.base_url, SIM_KEY, pacer=pacer)
    all_sent = asyncio.Event()

    async def submit(prompt: str) -> None:
        await client.create(prompt, turn=await client.take_turn())
        if simulator.creates_received == 3:
            all_sent.set()
        await all_sent.wait()  # the task lives on, as a command's does: only the send can free the turn

    async with asyncio.timeout(5.0):
        await asyncio.gather(submit("one"), submit("two"), submit("three"))
    assert simulator.creates_received == 3


async def test_callers_woken_together_by_a_busy_loop_still_leave_one_interval_apart() -> None:
    clock = FakeClock(0.0)
    sleeping: list[asyncio.Future[None]] = []

    async def sleep(seconds: float) -> None:
        # Woken only when the test says so: as a loop that was busy wakes every due sleeper at once.
        woken = asyncio.get_running_loop().create_future()
        sleeping.append(woken)
        await woken

    pacer = Pacer(10.0, clock=clock, sleep=sleep)
    left: list[float] = []

    async def call() -> None:
        await pacer.wait()
        left.append(clock.now)

    calls = [asyncio.create_task(call()) for _ in range(3)]
    for _ in range(5):
        await asyncio.sleep(0)
    assert left == [0.0] and len(sleeping) == 2  # the first went, two wait for 0.1 and 0.2
    clock.now = 1.0  # the loop was busy for a second: both slots passed
    while len(left) < 3:
        for woken in sleeping:
            if not woken.done():
                woken.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)
        if len(left) < 3:
            clock.now += 0.05
    await asyncio.gather(*calls)
    assert left[1] == 1.0
    assert left[2] >= 1.1, "the late sleepers must not leave together"
    assert pacer.ready_in() > 0


async def test_a_process_sharing_the_key_takes_its_share_of_the_turns_too() -> None:
    pacer = Pacer(1000.0, burst=100, turns=4, clock=FakeClock())
    assert pacer.share(2) == 500.0
    held = [await pacer.take_turn() for _ in range(2)]
    third = asyncio.create_task(pacer.take_turn())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not third.done(), "two processes at 4 turns each would let 8 late creates out at once"
    pacer.share(1)  # the other process stopped: its turns come back
    async with asyncio.timeout(1.0):
        held.append(await third)
    for turn in held:
        turn.release()


async def test_a_turn_waiter_cancelled_is_passed_over_and_a_turn_handed_to_one_being_cancelled_goes_on() -> None:
    turns = Turns(1)
    await turns.take()
    cancelled = asyncio.create_task(turns.take())
    nxt = asyncio.create_task(turns.take())
    await asyncio.sleep(0)
    cancelled.cancel()
    turns.give_back()  # in the same moment, before the cancelled waiter ran again
    async with asyncio.timeout(1.0):
        await nxt  # the cancelled waiter was passed over
    assert cancelled.cancelled()
    assert turns.out == 1
    # Handed over and cancelled in the same moment: the turn goes to the next waiter, not lost.
    raced = asyncio.create_task(turns.take())
    last = asyncio.create_task(turns.take())
    await asyncio.sleep(0)
    turns.give_back()  # hands the turn to `raced`, which has not run yet
    raced.cancel()
    with pytest.raises(asyncio.CancelledError):
        await raced
    async with asyncio.timeout(1.0):
        await last
    assert turns.out == 1
