"""When the garbage collector may hold up the event loop.

A full collection walks every object the process holds, on the loop's thread. CPython starts one each time the
objects that survived into the oldest generation have grown by a quarter: exactly while a backlog builds. At
10,000 /video requests waiting for their create's turn (each a task and its chain of coroutines, about 16
objects), five full collections in a row walked up to 170,000 objects and held the loop for 150-300 ms each
(bench/, `ours-10000`). So the bot times them itself: CPython's own trigger for full collections is off, and
`FullCollections` runs one every `every_seconds`, once the process has fewer than `quiet_below` tasks (the backlog
has drained and a collection walks tens of thousands of objects, not hundreds of thousands), or regardless once
`at_most_seconds` have passed, so cyclic garbage cannot pile up while a backlog lasts. The young generations stay
automatic: they walk only what was made since their last collection, a few thousand objects.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.core.tasks import cancel_and_wait

log = logging.getLogger(__name__)

#: A third threshold no count of young collections reaches: CPython then never starts a full collection itself.
NEVER = 2**31 - 1


def freeze_start_up() -> None:
    """Leave what start-up made (modules, classes, the library's tables: objects that live as long as the process)
    out of the garbage collector's scans from now on.

    A full collection walks every tracked object: with start-up's share of the heap in it, each took up to
    170 ms of the loop at 10,000 jobs in flight (bench/). Start-up's own garbage is collected first.
    """
    gc.collect()
    gc.freeze()


@dataclass(frozen=True)
class CollectionPolicy:
    every_seconds: float = 60.0  # garbage cycles that outlive the young generations wait about this long
    check_seconds: float = 10.0  # once due, how often the process is looked at again until it is quiet
    quiet_below: int = 1_000  # tasks alive: a bot with no backlog runs a few dozen
    at_most_seconds: float = 600.0  # a backlog that lasts longer meets a collection anyway

    def __post_init__(self) -> None:
        if not 0 < self.check_seconds <= self.every_seconds <= self.at_most_seconds:
            raise ValueError("the policy must have 0 < check_seconds <= every_seconds <= at_most_seconds")
        if self.quiet_below < 1:
            raise ValueError("quiet_below must be at least 1")


def _tasks_alive() -> int:
    return len(asyncio.all_tasks())


class FullCollections:
    """Full collections on the bot's schedule (see the module's comment); `start` once set-up is done."""

    def __init__(
        self,
        policy: CollectionPolicy | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        tasks_alive: Callable[[], int] = _tasks_alive,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        self.policy = policy or CollectionPolicy()
        self._clock = clock
        self._tasks_alive = tasks_alive
        self._collect = collect
        self._last = clock()
        self._automatic: tuple[int, int, int] | None = None
        self._task: asyncio.Task[None] | None = None

    def due(self, now: float) -> bool:
        """Whether a full collection should run now (it never runs before `every_seconds`)."""
        waited = now - self._last
        if waited < self.policy.every_seconds:
            return False
        return waited >= self.policy.at_most_seconds or self._tasks_alive() < self.policy.quiet_below

    def collect_if_due(self) -> bool:
        now = self._clock()
        if not self.due(now):
            return False
        started = time.perf_counter()
        self._collect()
        log.debug("full garbage collection in %.1f ms, %.0f s after the last", 1000 * (time.perf_counter() - started),
                  now - self._last)
        self._last = self._clock()
        return True

    def start(self) -> None:
        """Freeze start-up's objects, turn CPython's own full collections off and run ours."""
        if self._task is not None and not self._task.done():
            return
        freeze_start_up()
        self._last = self._clock()
        young, middle, _ = self._automatic = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self._task = asyncio.create_task(self._run(), name="full-collections")
        policy = self.policy
        log.info("full garbage collections on the bot's schedule: every %g s once fewer than %d tasks run, at most "
                 "%g s apart", policy.every_seconds, policy.quiet_below, policy.at_most_seconds)

    async def stop(self) -> None:
        """CPython's own trigger again (a process that goes on without the loop still collects)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self._automatic is not None:
            gc.set_threshold(*self._automatic)
            self._automatic = None

    async def _run(self) -> None:
        while True:
            waited = self._clock() - self._last
            await asyncio.sleep(max(self.policy.check_seconds, self.policy.every_seconds - waited))
            try:
                self.collect_if_due()
            except Exception:
                # A finalizer that raises is reported by CPython itself; whatever else goes wrong must not end
                # the schedule, or full collections would stop for the rest of the process's life.
                log.exception("full garbage collection failed")
