"""Safe by default, in the real `python -m bot` against the Discord double: an application anyone can add to a
server of their own ("Public Bot" on), with no server list, does not serve; `check` says why; a host who accepts
the risk by name starts it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bot.simulator import VideoServiceSimulator
from tests.discord_double import DiscordDouble
from tests.e2e.harness import BotProcess

REFUSAL_MARK = "Public Bot"


def refusal_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if REFUSAL_MARK in line]


async def test_a_public_application_with_no_server_list_does_not_start_unless_the_host_accepts_the_risk(
    make_bot: Callable[..., BotProcess], service: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path
) -> None:
    double.bot_public = True  # as a new application is in the Developer Portal

    refused = make_bot(service, tmp_path / "refused")
    await refused.start("run")
    assert await refused.wait_exit() == 2
    [line] = refusal_lines(refused.log())
    assert "ALLOWED_GUILD_IDS" in line and "Developer Portal" in line
    assert "Traceback" not in refused.log()
    assert double.identify_payloads == [], "it never connected to the gateway"

    checked = make_bot(service, tmp_path / "checked")
    await checked.start("check")
    assert await checked.wait_exit() == 2
    [failed] = refusal_lines(checked.log())
    assert failed.startswith("discord: FAILED: ") and "ALLOWED_GUILD_IDS" in failed

    accepted = make_bot(service, tmp_path / "accepted", ALLOW_PUBLIC_BOT_SPENDING="1")
    await accepted.start()  # on to on_ready
    assert "ALLOW_PUBLIC_BOT_SPENDING" in accepted.log()
    assert await accepted.stop() == 0
    assert service.creates_received == 0
