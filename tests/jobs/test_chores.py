"""The chores beside the jobs: log lines posted once and in order, one budget alert per fall, prompts forgotten."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from bot.app import server_rules
from bot.community.server_rules import ServerRules
from bot.config.settings import Settings, read_settings
from bot.frontend.settings_embeds import event_line
from bot.jobs.chores import Chores, Housekeeping
from bot.jobs.port import ChannelRefused, DiscordUnavailable
from bot.service.client import VideoServiceClient
from bot.service.key_budget import KeyBudget
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import JobState, JobStore, NewJob, NewOffer, StoreUnavailable
from bot.store.leases import Lease
from tests.conftest import Clock, StoreOpener

GUILD = 10
LOG = 500




class Poster:
    """Records what would be posted; `refuse` makes Discord answer the next post with that error instead."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []
        self.refuse: Exception | None = None

    async def __call__(self, channel_id: int, text: str) -> None:
        if self.refuse is not None:
            error, self.refuse = self.refuse, None
            raise error
        self.lines.append((channel_id, text))


def http_error(status: int) -> Exception:
    """What the front end's poster raises when Discord answers with this status (bot/jobs/port.py)."""
    return ChannelRefused(f"{status}") if status in (403, 404) else DiscordUnavailable(f"{status}")


def settings(**env: str) -> Settings:
    return read_settings({"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k",
                          **env})


@pytest.fixture
async def parts(tmp_path: Path, sim_client: VideoServiceClient):  # type: ignore[no-untyped-def]
    clock = Clock(1_800_000_000.0)
    store = await JobStore.open(tmp_path / "bot.sqlite3", clock=clock)
    s = settings(PROMPT_RETENTION_DAYS="30")
    rules = server_rules(store, s)
    poster = Poster()
    chores = Housekeeping(store, rules, sim_client, s, poster, event_text=event_line, chores=Chores(), clock=clock,
                          key_budget=KeyBudget(sim_client, clock=clock))
    yield store, rules, chores, poster, clock
    await store.close()


Parts = tuple[JobStore, ServerRules, Housekeeping, Poster, Clock]


async def test_events_are_posted_once_in_order_only_where_a_log_channel_is_set(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.store.add_event(GUILD, "refused", user_id=1, details={"code": "blocklist"})  # before a channel
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "member_daily_cap"})
    await rules.store.add_event(11, "refused", user_id=3, details={"code": "blocklist"})  # no channel there

    assert await chores.post_events() == 3
    assert [channel for channel, _ in poster.lines] == [LOG, LOG, LOG]
    texts = [text for _, text in poster.lines]
    assert "refused (`blocklist`)" in texts[0] and "Log channel: off → <#500>" in texts[1]
    assert "refused (`member_daily_cap`)" in texts[2]
    assert await chores.post_events() == 0  # posted once
    assert len(poster.lines) == 3


async def test_a_log_line_discord_cannot_take_now_waits_and_keeps_the_order(parts: Parts) -> None:
    _store, rules, chores, poster, clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG, "language": "ja"})
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "blocklist"})
    poster.refuse = http_error(503)
    assert await chores.post_events() == 0  # the first line failed: the later ones wait behind it
    assert await chores.post_events() == 3  # two settings changes and the refusal, in order
    # In the server's language, Japanese here.
    assert "ログチャンネル" in poster.lines[0][1] and "言語" in poster.lines[1][1]
    assert "拒否（`blocklist`）" in poster.lines[2][1]

    # A channel closed to the bot: the line is dropped, not retried for ever.
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "blocklist"})
    poster.refuse = http_error(403)
    assert await chores.post_events() == 0
    assert await chores.post_events() == 0
    # A line Discord keeps failing for an hour is given up too.
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "blocklist"})
    poster.refuse = http_error(500)
    clock.now += 3601
    assert await chores.post_events() == 0
    assert await chores.post_events() == 0


