"""The double answers who may act as Discord does: the Public Bot switch, who is still a member, and the command
permissions an admin sets under Server Settings > Integrations, seen by the real discord.py client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest
import yarl
from discord import app_commands
from discord.ext import commands

from tests.discord_double import DiscordDouble

REQUESTER_ID = 600_000_000_000_000_001
BYSTANDER_ID = 600_000_000_000_000_002
MODERATOR_ROLE = 610_000_000_000_000_001
ROLE, USER, CHANNEL = 1, 2, 3
AUTH = {"Authorization": "Bot double-token"}
MANAGE_GUILD = 1 << 5


@pytest.fixture
async def double(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[DiscordDouble]:
    fake = DiscordDouble()
    fake.add_member(REQUESTER_ID, name="requester", roles=[MODERATOR_ROLE])
    fake.add_member(BYSTANDER_ID, name="bystander")
    await fake.start()
    monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
    monkeypatch.setattr(discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url))
    try:
        yield fake
    finally:
        await fake.stop()


class Bot(commands.Bot):
    """A real discord.py bot that records the raw events this file is about."""

    def __init__(self, guild_id: int) -> None:
        intents = discord.Intents.default()
        intents.members = True
        super().__init__(command_prefix="!", intents=intents, guild_ready_timeout=0.2)
        self.removed: asyncio.Queue[discord.RawMemberRemoveEvent] = asyncio.Queue()
        self.permission_updates: asyncio.Queue[discord.RawAppCommandPermissionsUpdateEvent] = asyncio.Queue()
        self.interactions: asyncio.Queue[discord.Interaction] = asyncio.Queue()
        guild = discord.Object(guild_id)

        @app_commands.command(name="video", description="Turn a prompt into a short video")
        async def video(interaction: discord.Interaction, prompt: str) -> None:
            await self.interactions.put(interaction)

        @app_commands.command(name="settings", description="The server's settings")
        @app_commands.default_permissions(manage_guild=True)
        async def settings(interaction: discord.Interaction) -> None:
            await self.interactions.put(interaction)

        self.tree.add_command(video, guild=guild)
        self.tree.add_command(settings, guild=guild)

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        await self.removed.put(payload)

    async def on_raw_app_command_permissions_update(self, payload: discord.RawAppCommandPermissionsUpdateEvent) -> None:
        await self.permission_updates.put(payload)


@pytest.fixture
async def bot(double: DiscordDouble) -> AsyncIterator[Bot]:
    client = Bot(double.guild_id)
    await client.login("double-token")
    runner = asyncio.create_task(client.connect(reconnect=False))
    try:
        await double.wait_ready()
        await asyncio.wait_for(client.wait_until_ready(), 10)
        yield client
    finally:
        await client.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(runner, 5)


async def next_of(queue: asyncio.Queue[Any]) -> Any:
    return await asyncio.wait_for(queue.get(), 5)


# -- the Public Bot switch ---------------------------------------------------------------------------------


async def test_bot_public_is_on_by_default_and_follows_the_switch(double: DiscordDouble) -> None:
    client = discord.Client(intents=discord.Intents.none())
    await client.login("double-token")
    try:
        assert (await client.application_info()).bot_public is True
        double.bot_public = False  # the owner turns "Public Bot" off in the Developer Portal
        assert (await client.application_info()).bot_public is False
    finally:
        await client.close()
    async with aiohttp.ClientSession() as http:
        answer = await http.get(f"{double.api_base}/applications/@me", headers=AUTH)
        assert (await answer.json())["bot_public"] is False


async def test_bot_public_can_start_off() -> None:
    async with DiscordDouble(bot_public=False) as private, aiohttp.ClientSession() as http:
        answer = await http.get(f"{private.api_base}/applications/@me", headers=AUTH)
        assert answer.status == 200 and (await answer.json())["bot_public"] is False
