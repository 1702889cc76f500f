"""/usage and /credit as people meet them: the real bot process, the Discord double, the service simulator.

Several members make videos, some of which the service fails. An admin's report equals the bot's ledger, which
equals what the service charged, and its CSV parses; a member sees only their own; a member's /credit is
refused by the bot itself, although the double (like a server whose admin opened the command to everyone) does
not hold it back.
"""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator, Callable
from typing import Any

import discord
import pytest

from bot.simulator import VideoServiceSimulator
from bot.store.jobs import JobState, JobStore
from tests.conftest import SimulatorFactory as ServiceFactory
from tests.discord_double import DiscordDouble
from tests.e2e.harness import USER_ID, BotProcess
from tests.e2e.test_video_flow import embed_text, original, wait_until

OTHER_ID = 600_000_000_000_000_002
ADMIN_ID = 600_000_000_000_000_003
ADMIN_ROLE = 610_000_000_000_000_001
SETTLED = {JobState.DELIVERED, JobState.FAILED}


@pytest.fixture
async def running(
    make_bot: Callable[..., BotProcess], make_service: ServiceFactory, double: DiscordDouble
) -> AsyncIterator[tuple[BotProcess, VideoServiceSimulator, JobStore]]:
    """Four videos: one delivered and one failed for each of two members, all settled."""
    service = await make_service(max_budget=10_000)
    bot = make_bot(service)
    await bot.start()
    double.add_role(ADMIN_ROLE, name="admins", permissions=discord.Permissions(manage_guild=True).value)
    store = await JobStore.open(bot.workdir / "bot.sqlite3")
    try:
        plan = ((USER_ID, False), (USER_ID, True), (OTHER_ID, True), (OTHER_ID, False))
        for number, (user, fails) in enumerate(plan, start=1):
            # The simulator decides a job's fate when it accepts it.
            service.reconfigure(fail_rate=1.0 if fails else 0.0)
            video = await bot.slash("video", {"prompt": f"a kite, {user}, {fails}"}, user_id=user)
            await double.wait_for_callback(video.id)
            async with asyncio.timeout(20):
                while service.creates_accepted < number:
                    await asyncio.sleep(0.05)
        async with asyncio.timeout(30):
            while set(counts := await store.state_counts()) != SETTLED or sum(counts.values()) != 4:
                await asyncio.sleep(0.1)
        yield bot, service, store
    finally:
        await store.close()


async def reply_to(double: DiscordDouble, bot: BotProcess, name: str, options: dict[str, Any] | None = None,
                   **who: Any) -> dict[str, Any]:
    """The private answer to one command: the edited placeholder, or the immediate message."""
    interaction = await bot.slash(name, options, **who)
    first = await double.wait_for_callback(interaction.id)
    assert first["accepted"]
    if first["data"] and (first["data"].get("content") or first["data"].get("embeds")):
        assert first["data"]["flags"] & 64
        return dict(first["data"])
    await wait_until(lambda: bool(original(double, interaction).get("embeds")))
    message = original(double, interaction)
    assert message["flags"] & 64  # ephemeral
    return message


def fields(message: dict[str, Any]) -> dict[str, str]:
    [embed] = message["embeds"]
    return {field["name"]: field["value"] for field in embed.get("fields", [])}


def csv_rows(message: dict[str, Any]) -> list[dict[str, str]]:
    [(name, data)] = message["attachments_data"]
    assert name.startswith("usage-") and name.endswith(".csv")
    return list(csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline="")))


async def test_an_admins_report_equals_the_ledger_and_the_services_charges(
    running: tuple[BotProcess, VideoServiceSimulator, JobStore], double: DiscordDouble
) -> None:
    bot, service, store = running
    count, spent = await store.ledger(guild_id=double.guild_id)
    assert (count, spent) == (service.creates_accepted, service.spend) == (4, 1000)

    message = await reply_to(double, bot, "usage", {"csv": True}, user_id=ADMIN_ID, roles=[ADMIN_ROLE])

    shown = fields(message)
    assert (shown["Accepted"], shown["Failed"], shown["Outcome unknown"]) == ("2", "2", "0")
    assert shown["Spent (ledger)"] == f"¥{spent:,}" == f"¥{service.spend:,}"
    text = embed_text(message)
    assert f"<@{USER_ID}> · 1 accepted · 1 failed · 0 unknown · ¥500" in text
    assert f"<@{OTHER_ID}> · 1 accepted · 1 failed · 0 unknown · ¥500" in text
    failed_jobs = shown["Failed jobs (reference · job id · cost · reason)"]
    for job in await store.jobs_in_states([JobState.FAILED]):
        assert f"`{job.reference}` · `{job.service_job_id}`" in failed_jobs
    rows = csv_rows(message)
    assert len(rows) == count
    assert sum(int(row["charged_yen"]) for row in rows) == spent == service.spend
    assert {row["service_job_id"] for row in rows} == set(service.accepted_job_ids)
    assert sorted(row["outcome"] for row in rows) == ["accepted", "accepted", "failed", "failed"]
    assert "a kite" not in str(message)  # no prompt in the report or the file


async def test_a_member_sees_only_their_own_usage(
    running: tuple[BotProcess, VideoServiceSimulator, JobStore], double: DiscordDouble
) -> None:
    bot, _service, store = running

    message = await reply_to(double, bot, "usage", {"csv": True, "period": "today"}, user_id=OTHER_ID)

    assert message["embeds"][0]["title"] == "Your usage in this server: Today"
    shown = fields(message)
    assert shown["Spent (ledger)"] == f"¥{(await store.ledger(user_id=OTHER_ID))[1]:,}" == "¥500"
    assert (shown["Accepted"], shown["Failed"]) == ("1", "1")
    assert str(USER_ID) not in str(message["embeds"])
    rows = csv_rows(message)
    assert len(rows) == 2 and {row["user_id"] for row in rows} == {str(OTHER_ID)}


async def test_only_an_admin_can_mark_a_failed_job_credited(
    running: tuple[BotProcess, VideoServiceSimulator, JobStore], double: DiscordDouble
) -> None:
    bot, service, store = running
    [failed, _] = await store.jobs_in_states([JobState.FAILED])

    # The double does not apply default_member_permissions: the bot's own check must refuse.
    refused = await reply_to(double, bot, "credit", {"job": failed.reference}, user_id=failed.user_id)
    assert refused["content"].startswith("Only members with the Manage Server permission")
    assert (await store.get(failed.id)).credited_at is None

    done = await reply_to(double, bot, "credit", {"job": failed.service_job_id}, user_id=ADMIN_ID,
                          roles=[ADMIN_ROLE])
    assert done["content"].startswith(f"Request {failed.reference} (job `{failed.service_job_id}`, ¥250) is marked "
                                      "credited.")
    assert (await store.get(failed.id)).credited_by == ADMIN_ID

    message = await reply_to(double, bot, "usage", {"csv": True}, user_id=ADMIN_ID, roles=[ADMIN_ROLE])
    shown = fields(message)
    # The ledger still equals what the service charged; the credit is shown beside it.
    assert shown["Spent (ledger)"] == f"¥{service.spend:,}" == "¥1,000"
    assert (shown["Credited by support"], shown["Net"]) == ("¥250", "¥750")
    [row] = [row for row in csv_rows(message) if row["reference"] == failed.reference]
    assert (row["credited"], row["credited_by"]) == ("yes", str(ADMIN_ID))
