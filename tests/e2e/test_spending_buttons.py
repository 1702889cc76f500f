"""Buttons that spend obey what /video obeys, in the real bot process against the Discord double: a member who left
the server cannot spend from a video's DM copy, and a server's command permissions for /video (Server Settings >
Integrations) bind Re-roll, Confirm and Generate as they bind the command, from the moment the gateway says so."""

from __future__ import annotations

from typing import Any

from bot.simulator import VideoServiceSimulator
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_buttons import answer, as_admin, button, offer_message, post_job
from tests.e2e.test_video_flow import video_posts, wait_until

MEMBER_ROLE = 610_000_000_000_000_010
ROLE = 1

GONE = "no longer a member"
DENIED = "Integrations"


def video_command_id(double: DiscordDouble) -> int:
    [video] = [c for c in double.synced_commands[double.guild_id] if c["name"] == "video"]
    return int(video["id"])


async def click(double: DiscordDouble, message: dict[str, Any], suffix: str) -> dict[str, Any]:
    return await answer(double, await double.send_component(message, button(message, suffix)))


async def test_spending_buttons_need_a_member_whom_the_servers_command_permissions_let_use_video(
    bot: BotProcess, double: DiscordDouble, service: VideoServiceSimulator
) -> None:
    double.add_member(USER_ID, name="requester", roles=[MEMBER_ROLE])
    here, closed = double.channel_ids
    double.forbid_channel(closed)  # its video goes to the requester's DMs
    await bot.start()
    await as_admin(bot, double, "confirm", {"enabled": True})  # /video offers Generate first
    for prompt, channel in (("a quiet harbour", closed), ("a lighthouse", here)):
        offer = await offer_message(double, await bot.slash("video", {"prompt": prompt}, channel_id=channel))
        await double.wait_for_callback((await double.send_component(offer, button(offer, ":go"))).id)
    dm_copy = await double.wait_for_dm(USER_ID, timeout=30, predicate=lambda m: bool(m.get("attachments_data")))
    await wait_until(lambda: len(video_posts(double, here)) == 1, timeout=30)
    [post] = video_posts(double, here)
    assert service.creates_received == 2

    # Kicked: the DM copy's Re-roll fetches the member from Discord, finds none, and offers nothing.
    await double.remove_member(double.guild_id, USER_ID)
    refused = await click(double, dm_copy, f":reroll:{post_job(dm_copy)}")
    assert GONE in refused["content"] and "Nothing was spent" in refused["content"] and refused["flags"] & 64
    assert "go" not in str(refused.get("components"))

    # Back in the server: the same button offers a re-roll, and /video's permissions are read for the server.
    double.add_member(USER_ID, name="requester", roles=[MEMBER_ROLE], guild_id=double.guild_id)
    dm_offer = await offer_message(double, await double.send_component(
        dm_copy, button(dm_copy, f":reroll:{post_job(dm_copy)}")))
    assert "¥250" in dm_offer["content"]
    generate = await offer_message(double, await bot.slash("video", {"prompt": "a windmill"}, channel_id=here))

    # An admin denies /video to the member's role: the gateway's update reaches the bot, and every spending button
    # of that member is refused at once, in a DM (the fetched member's roles) and in the server.
    await double.set_command_permissions(double.guild_id, video_command_id(double), [(MEMBER_ROLE, ROLE, False)])
    for message, suffix in ((dm_offer, ":go"), (post, f":reroll:{post_job(post)}"), (generate, ":go")):
        denied = await click(double, message, suffix)
        assert DENIED in denied["content"] and "Nothing was spent" in denied["content"], denied
    assert service.creates_received == 2

    # Lifted: the same offers spend again, one video each.
    await double.set_command_permissions(double.guild_id, video_command_id(double), [])
    for message in (dm_offer, generate):
        await double.wait_for_callback((await double.send_component(message, button(message, ":go"))).id)
    rerolled = await offer_message(double, await double.send_component(post, button(post, f":reroll:{post_job(post)}")))
    await double.wait_for_callback((await double.send_component(rerolled, button(rerolled, ":go"))).id)
    await wait_until(lambda: service.creates_received == 5, timeout=30)
    assert "Traceback" not in bot.log() and double.unknown_routes == []
