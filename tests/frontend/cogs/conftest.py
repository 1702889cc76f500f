from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.simulator import VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import Stack, open_stack


@pytest.fixture
async def stack(simulator: VideoServiceSimulator, tmp_path: Path) -> AsyncIterator[Stack]:
    """A never-logged-in bot with a real store and client, talking to the simulator."""
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        yield stack
