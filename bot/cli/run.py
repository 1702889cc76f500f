"""`python -m bot run` (the default): run the bot until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
import signal
import time

import discord

from bot.app import catalogue_of, create_bot
from bot.cli.common import (
    NETWORK_ERRORS,
    TOKEN_REFUSED,
    describe_connection_error,
    discord_login,
    one_process,
    open_database,
    until_stopped,
    version,
)
from bot.cli.preflight import database_problem, require, run_problems
from bot.config.settings import Settings
from bot.core.host import CHECK_HINT
from bot.core.retry import RetryPolicy
from bot.frontend.bot import VideoBot

log = logging.getLogger("bot")

#: Waits between attempts to reach Discord at start. Network failures are retried for ever (only
#: `delay` is used): a bot that is down should come back by itself when the network does.
# Bounded like every retry: a day of trying (a minute apart at most), then exit 1 for the supervisor.
DISCORD_START_RETRY = RetryPolicy(attempts=2_000, deadline=24 * 3600, base_delay=1.0, max_delay=60.0)


def startup_line(settings: Settings) -> str:
    """What is starting, with what: the first line of every run's log."""
    database = (settings.database_shown if settings.database_url is not None
                else f"{settings.database_path.absolute()} (SQLite)")
    env_file = settings.env_file.describe() if settings.env_file is not None else "not read"
    return (f"video-request-bot {version()} starting: database {database}; video service "
            f"{settings.video_api_base_url}; .env {env_file}; {settings.shards.describe()}")


async def run(settings: Settings) -> int:
    # A folder, file or port of the host's: one line, before anything opens. The database's first, then its
    # lock: a second bot beside a running one is told of that bot, not of the /metrics port that bot listens on.
    require(database_problem(settings))
    with one_process(settings):
        require(*run_problems(settings))
        return await _run(settings)


async def _run(settings: Settings) -> int:
    await open_database(settings)  # a database from a newer bot stops us here, not after logging in
    catalogue = catalogue_of(settings)  # and so does a bad models file
    stopping = asyncio.Event()
    bots: list[VideoBot] = []  # the bot of the current attempt
    closing: set[asyncio.Task[None]] = set()

    def stop(signame: str) -> None:
        # `docker stop` sends SIGTERM: close cleanly, in order, instead of dying mid-write.
        log.info("%s received; shutting down", signame)
        stopping.set()
        for bot in bots:
            task = asyncio.create_task(bot.close())
            closing.add(task)
            task.add_done_callback(closing.discard)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig.name)
    attempt = 0
    started = time.monotonic()
    while not stopping.is_set():
        try:
            # HTTP login first: one clear line while Discord is unreachable, and no bot to tear down.
            finished, _ = await until_stopped(discord_login(settings.discord_token, settings.http_timeout_seconds),
                                              stopping)
            if not finished or stopping.is_set():
                break
            # commands.Bot cannot start again after close(): a fresh one for every attempt.
            bot = create_bot(settings, catalogue)
            bots[:] = [bot]
            async with bot:
                await bot.start(settings.discord_token)
            break  # start() returns once the bot was closed
        except discord.LoginFailure:
            log.error("%s: check it in the developer portal", TOKEN_REFUSED)
            return 1
        except NETWORK_ERRORS as exc:
            if stopping.is_set():
                break
            attempt += 1
            delay = DISCORD_START_RETRY.delay(attempt)
            if not DISCORD_START_RETRY.allows(attempt, time.monotonic() - started, delay):
                log.error("cannot reach Discord (%s); gave up after %d attempts; %s", describe_connection_error(exc),
                          attempt, CHECK_HINT)
                return 1
            log.warning("cannot reach Discord (%s); retrying in %.0f s; %s", describe_connection_error(exc), delay,
                        CHECK_HINT)
            await until_stopped(asyncio.sleep(delay), stopping)
        except Exception:
            if stopping.is_set():
                log.debug("start interrupted by shutdown", exc_info=True)  # close() cut it short
                break
            raise
    await asyncio.gather(*closing)
    return 0
