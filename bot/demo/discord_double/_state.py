"""The double's state: the guilds, channels, roles, members, messages, commands and interactions it holds, and what
it answers about them. The gateway, the REST routes and the driver (`DiscordDouble`) are layers on top of it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from . import _payloads
from ._http import RecordedRequest

INTERACTION_APPLICATION_COMMAND = 2
INTERACTION_COMPONENT = 3
INTERACTION_AUTOCOMPLETE = 4
INTERACTION_MODAL_SUBMIT = 5

COMPONENT_BUTTON = 2

# Application command permission types: what an entry's id names.
PERMISSION_ROLE = 1
PERMISSION_USER = 2
PERMISSION_CHANNEL = 3
PERMISSION_TYPES = (PERMISSION_ROLE, PERMISSION_USER, PERMISSION_CHANNEL)
MAX_COMMAND_PERMISSIONS = 100  # entries per command (or per application) in a guild


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
class GatewaySession:
    session_id: str
    intents: int
    identify: dict[str, Any]
    shard_id: int = 0
    seq: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    connection: Connection | None = None


@dataclass(eq=False)
class Connection:
    ws: web.WebSocketResponse
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: GatewaySession | None = None


@dataclass
class Guild:
    guild_id: int
    name: str
    channel_ids: tuple[int, ...]


@dataclass
class Member:
    user_id: int
    name: str
    roles: list[int]
    joined_at: str


class DoubleState:
    """Everything the double holds. `DiscordDouble`'s docstring says what its public attributes mean."""

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
        self._members: dict[int, Member] = {
            self.bot_user_id: Member(self.bot_user_id, "double-bot", [self._bot_role_id], _payloads.iso_now())
        }
        # guild id -> users who left it (or were kicked or banned): no longer members there.
        self._removed: dict[int, set[int]] = {}
        # guild id -> target (a command's id, or the application's for all its commands) -> permission entries.
        self._command_permissions: dict[int, dict[int, list[dict[str, Any]]]] = {}
        self._channels: dict[int, dict[str, Any]] = {
            cid: _payloads.text_channel_object(cid, guild_id, "general" if i == 0 else f"channel-{i + 1}", i)
            for i, cid in enumerate(self.channel_ids)
        }
        self._guilds: dict[int, Guild] = {guild_id: Guild(guild_id, "Double Guild", self.channel_ids)}
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
        self._sessions: dict[str, GatewaySession] = {}
        self._connections: set[Connection] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._http_base = ""

    # ------------------------------------------------------------------ guilds and members

    def shard_of(self, guild_id: int) -> int:
        """The shard Discord sends the guild's events to."""
        return (guild_id >> 22) % self.shard_count

    def guild_ids(self) -> tuple[int, ...]:
        return tuple(self._guilds)

    def guild_channel_ids(self, guild_id: int) -> tuple[int, ...]:
        return self._guilds[guild_id].channel_ids

    def guild_of_channel(self, channel_id: int) -> int | None:
        """The guild a text channel belongs to; None for DMs and unknown channels."""
        channel = self._channels.get(channel_id)
        return int(channel["guild_id"]) if channel is not None else None

    def dm_channel_id(self, user_id: int) -> int | None:
        return self._dm_by_user.get(user_id)

    def is_member(self, guild_id: int, user_id: int) -> bool:
        """Whether the user is a member of that guild now."""
        return user_id in self._members and user_id not in self._removed.get(guild_id, ())

    def _guild_members(self, guild_id: int) -> list[Member]:
        return [m for m in self._members.values() if self.is_member(guild_id, m.user_id)]

    def _permissions(self, role_ids: Iterable[int]) -> int:
        value = int(self._roles[self.guild_id]["permissions"])
        for role_id in role_ids:
            role = self._roles.get(role_id)
            if role is not None:
                value |= int(role["permissions"])
        if value & _payloads.ADMINISTRATOR:
            return _payloads.ALL_PERMISSIONS
        return value

    def _member_payload(self, member: Member, *, roles: list[int] | None = None) -> dict[str, Any]:
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

    def _command_permissions_object(
        self, guild_id: int, target_id: int, entries: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": str(target_id),
            "application_id": str(self.application_id),
            "guild_id": str(guild_id),
            "permissions": [dict(e) for e in entries],
        }

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
