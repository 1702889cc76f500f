"""Community guardrails on the shared key: each limit, its refusal text, the race, the restart."""

import asyncio
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import get_args
from zoneinfo import ZoneInfo

import pytest

from bot.app import server_rules
from bot.community import windows
from bot.config.settings import Settings, read_settings
from bot.core.notices import RefusalCode
from bot.frontend import embeds
from bot.jobs.intake import VideoRequests
from bot.service.catalogue import BUILT_IN, DEFAULT_MODEL
from bot.service.client import VideoServiceClient
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import AdmissionRefused, JobState, JobStore, NewJob
from bot.store.jobs.meta import HOST_PAUSE
from tests.conftest import Clock

BASE_ENV = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k"}


def settings(**env: str) -> Settings:
    return read_settings({**BASE_ENV, "VIDEO_COOLDOWN_SECONDS": "0", "MAX_ACTIVE_JOBS_PER_USER": "100", **env})




def request(user_id: int = 1, guild_id: int = 10, channel_id: int = 100) -> NewJob:
    return NewJob(model=DEFAULT_MODEL.id, prompt="a fox", seed=None, user_id=user_id, guild_id=guild_id,
                  channel_id=channel_id, locale="en-US")


async def make_requests(
    tmp_path: Path, sim_client: VideoServiceClient, clock: Clock, **env: str
) -> tuple[VideoRequests, JobStore]:
    store = await JobStore.open(tmp_path / "jobs.sqlite3", clock=clock)
    s = settings(**env)
    return VideoRequests(store, sim_client, s, server_rules(store, s), catalogue=BUILT_IN, clock=clock), store


# -- the budget day --------------------------------------------------------------------------------


def test_the_budget_day_follows_the_configured_time_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    now = datetime(2026, 11, 21, 23, 30, tzinfo=tokyo).timestamp()
    start, end = windows.day_bounds(tokyo, now)
    assert datetime.fromtimestamp(start, tokyo) == datetime(2026, 11, 21, tzinfo=tokyo)
    assert datetime.fromtimestamp(end, tokyo) == datetime(2026, 11, 22, tzinfo=tokyo)
    start_utc, _ = windows.day_bounds(ZoneInfo("UTC"), now)
    assert start_utc != start


def test_a_daylight_saving_day_still_ends_at_midnight() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    now = datetime(2026, 10, 25, 12, 0, tzinfo=berlin).timestamp()  # a 25-hour day
    start, end = windows.day_bounds(berlin, now)
    assert end - start == 25 * 3600
    assert datetime.fromtimestamp(end, berlin).hour == 0


