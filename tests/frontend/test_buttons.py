"""bot/frontend/buttons.py: a button posted by any earlier run resolves to its class, and to its row, alone; and
each click passes the trust model's checks (bot/community/trust.py) before it reads or spends anything."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast
from unittest.mock import AsyncMock

import discord
import pytest

from bot.frontend.buttons import (
    DYNAMIC_ITEMS,
    RECORD_GRACE_SECONDS,
    CancelJobButton,
    DeleteButton,
    OfferCancelButton,
    OfferGoButton,
    RerollButton,
)
from bot.jobs.offers import Offers
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import Job, JobState
from bot.store.jobs.meta import HOST_PAUSE
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import (
    CHANNEL_ID,
    GUILD_ID,
    OTHER_GUILD_ID,
    OTHER_MEMBER_ID,
    REQUESTER_ID,
    Stack,
    fake_message,
    open_stack,
    stored_job,
)

#: The custom ids on messages already posted: they must keep resolving after any change to the classes.
POSTED = [
    ("video:reroll:42", RerollButton, 42, discord.ButtonStyle.primary),
    ("video:delete:42", DeleteButton, 42, discord.ButtonStyle.secondary),
    ("video:offer:7:go", OfferGoButton, 7, discord.ButtonStyle.success),
    ("video:offer:7:cancel", OfferCancelButton, 7, discord.ButtonStyle.secondary),
    ("video:job:9:cancel", CancelJobButton, 9, discord.ButtonStyle.secondary),
]


@pytest.mark.parametrize(("custom_id", "cls", "row_id", "style"), POSTED)
async def test_a_posted_button_resolves_to_its_class_and_row_alone(
    custom_id: str, cls: type[Any], row_id: int, style: discord.ButtonStyle
) -> None:
    matches = [(item, match) for item in DYNAMIC_ITEMS
               if (match := item.__discord_ui_compiled_template__.fullmatch(custom_id))]
    assert [item for item, _ in matches] == [cls]
    posted = discord.ui.Button[discord.ui.View](label="Label", custom_id=custom_id)
    rebuilt = await cls.from_custom_id(cast(Any, None), posted, matches[0][1])
    assert (rebuilt.row_id, rebuilt.custom_id, rebuilt.item.label) == (row_id, custom_id, "Label")
    fresh = cls(row_id, "Label")
    assert (fresh.custom_id, fresh.item.style) == (custom_id, style), "a new post carries the same id"


@pytest.mark.parametrize("custom_id", ["video:reroll:", "video:reroll:4x", "video:offer:7:gone", "xvideo:delete:1"])
def test_a_custom_id_of_no_button_matches_none(custom_id: str) -> None:
    assert not [item for item in DYNAMIC_ITEMS if item.__discord_ui_compiled_template__.fullmatch(custom_id)]


# -- who may click: the trust model, on each click (dynamic items skip the tree's interaction_check) -------------

POSTED_MESSAGE = 840_000_000_000_000_001
ELSEWHERE = 840_000_000_000_000_999
UNKNOWN = "The bot no longer knows what this button was for. Nothing was spent."
NOT_ENABLED = "This bot is not enabled for this server. Nothing was spent."


@pytest.fixture
async def stack(simulator: VideoServiceSimulator, tmp_path: Path) -> AsyncIterator[Stack]:
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="0",
                          ALLOWED_GUILD_IDS=str(GUILD_ID)) as stack:
        stack.bot.offers = Offers(stack.store)
        yield stack


def click(stack: Stack, message_id: int, **who: Any) -> Any:
    """A click on a button of message `message_id` (in GUILD_ID unless `guild_id` says otherwise)."""
    interaction = stack.interaction(**who)
    interaction.type = discord.InteractionType.component
    interaction.message = fake_message(message_id)
    interaction.message.delete = AsyncMock()

    async def edit_message(**kwargs: Any) -> None:
        stack.log.add("edit_message", **kwargs)
        interaction.response.type = discord.InteractionResponseType.message_update

    interaction.response.edit_message.side_effect = edit_message
    return interaction


async def posted_video(stack: Stack, **changes: Any) -> Job:
    return await stored_job(stack.store, JobState.DELIVERED, delivered_channel_id=CHANNEL_ID,
                            **{"delivered_message_id": POSTED_MESSAGE, **changes})


def answer(stack: Stack) -> str:
    reply = stack.log.only_reply()
    assert reply.kwargs.get("ephemeral") is True
    return reply.content or ""


async def test_a_reroll_on_its_video_offers_it_on_a_message_whose_buttons_alone_count(stack: Stack) -> None:
    job = await posted_video(stack)

    await RerollButton(job.id, "Re-roll").callback(click(stack, POSTED_MESSAGE))

    offer_event = stack.log.only_reply()
    assert offer_event.name == "send_message" and "Re-roll #" in (offer_event.content or "")
    offer = await stack.bot.offers.get(1)
    assert offer is not None and offer.message_id == offer_event.message_id
    # The offer's Confirm on any other message is refused as unknown, and uses nothing.
    stack.log.events.clear()
    await OfferGoButton(offer.id, "Confirm").callback(click(stack, ELSEWHERE))
    assert answer(stack) == UNKNOWN
    assert (await stack.bot.offers.get(offer.id)).used_at is None  # type: ignore[union-attr]
    assert stack.simulator.creates_received == 0


@pytest.mark.parametrize("button", [RerollButton, DeleteButton])
async def test_a_click_on_a_message_the_bot_did_not_write_for_that_video_is_refused(
    stack: Stack, button: type[Any]
) -> None:
    job = await posted_video(stack)
    interaction = click(stack, ELSEWHERE)

    await button(job.id, "Label").callback(interaction)

    assert answer(stack) == UNKNOWN
    interaction.message.delete.assert_not_awaited()
    assert await stack.bot.offers.get(1) is None


@pytest.mark.parametrize("button", [RerollButton, DeleteButton, OfferGoButton, OfferCancelButton, CancelJobButton])
async def test_a_click_in_an_unlisted_server_gets_the_one_short_refusal(stack: Stack, button: type[Any]) -> None:
    job = await posted_video(stack, guild_id=OTHER_GUILD_ID)

    await button(job.id, "Label").callback(click(stack, POSTED_MESSAGE, guild_id=OTHER_GUILD_ID))

    assert answer(stack) == NOT_ENABLED


async def test_a_click_in_a_dm_is_held_to_its_videos_server(stack: Stack) -> None:
    listed = await posted_video(stack)
    unlisted = await posted_video(stack, guild_id=OTHER_GUILD_ID, delivered_message_id=POSTED_MESSAGE + 1)

    await DeleteButton(unlisted.id, "Delete").callback(click(stack, POSTED_MESSAGE + 1, guild_id=None))
    assert answer(stack) == NOT_ENABLED
    stack.log.events.clear()
    dm = click(stack, POSTED_MESSAGE, guild_id=None)
    await DeleteButton(listed.id, "Delete").callback(dm)
    assert answer(stack).startswith("The video post was deleted")
    dm.message.delete.assert_awaited_once()


async def test_the_pause_stops_rerolls_and_confirmations_not_deletes_or_cancels(stack: Stack) -> None:
    job = await posted_video(stack)
    offer = await stack.bot.offers.reroll(job.id, user_id=REQUESTER_ID, guild_id=GUILD_ID, channel_id=CHANNEL_ID,
                                          locale="en-US", model=job.model)
    await stack.bot.offers.shown(offer.id, ELSEWHERE)
    await stack.store.set_meta(HOST_PAUSE, "1")

    for button, row_id, message in ((RerollButton, job.id, POSTED_MESSAGE), (OfferGoButton, offer.id, ELSEWHERE)):
        stack.log.events.clear()
        await button(row_id, "Label").callback(click(stack, message))
        assert answer(stack) == "Video requests are paused by the bot's host for now. Nothing was spent."
    stack.log.events.clear()
    await OfferCancelButton(offer.id, "Cancel").callback(click(stack, ELSEWHERE))
    assert stack.log.names() == ["edit_message"]
    stack.log.events.clear()
    await DeleteButton(job.id, "Delete").callback(click(stack, POSTED_MESSAGE))
    assert answer(stack).startswith("The video post was deleted")
    assert stack.simulator.creates_received == 0


async def test_a_reroll_obeys_the_servers_member_rules_at_the_click(stack: Stack) -> None:
    job = await posted_video(stack)
    await stack.bot.requests.rules.store.set_member(GUILD_ID, REQUESTER_ID, OTHER_MEMBER_ID, blocked=True)

    await RerollButton(job.id, "Re-roll").callback(click(stack, POSTED_MESSAGE))

    assert answer(stack) == "This server's admins have stopped your video requests. Nothing was spent."
    assert await stack.bot.offers.get(1) is None


async def test_only_the_requester_cancels_a_waiting_request_and_only_on_its_notice(stack: Stack) -> None:
    job = await stored_job(stack.store, JobState.RECEIVED, reply_message_id=POSTED_MESSAGE)

    await CancelJobButton(job.id, "Cancel").callback(click(stack, ELSEWHERE))
    assert answer(stack) == UNKNOWN
    stack.log.events.clear()
    await CancelJobButton(job.id, "Cancel").callback(click(stack, POSTED_MESSAGE, user_id=OTHER_MEMBER_ID))
    assert answer(stack) == "This button belongs to another member's request."
    stack.log.events.clear()
    await CancelJobButton(job.id, "Cancel").callback(click(stack, POSTED_MESSAGE))
    assert stack.log.names() == ["edit_message"]
    assert (await stack.store.get(job.id)).state == JobState.CANCELLED


async def test_a_click_just_before_its_message_is_recorded_waits_for_the_record(stack: Stack) -> None:
    job = await stored_job(stack.store, JobState.DOWNLOADED)  # posted a moment ago, not recorded yet

    async def recorded_soon() -> None:
        await asyncio.sleep(0.2)
        await stack.store.transition(job.id, JobState.DELIVERED, delivered_channel_id=CHANNEL_ID,
                                     delivered_message_id=POSTED_MESSAGE)

    recording = asyncio.create_task(recorded_soon())
    await DeleteButton(job.id, "Delete").callback(click(stack, POSTED_MESSAGE))
    await recording
    assert answer(stack).startswith("The video post was deleted")


async def test_a_click_whose_message_is_never_recorded_is_refused_after_a_short_wait(stack: Stack) -> None:
    job = await stored_job(stack.store, JobState.RECEIVED)  # no waiting notice was recorded for it

    started = time.monotonic()
    await CancelJobButton(job.id, "Cancel").callback(click(stack, POSTED_MESSAGE))

    assert answer(stack) == UNKNOWN
    assert time.monotonic() - started < RECORD_GRACE_SECONDS + 1
    assert (await stack.store.get(job.id)).state == JobState.RECEIVED
