"""The gateway: sessions per shard, IDENTIFY and RESUME, and the events the double sends to them."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from typing import Any

from aiohttp import WSMsgType, web

from ._state import Connection, DoubleState, GatewaySession

_log = logging.getLogger(__name__)

GATEWAY_PATH = "/gateway"
HEARTBEAT_INTERVAL_MS = 41_250

# Gateway close codes Discord uses for a bad IDENTIFY shard.
CLOSE_INVALID_SHARD = 4010
CLOSE_SHARDING_REQUIRED = 4011


class Gateway(DoubleState):
    """The gateway layer: a guild's events go only to its shard's sessions, DMs to shard 0."""

    def connected_shards(self) -> set[int]:
        """The shards with a live gateway connection."""
        return {session.shard_id for session in self._live_sessions()}

    def _live_sessions(self) -> list[GatewaySession]:
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

    async def _dispatch(self, session: GatewaySession, event: str, data: dict[str, Any]) -> None:
        session.seq += 1
        frame = {"op": 0, "t": event, "s": session.seq, "d": data}
        session.events.append(frame)
        if session.connection is not None:
            await self._send(session.connection, frame)

    @staticmethod
    async def _send(connection: Connection, frame: dict[str, Any]) -> None:
        if connection.ws.closed:
            return
        async with connection.lock:
            await connection.ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        # Frames go out as plain-text JSON even though discord.py asks for zlib-stream; it
        # accepts both.
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        connection = Connection(ws)
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

    async def _on_gateway_frame(self, connection: Connection, frame: dict[str, Any]) -> None:
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

    async def _identify(self, connection: Connection, data: dict[str, Any]) -> None:
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
        session = GatewaySession(
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

    async def _resume(self, connection: Connection, data: dict[str, Any]) -> None:
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

    async def _request_members(self, connection: Connection, data: dict[str, Any]) -> None:
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
