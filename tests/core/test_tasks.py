"""BackgroundTasks: every spawned task is kept, its failure logged with the traceback, all cancelled at close."""

import asyncio
import logging

import pytest

from bot.core.tasks import BackgroundTasks, cancel_and_wait


async def test_a_failing_task_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    async def boom() -> None:
        raise RuntimeError("boom")

    tasks = BackgroundTasks(logging.getLogger("test.tasks"))
    with caplog.at_level(logging.ERROR, logger="test.tasks"):
        task = tasks.spawn(boom(), "boom-1")
        await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0)  # the done callback runs on the next turn of the loop
    [record] = caplog.records
    assert record.getMessage() == "task boom-1 failed"
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)


async def test_cancel_all_stops_every_task_still_running() -> None:
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.sleep(3600)

    tasks = BackgroundTasks(logging.getLogger("test.tasks"))
    running = [tasks.spawn(forever(), f"forever-{n}") for n in range(3)]
    await started.wait()
    await tasks.cancel_all()
    assert all(task.cancelled() for task in running)


async def test_cancel_and_wait_returns_once_the_task_has_ended() -> None:
    cleaned = asyncio.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.01)  # its own clean-up, waited for
            cleaned.set()

    task = asyncio.create_task(forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled() and cleaned.is_set()
