"""/video when the database, the service or the input misbehaves: the requester is told the truth about money,
every request ends, and bad input costs nothing. Real store and client, against the simulator."""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import discord
import pytest

from bot.community.blocklist import clean_term
from bot.core.errors import InvalidRequest, SubmissionFailed
from bot.core.lifecycle import IN_FLIGHT_STATES
from bot.frontend.buttons import OfferGoButton
from bot.frontend.cogs.video import VideoCog
from bot.frontend.discord_text import plain
from bot.jobs.offers import Offers
from bot.service.validation import invisible
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import AdmissionRefused, Job, JobState, JobStore, NewJob, StoreUnavailable
from tests.conftest import SIM_KEY, fail_once
from tests.frontend.cogs.helpers import (
    CHANNEL_ID,
    GUILD_ID,
    OTHER_MEMBER_ID,
    REQUESTER_ID,
    Stack,
    fake_message,
    invoke,
    open_stack,
)


@pytest.fixture
def cog(stack: Stack) -> VideoCog:
    return VideoCog(stack.bot)


#: The message the offers of these tests were shown on.
OFFER_MESSAGE_ID = 830_000_000_000_000_001


async def offered(stack: Stack, prompt: str) -> int:
    """A /video confirmation's offer of Generate, for the requester, shown on OFFER_MESSAGE_ID; its id."""
    stack.bot.offers = Offers(stack.store)
    offer = await stack.bot.offers.confirm(NewJob(
        model="provider/video-model-2.0-fast", prompt=prompt, seed=None, user_id=REQUESTER_ID, guild_id=GUILD_ID,
        channel_id=CHANNEL_ID))
    await stack.bot.offers.shown(offer.id, OFFER_MESSAGE_ID)
    return offer.id


def button_click(stack: Stack, on_ack: Callable[[dict[str, Any]], Awaitable[None]] | None = None) -> Any:
    """A click on the offer message's button: its acknowledgement (`edit_message`) calls `on_ack` with what it
    changed."""
    interaction = stack.interaction()
    interaction.type = discord.InteractionType.component
    interaction.message = fake_message(OFFER_MESSAGE_ID)

    async def edit_message(**kwargs: Any) -> None:
        if on_ack is not None:
            await on_ack(kwargs)
        interaction.response.type = discord.InteractionResponseType.message_update

    interaction.response.edit_message.side_effect = edit_message
    return interaction


