"""What a click that spends needs to know from Discord to be held to what `/video` is held to.

Discord checks a slash command before the bot sees it: the member is in the server, and the server's command
permissions (Server Settings > Integrations) let them use it there. It checks nothing of the kind for a button, and a
button on a video delivered by DM is clicked outside the server altogether. So for Re-roll, Confirm and Generate the
bot gathers the same facts itself, and the trust model (bot/community/trust.py) decides with them:

- the member now: for a click in the server, the interaction's member (Discord sends one only for a member); for a
  click in a DM, the member fetched from Discord (GET /guilds/{guild}/members/{user}: 404 once they left, were kicked
  or banned), with their roles and their permissions in the request's channel as the cache computes them;
- /video's command permissions in that server: /video's id and `default_member_permissions` from the synced commands
  (remembered at sync, else fetched once; "not registered" is fetched again after MISS_SECONDS), and the guild's
  entries (fetched once per guild on first need, then kept current by the gateway's
  APPLICATION_COMMAND_PERMISSIONS_UPDATE).

What cannot be read is an unreadable `Standing`: the trust model refuses the click (nothing spent), never lets it
through, and the log says why.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
from discord import app_commands

from bot.community.command_permissions import (
    CommandAccess,
    CommandPermissions,
    PermissionEntry,
    entries_by_target,
)
from bot.community.trust import Membership, Standing

log = logging.getLogger(__name__)

Interaction = discord.Interaction[Any]
Entries = Mapping[int, tuple[PermissionEntry, ...]]

#: The command a spending button stands for.
VIDEO = "video"
#: How long a click may spend reading from Discord: its interaction must be answered within 3 s, its database
#: reads included.
READ_SECONDS = 1.5
#: What reading from Discord can fail with, besides a timeout.
_READ_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, ValueError)


class AccessUnreadable(Exception):
    """What a click's access depends on could not be read from Discord; the message says what and why (for the log,
    never for the member)."""


@dataclass(frozen=True)
class SyncedCommand:
    """A command as Discord has it registered: its id (what command permissions name) and its
    `default_member_permissions` (None: everyone)."""

    id: int
    default_member_permissions: int | None

    @classmethod
    def of(cls, command: app_commands.AppCommand) -> SyncedCommand:
        default = command.default_member_permissions
        return cls(command.id, default.value if default is not None else None)


#: Reads a scope's registered commands (a guild's, or the global ones for None): `CommandTree.fetch_commands`.
CommandsReader = Callable[[int | None], Awaitable[Sequence[app_commands.AppCommand]]]
#: Reads a guild's command permissions as Discord sends them: `HTTPClient.get_guild_application_command_permissions`.
PermissionsReader = Callable[[int], Awaitable[Sequence[Mapping[str, Any]]]]


#: How long "/video is not registered in that scope" is believed before it is read again: another process (or
#: `python -m bot sync`) may register it meanwhile. Until then each click there is refused without a read.
MISS_SECONDS = 60.0


class SyncedCommands:
    """One command's registration per scope, from the last sync of this process or else read: a registration
    found is kept, a miss only for MISS_SECONDS."""

    def __init__(self, read: CommandsReader, name: str = VIDEO, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._read = read
        self._name = name
        self._clock = clock
        self._known: dict[int | None, SyncedCommand] = {}
        self._missing_since: dict[int | None, float] = {}

    def remember(self, scope: int | None, commands: Sequence[app_commands.AppCommand]) -> None:
        """What a sync of that scope registered (`CommandTree.sync` returns it), or a read found."""
        found = next((SyncedCommand.of(c) for c in commands if c.name == self._name), None)
        if found is None:
            self._known.pop(scope, None)
            self._missing_since[scope] = self._clock()
        else:
            self._known[scope] = found
            self._missing_since.pop(scope, None)

    async def get(self, scope: int | None) -> SyncedCommand | None:
        """The command in that scope; None if it is not registered there. Raises AccessUnreadable."""
        if scope in self._known:
            return self._known[scope]
        missing_since = self._missing_since.get(scope)
        if missing_since is not None and self._clock() - missing_since < MISS_SECONDS:
            return None
        try:
            commands = await self._read(scope)
        except _READ_ERRORS as exc:
            raise AccessUnreadable(f"the registered commands could not be read ({_why(exc)})") from exc
        self.remember(scope, commands)
        return self._known.get(scope)


class GuildPermissions:
    """Each guild's application command permissions, read once on first need and kept current by the gateway's
    updates (an update replaces its target's entries, as Discord's event carries them all)."""

    def __init__(self, read: PermissionsReader) -> None:
        self._read = read
        self._known: dict[int, dict[int, tuple[PermissionEntry, ...]]] = {}
        self._reading: dict[int, asyncio.Future[dict[int, tuple[PermissionEntry, ...]]]] = {}
        # Updates that arrived while a guild's read was on its way: applied on top of what it read.
        self._arrived: dict[int, list[CommandPermissions]] = {}
        # Moves on at each `forget`: a read that began before it is used by its waiting clicks, never kept.
        self._generation = 0

    async def entries(self, guild_id: int) -> Entries:
        """The guild's entries by target (a command's id, or the application's). Raises AccessUnreadable."""
        known = self._known.get(guild_id)
        if known is not None:
            return dict(known)
        reading = self._reading.get(guild_id)
        if reading is None:
            # One read per guild, shared by every click waiting for it; one that gives up does not cancel it.
            # From now on, updates for the guild are kept for the read to apply.
            self._arrived[guild_id] = []
            reading = self._reading[guild_id] = asyncio.ensure_future(self._read_guild(guild_id, self._generation))
            # Its failure is each waiting click's to report; none may be left waiting (a timeout).
            reading.add_done_callback(lambda done: done.cancelled() or done.exception())
        return dict(await asyncio.shield(reading))

    async def _read_guild(self, guild_id: int, generation: int) -> dict[int, tuple[PermissionEntry, ...]]:
        try:
            payloads = await self._read(guild_id)
            entries = entries_by_target(CommandPermissions.from_payload(p) for p in payloads)
        except _READ_ERRORS as exc:
            raise AccessUnreadable(f"the command permissions of server {guild_id} could not be read "
                                   f"({_why(exc)})") from exc
        finally:
            arrived = self._arrived.pop(guild_id, [])
            self._reading.pop(guild_id, None)
        known = dict(entries)
        for update in arrived:
            _apply(known, update)
        if generation == self._generation:
            self._known[guild_id] = known
        return known

    def update(self, permissions: CommandPermissions) -> None:
        """A gateway update: kept for a guild already read (or being read); others are read when first needed."""
        arrived = self._arrived.get(permissions.guild_id)
        if arrived is not None:
            arrived.append(permissions)
        known = self._known.get(permissions.guild_id)
        if known is not None:
            _apply(known, permissions)

    def forget(self, guild_id: int | None = None) -> None:
        """Drop what was read (of one guild, or of all): read again when next needed. After a gateway session that
        could not be resumed, updates may have been missed: forget them all then."""
        self._generation += 1
        if guild_id is None:
            self._known.clear()
        else:
            self._known.pop(guild_id, None)


