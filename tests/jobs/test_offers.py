"""Use-once offers (the clicks that spend money): one use per offer, even under concurrent clicks; expiry."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.jobs.offers import Offers
from bot.store.jobs import AdmissionRefused, JobStore, NewJob
from tests.conftest import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(tmp_path: Path, clock: Clock) -> AsyncIterator[JobStore]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3", clock=clock)
    yield store
    await store.close()


def pending(prompt: str = "a fox") -> NewJob:
    return NewJob(model="", prompt=prompt, seed=3, user_id=1, guild_id=10, channel_id=100, locale="ja",
                  upload_limit_bytes=1234)


async def test_an_offer_is_used_once(store: JobStore, clock: Clock) -> None:
    offers = Offers(store, lifetime=60)
    offer = await offers.confirm(pending())
    assert (offer.prompt, offer.seed, offer.locale, offer.upload_limit_bytes) == ("a fox", 3, "ja", 1234)
    assert offer.expires_at == clock.now + 60 and offer.used_at is None

    assert await offers.use(offer.id) is True
    assert await offers.use(offer.id) is False
    assert await offers.use(offer.id, "cancelled") is False
    used = await offers.get(offer.id)
    assert used is not None and used.outcome == "used" and used.used_at == clock.now


async def test_concurrent_clicks_use_an_offer_once(store: JobStore, clock: Clock) -> None:
    offers = Offers(store)
    offer = await offers.confirm(pending())
    results = await asyncio.gather(*(offers.use(offer.id, "cancelled" if i % 3 else "used") for i in range(20)))
    assert sorted(results) == [False] * 19 + [True]


async def test_an_expired_offer_cannot_be_used_and_only_then_expires(store: JobStore, clock: Clock) -> None:
    offers = Offers(store, lifetime=60)
    offer = await offers.confirm(pending())
    assert await offers.use(offer.id, "expired") is False  # not yet
    clock.now += 60
    assert await offers.use(offer.id) is False
    assert await offers.use(offer.id, "cancelled") is False
    assert await offers.use(offer.id, "expired") is True
    assert await offers.use(offer.id, "expired") is False
    assert await offers.get(12345) is None


async def test_the_expiry_timer_tells_only_an_unused_offer(tmp_path: Path) -> None:
    store = await JobStore.open(tmp_path / "real-time.sqlite3")
    offers = Offers(store, lifetime=0.05)
    told: list[str] = []

    async def tell(name: str) -> None:
        told.append(name)

    unused = await offers.confirm(pending("unused"))
    used = await offers.confirm(pending("used"))
    assert await offers.use(used.id)
    offers.expire_later(unused, lambda: tell("unused"))
    offers.expire_later(used, lambda: tell("used"))
    async with asyncio.timeout(5):
        while not told:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    await offers.close()
    assert told == ["unused"]
    closed = await offers.get(unused.id)
    await store.close()
    assert closed is not None and closed.outcome == "expired"


async def test_retention_erases_the_prompts_of_closed_offers_only(store: JobStore, clock: Clock) -> None:
    offers = Offers(store, lifetime=60)
    closed = await offers.confirm(pending("closed"))
    still_open = await offers.confirm(pending("open"))
    assert await offers.use(closed.id, "cancelled")
    await store.erase_prompts(guild_id=10)
    assert [(await offers.get(o.id)).prompt for o in (closed, still_open)] == ["", "open"]  # type: ignore[union-attr]


async def test_a_members_open_offers_are_bounded_and_the_refusal_says_when_one_closes(
    store: JobStore, clock: Clock
) -> None:
    offers = Offers(store, lifetime=60, max_open=3)
    first = await offers.confirm(pending())
    clock.now += 10
    await offers.reroll(first.id, user_id=1, guild_id=11, channel_id=5, locale="en-US", model="")  # another server
    await offers.confirm(pending())
    with pytest.raises(AdmissionRefused) as refused:
        await offers.confirm(pending())
    assert refused.value.code == "too_many_offers"
    assert refused.value.params == {"open": 3, "limit": 3} and refused.value.retry_at == first.expires_at
    # Another member is not held back by this one's offers.
    await offers.confirm(NewJob(model="", prompt="a cat", seed=None, user_id=2, guild_id=10, channel_id=100))

    # An offer used (or expired) no longer counts.
    assert await offers.use(first.id)
    await offers.confirm(pending())
    clock.now += 60
    for _ in range(3):
        await offers.confirm(pending())


async def test_a_burst_of_offers_at_once_passes_the_bound_no_further(store: JobStore, clock: Clock) -> None:
    offers = Offers(store, max_open=3)
    results = await asyncio.gather(*(offers.confirm(pending()) for _ in range(10)), return_exceptions=True)
    assert sum(not isinstance(result, BaseException) for result in results) == 3
    assert all(isinstance(result, AdmissionRefused) for result in results if isinstance(result, BaseException))
