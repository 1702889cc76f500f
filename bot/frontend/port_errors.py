"""discord.py's failures turned into the job code's port's (bot/jobs/port.py), in one place for every part of the
front end that implements the port (`DiscordDelivery`, `VideoBot.post_line`): bot/jobs knows no discord.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import discord

from bot.jobs.port import ChannelRefused, DiscordUnavailable

#: Discord did not take the call now: an error of its HTTP API, or of the connection to it (discord.py's HTTP layer
#: raises aiohttp's, its timeouts included). A bare OSError is left as it is: it may be the bot's own disk (an
#: upload's file), and the port's callers retry it as they retry DiscordUnavailable.
UNAVAILABLE: tuple[type[Exception], ...] = (discord.HTTPException, aiohttp.ClientError)
#: A channel gone, or closed to the bot: no retry helps until an admin changes it.
REFUSED: tuple[type[Exception], ...] = (discord.Forbidden, discord.NotFound)


@contextmanager
def discord_unavailable(*, channel_refusals: bool = False) -> Iterator[None]:
    """What fails inside leaves as DiscordUnavailable (its text the original's). `channel_refusals`: a 403 or 404
    leaves as ChannelRefused instead (a log line's channel, where no place is tried after it)."""
    try:
        yield
    except UNAVAILABLE as exc:
        if channel_refusals and isinstance(exc, REFUSED):
            raise ChannelRefused(str(exc)) from exc
        raise DiscordUnavailable(str(exc) or type(exc).__name__) from exc
