"""A local stand-in for Discord's REST API and gateway, for end-to-end tests of the bot.

In-process: point discord.py at it with `discord.http.Route.BASE = double.api_base` and
`discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(double.gateway_url)`.
In a subprocess: run the unmodified bot with `env=subprocess_env(double, os.environ)`; the
`sitecustomize` module in this folder applies the same two patches at interpreter start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .server import DiscordDouble, DiscordError, InteractionRecord, RecordedRequest

__all__ = [
    "API_BASE_ENV",
    "GATEWAY_ENV",
    "DiscordDouble",
    "DiscordError",
    "InteractionRecord",
    "RecordedRequest",
    "subprocess_env",
]

API_BASE_ENV = "DISCORD_DOUBLE_API_BASE"
GATEWAY_ENV = "DISCORD_DOUBLE_GATEWAY"
_HERE = Path(__file__).resolve().parent


def subprocess_env(double: DiscordDouble, base_env: Mapping[str, str]) -> dict[str, str]:
    """`base_env` plus what makes a child Python process talk to `double` instead of Discord."""
    if not double.api_base:
        raise RuntimeError("start() the double before building a subprocess environment")
    env = dict(base_env)
    existing = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(_HERE) if not existing else os.pathsep.join([str(_HERE), existing])
    env[API_BASE_ENV] = double.api_base
    env[GATEWAY_ENV] = double.gateway_url
    return env
