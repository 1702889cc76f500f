"""The bot's own handling of servers: with a server list, it leaves servers the host has not listed."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import AsyncMock, create_autospec

import aiohttp
import discord
import pytest

from bot.app import catalogue_of
from bot.config.settings import Settings, read_settings
from bot.frontend.bot import VideoBot
from bot.jobs.port import ChannelRefused, DiscordUnavailable

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
    bot = bot_of(read_settings({**ENV, **env}))
    server = guild(guild_id)
    assert await bot.leave_if_unlisted(server) is leaves
    assert server.leave.await_count == (1 if leaves else 0)  # type: ignore[attr-defined]


class FakeShard:
    def __init__(self, closed: bool) -> None:
        self.closed = closed

    def is_closed(self) -> bool:
        return self.closed


@pytest.mark.parametrize(("env", "shards", "healthy"), [
    ({"SHARD_COUNT": "4", "SHARD_IDS": "2,3"}, {2: False, 3: False}, True),
    ({"SHARD_COUNT": "4", "SHARD_IDS": "2,3"}, {2: False, 3: True}, False),  # one of ours down
    ({"SHARD_COUNT": "4", "SHARD_IDS": "2,3"}, {2: False}, False),  # one not launched yet
    ({"SHARD_COUNT": "2"}, {0: False, 1: False}, True),
    ({"SHARD_COUNT": "2"}, {0: False}, False),
    ({}, {}, False),  # automatic: nothing launched, nothing connected
])
def test_the_heartbeat_needs_every_shard_of_the_process(
    env: dict[str, str], shards: dict[int, bool], healthy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = bot_of(read_settings({**ENV, **env}))
    monkeypatch.setattr(VideoBot, "shards", property(lambda self: {i: FakeShard(c) for i, c in shards.items()}))
    assert bot.shards_connected() is healthy


def test_the_bot_runs_the_shards_it_was_given() -> None:
    bot = bot_of(read_settings({**ENV, "SHARD_COUNT": "4", "SHARD_IDS": "3,1"}))
    assert bot.shard_count == 4 and bot.shard_ids == [3, 1]
    assert bot.owns_guild(3 << 22) and bot.owns_guild(5 << 22) and not bot.owns_guild(2 << 22)
    automatic = bot_of(read_settings(ENV))
    assert automatic.shard_count is None and automatic.shard_ids is None


@pytest.mark.parametrize("second_shard_closed", [False, True])
async def test_no_heartbeat_while_a_shard_is_down(
    second_shard_closed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "heartbeat"
    bot = bot_of(read_settings({**ENV, "SHARD_COUNT": "2", "HEARTBEAT_PATH": str(path)}))
    bot.worker = SimpleNamespace(running=True)  # type: ignore[assignment]
    monkeypatch.setattr(VideoBot, "is_ready", lambda self: True)
    monkeypatch.setattr(VideoBot, "shards",
                        property(lambda self: {0: FakeShard(False), 1: FakeShard(second_shard_closed)}))
    await bot.heartbeat()
    assert path.exists() is not second_shard_closed


def bot_of(settings: Settings) -> VideoBot:
    return VideoBot(settings, catalogue_of(settings))


def _refusal(status: int) -> discord.HTTPException:
    response = SimpleNamespace(status=status, reason="refused")
    error_type = {403: discord.Forbidden, 404: discord.NotFound}.get(status, discord.HTTPException)
    return error_type(response, "refused")


@pytest.mark.parametrize(("status", "port_error"), [
    (403, ChannelRefused), (404, ChannelRefused), (500, DiscordUnavailable), (503, DiscordUnavailable),
])
async def test_a_log_line_discord_refuses_reaches_the_chores_as_the_ports_error(
    status: int, port_error: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = bot_of(read_settings(ENV))
    channel = create_autospec(discord.PartialMessageable, instance=True)
    channel.send = AsyncMock(side_effect=_refusal(status))
    monkeypatch.setattr(bot, "get_partial_messageable", lambda channel_id: channel)

    with pytest.raises(port_error) as raised:
        await bot.post_line(500, "a line")
    assert isinstance(raised.value.__cause__, discord.HTTPException) and raised.value.__cause__.status == status


@pytest.mark.parametrize("error", [
    aiohttp.ClientConnectionError("connection reset"), aiohttp.ServerDisconnectedError(),
    aiohttp.ServerTimeoutError("read timeout"),
])
async def test_a_lost_connection_to_discord_reaches_the_chores_as_discord_unavailable(
    error: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    bot = bot_of(read_settings(ENV))
    channel = create_autospec(discord.PartialMessageable, instance=True)
    channel.send = AsyncMock(side_effect=error)
    monkeypatch.setattr(bot, "get_partial_messageable", lambda channel_id: channel)

    with pytest.raises(DiscordUnavailable) as raised:
        await bot.post_line(500, "a line")
    assert raised.value.__cause__ is error and str(raised.value) == (str(error) or type(error).__name__)


async def test_a_log_line_pings_nobody(monkeypatch: pytest.MonkeyPatch) -> None:
    bot = bot_of(read_settings(ENV))
    channel = create_autospec(discord.PartialMessageable, instance=True)
    channel.send = AsyncMock()
    monkeypatch.setattr(bot, "get_partial_messageable", lambda channel_id: channel)

    await bot.post_line(500, "<@1> changed a setting")
    [call] = channel.send.await_args_list
    assert call.args == ("<@1> changed a setting",)
    mentions = call.kwargs["allowed_mentions"]
    assert not (mentions.everyone or mentions.users or mentions.roles or mentions.replied_user)


async def test_creating_the_bot_logs_no_voice_library_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As in a fresh process without PyNaCl or davey: discord.py would warn at the first client.
    monkeypatch.setattr(discord.VoiceClient, "warn_nacl", True)
    monkeypatch.setattr(discord.VoiceClient, "warn_dave", True)
    with caplog.at_level(logging.DEBUG):
        bot = bot_of(read_settings(ENV))
    await bot.close()
    assert not [r for r in caplog.records if "PyNaCl" in r.getMessage() or "davey" in r.getMessage()]
