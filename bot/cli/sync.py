"""`python -m bot sync`: log in, register the slash commands with Discord, and exit."""

from __future__ import annotations

import logging

import discord

from bot.app import catalogue_of, create_bot
from bot.cli.common import (
    NETWORK_ERRORS,
    TOKEN_REFUSED,
    describe_connection_error,
    discord_login,
    one_process,
    open_database,
)
from bot.cli.preflight import database_problem, require
from bot.config.settings import Settings
from bot.core.host import CHECK_HINT

log = logging.getLogger("bot")


async def sync(settings: Settings) -> int:
    require(database_problem(settings))
    # Syncing starts the bot's set-up, which recovers half-done requests: never beside a running bot.
    with one_process(settings):
        return await _sync(settings)


async def _sync(settings: Settings) -> int:
    await open_database(settings)
    catalogue = catalogue_of(settings)
    try:
        # HTTP login first, within the HTTP timeout as `run` does: a Discord that never answers is one line in
        # seconds, not minutes of silence inside discord.py's own login (which has no time limit of ours).
        await discord_login(settings.discord_token, settings.http_timeout_seconds)
        bot = create_bot(settings, catalogue, force_sync=True)
        async with bot:
            await bot.login(settings.discord_token)  # setup_hook runs here and syncs
    except discord.LoginFailure:
        log.error("%s: check it in the developer portal", TOKEN_REFUSED)
        return 1
    except NETWORK_ERRORS as exc:
        log.error("cannot reach Discord (%s); %s", describe_connection_error(exc), CHECK_HINT)
        return 1
    return 0