async def test_a_write_ahead_that_fails_once_does_not_leave_the_request_in_flight(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    """The write-ahead fails once (disk full for a moment): the requester is told 'not recorded, nothing spent',
    and the request ends there, not `received` (in flight, counted against the caps, holding the member's only
    slot) until a restart."""
    async with open_stack(simulator, SIM_KEY, tmp_path, MAX_ACTIVE_JOBS_PER_USER="1",
                          VIDEO_COOLDOWN_SECONDS="0") as stack:
        cog = VideoCog(stack.bot)
        real = stack.store.transition
        failures = [StoreUnavailable("database or disk is full")]

        async def flaky(job_id: int, target: JobState, **changes: Any) -> Job:
            if target == JobState.SUBMITTING and failures:
                raise failures.pop()
            return await real(job_id, target, **changes)

        stack.store.transition = flaky  # type: ignore[method-assign]
        error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")
        assert isinstance(error, SubmissionFailed) and error.kind == "not_recorded"
        assert simulator.creates_received == 0
        [job] = await stack.store.jobs_in_states(JobState)
        assert job.told_at is not None  # the requester got the final answer
        second = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a second try")
        assert not isinstance(second, AdmissionRefused), (
            f"the member is refused ({second}) because #{job.id} stays {job.state} after being told it ended")
        assert job.state not in IN_FLIGHT_STATES, f"#{job.id} still {job.state}, told at {job.told_at}"


async def test_a_stop_while_an_accepted_job_waits_to_be_recorded_does_not_lose_it(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    """The 202 came and its record failed once (database locked for a moment): the write is retried in the
    background. A SIGTERM (bot.close) cancels that retry, and tries the write once more before the database
    closes; otherwise the next start would take the paid job for one that may have been charged, never polled."""
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        cog = VideoCog(stack.bot)
        fail_once(stack.store, "mark_accepted", StoreUnavailable("database is locked"))
        error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")
        assert isinstance(error, SubmissionFailed) and error.kind == "charged_unrecorded"
        [remote_id] = simulator.accepted_job_ids
        await stack.bot.close()  # SIGTERM's path; the database is fine again
        store = await JobStore.open(stack.settings.database_path)
        try:
            [job] = await store.jobs_in_states(JobState)
            assert (job.state, job.service_job_id, job.charged_yen) == (JobState.PENDING, remote_id, 250), (
                f"after a clean stop the accepted, charged job {remote_id} is left {job.state} "
                f"(service id {job.service_job_id}, {job.charged_yen} yen)")
        finally:
            await store.close()


@pytest.mark.parametrize("fault", ["unusable_id", "dropped_after_accept"])
async def test_a_charged_request_whose_outcome_cannot_be_recorded_is_never_told_nothing_was_spent(
    simulator: VideoServiceSimulator, tmp_path: Path, fault: str
) -> None:
    """The create was sent and charged (an unusable job id, or the connection dropped after the charge), and
    recording that outcome fails (database full): the requester hears the outcome, never the database's
    "Nothing was sent or spent"."""
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        cog = VideoCog(stack.bot)
        if fault == "unusable_id":
            simulator.force_next_job_ids("..")
        else:
            simulator.drop_next_create(accept=True)
        real = stack.store.transition

        async def full(job_id: int, target: JobState, **changes: Any) -> Job:
            if target in (JobState.FAILED, JobState.UNKNOWN):
                raise StoreUnavailable("the database could not be written: database or disk is full")
            return await real(job_id, target, **changes)

        stack.store.transition = full  # type: ignore[method-assign]
        await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse")
        assert simulator.spend == 250  # the service charged it
        content = stack.log.only_reply().content or ""
        told = "accepted and charged" if fault == "unusable_id" else "It may have been accepted and charged"
        assert told in content, f"the requester was told: {content!r}"


async def test_a_generate_click_is_written_down_before_it_is_acknowledged(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    """Like /video, Generate writes the request before it acknowledges the click: a kill right after the
    acknowledgement leaves a row that start-up ends and tells, not a used offer nobody answers."""
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="0") as stack:
        offer_id = await offered(stack, "a lantern")
        rows_at_ack: list[int] = []

        async def count_rows(changes: dict[str, Any]) -> None:
            rows_at_ack.append(len(await stack.store.jobs_in_states(JobState)))

        await OfferGoButton(offer_id, "Generate").clicked(button_click(stack, count_rows))
        assert simulator.creates_received == 1
        assert rows_at_ack == [1], "a kill right after the acknowledgement finds no request to tell"


@pytest.mark.parametrize("status", [200, 201])
async def test_a_create_answered_2xx_not_202_is_not_told_nothing_was_spent(stack: Stack, status: int) -> None:
    cog = VideoCog(stack.bot)
    stack.simulator.inject("create", status, body={"id": "vid_abc", "status": "pending",
                                                  "poll_path": "/gateway/videos/jobs/vid_abc"})
    interaction = stack.interaction(cog.video)

    await invoke(stack, cog.video, interaction, prompt="a lighthouse at dusk")

    [job] = await stack.store.jobs_in_states(JobState)
    reply = stack.log.only_reply().content or ""
    # The bot's own record says the create may have been accepted and charged …
    assert job.state == JobState.UNKNOWN
    # … and the requester is told so, not that nothing was spent,
    assert "It may have been accepted and charged" in reply, reply
    # and the request must not stay 'owed a final message' (a second, contradicting message follows).
    owed = await stack.store.untold(older_than=float("inf"), max_notice_attempts=5)
    assert job.id not in [j.id for j in owed], "a second final message (maybe charged) will be sent later"


def leaked(text: str) -> str:
    """The longest prefix of the key (12+ chars) that `text` shows, as Discord renders it (escapes removed)."""
    rendered = text.replace("\\", "")
    return next((SIM_KEY[:n] for n in range(len(SIM_KEY), 11, -1) if SIM_KEY[:n] in rendered), "")


async def test_a_key_echoed_across_the_reason_cut_never_reaches_the_user_log_or_record(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    cog = VideoCog(stack.bot)
    echo = "invalid request for key ".ljust(300 - 24, ".") + SIM_KEY  # a gateway echoing the key
    stack.simulator.inject("create", 400, body={"error": {"message": echo}})

    await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse at dusk")

    [job] = await stack.store.jobs_in_states(JobState)
    reply = stack.log.only_reply().content or ""
    assert {"reply": leaked(reply), "last_error": leaked(job.last_error or ""), "log": leaked(caplog.text)} == {
        "reply": "", "last_error": "", "log": ""}


@pytest.mark.parametrize("method", ["queue_position", "update"], ids=["read-queue-position", "write-reply-id"])
async def test_a_charged_request_is_never_told_nothing_was_spent(
    stack: Stack, cog: VideoCog, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    async def locked(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("database is locked")

    # Only after the create was accepted and its charge recorded (mark_accepted went through).
    monkeypatch.setattr(stack.store, method, locked)

    await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a lighthouse at dawn")

    assert stack.simulator.spend == 250, "the create was accepted and charged"
    [job] = await stack.store.jobs_in_states(JobState)
    assert (job.state, job.charged_yen) == (JobState.PENDING, 250)
    told = [event.content or "" for event in stack.log.replies()]
    assert not any("Nothing was sent or spent" in text for text in told), told
    assert any(event.embed is not None for event in stack.log.replies()), "the receipt was shown"


@pytest.mark.parametrize("prompt", ["\u200b\u200b\u200b", "\u200b \u2060 \ufeff", "\x00\x01\x02", "\u200e",
                                    "\u3164", "\u034f\ufe0f"],
                         ids=["zwsp", "zw-mix", "controls", "lrm", "hangul-filler", "joiner-and-selector"])
async def test_an_invisible_prompt_is_refused_and_costs_nothing(stack: Stack, cog: VideoCog, prompt: str) -> None:
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt=prompt)

    assert isinstance(error, InvalidRequest), f"accepted: {error!r}"
    assert stack.simulator.creates_received == 0
    assert stack.simulator.spend == 0


@pytest.mark.parametrize("prompt", ["a red f\x01ox in the snow", "a red f\x7fox in the snow",
                                    "a red fo\u034fx in the snow"], ids=["SOH", "DEL", "grapheme-joiner"])
async def test_a_blocked_term_with_a_control_character_inside_is_still_refused(
    stack: Stack, cog: VideoCog, prompt: str
) -> None:
    await stack.bot.requests.rules.store.add_term(GUILD_ID, clean_term("fox"), OTHER_MEMBER_ID)
    # The plain term is refused (the blocklist is in force) ...
    plain_error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt="a red fox in the snow")
    assert isinstance(plain_error, AdmissionRefused) and plain_error.code == "blocklist"
    # ... and the same word with an invisible character inside it looks like "fox" in the channel.
    assert "fox" in "".join(char for char in plain(prompt, 300) if not invisible(char))

    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt=prompt)

    assert isinstance(error, AdmissionRefused), f"accepted and charged {stack.simulator.spend} yen"
    assert stack.simulator.spend == 0


async def test_a_generate_click_that_is_refused_still_takes_the_used_offers_buttons_away(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="0") as stack:
        offer_id = await offered(stack, "a red fox")
        await stack.bot.requests.rules.store.add_term(GUILD_ID, clean_term("fox"), OTHER_MEMBER_ID)  # meanwhile
        edits: list[dict[str, Any]] = []

        async def record(changes: dict[str, Any]) -> None:
            edits.append(changes)

        with pytest.raises(AdmissionRefused):
            await OfferGoButton(offer_id, "Generate").clicked(button_click(stack, record))

        assert edits == [{"view": None}], "a used offer keeps no buttons to press again"
        assert simulator.creates_received == 0


#: A code point this Python's Unicode does not know yet (a newer emoji, to a member's newer keyboard).
UNASSIGNED = next(chr(point) for point in range(0x1FA00, 0x1FC00) if unicodedata.category(chr(point)) == "Cn")


@pytest.mark.parametrize("prompt", [UNASSIGNED, "\U0001f98a\ufe0f", "caf\u0065\u0301"],
                         ids=["newer-emoji", "emoji-with-selector", "combining-accent"])
async def test_a_prompt_that_shows_something_is_not_empty(stack: Stack, cog: VideoCog, prompt: str) -> None:
    error = await invoke(stack, cog.video, stack.interaction(cog.video), prompt=prompt)

    assert error is None, f"refused: {error!r}"
    assert stack.simulator.creates_received == 1


async def test_a_generate_click_whose_offer_cannot_be_marked_started_still_sends_the_request(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, VIDEO_COOLDOWN_SECONDS="0") as stack:
        offer_id = await offered(stack, "a lantern")

        async def locked(offer_id: int, job_id: int) -> None:
            raise StoreUnavailable("database is locked")

        stack.bot.offers.started = locked  # type: ignore[method-assign]
        await OfferGoButton(offer_id, "Generate").clicked(button_click(stack))

        assert simulator.creates_received == 1
        [job] = await stack.store.jobs_in_states(JobState)
        assert job.state == JobState.PENDING, "bookkeeping that failed does not end a paid request"
