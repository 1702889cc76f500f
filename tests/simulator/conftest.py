"""Shared fixtures and helpers for the simulator's own tests: real servers, a real aiohttp client."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot.simulator import VideoServiceSimulator
from tests.conftest import SimulatorFactory as MakeSim

KEY = "sim-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
CREATE = "/gateway/videos/create"


@pytest.fixture
def make_sim(start_simulator: MakeSim) -> MakeSim:
    async def factory(**overrides: Any) -> VideoServiceSimulator:
        return await start_simulator(**{"api_key": KEY, **overrides})

    return factory


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(headers=AUTH) as client:
        yield client


async def create(
    session: aiohttp.ClientSession, sim: VideoServiceSimulator, body: Any = None, **kwargs: Any
) -> tuple[int, dict[str, Any]]:
    payload = {"prompt": "a red fox running through snow"} if body is None else body
    async with session.post(sim.base_url + CREATE, json=payload, **kwargs) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


async def get_json(session: aiohttp.ClientSession, url: str) -> tuple[int, dict[str, Any]]:
    async with session.get(url) as resp:
        assert resp.content_type == "application/json"
        return resp.status, await resp.json()


async def sleep_until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.monotonic()) + 0.02)
