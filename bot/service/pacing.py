"""Pacing of requests to a rate-limited service: stay under the limit instead of discovering it."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable


class Pacer:
    """At most `rate` calls per second on average, with short bursts of up to `burst` calls.

    A generic cell-rate algorithm: each caller reserves the next free moment without awaiting
    first, so concurrent callers never race for the same moment. `slack` (a share of one interval) is
    how late a caller may come and still keep the schedule: without it, every late wake-up pushed every
    later slot out, and the budget shrank by the loop's lateness.
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: int = 1,
        slack: float = 0.0,
        turns: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0 or burst < 1 or turns < 1 or not 0.0 <= slack < 1.0:
            raise ValueError("rate must be above 0, burst and turns at least 1, slack from 0 to below 1")
        self._interval = 1.0 / rate
        self._burst = burst
        self._slack = slack
        self._tolerance = (burst - 1 + slack) * self._interval
        self._key_rate = rate  # the whole limit, of which `share` keeps a part
        self._clock = clock
        self._sleep = sleep
        self._theoretical_arrival = 0.0
        # The same account kept on the moments calls really went (a late wake-up goes later than its slot).
        self._sent_arrival = 0.0
        self._turns = turns  # turns taken ahead of their request, outstanding at once
        self._key_turns = turns  # for the whole limit, of which `share` keeps a part as it does of the rate
        self._ahead: Turns | None = None  # made on first use, inside the running loop

    @property
    def rate(self) -> float:
        return 1.0 / self._interval

    def set_rate(self, rate: float) -> None:
        """Pace at `rate` from now on, the slot already reserved included: a lower rate pushes it out.

        Safe between any two calls (one event loop): the next free moment moves by the change of spacing.
        """
        if rate <= 0:
            raise ValueError("rate must be above 0")
        change = 1.0 / rate - self._interval
        self._interval = 1.0 / rate
        self._tolerance = (self._burst - 1 + self._slack) * self._interval
        if self._theoretical_arrival:
            self._theoretical_arrival += change
        if self._sent_arrival:
            self._sent_arrival += change

    def share(self, processes: int) -> float:
        """The service's limit belongs to the key: pace at an equal share among `processes` live processes.

        Returns the rate now paced at.
        """
        rate = self._key_rate / max(1, processes)
        if rate != self.rate:
            self.set_rate(rate)
        # Turns bound how many late creates may leave at once: per process, its share of them too.
        self._turns = max(1, self._key_turns // max(1, processes))
        if self._ahead is not None:
            self._ahead.set_limit(self._turns)
        return rate

    def reserve(self) -> float:
        """Claim the next slot; returns how many seconds to wait for it."""
        now = self._clock()
        arrival = max(self._theoretical_arrival, now)
        self._theoretical_arrival = arrival + self._interval
        return max(0.0, arrival - self._tolerance - now)

    def ready_in(self) -> float:
        """Seconds until a request reserved now could leave, without reserving anything."""
        now = self._clock()
        return max(0.0, max(self._theoretical_arrival, now) - self._tolerance - now, self._sent_in(now))

    def _sent_in(self, now: float) -> float:
        return max(0.0, self._sent_arrival - self._tolerance - now)

    async def wait(self) -> None:
        delay = self.reserve()
        while True:
            if delay > 0:
                await self._sleep(delay)
            # A loop busy for longer than the waits wakes every sleeper at once, and they would leave
            # together: hold to the rate on the moments calls really leave (measured in bench/: a
            # 70 ms stall at 200 calls/s drew a 429 from a limit 25 % above the rate).
            now = self._clock()
            delay = self._sent_in(now)
            if delay <= 0:
                self._sent_arrival = max(self._sent_arrival, now) + self._interval
                return

    async def take_turn(self) -> Turn:
        """Wait for a slot for a request sent a moment later (after a write-ahead); release it once sent.

        Its slot may pass during the write, and the request then goes out late. Only `ahead` turns are out
        at a time, so late requests never come in a clump: measured in bench/, up to 80 creates went out
        in one second at a 20/s pacing while writes queued, and drew 429s from a 25/s platform limit.
        A turn that is never used frees itself when its task ends, and after TURN_EXPIRY_S at the latest.
        """
        if self._ahead is None:
            self._ahead = Turns(self._turns)
        await self._ahead.take()
        turn = Turn(self._ahead)
        try:
            await self.wait()
        except BaseException:
            turn.release()
            raise
        asyncio.get_running_loop().call_later(TURN_EXPIRY_S, turn.release)
        task = asyncio.current_task()
        if task is not None:
            task.add_done_callback(lambda _task: turn.release())
        return turn


class Turns:
    """At most `limit` turns out at once, handed out first come, first served; the limit may change while
    turns are out (a lower one holds back the next turns until enough are given back).

    Every change that frees a turn hands it out at once, so while one is free nobody waits in line.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.out = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    async def take(self) -> None:
        if self.out < self.limit and not self._waiting:
            self.out += 1
            return
        handed = asyncio.get_running_loop().create_future()
        self._waiting.append(handed)
        try:
            await handed  # counted in `out` by whoever handed it over
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():
                self.give_back()  # handed over and cancelled in the same moment: the next one has it
            elif handed in self._waiting:
                self._waiting.remove(handed)
            raise

    def give_back(self) -> None:
        self.out -= 1
        self._hand_out()

    def set_limit(self, limit: int) -> None:
        self.limit = limit
        self._hand_out()

    def _hand_out(self) -> None:
        while self._waiting and self.out < self.limit:
            handed = self._waiting.popleft()
            if not handed.done():  # a waiter cancelled meanwhile is passed over
                self.out += 1
                handed.set_result(None)


class Turn:
    """A slot taken ahead of its request; `release` (once the request is sent) lets the next turn be taken."""

    def __init__(self, turns: Turns | None) -> None:
        """`turns` None: a turn of no pacer, nothing to give back."""
        self._turns = turns

    @property
    def released(self) -> bool:
        return self._turns is None

    def release(self) -> None:
        if self._turns is not None:
            self._turns.give_back()
            self._turns = None


#: Seconds after which a turn taken and never used is given back anyway (its task normally ends sooner).
TURN_EXPIRY_S = 5.0


#: The bot's requests go out strictly spaced: a burst on top of the configured rate is exactly what
#: trips an unpublished platform limit (measured in bench/: burst = rate gave 429s at 20/s under 25/s).
SERVICE_BURST = 1
#: A request up to a quarter of an interval late keeps its slot: two requests are never closer than 3/4 of
#: an interval, and no window of the limit holds more than one request over the rate. Measured in bench/
#: at 20/s under a 25/s limit: with none, the run averaged 16.6 requests a second over its span; with it,
#: 18.7, and no 429.
SERVICE_SLACK = 0.25


#: How long a create's turn is expected to be held: the write-ahead's commit, then the request leaving.
TURN_HOLD_S = 0.05


def create_turns(rate: float) -> int:
    """Creates' turns out at once at `rate` (production requests per second): the rate times TURN_HOLD_S.

    One turn at a time caps creates at one per write-ahead whatever the rate: 4 a second at 1,000/s in
    bench/, with 9,000 requests queued behind it. A turn per TURN_HOLD_S of the rate reaches the rate, and a
    write that stalls releases at most that much of the rate's worth at once (one request at 20/s).
    """
    return max(1, int(rate * TURN_HOLD_S))


def service_pacer(max_requests_per_second: float, *, run_rate: float | None = None, burst: int = SERVICE_BURST
                  ) -> Pacer:
    """The pacer the bot puts in front of the video service.

    `run_rate`: the rate it really runs at, for a benchmark that compresses time (the burst, the slack and
    the turns are counts and shares of requests: compressing time leaves them).
    """
    rate = run_rate if run_rate is not None else max_requests_per_second
    return Pacer(rate, burst=burst, slack=SERVICE_SLACK, turns=create_turns(max_requests_per_second))
