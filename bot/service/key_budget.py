"""The key's spend and budget (`GET /key/info`), read once for every caller at a time and kept a few seconds.

`/key/info` is on the key's rate limit, which the creates and polls of every server need. Without this, each
/balance was a read of its own: one member repeating it spent the key's rate for everyone. Here a read on its
way is shared by every caller that comes meanwhile (single flight), and its answer is kept KEY_INFO_FRESH_SECONDS
for the readers that can take a figure that old (/balance, the budget alerts). The check before a create asks for
a fresh figure (`max_age=0`): it shares a read on its way, never an older answer. A create of this process that may
have been charged makes every answer so far out of date (`spend_moved`): a member's /balance right after their
/video shows its charge.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from bot.service.answers import KeyInfo
from bot.service.client import VideoServiceClient

#: How long an answer of `/key/info` serves /balance and the budget alerts. The spend moves only when a create is
#: accepted (this process's own creates drop the answer at once), and a member cannot tell a figure 5 s old from a
#: new one; one member repeating /balance then costs at most one read per 5 s (12 a minute) on the key's rate limit,
#: whatever they do. A failed read is kept as long, so an outage is not read again for each /balance either.
KEY_INFO_FRESH_SECONDS = 5.0


class KeyBudget:
    """One shared reader of the key's budget: `read` joins a read on its way, or answers from one recent enough."""

    def __init__(self, client: VideoServiceClient, *, fresh_for: float = KEY_INFO_FRESH_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._fresh_for = fresh_for
        self._clock = clock
        self._read: asyncio.Future[KeyInfo] | None = None
        self._answered_at = -math.inf  # when `_read` ended (its answer's age counts from then)

    @property
    def masked_key(self) -> str:
        return self._client.masked_key

    async def read(self, *, max_age: float | None = None) -> KeyInfo:
        """The key's figures, at most `max_age` seconds old (KEY_INFO_FRESH_SECONDS unless given; 0: a read that
        ends after this call began). Raises what the client's `key_info` raises."""
        limit = self._fresh_for if max_age is None else max_age
        read = self._read
        if read is None or (read.done() and self._clock() - self._answered_at >= limit):
            read = self._read = asyncio.ensure_future(self._client.key_info())
            read.add_done_callback(self._answered)
        # Shielded: a caller that gives up (its interaction gone) does not cancel the read the others wait for.
        return await asyncio.shield(read)

    def spend_moved(self) -> None:
        """A create of this process was answered (and may have been charged): the answer kept, and a read on its way
        (which the service may have answered before the charge), serve no caller from now on."""
        self._read = None

    def _answered(self, read: asyncio.Future[KeyInfo]) -> None:
        if read is self._read:  # not a read dropped by `spend_moved` meanwhile
            self._answered_at = self._clock()
