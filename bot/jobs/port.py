"""The job code's port to Discord: what the worker and the chores ask of it, and the failures they act on.

The front end implements it (`DiscordDelivery` in bot/frontend/delivery.py, `VideoBot.post_line`) and turns
discord.py's exceptions into the ones here (bot/frontend/port_errors.py, one translation for both), so nothing
in bot/jobs imports discord: the benchmark's sink and the tests' recording deliverer stand in for it with no
Discord at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bot.core.errors import BotError
from bot.core.notices import Notice
from bot.store.jobs import Job


class Undeliverable(BotError):
    """Neither the channel nor the requester's DMs would take the video; retrying will not help."""


class DiscordUnavailable(Exception):
    """Discord did not take a message or an upload now (an error of its HTTP API, or a lost connection to it):
    trying again later may work. Its text is the original error's."""


class ChannelRefused(Exception):
    """A channel refuses the bot for good (gone, or no access): no retry helps until an admin changes it."""


@dataclass(frozen=True)
class Delivery:
    channel_id: int
    message_id: int
    compressed: bool = False
    via_dm: bool = False


class Deliverer(Protocol):
    """Where finished videos and news about jobs go (Discord in production, a sink in benchmarks)."""

    async def deliver(self, job: Job, video: Path) -> Delivery:
        """Post the video; raise Undeliverable when no place takes it, DiscordUnavailable (or anything else) to
        retry later."""
        ...

    async def announce(self, job: Job, event: Notice, *, via_interaction: bool = False) -> None:
        """Tell the requester about `event`; raise Undeliverable when no place takes it, DiscordUnavailable when
        Discord could not take it now.

        `via_interaction`: try the original interaction first while its token lives.
        """
        ...

    async def show_progress(
        self, job: Job, *, position: int | None = None, ready_at: float | None = None
    ) -> None:
        """Refresh the original `/video` reply while its interaction token lives.

        `position` (its place among waiting jobs) and `ready_at` (its likely ready time) are shown when given.
        """
        ...


#: Posts one line into a channel (the bot's HTTP API: no gateway shard needed); raises ChannelRefused when the
#: channel refuses the bot for good, DiscordUnavailable when Discord could not take it now.
LinePoster = Callable[[int, str], Awaitable[None]]
