from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.simulator import VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    # A private application, as the set-up asks for: a public one with no server list does not start.
    d = DiscordDouble(bot_public=False)
    await d.start()
    d.add_member(USER_ID, name="requester")
    yield d
    await d.stop()


@pytest.fixture
def make_service(start_simulator: ServiceFactory) -> ServiceFactory:
    async def make(**config: Any) -> VideoServiceSimulator:
        return await start_simulator(**{"job_seconds": 1.0, "max_budget": 10_000, **config})

    return make


@pytest.fixture
async def service(make_service: ServiceFactory) -> VideoServiceSimulator:
    return await make_service()


@pytest.fixture
async def make_bot(tmp_path: Path, double: DiscordDouble) -> AsyncIterator[Callable[..., BotProcess]]:
    bots: list[BotProcess] = []

    def make(service: VideoServiceSimulator, workdir: Path | None = None, **settings: str) -> BotProcess:
        # Several bots on one double each need a workdir of their own (log, heartbeat, videos, database).
        process = BotProcess(workdir or tmp_path, double, service, SIM_KEY, **settings)
        bots.append(process)
        return process

    yield make
    for process in bots:
        await process.stop()


@pytest.fixture
def bot(make_bot: Callable[..., BotProcess], service: VideoServiceSimulator) -> BotProcess:
    return make_bot(service)
