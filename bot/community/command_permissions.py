"""Whether a member may use an application command in a guild channel, as Discord decides it.

What a server's admins set under Server Settings > Integrations reaches the bot as application command
permissions (GET /applications/{app}/guilds/{guild}/commands/permissions, and the gateway event
APPLICATION_COMMAND_PERMISSIONS_UPDATE). Discord applies them to slash commands only; a bot that wants a button or a
follow-up step to honour them has to decide the same way itself, which is what this module does. It reads no
Discord object and does no I/O: the caller hands it ids, bit sets and entries.

Sources: Discord's developer documentation, "Application Commands" > "Permissions" and "Application Command
Permissions Object" (developers/interactions/application-commands.mdx in discord/discord-api-docs), and the change
log entry "Upcoming Application Command Permission Changes" (November 17, 2022) with its flowchart of how the client
applies them (images/new-permissions-flowchart.svg); Discord's support articles "Updates to Command Permissions" and
"Command Permissions Lockout". In short, and in the order they are applied:

1. Administrator. A member whose permissions include Administrator may use every command: nothing below applies to
   them. ("Members with the Administrator permission can use all commands"; the flowchart leaves admins out for that
   reason.) The guild's owner counts too: Discord computes the owner's permissions as all of them.

2. Where. Entries come in two layers: the command's own (the permissions object whose `id` is the command's id) and
   the application's (whose `id` is the application's id), which hold for every command that has no entry of its own
   for the same thing. The first of these that exists decides: the command's entry for this channel, the command's
   entry for all channels (id = guild id - 1), the application's entry for this channel, the application's entry for
   all channels. If it denies, nobody may use the command here; if it allows, or none exists, go on to step 3. An
   allowed channel grants nothing by itself.

3. Who, at the command's layer. The first that exists decides, and decides for good (step 4 and the command's
   `default_member_permissions` are skipped): the entry for the user; else the entries for the member's roles, where
   the member may use the command if at least one of those roles is allowed, and may not if all of them are denied
   (an allow on one role beats a deny on another); else the entry for @everyone (a role entry whose id is the guild's
   id). This is how an admin grants a command to someone who lacks its default permissions.

4. Who, at the application's layer. Same order (user, then the member's roles with "one allow is enough", then
   @everyone), but only a deny decides: an allow, or no entry at all, goes on to step 5. Access to the application
   never lifts a command's own default requirement.

5. The command's `default_member_permissions`. Null: everyone may use it. "0": nobody but administrators (and those
   a command-level entry let through in step 3). Any other bit set: the member needs every one of those permissions,
   as computed in the channel (the interaction's `member.permissions`).

Points the documentation leaves open, and what this module does:

- Several entries for the same user, channel, @everyone or "all channels" in one layer (Discord stores one per
  target, so only a caller's mistake makes them): a deny among them wins. For roles the "at least one allow" rule
  covers several entries already.
- The @everyone role in `role_ids` (discord.py's `Member.roles` includes it; Discord's member object does not): it is
  not one of the member's roles for step 3's and 4's role check, only for the @everyone check. Otherwise a deny on a
  real role would be overruled by an allow on @everyone.
- @everyone is matched as a role entry and "all channels" as a channel entry; an entry of a type Discord may add
  later matches nothing.
- Threads: "any command permissions for a channel will apply to the threads it contains", and no entry names a
  thread, so for a thread pass its parent channel's id as `channel_id`.
- Subcommands have no permissions of their own: pass the top-level command's id.
- DMs have no guild and so no command permissions: this module does not decide for them.
- The behaviour before the 2022-2023 change (the layers exclusive of each other, flagged by the guild feature
  APPLICATION_COMMAND_PERMISSIONS_V2) is not modelled: every server has since been moved to the behaviour above.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Final

#: The Administrator permission bit.
ADMINISTRATOR: Final = 1 << 3


class PermissionType(IntEnum):
    """What an entry's id names."""

    ROLE = 1
    USER = 2
    CHANNEL = 3


@dataclass(frozen=True, slots=True)
class PermissionEntry:
    """One application command permission: allow (`permission`) or deny a role, a user or a channel.

    `type` is a `PermissionType` value, kept as a plain int so that a type Discord adds later still parses.
    """

    id: int
    type: int
    permission: bool

    @classmethod
    def from_payload(cls, data: Mapping[str, object]) -> PermissionEntry:
        kind = data.get("type")
        permission = data.get("permission")
        if isinstance(kind, bool) or not isinstance(kind, int):
            raise ValueError(f"an entry's type must be an integer, got {kind!r}")
        if not isinstance(permission, bool):
            raise ValueError(f"an entry's permission must be true or false, got {permission!r}")
        return cls(_snowflake(data.get("id"), "id"), kind, permission)


