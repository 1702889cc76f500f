"""The buttons as members meet them: the real bot process, the Discord double (button clicks are component
interactions, type 3), the service simulator. Re-roll survives a restart and starts one job however often it
is clicked; Delete is the requester's or a moderator's; confirm-before-spending spends nothing on Cancel or
timeout; a re-roll obeys the member's quota.
"""

from __future__ import annotations

import asyncio
import copy
import re
import sqlite3
from collections.abc import Callable
from typing import Any

import discord

from bot.simulator import MODEL_ID, VideoServiceSimulator
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble, InteractionRecord
from tests.e2e.harness import BotProcess
from tests.e2e.test_video_flow import embed_text, original, video_posts, wait_until

OTHER_ID = 600_000_000_000_000_002
MODERATOR_ID = 600_000_000_000_000_004
ADMIN_ID = 600_000_000_000_000_003
ADMIN_ROLE = 610_000_000_000_000_001
MODERATOR_ROLE = 610_000_000_000_000_002


def custom_ids(message: dict[str, Any]) -> list[str]:
    return [c["custom_id"] for row in message.get("components") or [] for c in row.get("components") or []]


def button(message: dict[str, Any], suffix: str) -> str:
    [found] = [custom_id for custom_id in custom_ids(message) if custom_id.endswith(suffix)]
    return found


async def answer(double: DiscordDouble, click: InteractionRecord) -> dict[str, Any]:
    """The private answer to a click: its callback's message, or (updated in place) the message clicked."""
    callback = await double.wait_for_callback(click.id)
    assert callback["accepted"], callback
    if callback["type"] == 4:
        return dict(callback["data"])
    return original(double, click)


async def posted(double: DiscordDouble, count: int) -> list[dict[str, Any]]:
    channel = double.channel_ids[0]
    await wait_until(lambda: len(video_posts(double, channel)) >= count, timeout=30)
    return video_posts(double, channel)


async def first_video(bot: BotProcess, double: DiscordDouble, prompt: str = "a paper boat") -> dict[str, Any]:
    interaction = await bot.slash("video", {"prompt": prompt})
    await double.wait_for_callback(interaction.id)
    [post] = await posted(double, 1)
    return post


def post_job(post: dict[str, Any]) -> str:
    return next(custom_id for custom_id in custom_ids(post) if ":reroll:" in custom_id).rsplit(":", 1)[1]


async def offer_message(double: DiscordDouble, click: InteractionRecord) -> dict[str, Any]:
    await double.wait_for_callback(click.id)
    return original(double, click)


async def as_admin(bot: BotProcess, double: DiscordDouble, name: str, options: dict[str, Any]) -> None:
    double.add_role(ADMIN_ROLE, name="admins", permissions=discord.Permissions(manage_guild=True).value)
    interaction = await bot.slash(f"settings {name}", options, user_id=ADMIN_ID, roles=[ADMIN_ROLE])
    await wait_until(lambda: bool(original(double, interaction).get("content"))
                     or any(c["data"] and c["data"].get("content")
                            for c in double.interaction_responses.get(interaction.id, [])))


