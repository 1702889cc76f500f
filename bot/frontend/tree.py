"""The command tree: the trust model's gate before every slash command and autocomplete, and one place that turns
the bot's errors into short, private, friendly replies."""

from __future__ import annotations

import logging
import secrets
from typing import Any, Protocol

import discord
from discord import app_commands

from bot.community import trust
from bot.community.server_rules import InvalidSetting, LooserThanHost
from bot.core.errors import (
    BudgetTooLow,
    InvalidRequest,
    ModelUnavailable,
    SubmissionFailed,
    UnreadableKeyInfo,
    VideoServiceError,
)
from bot.frontend import embeds, gate, settings_embeds
from bot.frontend.i18n import t
from bot.store.jobs import AdmissionRefused, StoreUnavailable

log = logging.getLogger(__name__)


class AnsweredRequests(Protocol):
    """The one thing the tree needs from the request service: to record that a request got its final answer."""

    async def told(self, job_id: int) -> None: ...


class RequestsClient(Protocol):
    """The client this tree serves (VideoBot), as the tree sees it: the bot imports the tree, never the reverse."""

    @property
    def requests(self) -> AnsweredRequests: ...


async def respond(
    interaction: discord.Interaction[Any],
    content: str | None = None,
    *,
    embed: discord.Embed | None = None,
    file: discord.File | None = None,
    ephemeral: bool = True,
) -> discord.Message | None:
    """Answer an interaction whatever state it is in: first response, deferred, or already answered."""
    kwargs: dict[str, Any] = {"content": content, "allowed_mentions": discord.AllowedMentions.none()}
    if embed is not None:
        kwargs["embed"] = embed
    if not interaction.response.is_done():
        if file is not None:
            kwargs["file"] = file
        await interaction.response.send_message(ephemeral=ephemeral, **kwargs)
        return None
    if interaction.response.type is discord.InteractionResponseType.deferred_channel_message and not \
            interaction.extras.get("answered"):
        # Replace the "thinking…" placeholder rather than leaving it hanging beside a follow-up.
        interaction.extras["answered"] = True
        if file is not None:
            kwargs["attachments"] = [file]
        return await interaction.edit_original_response(**kwargs)
    if file is not None:
        kwargs["file"] = file
    return await interaction.followup.send(ephemeral=ephemeral, wait=True, **kwargs)


def friendly_text(error: BaseException, locale: str) -> str | None:
    """The user-facing text for the bot's own errors; None for anything unexpected."""
    if isinstance(error, InvalidRequest):
        return embeds.invalid_request_text(error, locale)
    if isinstance(error, ModelUnavailable):
        return embeds.model_text(error, locale)
    if isinstance(error, AdmissionRefused):
        return embeds.refusal_text(error, locale)
    if isinstance(error, BudgetTooLow):
        return embeds.budget_text(error, locale)
    if isinstance(error, SubmissionFailed):
        return embeds.submission_failed_text(error, locale)
    if isinstance(error, UnreadableKeyInfo):
        return t(locale, "error.key_info_unreadable")
    if isinstance(error, VideoServiceError):
        return t(locale, "error.service_unreachable")
    if isinstance(error, StoreUnavailable):
        return t(locale, "error.store_unavailable")
    if isinstance(error, app_commands.NoPrivateMessage):
        return t(locale, "error.guild_only")
    if isinstance(error, app_commands.MissingPermissions):
        return t(locale, "error.missing_permission")
    if isinstance(error, LooserThanHost):
        return settings_embeds.looser_than_host_text(error, locale)
    if isinstance(error, InvalidSetting):
        return t(locale, "error.invalid_setting", name=t(locale, f"setting.{error.key}"))
    return None


def focused_option(options: list[dict[str, Any]]) -> str | None:
    """The option an autocomplete interaction is for, at whatever depth of subcommands."""
    for option in options:
        if option.get("focused"):
            return str(option["name"])
        found = focused_option(option.get("options") or [])
        if found is not None:
            return found
    return None