@dataclass(frozen=True, slots=True)
class CommandPermissions:
    """A guild application command permissions object: the entries of one command in one guild, or of the whole
    application when `id` is the application's id."""

    id: int
    application_id: int
    guild_id: int
    permissions: tuple[PermissionEntry, ...]

    @classmethod
    def from_payload(cls, data: Mapping[str, object]) -> CommandPermissions:
        """From the JSON Discord sends (REST answer or gateway event)."""
        entries = data.get("permissions")
        if not isinstance(entries, list):
            raise ValueError(f"permissions must be a list, got {entries!r}")
        parsed: list[PermissionEntry] = []
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise ValueError(f"a permission entry must be an object, got {entry!r}")
            parsed.append(PermissionEntry.from_payload(entry))
        return cls(
            id=_snowflake(data.get("id"), "id"),
            application_id=_snowflake(data.get("application_id"), "application_id"),
            guild_id=_snowflake(data.get("guild_id"), "guild_id"),
            permissions=tuple(parsed),
        )


def entries_by_target(objects: Iterable[CommandPermissions]) -> dict[int, tuple[PermissionEntry, ...]]:
    """`may_use`'s `entries_by_target` from one guild's permissions objects (the REST list, or the latest event for
    each target). A later object for the same target replaces an earlier one, as the event does."""
    indexed: dict[int, tuple[PermissionEntry, ...]] = {}
    guilds: set[int] = set()
    for permissions in objects:
        guilds.add(permissions.guild_id)
        if len(guilds) > 1:
            raise ValueError(f"permissions of several guilds ({sorted(guilds)}) cannot be read as one guild's")
        indexed[permissions.id] = permissions.permissions
    return indexed


def parse_default_member_permissions(value: str | int | None) -> int | None:
    """A command's `default_member_permissions` (Discord sends a string, discord.py an int) as a bit set."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("default_member_permissions is a bit set, not a boolean")
    bits = int(value)
    if bits < 0:
        raise ValueError(f"default_member_permissions must not be negative, got {value!r}")
    return bits


class Rule(StrEnum):
    """The rule that settled a decision, in the module docstring's terms."""

    ADMINISTRATOR = "the member is an administrator"
    COMMAND_CHANNEL = "the command's entry for this channel"
    COMMAND_ALL_CHANNELS = "the command's entry for all channels"
    APPLICATION_CHANNEL = "the application's entry for this channel"
    APPLICATION_ALL_CHANNELS = "the application's entry for all channels"
    COMMAND_USER = "the command's entry for the member"
    COMMAND_ROLES = "the command's entries for the member's roles"
    COMMAND_EVERYONE = "the command's entry for @everyone"
    APPLICATION_USER = "the application's entry for the member"
    APPLICATION_ROLES = "the application's entries for the member's roles"
    APPLICATION_EVERYONE = "the application's entry for @everyone"
    DEFAULT_EVERYONE = "the command's default_member_permissions is null"
    DEFAULT_NOBODY = "the command's default_member_permissions is 0"
    DEFAULT_PERMISSIONS = "the command's default_member_permissions"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: Rule


