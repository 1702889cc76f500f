"""A local stand-in for Discord's REST API and gateway, for the demo and the end-to-end tests.

Shipped in the package for `python -m bot demo` only: nothing the bot imports at start-up reaches it,
and it takes effect in a child process only when the launcher asks (see `subprocess_env`).

In-process: point discord.py at it with `discord.http.Route.BASE = double.api_base` and
`discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(double.gateway_url)`.
In a subprocess: run the unmodified bot with `env=subprocess_env(double, os.environ)`; the
`sitecustomize` module in `hook/` applies the same two patches at interpreter start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ._http import DiscordError, RecordedRequest
from ._state import InteractionRecord
from .server import DiscordDouble

__all__ = [
    "API_BASE_ENV",
    "GATEWAY_ENV",
    "HOOK_DIR",
    "DiscordDouble",
    "DiscordError",
    "InteractionRecord",
    "RecordedRequest",
    "bot_process_env",
    "subprocess_env",
    "without_bot_settings",
]

API_BASE_ENV = "DISCORD_DOUBLE_API_BASE"
GATEWAY_ENV = "DISCORD_DOUBLE_GATEWAY"
#: The folder a child process gets on PYTHONPATH: it holds `sitecustomize.py` and nothing else, so the
#: double's own modules never become importable top-level names in the bot's process.
HOOK_DIR = Path(__file__).resolve().parent / "hook"


def subprocess_env(double: DiscordDouble, base_env: Mapping[str, str]) -> dict[str, str]:
    """`base_env` plus what makes a child Python process talk to `double` instead of Discord."""
    if not double.api_base:
        raise RuntimeError("start() the double before building a subprocess environment")
    env = dict(base_env)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(HOOK_DIR) if not existing else os.pathsep.join([str(HOOK_DIR), existing])
    env[API_BASE_ENV] = double.api_base
    env[GATEWAY_ENV] = double.gateway_url
    return env


def without_bot_settings(env: Mapping[str, str], root: Path) -> dict[str, str]:
    """`env` without any DISCORD_ or VIDEO_ variable (a host's own token or key must never reach a bot run against
    the double), with the checkout at `root` importable."""
    kept = {key: value for key, value in env.items() if not key.startswith(("DISCORD_", "VIDEO_"))}
    kept["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), kept.get("PYTHONPATH")]))
    return kept


def bot_process_env(
    double: DiscordDouble, base_env: Mapping[str, str], *, token: str, service_url: str, api_key: str, workdir: Path,
    **settings: str,
) -> dict[str, str]:
    """`subprocess_env` plus what every `python -m bot` run against `double` needs: its token and the double's
    server, the video service and its key, and its files (database, videos, heartbeat) in `workdir`; then
    `settings` (the caller's own, e.g. LOG_LEVEL) over them."""
    env = subprocess_env(double, base_env)
    env.update(
        DISCORD_TOKEN=token,
        DISCORD_GUILD_ID=str(double.guild_id),
        VIDEO_API_BASE_URL=service_url,
        VIDEO_API_KEY=api_key,
        DATABASE_PATH=str(workdir / "bot.sqlite3"),
        VIDEO_STORAGE_DIR=str(workdir / "videos"),
        HEARTBEAT_PATH=str(workdir / "heartbeat"),
    )
    env.update(settings)
    return env
