"""Fakes of discord.py objects, specced against the real classes, and a real bot stack around the simulator.

Only Discord is faked. The video service is the in-process simulator, reached through a real
`VideoServiceClient`, and jobs live in a real `JobStore`. Every call a command makes, to Discord
or to the video service, lands in one ordered `EventLog`, so a test can check that an interaction
was acknowledged before any slow work started.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import aiohttp
import discord
from discord import app_commands

from bot.app import build_client, open_services
from bot.community.command_permissions import CommandAccess
from bot.community.trust import Membership, Standing
from bot.config.settings import Settings, read_settings
from bot.core.retry import RetryPolicy
from bot.frontend.bot import VideoBot
from bot.frontend.delivery import DiscordDelivery
from bot.frontend.permissions import SpendingAccess
from bot.jobs.intake import VideoRequests
from bot.service.client import VideoServiceClient
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import Job, JobState, JobStore, NewJob

GUILD_ID = 700_000_000_000_000_001
OTHER_GUILD_ID = 700_000_000_000_000_002
CHANNEL_ID = 710_000_000_000_000_001
REQUESTER_ID = 720_000_000_000_000_001
OTHER_MEMBER_ID = 720_000_000_000_000_002
APPLICATION_ID = 730_000_000_000_000_001
VIDEO_COMMAND_ID = 730_000_000_000_000_002
SEND_MESSAGES = 1 << 11

#: Discord drops an interaction that is not acknowledged within 3 s.
ACK_DEADLINE_SECONDS = 3.0
FAST_RETRY = RetryPolicy(attempts=3, deadline=5, base_delay=0.05, max_delay=0.2)

_ids = itertools.count(800_000_000_000_000_001)
_ACKNOWLEDGEMENTS = ("defer", "send_message")
_REPLIES = ("send_message", "edit_original_response", "followup.send")


@dataclass
class Event:
    name: str
    kwargs: dict[str, Any]
    at: float
    #: The message Discord returned for this call, if any.
    message_id: int | None = None

    @property
    def content(self) -> str | None:
        value = self.kwargs.get("content")
        return value if isinstance(value, str) else None

    @property
    def embed(self) -> discord.Embed | None:
        value = self.kwargs.get("embed")
        return value if isinstance(value, discord.Embed) else None


@dataclass
class EventLog:
    """Everything that happened, in order: Discord calls by name, service calls as `service METHOD /path`."""

    events: list[Event] = field(default_factory=list)

    def add(self, name: str, **kwargs: Any) -> Event:
        event = Event(name, kwargs, time.monotonic())
        self.events.append(event)
        return event

    def names(self) -> list[str]:
        return [event.name for event in self.events]

    def service_calls(self) -> list[str]:
        return [event.name for event in self.events if event.name.startswith("service ")]

    def discord_events(self) -> list[Event]:
        return [event for event in self.events if not event.name.startswith("service ")]

    def replies(self) -> list[Event]:
        return [event for event in self.events if event.name in _REPLIES]

    def only_reply(self) -> Event:
        replies = self.replies()
        assert len(replies) == 1, f"expected one reply, got {[event.name for event in replies]}"
        return replies[0]


def trace_into(log: EventLog) -> aiohttp.TraceConfig:
    """Records each HTTP request to the video service in the event log."""
    trace = aiohttp.TraceConfig()

    async def on_request_start(
        session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestStartParams
    ) -> None:
        log.add(f"service {params.method} {params.url.path}")

    trace.on_request_start.append(on_request_start)
    return trace


# -- Discord fakes --------------------------------------------------------------------------------


def _http_error(status: int, code: int, message: str) -> discord.HTTPException:
    response = MagicMock(spec=aiohttp.ClientResponse)
    response.status = status
    response.reason = message
    return discord.NotFound(response, {"code": code, "message": message})


def fake_message(message_id: int | None = None) -> MagicMock:
    message = MagicMock(spec=discord.InteractionMessage)
    message.id = message_id if message_id is not None else next(_ids)
    return message


def fake_member(user_id: int, role_ids: Iterable[int] = ()) -> MagicMock:
    member = MagicMock(spec=discord.Member)
    member.id = user_id
    member.mention = f"<@{user_id}>"
    roles = []
    for role_id in role_ids:
        role = MagicMock(spec=discord.Role)
        role.id = role_id
        roles.append(role)
    member.roles = roles
    return member


def fake_interaction(
    log: EventLog,
    *,
    command: app_commands.Command[Any, ..., Any] | None = None,
    user_id: int = REQUESTER_ID,
    role_ids: Iterable[int] = (),
    guild_id: int | None = GUILD_ID,
    channel_id: int = CHANNEL_ID,
    locale: discord.Locale = discord.Locale.american_english,
    filesize_limit: int = discord.utils.DEFAULT_FILE_SIZE_LIMIT_BYTES,
    permissions: discord.Permissions | None = None,
) -> MagicMock:
    """An application-command interaction whose response follows Discord's rules (the member's permissions in
    the channel: none unless given).

    One initial response only (defer or send_message; a second raises InteractionResponded, as in
    discord.py); editing the original response or sending a follow-up before that fails with the
    404 Discord gives. Every call is recorded in `log`.
    """
    interaction = MagicMock(spec=discord.Interaction)
    interaction.id = next(_ids)
    interaction.type = discord.InteractionType.application_command
    interaction.token = f"interaction-token-{interaction.id}"
    interaction.created_at = discord.utils.utcnow()
    interaction.locale = locale
    interaction.guild_id = guild_id
    interaction.channel_id = channel_id
    interaction.filesize_limit = filesize_limit
    interaction.extras = {}
    interaction.command = command
    interaction.user = fake_member(user_id, role_ids)
    interaction.permissions = permissions if permissions is not None else discord.Permissions.none()
    interaction.message = None
    created = time.monotonic()
    interaction.created_monotonic = created

    response = MagicMock(spec=discord.InteractionResponse)
    response.type = None
    response.is_done.side_effect = lambda: response.type is not None

    async def defer(*, ephemeral: bool = False, thinking: bool = False) -> None:
        if response.type is not None:
            raise discord.InteractionResponded(interaction)
        log.add("defer", ephemeral=ephemeral, thinking=thinking)
        response.type = discord.InteractionResponseType.deferred_channel_message

    async def send_message(content: str | None = None, **kwargs: Any) -> MagicMock:
        if response.type is not None:
            raise discord.InteractionResponded(interaction)
        message = fake_message()
        log.add("send_message", content=content, **kwargs).message_id = message.id
        response.type = discord.InteractionResponseType.channel_message
        # discord.py asks for the callback's resource: the message the response created.
        callback = MagicMock(spec=discord.InteractionCallbackResponse)
        callback.message_id = message.id
        return callback

    response.defer.side_effect = defer
    response.send_message.side_effect = send_message
    interaction.response = response

    def require_acknowledged() -> None:
        if response.type is None:
            raise _http_error(404, 10015, "Unknown Webhook")

    async def edit_original_response(**kwargs: Any) -> MagicMock:
        require_acknowledged()
        message = fake_message()
        log.add("edit_original_response", **kwargs).message_id = message.id
        return message

    async def followup_send(content: str | None = None, **kwargs: Any) -> MagicMock:
        require_acknowledged()
        message = fake_message()
        log.add("followup.send", content=content, **kwargs).message_id = message.id
        return message

    interaction.edit_original_response.side_effect = edit_original_response
    followup = MagicMock(spec=discord.Webhook)
    followup.send.side_effect = followup_send
    interaction.followup = followup
    return interaction


def discord_standing(standing: Standing | None = None) -> MagicMock:
    """What a spending click reads from Discord, for a bot that never logged in: `standing` if given, else the
    clicker is the member the interaction names (its roles; none for a click in a DM) and no command permissions
    are set in the server."""
    access = MagicMock(spec=SpendingAccess)

    async def read(interaction: Any, guild_id: int, channel_id: int) -> Standing:
        if standing is not None:
            return standing
        roles = frozenset(role.id for role in getattr(interaction.user, "roles", []))
        video = CommandAccess(VIDEO_COMMAND_ID, APPLICATION_ID, guild_id, None, {})
        return Standing(True, Membership(roles, SEND_MESSAGES, channel_id), video)

    access.standing.side_effect = read
    return access


def assert_answered_in_time(log: EventLog, interaction: MagicMock) -> None:
    """Acknowledged first, within Discord's 3 s, before any request to the video service."""
    discord_events = log.discord_events()
    assert discord_events, "the interaction was never answered"
    first = discord_events[0]
    assert first.name in _ACKNOWLEDGEMENTS, f"first call to Discord was {first.name}, not an acknowledgement"
    assert first.at - interaction.created_monotonic < ACK_DEADLINE_SECONDS
    if log.service_calls():
        names = log.names()
        first_service = next(i for i, name in enumerate(names) if name.startswith("service "))
        assert names.index(first.name) < first_service, f"slow work began before the acknowledgement: {names}"


