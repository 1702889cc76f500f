from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.simulator import SimulatorConfig, VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess

ServiceFactory = Callable[..., Awaitable[VideoServiceSimulator]]


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    d = DiscordDouble()
    await d.start()
    d.add_member(USER_ID, name="requester")
    yield d
    await d.stop()


@pytest.fixture
async def make_service() -> AsyncIterator[ServiceFactory]:
    started: list[VideoServiceSimulator] = []

    async def make(**config: Any) -> VideoServiceSimulator:
        options: dict[str, Any] = {"api_key": SIM_KEY, "job_seconds": 1.0, "max_budget": 10_000, **config}
        sim = VideoServiceSimulator(SimulatorConfig(**options))
        await sim.start()
        started.append(sim)
        return sim

    yield make
    for sim in started:
        await sim.stop()


@pytest.fixture
async def service(make_service: ServiceFactory) -> VideoServiceSimulator:
    return await make_service()


@pytest.fixture
async def make_bot(tmp_path: Path, double: DiscordDouble) -> AsyncIterator[Callable[..., BotProcess]]:
    bots: list[BotProcess] = []

    def make(service: VideoServiceSimulator, **settings: str) -> BotProcess:
        process = BotProcess(tmp_path, double, service, SIM_KEY, **settings)
        bots.append(process)
        return process

    yield make
    for process in bots:
        await process.stop()


@pytest.fixture
def bot(make_bot: Callable[..., BotProcess], service: VideoServiceSimulator) -> BotProcess:
    return make_bot(service)
