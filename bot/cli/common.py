"""What the commands share: the version, reaching Discord, and the database's one-process rule."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Coroutine
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar

import aiohttp
import discord
import discord.http

from bot.app import open_store
from bot.config.settings import Settings
from bot.core.tasks import cancel_and_wait
from bot.store.instance_lock import single_process

_T = TypeVar("_T")

#: Failures that mean "Discord cannot be reached now", as opposed to a bad token or a bug.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    ConnectionError,
    socket.gaierror,
    TimeoutError,
    discord.GatewayNotFound,
    discord.DiscordServerError,
)
TOKEN_REFUSED = "Discord refused DISCORD_TOKEN"


def version() -> str:
    try:
        return metadata.version("video-request-bot")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def describe_connection_error(error: BaseException) -> str:
    """Why a connection failed, in the operator's words; looks through the chain of causes."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (aiohttp.ClientSSLError, ssl.SSLError)):
            return "TLS failed"
        if isinstance(current, socket.gaierror):
            return "the name did not resolve in DNS"
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, TimeoutError):  # asyncio's and aiohttp's timeouts included
            return "timed out"
        if isinstance(current, aiohttp.ClientConnectorError):
            current = current.os_error  # the socket's own error says which
            continue
        if isinstance(current, aiohttp.ServerDisconnectedError):
            return "the server closed the connection"
        current = current.__cause__ or current.__context__
    if isinstance(error, discord.HTTPException):
        return f"HTTP {error.status}"
    if isinstance(error, discord.GatewayNotFound):
        return "no gateway address"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__


@dataclass(frozen=True)
class DiscordLogin:
    user: str  # the bot's user name
    bot_public: bool  # the application's "Public Bot" switch


async def discord_login(token: str, seconds: float) -> DiscordLogin:
    """Log in over HTTP only (GET /users/@me, then the application as discord.py reads it at login:
    GET /oauth2/applications/@me) and close: a read-only proof that the token works, and whether the application
    is public.

    Raises discord.LoginFailure for a refused token.
    """
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        async with asyncio.timeout(seconds):
            user = await http.static_login(token.strip())
            application = await http.application_info()
    finally:
        await http.close()
    # Not said: taken as public, the side that refuses.
    return DiscordLogin(user["username"], bool(application.get("bot_public", True)))


async def until_stopped(work: Coroutine[Any, Any, _T], stopping: asyncio.Event) -> tuple[bool, _T | None]:
    """Run `work` unless `stopping` is set first (then cancel it): (finished, result)."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        return True, task.result()
    await cancel_and_wait(task)
    return False, None


async def open_database(settings: Settings) -> int:
    """Open (and migrate) the database before anything touches the network; returns its schema version."""
    store = await open_store(settings)
    try:
        return await store.schema_version()
    finally:
        await store.close()


def one_process(settings: Settings) -> contextlib.AbstractContextManager[None]:
    """SQLite serves one process: hold its file's lock. PostgreSQL serves several: nothing to hold."""
    if settings.database_url is not None:
        return contextlib.nullcontext()
    return single_process(settings.database_path, setting=settings.database_setting)
