"""An in-memory Discord (REST + gateway) that the real discord.py client can log into.

Everything the bot sends is recorded for assertions; errors come back with Discord's status
codes and JSON error codes so the bot's error handling runs against realistic failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import mimetypes
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from aiohttp import BodyPartReader, WSMsgType, web

from . import _commands, _payloads
from ._mentions import PARSE_ALL, PARSE_USERS, AllowedMentionsError, resolve_mentions

_log = logging.getLogger(__name__)

API_PREFIX = "/api/v10"
GATEWAY_PATH = "/gateway"
HEARTBEAT_INTERVAL_MS = 41_250
MAX_REQUEST_BYTES = 25 * 1024 * 1024
MAX_CONTENT_LENGTH = 2000
MAX_NONCE_LENGTH = 25

# Gateway close codes Discord uses for a bad IDENTIFY shard.
CLOSE_INVALID_SHARD = 4010
CLOSE_SHARDING_REQUIRED = 4011

FLAG_SUPPRESS_EMBEDS = 1 << 2
FLAG_EPHEMERAL = 1 << 6
FLAG_LOADING = 1 << 7
FLAG_SUPPRESS_NOTIFICATIONS = 1 << 12
FLAG_COMPONENTS_V2 = 1 << 15
_SENDABLE_FLAGS = FLAG_SUPPRESS_EMBEDS | FLAG_SUPPRESS_NOTIFICATIONS | FLAG_COMPONENTS_V2

INTERACTION_APPLICATION_COMMAND = 2
INTERACTION_COMPONENT = 3
INTERACTION_AUTOCOMPLETE = 4
INTERACTION_MODAL_SUBMIT = 5

COMPONENT_BUTTON = 2

CALLBACK_MESSAGE = 4
CALLBACK_DEFERRED_MESSAGE = 5
CALLBACK_DEFERRED_UPDATE = 6
CALLBACK_UPDATE_MESSAGE = 7
CALLBACK_AUTOCOMPLETE_RESULT = 8
CALLBACK_MODAL = 9
# Which callback types Discord accepts for each interaction type.
_CALLBACK_TYPES_BY_INTERACTION = {
    INTERACTION_APPLICATION_COMMAND: {CALLBACK_MESSAGE, CALLBACK_DEFERRED_MESSAGE, CALLBACK_MODAL},
    INTERACTION_COMPONENT: {
        CALLBACK_MESSAGE,
        CALLBACK_DEFERRED_MESSAGE,
        CALLBACK_DEFERRED_UPDATE,
        CALLBACK_UPDATE_MESSAGE,
        CALLBACK_MODAL,
    },
    INTERACTION_AUTOCOMPLETE: {CALLBACK_AUTOCOMPLETE_RESULT},
    INTERACTION_MODAL_SUBMIT: {
        CALLBACK_MESSAGE,
        CALLBACK_DEFERRED_MESSAGE,
        CALLBACK_DEFERRED_UPDATE,
        CALLBACK_UPDATE_MESSAGE,
    },
}

# Application command permission types: what an entry's id names.
PERMISSION_ROLE = 1
PERMISSION_USER = 2
PERMISSION_CHANNEL = 3
PERMISSION_TYPES = (PERMISSION_ROLE, PERMISSION_USER, PERMISSION_CHANNEL)
MAX_COMMAND_PERMISSIONS = 100  # entries per command (or per application) in a guild

MESSAGE_DEFAULT = 0
MESSAGE_REPLY = 19
MESSAGE_CHAT_INPUT_COMMAND = 20

# Keys kept on stored messages for tests that Discord never sends back.
_PRIVATE_MESSAGE_KEYS = frozenset({"attachments_data", "allowed_mentions", "deleted", "interaction_user_id"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class DiscordError(Exception):
    """Raised by handlers; becomes a Discord-style JSON error response."""

    def __init__(self, status: int, code: int, message: str, errors: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors

    def response(self) -> web.Response:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.errors is not None:
            body["errors"] = self.errors
        return _json_response(body, status=self.status)


def _invalid_form(field_path: str, reason: str) -> DiscordError:
    return DiscordError(
        400,
        50035,
        "Invalid Form Body",
        {field_path: {"_errors": [{"code": "BASE_TYPE_INVALID", "message": reason}]}},
    )


def _json_response(data: Any, *, status: int = 200) -> web.Response:
    # discord.py only decodes JSON when Content-Type is exactly "application/json";
    # json_response() would append "; charset=utf-8".
    return web.Response(status=status, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"})


class _Upload(NamedTuple):
    field: str
    filename: str
    data: bytes


# What the middleware read of a request, for its handler.
_BODY: Final = web.RequestKey("body", object)
_UPLOADS: Final = web.RequestKey("uploads", list[_Upload])


@dataclass
class RecordedRequest:
    """One REST call. `path` is below `api_base` (e.g. "/channels/1/messages?x=1")."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    files: list[tuple[str, bytes]]
    time: float
    status: int = 0


@dataclass
class InteractionRecord:
    """An interaction the double dispatched; `created_at` is time.monotonic() at dispatch."""

    id: str
    token: str
    type: int
    name: str
    channel_id: int
    user_id: int
    attachment_size_limit: int
    payload: dict[str, Any]
    created_at: float
    acknowledged: bool = False
    original_message_id: str | None = None
    message: dict[str, Any] | None = None  # a component interaction's message (the stored one)


@dataclass
class _GatewaySession:
    session_id: str
    intents: int
    identify: dict[str, Any]
    shard_id: int = 0
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    connection: _Connection | None = None


@dataclass(eq=False)
class _Connection:
    ws: web.WebSocketResponse
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: _GatewaySession | None = None


@dataclass
class _Guild:
    guild_id: int
    name: str
    channel_ids: tuple[int, ...]


@dataclass
class _Member:
    user_id: int
    name: str
    roles: list[int]
    joined_at: str