async def test_a_budget_alert_is_posted_once_until_the_budget_recovers(
    parts: Parts, simulator: VideoServiceSimulator
) -> None:
    _store, rules, chores, poster, clock = parts
    checks = Chores().budget_check_seconds
    await rules.change(GUILD, 900, {"log_channel_id": LOG, "budget_alert_yen": 5_000})
    await chores.check_budget()
    assert await rules.store.recent_events(GUILD, "budget_low") == []  # 10,000 left

    simulator.spend = 6_000  # 4,000 left: below the threshold
    clock.now += checks
    await chores.check_budget()
    clock.now += checks
    await chores.check_budget()
    [alert] = await rules.store.recent_events(GUILD, "budget_low")
    assert alert.details == {"left": 4_000, "threshold": 5_000}
    await chores.post_events()
    assert "¥4,000 left" in poster.lines[-1][1]

    simulator.spend = 1_000  # recovered (a budget raise); the next fall alerts again
    clock.now += checks
    await chores.check_budget()
    simulator.spend = 9_000
    clock.now += checks
    await chores.check_budget()
    assert len(await rules.store.recent_events(GUILD, "budget_low")) == 2


async def test_old_prompts_and_a_left_servers_prompts_are_erased_but_the_ledger_stays(parts: Parts) -> None:
    store, _rules, chores, _poster, clock = parts

    async def job(guild_id: int, prompt: str) -> int:
        new = NewJob(model="m", prompt=prompt, seed=None, user_id=1, guild_id=guild_id, channel_id=1)
        row = await store.add_submission(new)
        await store.transition(row.id, JobState.SUBMITTING)
        await store.mark_accepted(row.id, f"vid-{row.id}", 250, clock.now)
        await store.transition(row.id, JobState.FAILED)
        return row.id

    old = await job(GUILD, "an old fox")
    clock.now += 31 * 86400
    recent = await job(GUILD, "a new fox")
    waiting = await store.add_submission(NewJob(model="m", prompt="about to be sent", seed=None, user_id=1,
                                                guild_id=12, channel_id=1))
    other = await job(12, "a fox elsewhere")

    assert await chores.erase_old_prompts() == 1
    assert (await store.get(old)).prompt == "" and (await store.get(recent)).prompt == "a new fox"
    assert await chores.forget_server(12) == 1
    assert (await store.get(other)).prompt == ""
    assert (await store.get(waiting.id)).prompt == "about to be sent"  # not yet sent: kept for its create
    assert await store.ledger() == (3, 750)


async def test_servers_left_are_forgotten_only_on_this_processs_shards(
    tmp_path: Path, sim_client: VideoServiceClient
) -> None:
    on_0, on_1, also_on_1 = 4 << 22, 5 << 22, 7 << 22  # shards 0, 1, 1 out of 2
    store = await JobStore.open(tmp_path / "bot.sqlite3")
    try:
        for guild_id in (on_0, on_1, also_on_1):
            row = await store.add_submission(NewJob(model="m", prompt=f"fox of {guild_id}", seed=None, user_id=1,
                                                    guild_id=guild_id, channel_id=1))
            await store.transition(row.id, JobState.SUBMITTING)
            await store.mark_accepted(row.id, f"vid-{row.id}", 250, 0.0)
            await store.transition(row.id, JobState.FAILED)
        s = settings(SHARD_COUNT="2", SHARD_IDS="1")
        chores = Housekeeping(store, server_rules(store, s), sim_client, s, Poster(), event_text=event_line)
        # This process runs shard 1 and is still in `also_on_1`: only `on_1` was left; `on_0` is not ours.
        assert await chores.forget_servers_left({also_on_1}) == 1
        assert sorted(await store.guilds_with_prompts()) == [on_0, also_on_1]
    finally:
        await store.close()


async def test_one_servers_failing_channel_holds_back_only_that_servers_lines(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501})
    poster.refuse = http_error(503)  # the first line, server 10's
    assert await chores.post_events() == 1  # server 11's line went out
    assert [channel for channel, _ in poster.lines] == [501]
    assert await chores.post_events() == 1
    assert [channel for channel, _ in poster.lines] == [501, LOG]


async def test_a_damaged_event_row_is_still_posted_and_stops_nothing(parts: Parts) -> None:
    store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.store.add_event(GUILD, "failed", user_id=2, job_id=7, details={"yen": "lots"})
    async with store.transaction():
        await store.execute("UPDATE events SET details = '{bad' WHERE kind = 'failed'")
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "blocklist"})
    assert await chores.post_events() == 3
    assert "#7" in poster.lines[1][1] and "¥0" in poster.lines[1][1]


