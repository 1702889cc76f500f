"""REST: guilds, their channels and their members."""

from __future__ import annotations

from aiohttp import web

from ._http import DiscordError, json_response
from ._state import DoubleState


class GuildRoutes(DoubleState):
    """GET /guilds/{id}, its channels and its members."""

    def _check_guild(self, request: web.Request) -> int:
        guild_id = int(request.match_info["guild_id"])
        if guild_id not in self._guilds:
            raise DiscordError(404, 10004, "Unknown Guild")
        return guild_id

    async def _get_guild(self, request: web.Request) -> web.Response:
        guild = self._guild_payload(0, self._check_guild(request))
        for key in ("members", "channels", "threads", "presences", "voice_states", "joined_at", "large"):
            guild.pop(key)
        return json_response(guild)

    async def _get_guild_channels(self, request: web.Request) -> web.Response:
        guild_id = self._check_guild(request)
        return json_response([self._channels[cid] for cid in self._guilds[guild_id].channel_ids])

    async def _get_guild_member(self, request: web.Request) -> web.Response:
        guild_id = self._check_guild(request)
        user_id = int(request.match_info["user_id"])
        if not self.is_member(guild_id, user_id):
            raise DiscordError(404, 10007, "Unknown Member")
        return json_response(self._member_payload(self._members[user_id]))
