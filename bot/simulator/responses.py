"""The simulator's own HTTP responses: the service's JSON error body, redirects, and the markers that tell
the access log a response was dropped or its body cut short."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from aiohttp import web

# Marks a response that was never sent because the connection was closed on purpose.
DROPPED: Final = web.ResponseKey("simulator_dropped", bool)
# Marks a response whose body was cut short (on purpose, or because the client went away).
CUT: Final = web.ResponseKey("simulator_cut", bool)


def error_response(status: int, message: str, *, headers: Mapping[str, str] | None = None) -> web.Response:
    """The service's JSON error body for HTTP `status`."""
    body = {"error": {"message": message, "type": _error_type(status), "code": str(status)}}
    return web.json_response(body, status=status, headers=headers)


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        409: "conflict_error",
        429: "rate_limit_error",
    }.get(status, "api_error" if status >= 500 else "request_error")


def redirect(location: str) -> web.Response:
    return web.Response(status=302, headers={"Location": location})
