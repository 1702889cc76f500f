"""REST: channels and DMs, their messages, and the attachments the double serves back."""

from __future__ import annotations

import mimetypes
import time
from typing import Any

from aiohttp import web

from . import _payloads
from ._http import UPLOADS, DiscordError, invalid_form, json_response, request_body
from ._mentions import PARSE_ALL
from ._messages import MESSAGE_DEFAULT, Messages

MAX_NONCE_LENGTH = 25


class ChannelRoutes(Messages):
    """/channels/{id} and its messages, POST /users/@me/channels (DMs), and /attachments."""

    def _messageable_channel(self, channel_id: int) -> dict[str, Any]:
        channel = self._channels.get(channel_id) or self._dm_channels.get(channel_id)
        if channel is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return channel

    async def _create_dm(self, request: web.Request) -> web.Response:
        body = request_body(request)
        try:
            user_id = int(body["recipient_id"])
        except (KeyError, TypeError, ValueError):
            raise invalid_form("recipient_id", "This field is required") from None
        if user_id not in self._users or user_id == self.bot_user_id:
            raise DiscordError(400, 50033, "Invalid Recipient(s)")
        channel_id = self._dm_by_user.get(user_id)
        if channel_id is None:
            channel_id = self._ids.next()
            self._dm_by_user[user_id] = channel_id
            self._dm_channels[channel_id] = _payloads.dm_channel_object(channel_id, self._users[user_id])
        return json_response(self._dm_channels[channel_id])

    async def _get_channel(self, request: web.Request) -> web.Response:
        return json_response(self._messageable_channel(int(request.match_info["channel_id"])))

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
        body = request_body(request)
        nonce = body.get("nonce")
        nonce_key: tuple[int, str] | None = None
        if nonce is not None:
            if isinstance(nonce, str) and len(nonce) > MAX_NONCE_LENGTH:
                raise invalid_form("nonce", f"Must be {MAX_NONCE_LENGTH} or fewer in length.")
            if body.get("enforce_nonce"):
                nonce_key = (channel_id, str(nonce))
                seen = self._nonces.get(nonce_key)
                if seen is not None and time.monotonic() - seen[0] < self.nonce_window:
                    return json_response(self._wire(seen[1]))
        record = self._message_record(
            channel_id=channel_id,
            body=body,
            uploads=request[UPLOADS],
            size_limit=self.default_upload_limit,
            default_parse=PARSE_ALL,
            message_type=MESSAGE_DEFAULT,
        )
        self.messages.setdefault(channel_id, []).append(record)
        if nonce_key is not None:
            self._nonces[nonce_key] = (time.monotonic(), record)
        await self._announce("MESSAGE_CREATE", record)
        return json_response(self._wire(record))

    def _channel_message(self, request: web.Request) -> dict[str, Any]:
        channel_id = int(request.match_info["channel_id"])
        self._messageable_channel(channel_id)
        message_id = request.match_info["message_id"]
        for message in self.messages.get(channel_id, []):
            if message["id"] == message_id and not message["deleted"]:
                return message
        raise DiscordError(404, 10008, "Unknown Message")

    async def _get_channel_message(self, request: web.Request) -> web.Response:
        return json_response(self._wire(self._channel_message(request)))

    async def _list_channel_messages(self, request: web.Request) -> web.Response:
        channel_id = int(request.match_info["channel_id"])
        self._messageable_channel(channel_id)
        limit = max(1, min(100, int(request.query.get("limit", "50"))))
        live = [m for m in self.messages.get(channel_id, []) if not m["deleted"]]
        return json_response([self._wire(m) for m in reversed(live)][:limit])

    async def _edit_channel_message(self, request: web.Request) -> web.Response:
        record = self._channel_message(request)
        self._check_upload_sizes(request[UPLOADS], self.default_upload_limit)
        self._apply_message_fields(record, request_body(request), request[UPLOADS], default_parse=PARSE_ALL)
        record["edited_timestamp"] = _payloads.iso_now()
        await self._announce("MESSAGE_UPDATE", record)
        return json_response(self._wire(record))

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
