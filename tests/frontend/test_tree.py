"""The command tree: its trust gate before every command and autocomplete, its error handling, `respond`."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any
from unittest.mock import AsyncMock, MagicMock

import aiohttp
import discord
import pytest
from discord import app_commands

from bot.app import catalogue_of
from bot.core.errors import (
    BudgetTooLow,
    InvalidRequest,
    ProtocolError,
    RateLimited,
    Rejected,
    ServerError,
    ServiceUnreachable,
    SubmissionFailed,
)
from bot.core.notices import SubmissionKind
from bot.frontend.bot import VideoBot
from bot.frontend.cogs.balance import BalanceCog
from bot.frontend.cogs.settings import SettingsCog
from bot.frontend.cogs.status import StatusCog
from bot.frontend.cogs.usage import UsageCog
from bot.frontend.cogs.video import VideoCog
from bot.frontend.tree import VideoCommandTree, friendly_text, respond
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import AdmissionRefused, IllegalTransition, JobState, StoreUnavailable
from bot.store.jobs.meta import HOST_PAUSE
from tests.conftest import SIM_KEY, fail_once
from tests.frontend.cogs.helpers import (
    OTHER_GUILD_ID,
    EventLog,
    Stack,
    bot_settings,
    fake_interaction,
    open_stack,
    stored_job,
)

RESETS = 1_767_193_200.0


def failed(job_id: int, kind: SubmissionKind, reason: str) -> SubmissionFailed:
    return SubmissionFailed(job_id, kind, reason, price_yen=250)


@pytest.fixture
def bot(tmp_path: Path) -> VideoBot:
    settings = bot_settings("http://127.0.0.1:9", "sk-test-key-0123456789", tmp_path / "bot.sqlite3")
    return VideoBot(settings, catalogue_of(settings))


@pytest.fixture
def tree(bot: VideoBot) -> VideoCommandTree:
    assert isinstance(bot.tree, VideoCommandTree)
    return bot.tree


@pytest.fixture
def command(bot: VideoBot) -> app_commands.Command:  # type: ignore[type-arg]
    return VideoCog(bot).video


# -- friendly_text ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "english", "japanese"),
    [
        (InvalidRequest("prompt_empty", "empty"), "The prompt is empty. Describe the video you want. Nothing was "
         "spent.", "プロンプトが空です。"),
        (InvalidRequest("prompt_too_long", "long", length=2500, limit=2000), "The prompt has 2,500 characters; the "
         "limit is 2,000. Shorten it and try again. Nothing was spent.", "プロンプトが2,500文字あります。"),
        (InvalidRequest("seed_range", "seed", low=0, high=4_294_967_295), "The seed must be a whole number from 0 to "
         "4,294,967,295. Nothing was spent.", "シード値は0〜4,294,967,295の整数"),
        (InvalidRequest("seed_unsupported", "seed"), "This model does not take a seed. Nothing was spent.",
         "シード値を使えません"),
        (AdmissionRefused("cooldown", RESETS), "You can ask for another video <t:1767193200:R>. Nothing was spent.",
         "次の動画は<t:1767193200:R>から頼めます。"),
        (AdmissionRefused("too_many_active", None, active=2, limit=2), "You already have 2 videos in progress (the "
         "limit is 2). Try again when one is finished. Nothing was spent.", "すでに2本あります（上限2本）"),
        (AdmissionRefused("guild_daily_cap", RESETS, spent=4_850, cap=5_000, left=150), "This server's daily video "
         "budget cannot pay for this video: ¥150 of ¥5,000 left. It resets <t:1767193200:R>. Nothing was spent.",
         "（5,000円中、残り150円）"),
        (AdmissionRefused("channel", None), "Videos cannot be requested in this channel. Nothing was spent.",
         "このチャンネルでは動画をリクエストできません。"),
        (AdmissionRefused("role", None, roles=[555]), "You need one of these roles to request videos: <@&555>. "
         "Nothing was spent.", "ロールが必要です：<@&555>"),
        (BudgetTooLow(9_900, 10_000, 250), "The shared budget cannot pay for a video: ¥100 left of ¥10,000 (¥9,900 "
         "spent), and one video costs ¥250. Nothing was sent.", "残り100円（上限10,000円、使用済み9,900円）、1本250円"),
        (failed(7, "rejected", "nope"), "The video service did not accept request #7: nope. Nothing was "
         "charged (¥0).", "課金はありません（0円）"),
        (failed(7, "busy", "HTTP 503"), "The video service is busy or down right now, so request #7 was "
         "not accepted. Nothing was charged (¥0). Please try again in a few minutes.", "数分後にもう一度"),
        (failed(7, "unknown", "timeout"), "Request #7 was sent, but the video service did not answer. It "
         "may have been accepted and charged ¥250. It will not be resent automatically, so no second charge can "
         "happen. Check `/status #7` or `/balance` before asking again; if it was charged, support can trace it.",
         "250円が課金された可能性があります"),
        (ServiceUnreachable("down"), "The video service cannot be reached right now. Nothing was spent. Please try "
         "again later.", "動画サービスに接続できません。"),
        (ServerError(502), "The video service cannot be reached right now.", "動画サービスに接続できません。"),
        (RateLimited(2.0), "The video service cannot be reached right now.", "動画サービスに接続できません。"),
        (ProtocolError("garbage"), "The video service cannot be reached right now.", "動画サービスに接続できません。"),
        (Rejected(401, "bad key"), "The video service cannot be reached right now.", "動画サービスに接続できません。"),
        (app_commands.NoPrivateMessage(), "This command works in a server, not in direct messages.",
         "このコマンドはサーバー内で使えます"),
    ],
    ids=[
        "prompt_empty", "prompt_too_long", "seed_range", "seed_unsupported", "cooldown", "too_many_active",
        "guild_daily_cap", "channel", "role", "budget", "rejected", "busy", "unknown_outcome", "unreachable",
        "server_error", "rate_limited", "protocol_error", "key_rejected", "no_private_message",
    ],
)
def test_friendly_text_for_each_bot_error(error: BaseException, english: str, japanese: str) -> None:
    text = friendly_text(error, "en-US")
    assert text is not None
    assert text.startswith(english)
    assert japanese in (friendly_text(error, "ja") or "")


def test_a_rejection_reason_cannot_ping_anyone() -> None:
    text = friendly_text(failed(3, "rejected", "prompt says @everyone and <@123456789012345678>"), "en")
    assert text is not None
    assert "@everyone" not in text
    assert "<@123456789012345678>" not in text


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("boom"),
        KeyError("x"),
        IllegalTransition(1, "pending", JobState.SUBMITTING),
        discord.ClientException(),
    ],
)
def test_friendly_text_leaves_unexpected_errors_alone(error: BaseException) -> None:
    assert friendly_text(error, "en-US") is None


# -- on_error ---------------------------------------------------------------------------------------


async def test_an_unexpected_error_gets_a_reference_the_log_shares(
    tree: VideoCommandTree, command: app_commands.Command, caplog: pytest.LogCaptureFixture  # type: ignore[type-arg]
) -> None:
    log = EventLog()
    interaction = fake_interaction(log, command=command)
    secret = "sqlite path /srv/secret/password=hunter2 is locked"
    try:
        raise RuntimeError(secret)
    except RuntimeError as exc:
        cause = exc

    with caplog.at_level(logging.INFO, logger="bot.frontend.tree"):
        await tree.on_error(interaction, app_commands.CommandInvokeError(command, cause))

    reply = log.only_reply()
    assert reply.name == "send_message"
    assert reply.kwargs["ephemeral"] is True
    content = reply.content or ""
    match = re.fullmatch(
        r"Something went wrong on the bot's side\. Nothing more was spent\. If it happens again, tell the operator "
        r"this reference: `([0-9a-f]{8})`\.",
        content,
    )
    assert match is not None, content
    reference = match.group(1)
    assert "hunter2" not in content and "RuntimeError" not in content

    [record] = [r for r in caplog.records if r.name == "bot.frontend.tree"]
    assert record.levelno == logging.ERROR
    assert reference in record.getMessage()
    assert "/video" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[1] is cause
    assert "Traceback" in caplog.text and secret in caplog.text


async def test_two_unexpected_errors_get_different_references(
    tree: VideoCommandTree, command: app_commands.Command  # type: ignore[type-arg]
) -> None:
    log = EventLog()
    for _ in range(2):
        await tree.on_error(fake_interaction(log, command=command),
                            app_commands.CommandInvokeError(command, ValueError("x")))
    first, second = (re.search(r"`([0-9a-f]{8})`", reply.content or "") for reply in log.replies())
    assert first is not None and second is not None
    assert first.group(1) != second.group(1)


async def test_an_unexpected_error_in_japanese(
    tree: VideoCommandTree, command: app_commands.Command  # type: ignore[type-arg]
) -> None:
    log = EventLog()
    interaction = fake_interaction(log, command=command, locale=discord.Locale.japanese)

    await tree.on_error(interaction, app_commands.CommandInvokeError(command, ZeroDivisionError()))

    assert (log.only_reply().content or "").startswith("ボット側で問題が起きました。")


async def test_a_known_error_after_a_defer_replaces_the_thinking_message(
    tree: VideoCommandTree, command: app_commands.Command, caplog: pytest.LogCaptureFixture  # type: ignore[type-arg]
) -> None:
    log = EventLog()
    interaction = fake_interaction(log, command=command)
    await interaction.response.defer(ephemeral=True, thinking=True)

    with caplog.at_level(logging.INFO, logger="bot.frontend.tree"):
        await tree.on_error(interaction, app_commands.CommandInvokeError(command, BudgetTooLow(10_000, 10_000, 250)))

    assert log.names() == ["defer", "edit_original_response"]
    assert (log.only_reply().content or "").startswith("The shared budget cannot pay for a video: ¥0 left")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_app_command_error_that_is_not_wrapped_is_handled_too(
    tree: VideoCommandTree, command: app_commands.Command  # type: ignore[type-arg]
) -> None:
    log = EventLog()

    await tree.on_error(fake_interaction(log, command=command), app_commands.NoPrivateMessage())

    assert log.only_reply().content == "This command works in a server, not in direct messages."


async def test_an_interaction_that_is_gone_is_logged_not_raised(
    tree: VideoCommandTree, command: app_commands.Command, caplog: pytest.LogCaptureFixture  # type: ignore[type-arg]
) -> None:
    log = EventLog()
    interaction = fake_interaction(log, command=command)
    await interaction.response.defer(ephemeral=True, thinking=True)
    gone = MagicMock(spec=aiohttp.ClientResponse)
    gone.status, gone.reason = 404, "Not Found"
    interaction.edit_original_response.side_effect = discord.NotFound(gone, {"code": 10015, "message": "Unknown"})

    with caplog.at_level(logging.WARNING, logger="bot.frontend.tree"):
        await tree.on_error(interaction, app_commands.CommandInvokeError(command, ServiceUnreachable("down")))

    assert any("interaction is gone" in r.getMessage() for r in caplog.records)


# -- respond ----------------------------------------------------------------------------------------


async def test_respond_before_any_answer_sends_the_initial_message() -> None:
    log = EventLog()
    interaction = fake_interaction(log)
    embed = discord.Embed(title="hello")

    result = await respond(interaction, "hi @everyone", embed=embed)

    assert result is None
    assert log.names() == ["send_message"]
    reply = log.only_reply()
    assert reply.kwargs["ephemeral"] is True
    assert reply.content == "hi @everyone"
    assert reply.embed is embed
    assert reply.kwargs["allowed_mentions"].to_dict() == {"parse": []}


async def test_respond_can_send_a_public_initial_message_with_a_file(tmp_path: Path) -> None:
    log = EventLog()
    interaction = fake_interaction(log)
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"mp4")
    file = discord.File(path)

    await respond(interaction, "here", file=file, ephemeral=False)

    reply = log.only_reply()
    assert reply.kwargs["ephemeral"] is False
    assert reply.kwargs["file"] is file


async def test_respond_after_a_defer_edits_the_placeholder_once_then_follows_up(tmp_path: Path) -> None:
    log = EventLog()
    interaction = fake_interaction(log)
    await interaction.response.defer(ephemeral=True, thinking=True)
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"mp4")
    file = discord.File(path)

    first = await respond(interaction, "first", file=file)
    second = await respond(interaction, "second")

    assert log.names() == ["defer", "edit_original_response", "followup.send"]
    edit, followup = log.replies()
    assert edit.content == "first"
    assert edit.kwargs["attachments"] == [file]
    assert "file" not in edit.kwargs
    assert followup.content == "second"
    assert followup.kwargs["ephemeral"] is True
    assert followup.kwargs["wait"] is True
    assert first is not None and first.id == edit.message_id
    assert second is not None and second.id == followup.message_id
    interaction.response.send_message.assert_not_awaited()


async def test_respond_after_a_message_was_sent_follows_up() -> None:
    log = EventLog()
    interaction = fake_interaction(log)
    await respond(interaction, "first")

    message = await respond(interaction, "second", ephemeral=False)

    assert log.names() == ["send_message", "followup.send"]
    followup = log.replies()[1]
    assert followup.kwargs["ephemeral"] is False
    assert message is not None and message.id == followup.message_id
    interaction.edit_original_response.assert_not_awaited()


# -- interaction_check: the trust model before every command and autocomplete ----------------------------------

NOT_ENABLED = "This bot is not enabled for this server. Nothing was spent."
ADMIN = discord.Permissions(manage_guild=True)


def commands_of(stack: Stack) -> dict[str, app_commands.Command]:  # type: ignore[type-arg]
    """Every command the cogs define, by its qualified name, bound to cogs of this stack's bot."""
    cogs = [VideoCog(stack.bot), StatusCog(stack.bot), BalanceCog(stack.bot), UsageCog(stack.bot),
            SettingsCog(stack.bot)]
    found: dict[str, app_commands.Command] = {}  # type: ignore[type-arg]
    for cog in cogs:
        for command in [*cog.walk_app_commands(), *([cog.video] if isinstance(cog, VideoCog) else [])]:
            if isinstance(command, app_commands.Command):
                found[command.qualified_name] = command
    return found