def test_months_are_calendar_months_in_the_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    now = datetime(2026, 12, 31, 23, 59, tzinfo=tokyo).timestamp()
    start, end = windows.month_bounds(tokyo, now)
    assert datetime.fromtimestamp(start, tokyo) == datetime(2026, 12, 1, tzinfo=tokyo)
    assert datetime.fromtimestamp(end, tokyo) == datetime(2027, 1, 1, tzinfo=tokyo)
    start, end = windows.month_bounds(tokyo, now, months_back=12)
    assert datetime.fromtimestamp(start, tokyo) == datetime(2025, 12, 1, tzinfo=tokyo)
    assert datetime.fromtimestamp(end, tokyo) == datetime(2026, 1, 1, tzinfo=tokyo)
    berlin = ZoneInfo("Europe/Berlin")  # October has a 25-hour day
    start, end = windows.month_bounds(berlin, datetime(2026, 10, 15, tzinfo=berlin).timestamp())
    assert end - start == 31 * 86400 + 3600


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
    text = embeds.refusal_text(refused.value, "en-US")
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
    assert "2 videos in progress (the limit is 2)" in embeds.refusal_text(refused.value, "en-US")
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
    assert refused.value.code == "host_guild_daily_cap"  # the environment's: the host's cap
    midnight = datetime(2026, 11, 22, tzinfo=tokyo).timestamp()
    assert refused.value.retry_at == midnight
    en = embeds.refusal_text(refused.value, "en-US")
    ja = embeds.refusal_text(refused.value, "ja")
    assert "¥0 of ¥500 left" in en and f"<t:{int(midnight)}:R>" in en
    assert "500円中、このサーバーの残り0円" in ja and f"<t:{int(midnight)}:R>" in ja
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
        AdmissionRefused("guild_daily_cap", 1_800_003_600.0, spent=1000, cap=1000, left=0),
        AdmissionRefused("guild_monthly_cap", 1_800_003_600.0, spent=1000, cap=1000, left=0),
        AdmissionRefused("member_daily_cap", 1_800_003_600.0, spent=300, cap=500, left=200),
        AdmissionRefused("member_monthly_cap", 1_800_003_600.0, spent=300, cap=500, left=200),
        AdmissionRefused("host_guild_daily_cap", 1_800_003_600.0, spent=1000, cap=1000, left=0),
        AdmissionRefused("host_guild_monthly_cap", 1_800_003_600.0, spent=1000, cap=1000, left=0),
        AdmissionRefused("host_member_daily_cap", 1_800_003_600.0, spent=300, cap=500, left=200),
        AdmissionRefused("host_member_monthly_cap", 1_800_003_600.0, spent=300, cap=500, left=200),
        AdmissionRefused("blocklist", None),
        AdmissionRefused("member_blocked", None),
        AdmissionRefused("paused", None),
        AdmissionRefused("server_not_allowed", None),
        AdmissionRefused("too_many_offers", 1_800_000_060.0, open=3, limit=3),
        AdmissionRefused("channel", None),
        AdmissionRefused("role", None, roles=[55, 56]),
    ]
    assert {r.code for r in refusals} == set(get_args(RefusalCode))
    for refusal in refusals:
        text = embeds.refusal_text(refusal, locale)
        assert text and "{" not in text
        if refusal.retry_at is not None:
            assert f"<t:{int(refusal.retry_at)}:R>" in text
    assert "<@&55>, <@&56>" in embeds.refusal_text(refusals[-1], locale)


# -- per-server quotas -------------------------------------------------------------------------------