async def test_two_processes_checking_the_budget_at_once_alert_once(
    open_store: StoreOpener, simulator: VideoServiceSimulator, sim_client: VideoServiceClient
) -> None:
    s = settings()
    processes = []
    for store in (await open_store(), await open_store()):  # two stores on one database: two bot processes
        processes.append(Housekeeping(store, server_rules(store, s), sim_client, s, Poster(), event_text=event_line,
                                         chores=Chores()))
    rules = server_rules(await open_store(), s)
    await rules.change(GUILD, 900, {"log_channel_id": LOG, "budget_alert_yen": 5_000})
    simulator.spend = 6_000
    await asyncio.gather(*(chores.check_budget() for chores in processes for _ in range(3)))
    assert len(await rules.store.recent_events(GUILD, "budget_low")) == 1


async def test_of_two_processes_on_one_database_only_the_oldest_live_one_posts_the_log_lines(
    parts: Parts, sim_client: VideoServiceClient
) -> None:
    store, rules, _chores, _poster, clock = parts
    first, second = Lease("first", seconds=30), Lease("second", seconds=30)
    await store.renew_leases(first)
    clock.now += 1
    await store.renew_leases(second)
    posters = {lease.owner: Poster() for lease in (first, second)}
    processes = [
        Housekeeping(store, rules, sim_client, settings(), posters[lease.owner], event_text=event_line, clock=clock,
                     leads=partial(store.leads_chores, lease))
        for lease in (first, second)
    ]
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    for process in processes:
        await process.tick()
    assert len(posters["first"].lines) == 1 and posters["second"].lines == []  # each line once, by the oldest

    # The first stops renewing (it died): once its heartbeat is a lease old, the second takes the chores over.
    clock.now += 20
    await store.renew_leases(second)
    await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": "blocklist"})
    await processes[1].tick()
    assert posters["second"].lines == []  # the first may still be alive: not yet
    clock.now += 15
    await store.renew_leases(second)
    await processes[1].tick()
    assert [text for _, text in posters["second"].lines] == [posters["second"].lines[0][1]]
    assert "refused (`blocklist`)" in posters["second"].lines[0][1]
    await processes[0].tick()  # the first, back from a long stall, finds it no longer leads
    assert len(posters["first"].lines) == 1


async def test_a_server_the_host_no_longer_lists_gets_no_log_lines_and_no_budget_alerts(
    tmp_path: Path, sim_client: VideoServiceClient, simulator: VideoServiceSimulator
) -> None:
    clock = Clock(1_800_000_000.0)
    store = await JobStore.open(tmp_path / "bot.sqlite3", clock=clock)
    try:
        unlisted = 11
        # Both servers set a log channel and an alert while the host listed them all.
        open_rules = server_rules(store, settings())
        for guild_id, channel in ((GUILD, LOG), (unlisted, LOG + 1)):
            await open_rules.change(guild_id, 900, {"log_channel_id": channel, "budget_alert_yen": 5_000})
        s = settings(ALLOWED_GUILD_IDS=str(GUILD))
        poster = Poster()
        chores = Housekeeping(store, server_rules(store, s), sim_client, s, poster, event_text=event_line,
                              chores=Chores(), clock=clock)
        simulator.spend = 6_000  # 4,000 left: below both thresholds

        await chores.check_budget()
        assert await open_rules.store.recent_events(unlisted, "budget_low") == []
        assert len(await open_rules.store.recent_events(GUILD, "budget_low")) == 1
        await chores.post_events()
        assert {channel for channel, _ in poster.lines} == {LOG}
        assert await open_rules.store.unposted_events(10) == [], "an unlisted server's lines are dropped, not kept"
    finally:
        await store.close()