async def test_reroll_after_restarts_creates_exactly_one_new_job_and_posts_it(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    post = await first_video(bot, double, "a paper boat on a lake")
    assert "Model: " in post["content"] and "Seed: random" in post["content"] and "¥250" in post["content"]
    assert [c.split(":")[1] for c in custom_ids(post)] == ["reroll", "delete"]
    # The buttons are resolved from the database: a new process knows them.
    await bot.stop()
    await bot.start()
    click = await double.send_component(post, button(post, f":reroll:{post_job(post)}"))
    offer = await offer_message(double, click)
    assert "¥250" in offer["content"] and offer["flags"] & 64
    confirm = button(offer, ":go")
    # The offer is in the database too: it survives another restart.
    await bot.stop()
    await bot.start()
    confirmed = await double.send_component(offer, confirm)
    await double.wait_for_callback(confirmed.id)
    _first, second = await posted(double, 2)
    assert "a paper boat on a lake" in second["content"]
    assert service.creates_received == 2
    seeds = [job.seed for job in service.jobs.values()]
    assert seeds[0] is None and seeds[1] is not None  # a new random seed
    assert "#2" in second["content"] and "Seed: random" not in second["content"]
    await asyncio.sleep(1.0)  # nothing else is on its way
    assert service.creates_received == 2 and len(video_posts(double, double.channel_ids[0])) == 2
    assert double.unknown_routes == []


async def test_a_double_click_and_concurrent_clicks_create_one_job(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    post = await first_video(bot, double)
    click = await double.send_component(post, button(post, f":reroll:{post_job(post)}"))
    offer = copy.deepcopy(await offer_message(double, click))
    confirm = button(offer, ":go")
    # Two clicks at once (two devices), then a third from a stale screen that still shows the button.
    # Each from its own screen: a copy of the message as it showed then.
    clicks = await asyncio.gather(*(double.send_component(copy.deepcopy(offer), confirm) for _ in range(2)))
    answers = [await answer(double, one) for one in clicks]
    late = await answer(double, await double.send_component(copy.deepcopy(offer), confirm))
    await posted(double, 2)
    await asyncio.sleep(1.0)
    assert service.creates_received == 2
    refused = [a for a in [*answers, late] if "already started" in (a.get("content") or "")]
    assert len(refused) == 2, [a.get("content") for a in [*answers, late]]


async def test_delete_is_refused_to_other_members_and_works_for_the_requester_and_moderators(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    post = await first_video(bot, double)
    delete = button(post, f":delete:{post_job(post)}")
    refused = await answer(double, await double.send_component(post, delete, user_id=OTHER_ID))
    assert "Manage Messages" in refused["content"] and refused["flags"] & 64
    assert not post["deleted"]
    done = await answer(double, await double.send_component(post, delete))
    assert "deleted" in done["content"]
    await wait_until(lambda: post["deleted"])
    # The ledger keeps the job.
    status = await bot.slash("status", {"job_id": "#1"})
    await wait_until(lambda: "delivered" in embed_text(original(double, status)))

    double.add_role(MODERATOR_ROLE, name="mods", permissions=discord.Permissions(manage_messages=True).value)
    await first_video(bot, double, "a second boat")
    [second] = [p for p in await posted(double, 2) if not p["deleted"]]
    moderated = await answer(double, await double.send_component(
        second, button(second, f":delete:{post_job(second)}"), user_id=MODERATOR_ID, roles=[MODERATOR_ROLE]))
    assert "deleted" in moderated["content"]
    await wait_until(lambda: second["deleted"])
    assert service.creates_received == 2


async def test_with_confirmation_on_cancel_and_timeout_send_nothing_and_generate_sends_one(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble
) -> None:
    bot = make_bot(service, OFFER_SECONDS="2")
    await bot.start()
    await as_admin(bot, double, "confirm", {"enabled": True})

    asked = await bot.slash("video", {"prompt": "a lantern"})
    offer = await offer_message(double, asked)
    assert "¥250" in offer["content"] and "a lantern" in offer["content"] and offer["flags"] & 64
    # The offer holds the model whose price it showed, not "the default": Generate charges what was shown.
    with sqlite3.connect(bot.workdir / "bot.sqlite3") as db:
        assert db.execute("SELECT model FROM offers").fetchall() == [(MODEL_ID,)]
    cancelled = await answer(double, await double.send_component(offer, button(offer, ":cancel")))
    assert "Cancelled" in cancelled["content"] and custom_ids(cancelled) == []

    timed = await bot.slash("video", {"prompt": "a lantern again"})
    stale = copy.deepcopy(await offer_message(double, timed))
    await wait_until(lambda: "expired" in (original(double, timed).get("content") or ""))
    assert custom_ids(original(double, timed)) == []
    late = await answer(double, await double.send_component(stale, button(stale, ":go")))
    assert "expired" in late["content"]
    await asyncio.sleep(0.5)
    assert service.creates_received == 0

    generate = await bot.slash("video", {"prompt": "a lantern, finally"})
    ready = await offer_message(double, generate)
    await double.wait_for_callback((await double.send_component(ready, button(ready, ":go"))).id)
    [post] = await posted(double, 1)
    assert "a lantern, finally" in post["content"] and service.creates_received == 1


async def test_a_reroll_over_the_members_quota_is_refused_with_nothing_spent(
    bot: BotProcess, double: DiscordDouble, make_service: ServiceFactory, service: VideoServiceSimulator
) -> None:
    await bot.start()
    await as_admin(bot, double, "limits", {"member_daily": 250})
    post = await first_video(bot, double)
    offer = await offer_message(double, await double.send_component(post, button(post, f":reroll:{post_job(post)}")))
    confirmed = await double.send_component(offer, button(offer, ":go"))
    await wait_until(lambda: any("allowance" in (m.get("content") or "")
                                 for m in double.webhook_messages.get(confirmed.token, {}).values()))
    await asyncio.sleep(0.5)
    assert service.creates_received == 1 and service.spend == 250


async def test_the_progress_message_shows_a_place_in_line_and_where_updates_go_after_the_token(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble
) -> None:
    bot = make_bot(service, POLL_INTERVAL_SECONDS="5")  # it stays queued while the receipt is written
    await bot.start()
    interaction = await bot.slash("video", {"prompt": "a queue of boats"})
    await wait_until(lambda: "Place in line" in embed_text(original(double, interaction)))
    receipt = embed_text(original(double, interaction))
    assert "Place in line: 1 of this bot's waiting jobs" in receipt
    assert re.search(r"Expected ready: <t:\d+:R>", receipt)  # from the learned durations of its model
    assert "Expected wait" not in receipt  # one estimate, not a general range above it too
    assert "after that, use `/status #1`" in receipt and "<t:" in receipt


async def test_a_button_for_a_request_the_bot_no_longer_knows_gets_a_clear_private_answer(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    await bot.start()
    post = await first_video(bot, double)
    # A post from before the database was restored from an older backup: its request is not in the database.
    stale = copy.deepcopy(post)
    for row in stale["components"]:
        for component in row["components"]:
            component["custom_id"] = re.sub(r":\d+$", ":999999", component["custom_id"])
    click = await double.send_component(stale, button(stale, ":reroll:999999"), roles=[])
    reply = await answer(double, click)
    assert reply["content"] == "The bot no longer knows what this button was for. Nothing was spent."
    assert reply["flags"] & 64
    assert service.creates_received == 1