async def test_a_member_quota_holds_at_its_edge_under_concurrent_requests_and_across_a_restart(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    clock = Clock(datetime(2026, 11, 21, 22, 0, tzinfo=tokyo).timestamp())
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.change(10, 900, {"member_daily_cap_yen": 500})  # two videos a day
    results = await asyncio.gather(*(requests.submit(request()) for _ in range(5)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, AdmissionRefused)]
    assert len(refused) == 3 and {r.code for r in refused} == {"member_daily_cap"}
    assert simulator.creates_received == 2 and simulator.spend == 500
    assert refused[0].params["left"] == 0 and refused[0].retry_at == datetime(2026, 11, 22, tzinfo=tokyo).timestamp()
    await requests.submit(request(user_id=2))  # another member has an allowance of their own
    await store.close()

    requests, store = await make_requests(tmp_path, sim_client, clock)  # the bot restarted
    with pytest.raises(AdmissionRefused) as again:
        await requests.submit(request())
    assert again.value.code == "member_daily_cap"
    # An admin's reset starts the member's window afresh.
    clock.now += 1
    await requests.rules.store.set_member(10, 1, 900, reset_quota=True)
    await requests.submit(request())
    assert simulator.creates_received == 4
    await store.close()


async def test_unknown_outcomes_and_unanswered_requests_count_against_a_quota(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.change(10, 900, {"member_monthly_cap_yen": 500})
    unknown = await requests.record(request())
    await store.transition(unknown.id, JobState.SUBMITTING)
    await store.transition(unknown.id, JobState.UNKNOWN)
    await requests.record(request())  # written down, not yet sent
    with pytest.raises(AdmissionRefused) as refused:
        await requests.record(request())
    assert refused.value.code == "member_monthly_cap" and refused.value.params["spent"] == 500
    await store.close()


async def test_a_server_monthly_cap_counts_every_member(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.change(10, 900, {"guild_monthly_cap_yen": 750})
    for user_id in (1, 2, 3):
        await requests.submit(request(user_id=user_id))
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request(user_id=4))
    assert refused.value.code == "guild_monthly_cap"
    await requests.rules.change(10, 900, {"guild_monthly_cap_yen": None})  # the cap removed
    await requests.submit(request(user_id=4))
    assert simulator.creates_received == 4
    await store.close()


async def test_a_blocked_member_and_a_blocklisted_prompt_are_refused_and_logged_without_the_term(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.store.add_term(10, "forbidden*fox", 900)
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(replace(request(), prompt="A ＦＯＲＢＩＤＤＥＮ red Fox"))  # full-width, mixed case
    assert refused.value.code == "blocklist"
    await requests.rules.store.set_member(10, 1, 900, blocked=True)
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "member_blocked"
    assert simulator.creates_received == 0 and simulator.key_info_requests == 0
    events = await requests.rules.store.recent_events(10, "refused")
    assert [e.details for e in events] == [{"code": "member_blocked"}, {"code": "blocklist"}]
    await store.close()


async def test_a_failed_job_counts_against_a_quota_until_support_credits_it(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.change(10, 900, {"member_daily_cap_yen": 250})
    job = await requests.submit(request())
    await store.transition(job.id, JobState.FAILED)
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "member_daily_cap"
    await store.mark_credited(job.id, guild_id=10, by_user_id=900)
    await requests.submit(request())
    assert simulator.creates_received == 2
    await store.close()


# -- the host's caps: the host's calendar and ledger, whatever a server sets ----------------------------------


async def test_the_hosts_caps_count_in_the_hosts_time_zone_whatever_a_server_sets(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    clock = Clock(datetime(2026, 11, 22, 0, 10, tzinfo=tokyo).timestamp())
    requests, store = await make_requests(tmp_path, sim_client, clock, MEMBER_DAILY_BUDGET_YEN="250",
                                          GUILD_DAILY_BUDGET_YEN="250")
    await requests.submit(request())
    tokyo_midnight = datetime(2026, 11, 23, tzinfo=tokyo).timestamp()
    # Each hour an admin moves the server to a zone whose midnight has just passed: the host's day stays Tokyo's.
    for hours_east in (9, 8, 7, 6, 5):
        await requests.rules.change(10, 900, {"timezone": f"Etc/GMT-{hours_east}"})
        with pytest.raises(AdmissionRefused) as refused:
            await requests.submit(request())
        assert refused.value.code == "host_guild_daily_cap" and refused.value.retry_at == tokyo_midnight
        clock.now += 3600
    assert simulator.spend == 250
    en = embeds.refusal_text(refused.value, "en-US")
    assert "the bot's host" in en and "¥0 of ¥250 left" in en
    assert "運営者" in embeds.refusal_text(refused.value, "ja")

    # A server's own cap counts in the server's own days (UTC+5 here), beside the host's (looser here).
    clock.now = tokyo_midnight + 60
    requests, own = await make_requests(tmp_path / "own", sim_client, clock, GUILD_DAILY_BUDGET_YEN="500")
    await requests.rules.change(10, 900, {"timezone": "Etc/GMT-5", "guild_daily_cap_yen": 250})
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request(user_id=2))
    assert refused.value.code == "guild_daily_cap"
    assert refused.value.retry_at == datetime(2026, 11, 23, tzinfo=ZoneInfo("Etc/GMT-5")).timestamp()
    await store.close()
    await own.close()


async def test_when_a_servers_cap_and_the_hosts_are_both_spent_the_refusal_names_the_one_that_lasts_longer(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    """The member can spend again only once both have reset: the refusal says when that is."""
    tokyo = ZoneInfo("Asia/Tokyo")
    clock = Clock(datetime(2026, 11, 21, 12, 0, tzinfo=tokyo).timestamp())
    requests, store = await make_requests(tmp_path, sim_client, clock, MEMBER_MONTHLY_BUDGET_YEN="250",
                                          BUDGET_TIMEZONE="Asia/Tokyo")
    await requests.rules.change(10, 900, {"timezone": "Asia/Tokyo", "member_daily_cap_yen": 250})
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    # The server's day ends tonight, the host's month on 1 December: the month is the answer.
    assert refused.value.code == "host_member_monthly_cap"
    assert refused.value.retry_at == datetime(2026, 12, 1, tzinfo=tokyo).timestamp()

    # The other way round: the server's month outlasts the host's day.
    requests, store2 = await make_requests(tmp_path / "other", sim_client, clock, MEMBER_DAILY_BUDGET_YEN="250",
                                           BUDGET_TIMEZONE="Asia/Tokyo")
    await requests.rules.change(10, 900, {"timezone": "Asia/Tokyo", "member_monthly_cap_yen": 250})
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "member_monthly_cap"
    assert refused.value.retry_at == datetime(2026, 12, 1, tzinfo=tokyo).timestamp()
    await store.close()
    await store2.close()


async def test_a_quota_reset_starts_the_servers_own_caps_afresh_never_the_hosts(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(datetime(2026, 11, 21, 12, 0, tzinfo=ZoneInfo("Asia/Tokyo")).timestamp())
    requests, store = await make_requests(tmp_path, sim_client, clock, MEMBER_DAILY_BUDGET_YEN="500")
    await requests.rules.change(10, 900, {"member_daily_cap_yen": 250})  # the server's own, stricter
    await requests.submit(request())
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "member_daily_cap"
    clock.now += 1
    await requests.rules.store.set_member(10, 1, 900, reset_quota=True)
    await requests.submit(request())  # the server's window starts again
    for _ in range(3):
        clock.now += 1
        await requests.rules.store.set_member(10, 1, 900, reset_quota=True)
        with pytest.raises(AdmissionRefused) as refused:
            await requests.submit(request())
        assert refused.value.code == "host_member_daily_cap" and refused.value.params["spent"] == 500
    assert simulator.spend == 500
    await store.close()


async def test_a_credit_frees_the_servers_own_caps_never_the_hosts(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock, MEMBER_DAILY_BUDGET_YEN="500")
    await requests.rules.change(10, 900, {"member_daily_cap_yen": 250})
    for _ in range(2):
        job = await requests.submit(request())
        await store.transition(job.id, JobState.FAILED)
        with pytest.raises(AdmissionRefused) as refused:
            await requests.submit(request())
        assert refused.value.code == "member_daily_cap"
        await store.mark_credited(job.id, guild_id=10, by_user_id=900)  # on a server admin's word
    # Both charges were credited: the server's cap is free, the host's still counts them.
    with pytest.raises(AdmissionRefused) as refused:
        await requests.submit(request())
    assert refused.value.code == "host_member_daily_cap" and refused.value.params["spent"] == 500
    assert simulator.creates_received == 2
    await store.close()


async def test_a_host_pause_refuses_video_everywhere_until_resumed(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await store.set_meta(HOST_PAUSE, "1")
    for guild_id in (10, 11):
        with pytest.raises(AdmissionRefused) as refused:
            await requests.submit(request(guild_id=guild_id))
        assert refused.value.code == "paused"
    await store.delete_meta(HOST_PAUSE)
    await requests.submit(request())
    assert simulator.creates_received == 1
    await store.close()


async def test_a_member_who_keeps_trying_is_logged_once_a_minute(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    requests, store = await make_requests(tmp_path, sim_client, clock)
    await requests.rules.store.set_member(10, 1, 900, blocked=True)
    for _ in range(5):
        with pytest.raises(AdmissionRefused):
            await requests.submit(request())
    assert len(await requests.rules.store.recent_events(10, "refused")) == 1
    clock.now += 61
    with pytest.raises(AdmissionRefused):
        await requests.submit(request())
    assert len(await requests.rules.store.recent_events(10, "refused")) == 2
    await store.close()
