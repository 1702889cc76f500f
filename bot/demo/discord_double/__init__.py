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

from .server import DiscordDouble, DiscordError, InteractionRecord, RecordedRequest

__all__ = [
    "API_BASE_ENV",
    "GATEWAY_ENV",
    "HOOK_DIR",
    "DiscordDouble",
    "DiscordError",
    "InteractionRecord",
    "RecordedRequest",
    "subprocess_env",
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