async def checked(stack: Stack, command: app_commands.Command, **who: Any) -> bool:  # type: ignore[type-arg]
    stack.log.events.clear()
    return await stack.bot.tree.interaction_check(stack.interaction(command, **who))


async def test_an_unlisted_server_gets_one_short_refusal_for_every_command_before_it_runs(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, ALLOWED_GUILD_IDS=str(OTHER_GUILD_ID)) as stack:
        commands = commands_of(stack)
        assert {"video", "status", "balance", "usage", "credit", "settings limits", "settings show"} <= set(commands)
        for name, command in commands.items():
            assert not await checked(stack, command, permissions=ADMIN), name
            reply = stack.log.only_reply()
            assert (reply.name, reply.content, reply.kwargs["ephemeral"]) == ("send_message", NOT_ENABLED, True)
            assert await checked(stack, command, guild_id=OTHER_GUILD_ID, permissions=ADMIN), name
        assert stack.log.service_calls() == []


async def test_an_unlisted_server_gets_no_suggestions(simulator: VideoServiceSimulator, tmp_path: Path) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path, ALLOWED_GUILD_IDS=str(OTHER_GUILD_ID)) as stack:
        await stored_job(stack.store, JobState.PENDING)
        command = commands_of(stack)["status"]
        interaction = stack.interaction(command)
        interaction.type = discord.InteractionType.autocomplete
        interaction.data = {"options": [{"name": "job_id", "type": 3, "value": "", "focused": True}]}
        interaction.response.autocomplete = AsyncMock()

        assert not await stack.bot.tree.interaction_check(interaction)
        interaction.response.autocomplete.assert_awaited_once_with([])


