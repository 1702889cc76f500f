"""Use-once offers: the clicks that spend money (a re-roll's Confirm, a /video's Generate) and their Cancel.

An offer is a row in the database (`offers`), so it survives a restart, and it is used with one UPDATE that
only an open row passes (`JobStore.use_offer`): a double click, or two members clicking at once, start one
job; every later click is told it was already started. Nothing here checks a spending rule: a used offer
becomes a `NewJob` that goes through `VideoRequests.record` and `send` like any /video.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import replace

from bot.core.tasks import BackgroundTasks
from bot.service.catalogue import VideoModel
from bot.service.validation import MAX_SEED, MIN_SEED
from bot.store.jobs import JobStore, NewJob, NewOffer, Offer, OfferOutcome

log = logging.getLogger(__name__)

#: How long a confirmation waits for its click, unless the settings say otherwise (OFFER_SECONDS).
OFFER_SECONDS = 60.0
#: The offers one member may have open at once, in every server and DM together. Past it a new one is refused
#: (nothing is spent, the member is told when the first closes) rather than the oldest closed: an open offer's
#: message still shows its buttons, and closing it behind the member's back would make them lie.
OPEN_OFFERS_PER_MEMBER = 3


def new_seed(model: VideoModel) -> int | None:
    """A re-roll's seed: a fresh random one when the model takes a seed (None lets the service pick)."""
    return random.randint(MIN_SEED, MAX_SEED) if model.supports_seed else None


class Offers:
    def __init__(self, store: JobStore, *, lifetime: float = OFFER_SECONDS, max_open: int = OPEN_OFFERS_PER_MEMBER
                 ) -> None:
        self._store = store
        self.lifetime = lifetime
        self.max_open = max_open
        # The store's clock: the one its UPDATE compares expiry with.
        self._clock = store.now
        self._timers = BackgroundTasks(log)

    async def reroll(self, source_job_id: int, *, user_id: int, guild_id: int | None, channel_id: int, locale: str,
                     model: str) -> Offer:
        """Offer `user_id` a re-roll of that job; the prompt is read from the job when the offer is used.

        Raises AdmissionRefused `too_many_offers` when the member has `max_open` offers open already."""
        return await self._store.add_offer(NewOffer(
            kind="reroll", source_job_id=source_job_id, model=model, user_id=user_id, guild_id=guild_id,
            channel_id=channel_id, locale=locale, expires_at=self._clock() + self.lifetime,
        ), max_open=self.max_open)

    async def confirm(self, request: NewJob) -> Offer:
        """Hold a /video until its requester clicks Generate; nothing is written as a job yet (refused as `reroll`
        is past `max_open`)."""
        return await self._store.add_offer(NewOffer(
            kind="confirm", model=request.model, prompt=request.prompt, seed=request.seed, user_id=request.user_id,
            guild_id=request.guild_id, channel_id=request.channel_id, locale=request.locale,
            upload_limit_bytes=request.upload_limit_bytes, expires_at=self._clock() + self.lifetime,
        ), max_open=self.max_open)

    async def get(self, offer_id: int) -> Offer | None:
        return await self._store.get_offer(offer_id)

    async def use(self, offer_id: int, outcome: OfferOutcome = "used") -> bool:
        """True for the one click that used the offer; False when it was used, cancelled or expired already."""
        return await self._store.use_offer(offer_id, outcome)

    async def shown(self, offer_id: int, message_id: int) -> None:
        """Its buttons are on this message: a click on any other is refused."""
        await self._store.offer_shown(offer_id, message_id)

    async def started(self, offer_id: int, job_id: int) -> None:
        await self._store.offer_started(offer_id, job_id)

    def expire_later(self, offer: Offer, on_expired: Callable[[], Awaitable[object]]) -> None:
        """At its expiry, close the offer if nobody used it and run `on_expired` (the final message).

        A timer lost to a restart only costs the final message: a late click still finds the offer expired.
        """
        self._timers.spawn(self._expire(offer, on_expired), f"offer-{offer.id}")

    async def _expire(self, offer: Offer, on_expired: Callable[[], Awaitable[object]]) -> None:
        await asyncio.sleep(max(0.0, offer.expires_at - self._clock()))
        # A moment late rather than early: the UPDATE only closes an offer whose time has passed.
        while not await self.use(offer.id, "expired"):
            current = await self.get(offer.id)
            if current is None or current.used_at is not None:
                return
            await asyncio.sleep(0.05)
        await on_expired()

    async def close(self) -> None:
        await self._timers.cancel_all()


def request_of(offer: Offer, *, user_id: int, prompt: str | None = None, seed: int | None = None,
               interaction_token: str | None = None, interaction_expires_at: float | None = None,
               upload_limit_bytes: int | None = None) -> NewJob:
    """The `NewJob` a used offer asks `record` for: a confirmation's own request, or a re-roll's new one."""
    request = NewJob(
        model=offer.model, prompt=offer.prompt, seed=offer.seed, user_id=user_id, guild_id=offer.guild_id,
        channel_id=offer.channel_id, locale=offer.locale,
        upload_limit_bytes=upload_limit_bytes or offer.upload_limit_bytes,
        interaction_token=interaction_token, interaction_expires_at=interaction_expires_at,
    )
    if offer.kind == "reroll":
        request = replace(request, prompt=prompt or "", seed=seed)
    return request
