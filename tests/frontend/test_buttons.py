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

from bot.community.command_permissions import CommandAccess, PermissionEntry, PermissionType
from bot.community.trust import Membership, Standing
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
from bot.simulator import MODEL_ID, VideoServiceSimulator
from bot.store.jobs import Job, JobState, NewJob
from bot.store.jobs.meta import HOST_PAUSE
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import (
    APPLICATION_ID,
    CHANNEL_ID,
    GUILD_ID,
    OTHER_GUILD_ID,
    OTHER_MEMBER_ID,
    REQUESTER_ID,
    SEND_MESSAGES,
    VIDEO_COMMAND_ID,
    Stack,
    discord_standing,
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


# -- a click that spends is held to what Discord holds /video to -------------------------------------------------

MEMBER_ROLE = 750_000_000_000_000_001
GONE = ("You are no longer a member of the server this was made in, so this button cannot spend there. Nothing "
        "was spent.")
DENIED = ("This server's settings (Server Settings → Integrations) do not let you use /video there, and this button "
          "spends as /video does. Nothing was spent.")
UNREADABLE = ("Discord could not tell the bot just now whether you may use /video there. Nothing was spent; try "
              "again in a moment.")


def standing(*entries: PermissionEntry, roles: frozenset[int] = frozenset({MEMBER_ROLE})) -> Standing:
    """A member of GUILD_ID now, with these command permission entries on /video."""
    video = CommandAccess(VIDEO_COMMAND_ID, APPLICATION_ID, GUILD_ID, None, {VIDEO_COMMAND_ID: entries} if entries
                          else {})
    return Standing(True, Membership(roles, SEND_MESSAGES, CHANNEL_ID), video)


ROLE_DENIED = standing(PermissionEntry(MEMBER_ROLE, PermissionType.ROLE, False))


async def reroll_offer(stack: Stack) -> int:
    job = await posted_video(stack)
    offer = await stack.bot.offers.reroll(job.id, user_id=REQUESTER_ID, guild_id=GUILD_ID, channel_id=CHANNEL_ID,
                                          locale="en-US", model=job.model)
    await stack.bot.offers.shown(offer.id, ELSEWHERE)
    return offer.id


@pytest.mark.parametrize(("found", "text"), [(Standing(True), GONE), (ROLE_DENIED, DENIED),
                                             (Standing.unreadable(), UNREADABLE)])
async def test_a_reroll_discord_would_not_let_through_as_video_offers_nothing(
    stack: Stack, found: Standing, text: str
) -> None:
    job = await posted_video(stack, channel_id=CHANNEL_ID + 5)
    stack.bot.access = discord_standing(found)
    dm = click(stack, POSTED_MESSAGE, guild_id=None, channel_id=990_000_000_000_000_001)

    await RerollButton(job.id, "Re-roll").callback(dm)

    assert answer(stack) == text
    assert await stack.bot.offers.get(1) is None
    # Asked for the video's server and the channel the re-roll would be posted in, not the DM it was clicked in.
    stack.bot.access.standing.assert_awaited_once_with(dm, GUILD_ID, CHANNEL_ID + 5)


@pytest.mark.parametrize(("found", "text"), [(Standing(True), GONE), (ROLE_DENIED, DENIED),
                                             (Standing.unreadable(), UNREADABLE)])
async def test_confirm_and_generate_refused_so_leave_their_offer_open_for_when_the_member_may(
    stack: Stack, cog_offer: Any, found: Standing, text: str
) -> None:
    offer_id = await cog_offer(stack)
    stack.bot.access = discord_standing(found)

    await OfferGoButton(offer_id, "Go").callback(click(stack, ELSEWHERE))

    assert answer(stack) == text
    assert (await stack.bot.offers.get(offer_id)).used_at is None  # type: ignore[union-attr]
    stack.log.events.clear()
    stack.bot.access = discord_standing(standing())  # the admin lifted it; the member is back
    await OfferGoButton(offer_id, "Go").callback(click(stack, ELSEWHERE))
    assert stack.log.names()[0] == "edit_message"
    await asyncio.sleep(0.2)
    assert stack.simulator.creates_received == 1


@pytest.fixture(params=["Confirm", "Generate"])
def cog_offer(request: pytest.FixtureRequest) -> Any:
    async def confirm(stack: Stack) -> int:
        return await reroll_offer(stack)

    async def generate(stack: Stack) -> int:
        offer = await stack.bot.offers.confirm(NewJob(
            model=MODEL_ID, prompt="a lantern", seed=None, user_id=REQUESTER_ID, guild_id=GUILD_ID,
            channel_id=CHANNEL_ID, locale="en-US"))
        await stack.bot.offers.shown(offer.id, ELSEWHERE)
        return offer.id

    return confirm if request.param == "Confirm" else generate


async def test_a_dm_click_meets_the_servers_role_rule_with_the_roles_discord_gave(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="0",
                          REQUIRED_ROLE_ID=str(MEMBER_ROLE)) as stack:
        stack.bot.offers = Offers(stack.store)
        job = await posted_video(stack)
        # A click in a DM carries no member and no roles (the fake's user has none here); Discord's answer has them.
        stack.bot.access = discord_standing(standing(roles=frozenset()))
        await RerollButton(job.id, "Re-roll").callback(click(stack, POSTED_MESSAGE, guild_id=None))
        assert f"<@&{MEMBER_ROLE}>" in answer(stack)
        assert await stack.bot.offers.get(1) is None

        stack.log.events.clear()
        stack.bot.access = discord_standing(standing())
        await RerollButton(job.id, "Re-roll").callback(click(stack, POSTED_MESSAGE, guild_id=None))
        assert "Re-roll #" in answer(stack)
        offer = await stack.bot.offers.get(1)
        assert offer is not None and offer.message_id is not None
        stack.log.events.clear()
        # Recorded with the roles Discord gave: the role rule passes again when the request is written down.
        await OfferGoButton(offer.id, "Confirm").callback(click(stack, offer.message_id, guild_id=None))
        assert stack.log.names()[0] == "edit_message"
        await asyncio.sleep(0.2)
        assert stack.simulator.creates_received == 1