def embed_fields(embed: discord.Embed) -> dict[str, str]:
    return {str(f.name): str(f.value) for f in embed.fields}


# -- the real bot stack around the simulator ------------------------------------------------------


def bot_settings(base_url: str, api_key: str, database: Path, **env: str) -> Settings:
    return read_settings(
        {
            "DISCORD_TOKEN": "discord-token-for-tests",
            "VIDEO_API_BASE_URL": base_url,
            "VIDEO_API_KEY": api_key,
            "DATABASE_PATH": str(database),
            "VIDEO_STORAGE_DIR": str(database.parent / "videos"),
            **env,
        }
    )


@dataclass
class Stack:
    bot: VideoBot
    settings: Settings
    store: JobStore
    client: VideoServiceClient
    requests: VideoRequests
    simulator: VideoServiceSimulator
    log: EventLog
    accepted: list[Job]

    def interaction(self, command: app_commands.Command[Any, ..., Any] | None = None, **kwargs: Any) -> MagicMock:
        interaction = fake_interaction(self.log, command=command, **kwargs)
        interaction.client = self.bot
        return interaction


@contextlib.asynccontextmanager
async def open_stack(
    simulator: VideoServiceSimulator,
    api_key: str,
    tmp_path: Path,
    *,
    timeout_seconds: float = 2.0,
    **env: str,
) -> AsyncIterator[Stack]:
    """A VideoBot (never logged in) holding the parts the composition root builds, with a fake deliverer."""
    log = EventLog()
    settings = bot_settings(simulator.base_url, api_key, tmp_path / "bot.sqlite3", **env)
    accepted: list[Job] = []
    async with aiohttp.ClientSession(trace_configs=[trace_into(log)]) as session:
        services = await open_services(
            settings,
            MagicMock(spec=DiscordDelivery),
            session=session,
            client=lambda http: build_client(
                settings, http, paced=False, timeout_seconds=timeout_seconds, create_retry=FAST_RETRY,
                read_retry=FAST_RETRY,
            ),
            on_accepted=accepted.append,
        )
        try:
            bot = VideoBot(settings, services.catalogue)
            bot.attach(services)
            bot.access = discord_standing()
            yield Stack(bot, settings, services.store, services.client, services.requests, simulator, log, accepted)
        finally:
            await services.close()


