"""/video: every branch, against the real request pipeline and the service simulator."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import discord
import pytest

from bot.core.errors import BudgetTooLow, InvalidRequest, SubmissionFailed, VideoServiceError
from bot.frontend.cogs.video import VideoCog
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import AdmissionRefused, Job, JobState, StoreUnavailable
from tests.conftest import SIM_KEY, fail_once
from tests.frontend.cogs.helpers import (
    GUILD_ID,
    OTHER_MEMBER_ID,
    REQUESTER_ID,
    Event,
    Stack,
    assert_answered_in_time,
    embed_fields,
    invoke,
    open_stack,
)

CREATE = "service POST /gateway/videos/create"
KEY_INFO = "service GET /key/info"


@pytest.fixture
def cog(stack: Stack) -> VideoCog:
    return VideoCog(stack.bot)


async def all_jobs(stack: Stack) -> list[Job]:
    return await stack.store.jobs_in_states(JobState)


def deferred_reply(stack: Stack) -> Event:
    """The single reply of a deferred interaction: the ephemeral "thinking" message, edited once."""
    assert stack.log.names()[0] == "defer"
    assert stack.log.events[0].kwargs["ephemeral"] is True
    reply = stack.log.only_reply()
    assert reply.name == "edit_original_response"
    return reply


def refusal_reply(stack: Stack) -> Event:
    """A refusal before anything is recorded: answered at once, privately, never deferred."""
    reply = stack.log.only_reply()
    assert reply.name == "send_message"
    assert reply.kwargs["ephemeral"] is True
    assert "defer" not in stack.log.names()
    return reply


# -- accepted -------------------------------------------------------------------------------------


async def test_valid_request_defers_first_creates_once_and_replies_with_a_receipt(
    stack: Stack, cog: VideoCog
) -> None:
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="  a lighthouse at dawn, waves crashing  ", seed=42)

    assert error is None
    assert stack.log.names() == ["defer", KEY_INFO, CREATE, "edit_original_response"]
    assert_answered_in_time(stack.log, interaction)
    assert stack.simulator.creates_received == 1
    assert stack.simulator.spend == 250

    [job] = await all_jobs(stack)
    assert job.state == JobState.PENDING
    assert job.prompt == "a lighthouse at dawn, waves crashing"
    assert job.seed == 42
    assert job.charged_yen == 250
    assert (job.user_id, job.guild_id) == (REQUESTER_ID, GUILD_ID)
    assert job.interaction_token == interaction.token
    assert job.service_job_id in stack.simulator.jobs
    assert [accepted.id for accepted in stack.accepted] == [job.id]

    reply = deferred_reply(stack)
    embed = reply.embed
    assert embed is not None
    assert embed.title == f"Video request #{job.id}"
    fields = embed_fields(embed)
    assert fields["Job"] == f"`{job.service_job_id}`"
    assert fields["State"] == "queued"
    assert fields["Cost"] == "¥250"
    assert fields["Started"] == f"<t:{int(job.accepted_at or 0)}:R>"
    # One estimate: when it is likely ready (from the learned durations), not also the general range above it.
    assert re.fullmatch(r"<t:\d+:R>", fields["Expected ready"]) and "Expected wait" not in fields
    assert f"`/status #{job.id}`" in (embed.description or "")
    assert reply.kwargs["allowed_mentions"].to_dict()["parse"] == []
    # The reply id is kept so the worker can edit the receipt while the token lives.
    assert job.reply_message_id == reply.message_id


async def test_a_prompt_of_exactly_2000_characters_is_accepted(stack: Stack, cog: VideoCog) -> None:
    prompt = "x" * 2000
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt=f" {prompt}\n")

    assert error is None
    assert stack.simulator.creates_received == 1
    [job] = await all_jobs(stack)
    assert job.prompt == prompt


async def test_japanese_client_gets_a_japanese_receipt_in_yen(stack: Stack, cog: VideoCog) -> None:
    interaction = stack.interaction(cog.video, locale=discord.Locale.japanese)

    await invoke(stack, cog.video, interaction, prompt="夜の東京を走る電車")

    [job] = await all_jobs(stack)
    assert job.locale == "ja"
    embed = deferred_reply(stack).embed
    assert embed is not None
    assert embed.title == f"動画リクエスト #{job.id}"
    fields = embed_fields(embed)
    assert fields["費用"] == "250円"
    assert fields["状態"] == "順番待ち"
    assert "¥" not in str(embed.to_dict())


async def test_each_video_command_sends_exactly_one_create(stack: Stack, cog: VideoCog) -> None:
    for user_id in (REQUESTER_ID, OTHER_MEMBER_ID):
        await invoke(stack, cog.video, stack.interaction(cog.video, user_id=user_id), prompt="a tiny robot")

    assert stack.simulator.creates_received == 2
    assert stack.log.service_calls().count(CREATE) == 2
    assert stack.simulator.spend == 500
    assert sorted(job.user_id for job in await all_jobs(stack)) == sorted([REQUESTER_ID, OTHER_MEMBER_ID])


# -- refused before anything is spent ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "seed", "expected"),
    [
        ("", None, "The prompt is empty. Describe the video you want. Nothing was spent."),
        ("   \n\t ", None, "The prompt is empty. Describe the video you want. Nothing was spent."),
        ("y" * 2001, None, "The prompt has 2,001 characters; the limit is 2,000. Shorten it and try again. "
         "Nothing was spent."),
        ("a cat", -1, "The seed must be a whole number from 0 to 4,294,967,295. Nothing was spent."),
        ("a cat", 2**32, "The seed must be a whole number from 0 to 4,294,967,295. Nothing was spent."),
    ],
    ids=["empty", "whitespace", "too-long", "seed-negative", "seed-too-big"],
)
async def test_invalid_input_is_answered_at_once_and_costs_nothing(
    stack: Stack, cog: VideoCog, prompt: str, seed: int | None, expected: str
) -> None:
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt=prompt, seed=seed)

    assert isinstance(error, InvalidRequest)
    reply = stack.log.only_reply()
    assert stack.log.names() == ["send_message"]
    assert reply.kwargs["ephemeral"] is True
    assert reply.content == expected
    interaction.response.defer.assert_not_awaited()
    assert stack.simulator.requests_log == []
    assert stack.simulator.creates_received == 0
    assert stack.simulator.spend == 0
    assert await all_jobs(stack) == []


async def test_invalid_input_from_a_japanese_client_is_explained_in_japanese(stack: Stack, cog: VideoCog) -> None:
    interaction = stack.interaction(cog.video, locale=discord.Locale.japanese)

    await invoke(stack, cog.video, interaction, prompt="あ" * 2001)

    reply = stack.log.only_reply()
    assert reply.content is not None
    assert reply.content.startswith("プロンプトが2,001文字あります。上限は2,000文字です。")
    assert stack.simulator.creates_received == 0


@pytest.mark.parametrize(
    ("spend", "max_budget", "figures"),
    [
        (9_900, 10_000, "¥100 left of ¥10,000 (¥9,900 spent), and one video costs ¥250"),
        (0, 200, "¥200 left of ¥200 (¥0 spent), and one video costs ¥250"),
    ],
)
async def test_a_budget_too_low_for_one_video_is_refused_with_the_figures(
    stack: Stack, cog: VideoCog, spend: int, max_budget: int, figures: str
) -> None:
    stack.simulator.spend = spend
    stack.simulator.config.max_budget = max_budget
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="a sunflower field")

    assert isinstance(error, BudgetTooLow)
    assert stack.log.names() == ["defer", KEY_INFO, "edit_original_response"]
    assert_answered_in_time(stack.log, interaction)
    reply = deferred_reply(stack)
    assert reply.content == f"The shared budget cannot pay for a video: {figures}. Nothing was sent."
    assert stack.simulator.creates_received == 0
    assert stack.simulator.spend == spend
    [job] = await all_jobs(stack)
    assert (job.state, job.charged_yen) == (JobState.REJECTED, 0)
    assert job.told_at is not None, "the reply was the request's final message"


async def test_a_budget_of_exactly_one_video_is_enough(stack: Stack, cog: VideoCog) -> None:
    stack.simulator.spend = 9_750

    assert await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a sunflower field") is None

    assert stack.simulator.creates_received == 1
    assert stack.simulator.spend == 10_000


async def test_service_unreachable_before_the_create_spends_nothing(stack: Stack, cog: VideoCog) -> None:
    stack.simulator.inject("key_info", 503, times=3)
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="a quiet forest")

    assert isinstance(error, SubmissionFailed) and error.kind == "busy"
    assert isinstance(error.__cause__, VideoServiceError)
    [job] = await all_jobs(stack)
    assert deferred_reply(stack).content == (
        f"The video service is busy or down right now, so request #{job.id} was not accepted. Nothing was "
        "charged (¥0). Please try again in a few minutes."
    )
    assert CREATE not in stack.log.service_calls()
    assert stack.simulator.creates_received == 0
    assert (job.state, job.charged_yen) == (JobState.REJECTED, 0)
    assert job.told_at is not None


async def test_a_second_request_inside_the_cooldown_is_refused_without_a_create(
    stack: Stack, cog: VideoCog
) -> None:
    await invoke(stack, cog.video, stack.interaction(cog.video), prompt="first video")
    stack.log.events.clear()
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="second video")

    assert isinstance(error, AdmissionRefused)
    assert error.code == "cooldown"
    reply = refusal_reply(stack)
    assert reply.content is not None
    assert reply.content.startswith("You can ask for another video <t:")
    assert reply.content.endswith(":R>. Nothing was spent.")
    assert CREATE not in stack.log.service_calls()
    assert stack.simulator.creates_received == 1
    assert len(await all_jobs(stack)) == 1


async def test_a_channel_outside_the_allowed_list_is_refused_before_any_request(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, ALLOWED_CHANNEL_IDS="123456") as stack:
        cog = VideoCog(stack.bot)
        error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a harbour at night")

        assert isinstance(error, AdmissionRefused)
        assert refusal_reply(stack).content == "Videos cannot be requested in this channel. Nothing was spent."
        assert stack.log.service_calls() == []
        assert simulator.requests_log == []


async def test_the_required_role_is_checked_against_the_member_roles(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, REQUIRED_ROLE_ID="555") as stack:
        cog = VideoCog(stack.bot)
        await invoke(stack, cog.video, stack.interaction(cog.video, role_ids=[111]), prompt="a glacier")

        assert refusal_reply(stack).content == (
            "You need one of these roles to request videos: <@&555>. Nothing was spent."
        )
        assert simulator.creates_received == 0

        stack.log.events.clear()
        error = await invoke(stack, cog.video, stack.interaction(cog.video, role_ids=[111, 555]), prompt="a glacier")

        assert error is None
        assert simulator.creates_received == 1


# -- the service says no ----------------------------------------------------------------------------


async def test_a_rejection_shows_the_reason_and_that_nothing_was_charged(stack: Stack, cog: VideoCog) -> None:
    stack.simulator.inject("create", 400, body={"error": {"message": "prompt violates the content policy"}})
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="something the service refuses")

    assert isinstance(error, SubmissionFailed)
    [job] = await all_jobs(stack)
    assert deferred_reply(stack).content == (
        f"The video service did not accept request #{job.id}: prompt violates the content policy. "
        "Nothing was charged (¥0)."
    )
    assert job.state == JobState.REJECTED
    assert job.charged_yen == 0
    assert job.last_error == "prompt violates the content policy"
    assert stack.simulator.creates_received == 1
    assert stack.simulator.spend == 0
    assert stack.accepted == []


@pytest.mark.parametrize("status", [429, 503])
async def test_busy_service_after_bounded_retries_asks_to_try_later(
    stack: Stack, cog: VideoCog, status: int
) -> None:
    stack.simulator.inject("create", status, times=3, retry_after=0.01 if status == 429 else None)
    interaction = stack.interaction(cog.video)

    error = await invoke(stack, cog.video, interaction, prompt="a busy street market")

    assert isinstance(error, SubmissionFailed)
    assert error.kind == "busy"
    [job] = await all_jobs(stack)
    content = deferred_reply(stack).content
    assert content == (
        f"The video service is busy or down right now, so request #{job.id} was not accepted. Nothing was charged "
        "(¥0). Please try again in a few minutes."
    )
    assert job.state == JobState.REJECTED
    assert job.charged_yen == 0
    # The retries are bounded (three attempts here) and none of them was charged.
    assert stack.simulator.creates_received == 3
    assert stack.log.service_calls().count(CREATE) == 3
    assert stack.simulator.spend == 0


async def test_a_busy_service_that_recovers_within_the_retries_accepts_once(stack: Stack, cog: VideoCog) -> None:
    stack.simulator.inject("create", 503, times=2)

    assert await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a rainbow") is None

    [job] = await all_jobs(stack)
    assert job.state == JobState.PENDING
    assert stack.simulator.creates_received == 3
    assert stack.simulator.creates_accepted == 1
    assert stack.simulator.spend == 250


# -- outcome unknown ---------------------------------------------------------------------------------


@pytest.mark.parametrize("disruption", ["hang", "drop"])
async def test_an_unanswered_create_is_never_resent_and_the_user_is_told(
    simulator: VideoServiceSimulator, tmp_path: Path, disruption: str
) -> None:
    if disruption == "hang":
        simulator.hang_next_create(seconds=10)
    else:
        simulator.drop_next_create()
    async with open_stack(simulator, SIM_KEY, tmp_path, timeout_seconds=0.3) as stack:
        cog = VideoCog(stack.bot)
        interaction = stack.interaction(cog.video)

        error = await invoke(stack, cog.video, interaction, prompt="a storm over the sea")

        assert isinstance(error, SubmissionFailed)
        assert error.kind == "unknown"
        assert stack.log.names() == ["defer", KEY_INFO, CREATE, "edit_original_response"]
        assert_answered_in_time(stack.log, interaction)
        [job] = await stack.store.jobs_in_states(JobState)
        content = deferred_reply(stack).content
        assert content is not None
        assert f"Request #{job.id} was sent, but the video service did not answer." in content
        assert "may have been accepted and charged ¥250" in content
        assert "will not be resent automatically" in content
        assert job.state == JobState.UNKNOWN
        assert job.charged_yen == 0
        assert stack.accepted == []
        # The service did accept and charge it: sending it again would have paid twice.
        assert simulator.creates_received == 1
        assert simulator.spend == 250


async def test_outcome_unknown_in_japanese_names_the_price_in_yen(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    simulator.drop_next_create()
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        cog = VideoCog(stack.bot)
        await invoke(stack, cog.video, stack.interaction(cog.video, locale=discord.Locale.japanese), prompt="嵐の海")

        content = deferred_reply(stack).content
        assert content is not None
        assert "250円が課金された可能性があります" in content
        assert "自動では再送しません" in content
        assert simulator.creates_received == 1


# -- what the service says is input, and the database can fail ------------------------------------------


async def test_the_request_is_written_down_before_it_is_acknowledged(stack: Stack, cog: VideoCog) -> None:
    interaction = stack.interaction(cog.video)
    rows_at_defer: list[int] = []
    defer = interaction.response.defer.side_effect

    async def recording_defer(**kwargs: Any) -> None:
        rows_at_defer.append(len(await all_jobs(stack)))
        await defer(**kwargs)

    interaction.response.defer.side_effect = recording_defer
    assert await invoke(stack, cog.video, interaction, prompt="a lighthouse") is None
    assert rows_at_defer == [1], "a kill right after the acknowledgement must still find the request"


async def test_a_database_that_cannot_record_refuses_before_anything_is_sent(
    stack: Stack, cog: VideoCog, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def full(*args: Any, **kwargs: Any) -> Job:
        raise StoreUnavailable("database or disk is full")

    monkeypatch.setattr(stack.store, "add_submission", full)
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")

    assert isinstance(error, StoreUnavailable)
    assert refusal_reply(stack).content == (
        "The bot cannot record requests right now (its database is unavailable). Nothing was sent or spent. "
        "Please try again later."
    )
    assert stack.simulator.requests_log == [] and stack.simulator.spend == 0


async def test_a_database_failing_after_the_202_tells_the_charge_and_records_it_later(
    stack: Stack, cog: VideoCog
) -> None:
    fail_once(stack.store, "mark_accepted", StoreUnavailable("database is locked"))
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")

    assert isinstance(error, SubmissionFailed) and error.kind == "charged_unrecorded"
    [remote_id] = stack.simulator.accepted_job_ids
    content = deferred_reply(stack).content or ""
    assert f"accepted as job `{remote_id}` and charged ¥250" in content
    # The write is retried in the background; once it lands, the job goes on to the worker.
    for _ in range(200):
        if stack.accepted:
            break
        await asyncio.sleep(0.02)
    [job] = await all_jobs(stack)
    assert (job.state, job.service_job_id, job.charged_yen) == (JobState.PENDING, remote_id, 250)
    assert [accepted.id for accepted in stack.accepted] == [job.id]
    assert job.told_at is None, "the video itself is still to come"


async def test_an_unusable_job_id_is_charged_failed_and_told_for_support(stack: Stack, cog: VideoCog) -> None:
    stack.simulator.force_next_job_ids("..")
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")

    assert isinstance(error, SubmissionFailed) and error.kind == "charged_unusable"
    [job] = await all_jobs(stack)
    assert (job.state, job.charged_yen, job.service_job_id) == (JobState.FAILED, 250, None)
    content = deferred_reply(stack).content or ""
    assert f"Request #{job.id} was accepted and charged ¥250" in content and "'..'" in content
    assert job.told_at is not None
    assert stack.simulator.spend == 250 == (await stack.store.ledger())[1]
    assert stack.accepted == [], "never handed to the worker: never polled"


async def test_a_202_whose_answer_cannot_be_read_is_charged_and_told_with_its_reference_and_time(
    stack: Stack, cog: VideoCog
) -> None:
    stack.simulator.reconfigure(create_raw_body="")
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")

    assert isinstance(error, SubmissionFailed) and error.kind == "charged_unreadable"
    [job] = await all_jobs(stack)
    assert (job.state, job.charged_yen, job.service_job_id) == (JobState.FAILED, 250, None)
    assert job.accepted_at is not None
    at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(job.accepted_at))
    content = deferred_reply(stack).content or ""
    assert f"Request #{job.id} was accepted and charged ¥250 at `{at}` (<t:{int(job.accepted_at)}:f>)" in content
    assert "will not be resent" in content
    assert job.told_at is not None
    assert stack.simulator.spend == 250 == (await stack.store.ledger())[1] and stack.simulator.creates_received == 1
    assert stack.accepted == [], "nothing to poll"


async def test_a_job_id_returned_twice_keeps_the_first_and_fails_the_second_charged(
    stack: Stack, cog: VideoCog
) -> None:
    assert await invoke(stack, cog.video, stack.interaction(cog.video), prompt="first") is None
    stack.log.events.clear()
    stack.simulator.duplicate_next_job_id()
    error = await invoke(stack, cog.video, stack.interaction(cog.video, user_id=OTHER_MEMBER_ID), prompt="second")

    assert isinstance(error, SubmissionFailed) and error.kind == "charged_unusable"
    first, second = await all_jobs(stack)
    assert first.state == JobState.PENDING and first.service_job_id is not None
    assert (second.state, second.charged_yen, second.service_job_id) == (JobState.FAILED, 250, None)
    content = deferred_reply(stack).content or ""
    assert first.service_job_id in content and first.reference in content and second.reference in content
    assert stack.simulator.spend == 500 == (await stack.store.ledger())[1]
    assert [job.id for job in stack.accepted] == [first.id]
