"""Community guardrails on the shared key: each limit, its refusal text, the race, the restart."""

import asyncio
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot import guardrails, views
from bot.models import BUILT_IN, DEFAULT_MODEL
from bot.settings import Settings, read_settings
from bot.simulator import VideoServiceSimulator
from bot.store import AdmissionRefused, JobState, JobStore, NewJob
from bot.video_client import VideoServiceClient
from bot.video_requests import VideoRequests

BASE_ENV = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k"}


def settings(**env: str) -> Settings:
    return read_settings({**BASE_ENV, "VIDEO_COOLDOWN_SECONDS": "0", "MAX_ACTIVE_JOBS_PER_USER": "100", **env})


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def request(user_id: int = 1, guild_id: int = 10, channel_id: int = 100) -> NewJob:
    return NewJob(model=DEFAULT_MODEL.id, prompt="a fox", seed=None, user_id=user_id, guild_id=guild_id,
                  channel_id=channel_id, locale="en-US")


async def make_requests(
    tmp_path: Path, sim_client: VideoServiceClient, clock: Clock, **env: str
) -> tuple[VideoRequests, JobStore]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3", clock=clock)
    return VideoRequests(store, sim_client, settings(**env), catalogue=BUILT_IN, clock=clock), store


# -- places: channels and roles --------------------------------------------------------------------


def test_allowed_channels_and_required_role() -> None:
    s = settings(ALLOWED_CHANNEL_IDS="100,101", REQUIRED_ROLE_ID="55")
    guardrails.check_place(s, 100, [55])
    with pytest.raises(AdmissionRefused) as refused:
        guardrails.check_place(s, 102, [55])
    assert refused.value.code == "channel"
    with pytest.raises(AdmissionRefused) as refused:
        guardrails.check_place(s, 101, [54])
    assert refused.value.code == "role"
    guardrails.check_place(settings(), 999, [])  # defaults: everywhere, everyone


# -- the budget day --------------------------------------------------------------------------------


def test_the_budget_day_follows_the_configured_time_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    now = datetime(2026, 11, 21, 23, 30, tzinfo=tokyo).timestamp()
    start, end = guardrails.day_bounds(settings(), now)
    assert datetime.fromtimestamp(start, tokyo) == datetime(2026, 11, 21, tzinfo=tokyo)
    assert datetime.fromtimestamp(end, tokyo) == datetime(2026, 11, 22, tzinfo=tokyo)
    start_utc, _ = guardrails.day_bounds(settings(BUDGET_TIMEZONE="UTC"), now)
    assert start_utc != start


def test_a_daylight_saving_day_still_ends_at_midnight() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 10, 25, 12, 0, tzinfo=berlin).timestamp()  # a 25-hour day
    start, end = guardrails.day_bounds(settings(BUDGET_TIMEZONE="Europe/Berlin"), now)
    assert end - start == 25 * 3600
    assert datetime.fromtimestamp(end, berlin).hour == 0


# -- limits checked with the row write -------------------------------------------------------------


async def test_cooldown_refuses_then_allows(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock, VIDEO_COOLDOWN_SECONDS="60")
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "cooldown" and refused.value.retry_at == clock.now + 60
    text = views.refusal_text(refused.value, "en-US")
    assert f"<t:{int(clock.now + 60)}:R>" in text and "Nothing was spent" in text
    assert simulator.creates_received == 1
    await requests.submit(request(user_id=2))  # another member is not held back
    clock.now += 61
    await requests.submit(request())
    assert simulator.creates_received == 3
    await store.close()


async def test_active_job_limit(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock, MAX_ACTIVE_JOBS_PER_USER="2")
    first = await requests.submit(request())
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "too_many_active"
    assert "2 videos in progress (the limit is 2)" in views.refusal_text(refused.value, "en-US")
    # A finished job frees its slot.
    await store.transition(first.id, JobState.FAILED)
    await requests.submit(request())
    assert simulator.creates_received == 3
    await store.close()


async def test_two_requests_at_the_same_instant_cannot_both_pass_a_limit_of_one(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock, MAX_ACTIVE_JOBS_PER_USER="1")
    results = await asyncio.gather(*(requests.submit(request()) for _ in range(4)), return_exceptions=True)
    accepted = [r for r in results if not isinstance(r, BaseException)]
    assert len(accepted) == 1
    assert all(isinstance(r, AdmissionRefused) for r in results if isinstance(r, BaseException))
    assert simulator.creates_received == 1
    await store.close()


async def test_daily_cap_holds_across_a_restart_and_resets_the_next_day(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    clock = Clock(datetime(2026, 11, 21, 22, 0, tzinfo=tokyo).timestamp())
    env = {"GUILD_DAILY_BUDGET_YEN": "500"}
    requests, store = await make_requests(tmp_path, sim_client, clock, **env)
    await requests.submit(request(user_id=1))
    await requests.submit(request(user_id=2))
    await store.close()

    requests, store = await make_requests(tmp_path, sim_client, clock, **env)  # the bot restarted
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request(user_id=3))
    assert refused.value.code == "guild_daily_cap"
    midnight = datetime(2026, 11, 22, tzinfo=tokyo).timestamp()
    assert refused.value.retry_at == midnight
    en = views.refusal_text(refused.value, "en-US")
    ja = views.refusal_text(refused.value, "ja")
    assert "¥500 of ¥500" in en and f"<t:{int(midnight)}:R>" in en
    assert "500円中500円" in ja and f"<t:{int(midnight)}:R>" in ja
    await requests.submit(request(user_id=3, guild_id=11))  # another server has its own cap
    assert simulator.creates_received == 3

    clock.now = midnight + 60
    await requests.submit(request(user_id=3))
    assert simulator.creates_received == 4
    await store.close()


async def test_refusals_cost_nothing_and_send_nothing(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock, ALLOWED_CHANNEL_IDS="100",
                                          REQUIRED_ROLE_ID="55")
    for bad, roles in ((request(channel_id=101), (55,)), (request(), ())):
        with pytest.raises(AdmissionRefused):
            await requests.submit(bad, roles)
    assert simulator.creates_received == 0 and simulator.key_info_requests == 0 and simulator.spend == 0
    assert await store.ledger() == (0, 0)
    await store.close()


@pytest.mark.parametrize("locale", ["en-US", "ja"])
def test_every_refusal_has_a_message_in_both_languages(locale: str) -> None:
    refusals = [
        AdmissionRefused("cooldown", 1_800_000_060.0),
        AdmissionRefused("too_many_active", None, active=2, limit=2),
        AdmissionRefused("guild_daily_cap", 1_800_003_600.0, spent=1000, cap=1000),
        AdmissionRefused("channel", None),
        AdmissionRefused("role", None, role=55),
    ]
    for refusal in refusals:
        text = views.refusal_text(refusal, locale)
        assert text and "{" not in text
        if refusal.retry_at is not None:
            assert f"<t:{int(refusal.retry_at)}:R>" in text
    assert "<@&55>" in views.refusal_text(refusals[-1], locale)
