"""What every route of the double shares: Discord's error answers, JSON responses, and what a request carried."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from aiohttp import BodyPartReader, web

_log = logging.getLogger(__name__)

API_PREFIX = "/api/v10"
MAX_REQUEST_BYTES = 25 * 1024 * 1024

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
        return json_response(body, status=self.status)


def invalid_form(field_path: str, reason: str) -> DiscordError:
    return DiscordError(
        400,
        50035,
        "Invalid Form Body",
        {field_path: {"_errors": [{"code": "BASE_TYPE_INVALID", "message": reason}]}},
    )


def json_response(data: Any, *, status: int = 200) -> web.Response:
    # discord.py only decodes JSON when Content-Type is exactly "application/json";
    # json_response() would append "; charset=utf-8".
    return web.Response(status=status, body=json.dumps(data).encode(), headers={"Content-Type": "application/json"})


class Upload(NamedTuple):
    field: str
    filename: str
    data: bytes


# What the middleware read of a request, for its handler.
BODY: Final = web.RequestKey("body", object)
UPLOADS: Final = web.RequestKey("uploads", list[Upload])


@dataclass
class RecordedRequest:
    """One REST call. `path` is below `api_base` (e.g. "/channels/1/messages?x=1"), as sent: percent-escapes kept,
    so a test sees the very path Discord would (`@original`, not `%40original`)."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    files: list[tuple[str, bytes]]
    time: float
    status: int = 0


def check_auth(request: web.Request) -> None:
    # Token-authenticated routes (interaction callbacks, webhooks) need no bot token.
    path = request.path[len(API_PREFIX) :]
    if path.startswith(("/interactions/", "/webhooks/")) or path == "/gateway":
        return
    auth = request.headers.get("Authorization", "")
    if not auth.startswith("Bot ") or len(auth) <= len("Bot "):
        raise DiscordError(401, 0, "401: Unauthorized")


async def read_body(request: web.Request) -> tuple[Any, list[Upload]]:
    if not request.body_exists:
        return None, []
    if request.content_length is not None and request.content_length > MAX_REQUEST_BYTES:
        raise DiscordError(413, 40005, "Request entity too large")
    if request.content_type.startswith("multipart/"):
        payload: Any = None
        uploads: list[Upload] = []
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
                uploads.append(Upload(name, part.filename, bytes(await part.read(decode=False))))
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


def request_body(request: web.Request) -> dict[str, Any]:
    body = request.get(BODY)
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise invalid_form("_root", "expected an object")
    return body
