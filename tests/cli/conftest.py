"""Stand-ins the command-line tests point `python -m bot` at: the Discord double, a refusing Discord, a silent
server."""

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import discord.http
import pytest
from aiohttp import web

from tests.cli.helpers import Barred, can_be_barred_as_root
from tests.discord_double import DiscordDouble


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    async with DiscordDouble(bot_public=False) as d:  # a public one with no server list does not start
        yield d


@pytest.fixture
async def token_refusing_discord() -> AsyncIterator[str]:
    """A Discord API that answers 401 to every login, as Discord does for a revoked token."""

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"message": "401: Unauthorized", "code": 0}, status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}/api/v10"
    await runner.cleanup()


@pytest.fixture
def route_base(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point this process's discord.py at another API base for one test."""

    def point(api_base: str) -> None:
        monkeypatch.setattr(discord.http.Route, "BASE", api_base)

    yield point


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


@pytest.fixture
def barred() -> Iterator[Barred]:
    """Make paths the bot's user cannot open, and run `python -m bot` as that user."""
    if os.geteuid() == 0 and not can_be_barred_as_root():
        pytest.skip("root, and no user namespace (unshare -r): root opens every file, so none can be barred")
    made = Barred()
    yield made
    made.release()
