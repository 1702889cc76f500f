"""/status: the caller's list, one request in detail, and the hand-over of a video that could not be posted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import discord
import pytest
from discord import app_commands

from bot.frontend.cogs.status import StatusCog
from bot.store.jobs import JobState
from tests.frontend.cogs.helpers import (
    OTHER_GUILD_ID,
    OTHER_MEMBER_ID,
    Stack,
    assert_answered_in_time,
    embed_fields,
    invoke,
    stored_job,
)

S = JobState
MODERATOR = discord.Permissions(manage_guild=True)


@pytest.fixture
def cog(stack: Stack) -> StatusCog:
    return StatusCog(stack.bot)


async def status(stack: Stack, cog: StatusCog, job_id: str | None = None, **who: object) -> discord.Embed | None:
    """Run /status and return the embed of its single ephemeral reply (None when it has none)."""
    interaction = stack.interaction(cog.status, **who)
    assert await invoke(stack, cog.status, interaction, job_id=job_id) is None
    assert_answered_in_time(stack.log, interaction)
    reply = stack.log.only_reply()
    if reply.name == "send_message":
        assert reply.kwargs["ephemeral"] is True
    else:
        assert stack.log.events[0].name == "defer" and stack.log.events[0].kwargs["ephemeral"] is True
    # /status reads the bot's own records only.
    assert stack.log.service_calls() == []
    return reply.embed


# -- the list ----------------------------------------------------------------------------------------


async def test_no_argument_and_no_jobs_says_so(stack: Stack, cog: StatusCog) -> None:
    # Other people's jobs, and the caller's jobs in another server, are not theirs here.
    await stored_job(stack.store, S.PENDING, user_id=OTHER_MEMBER_ID)
    await stored_job(stack.store, S.PENDING, guild_id=OTHER_GUILD_ID)

    assert await status(stack, cog) is None
    assert stack.log.only_reply().content == "You have no video requests in this server yet."


async def test_the_list_shows_the_ten_newest_first_with_state_age_and_cost(stack: Stack, cog: StatusCog) -> None:
    mine = [await stored_job(stack.store, S.DELIVERED, prompt=f"video {n}") for n in range(9)]
    mine.append(await stored_job(stack.store, S.REJECTED, last_error="no"))
    mine.append(await stored_job(stack.store, S.UNKNOWN))
    mine.append(await stored_job(stack.store, S.PENDING))
    await stored_job(stack.store, S.PENDING, user_id=OTHER_MEMBER_ID)
    await stored_job(stack.store, S.PENDING, guild_id=OTHER_GUILD_ID)

    embed = await status(stack, cog)

    assert embed is not None
    assert embed.title == "Your recent video requests"
    lines = (embed.description or "").split("\n")
    newest = list(reversed(mine))[:10]
    assert len(lines) == 10
    assert [line.split()[0] for line in lines] == [f"`{job.reference}`" for job in newest]
    assert lines[0] == f"`{mine[11].reference}` queued · ¥250 · <t:{int(mine[11].created_at)}:R>"
    assert lines[1] == f"`{mine[10].reference}` outcome unknown · ¥0 · <t:{int(mine[10].created_at)}:R>"
    assert lines[2] == f"`{mine[9].reference}` not accepted · ¥0 · <t:{int(mine[9].created_at)}:R>"
    assert lines[3].startswith(f"`{mine[8].reference}` delivered · ¥250 · <t:")


async def test_the_list_in_japanese(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.IN_PROGRESS, charge=1250)

    embed = await status(stack, cog, locale=discord.Locale.japanese)

    assert embed is not None
    assert embed.title == "最近の動画リクエスト"
    assert embed.description == f"`{job.reference}` 生成中 · 1,250円 · <t:{int(job.created_at)}:R>"


# -- one request -----------------------------------------------------------------------------------


async def test_a_request_is_found_by_reference_by_number_and_by_service_id(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.IN_PROGRESS, seed=1234, prompt="a whale in the clouds",
                           service_job_id="vid_abc123")

    for reference in (f"#{job.id}", str(job.id), "vid_abc123", " vid_abc123 "):
        stack.log.events.clear()
        embed = await status(stack, cog, reference)

        assert embed is not None
        assert embed.title == f"Request #{job.id}"
        fields = embed_fields(embed)
        assert fields["State"] == "generating"
        assert fields["Job"] == "`vid_abc123`"
        assert fields["Cost"] == "¥250"
        assert fields["Seed"] == "1234"
        assert fields["Prompt"] == "a whale in the clouds"
        assert fields["Requested"] == f"<t:{int(job.created_at)}:R>"
        assert embed.description == f"It is being generated; the video will be posted in <#{job.channel_id}>."


@pytest.mark.parametrize("reference", ["#999", "vid_nothing", "@everyone <@123456789012345678>", "`x` **y**"])
async def test_an_unknown_id_gets_a_clear_private_answer(stack: Stack, cog: StatusCog, reference: str) -> None:
    await stored_job(stack.store, S.PENDING)

    assert await status(stack, cog, reference) is None

    reply = stack.log.only_reply()
    content = reply.content
    assert content is not None
    assert content.startswith("No request `")
    assert content.endswith("` was found in this server. Use `/status` without an id to list yours.")
    # The id stays inside its code span, and the reply can ping nobody whatever was typed.
    assert content.count("`") == 4
    assert reply.kwargs["allowed_mentions"].to_dict() == {"parse": []}


async def test_a_request_from_another_server_is_not_found_here(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.PENDING, guild_id=OTHER_GUILD_ID)

    embed = await status(stack, cog, job.reference)

    assert embed is None
    assert stack.log.only_reply().content == (
        f"No request `{job.reference}` was found in this server. Use `/status` without an id to list yours."
    )


async def test_a_failed_job_shows_its_job_id_and_the_service_credit_remedy(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.FAILED, service_job_id="vid_failed01")

    embed = await status(stack, cog, job.reference)

    assert embed is not None
    assert embed_fields(embed)["State"] == "failed"
    assert embed_fields(embed)["Cost"] == "¥250"
    assert embed.description == (
        "The job failed. It was charged ¥250 at acceptance; support remedies failed jobs with service credit. "
        "Give them the job id `vid_failed01`."
    )
    assert embed.colour == discord.Colour.red()


async def test_an_unknown_outcome_is_explained(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.UNKNOWN, last_error="timeout")

    embed = await status(stack, cog, job.reference)

    assert embed is not None
    fields = embed_fields(embed)
    assert fields["State"] == "outcome unknown"
    assert fields["Job"] == "—"
    assert fields["Cost"] == "¥0"
    description = embed.description or ""
    assert "cannot tell whether it was accepted and charged" in description
    assert "never resent automatically" in description


async def test_a_rejected_job_shows_the_reason_defused(stack: Stack, cog: StatusCog) -> None:
    job = await stored_job(stack.store, S.REJECTED, last_error="prompt mentions @everyone")

    embed = await status(stack, cog, job.reference)

    assert embed is not None
    description = embed.description or ""
    assert description.startswith("The video service did not accept it: prompt mentions @\u200beveryone")
    assert description.endswith("Nothing was charged.")


# -- hand-over of a video that could not be posted ---------------------------------------------------


@pytest.fixture
def video_file(tmp_path: Path) -> Path:
    path = tmp_path / "videos" / "vid_undeliverable.mp4"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 1000)
    return path


async def test_the_requester_gets_an_undeliverable_video_as_a_private_attachment(
    stack: Stack, cog: StatusCog, video_file: Path
) -> None:
    job = await stored_job(stack.store, S.UNDELIVERABLE, file_path=str(video_file))

    embed = await status(stack, cog, job.reference)

    assert stack.log.names() == ["defer", "edit_original_response"]
    assert stack.log.events[0].kwargs == {"ephemeral": True, "thinking": True}
    reply = stack.log.only_reply()
    [attachment] = reply.kwargs["attachments"]
    assert isinstance(attachment, discord.File)
    assert attachment.filename == f"video-{job.id}.mp4"
    assert embed is not None
    assert embed.description == "It could not be posted in the channel or by DM. Here is the file."
    # Handed over: the job is delivered and the bot's copy is gone.
    handed = await stack.store.get(job.id)
    assert handed.state == S.DELIVERED and handed.told_at is not None
    assert not video_file.exists()


async def test_a_moderator_sees_the_undeliverable_job_without_the_file(
    stack: Stack, cog: StatusCog, video_file: Path
) -> None:
    job = await stored_job(stack.store, S.UNDELIVERABLE, file_path=str(video_file))

    embed = await status(stack, cog, job.reference, user_id=OTHER_MEMBER_ID, permissions=MODERATOR)

    reply = stack.log.only_reply()
    assert reply.name == "send_message"
    assert "file" not in reply.kwargs and "attachments" not in reply.kwargs
    assert embed is not None and embed.title == f"Request #{job.id}"
    assert video_file.exists() and (await stack.store.get(job.id)).state == S.UNDELIVERABLE


# -- whose requests a member sees --------------------------------------------------------------------------


async def test_another_members_request_answers_exactly_as_an_unknown_one(stack: Stack, cog: StatusCog) -> None:
    theirs = await stored_job(stack.store, S.DELIVERED, prompt="a secret garden", service_job_id="vid_theirs")
    unknown = theirs.id + 1

    answers = []
    for reference in (theirs.reference, str(theirs.id), "vid_theirs", f"#{unknown}", "vid_nothing"):
        stack.log.events.clear()
        assert await status(stack, cog, reference, user_id=OTHER_MEMBER_ID) is None
        reply = stack.log.only_reply()
        shape = {key: value.to_dict() if isinstance(value, discord.AllowedMentions) else value
                 for key, value in reply.kwargs.items() if key != "content"}
        answers.append((reply.name, shape, (reply.content or "").replace(reference, "REF")))
    assert all(answer == answers[0] for answer in answers), answers
    assert answers[0][2] == "No request `REF` was found in this server. Use `/status` without an id to list yours."


async def test_a_member_with_manage_server_sees_any_request_of_the_server_prompt_included(
    stack: Stack, cog: StatusCog
) -> None:
    theirs = await stored_job(stack.store, S.IN_PROGRESS, prompt="a secret garden", service_job_id="vid_theirs")

    for reference in (theirs.reference, "vid_theirs"):
        stack.log.events.clear()
        embed = await status(stack, cog, reference, user_id=OTHER_MEMBER_ID, permissions=MODERATOR)
        assert embed is not None and embed_fields(embed)["Prompt"] == "a secret garden"
    # Moderating one server shows nothing of another's.
    elsewhere = await stored_job(stack.store, S.IN_PROGRESS, guild_id=OTHER_GUILD_ID)
    stack.log.events.clear()
    assert await status(stack, cog, elsewhere.reference, user_id=OTHER_MEMBER_ID, permissions=MODERATOR) is None


async def test_an_undeliverable_job_whose_file_is_gone_says_so(stack: Stack, cog: StatusCog, tmp_path: Path) -> None:
    job = await stored_job(stack.store, S.UNDELIVERABLE, file_path=str(tmp_path / "deleted.mp4"))

    embed = await status(stack, cog, job.reference)

    reply = stack.log.only_reply()
    assert reply.content == "It could not be posted, and its file is no longer on the bot's disk. Ask the operator."
    assert "file" not in reply.kwargs
    assert embed is not None


async def test_an_undeliverable_file_over_the_upload_limit_is_not_attached(
    stack: Stack, cog: StatusCog, video_file: Path
) -> None:
    job = await stored_job(stack.store, S.UNDELIVERABLE, file_path=str(video_file), service_job_id="vid_big")

    await status(stack, cog, job.reference, filesize_limit=100)

    reply = stack.log.only_reply()
    assert reply.content == (
        "It could not be posted and the file is too large to attach here. Ask the operator for it (job id `vid_big`)."
    )
    assert "file" not in reply.kwargs


# -- autocomplete ----------------------------------------------------------------------------------


async def complete(cog: StatusCog, interaction: Any, current: str) -> list[app_commands.Choice[str]]:
    # `@status.autocomplete` types the method as a callback without `self`; at runtime it is a plain method.
    function = cast(
        Callable[[StatusCog, Any, str], Awaitable[list[app_commands.Choice[str]]]], StatusCog.job_id_autocomplete
    )
    return await function(cog, interaction, current)


async def test_autocomplete_offers_the_callers_recent_jobs_only(stack: Stack, cog: StatusCog) -> None:
    first = await stored_job(stack.store, S.DELIVERED, prompt="a dragon over Kyoto", service_job_id="vid_dragon")
    second = await stored_job(stack.store, S.PENDING, prompt="a snail racing a turtle")
    await stored_job(stack.store, S.PENDING, user_id=OTHER_MEMBER_ID, prompt="someone else's dragon")
    await stored_job(stack.store, S.PENDING, guild_id=OTHER_GUILD_ID, prompt="a dragon elsewhere")
    interaction = stack.interaction(cog.status)

    everything = await complete(cog, interaction, "")
    dragons = await complete(cog, interaction, "DRAGON")
    by_service_id = await complete(cog, interaction, "vid_drag")

    assert [choice.value for choice in everything] == [second.reference, first.reference]
    assert everything[0].name == f"{second.reference} · queued · a snail racing a turtle"
    assert [choice.value for choice in dragons] == [first.reference]
    assert [choice.value for choice in by_service_id] == [first.reference]
    assert stack.log.events == []


async def test_autocomplete_names_fit_discords_100_characters(stack: Stack, cog: StatusCog) -> None:
    for _ in range(30):
        await stored_job(stack.store, S.PENDING, prompt="long " * 100)

    choices = await complete(cog, stack.interaction(cog.status), "")

    assert len(choices) == 25
    assert all(len(choice.name) <= 100 for choice in choices)


@pytest.mark.parametrize(
    "reference", ["#\u00b2", "\u2460", "#1\u00b9", "#" + "9" * 20, "1" * 400, "#" + "1" * 6000],
    ids=["superscript-2", "circled-1", "1-sup1", "20-digits", "400-digits", "6000-digits"],
)
async def test_a_reference_of_odd_digits_or_of_any_length_is_not_found_rather_than_an_internal_error(
    stack: Stack, cog: StatusCog, reference: str
) -> None:
    await stored_job(stack.store, JobState.PENDING)

    error = await invoke(stack, cog.status, stack.interaction(cog.status), job_id=reference)

    assert error is None, f"raised {error!r}"
    assert (stack.log.only_reply().content or "").startswith("No request `")
