from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.app import build_client
from bot.retry import RetryPolicy
from bot.settings import read_settings
from bot.simulator import SimulatorConfig, VideoServiceSimulator
from bot.video_client import VideoServiceClient


class Clock:
    """A clock the test moves by hand: pass it as `clock=` and set `now`."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

SIM_KEY = "sk-sim-test-key-abcdef123456"


SimulatorFactory = Callable[..., Awaitable[VideoServiceSimulator]]


@pytest.fixture
async def start_simulator() -> AsyncIterator[SimulatorFactory]:
    """Start simulators (the test key unless told otherwise); every one is stopped at teardown."""
    started: list[VideoServiceSimulator] = []

    async def start(**config: Any) -> VideoServiceSimulator:
        sim = VideoServiceSimulator(SimulatorConfig(**{"api_key": SIM_KEY, **config}))
        await sim.start()
        started.append(sim)
        return sim

    yield start
    for sim in started:
        await sim.stop()


@pytest.fixture
async def simulator(start_simulator: SimulatorFactory) -> VideoServiceSimulator:
    return await start_simulator(job_seconds=0.3, max_budget=10_000)


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def sim_client(
    simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession, tmp_path: Path
) -> VideoServiceClient:
    """The bot's own client (built by the composition root) against the simulator, with quick retries."""
    fast = RetryPolicy(attempts=3, deadline=5, base_delay=0.05, max_delay=0.2)
    settings = read_settings({"DISCORD_TOKEN": "discord-token-for-tests", "VIDEO_API_BASE_URL": simulator.base_url,
                              "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(tmp_path / "bot.sqlite3")})
    return build_client(settings, http_session, paced=False, timeout_seconds=2, create_retry=fast, read_retry=fast)
