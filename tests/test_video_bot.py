"""The bot's own handling of servers: with a server list, it leaves servers the host has not listed."""

from __future__ import annotations

from unittest.mock import AsyncMock, create_autospec

import discord
import pytest

from bot.settings import read_settings
from bot.video_bot import VideoBot

ENV = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k"}


def guild(guild_id: int) -> discord.Guild:
    fake = create_autospec(discord.Guild, instance=True)
    fake.id = guild_id
    fake.leave = AsyncMock()
    return fake  # type: ignore[no-any-return]


@pytest.mark.parametrize(("env", "guild_id", "leaves"), [
    ({"ALLOWED_GUILD_IDS": "1,2", "LEAVE_UNLISTED_GUILDS": "true"}, 3, True),
    ({"ALLOWED_GUILD_IDS": "1,2", "LEAVE_UNLISTED_GUILDS": "true"}, 2, False),
    ({"ALLOWED_GUILD_IDS": "1,2"}, 3, False),  # refused per request, but the bot stays unless told to leave
    ({"LEAVE_UNLISTED_GUILDS": "true"}, 3, False),  # no list: every server is welcome
])
async def test_the_bot_leaves_only_unlisted_servers_and_only_when_told(
    env: dict[str, str], guild_id: int, leaves: bool
) -> None:
    bot = VideoBot(read_settings({**ENV, **env}))
    server = guild(guild_id)
    assert await bot.leave_if_unlisted(server) is leaves
    assert server.leave.await_count == (1 if leaves else 0)  # type: ignore[attr-defined]
