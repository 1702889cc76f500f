"""/balance: the shared key's figures from the service beside the bot's own ledger."""

from __future__ import annotations

import asyncio

import discord
import pytest

from bot.core.errors import VideoServiceError
from bot.frontend.cogs.balance import BalanceCog
from bot.store.jobs import JobState, NewJob
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import (
    GUILD_ID,
    OTHER_GUILD_ID,
    OTHER_MEMBER_ID,
    Event,
    Stack,
    assert_answered_in_time,
    embed_fields,
    invoke,
    stored_job,
)

KEY_INFO = "service GET /key/info"
S = JobState


@pytest.fixture
def cog(stack: Stack) -> BalanceCog:
    return BalanceCog(stack.bot)


async def balance(stack: Stack, cog: BalanceCog, **who: object) -> Event:
    """Run /balance; it must defer privately before asking the service, then edit that one reply."""
    interaction = stack.interaction(cog.balance, **who)
    await invoke(stack, cog.balance, interaction)
    assert_answered_in_time(stack.log, interaction)
    assert stack.log.events[0].name == "defer"
    assert stack.log.events[0].kwargs["ephemeral"] is True
    reply = stack.log.only_reply()
    assert reply.name == "edit_original_response"
    return reply


async def test_figures_use_thousands_separators_and_count_the_videos_left(stack: Stack, cog: BalanceCog) -> None:
    stack.simulator.spend = 1_250

    reply = await balance(stack, cog)

    assert stack.log.names() == ["defer", KEY_INFO, "edit_original_response"]
    assert reply.embed is not None
    assert reply.embed.title == "Shared video budget"
    fields = embed_fields(reply.embed)
    assert fields["Spent"] == "¥1,250"
    assert fields["Budget"] == "¥10,000"
    assert fields["Available"] == "¥8,750"
    assert fields["Videos left"] == "35 at ¥250 each"


async def test_large_figures_in_japanese(stack: Stack, cog: BalanceCog) -> None:
    stack.simulator.config.max_budget = 12_000_000
    stack.simulator.spend = 1_234_500

    reply = await balance(stack, cog, locale=discord.Locale.japanese)

    assert reply.embed is not None
    assert reply.embed.title == "共有動画予算"
    fields = embed_fields(reply.embed)
    assert fields["使用済み"] == "1,234,500円"
    assert fields["上限"] == "12,000,000円"
    assert fields["残り"] == "10,765,500円"
    assert fields["作れる本数"] == "43,062本（1本250円）"


async def test_a_budget_below_one_video_shows_zero_videos_left(stack: Stack, cog: BalanceCog) -> None:
    stack.simulator.spend = 9_900

    reply = await balance(stack, cog)

    assert reply.embed is not None
    fields = embed_fields(reply.embed)
    assert fields["Available"] == "¥100"
    assert fields["Videos left"] == "0 at ¥250 each"


async def test_a_null_budget_means_no_limit(stack: Stack, cog: BalanceCog) -> None:
    stack.simulator.config.max_budget = None
    stack.simulator.spend = 500

    reply = await balance(stack, cog)

    assert reply.embed is not None
    fields = embed_fields(reply.embed)
    assert fields["Spent"] == "¥500"
    assert fields["Budget"] == fields["Available"] == fields["Videos left"] == "no budget set"


async def test_the_key_is_shown_in_the_bots_masked_form_even_when_the_service_echoes_it_raw(
    stack: Stack, cog: BalanceCog
) -> None:
    stack.simulator.config.echo_raw_key = True

    reply = await balance(stack, cog)

    assert reply.embed is not None
    assert embed_fields(reply.embed)["Key"] == f"`…{SIM_KEY[-4:]}`"
    assert SIM_KEY not in str(reply.embed.to_dict())
    assert SIM_KEY[:-4] not in str(reply.embed.to_dict())


async def test_the_ledger_counts_accepted_videos_everywhere_and_in_this_server(stack: Stack, cog: BalanceCog) -> None:
    await stored_job(stack.store, S.DELIVERED)
    await stored_job(stack.store, S.FAILED, user_id=OTHER_MEMBER_ID)
    await stored_job(stack.store, S.PENDING, guild_id=OTHER_GUILD_ID)
    await stored_job(stack.store, S.REJECTED)
    await stored_job(stack.store, S.UNKNOWN)

    reply = await balance(stack, cog)

    assert reply.embed is not None
    assert embed_fields(reply.embed)["This bot's ledger"] == "All time: 3 videos, ¥750\nThis server: 2 videos, ¥500"


@pytest.mark.parametrize("outage", ["http-503", "stopped"])
async def test_service_down_gets_a_friendly_private_message(stack: Stack, cog: BalanceCog, outage: str) -> None:
    if outage == "http-503":
        stack.simulator.inject("key_info", 503, times=3)
    else:
        await stack.simulator.stop()
    interaction = stack.interaction(cog.balance)

    error = await invoke(stack, cog.balance, interaction)

    assert isinstance(error, VideoServiceError)
    assert_answered_in_time(stack.log, interaction)
    assert stack.log.names()[0] == "defer"
    reply = stack.log.only_reply()
    assert reply.name == "edit_original_response"
    assert reply.content == "The video service cannot be reached right now. Nothing was spent. Please try again later."
    assert reply.embed is None


async def test_one_members_repeated_balance_spends_one_read_of_the_keys_rate_limit(
    stack: Stack, cog: BalanceCog
) -> None:
    interactions = [stack.interaction(cog.balance) for _ in range(10)]
    await asyncio.gather(*(invoke(stack, cog.balance, interaction) for interaction in interactions))
    for _ in range(10):
        await invoke(stack, cog.balance, stack.interaction(cog.balance))

    assert stack.simulator.key_info_requests == 1
    assert stack.log.names().count(KEY_INFO) == 1
    assert stack.log.names().count("edit_original_response") == 20
    # The budget alerts share the same reader (bot/app.py): a check now needs no read of its own.
    await stack.requests.rules.change(GUILD_ID, 900, {"budget_alert_yen": 5_000})
    await stack.bot.services.housekeeping.check_budget()
    assert stack.simulator.key_info_requests == 1


async def test_balance_right_after_a_video_shows_its_charge(stack: Stack, cog: BalanceCog) -> None:
    """The check before the create read the key a moment ago; the accepted create makes that answer out of date."""
    await balance(stack, cog)
    await stack.requests.submit(NewJob(model="", prompt="a kite", seed=None, user_id=OTHER_MEMBER_ID,
                                       guild_id=GUILD_ID, channel_id=1))
    stack.log.events.clear()

    reply = await balance(stack, cog)

    assert reply.embed is not None and embed_fields(reply.embed)["Spent"] == "¥250"
