"""/settings as a server's admins use it: the real bot process, the Discord double, the service simulator.

An admin's change holds for the very next /video, with no restart; a member without Manage Server cannot
change anything even though the double (like a server whose admin opened the command to everyone) offers
it; a blocklisted term typed in full-width letters is refused with nothing spent; the log channel gets one
line per event and never a prompt.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import discord
import pytest

from bot.simulator import VideoServiceSimulator
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_usage import ADMIN_ID, ADMIN_ROLE
from tests.e2e.test_video_flow import wait_until

ADMIN: dict[str, Any] = {"user_id": ADMIN_ID, "roles": [ADMIN_ROLE]}


@pytest.fixture
async def running(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> AsyncIterator[tuple[BotProcess, VideoServiceSimulator]]:
    service = await make_service(max_budget=100_000)
    bot = make_bot(service)
    await bot.start()
    double.add_role(ADMIN_ROLE, name="admins", permissions=discord.Permissions(manage_guild=True).value)
    yield bot, service


async def answer(double: DiscordDouble, bot: BotProcess, name: str, options: dict[str, Any] | None = None,
                 **who: Any) -> str:
    """The text of the bot's private answer: the immediate message, or the edited "thinking…" placeholder."""
    interaction = await bot.slash(name, options, **who)
    first = await double.wait_for_callback(interaction.id)
    data = first["data"] or {}
    if not (data.get("content") or data.get("embeds")):
        def original() -> dict[str, Any]:
            return dict(double.webhook_messages.get(interaction.token, {}).get("@original", {}))

        await wait_until(lambda: bool(original().get("content") or original().get("embeds")))
        data = original()
    assert data["flags"] & 64  # private
    return str(data.get("content") or data["embeds"])


async def test_an_admins_new_limit_holds_for_the_next_video(
    running: tuple[BotProcess, VideoServiceSimulator], double: DiscordDouble
) -> None:
    bot, service = running
    changed = await answer(double, bot, "settings limits", {"member_daily": 250}, **ADMIN)
    assert changed.startswith("Changed") and "Member daily cap: none → ¥250" in changed

    first = await bot.slash("video", {"prompt": "a lighthouse"})
    await double.wait_for_callback(first.id)
    await wait_until(lambda: service.creates_accepted == 1)
    refused = await answer(double, bot, "video", {"prompt": "another lighthouse"})
    assert "Your daily video allowance in this server cannot pay for this video: ¥0 of ¥250 left" in refused
    assert "Nothing was spent" in refused
    assert service.creates_received == 1

    shown = await answer(double, bot, "settings show", **ADMIN)
    assert "Member daily cap**: ¥250 (this server)" in shown
    assert "Server daily cap**: none (default)" in shown


async def test_a_member_without_manage_server_cannot_change_settings_even_when_offered_the_command(
    running: tuple[BotProcess, VideoServiceSimulator], double: DiscordDouble
) -> None:
    bot, service = running
    # The double does not apply default_member_permissions: the bot's own check must refuse.
    refused = await answer(double, bot, "settings limits", {"member_daily": 1})
    assert refused == "Only members with the Manage Server permission can do this."
    refused = await answer(double, bot, "settings blocklist", {"action": "add", "term": "lighthouse"})
    assert refused == "Only members with the Manage Server permission can do this."

    await bot.slash("video", {"prompt": "a lighthouse"})
    await bot.slash("video", {"prompt": "a second lighthouse"})
    await wait_until(lambda: service.creates_accepted == 2)  # no cap and no blocklist took hold


async def test_a_full_width_variant_of_a_blocked_term_is_refused_with_nothing_spent_and_logged_without_it(
    running: tuple[BotProcess, VideoServiceSimulator], double: DiscordDouble
) -> None:
    bot, service = running
    log_channel = double.channel_ids[1]
    assert (await answer(double, bot, "settings log_channel", {"channel": log_channel}, **ADMIN)).startswith("Changed")
    added = await answer(double, bot, "settings blocklist", {"action": "add", "term": "dragon*fire"}, **ADMIN)
    assert added.startswith("Added to the blocklist")

    refused = await answer(double, bot, "video", {"prompt": "a ＤＲＡＧＯＮ breathing Ｆｉｒｅ"})
    assert refused == "This prompt contains a term this server does not allow. Nothing was spent."
    assert service.creates_received == 0 and service.key_info_requests == 0 and service.spend == 0

    await bot.slash("video", {"prompt": "a calm lake"})
    await wait_until(lambda: service.creates_accepted == 1)

    def lines() -> list[str]:
        return [str(m.get("content")) for m in double.messages.get(log_channel, [])]

    await wait_until(lambda: any(line.startswith("✅") for line in lines()))
    text = "\n".join(lines())
    assert f"<@{USER_ID}>: refused (`blocklist`). Nothing was spent." in text
    assert f"<@{ADMIN_ID}> added a blocklist term" in text
    assert f"<@{ADMIN_ID}> changed Log channel: off → <#{log_channel}>" in text
    assert f"accepted as job `{service.accepted_job_ids[0]}`, charged ¥250." in text
    for secret in ("dragon", "ＤＲＡＧＯＮ", "fire", "lake"):
        assert secret not in text.lower()
    # Log lines name people without pinging them.
    assert all(m["mentions"] == [] and m["mention_roles"] == [] for m in double.messages[log_channel])


async def test_a_member_quota_holds_at_its_edge_under_concurrent_requests_and_across_a_restart(
    running: tuple[BotProcess, VideoServiceSimulator], double: DiscordDouble
) -> None:
    bot, service = running
    await answer(double, bot, "settings limits", {"member_daily": 500}, **ADMIN)  # two videos a day

    interactions = await asyncio.gather(*(bot.slash("video", {"prompt": f"a kite {n}"}) for n in range(4)))
    await asyncio.gather(*(double.wait_for_callback(i.id) for i in interactions))
    await wait_until(lambda: service.creates_accepted == 2)

    await bot.stop()
    await bot.start()
    refused = await answer(double, bot, "video", {"prompt": "one more kite"})
    assert "Your daily video allowance in this server cannot pay for this video: ¥0 of ¥500 left" in refused
    assert service.creates_received == 2 and service.spend == 500
