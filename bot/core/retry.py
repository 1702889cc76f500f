"""The one retry policy of the bot, and the bounds of every loop that retries.

Every retry, whether of a create refused with 429/5xx, a status poll, a download, an upload to
Discord or a notice, is decided by a `RetryPolicy`: a capped number of attempts, jittered
exponential backoff, the server's `Retry-After` when it sends one, and a total deadline. After
the cap the caller reaches a final state and tells the requester; no loop retries forever.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

log = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all (the first included), none started after `deadline` seconds."""

    attempts: int
    deadline: float
    base_delay: float = 1.0
    max_delay: float = 30.0
    jitter: float = 0.2  # each backoff is scaled by a random factor in [1 - jitter, 1 + jitter]

    def __post_init__(self) -> None:
        # An infinite or NaN deadline, or a non-integer count such as inf, would never give up.
        if not isinstance(self.attempts, int) or not math.isfinite(self.deadline):
            raise ValueError(f"unbounded retry policy: {self}")
        if self.attempts < 1 or self.deadline <= 0 or self.base_delay < 0 or self.max_delay < self.base_delay:
            raise ValueError(f"unbounded or empty retry policy: {self}")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            # The server said when; never longer than the whole deadline.
            return min(max(0.0, retry_after), self.deadline)
        backoff = min(self.max_delay, self.base_delay * 2 ** max(0, attempt - 1))
        return float(backoff * random.uniform(1 - self.jitter, 1 + self.jitter))

    def allows(self, attempt: int, elapsed: float, delay: float = 0.0) -> bool:
        """May attempt number `attempt + 1` start, `delay` seconds from now, `elapsed` after the first?"""
        return attempt < self.attempts and elapsed + delay <= self.deadline


NO_RETRY = RetryPolicy(attempts=1, deadline=1.0)


async def retrying(
    policy: RetryPolicy,
    call: Callable[[], Awaitable[_T]],
    *,
    retry_on: tuple[type[BaseException], ...],
    what: str,
    retry_after: Callable[[BaseException], float | None] = lambda exc: None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> _T:
    """Run `call` until it succeeds or the policy gives up; the last error is raised then."""
    started = clock()
    attempt = 0
    while True:
        attempt += 1
        try:
            return await call()
        except retry_on as exc:
            delay = policy.delay(attempt, retry_after(exc))
            if not policy.allows(attempt, clock() - started, delay):
                raise
            log.info("%s: %s; retrying in %.1f s (attempt %d of %d)", what, exc, delay, attempt + 1, policy.attempts)
            await sleep(delay)


# -- the bot's policies
# A create refused with 429/5xx, or whose connection was never made, was not charged: a few tries
# within a minute, then the requester is told the service is busy.
CREATE_RETRY = RetryPolicy(attempts=4, deadline=60.0, base_delay=1.0, max_delay=20.0)
# Free reads (key info, a status poll the caller wants answered now): quick, then give up.
READ_RETRY = RetryPolicy(attempts=3, deadline=30.0, base_delay=1.0, max_delay=10.0)

#: Recording an accepted (charged) job when the database fails: keep trying well within the service's
#: retention, then tell the requester the job id for support.
RECORD_RETRY = RetryPolicy(attempts=12, deadline=10 * 60, base_delay=1.0, max_delay=60.0)
#: A completed job's next step when the database fails (recording its download or its post): for up to an hour,
#: then the job waits where the database has it for the next start. A post already made is never made again here.
DATABASE_RETRY = RetryPolicy(attempts=48, deadline=60 * 60, base_delay=5.0, max_delay=80.0)
#: Downloading a finished video: a failing body or a refusal ends the job failed after these.
DOWNLOAD_RETRY = RetryPolicy(attempts=6, deadline=30 * 60, base_delay=5.0, max_delay=5 * 60)
#: Uploading a video to Discord (channel, then DM): after these the video is undeliverable (kept for /status).
UPLOAD_RETRY = RetryPolicy(attempts=5, deadline=30 * 60, base_delay=5.0, max_delay=5 * 60)
#: One round of telling a requester (interaction, channel, DM), against Discord's passing failures.
NOTICE_RETRY = RetryPolicy(attempts=3, deadline=60.0, base_delay=2.0, max_delay=20.0)
#: Rounds of the above, a sweep apart and counted on the job across restarts, before the bot gives up.
NOTICE_ROUNDS = 5
