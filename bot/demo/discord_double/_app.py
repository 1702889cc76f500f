"""The double's aiohttp application: its routes (REST, the gateway's websocket, attachments), the middleware that
records and authenticates every API request, and starting and stopping it."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Self

from aiohttp import web

from ._gateway import GATEWAY_PATH
from ._http import (
    API_PREFIX,
    BODY,
    MAX_REQUEST_BYTES,
    UPLOADS,
    DiscordError,
    Handler,
    RecordedRequest,
    check_auth,
    json_response,
    read_body,
)
from ._rest_application import ApplicationRoutes
from ._rest_channels import ChannelRoutes
from ._rest_guilds import GuildRoutes
from ._rest_interactions import InteractionRoutes

_log = logging.getLogger(__name__)


class DoubleApp(ApplicationRoutes, GuildRoutes, ChannelRoutes, InteractionRoutes):
    """Every route family, served by one aiohttp application on loopback."""

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=4 * MAX_REQUEST_BYTES)
        self._add_routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        self._http_base = f"http://{bound_host}:{bound_port}"
        self.api_base = self._http_base + API_PREFIX
        self.gateway_url = f"ws://{bound_host}:{bound_port}{GATEWAY_PATH}"
        _log.info("Discord double listening on %s", self._http_base)

    async def stop(self) -> None:
        for connection in list(self._connections):
            with contextlib.suppress(Exception):
                await connection.ws.close(code=1001, message=b"double stopping")
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _add_routes(self, app: web.Application) -> None:
        api: list[tuple[str, str, Handler]] = [
            ("GET", "/users/@me", self._get_me),
            ("POST", "/users/@me/channels", self._create_dm),
            ("GET", r"/users/{user_id:\d+}", self._get_user),
            ("GET", "/gateway", self._get_gateway),
            ("GET", "/gateway/bot", self._get_gateway_bot),
            ("GET", "/oauth2/applications/@me", self._get_application),
            ("GET", "/applications/@me", self._get_application),
            ("GET", r"/applications/{app_id:\d+}/commands", self._get_commands),
            ("PUT", r"/applications/{app_id:\d+}/commands", self._put_commands),
            ("GET", r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands", self._get_commands),
            ("PUT", r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands", self._put_commands),
            (
                "GET",
                r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands/permissions",
                self._get_guild_command_permissions,
            ),
            (
                "GET",
                r"/applications/{app_id:\d+}/guilds/{guild_id:\d+}/commands/{command_id:\d+}/permissions",
                self._get_command_permissions,
            ),
            ("POST", r"/interactions/{interaction_id:\d+}/{token}/callback", self._interaction_callback),
            ("POST", r"/webhooks/{app_id:\d+}/{token}", self._execute_webhook),
            ("GET", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._get_webhook_message),
            ("PATCH", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._edit_webhook_message),
            ("DELETE", r"/webhooks/{app_id:\d+}/{token}/messages/{message_id}", self._delete_webhook_message),
            ("GET", r"/guilds/{guild_id:\d+}", self._get_guild),
            ("GET", r"/guilds/{guild_id:\d+}/channels", self._get_guild_channels),
            ("GET", r"/guilds/{guild_id:\d+}/members/{user_id:\d+}", self._get_guild_member),
            ("GET", r"/channels/{channel_id:\d+}", self._get_channel),
            ("POST", r"/channels/{channel_id:\d+}/typing", self._typing),
            ("GET", r"/channels/{channel_id:\d+}/messages", self._list_channel_messages),
            ("POST", r"/channels/{channel_id:\d+}/messages", self._create_channel_message),
            ("GET", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._get_channel_message),
            ("PATCH", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._edit_channel_message),
            ("DELETE", r"/channels/{channel_id:\d+}/messages/{message_id:\d+}", self._delete_channel_message),
        ]
        for method, path, handler in api:
            app.router.add_route(method, API_PREFIX + path, handler)
        app.router.add_get(GATEWAY_PATH, self._gateway)
        app.router.add_get(r"/attachments/{channel_id:\d+}/{attachment_id:\d+}/{filename}", self._get_attachment)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.path.startswith(API_PREFIX + "/"):
            try:
                return await handler(request)
            except (web.HTTPNotFound, web.HTTPMethodNotAllowed):
                return self._unknown_route(request)

        record = RecordedRequest(
            method=request.method,
            path=request.raw_path[len(API_PREFIX) :],
            headers=dict(request.headers),
            json=None,
            files=[],
            time=time.monotonic(),
        )
        self.requests.append(record)
        if request.match_info.http_exception is not None:
            unknown = self._unknown_route(request)
            record.status = unknown.status
            return unknown
        response: web.StreamResponse
        try:
            body, uploads = await read_body(request)
            record.json = body
            record.files = [(u.filename, u.data) for u in uploads]
            request[BODY] = body
            request[UPLOADS] = uploads
            check_auth(request)
            response = await handler(request)
        except DiscordError as error:
            response = error.response()
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed):
            response = self._unknown_route(request)
        record.status = response.status
        if response.status >= 400:
            _log.info("%s %s -> %s", request.method, record.path, response.status)
        await self._notify()
        return response

    def _unknown_route(self, request: web.Request) -> web.Response:
        route = f"{request.method} {request.path_qs}"
        self.unknown_routes.append(route)
        _log.warning("Discord double has no route for %s", route)
        return json_response({"code": 0, "message": f"404: Not Found (double has no route {route})"}, status=404)