def action_of(interaction: discord.Interaction[Any]) -> str | None:
    """The trust model's action for a slash command or an autocomplete; None for a command the tree lacks."""
    command = interaction.command
    if not isinstance(command, app_commands.Command):
        return None
    focused = None
    if interaction.type is discord.InteractionType.autocomplete:
        data: Any = interaction.data or {}
        focused = focused_option(data.get("options") or [])
    return trust.command_action(command.qualified_name, focused)


class VideoCommandTree(app_commands.CommandTree[Any]):
    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        """The host's rules and the caller's permissions (bot/community/trust.py), before any slash command or
        autocomplete: a refusal is answered here, and nothing else runs (an autocomplete suggests nothing)."""
        action = action_of(interaction)
        if action is None:
            return True  # no such command: discord.py answers it as one
        autocomplete = interaction.type is discord.InteractionType.autocomplete
        try:
            decision = await gate.decide(interaction, action, trust.GATE)
        except Exception as exc:  # the pause unreadable, say: refused (closed), and answered like any error
            if autocomplete:
                log.warning("autocomplete of %s refused for user %s: %r", action, interaction.user.id, exc)
                await self._no_suggestions(interaction)
            else:
                await answer_error(interaction, exc)
            return False
        if decision.allowed:
            return True
        log.info("%s refused for user %s in server %s: %s", action, interaction.user.id, interaction.guild_id,
                 decision.check)
        if autocomplete:
            await self._no_suggestions(interaction)
            return False
        try:
            await respond(interaction, gate.refusal_text(decision, interaction.locale.value), ephemeral=True)
        except discord.HTTPException:
            log.warning("could not tell user %s of a refusal: the interaction is gone", interaction.user.id)
        return False

    @staticmethod
    async def _no_suggestions(interaction: discord.Interaction[Any]) -> None:
        """A refused autocomplete's answer: no suggestions (it cannot carry a message)."""
        try:
            await interaction.response.autocomplete([])
        except discord.HTTPException:
            log.warning("could not tell user %s of a refusal: the interaction is gone", interaction.user.id)

    async def on_error(self, interaction: discord.Interaction[Any], error: app_commands.AppCommandError) -> None:
        cause = error.original if isinstance(error, app_commands.CommandInvokeError) else error
        if interaction.type is discord.InteractionType.autocomplete:
            # Autocomplete cannot carry a message; Discord just shows no suggestions.
            log.warning("autocomplete failed for user %s", interaction.user.id, exc_info=cause)
            return
        await answer_error(interaction, cause)


async def answer_error(
    interaction: discord.Interaction[Any], cause: BaseException, *, reply: discord.Message | None = None
) -> None:
    """The one way the bot's errors reach people: slash commands (through `on_error`) and buttons alike.

    `reply`: a message of this interaction to replace with the answer (a button's "waiting" follow-up).
    """
    locale = interaction.locale.value
    text = friendly_text(cause, locale)
    if text is None:
        reference = secrets.token_hex(4)
        command = interaction.command.qualified_name if interaction.command else "(button)"
        log.error("command /%s failed (reference %s)", command, reference, exc_info=cause)
        text = t(locale, "error.internal", reference=reference)
    else:
        log.info("command refused for user %s: %s", interaction.user.id, cause)
    try:
        if reply is not None:
            await reply.edit(content=text, embed=None, view=None, allowed_mentions=discord.AllowedMentions.none())
        else:
            await respond(interaction, text, ephemeral=True)
    except discord.HTTPException:
        # A recorded request stays "owed a message": the worker's sweep tells it in the channel.
        log.warning("could not tell user %s about an error: the interaction is gone", interaction.user.id)
        return
    job_id = _ended_request(cause)
    if job_id is not None:
        client: RequestsClient = interaction.client
        await client.requests.told(job_id)


def _ended_request(error: BaseException) -> int | None:
    """The recorded request that this error was the final answer to, if any."""
    if isinstance(error, SubmissionFailed) and error.final:
        return error.job_id
    if isinstance(error, BudgetTooLow):
        return error.job_id
    return None
