"""Who may spend and who may see, as strangers and members meet it: the real bot process, the Discord double, the
service simulator. One bot run, several checks: the host's ceilings hold against an admin who asks for more,
so a member gets one paid video and no second (by /video or by Re-roll); another member's /status #N answers as
an unknown reference does; a server the host has not listed gets one short refusal for /balance, /status and a
button, and reads nothing of the key.
"""

from __future__ import annotations

import copy
from typing import Any

import discord

from bot.simulator import VideoServiceSimulator
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess
from tests.e2e.test_buttons import OTHER_ID, answer, button, offer_message, post_job, posted
from tests.e2e.test_settings import ADMIN
from tests.e2e.test_settings import answer as private_answer
from tests.e2e.test_usage import ADMIN_ROLE
from tests.e2e.test_video_flow import embed_text, wait_until

NOT_ENABLED = "This bot is not enabled for this server. Nothing was spent."


async def test_the_hosts_rules_bind_every_server_and_a_members_requests_are_theirs(
    make_bot: Any, service: VideoServiceSimulator, double: DiscordDouble
) -> None:
    unlisted = double.add_guild()
    bot: BotProcess = make_bot(
        # Commands synced globally (no DISCORD_GUILD_ID): the unlisted server is offered them too.
        service, ALLOWED_GUILD_IDS=str(double.guild_id), DISCORD_GUILD_ID="",
        # The host's ceilings: one video a day per server, one in flight, an hour between two.
        GUILD_DAILY_BUDGET_YEN="250", MAX_ACTIVE_JOBS_PER_USER="1", VIDEO_COOLDOWN_SECONDS="3600",
    )
    await bot.start()
    double.add_role(ADMIN_ROLE, name="admins", permissions=discord.Permissions(manage_guild=True).value)

    # An admin cannot loosen the host's limits, nor remove them.
    refused = await private_answer(double, bot, "settings limits",
                                   {"server_daily": 0, "cooldown": 0, "in_flight": 0}, **ADMIN)
    assert refused.startswith("Nothing was changed: the bot's host sets limits"), refused
    assert "Server daily cap: at most ¥250 (asked: none)" in refused
    assert "Cooldown: at least 3600 s (asked: 0 s)" in refused
    assert "Jobs in flight per member: at most 1 (asked: none)" in refused
    shown = await private_answer(double, bot, "settings show", **ADMIN)
    assert "Server daily cap**: ¥250 (default) · host's limit: at most ¥250" in shown

    # So a member gets one paid video, and no second: not by /video, not by Re-roll.
    first = await bot.slash("video", {"prompt": "a quiet harbour at dawn"})
    await double.wait_for_callback(first.id)
    [post] = await posted(double, 1)
    second = await private_answer(double, bot, "video", {"prompt": "another harbour"})
    assert "Nothing was spent" in second and "You can ask for another video" in second, second
    offer = await offer_message(double, await double.send_component(post, button(post, f":reroll:{post_job(post)}")))
    confirmed = await double.send_component(offer, button(offer, ":go"))
    # The click's buttons go (the offer is used), and its refusal follows.
    await wait_until(lambda: any("You can ask for another video" in embed_text(message)
                                 for message in double.webhook_messages.get(confirmed.token, {}).values()))
    assert service.creates_received == 1 and service.creates_accepted == 1

    # Another member's request answers exactly as one that does not exist; a moderator sees it, prompt included.
    theirs = await private_answer(double, bot, "status", {"job_id": "#1"}, user_id=OTHER_ID)
    nothing = await private_answer(double, bot, "status", {"job_id": "#2"}, user_id=OTHER_ID)
    assert theirs == nothing.replace("#2", "#1")
    assert theirs == "No request `#1` was found in this server. Use `/status` without an id to list yours."
    moderated = await private_answer(double, bot, "status", {"job_id": "#1"}, **ADMIN)
    assert "a quiet harbour at dawn" in moderated

    # A server the host has not listed: one short refusal for everything, and nothing of the key is read.
    key_reads = service.key_info_requests
    for name, options in (("balance", None), ("status", {"job_id": "#1"})):
        text = await private_answer(double, bot, name, options, guild_id=unlisted)
        assert text == NOT_ENABLED, (name, text)
    elsewhere = copy.deepcopy(post)
    elsewhere["channel_id"] = str(double.guild_channel_ids(unlisted)[0])
    clicked = await answer(double, await double.send_component(elsewhere, button(post, f":delete:{post_job(post)}")))
    assert clicked["content"] == NOT_ENABLED and clicked["flags"] & 64
    assert service.key_info_requests == key_reads
    assert not post["deleted"] and service.creates_received == 1