def decide(
    *,
    command_id: int,
    application_id: int,
    guild_id: int,
    channel_id: int,
    user_id: int,
    role_ids: Iterable[int],
    member_permissions: int,
    default_member_permissions: int | None,
    entries_by_target: Mapping[int, Sequence[PermissionEntry]],
) -> Decision:
    """`may_use`, with the rule that decided."""
    if member_permissions & ADMINISTRATOR:
        return Decision(True, Rule.ADMINISTRATOR)
    command = entries_by_target.get(command_id, ())
    application = entries_by_target.get(application_id, ()) if application_id != command_id else ()
    roles = frozenset(role_ids) - {guild_id}
    all_channels = guild_id - 1

    where = _first(
        (_setting(command, PermissionType.CHANNEL, channel_id), Rule.COMMAND_CHANNEL),
        (_setting(command, PermissionType.CHANNEL, all_channels), Rule.COMMAND_ALL_CHANNELS),
        (_setting(application, PermissionType.CHANNEL, channel_id), Rule.APPLICATION_CHANNEL),
        (_setting(application, PermissionType.CHANNEL, all_channels), Rule.APPLICATION_ALL_CHANNELS),
    )
    if where is not None and not where.allowed:
        return where

    overwrite = _first(
        (_setting(command, PermissionType.USER, user_id), Rule.COMMAND_USER),
        (_roles_setting(command, roles), Rule.COMMAND_ROLES),
        (_setting(command, PermissionType.ROLE, guild_id), Rule.COMMAND_EVERYONE),
    )
    if overwrite is not None:
        return overwrite

    base = _first(
        (_setting(application, PermissionType.USER, user_id), Rule.APPLICATION_USER),
        (_roles_setting(application, roles), Rule.APPLICATION_ROLES),
        (_setting(application, PermissionType.ROLE, guild_id), Rule.APPLICATION_EVERYONE),
    )
    if base is not None and not base.allowed:
        return base

    if default_member_permissions is None:
        return Decision(True, Rule.DEFAULT_EVERYONE)
    if default_member_permissions == 0:
        return Decision(False, Rule.DEFAULT_NOBODY)
    required = default_member_permissions
    return Decision(member_permissions & required == required, Rule.DEFAULT_PERMISSIONS)


def may_use(
    *,
    command_id: int,
    application_id: int,
    guild_id: int,
    channel_id: int,
    user_id: int,
    role_ids: Iterable[int],
    member_permissions: int,
    default_member_permissions: int | None,
    entries_by_target: Mapping[int, Sequence[PermissionEntry]],
) -> bool:
    """Whether the member may use the command in that channel of that guild (see the module docstring).

    `command_id`: the top-level command's id. `channel_id`: the channel, or a thread's parent channel. `role_ids`: the
    member's roles (the @everyone role among them or not). `member_permissions`: the member's permissions in that
    channel as Discord computes them (the interaction's `member.permissions`). `default_member_permissions`: the
    command's, as a bit set (`parse_default_member_permissions`). `entries_by_target`: the guild's entries by
    command id or application id (`entries_by_target()`), without the targets nobody configured.
    """
    return decide(
        command_id=command_id,
        application_id=application_id,
        guild_id=guild_id,
        channel_id=channel_id,
        user_id=user_id,
        role_ids=role_ids,
        member_permissions=member_permissions,
        default_member_permissions=default_member_permissions,
        entries_by_target=entries_by_target,
    ).allowed


@dataclass(frozen=True, slots=True)
class CommandAccess:
    """Everything `decide` reads about one command in one guild, the member aside: what a caller gathers once per
    guild (the command's id and `default_member_permissions` from the synced commands, the entries from the guild's
    permissions) and asks about each member."""

    command_id: int
    application_id: int
    guild_id: int
    default_member_permissions: int | None
    entries_by_target: Mapping[int, Sequence[PermissionEntry]]

    def decide(self, *, user_id: int, role_ids: Iterable[int], channel_id: int, member_permissions: int) -> Decision:
        """`decide` for this member in that channel (a thread's parent channel for a thread)."""
        return decide(
            command_id=self.command_id,
            application_id=self.application_id,
            guild_id=self.guild_id,
            channel_id=channel_id,
            user_id=user_id,
            role_ids=role_ids,
            member_permissions=member_permissions,
            default_member_permissions=self.default_member_permissions,
            entries_by_target=self.entries_by_target,
        )


def _setting(entries: Sequence[PermissionEntry], kind: PermissionType, target: int) -> bool | None:
    """The entry for that target: None if there is none; if there are several, a deny among them wins."""
    values = [entry.permission for entry in entries if entry.type == kind and entry.id == target]
    return all(values) if values else None


def _roles_setting(entries: Sequence[PermissionEntry], roles: frozenset[int]) -> bool | None:
    """The entries for the member's roles: None if there are none; allowed if at least one of them allows."""
    values = [entry.permission for entry in entries if entry.type == PermissionType.ROLE and entry.id in roles]
    return any(values) if values else None


def _first(*settings: tuple[bool | None, Rule]) -> Decision | None:
    for setting, rule in settings:
        if setting is not None:
            return Decision(setting, rule)
    return None


def _snowflake(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{name} must be a snowflake, got {value!r}")
    try:
        snowflake = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a snowflake, got {value!r}") from None
    if snowflake < 0:
        raise ValueError(f"{name} must be a snowflake, got {value!r}")
    return snowflake
