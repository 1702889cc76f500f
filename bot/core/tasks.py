"""Background tasks that are never lost: a reference to each, and its failure logged with the traceback."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel one task and wait until it has ended (its cancellation is the expected end, not an error)."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


#: How long a last write at shutdown may hold off further cancellations: a database that hangs must not hold the
#: process's shutdown (what it did not write is left to start-up).
LAST_WRITE_SECONDS = 10.0


async def finish_despite_cancels(work: Awaitable[object], *, within: float = LAST_WRITE_SECONDS) -> None:
    """Run `work` to its end even if the task is cancelled again meanwhile (the caller re-raises its own
    cancellation afterwards): a short write that must not be cut in half. After `within` seconds a further
    cancellation is let through."""
    done = asyncio.ensure_future(work)
    deadline = asyncio.get_running_loop().time() + within
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            if asyncio.get_running_loop().time() >= deadline:
                raise


class BackgroundTasks:
    """The tasks one owner spawned: kept until done, a failure logged, all cancelled together at close."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, _T], name: str) -> asyncio.Task[_T]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("task %s failed", task.get_name(), exc_info=task.exception())

    async def cancel_all(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