async def test_one_servers_burst_does_not_delay_another_servers_lines(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    for user in range(200):  # a burst in one server, before the other server's one line
        await rules.store.add_event(GUILD, "refused", user_id=user, details={"code": "blocklist"})
    await rules.change(11, 900, {"log_channel_id": 501})

    share = Chores().lines_per_server
    assert await chores.post_events() == share + 1  # one round: the bursting server's share, and the other's line
    assert [channel for channel, _ in poster.lines].count(501) == 1
    # The burst's lines still go out in their order, a share a round.
    assert await chores.post_events() == share
    burst = [text for channel, text in poster.lines if channel == LOG]
    assert "Log channel" in burst[0] and all("`blocklist`" in text for text in burst[1:])
    assert [f"<@{user}>" in text for user, text in enumerate(burst[1:])] == [True] * (2 * share - 1)


async def test_a_slow_log_channel_holds_back_only_its_own_servers_lines(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501})
    slow = asyncio.Event()
    fast = poster.__call__

    async def post(channel_id: int, text: str) -> None:
        if channel_id == LOG:
            await slow.wait()  # Discord's rate limit on this channel: discord.py sleeps inside the post
        await fast(channel_id, text)

    chores._post = post
    round_ = asyncio.create_task(chores.post_events())
    for _ in range(100):
        await asyncio.sleep(0.01)
        if poster.lines:
            break
    assert [channel for channel, _ in poster.lines] == [501]  # posted while the other channel is still waiting
    slow.set()
    assert await round_ == 2


async def test_old_log_lines_and_closed_offers_are_deleted_on_schedule(parts: Parts) -> None:
    store, rules, chores, _poster, clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})  # a settings change: kept as the server's history
    for code in ("blocklist", "member_blocked"):
        await rules.store.add_event(GUILD, "refused", user_id=2, details={"code": code})
    await chores.post_events()
    old_offer = await store.add_offer(NewOffer(kind="confirm", user_id=1, guild_id=GUILD, channel_id=1,
                                               locale="en-US", expires_at=clock.now + 60, prompt="a fox"))
    used_offer = await store.add_offer(NewOffer(kind="confirm", user_id=1, guild_id=GUILD, channel_id=1,
                                                locale="en-US", expires_at=clock.now + 60, prompt="a cat"))
    assert await store.use_offer(used_offer.id, "used")
    clock.now += Chores().event_retention_days * 86400 + 1
    await rules.store.add_event(GUILD, "refused", user_id=3, details={"code": "blocklist"})  # not posted yet
    open_offer = await store.add_offer(NewOffer(kind="confirm", user_id=1, guild_id=GUILD, channel_id=1,
                                                locale="en-US", expires_at=clock.now + 60, prompt="a dog"))

    await chores.tick()  # the first tick runs every chore: the retention ones too
    assert await store.get_offer(old_offer.id) is None and await store.get_offer(used_offer.id) is None
    assert await store.get_offer(open_offer.id) is not None
    assert [event.details for event in await rules.store.recent_events(GUILD, "refused")] == [{"code": "blocklist"}]
    assert len(await rules.store.recent_events(GUILD, "setting")) == 1  # /settings still shows who set the channel
    assert await chores.prune_old_records() == (0, 0)  # nothing more to delete


async def test_pruning_keeps_each_servers_last_settings_changes_and_deletes_in_batches(parts: Parts) -> None:
    _store, rules, chores, _poster, clock = parts
    for value in range(8):  # stricter than the host's cooldown each time: a server may only lengthen it
        await rules.change(GUILD, 900, {"cooldown_seconds": 3600 + value})
    for user in range(30):
        await rules.store.add_event(GUILD, "refused", user_id=user, details={"code": "blocklist"})
    await chores.post_events()  # no log channel: the whole backlog is passed over in one round
    clock.now += 1
    assert await rules.store.prune_events(posted_before=clock.now, keep_settings=5, batch=7) == 33
    assert [event.details["new"] for event in await rules.store.recent_events(GUILD, "setting", limit=10)] == [
        3607, 3606, 3605, 3604, 3603]


def slow_on(channel_id: int, poster: Poster, released: asyncio.Event) -> Poster:
    """A poster whose posts to `channel_id` sleep until `released` (Discord's 429 on that channel: discord.py
    sleeps inside the post); every other channel's go out at once."""

    async def post(channel: int, text: str) -> None:
        if channel == channel_id:
            await released.wait()
        await Poster.__call__(poster, channel, text)

    return post  # type: ignore[return-value]


async def settle(until: Callable[[], bool]) -> None:
    """Let the shares the chores left running go on until `until()` holds (fails after about 5 s)."""
    for _ in range(500):
        if until():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never settled")


