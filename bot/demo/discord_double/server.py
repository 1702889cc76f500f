"""An in-memory Discord (REST + gateway) that the real discord.py client can log into.

Everything the bot sends is recorded for assertions; errors come back with Discord's status
codes and JSON error codes so the bot's error handling runs against realistic failures.

`DiscordDouble` is what tests and the demo drive; it is built in layers, one module each:
`_state` (what the double holds), `_gateway` (sessions and events), `_messages` (the bot's messages),
`_rest_application`, `_rest_guilds`, `_rest_channels` and `_rest_interactions` (the REST routes by resource),
and `_app` (the aiohttp application with its middleware). This module adds the driver: setting a scene up
and acting as Discord's users.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Iterable
from typing import Any

from . import _commands, _payloads
from ._app import DoubleApp
from ._messages import FLAG_EPHEMERAL
from ._state import (
    COMPONENT_BUTTON,
    INTERACTION_APPLICATION_COMMAND,
    INTERACTION_AUTOCOMPLETE,
    INTERACTION_COMPONENT,
    MAX_COMMAND_PERMISSIONS,
    PERMISSION_TYPES,
    Guild,
    InteractionRecord,
    Member,
)


class DiscordDouble(DoubleApp):
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

    # ------------------------------------------------------------------ test set-up

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
        self._guilds[guild_id] = Guild(guild_id, name or f"Double Guild {len(self._guilds) + 1}", channel_ids)
        return guild_id

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

    def _register_member(
        self, user_id: int, *, name: str | None, roles: Iterable[int] | None, guild_id: int | None = None
    ) -> dict[str, Any]:
        guild_id = self.guild_id if guild_id is None else guild_id
        role_ids = list(roles or [])
        for role_id in role_ids:
            if role_id not in self._roles:
                self.add_role(role_id)
        member = Member(user_id, name or f"user{user_id}", role_ids, _payloads.iso_now())
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

    def forbid_channel(self, channel_id: int) -> None:
        """Posting in that channel answers 403 / 50001 Missing Access."""
        self._forbidden_channels.add(channel_id)

    def block_by_automod(self, channel_id: int) -> None:
        """Posting in that channel answers 400 / 200000, as when the server's AutoMod blocks the message."""
        self._automod_channels.add(channel_id)

    def forbid_dm(self, user_id: int) -> None:
        """Messages to that user's DM channel answer 403 / 50007, as when DMs are closed."""
        self._forbidden_dms.add(user_id)

    # ------------------------------------------------------------------ driving the bot

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
        an ephemeral message only by the member it was shown to. A message in the bot's DM with a user (a video
        delivered there) is clicked by that user only, in the DM's context (`context` 1): the interaction carries
        `user` instead of `guild_id` and `member`, whether or not the user is still in any guild, and `roles` is
        ignored.
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
        return await self._wait_until(
            lambda: self._first_message(channel_id, predicate), timeout, f"a matching message in channel {channel_id}"
        )

    async def wait_for_dm(
        self,
        user_id: int,
        *,
        timeout: float = 30,  # noqa: ASYNC109
        predicate: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """Like wait_for_message, for the DM channel with that user (which may not exist yet)."""
        return await self._wait_until(
            lambda: self._first_message(self._dm_by_user.get(user_id), predicate),
            timeout,
            f"a matching DM to user {user_id}",
        )

    def _first_message(
        self, channel_id: int | None, predicate: Callable[[dict[str, Any]], bool] | None
    ) -> dict[str, Any] | None:
        for message in self.messages.get(channel_id, []) if channel_id is not None else []:
            if predicate is None or predicate(message):
                return message
        return None

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
        if channel_id in self._dm_channels:
            return await self._send_dm_interaction(
                kind, data, name=name, message=message, user_id=user_id, channel_id=channel_id, locale=locale,
                attachment_size_limit=attachment_size_limit,
            )
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
        return await self._dispatch_interaction(
            payload, name=name if name is not None else data["name"], message=message, user_id=user_id,
            channel_id=channel_id, attachment_size_limit=size_limit,
        )

    async def _send_dm_interaction(
        self,
        kind: int,
        data: dict[str, Any],
        *,
        name: str | None,
        message: dict[str, Any] | None,
        user_id: int,
        channel_id: int,
        locale: str,
        attachment_size_limit: int | None,
    ) -> InteractionRecord:
        """An interaction in the bot's DM with a user, as Discord sends it: no `guild_id`, `guild`, `member` or
        `guild_locale`; the `user`, the DM channel, `context` 1 (BOT_DM) and the guild install's owner "0"."""
        channel = self._dm_channels[channel_id]
        recipient = int(channel["recipients"][0]["id"])
        if user_id != recipient:
            raise LookupError(f"channel {channel_id} is the bot's DM with user {recipient}, not with {user_id}")
        if not self._live_sessions():
            raise RuntimeError("no gateway session is connected; start the bot and await wait_ready()")
        if 0 not in self.connected_shards():
            raise RuntimeError("DMs go to shard 0, which no gateway session has identified as")
        size_limit = self.default_upload_limit if attachment_size_limit is None else attachment_size_limit
        payload: dict[str, Any] = {
            "id": str(self._ids.next()),
            "application_id": str(self.application_id),
            "type": kind,
            "token": "aW50ZXJhY3Rpb24" + secrets.token_urlsafe(96),
            "version": 1,
            "data": data,
            "channel_id": str(channel_id),
            "channel": dict(channel),
            "user": dict(self._user(user_id)),
            # What a bot may do in its own DM: attach files, embed links, mention everyone, use external emojis.
            "app_permissions": str(_payloads.DM_APP_PERMISSIONS),
            "locale": locale,
            "attachment_size_limit": size_limit,
            "entitlements": [],
            "entitlement_sku_ids": [],
            # A guild-installed app used in its bot's DM: the guild install's owner is "0".
            "authorizing_integration_owners": {"0": "0"},
            "context": 1,
        }
        return await self._dispatch_interaction(
            payload, name=name if name is not None else data["name"], message=message, user_id=user_id,
            channel_id=channel_id, attachment_size_limit=size_limit,
        )

    async def _dispatch_interaction(
        self,
        payload: dict[str, Any],
        *,
        name: str,
        message: dict[str, Any] | None,
        user_id: int,
        channel_id: int,
        attachment_size_limit: int,
    ) -> InteractionRecord:
        """Record the interaction and send it as INTERACTION_CREATE (a guild's to its shard, a DM's to shard 0)."""
        if message is not None:
            # A component interaction carries the message its component is on.
            payload["message"] = self._wire(message)
        interaction_id, token = payload["id"], payload["token"]
        record = InteractionRecord(
            id=interaction_id,
            token=token,
            type=payload["type"],
            name=name,
            channel_id=channel_id,
            user_id=user_id,
            attachment_size_limit=attachment_size_limit,
            payload=payload,
            created_at=time.monotonic(),
            message=message,
        )
        self._interactions[interaction_id] = record
        self._interactions_by_token[token] = record
        await self._broadcast("INTERACTION_CREATE", payload)
        return record