def _apply(known: dict[int, tuple[PermissionEntry, ...]], update: CommandPermissions) -> None:
    if update.permissions:
        known[update.id] = update.permissions
    else:
        known.pop(update.id, None)


def permissions_update(event: discord.RawAppCommandPermissionsUpdateEvent) -> CommandPermissions:
    """discord.py's parsed event as the payload Discord sent."""
    return CommandPermissions(
        id=event.target_id, application_id=event.application_id, guild_id=event.guild.id,
        permissions=tuple(PermissionEntry(p.id, p.type.value, p.permission) for p in event.permissions),
    )


class SpendingAccess:
    """The facts a spending click is decided with (the module docstring says which), gathered within READ_SECONDS."""

    def __init__(self, client: discord.Client, commands: SyncedCommands, permissions: GuildPermissions, *,
                 command_guild_id: int | None = None, read_seconds: float = READ_SECONDS) -> None:
        """`command_guild_id`: the one server the commands are synced to (DISCORD_GUILD_ID), else they are global."""
        self._client = client
        self.commands = commands
        self.permissions = permissions
        self._command_guild_id = command_guild_id
        self._read_seconds = read_seconds

    @classmethod
    def of(cls, client: discord.Client, tree: app_commands.CommandTree[Any], *, command_guild_id: int | None = None,
           read_seconds: float = READ_SECONDS) -> SpendingAccess:
        """Reading through `client`'s HTTP session and `tree`'s commands."""

        async def read_commands(scope: int | None) -> Sequence[app_commands.AppCommand]:
            return await tree.fetch_commands(guild=discord.Object(scope) if scope is not None else None)

        async def read_permissions(guild_id: int) -> Sequence[Mapping[str, Any]]:
            application_id = client.application_id
            if application_id is None:
                raise ValueError("the application's id is not known before login")
            answer: Sequence[Mapping[str, Any]] = await client.http.get_guild_application_command_permissions(
                application_id, guild_id)
            return answer

        return cls(client, SyncedCommands(read_commands), GuildPermissions(read_permissions),
                   command_guild_id=command_guild_id, read_seconds=read_seconds)

    def updated(self, event: discord.RawAppCommandPermissionsUpdateEvent) -> None:
        """The gateway's APPLICATION_COMMAND_PERMISSIONS_UPDATE (`on_raw_app_command_permissions_update`)."""
        if event.application_id != self._client.application_id:
            return  # another application's commands in a server both are in
        self.permissions.update(permissions_update(event))

    async def standing(self, interaction: Interaction, guild_id: int | None, channel_id: int) -> Standing:
        """The clicker in the request's server and channel now; unreadable (and logged why) if Discord cannot say."""
        try:
            if guild_id is None:
                raise AccessUnreadable("the request names no server")
            try:
                async with asyncio.timeout(self._read_seconds):
                    member = await self.member(interaction, guild_id, channel_id)
                    if member is None:
                        return Standing(True)
                    return Standing(True, member, await self.video(guild_id))
            except TimeoutError as exc:
                raise AccessUnreadable(f"Discord did not answer within {self._read_seconds} s") from exc
        except AccessUnreadable as exc:
            log.warning("a spending click of user %s is refused: %s", interaction.user.id, exc)
            return Standing.unreadable()

    async def video(self, guild_id: int) -> CommandAccess:
        """/video's command permissions in that server. Raises AccessUnreadable."""
        application_id = self._client.application_id
        if application_id is None:
            raise AccessUnreadable("the application's id is not known yet")
        scope = guild_id if guild_id == self._command_guild_id else None
        command = await self.commands.get(scope)
        if command is None:
            where = f"server {scope}" if scope is not None else "every server"
            raise AccessUnreadable(f"/{VIDEO} is not registered for {where}: run `python -m bot sync`")
        entries = await self.permissions.entries(guild_id)
        return CommandAccess(command.id, application_id, guild_id, command.default_member_permissions, entries)

    async def member(self, interaction: Interaction, guild_id: int, channel_id: int) -> Membership | None:
        """The clicker as a member of that server now; None if they are not one. Raises AccessUnreadable."""
        user = interaction.user
        if isinstance(user, discord.Member) and interaction.guild_id == guild_id:
            # Discord sends a member only for a member: the interaction says who they are now.
            if interaction.channel_id == channel_id:
                return Membership(_role_ids(user), interaction.permissions.value, self._command_channel(channel_id))
            return self._as_member(user, user.guild, channel_id)
        try:
            guild = self._client.get_guild(guild_id) or await self._client.fetch_guild(guild_id)
            member = await guild.fetch_member(user.id)
        except (discord.NotFound, discord.Forbidden) as exc:
            # 10007 Unknown Member: they left, were kicked or banned. The server itself gone (or the bot out of it):
            # nobody is a member there as far as the bot can act.
            log.info("user %s is not a member of server %s now (%s)", user.id, guild_id, _why(exc))
            return None
        except _READ_ERRORS as exc:
            raise AccessUnreadable(f"user {user.id}'s membership of server {guild_id} could not be read "
                                   f"({_why(exc)})") from exc
        return self._as_member(member, guild, channel_id)

    def _as_member(self, member: discord.Member, guild: discord.Guild, channel_id: int) -> Membership:
        channel = guild.get_channel_or_thread(channel_id)
        if channel is None:
            # Not in the cache (a server of another process's shards): the server-wide permissions, which decide
            # Administrator exactly; only a channel's overwrites are missed.
            return Membership(_role_ids(member), member.guild_permissions.value, channel_id)
        parent = channel.parent_id if isinstance(channel, discord.Thread) else None
        return Membership(_role_ids(member), channel.permissions_for(member).value, parent or channel_id)

    def _command_channel(self, channel_id: int) -> int:
        """Command permissions name channels, never threads: a thread's are its parent's."""
        channel = self._client.get_channel(channel_id)
        if isinstance(channel, discord.Thread) and channel.parent_id is not None:
            return channel.parent_id
        return channel_id


def _role_ids(member: discord.Member) -> frozenset[int]:
    # discord.py lists the @everyone role among a member's roles; the combiner knows to leave it out.
    return frozenset(role.id for role in member.roles)


def _why(exc: BaseException) -> str:
    if isinstance(exc, discord.HTTPException):
        return f"HTTP {exc.status}" + (f", code {exc.code}" if exc.code else "")
    return str(exc) or type(exc).__name__