async def test_a_slow_channel_holds_up_neither_other_servers_next_rounds_nor_the_other_chores(
    parts: Parts, simulator: VideoServiceSimulator
) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501, "budget_alert_yen": 5_000})
    released = asyncio.Event()
    chores._post = slow_on(LOG, poster, released)
    simulator.spend = 6_000  # below server 11's threshold: its alert is due in this tick

    await asyncio.wait_for(chores.tick(), 1)  # the tick does not wait for server 10's share asleep on its channel
    assert len(await rules.store.recent_events(11, "budget_low")) == 1, "the tick's later chores ran"
    await settle(lambda: len(poster.lines) == 2)  # server 11's two settings lines (log channel, alert)
    await chores.tick()  # a later round: server 11's alert goes out; server 10's share is still asleep
    await settle(lambda: len(poster.lines) == 3)
    await rules.store.add_event(11, "refused", user_id=3, details={"code": "blocklist"})
    await chores.tick()
    await settle(lambda: len(poster.lines) == 4)
    assert {channel for channel, _ in poster.lines} == {501}

    released.set()
    await chores.tick()  # server 10's share is still in flight or just done: its line goes out once
    await settle(lambda: any(channel == LOG for channel, _ in poster.lines))
    await chores.tick()
    await asyncio.sleep(0.05)
    assert [channel for channel, _ in poster.lines].count(LOG) == 1
    await chores.stop()


async def test_one_servers_fault_neither_stops_nor_repeats_another_servers_lines(
    parts: Parts, caplog: pytest.LogCaptureFixture
) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501})
    released = asyncio.Event()
    slow = slow_on(LOG, poster, released)
    faults = 0

    async def post(channel_id: int, text: str) -> None:
        nonlocal faults
        if channel_id == 501 and faults < 2:
            faults += 1
            raise StoreUnavailable("database is locked")  # any fault escaping one server's share
        await slow(channel_id, text)

    chores._post = post
    with caplog.at_level(logging.ERROR, logger="bot.jobs.chores"):
        await chores.tick()  # two ticks while server 10's share sleeps on its channel
        await settle(lambda: faults == 1)
        await chores.tick()
        await settle(lambda: faults == 2)

    released.set()
    await settle(lambda: any(channel == LOG for channel, _ in poster.lines))
    await chores.tick()  # server 11's line, once its fault has passed
    await settle(lambda: any(channel == 501 for channel, _ in poster.lines))
    await chores.tick()
    await asyncio.sleep(0.05)
    assert sorted(channel for channel, _ in poster.lines) == [LOG, 501], "each server's line once"
    # Each fault is logged with its traceback, as its own server's.
    failures = [record for record in caplog.records if record.exc_info]
    assert len(failures) == 2 and all("server 11" in record.getMessage() for record in failures)
    assert all(isinstance(record.exc_info[1], StoreUnavailable) for record in failures)  # type: ignore[index]


async def test_stopping_ends_every_share_still_in_flight(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501})
    released = asyncio.Event()
    slow = slow_on(LOG, poster, released)

    async def post(channel_id: int, text: str) -> None:
        if channel_id == 501:
            raise StoreUnavailable("database is locked")
        await slow(channel_id, text)

    chores._post = post
    before = asyncio.all_tasks()
    chores.start()
    await asyncio.sleep(0.1)  # the first round: server 11's share failed, server 10's sleeps on its channel
    await chores.stop()
    assert asyncio.all_tasks() - before == set(), "no share is left running"
    assert poster.lines == []


async def test_the_shares_in_flight_count_against_the_servers_posted_to_at_once(parts: Parts) -> None:
    _store, rules, chores, poster, _clock = parts
    chores._chores = Chores(servers_per_round=1)
    await rules.change(GUILD, 900, {"log_channel_id": LOG})
    await rules.change(11, 900, {"log_channel_id": 501})
    released = asyncio.Event()
    chores._post = slow_on(LOG, poster, released)
    await asyncio.wait_for(chores.tick(), 1)
    await asyncio.wait_for(chores.tick(), 1)  # server 10's share, asleep, takes the round's one place: 11 waits
    await asyncio.sleep(0.05)
    assert poster.lines == []
    released.set()
    await settle(lambda: len(poster.lines) == 1)
    await chores.tick()
    await settle(lambda: len(poster.lines) == 2)
    assert [channel for channel, _ in poster.lines] == [LOG, 501]
