"""Point discord.py at the local Discord double when the launcher asks for it.

Python imports `sitecustomize` at start-up from the first folder on sys.path that has one;
only the demo launcher and the tests put this folder on PYTHONPATH (through
`bot.demo.discord_double.subprocess_env`) and set DISCORD_DOUBLE_API_BASE (and optionally
DISCORD_DOUBLE_GATEWAY), so the bot runs unmodified against the double. The bot's own start-up
never does: this folder is not a package and nothing imports it. Without those variables, or
without discord.py installed, this module does nothing.
"""

from __future__ import annotations

import os
import sys


def _patch_discord() -> None:
    api_base = os.environ.get("DISCORD_DOUBLE_API_BASE")
    gateway = os.environ.get("DISCORD_DOUBLE_GATEWAY")
    if not api_base and not gateway:
        return
    try:
        import discord.gateway
        import discord.http
        import yarl
    except ImportError:
        return
    if api_base:
        discord.http.Route.BASE = api_base.rstrip("/")
    if gateway:
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)


try:
    _patch_discord()
except Exception as error:  # start-up must never fail because of a test hook
    print(f"discord double sitecustomize: not patched: {error!r}", file=sys.stderr)
