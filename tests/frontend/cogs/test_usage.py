"""/usage and /credit: a server's figures for admins, one's own for members, a CSV, and crediting a failed job."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import discord
import pytest

from bot.frontend.cogs.usage import UsageCog
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import Job, JobState
from tests.conftest import SIM_KEY
from tests.frontend.cogs.helpers import GUILD_ID as GUILD
from tests.frontend.cogs.helpers import (
    OTHER_GUILD_ID,
    OTHER_MEMBER_ID,
    REQUESTER_ID,
    Event,
    Stack,
    embed_fields,
    invoke,
    open_stack,
    stored_job,
)

S = JobState
ADMIN_ID = 720_000_000_000_000_099
MANAGER = discord.Permissions(manage_guild=True)
MEMBER = discord.Permissions(send_messages=True, use_application_commands=True)


@pytest.fixture
def cog(stack: Stack) -> UsageCog:
    return UsageCog(stack.bot)


async def usage(stack: Stack, cog: UsageCog, *, permissions: discord.Permissions = MANAGER, user_id: int = ADMIN_ID,
                **options: Any) -> Event:
    """Run /usage: it defers privately, then edits that one reply."""
    who = {key: options.pop(key) for key in ("locale", "filesize_limit") if key in options}
    interaction = stack.interaction(cog.usage, user_id=user_id, **who)
    interaction.permissions = permissions
    assert await invoke(stack, cog.usage, interaction, **options) is None
    assert stack.log.events[0].name == "defer" and stack.log.events[0].kwargs["ephemeral"] is True
    reply = stack.log.only_reply()
    assert reply.name == "edit_original_response"
    stack.log.events.clear()
    return reply


async def credit(stack: Stack, cog: UsageCog, job: str, *, permissions: discord.Permissions = MANAGER,
                 **who: Any) -> Event:
    interaction = stack.interaction(cog.credit, user_id=who.pop("user_id", ADMIN_ID), **who)
    interaction.permissions = permissions
    assert await invoke(stack, cog.credit, interaction, job=job) is None
    reply = stack.log.only_reply()
    assert reply.name == "send_message" and reply.kwargs["ephemeral"] is True
    stack.log.events.clear()
    return reply


def csv_rows(reply: Event) -> list[dict[str, str]]:
    [attachment] = reply.kwargs["attachments"]
    assert isinstance(attachment, discord.File)
    attachment.fp.seek(0)
    text = attachment.fp.read().decode("utf-8-sig")
    return list(csv.DictReader(io.StringIO(text, newline="")))


async def some_jobs(stack: Stack) -> dict[str, Job]:
    store = stack.store
    return {
        "mine_delivered": await stored_job(store, S.DELIVERED),
        "mine_failed": await stored_job(store, S.FAILED, service_job_id="vid_failed_mine",
                                        last_error="the service reported the job failed"),
        "mine_unknown": await stored_job(store, S.UNKNOWN, last_error="no answer"),
        "theirs_delivered": await stored_job(store, S.DELIVERED, user_id=OTHER_MEMBER_ID),
        "theirs_failed": await stored_job(store, S.STALLED, user_id=OTHER_MEMBER_ID, service_job_id="vid_stalled"),
        "theirs_rejected": await stored_job(store, S.REJECTED, user_id=OTHER_MEMBER_ID),
        "elsewhere": await stored_job(store, S.FAILED, guild_id=OTHER_GUILD_ID, service_job_id="vid_elsewhere"),
    }


async def test_an_admin_sees_every_member_the_totals_and_the_failed_jobs(stack: Stack, cog: UsageCog) -> None:
    jobs = await some_jobs(stack)

    reply = await usage(stack, cog)

    embed = reply.embed
    assert embed is not None and "attachments" not in reply.kwargs
    assert embed.title == "Usage in this server: This month"
    description = embed.description or ""
    assert f"<@{REQUESTER_ID}> · 1 accepted · 1 failed · 1 unknown · ¥500" in description
    assert f"<@{OTHER_MEMBER_ID}> · 1 accepted · 1 failed · 0 unknown · ¥500" in description
    fields = embed_fields(embed)
    assert (fields["Accepted"], fields["Failed"], fields["Outcome unknown"]) == ("2", "2", "1")
    # The figures are the ledger's, for this server only.
    assert await stack.store.ledger(guild_id=GUILD) == (4, 1000)
    assert (fields["Spent (ledger)"], fields["Credited by support"], fields["Net"]) == ("¥1,000", "¥0", "¥1,000")
    failed = fields["Failed jobs (reference · job id · cost · reason)"]
    assert f"`{jobs['mine_failed'].reference}` · `vid_failed_mine` · <@{REQUESTER_ID}> · ¥250 · the service " \
           "reported the job failed" in failed
    assert f"`{jobs['theirs_failed'].reference}` · `vid_stalled` · <@{OTHER_MEMBER_ID}>" in failed
    assert "vid_elsewhere" not in str(embed.to_dict())
    assert "1 with an unknown outcome" in (embed.footer.text or "")


async def test_a_member_without_manage_server_sees_only_their_own(stack: Stack, cog: UsageCog) -> None:
    jobs = await some_jobs(stack)

    reply = await usage(stack, cog, permissions=MEMBER, user_id=OTHER_MEMBER_ID, csv=True)

    embed = reply.embed
    assert embed is not None and embed.title == "Your usage in this server: This month"
    fields = embed_fields(embed)
    assert (fields["Accepted"], fields["Failed"], fields["Outcome unknown"]) == ("1", "1", "0")
    assert fields["Spent (ledger)"] == "¥500" == f"¥{(await stack.store.ledger(user_id=OTHER_MEMBER_ID))[1]}"
    shown = str(embed.to_dict())
    assert str(REQUESTER_ID) not in shown and "vid_failed_mine" not in shown
    # Their own failed job, without naming them to themselves.
    assert fields["Failed jobs (reference · job id · cost · reason)"] == \
        f"`{jobs['theirs_failed'].reference}` · `vid_stalled` · ¥250 · —"
    rows = csv_rows(reply)
    assert {row["user_id"] for row in rows} == {str(OTHER_MEMBER_ID)}
    assert [row["reference"] for row in rows] == [jobs["theirs_delivered"].reference, jobs["theirs_failed"].reference]


async def test_the_csv_holds_every_counted_job_of_the_server(stack: Stack, cog: UsageCog) -> None:
    jobs = await some_jobs(stack)
    await stack.store.update(jobs["mine_failed"].id, last_error="=HYPERLINK(\"http://evil\",\"click\")")

    reply = await usage(stack, cog, period="today", csv=True)

    rows = csv_rows(reply)
    counted = ("mine_delivered", "mine_failed", "mine_unknown", "theirs_delivered", "theirs_failed")
    assert sorted(row["reference"] for row in rows) == sorted(jobs[name].reference for name in counted)
    assert sum(int(row["charged_yen"]) for row in rows) == (await stack.store.ledger(guild_id=GUILD))[1]
    failed = next(row for row in rows if row["reference"] == jobs["mine_failed"].reference)
    assert failed["reason"] == "'=HYPERLINK(\"http://evil\",\"click\")"
    assert reply.kwargs["attachments"][0].filename.startswith("usage-")


async def test_a_csv_over_the_upload_limit_is_not_attached(stack: Stack, cog: UsageCog) -> None:
    await some_jobs(stack)

    reply = await usage(stack, cog, csv=True, filesize_limit=100)

    assert "attachments" not in reply.kwargs and reply.embed is not None
    assert reply.content is not None and "larger than Discord lets the bot attach here (100 bytes)" in reply.content


async def test_an_empty_period(stack: Stack, cog: UsageCog) -> None:
    await some_jobs(stack)

    reply = await usage(stack, cog, period="last_month")

    assert reply.embed is not None and "No charged requests in this period." in (reply.embed.description or "")
    assert embed_fields(reply.embed)["Spent (ledger)"] == "¥0"


async def test_in_japanese(stack: Stack, cog: UsageCog) -> None:
    await some_jobs(stack)

    reply = await usage(stack, cog, locale=discord.Locale.japanese)

    embed = reply.embed
    assert embed is not None and embed.title == "このサーバーの使用状況: 今月"
    assert embed_fields(embed)["使用額（記録）"] == "1,000円"
    assert f"<@{REQUESTER_ID}> · 受付1件 · 失敗1件 · 結果不明1件 · 500円" in (embed.description or "")


async def test_a_long_report_fits_discord_and_points_to_the_csv(stack: Stack, cog: UsageCog) -> None:
    for member in range(80):
        await stored_job(stack.store, S.FAILED, user_id=REQUESTER_ID + 1000 + member, last_error="x" * 500,
                         service_job_id=f"vid_{member:03d}_" + "y" * 100)

    reply = await usage(stack, cog)

    embed = reply.embed
    assert embed is not None
    assert len(embed) <= 6000 and len(embed.description or "") <= 4096
    assert all(len(str(field.value)) <= 1024 for field in embed.fields)
    assert (embed.description or "").endswith("more: the CSV has them all (`/usage csv:True`).")
    failed = embed_fields(embed)["Failed jobs (reference · job id · cost · reason)"]
    assert failed.endswith("more: the CSV has them all (`/usage csv:True`).")
    # Whole lines only, and the count of the left-out ones is right.
    shown = failed.count("\n")
    assert f"…and {80 - shown:,} more" in failed


async def test_an_admin_credits_a_failed_job_once(stack: Stack, cog: UsageCog) -> None:
    jobs = await some_jobs(stack)
    failed = jobs["mine_failed"]

    reply = await credit(stack, cog, failed.reference)

    # The host set no spending caps here: nothing of the host's counts it.
    assert reply.content == f"Request {failed.reference} (job `vid_failed_mine`, ¥250) is marked credited. The " \
        "ledger keeps the charge; reports show it as credited. It no longer counts against this server's own caps."
    stored = await stack.store.get(failed.id)
    assert stored.credited_by == ADMIN_ID and stored.credited_at is not None
    again = await credit(stack, cog, "vid_failed_mine", user_id=ADMIN_ID + 1)
    assert again.content is not None
    assert again.content.startswith(f"Request {failed.reference} was already marked credited <t:")
    assert f"by <@{ADMIN_ID}>. Nothing was changed." in again.content
    assert (await stack.store.get(failed.id)).credited_by == ADMIN_ID
    # The report keeps the charge and shows the credit beside it.
    report = await usage(stack, cog)
    assert report.embed is not None
    fields = embed_fields(report.embed)
    assert (fields["Spent (ledger)"], fields["Credited by support"], fields["Net"]) == ("¥1,000", "¥250", "¥750")
    assert "credited <t:" in fields["Failed jobs (reference · job id · cost · reason)"]


async def test_a_member_without_manage_server_cannot_credit(stack: Stack, cog: UsageCog) -> None:
    # Discord offers /credit to Manage Server by default, but an admin can open it to anyone: the command tree's
    # check refuses before the command runs.
    jobs = await some_jobs(stack)

    reply = await credit(stack, cog, jobs["mine_failed"].reference, permissions=MEMBER, user_id=REQUESTER_ID)

    assert reply.content == "Only members with the Manage Server permission can do this."
    assert (await stack.store.get(jobs["mine_failed"].id)).credited_at is None


async def test_what_cannot_be_credited_is_refused_and_says_why(stack: Stack, cog: UsageCog) -> None:
    jobs = await some_jobs(stack)

    delivered = await credit(stack, cog, jobs["mine_delivered"].reference)
    assert delivered.content == f"Request {jobs['mine_delivered'].reference} is delivered: only a failed, charged " \
        "job can be marked credited. Nothing was changed."
    for reference in ("#9999", "vid_elsewhere", jobs["elsewhere"].reference):
        missing = await credit(stack, cog, reference)
        assert missing.content == f"No request `{reference}` was found in this server. Nothing was changed."
    assert (await stack.store.get(jobs["elsewhere"].id)).credited_at is None
    assert (await stack.store.get(jobs["mine_delivered"].id)).credited_at is None


@pytest.mark.parametrize(("locale", "said"), [(discord.Locale.american_english, "The host's limits still count it."),
                                              (discord.Locale.japanese, "運営者の上限には引き続き数えます。")])
async def test_a_credit_where_the_host_set_caps_says_the_hosts_limits_still_count_it(
    simulator: VideoServiceSimulator, tmp_path: Path, locale: discord.Locale, said: str
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, MEMBER_MONTHLY_BUDGET_YEN="5000") as capped:
        failed = await stored_job(capped.store, S.FAILED, service_job_id="vid_failed_mine")
        reply = await credit(capped, UsageCog(capped.bot), failed.reference, locale=locale)
    assert reply.content is not None and reply.content.endswith(said)
