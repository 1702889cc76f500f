"""/settings against the host's ceilings: a looser value is refused naming the host's limit, and show shows both."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import pytest

from bot.frontend.cogs.settings import SettingsCog
from bot.simulator import VideoServiceSimulator
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import GUILD_ID, Stack, invoke, open_stack

ADMIN = discord.Permissions(manage_guild=True)
@pytest.fixture
async def strict(simulator: VideoServiceSimulator, tmp_path: Path) -> AsyncIterator[Stack]:
    """The host of the scenario: one video a day per server, one in flight, an hour between two."""
    async with open_stack(simulator, SIM_KEY, tmp_path, GUILD_DAILY_BUDGET_YEN="250", MAX_ACTIVE_JOBS_PER_USER="1",
                          VIDEO_COOLDOWN_SECONDS="3600") as stack:
        yield stack


async def settings(stack: Stack, name: str, locale: discord.Locale = discord.Locale.american_english,
                   **options: Any) -> str:
    """Run `/settings name` as an admin: its one private reply (an answer, or an error's), as text."""
    cog = SettingsCog(stack.bot)
    command = getattr(cog, name)
    stack.log.events.clear()
    await invoke(stack, command, stack.interaction(command, permissions=ADMIN, locale=locale), **options)
    reply = stack.log.only_reply()
    assert reply.kwargs["ephemeral"] is True
    return reply.content or (reply.embed.description if reply.embed is not None else "") or ""


async def test_limits_looser_than_the_hosts_are_refused_naming_each_ceiling(strict: Stack) -> None:
    # /settings limits server_daily:0 cooldown:0 in_flight:0 ("0": no cap, no cooldown, no limit).
    refused = await settings(strict, "limits", server_daily=0, cooldown=0, in_flight=0)

    assert refused.startswith("Nothing was changed: the bot's host sets limits that every server keeps to.")
    assert "- Server daily cap: at most ¥250 (asked: none)" in refused
    assert "- Cooldown: at least 3600 s (asked: 0 s)" in refused
    assert "- Jobs in flight per member: at most 1 (asked: none)" in refused
    server = await strict.bot.requests.rules.effective(GUILD_ID)
    assert (server.guild_daily_cap_yen, server.cooldown_seconds, server.max_active_jobs) == (250, 3600, 1)

    japanese = await settings(strict, "limits", discord.Locale.japanese, server_daily=300)
    assert "運営者" in japanese and "- サーバーの1日の上限：250円以下（指定：300円）" in japanese


async def test_stricter_limits_are_taken_and_show_names_the_servers_value_and_the_hosts(strict: Stack) -> None:
    changed = await settings(strict, "limits", server_daily=100, cooldown=7200)
    assert changed.startswith("Changed")

    shown = await settings(strict, "show")
    assert "**Server daily cap**: ¥100 (this server) · host's limit: at most ¥250" in shown
    assert "**Cooldown**: 7200 s (this server) · host's limit: at least 3600 s" in shown
    assert "**Jobs in flight per member**: 1 (default) · host's limit: at most 1" in shown
    assert "**Member daily cap**: none (default) · host's limit: none" in shown


async def test_show_says_when_a_servers_own_value_is_held_to_a_stricter_host(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, GUILD_DAILY_BUDGET_YEN="1000") as lenient:
        await settings(lenient, "limits", server_daily=750)
    async with open_stack(simulator, SIM_KEY, tmp_path, GUILD_DAILY_BUDGET_YEN="250") as strict:
        shown = await settings(strict, "show")
    assert "**Server daily cap**: ¥250 (this server's, held to the host's limit) · host's limit: at most ¥250" in shown


async def test_show_and_the_time_zone_say_that_the_hosts_caps_keep_the_hosts_calendar(strict: Stack) -> None:
    shown = await settings(strict, "show")
    assert "**Time zone**: Asia/Tokyo (default)\n" in shown  # the host's own: nothing to add
    changed = await settings(strict, "timezone", zone="America/New_York")
    assert "the host's limits keep counting days and months in Asia/Tokyo" in changed
    shown = await settings(strict, "show")
    assert ("**Time zone**: America/New\\_York (this server) · the host's limits count days and months in "
            "Asia/Tokyo") in shown
    japanese = await settings(strict, "show", discord.Locale.japanese)
    assert "運営者の上限はAsia/Tokyoの日・月で数えます" in japanese


RESET_QUOTA = discord.app_commands.Choice(name="reset_quota", value="reset_quota")


async def test_a_quota_reset_says_the_hosts_limits_still_count(strict: Stack) -> None:
    answered = await settings(strict, "member", action=RESET_QUOTA, member=discord.Object(id=555))
    assert "this server's own caps" in answered and "The host's limits still count" in answered
    japanese = await settings(strict, "member", discord.Locale.japanese, action=RESET_QUOTA,
                              member=discord.Object(id=555))
    assert "運営者の上限" in japanese


async def test_where_the_host_set_no_caps_the_replies_do_not_speak_of_the_hosts_limits(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    """A cooldown or a jobs-in-flight limit is no spending cap: nothing of the host's counts spending here."""
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="60") as open_host:
        for locale in (discord.Locale.american_english, discord.Locale.japanese):
            answered = await settings(open_host, "member", locale, action=RESET_QUOTA, member=discord.Object(id=555))
            assert "<@555>" in answered and "host" not in answered and "運営者" not in answered
            changed = await settings(open_host, "timezone", locale, zone="America/New_York")
            assert "host" not in changed and "運営者" not in changed
            shown = await settings(open_host, "show", locale)
            assert "count days and months in" not in shown and "日・月で数えます" not in shown