async def test_settings_and_their_autocomplete_need_manage_server(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        commands = commands_of(stack)
        for name in ("settings limits", "settings show", "credit"):
            assert not await checked(stack, commands[name]), name
            assert stack.log.only_reply().content == "Only members with the Manage Server permission can do this."
            assert await checked(stack, commands[name], permissions=ADMIN)
        interaction = stack.interaction(commands["settings models"])
        interaction.type = discord.InteractionType.autocomplete
        interaction.data = {"options": [{"name": "models", "type": 1, "options": [
            {"name": "action", "type": 3, "value": "allow"}, {"name": "model", "type": 3, "value": "",
                                                               "focused": True}]}]}
        interaction.response.autocomplete = AsyncMock()
        assert not await stack.bot.tree.interaction_check(interaction)
        interaction.response.autocomplete.assert_awaited_once_with([])


async def test_an_autocomplete_whose_gate_fails_suggests_nothing_and_is_refused(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        # A member without Manage Server; the gate itself fails (the host's rules unreadable): closed, not open.
        fail_once(stack.bot.requests, "host_rules", RuntimeError("boom"))
        interaction = stack.interaction(commands_of(stack)["settings models"])
        interaction.type = discord.InteractionType.autocomplete
        interaction.data = {"options": [{"name": "models", "type": 1, "options": [
            {"name": "action", "type": 3, "value": "allow"}, {"name": "model", "type": 3, "value": "",
                                                               "focused": True}]}]}
        interaction.response.autocomplete = AsyncMock()
        assert not await stack.bot.tree.interaction_check(interaction)
        interaction.response.autocomplete.assert_awaited_once_with([])


async def test_the_pause_refuses_video_and_leaves_reading_open(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        commands = commands_of(stack)
        await stack.store.set_meta(HOST_PAUSE, "1")
        assert not await checked(stack, commands["video"])
        assert stack.log.only_reply().content == "Video requests are paused by the bot's host for now. Nothing was " \
            "spent."
        for name in ("status", "balance", "usage"):
            assert await checked(stack, commands[name]), name
        assert await checked(stack, commands["settings limits"], permissions=ADMIN)
        await stack.store.delete_meta(HOST_PAUSE)
        assert await checked(stack, commands["video"])


async def test_a_pause_that_cannot_be_read_refuses_and_says_so(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    async with open_stack(simulator, SIM_KEY, tmp_path) as stack:
        fail_once(stack.bot.requests, "paused", StoreUnavailable("database is locked"))

        assert not await checked(stack, commands_of(stack)["video"])
        assert stack.log.only_reply().content == friendly_text(StoreUnavailable("x"), "en-US")