async def invoke(
    stack: Stack,
    command: app_commands.Command[Any, ..., Any],
    interaction: MagicMock,
    **arguments: Any,
) -> BaseException | None:
    """Run a command as discord.py would: the tree's `interaction_check` first (a refusal is answered there and
    the callback never runs), then its callback; an exception goes through the tree's on_error."""
    assert command.binding is not None
    if not await stack.bot.tree.interaction_check(interaction):
        return None
    try:
        await command.callback(command.binding, interaction, **arguments)
    except Exception as exc:
        await stack.bot.tree.on_error(interaction, app_commands.CommandInvokeError(command, exc))
        return exc
    return None


async def stored_job(
    store: JobStore,
    state: JobState,
    *,
    user_id: int = REQUESTER_ID,
    guild_id: int | None = GUILD_ID,
    prompt: str = "a red fox running through snow",
    seed: int | None = None,
    locale: str = "en-US",
    service_job_id: str | None = None,
    charge: int = 250,
    **changes: Any,
) -> Job:
    """A job walked along legal moves to `state`, as the bot and the worker would have moved it."""
    job = await store.add_submission(
        NewJob(model="provider/video-model-2.0-fast", prompt=prompt, seed=seed, user_id=user_id,
               guild_id=guild_id, channel_id=CHANNEL_ID, locale=locale)
    )
    s = JobState
    if state in (s.REJECTED, s.INTERRUPTED):
        job = await store.transition(job.id, state, last_error=changes.pop("last_error", None))
    elif state in (s.SUBMITTING, s.UNKNOWN):
        job = await store.transition(job.id, s.SUBMITTING)
        if state == s.UNKNOWN:
            job = await store.transition(job.id, state, last_error=changes.pop("last_error", None))
    elif state != s.RECEIVED:
        service_id = service_job_id or f"vid_{job.id:04d}"
        await store.transition(job.id, JobState.SUBMITTING)
        job = await store.mark_accepted(job.id, service_id, charge, next_poll_at=time.time() + 20)
        path = {
            s.PENDING: [],
            s.IN_PROGRESS: [s.IN_PROGRESS],
            s.COMPLETED: [s.COMPLETED],
            s.DOWNLOADED: [s.COMPLETED, s.DOWNLOADED],
            s.DELIVERED: [s.COMPLETED, s.DOWNLOADED, s.DELIVERED],
            s.UNDELIVERABLE: [s.COMPLETED, s.DOWNLOADED, s.UNDELIVERABLE],
            s.FAILED: [s.FAILED],
            s.STALLED: [s.STALLED],
        }[state]
        for step in path:
            job = await store.transition(job.id, step)
    if changes:
        job = await store.update(job.id, **changes)
    assert job.state == state
    return job
