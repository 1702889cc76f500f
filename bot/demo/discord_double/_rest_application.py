"""REST: the bot's user, the application, gateway information, and application commands with their permissions."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from . import _commands, _payloads
from ._http import BODY, DiscordError, invalid_form, json_response
from ._state import DoubleState


class ApplicationRoutes(DoubleState):
    """GET /users/@me and /users/{id}, /gateway(/bot), /applications/@me, and the application's commands."""

    async def _get_me(self, request: web.Request) -> web.Response:
        return json_response({**self._bot_user, "verified": True, "mfa_enabled": False, "locale": "en-US"})

    async def _get_user(self, request: web.Request) -> web.Response:
        user = self._users.get(int(request.match_info["user_id"]))
        if user is None:
            raise DiscordError(404, 10013, "Unknown User")
        return json_response(user)

    async def _get_gateway(self, request: web.Request) -> web.Response:
        return json_response({"url": self.gateway_url})

    async def _get_gateway_bot(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return json_response({"url": self.gateway_url, "shards": self.shard_count, "session_start_limit": limit})

    async def _get_application(self, request: web.Request) -> web.Response:
        return json_response(
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
        return json_response(self.synced_commands.get(self._command_scope(request), []))

    async def _put_commands(self, request: web.Request) -> web.Response:
        scope = self._command_scope(request)
        try:
            commands = _commands.validate_commands(request.get(BODY))
        except _commands.CommandSchemaError as error:
            raise invalid_form("commands", str(error)) from None
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
        return json_response(stored)

    def _command_guild(self, request: web.Request) -> int:
        guild_id = self._command_scope(request)
        assert guild_id is not None, "the route names a guild"
        return guild_id

    async def _get_guild_command_permissions(self, request: web.Request) -> web.Response:
        """Only the targets that have entries: a command nobody configured is not listed."""
        guild_id = self._command_guild(request)
        targets = self._command_permissions.get(guild_id, {})
        return json_response([self._command_permissions_object(guild_id, t, e) for t, e in targets.items()])

    async def _get_command_permissions(self, request: web.Request) -> web.Response:
        guild_id = self._command_guild(request)
        target_id = int(request.match_info["command_id"])
        entries = self._command_permissions.get(guild_id, {}).get(target_id)
        if entries is None:
            raise DiscordError(404, 10066, "Unknown application command permissions")
        return json_response(self._command_permissions_object(guild_id, target_id, entries))