class DiscordDouble:
    """A fake Discord with one guild (more with `add_guild`), some text channels, DMs, slash commands and webhooks.

    Sharded like Discord: `shard_count` is what GET /gateway/bot recommends and what every IDENTIFY
    must carry; a guild's events go only to the connection of shard `(guild_id >> 22) % shard_count`,
    DMs to shard 0. Extra guilds share the first one's members and roles (ids differ, the @everyone
    role's included), which is all the bot looks at: a member is in every guild but those
    `remove_member` took them out of.

    `messages` holds what the bot posted with POST /channels/{id}/messages (DM channels
    included). Interaction responses and follow-ups live in `webhook_messages`, keyed by
    interaction token. Stored messages are Discord message objects plus:
    "attachments_data" [(filename, bytes)], the raw "allowed_mentions" the bot sent (None if
    absent), "mentions" as the user ids actually pinged, "mention_roles" as role ids, and
    "deleted" once the bot deletes them.
    """

    def __init__(
        self,
        *,
        application_id: int = 900_000_000_000_000_001,
        bot_user_id: int | None = None,
        guild_id: int = 800_000_000_000_000_001,
        channel_ids: tuple[int, ...] = (700_000_000_000_000_001, 700_000_000_000_000_002),
        default_upload_limit: int = 10 * 1024 * 1024,
        shard_count: int = 1,
        bot_public: bool = True,
    ) -> None:
        if not channel_ids:
            raise ValueError("the guild needs at least one text channel")
        if shard_count < 1:
            raise ValueError("shard_count must be 1 or more")
        self.shard_count = shard_count
        self.application_id = application_id
        self.bot_user_id = application_id if bot_user_id is None else bot_user_id
        self.guild_id = guild_id
        self.channel_ids = tuple(channel_ids)
        self.default_upload_limit = default_upload_limit
        #: The application's "Public Bot" switch (GET /applications/@me), on for a new application as on Discord.
        #: Tests may flip it at run time; the next GET answers with the new value.
        self.bot_public = bot_public
        # Discord's real limits; tests may loosen them when debugging under a debugger.
        self.callback_deadline: float = 3.0
        self.token_lifetime: float = 15 * 60
        self.nonce_window: float = 5 * 60

        self.api_base = ""
        self.gateway_url = ""
        self.requests: list[RecordedRequest] = []
        self.messages: dict[int, list[dict[str, Any]]] = {}
        self.interaction_responses: dict[str, list[dict[str, Any]]] = {}
        self.webhook_messages: dict[str, dict[str, dict[str, Any]]] = {}
        self.synced_commands: dict[int | None, list[dict[str, Any]]] = {}
        self.unknown_routes: list[str] = []
        self.identified = asyncio.Event()
        self.identify_payloads: list[dict[str, Any]] = []
        self.gateway_received: list[dict[str, Any]] = []

        self._ids = _payloads.SnowflakeFactory()
        self._bot_role_id = self._ids.next()
        self._roles: dict[int, dict[str, Any]] = {
            guild_id: _payloads.role_object(
                guild_id, "@everyone", permissions=_payloads.EVERYONE_PERMISSIONS, position=0
            ),
            self._bot_role_id: _payloads.role_object(
                self._bot_role_id,
                "Bot",
                permissions=_payloads.BOT_ROLE_PERMISSIONS,
                position=1,
                managed=True,
                bot_id=self.bot_user_id,
            ),
        }
        self._bot_user = _payloads.user_object(self.bot_user_id, "double-bot", bot=True)
        self._users: dict[int, dict[str, Any]] = {self.bot_user_id: self._bot_user}
        self._members: dict[int, _Member] = {
            self.bot_user_id: _Member(self.bot_user_id, "double-bot", [self._bot_role_id], _payloads.iso_now())
        }
        # guild id -> users who left it (or were kicked or banned): no longer members there.
        self._removed: dict[int, set[int]] = {}
        # guild id -> target (a command's id, or the application's for all its commands) -> permission entries.
        self._command_permissions: dict[int, dict[int, list[dict[str, Any]]]] = {}
        self._channels: dict[int, dict[str, Any]] = {
            cid: _payloads.text_channel_object(cid, guild_id, "general" if i == 0 else f"channel-{i + 1}", i)
            for i, cid in enumerate(self.channel_ids)
        }
        self._guilds: dict[int, _Guild] = {guild_id: _Guild(guild_id, "Double Guild", self.channel_ids)}
        self._dm_by_user: dict[int, int] = {}
        self._dm_channels: dict[int, dict[str, Any]] = {}
        self._forbidden_channels: set[int] = set()
        self._forbidden_dms: set[int] = set()
        self._automod_channels: set[int] = set()
        self._command_ids: dict[tuple[int | None, int, str], str] = {}
        self._interactions: dict[str, InteractionRecord] = {}
        self._interactions_by_token: dict[str, InteractionRecord] = {}
        self._nonces: dict[tuple[int, str], tuple[float, dict[str, Any]]] = {}
        self._blobs: dict[int, bytes] = {}
        self._sessions: dict[str, _GatewaySession] = {}
        self._connections: set[_Connection] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._http_base = ""

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=4 * MAX_REQUEST_BYTES)
        self._add_routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        self._http_base = f"http://{bound_host}:{bound_port}"
        self.api_base = self._http_base + API_PREFIX
        self.gateway_url = f"ws://{bound_host}:{bound_port}{GATEWAY_PATH}"
        _log.info("Discord double listening on %s", self._http_base)

    async def stop(self) -> None:
        for connection in list(self._connections):
            with contextlib.suppress(Exception):
                await connection.ws.close(code=1001, message=b"double stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DiscordDouble:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ test set-up

    def shard_of(self, guild_id: int) -> int:
        """The shard Discord sends the guild's events to."""
        return (guild_id >> 22) % self.shard_count

    def add_guild(self, *, shard: int = 0, channels: int = 1, name: str | None = None) -> int:
        """A new guild the bot is in, on `shard`, with `channels` text channels; returns its id.

        Its GUILD_CREATE reaches the bot when its shard next identifies: add guilds before starting the bot.
        """
        if not 0 <= shard < self.shard_count:
            raise ValueError(f"shard {shard} is not one of the double's {self.shard_count}")
        if channels < 1:
            raise ValueError("a guild needs at least one text channel")
        guild_id = self._ids.next()
        while self.shard_of(guild_id) != shard:
            guild_id += 1 << 22  # the next millisecond's snowflake: the shard moves by one
        channel_ids = tuple(self._ids.next() for _ in range(channels))
        for i, cid in enumerate(channel_ids):
            self._channels[cid] = _payloads.text_channel_object(
                cid, guild_id, "general" if i == 0 else f"channel-{i + 1}", i
            )
        self._guilds[guild_id] = _Guild(guild_id, name or f"Double Guild {len(self._guilds) + 1}", channel_ids)
        return guild_id

    def guild_ids(self) -> tuple[int, ...]:
        return tuple(self._guilds)

    def guild_channel_ids(self, guild_id: int) -> tuple[int, ...]:
        return self._guilds[guild_id].channel_ids

    def guild_of_channel(self, channel_id: int) -> int | None:
        """The guild a text channel belongs to; None for DMs and unknown channels."""
        channel = self._channels.get(channel_id)
        return int(channel["guild_id"]) if channel is not None else None

    def connected_shards(self) -> set[int]:
        """The shards with a live gateway connection."""
        return {session.shard_id for session in self._live_sessions()}

    def add_member(
        self, user_id: int, *, name: str | None = None, roles: Iterable[int] | None = None, guild_id: int | None = None
    ) -> None:
        """Make a user a guild member; unknown role ids become plain roles of the guild.

        Members are shared: the user is in every guild but those they were removed from. `guild_id` (default: the
        first guild) is the one announced in GUILD_MEMBER_ADD, and the one a removed member rejoins.
        """
        if guild_id is not None and guild_id not in self._guilds:
            raise ValueError(f"guild {guild_id} is not one of the double's")
        payload = self._register_member(user_id, name=name, roles=roles, guild_id=guild_id)
        self._broadcast_soon("GUILD_MEMBER_ADD", payload, intent=_payloads.INTENT_GUILD_MEMBERS)

    async def remove_member(self, guild_id: int, user_id: int) -> None:
        """The member leaves that guild (left, kicked or banned: Discord tells them apart only by other events).

        From then on GET /guilds/{guild_id}/members/{user_id} answers 404 / 10007 Unknown Member, the guild's member
        list leaves them out, and they can run nothing there; they stay a Discord user (GET /users, DMs). The guild's
        shard has been sent GUILD_MEMBER_REMOVE (GUILD_MEMBERS intent) when this returns.
        `add_member(user_id, guild_id=guild_id)` brings them back.
        """
        if guild_id not in self._guilds:
            raise ValueError(f"guild {guild_id} is not one of the double's")
        if user_id == self.bot_user_id:
            raise ValueError("the double cannot take its bot out of a guild")
        if not self.is_member(guild_id, user_id):
            raise LookupError(f"user {user_id} is not a member of guild {guild_id}")
        self._removed.setdefault(guild_id, set()).add(user_id)
        payload = {"guild_id": str(guild_id), "user": self._users[user_id]}
        await self._broadcast("GUILD_MEMBER_REMOVE", payload, intent=_payloads.INTENT_GUILD_MEMBERS)

    def is_member(self, guild_id: int, user_id: int) -> bool:
        """Whether the user is a member of that guild now."""
        return user_id in self._members and user_id not in self._removed.get(guild_id, ())

    def _guild_members(self, guild_id: int) -> list[_Member]:
        return [m for m in self._members.values() if self.is_member(guild_id, m.user_id)]

    def _register_member(
        self, user_id: int, *, name: str | None, roles: Iterable[int] | None, guild_id: int | None = None
    ) -> dict[str, Any]:
        guild_id = self.guild_id if guild_id is None else guild_id
        role_ids = list(roles or [])
        for role_id in role_ids:
            if role_id not in self._roles:
                self.add_role(role_id)
        member = _Member(user_id, name or f"user{user_id}", role_ids, _payloads.iso_now())
        self._members[user_id] = member
        self._users[user_id] = _payloads.user_object(user_id, member.name)
        self._removed.get(guild_id, set()).discard(user_id)
        return {"guild_id": str(guild_id), **self._member_payload(member)}

    def add_role(self, role_id: int, *, name: str | None = None, permissions: int = 0) -> None:
        """Add a guild role, e.g. one with ADMINISTRATOR for permission checks."""
        role = _payloads.role_object(
            role_id, name or f"role-{role_id}", permissions=permissions, position=len(self._roles)
        )
        self._roles[role_id] = role
        self._broadcast_soon("GUILD_ROLE_CREATE", {"guild_id": str(self.guild_id), "role": role})

    async def set_command_permissions(
        self, guild_id: int, target_id: int, entries: Iterable[tuple[int, int, bool]]
    ) -> dict[str, Any]:
        """What an admin saves under Server Settings > Integrations: who may use a command in that guild.

        `target_id` is a synced command's id, or `application_id` for all the application's commands. `entries` are
        `(id, type, permission)`: type 1 role, 2 user, 3 channel; the guild's id stands for @everyone and guild id - 1
        for all channels. They replace the target's entries (none clears them). Returns the guild application command
        permissions object, which the GET routes now answer with; the guild's shard has been sent it as
        APPLICATION_COMMAND_PERMISSIONS_UPDATE (an event of no intent) when this returns.
        """
        if guild_id not in self._guilds:
            raise ValueError(f"guild {guild_id} is not one of the double's")
        commands = {int(c["id"]) for scope in (None, guild_id) for c in self.synced_commands.get(scope, [])}
        if target_id != self.application_id and target_id not in commands:
            raise ValueError(f"{target_id} is neither the application nor a command synced for guild {guild_id}")
        wire: list[dict[str, Any]] = []
        for entry_id, kind, permission in entries:
            if kind not in PERMISSION_TYPES:
                raise ValueError(f"permission type {kind} is not one of {PERMISSION_TYPES}")
            if any(e["id"] == str(entry_id) and e["type"] == kind for e in wire):
                raise ValueError(f"two entries for {entry_id} of type {kind}")
            wire.append({"id": str(entry_id), "type": kind, "permission": bool(permission)})
        if len(wire) > MAX_COMMAND_PERMISSIONS:
            raise ValueError(f"at most {MAX_COMMAND_PERMISSIONS} entries, got {len(wire)}")
        targets = self._command_permissions.setdefault(guild_id, {})
        if wire:
            targets[target_id] = wire
        else:
            targets.pop(target_id, None)
        payload = self._command_permissions_object(guild_id, target_id, wire)
        await self._broadcast("APPLICATION_COMMAND_PERMISSIONS_UPDATE", payload)
        return payload

    def _command_permissions_object(
        self, guild_id: int, target_id: int, entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": str(target_id),
            "application_id": str(self.application_id),
            "guild_id": str(guild_id),
            "permissions": [dict(e) for e in entries],
        }

    def forbid_channel(self, channel_id: int) -> None:
        """Posting in that channel answers 403 / 50001 Missing Access."""
        self._forbidden_channels.add(channel_id)

    def block_by_automod(self, channel_id: int) -> None:
        """Posting in that channel answers 400 / 200000, as when the server's AutoMod blocks the message."""
        self._automod_channels.add(channel_id)

    def forbid_dm(self, user_id: int) -> None:
        """Messages to that user's DM channel answer 403 / 50007, as when DMs are closed."""
        self._forbidden_dms.add(user_id)

    def dm_channel_id(self, user_id: int) -> int | None:
        return self._dm_by_user.get(user_id)

    # ------------------------------------------------------------------ driving the bot

    # A plain `timeout` argument keeps the callers (the tests, the demo) short.
    async def wait_ready(self, timeout: float = 15) -> None:  # noqa: ASYNC109
        try:
            await asyncio.wait_for(self.identified.wait(), timeout)
        except TimeoutError:
            raise TimeoutError(f"no client identified on {self.gateway_url} within {timeout}s") from None

    async def send_slash_command(
        self,
        name: str,
        options: dict[str, object] | None = None,
        *,
        user_id: int = 600_000_000_000_000_001,
        channel_id: int | None = None,
        guild_id: int | None = None,
        locale: str = "en-US",
        attachment_size_limit: int | None = None,
        roles: list[int] | None = None,
    ) -> InteractionRecord:
        """A user runs /name (or `/group sub`); options are checked against the synced schema like the client does.

        User, channel and role options take ids; their objects go into `data.resolved` as Discord sends them.
        `guild_id` without `channel_id` runs it in that guild's first channel (default: the first guild's).

        The command's `default_member_permissions` and the guild's command permissions (`set_command_permissions`)
        are not applied: the interaction is sent whoever runs it, as if a client had let them, so that tests reach
        the bot's own checks. Only a user who is no longer a member of the guild (`remove_member`) is refused.
        """
        if channel_id is None and guild_id is not None:
            channel_id = self.guild_channel_ids(guild_id)[0]
        channel_id = self.channel_ids[0] if channel_id is None else channel_id
        guild = self.guild_of_channel(channel_id) or self.guild_id
        top, _, sub = name.partition(" ")
        command, guild_scoped = self._synced_command(top, guild)
        target = _commands.subcommand(command, sub) if sub else command
        data_options = _commands.build_options(target, dict(options or {}))
        resolved = self._resolved(target, data_options, guild)
        if sub:
            data_options = [{"name": sub, "type": _commands.OPTION_SUB_COMMAND, "options": data_options}]
        data = self._command_data(command, guild_scoped, data_options, guild)
        if resolved:
            data["resolved"] = resolved
        return await self._send_interaction(
            INTERACTION_APPLICATION_COMMAND,
            data,
            user_id=user_id,
            channel_id=channel_id,
            locale=locale,
            attachment_size_limit=attachment_size_limit,
            roles=roles,
        )

    def _resolved(self, command: dict[str, Any], data_options: list[dict[str, Any]], guild_id: int) -> dict[str, Any]:
        resolved: dict[str, dict[str, Any]] = {}
        for option in data_options:
            kind, value = option["type"], option.get("value")
            if kind not in _commands.SNOWFLAKE_OPTION_TYPES or value is None:
                continue
            snowflake = int(value)
            if kind == _commands.OPTION_CHANNEL:
                if snowflake not in self._channels:
                    raise ValueError(f"/{command['name']}: channel {snowflake} is not a channel of the guild")
                channel = dict(self._channels[snowflake])
                channel["permissions"] = str(self._permissions(self._members[self.bot_user_id].roles))
                resolved.setdefault("channels", {})[value] = channel
            elif kind == _commands.OPTION_ROLE:
                if snowflake not in self._roles:
                    self.add_role(snowflake)
                resolved.setdefault("roles", {})[value] = dict(self._roles[snowflake])
            else:
                if snowflake not in self._members:
                    self._register_member(snowflake, name=None, roles=None)
                member = self._members[snowflake]
                resolved.setdefault("users", {})[value] = dict(self._users[snowflake])
                if not self.is_member(guild_id, snowflake):
                    continue  # a user who left the guild is resolved as a user only
                payload = self._member_payload(member, roles=member.roles)
                payload.pop("user", None)
                payload["permissions"] = str(self._permissions(member.roles))
                resolved.setdefault("members", {})[value] = payload
        return resolved

    async def send_autocomplete(
        self,
        name: str,
        focused_option: str,
        value: str,
        other_options: dict[str, object] | None = None,
        *,
        user_id: int = 600_000_000_000_000_001,
        channel_id: int | None = None,
        locale: str = "en-US",
        attachment_size_limit: int | None = None,
        roles: list[int] | None = None,
    ) -> InteractionRecord:
        """A user types `value` into an autocomplete option of /name."""
        channel_id = self.channel_ids[0] if channel_id is None else channel_id
        guild = self.guild_of_channel(channel_id) or self.guild_id
        command, guild_scoped = self._synced_command(name, guild)
        values: dict[str, object] = {**(other_options or {}), focused_option: value}
        data_options = _commands.build_options(command, values, focused=focused_option)
        return await self._send_interaction(
            INTERACTION_AUTOCOMPLETE,
            self._command_data(command, guild_scoped, data_options, guild),
            user_id=user_id,
            channel_id=channel_id,
            locale=locale,
            attachment_size_limit=attachment_size_limit,
            roles=roles,
        )

    async def send_component(
        self,
        message: dict[str, Any],
        custom_id: str,
        *,
        user_id: int = 600_000_000_000_000_001,
        locale: str = "en-US",
        roles: list[int] | None = None,
    ) -> InteractionRecord:
        """A user clicks the button `custom_id` of a stored message (a channel message or an interaction's).

        As in Discord's client, only a button the message shows can be clicked, on a message that still exists;
        an ephemeral message only by the member it was shown to.
        """
        buttons = [c for row in message.get("components") or [] for c in row.get("components") or []]
        button = next((c for c in buttons if c.get("custom_id") == custom_id), None)
        if button is None or message.get("deleted"):
            raise LookupError(f"message {message['id']} shows no button {custom_id!r}")
        if button.get("disabled"):
            raise LookupError(f"the button {custom_id!r} is disabled")
        owner = message.get("interaction_user_id")
        if message["flags"] & FLAG_EPHEMERAL and owner is not None and owner != user_id:
            raise LookupError(f"message {message['id']} is ephemeral: only user {owner} sees it")
        data = {"custom_id": custom_id, "component_type": int(button.get("type", COMPONENT_BUTTON))}
        return await self._send_interaction(
            INTERACTION_COMPONENT,
            data,
            name=custom_id,
            message=message,
            user_id=user_id,
            channel_id=int(message["channel_id"]),
            locale=locale,
            attachment_size_limit=None,
            roles=roles,
        )

    async def wait_for_callback(self, interaction_id: str, timeout: float = 10) -> dict[str, Any]:  # noqa: ASYNC109
        """The first callback the bot posted for that interaction (accepted or not)."""

        def first() -> dict[str, Any] | None:
            callbacks = self.interaction_responses.get(interaction_id)
            return callbacks[0] if callbacks else None

        return await self._wait_until(first, timeout, f"a callback for interaction {interaction_id}")

    async def wait_for_message(
        self,
        channel_id: int,
        *,
        timeout: float = 30,  # noqa: ASYNC109
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """The earliest message stored in that channel (already present ones count) matching predicate."""

        def find() -> dict[str, Any] | None:
            for message in self.messages.get(channel_id, []):
                if predicate is None or predicate(message):
                    return message
            return None

        return await self._wait_until(find, timeout, f"a matching message in channel {channel_id}")

    async def wait_for_dm(
        self,
        user_id: int,
        *,
        timeout: float = 30,  # noqa: ASYNC109
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Like wait_for_message, for the DM channel with that user (which may not exist yet)."""

        def find() -> dict[str, Any] | None:
            channel_id = self._dm_by_user.get(user_id)
            for message in self.messages.get(channel_id, []) if channel_id is not None else []:
                if predicate is None or predicate(message):
                    return message
            return None

        return await self._wait_until(find, timeout, f"a matching DM to user {user_id}")

    async def _wait_until(
        self, probe: Callable[[], dict[str, Any] | None], seconds: float, what: str
    ) -> dict[str, Any]:
        async def waiter() -> dict[str, Any]:
            async with self._changed:
                while (found := probe()) is None:
                    await self._changed.wait()
                return found

        try:
            return await asyncio.wait_for(waiter(), seconds)
        except TimeoutError:
            raise TimeoutError(f"timed out after {seconds}s waiting for {what}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _synced_command(self, name: str, guild_id: int) -> tuple[dict[str, Any], bool]:
        for scope in (guild_id, None):
            for command in self.synced_commands.get(scope, []):
                if command["name"] == name and command.get("type", 1) == _commands.COMMAND_CHAT_INPUT:
                    return command, scope is not None
        synced = {str(k): [c["name"] for c in v] for k, v in self.synced_commands.items()}
        raise LookupError(f"/{name} has not been synced to the double (synced: {synced or 'nothing'})")

    def _command_data(
        self, command: dict[str, Any], guild_scoped: bool, data_options: list[dict[str, Any]], guild_id: int
    ) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": command["id"],
            "name": command["name"],
            "type": _commands.COMMAND_CHAT_INPUT,
            "options": data_options,
        }
        if guild_scoped:
            data["guild_id"] = str(guild_id)
        return data

    async def _send_interaction(
        self,
        kind: int,
        data: dict[str, Any],
        *,
        name: str | None = None,
        message: dict[str, Any] | None = None,
        user_id: int,
        channel_id: int | None,
        locale: str,
        attachment_size_limit: int | None,
        roles: list[int] | None,
    ) -> InteractionRecord:
        channel_id = self.channel_ids[0] if channel_id is None else channel_id
        guild_id = self.guild_of_channel(channel_id)
        if guild_id is None:
            raise ValueError(f"channel {channel_id} is not a text channel of a guild")
        if not self._live_sessions():
            raise RuntimeError("no gateway session is connected; start the bot and await wait_ready()")
        shard = self.shard_of(guild_id)
        if shard not in self.connected_shards():
            raise RuntimeError(f"guild {guild_id} is on shard {shard}, which no gateway session has identified as")
        if user_id in self._members and not self.is_member(guild_id, user_id):
            raise LookupError(f"user {user_id} is no longer a member of guild {guild_id}: they can use nothing there")
        if user_id not in self._members:
            # Whoever runs a guild command is a member; announce them before the interaction.
            joined = self._register_member(user_id, name=None, roles=roles, guild_id=guild_id)
            await self._broadcast("GUILD_MEMBER_ADD", joined, intent=_payloads.INTENT_GUILD_MEMBERS)
        member = self._members[user_id]
        member_roles = member.roles if roles is None else list(roles)
        for role_id in member_roles:
            if role_id not in self._roles:
                self.add_role(role_id)
        size_limit = self.default_upload_limit if attachment_size_limit is None else attachment_size_limit

        interaction_id = str(self._ids.next())
        token = "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(96)
        member_payload = self._member_payload(member, roles=member_roles)
        member_payload["permissions"] = str(self._permissions(member_roles))
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": str(self.application_id),
            "type": kind,
            "token": token,
            "version": 1,
            "data": data,
            "guild_id": str(guild_id),
            "guild": {"id": str(guild_id), "locale": "en-US", "features": []},
            "channel_id": str(channel_id),
            "channel": dict(self._channels[channel_id]),
            "member": member_payload,
            "app_permissions": str(self._permissions(self._members[self.bot_user_id].roles)),
            "locale": locale,
            "guild_locale": "en-US",
            "attachment_size_limit": size_limit,
            "entitlements": [],
            "entitlement_sku_ids": [],
            "authorizing_integration_owners": {"0": str(guild_id)},
            "context": 0,
        }
        if message is not None:
            # A component interaction carries the message its component is on.
            payload["message"] = self._wire(message)
        record = InteractionRecord(
            id=interaction_id,
            token=token,
            type=kind,
            name=name if name is not None else data["name"],
            channel_id=channel_id,
            user_id=user_id,
            attachment_size_limit=size_limit,
            payload=payload,
            created_at=time.monotonic(),
            message=message,
        )
        self._interactions[interaction_id] = record
        self._interactions_by_token[token] = record
        await self._broadcast("INTERACTION_CREATE", payload)
        return record

    # ------------------------------------------------------------------ guild model

    def _permissions(self, role_ids: Iterable[int]) -> int:
        value = int(self._roles[self.guild_id]["permissions"])
        for role_id in role_ids:
            role = self._roles.get(role_id)
            if role is not None:
                value |= int(role["permissions"])
        if value & _payloads.ADMINISTRATOR:
            return _payloads.ALL_PERMISSIONS
        return value

    def _member_payload(self, member: _Member, *, roles: list[int] | None = None) -> dict[str, Any]:
        return _payloads.member_object(
            self._users[member.user_id], member.roles if roles is None else roles, member.joined_at
        )

    def _user(self, user_id: int) -> dict[str, Any]:
        return self._users.get(user_id) or _payloads.user_object(user_id, f"user{user_id}")

    def _guild_payload(self, intents: int, guild_id: int | None = None) -> dict[str, Any]:
        guild = self._guilds[self.guild_id if guild_id is None else guild_id]
        present = self._guild_members(guild.guild_id)
        # Without the privileged members intent Discord sends only the bot's own member.
        members = present if intents & _payloads.INTENT_GUILD_MEMBERS else [self._members[self.bot_user_id]]
        roles = list(self._roles.values())
        if guild.guild_id != self.guild_id:  # every guild's @everyone role has the guild's id
            roles = [{**role, "id": str(guild.guild_id)} if int(role["id"]) == self.guild_id else role
                     for role in roles]
        return {
            "id": str(guild.guild_id),
            "name": guild.name,
            "icon": None,
            "splash": None,
            "discovery_splash": None,
            "banner": None,
            "description": None,
            "owner_id": str(self.guild_id + 1),
            "afk_channel_id": None,
            "afk_timeout": 300,
            "verification_level": 0,
            "default_message_notifications": 1,
            "explicit_content_filter": 0,
            "roles": roles,
            "emojis": [],
            "stickers": [],
            "features": [],
            "mfa_level": 0,
            "application_id": None,
            "system_channel_id": str(guild.channel_ids[0]),
            "system_channel_flags": 0,
            "rules_channel_id": None,
            "public_updates_channel_id": None,
            "safety_alerts_channel_id": None,
            "vanity_url_code": None,
            "premium_tier": 0,
            "premium_subscription_count": 0,
            "premium_progress_bar_enabled": False,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "max_members": 500_000,
            "max_video_channel_users": 25,
            "joined_at": self._members[self.bot_user_id].joined_at,
            "large": False,
            "unavailable": False,
            "lazy": True,
            "member_count": len(present),
            "members": [self._member_payload(m) for m in members],
            "channels": [self._channels[cid] for cid in guild.channel_ids],
            "threads": [],
            "presences": [],
            "voice_states": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "incidents_data": None,
        }

    # ------------------------------------------------------------------ HTTP plumbing

    def _add_routes(self, app: web.Application) -> None:
        api: list[tuple[str, str, Handler]] = [
            ("GET", "/users/@me", self._get_me),
            ("POST", "/users/@me/channels", self._create_dm),
            ("GET", r"/users/{user_id:\d+}", self._get_user),
            ("GET", "/gateway", self._get_gateway),
            ("GET", "/gateway/bot", self._get_gateway_bot),
            ("GET", "/oauth2/applications/@me", self._get_application),
            ("GET", "/applications/@me", self._get_application),
            ("GET", r"/applications/{app_id:\d+}/commands", self._get_commands),
            ("PUT", r"/applications/{app_id:\d+}/commands", self._put_commands),
            ("GET", r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands", self._get_commands),
            ("PUT", r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands", self._put_commands),
            (
                "GET",
                r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands/permissions",
                self._get_guild_command_permissions,
            ),
            (
                "GET",
                r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands/{command_id:\d+}/permissions",
                self._get_command_permissions,
            ),
            ("POST", r"/interactions/{interaction_id:\d+}/{token}/callback", self._interaction_callback),
            ("POST", r"/webhooks/{app_id:\d+}/{token}", self._execute_webhook),
            ("GET", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._get_webhook_message),
            ("PATCH", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._edit_webhook_message),
            ("DELETE", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._delete_webhook_message),
            ("GET", r"/guilds/{guild_id:\d+}", self._get_guild),
            ("GET", r"/guilds/{guild_id:\d+}/channels", self._get_guild_channels),
            ("GET", r"/guilds/{guild_id:\d+}/members/{user_id:\d+}", self._get_guild_member),
            ("GET", r"/channels/{channel_id:\d+}", self._get_channel),
            ("POST", r"/channels/{channel_id:\d+}/typing", self._typing),
            ("GET", r"/channels/{channel_id:\d+}/messages", self._list_channel_messages),
            ("POST", r"/channels/{channel_id:\d+}/messages", self._create_channel_message),
            ("GET", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._get_channel_message),
            ("PATCH", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._edit_channel_message),
            ("DELETE", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._delete_channel_message),
        ]
        for method, path, handler in api:
            app.router.add_route(method, API_PREFIX + path, handler)
        app.router.add_get(GATEWAY_PATH, self._gateway)
        app.router.add_get(r"/attachments/{channel_id:\d+}/{attachment_id:\d+}/{filename}", self._get_attachment)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX + "/"):
            try:
                return await handler(request)
            except (web.HTTPNotFound, web.HTTPMethodNotAllowed):
                return self._unknown_route(request)

        record = RecordedRequest(
            method=request.method,
            path=request.path_qs[len(API_PREFIX) :],
            headers=dict(request.headers),
            json=None,
            files=[],
            time=time.monotonic(),
        )
        self.requests.append(record)
        if request.match_info.http_exception is not None:
            unknown = self._unknown_route(request)
            record.status = unknown.status
            return unknown
        response: web.StreamResponse
        try:
            body, uploads = await self._read_body(request)
            record.json = body
            record.files = [(u.filename, u.data) for u in uploads]
            request[_BODY] = body
            request[_UPLOADS] = uploads
            self._check_auth(request)
            response = await handler(request)
        except DiscordError as error:
            response = error.response()
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed):
            response = self._unknown_route(request)
        record.status = response.status
        if response.status >= 400:
            _log.info("%s %s -> %s", request.method, record.path, response.status)
        await self._notify()
        return response

    def _unknown_route(self, request: web.Request) -> web.Response:
        route = f"{request.method} {request.path_qs}"
        self.unknown_routes.append(route)
        _log.warning("Discord double has no route for %s", route)
        return _json_response({"code": 0, "message": f"404: Not Found (double has no route {route})"}, status=404)

    @staticmethod
    def _check_auth(request: web.Request) -> None:
        # Token-authenticated routes (interaction callbacks, webhooks) need no bot token.
        path = request.path[len(API_PREFIX) :]
        if path.startswith(("/interactions/", "/webhooks/")) or path == "/gateway":
            return
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bot ") or len(auth) <= len("Bot "):
            raise DiscordError(401, 0, "401: Unauthorized")

    @staticmethod
    async def _read_body(request: web.Request) -> tuple[Any, list[_Upload]]:
        if not request.body_exists:
            return None, []
        if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
            raise DiscordError(413, 40005, "Request entity too large")
        if request.content_type.startswith("multipart/"):
            payload: Any = None
            uploads: list[_Upload] = []
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if not isinstance(part, BodyPartReader):
                    raise DiscordError(400, 50035, "Invalid Form Body: nested multipart")
                name = part.name or ""
                if name == "payload_json":
                    try:
                        payload = json.loads(await part.text())
                    except ValueError:
                        raise DiscordError(400, 50109, "The request body contains invalid JSON.") from None
                elif part.filename is not None:
                    uploads.append(_Upload(name, part.filename, bytes(await part.read(decode=False))))
                else:
                    _log.warning("ignoring multipart form field %r", name)
            if sum(len(u.data) for u in uploads) > MAX_REQUEST_BYTES:
                raise DiscordError(413, 40005, "Request entity too large")
            return payload, uploads
        raw = await request.read()
        if not raw:
            return None, []
        try:
            return json.loads(raw), []
        except ValueError:
            raise DiscordError(400, 50109, "The request body contains invalid JSON.") from None

    @staticmethod
    def _body(request: web.Request) -> dict[str, Any]:
        body = request.get(_BODY)
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise _invalid_form("_root", "expected an object")
        return body

    # ------------------------------------------------------------------ users, app, gateway info

    async def _get_me(self, request: web.Request) -> web.Response:
        return _json_response({**self._bot_user, "verified": True, "mfa_enabled": False, "locale": "en-US"})

    async def _get_user(self, request: web.Request) -> web.Response:
        user = self._users.get(int(request.match_info["user_id"]))
        if user is None:
            raise DiscordError(404, 10013, "Unknown User")
        return _json_response(user)

    async def _get_gateway(self, request: web.Request) -> web.Response:
        return _json_response({"url": self.gateway_url})

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return _json_response({"url": self.gateway_url, "shards": self.shard_count, "session_start_limit": limit})

    async def _get_application(self, request: web.Request) -> web.Response:
        return _json_response(
            {
                "id": str(self.application_id),
                "name": "double-bot",
                "icon": None,
                "description": "",
                "bot_public": self.bot_public,
                "bot_require_code_grant": False,
                "owner": _payloads.user_object(self.guild_id + 1, "owner"),
                "team": None,
                "verify_key": "0" * 64,
                "flags": 1 << 23,
                "bot": self._bot_user,
                "interactions_endpoint_url": None,
                "redirect_uris": [],
                "tags": [],
            }
        )

    # ------------------------------------------------------------------ application commands

    def _command_scope(self, request: web.Request) -> int | None:
        if int(request.match_info["app_id"]) != self.application_id:
            raise DiscordError(403, 50001, "Missing Access")
        guild = request.match_info.get("guild_id")
        if guild is None:
            return None
        if int(guild) not in self._guilds:
            raise DiscordError(403, 50001, "Missing Access")
        return int(guild)

    async def _get_commands(self, request: web.Request) -> web.Response:
        return _json_response(self.synced_commands.get(self._command_scope(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        scope = self._command_scope(request)
        try:
            commands = _commands.validate_commands(request.get(_BODY))
        except _commands.CommandSchemaError as error:
            raise _invalid_form("commands", str(error)) from None
        stored: list[dict[str, Any]] = []
        for command in commands:
            kind = command.get("type", _commands.COMMAND_CHAT_INPUT)
            # Discord keeps a command's id across overwrites as long as name and type match.
            key = (scope, kind, command["name"])
            command_id = self._command_ids.setdefault(key, str(self._ids.next()))
            echoed: dict[str, Any] = {
                "nsfw": False,
                "options": [],
                **command,
                "id": command_id,
                "type": kind,
                "application_id": str(self.application_id),
                "version": str(self._ids.next()),
                "default_member_permissions": _commands.default_member_permissions(
                    command.get("default_member_permissions")
                ),
            }
            if scope is not None:
                echoed["guild_id"] = str(scope)
            stored.append(echoed)
        self.synced_commands[scope] = stored
        # "Deleting or renaming a command will permanently delete all permissions for the command."
        live = {int(c["id"]) for synced in self.synced_commands.values() for c in synced}
        for targets in self._command_permissions.values():
            for target_id in [t for t in targets if t != self.application_id and t not in live]:
                del targets[target_id]
        return _json_response(stored)

    def _command_guild(self, request: web.Request) -> int:
        guild_id = self._command_scope(request)
        assert guild_id is not None, "the route names a guild"
        return guild_id

    async def _get_guild_command_permissions(self, request: web.Request) -> web.Response:
        """Only the targets that have entries: a command nobody configured is not listed."""
        guild_id = self._command_guild(request)
        targets = self._command_permissions.get(guild_id, {})
        return _json_response([self._command_permissions_object(guild_id, t, e) for t, e in targets.items()])

    async def _get_command_permissions(self, request: web.Request) -> web.Response:
        guild_id = self._command_guild(request)
        target_id = int(request.match_info["command_id"])
        entries = self._command_permissions.get(guild_id, {}).get(target_id)
        if entries is None:
            raise DiscordError(404, 10066, "Unknown application command permissions")
        return _json_response(self._command_permissions_object(guild_id, target_id, entries))

    # ------------------------------------------------------------------ messages (shared)

    def _message_record(
        self,
        *,
        channel_id: int,
        body: dict[str, Any],
        uploads: list[_Upload],
        size_limit: int,
        default_parse: tuple[str, ...],
        message_type: int,
        webhook: bool = False,
        placeholder: bool = False,
    ) -> dict[str, Any]:
        self._check_upload_sizes(uploads, size_limit)
        message_id = str(self._ids.next())
        record: dict[str, Any] = {
            "id": message_id,
            "type": message_type,
            "channel_id": str(channel_id),
            "author": self._bot_user,
            "content": "",
            "timestamp": _payloads.iso_now(),
            "edited_timestamp": None,
            "tts": bool(body.get("tts", False)),
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "flags": 0,
            "nonce": body.get("nonce"),
            "attachments_data": [],
            "allowed_mentions": None,
            "deleted": False,
        }
        if channel_id in self._channels:
            record["guild_id"] = self._channels[channel_id]["guild_id"]
        if body.get("message_reference"):
            record["type"] = MESSAGE_REPLY
            record["message_reference"] = body["message_reference"]
        if webhook:
            record["webhook_id"] = str(self.application_id)
            record["application_id"] = str(self.application_id)
        self._apply_message_fields(
            record, body, uploads, default_parse=default_parse, allow_ephemeral=webhook, allow_empty=placeholder
        )
        return record

    def _apply_message_fields(
        self,
        record: dict[str, Any],
        body: dict[str, Any],
        uploads: list[_Upload],
        *,
        default_parse: tuple[str, ...],
        allow_ephemeral: bool = False,
        allow_empty: bool = False,
    ) -> None:
        """Validate and merge a create/edit body into `record` (in place, only if valid)."""
        updated = dict(record)
        if "content" in body:
            content = body["content"] or ""
            if not isinstance(content, str) or len(content) > MAX_CONTENT_LENGTH:
                raise _invalid_form("content", f"Must be {MAX_CONTENT_LENGTH} or fewer in length.")
            updated["content"] = content
        if "embeds" in body:
            embeds = body["embeds"] or []
            _validate_embeds(embeds)
            updated["embeds"] = embeds
        if "components" in body:
            updated["components"] = body["components"] or []
        if body.get("flags") is not None:
            # Ephemerality is fixed at creation; only the sendable flags change on edit.
            sticky = updated["flags"] & (FLAG_EPHEMERAL | FLAG_LOADING)
            settable = _SENDABLE_FLAGS | (FLAG_EPHEMERAL if allow_ephemeral else 0)
            updated["flags"] = sticky | (int(body["flags"]) & settable)
        if "allowed_mentions" in body:
            updated["allowed_mentions"] = body["allowed_mentions"]
        if uploads or "attachments" in body:
            attachments, data = self._attachments(record, body, uploads)
            updated["attachments"] = attachments
            updated["attachments_data"] = data
        if not allow_empty and not (
            updated["content"]
            or updated["embeds"]
            or updated["attachments"]
            or updated["components"]
            or body.get("sticker_ids")
            or body.get("poll")
        ):
            raise DiscordError(400, 50006, "Cannot send an empty message")

        replied_user_id: int | None = None
        reference = updated.get("message_reference")
        if reference:
            referenced = self._find_message(int(reference.get("channel_id") or updated["channel_id"]), reference)
            if referenced is not None:
                replied_user_id = int(referenced["author"]["id"])
        try:
            mentions = resolve_mentions(
                updated["content"],
                updated["allowed_mentions"],
                default_parse=default_parse,
                replied_user_id=replied_user_id,
            )
        except AllowedMentionsError as error:
            raise _invalid_form("allowed_mentions", str(error)) from None
        updated["mentions"] = mentions.users
        updated["mention_roles"] = mentions.roles
        updated["mention_everyone"] = mentions.everyone
        record.update(updated)

    def _find_message(self, channel_id: int, reference: dict[str, Any]) -> dict[str, Any] | None:
        wanted = str(reference.get("message_id"))
        for message in self.messages.get(channel_id, []):
            if message["id"] == wanted:
                return message
        return None

    def _check_upload_sizes(self, uploads: list[_Upload], size_limit: int) -> None:
        for upload in uploads:
            if len(upload.data) > size_limit:
                _log.info("upload %s is %d bytes, limit %d", upload.filename, len(upload.data), size_limit)
                raise DiscordError(413, 40005, "Request entity too large")

    def _attachments(
        self, record: dict[str, Any], body: dict[str, Any], uploads: list[_Upload]
    ) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
        by_index = {_file_index(u.field): u for u in uploads}
        existing = {
            a["id"]: (a, data) for a, data in zip(record["attachments"], record["attachments_data"], strict=False)
        }
        attachments: list[dict[str, Any]] = []
        data: list[tuple[str, bytes]] = []
        used: set[str | None] = set()
        wanted = body.get("attachments")
        if wanted is None:
            # No attachments array: keep what is there and add every uploaded file.
            wanted = [{"id": a["id"]} for a in record["attachments"]]
            wanted += [{"id": index} for index in by_index]
        for entry in wanted:
            key = str(entry.get("id"))
            if key in by_index and key not in used:
                upload = by_index[key]
                used.add(key)
                attachment = self._store_attachment(record, entry.get("filename") or upload.filename, upload.data)
                if entry.get("description"):
                    attachment["description"] = entry["description"]
                attachments.append(attachment)
                data.append((attachment["filename"], upload.data))
            elif key in existing:
                attachments.append(existing[key][0])
                data.append(existing[key][1])
            else:
                raise _invalid_form("attachments", f"unknown attachment id {entry.get('id')!r}")
        for key, upload in by_index.items():
            if key not in used and body.get("attachments") is not None:
                attachment = self._store_attachment(record, upload.filename, upload.data)
                attachments.append(attachment)
                data.append((upload.filename, upload.data))
        return attachments, data

    def _store_attachment(self, record: dict[str, Any], filename: str, data: bytes) -> dict[str, Any]:
        attachment_id = self._ids.next()
        self._blobs[attachment_id] = data
        url = f"{self._http_base}/attachments/{record['channel_id']}/{attachment_id}/{filename}"
        return {
            "id": str(attachment_id),
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": mimetypes.guess_type(filename)[0] or "application/octet-stream",
            "ephemeral": bool(record["flags"] & FLAG_EPHEMERAL),
        }

    def _wire(self, record: dict[str, Any]) -> dict[str, Any]:
        """The message as Discord returns it: mention ids become user objects."""
        wire = {k: v for k, v in record.items() if k not in _PRIVATE_MESSAGE_KEYS}
        wire["mentions"] = [self._user(uid) for uid in record["mentions"]]
        wire["mention_roles"] = [str(r) for r in record["mention_roles"]]
        return wire

    async def _announce(self, event: str, record: dict[str, Any]) -> None:
        """MESSAGE_CREATE/UPDATE for the bot's own non-ephemeral messages, as Discord sends them."""
        if record["flags"] & FLAG_EPHEMERAL:
            return
        payload = self._wire(record)
        if "guild_id" in record:
            payload["member"] = {
                k: v for k, v in self._member_payload(self._members[self.bot_user_id]).items() if k != "user"
            }
            intent = _payloads.INTENT_GUILD_MESSAGES
        else:
            intent = _payloads.INTENT_DIRECT_MESSAGES
        await self._broadcast(event, payload, intent=intent)

    # ------------------------------------------------------------------ channels and DMs

    def _messageable_channel(self, channel_id: int) -> dict[str, Any]:
        channel = self._channels.get(channel_id) or self._dm_channels.get(channel_id)
        if channel is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return channel

    async def _create_dm(self, request: web.Request) -> web.Response:
        body = self._body(request)
        try:
            user_id = int(body["recipient_id"])
        except (KeyError, TypeError, ValueError):
            raise _invalid_form("recipient_id", "This field is required") from None
        if user_id not in self._users or user_id == self.bot_user_id:
            raise DiscordError(400, 50033, "Invalid Recipient(s)")
        channel_id = self._dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self._ids.next()
            self._dm_by_user[user_id] = channel_id
            self._dm_channels[channel_id] = _payloads.dm_channel_object(channel_id, self._users[user_id])
        return _json_response(self._dm_channels[channel_id])

    async def _get_channel(self, request: web.Request) -> web.Response:
        return _json_response(self._messageable_channel(int(request.match_info["channel_id"])))

    async def _typing(self, request: web.Request) -> web.Response:
        self._check_can_post(int(request.match_info["channel_id"]))
        return web.Response(status=204)

    def _check_can_post(self, channel_id: int) -> dict[str, Any]:
        channel = self._messageable_channel(channel_id)
        if channel_id in self._forbidden_channels:
            raise DiscordError(403, 50001, "Missing Access")
        if channel_id in self._automod_channels:
            raise DiscordError(400, 200000, "Message was blocked by automatic moderation")
        if channel["type"] == _payloads.CHANNEL_TYPE_DM:
            recipient = int(channel["recipients"][0]["id"])
            if recipient in self._forbidden_dms:
                raise DiscordError(403, 50007, "Cannot send messages to this user")
        return channel

    async def _create_channel_message(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._check_can_post(channel_id)
        body = self._body(request)
        nonce = body.get("nonce")
        nonce_key: tuple[int, str] | None = None
        if nonce is not None:
            if isinstance(nonce, str) and len(nonce) > MAX_NONCE_LENGTH:
                raise _invalid_form("nonce", f"Must be {MAX_NONCE_LENGTH} or fewer in length.")
            if body.get("enforce_nonce"):
                nonce_key = (channel_id, str(nonce))
                seen = self._nonces.get(nonce_key)
                if seen is not None and time.monotonic() - seen[0] < self.nonce_window:
                    return _json_response(self._wire(seen[1]))
        record = self._message_record(
            channel_id=channel_id,
            body=body,
            uploads=request[_UPLOADS],
            size_limit=self.default_upload_limit,
            default_parse=PARSE_ALL,
            message_type=MESSAGE_DEFAULT,
        )
        self.messages.setdefault(channel_id, []).append(record)
        if nonce_key is not None:
            self._nonces[nonce_key] = (time.monotonic(), record)
        await self._announce("MESSAGE_CREATE", record)
        return _json_response(self._wire(record))

    def _channel_message(self, request: web.Request) -> dict[str, Any]:
        channel_id = int(request.match_info["channel_id"])
        self._messageable_channel(channel_id)
        message_id = request.match_info["message_id"]
        for message in self.messages.get(channel_id, []):
            if message["id"] == message_id and not message["deleted"]:
                return message
        raise DiscordError(404, 10008, "Unknown Message")

    async def _get_channel_message(self, request: web.Request) -> web.Response:
        return _json_response(self._wire(self._channel_message(request)))

    async def _list_channel_messages(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._messageable_channel(channel_id)
        limit = max(1, min(100, int(request.query.get("limit", "50"))))
        live = [m for m in self.messages.get(channel_id, []) if not m["deleted"]]
        return _json_response([self._wire(m) for m in reversed(live)][:limit])

    async def _edit_channel_message(self, request: web.Request) -> web.Response:
        record = self._channel_message(request)
        self._check_upload_sizes(request[_UPLOADS], self.default_upload_limit)
        self._apply_message_fields(record, self._body(request), request[_UPLOADS], default_parse=PARSE_ALL)
        record["edited_timestamp"] = _payloads.iso_now()
        await self._announce("MESSAGE_UPDATE", record)
        return _json_response(self._wire(record))

    async def _delete_channel_message(self, request: web.Request) -> web.Response:
        record = self._channel_message(request)
        record["deleted"] = True
        return web.Response(status=204)

    async def _get_attachment(self, request: web.Request) -> web.Response:
        data = self._blobs.get(int(request.match_info["attachment_id"]))
        if data is None:
            return web.Response(status=404)
        content_type = mimetypes.guess_type(request.match_info["filename"])[0] or "application/octet-stream"
        return web.Response(body=data, headers={"Content-Type": content_type})

    # ------------------------------------------------------------------ guild REST

    def _check_guild(self, request: web.Request) -> int:
        guild_id = int(request.match_info["guild_id"])
        if guild_id not in self._guilds:
            raise DiscordError(404, 10004, "Unknown Guild")
        return guild_id

    async def _get_guild(self, request: web.Request) -> web.Response:
        guild = self._guild_payload(0, self._check_guild(request))
        for key in ("members", "channels", "threads", "presences", "voice_states", "joined_at", "large"):
            guild.pop(key)
        return _json_response(guild)

    async def _get_guild_channels(self, request: web.Request) -> web.Response:
        guild_id = self._check_guild(request)
        return _json_response([self._channels[cid] for cid in self._guilds[guild_id].channel_ids])

    async def _get_guild_member(self, request: web.Request) -> web.Response:
        guild_id = self._check_guild(request)
        user_id = int(request.match_info["user_id"])
        if not self.is_member(guild_id, user_id):
            raise DiscordError(404, 10007, "Unknown Member")
        return _json_response(self._member_payload(self._members[user_id]))

    # ------------------------------------------------------------------ interactions and webhooks

    async def _interaction_callback(self, request: web.Request) -> web.Response:
        interaction_id = request.match_info["interaction_id"]
        body = self._body(request)
        entry: dict[str, Any] = {
            "type": body.get("type"),
            "data": body.get("data"),
            "time": time.monotonic(),
            "files": [(u.filename, u.data) for u in request[_UPLOADS]],
            "accepted": False,
        }
        self.interaction_responses.setdefault(interaction_id, []).append(entry)
        record = self._interactions.get(interaction_id)
        if record is None or record.token != request.match_info["token"]:
            raise DiscordError(404, 10062, "Unknown interaction")
        if record.acknowledged:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        if entry["time"] - record.created_at > self.callback_deadline:
            raise DiscordError(404, 10062, "Unknown interaction")
        response = await self._accept_callback(record, body, request[_UPLOADS])
        entry["accepted"] = True
        return _json_response(response)

    async def _accept_callback(
        self, record: InteractionRecord, body: dict[str, Any], uploads: list[_Upload]
    ) -> dict[str, Any]:
        kind = body.get("type")
        data = body.get("data") or {}
        if kind not in _CALLBACK_TYPES_BY_INTERACTION.get(record.type, set()):
            raise _invalid_form("type", f"callback type {kind} is not valid for interaction type {record.type}")
        interaction: dict[str, Any] = {"id": record.id, "type": record.type}
        resource: dict[str, Any] = {"type": kind}
        if kind == CALLBACK_AUTOCOMPLETE_RESULT:
            _validate_choices(data.get("choices"))
        elif kind in (CALLBACK_MESSAGE, CALLBACK_DEFERRED_MESSAGE):
            if kind == CALLBACK_MESSAGE:
                message = self._message_record(
                    channel_id=record.channel_id,
                    body=data,
                    uploads=uploads,
                    size_limit=record.attachment_size_limit,
                    default_parse=PARSE_USERS,
                    message_type=MESSAGE_CHAT_INPUT_COMMAND,
                    webhook=True,
                )
            else:
                # A deferred response is a placeholder message in the "thinking" state.
                message = self._message_record(
                    channel_id=record.channel_id,
                    body={"flags": int(data.get("flags") or 0) & FLAG_EPHEMERAL},
                    uploads=[],
                    size_limit=record.attachment_size_limit,
                    default_parse=PARSE_USERS,
                    message_type=MESSAGE_CHAT_INPUT_COMMAND,
                    webhook=True,
                    placeholder=True,
                )
                message["flags"] |= FLAG_LOADING
            message["interaction_user_id"] = record.user_id
            record.original_message_id = message["id"]
            messages = self.webhook_messages.setdefault(record.token, {})
            messages[message["id"]] = message
            messages["@original"] = message
            interaction["response_message_id"] = message["id"]
            interaction["response_message_loading"] = kind == CALLBACK_DEFERRED_MESSAGE
            interaction["response_message_ephemeral"] = bool(message["flags"] & FLAG_EPHEMERAL)
            resource["message"] = self._wire(message)
            await self._announce("MESSAGE_CREATE", message)
        elif kind in (CALLBACK_DEFERRED_UPDATE, CALLBACK_UPDATE_MESSAGE):
            # The response is the message the component is on: updated now (7) or by a later edit (6).
            target = record.message
            if target is None or target["deleted"]:
                raise DiscordError(404, 10008, "Unknown Message")
            if kind == CALLBACK_UPDATE_MESSAGE:
                self._apply_message_fields(target, data, uploads, default_parse=PARSE_USERS)
                target["edited_timestamp"] = _payloads.iso_now()
                await self._announce("MESSAGE_UPDATE", target)
            record.original_message_id = target["id"]
            messages = self.webhook_messages.setdefault(record.token, {})
            messages[target["id"]] = target
            messages["@original"] = target
            resource["message"] = self._wire(target)
        record.acknowledged = True
        return {"interaction": interaction, "resource": resource}

    def _webhook_interaction(self, request: web.Request) -> InteractionRecord:
        if int(request.match_info["app_id"]) != self.application_id:
            raise DiscordError(404, 10015, "Unknown Webhook")
        record = self._interactions_by_token.get(request.match_info["token"])
        if record is None:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        if time.monotonic() - record.created_at > self.token_lifetime:
            raise DiscordError(401, 50027, "Invalid Webhook Token")
        if not record.acknowledged:
            raise DiscordError(404, 10015, "Unknown Webhook")
        return record

    def _webhook_message(self, request: web.Request, record: InteractionRecord) -> dict[str, Any]:
        message = self.webhook_messages.get(record.token, {}).get(request.match_info["message_id"])
        if message is None or message["deleted"]:
            raise DiscordError(404, 10008, "Unknown Message")
        return message

    async def _execute_webhook(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        body = self._body(request)
        message = self._message_record(
            channel_id=record.channel_id,
            body=body,
            uploads=request[_UPLOADS],
            size_limit=record.attachment_size_limit,
            default_parse=PARSE_USERS,
            message_type=MESSAGE_DEFAULT,
            webhook=True,
        )
        message["interaction_user_id"] = record.user_id
        self.webhook_messages.setdefault(record.token, {})[message["id"]] = message
        await self._announce("MESSAGE_CREATE", message)
        if request.query.get("wait", "").lower() in ("1", "true"):
            return _json_response(self._wire(message))
        return web.Response(status=204)

    async def _get_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        return _json_response(self._wire(self._webhook_message(request, record)))

    async def _edit_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        message = self._webhook_message(request, record)
        uploads: list[_Upload] = request[_UPLOADS]
        self._check_upload_sizes(uploads, record.attachment_size_limit)
        was_loading = bool(message["flags"] & FLAG_LOADING)
        self._apply_message_fields(message, self._body(request), uploads, default_parse=PARSE_USERS)
        if was_loading:
            # The first edit of a deferred response replaces the "thinking" placeholder.
            message["flags"] &= ~FLAG_LOADING
        else:
            message["edited_timestamp"] = _payloads.iso_now()
        await self._announce("MESSAGE_UPDATE", message)
        return _json_response(self._wire(message))

    async def _delete_webhook_message(self, request: web.Request) -> web.Response:
        record = self._webhook_interaction(request)
        self._webhook_message(request, record)["deleted"] = True
        return web.Response(status=204)

    # ------------------------------------------------------------------ gateway

    def _live_sessions(self) -> list[_GatewaySession]:
        return [s for s in self._sessions.values() if s.connection is not None and not s.connection.ws.closed]

    async def _broadcast(self, event: str, data: dict[str, Any], *, intent: int | None = None) -> None:
        # Discord sends a guild's events to its shard's connection only; the rest (DMs) to shard 0.
        guild_id = data.get("guild_id")
        shard = self.shard_of(int(guild_id)) if guild_id is not None else 0
        for session in self._live_sessions():
            if session.shard_id == shard and (intent is None or session.intents & intent):
                await self._dispatch(session, event, data)

    def _broadcast_soon(self, event: str, data: dict[str, Any], *, intent: int | None = None) -> None:
        # Set-up helpers are synchronous; push the event from the loop if a client is connected.
        if not self._live_sessions():
            return
        task = asyncio.get_running_loop().create_task(self._broadcast(event, data, intent=intent))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _dispatch(self, session: _GatewaySession, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(frame)
        if session.connection is not None:
            await self._send(session.connection, frame)

    @staticmethod
    async def _send(connection: _Connection, frame: dict[str, Any]) -> None:
        if connection.ws.closed:
            return
        async with connection.lock:
            await connection.ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        # Frames go out as plain-text JSON even though discord.py asks for zlib-stream; it
        # accepts both.
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        connection = _Connection(ws)
        self._connections.add(connection)
        try:
            await self._send(
                connection, {"op": 10, "d": {"heartbeat_interval": HEARTBEAT_INTERVAL_MS}, "s": None, "t": None}
            )
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    if msg.type is WSMsgType.BINARY:
                        _log.warning("gateway: ignoring binary frame")
                    continue
                frame = json.loads(msg.data)
                self.gateway_received.append(frame)
                await self._on_gateway_frame(connection, frame)
        finally:
            self._connections.discard(connection)
            if connection.session is not None and connection.session.connection is connection:
                connection.session.connection = None
        return ws

    async def _on_gateway_frame(self, connection: _Connection, frame: dict[str, Any]) -> None:
        op = frame.get("op")
        data = frame.get("d")
        if op == 1:
            await self._send(connection, {"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            await self._identify(connection, data or {})
        elif op == 6:
            await self._resume(connection, data or {})
        elif op == 8:
            await self._request_members(connection, data or {})
        elif op in (3, 4):
            pass  # presence and voice state updates need no answer
        else:
            _log.warning("gateway: unhandled op %s", op)

    async def _identify(self, connection: _Connection, data: dict[str, Any]) -> None:
        if not data.get("token"):
            await connection.ws.close(code=4004, message=b"Authentication failed.")
            return
        self.identify_payloads.append(data)
        shard = data.get("shard", [0, 1])
        if not (isinstance(shard, list) and len(shard) == 2 and all(isinstance(n, int) for n in shard)
                and 0 <= shard[0] < shard[1]):
            await connection.ws.close(code=CLOSE_INVALID_SHARD, message=b"Invalid shard.")
            return
        if shard[1] != self.shard_count:
            # Stricter than Discord (which takes more shards than it asks for): a test's mismatch shows at once.
            await connection.ws.close(code=CLOSE_SHARDING_REQUIRED, message=b"Sharding required.")
            return
        session = _GatewaySession(
            session_id=secrets.token_hex(16), intents=int(data.get("intents", 0)), identify=data, shard_id=shard[0]
        )
        self._sessions[session.session_id] = session
        session.connection = connection
        connection.session = session
        ready: dict[str, Any] = {
            "v": 10,
            "user": {**self._bot_user, "verified": True, "mfa_enabled": False},
            "guilds": [{"id": str(g), "unavailable": True} for g in self._guilds_of_shard(session.shard_id)],
            "session_id": session.session_id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(self.application_id), "flags": 1 << 23},
            "private_channels": [],
            "relationships": [],
            "presences": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": [],
            "user_settings": {},
            "_trace": ["discord-double"],
        }
        if "shard" in data:
            ready["shard"] = data["shard"]
        await self._dispatch(session, "READY", ready)
        for guild_id in self._guilds_of_shard(session.shard_id):
            await self._dispatch(session, "GUILD_CREATE", self._guild_payload(session.intents, guild_id))
        self.identified.set()
        await self._notify()

    def _guilds_of_shard(self, shard: int) -> list[int]:
        return [guild_id for guild_id in self._guilds if self.shard_of(guild_id) == shard]

    async def _resume(self, connection: _Connection, data: dict[str, Any]) -> None:
        session = self._sessions.get(str(data.get("session_id")))
        if session is None or not data.get("token"):
            await self._send(connection, {"op": 9, "d": False, "s": None, "t": None})
            return
        session.connection = connection
        connection.session = session
        last_seen = int(data.get("seq") or 0)
        for frame in session.events:
            if frame["s"] > last_seen:
                await self._send(connection, frame)
        await self._dispatch(session, "RESUMED", {"_trace": ["discord-double"]})

    async def _request_members(self, connection: _Connection, data: dict[str, Any]) -> None:
        session = connection.session
        if session is None:
            return
        query = str(data.get("query") or "").lower()
        user_ids = {int(u) for u in data.get("user_ids") or []}
        guild_id = int(data.get("guild_id") or self.guild_id)
        present = self._guild_members(guild_id)
        limit = int(data.get("limit") or 0) or len(present)
        members = [
            m for m in present if (not user_ids or m.user_id in user_ids) and m.name.lower().startswith(query)
        ][:limit]
        chunk: dict[str, Any] = {
            "guild_id": str(guild_id),
            "members": [self._member_payload(m) for m in members],
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [str(u) for u in user_ids - {m.user_id for m in members}],
        }
        if data.get("nonce") is not None:
            chunk["nonce"] = data["nonce"]
        await self._dispatch(session, "GUILD_MEMBERS_CHUNK", chunk)


def _file_index(field_name: str) -> str:
    # "files[3]" -> "3"; Discord matches attachments[].id against that index.
    if field_name.startswith("files[") and field_name.endswith("]"):
        return field_name[len("files[") : -1]
    return field_name


def _validate_choices(choices: object) -> None:
    if not isinstance(choices, list) or len(choices) > 25:
        raise _invalid_form("data.choices", "Must be a list of 25 or fewer choices.")
    for index, choice in enumerate(choices):
        name = choice.get("name") if isinstance(choice, dict) else None
        if not isinstance(name, str) or not 1 <= len(name) <= 100:
            raise _invalid_form(f"data.choices.{index}.name", "Must be between 1 and 100 in length.")
        if not isinstance(choice, dict) or "value" not in choice:
            raise _invalid_form(f"data.choices.{index}.value", "This field is required")


def _validate_embeds(embeds: object) -> None:
    if not isinstance(embeds, list) or len(embeds) > 10:
        raise _invalid_form("embeds", "Must be 10 or fewer in length.")
    total = 0
    limits = {"title": 256, "description": 4096}
    for index, embed in enumerate(embeds):
        if not isinstance(embed, dict):
            raise _invalid_form(f"embeds.{index}", "must be an object")
        for key, limit in limits.items():
            text = embed.get(key) or ""
            if len(text) > limit:
                raise _invalid_form(f"embeds.{index}.{key}", f"Must be {limit} or fewer in length.")
            total += len(text)
        fields = embed.get("fields") or []
        if len(fields) > 25:
            raise _invalid_form(f"embeds.{index}.fields", "Must be 25 or fewer in length.")
        for number, embed_field in enumerate(fields):
            name, value = embed_field.get("name") or "", embed_field.get("value") or ""
            if len(name) > 256 or len(value) > 1024:
                raise _invalid_form(f"embeds.{index}.fields.{number}", "name <= 256 and value <= 1024")
            total += len(name) + len(value)
        total += len((embed.get("footer") or {}).get("text") or "")
        total += len((embed.get("author") or {}).get("name") or "")
    if total > 6000:
        raise _invalid_form("embeds", "Embed size exceeds maximum size of 6000")
