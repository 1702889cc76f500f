from collections.abc import AsyncIterator

import aiohttp
import pytest

from bot.simulator import SimulatorConfig, VideoServiceSimulator
from bot.video_client import RetryPolicy, VideoServiceClient

SIM_KEY = "sk-sim-test-key-abcdef123456"


@pytest.fixture
async def simulator() -> AsyncIterator[VideoServiceSimulator]:
    sim = VideoServiceSimulator(SimulatorConfig(api_key=SIM_KEY, job_seconds=0.3, max_budget=10_000))
    await sim.start()
    yield sim
    await sim.stop()


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def sim_client(simulator: VideoServiceSimulator, http_session: aiohttp.ClientSession) -> VideoServiceClient:
    fast = RetryPolicy(attempts=3, total_seconds=5, base_delay=0.05, max_delay=0.2)
    return VideoServiceClient(
        http_session, simulator.base_url, SIM_KEY, timeout_seconds=2, create_retry=fast, read_retry=fast
    )
