"""Per-server settings: the environment's defaults, an admin's changes with their history, damaged rows."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from bot.app import server_rules
from bot.community.server_rules import SETTING_KEYS, InvalidSetting, LooserThanHost, check_value, defaults_from
from bot.config.settings import read_settings
from tests.conftest import StoreOpener

#: A host whose cooldown and videos in flight leave the servers room (they are ceilings).
ENV = {"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k",
       "VIDEO_COOLDOWN_SECONDS": "0", "MAX_ACTIVE_JOBS_PER_USER": "100"}


def test_the_environment_gives_the_defaults() -> None:
    defaults = defaults_from(read_settings({**ENV, "GUILD_DAILY_BUDGET_YEN": "5000", "REQUIRED_ROLE_ID": "55",
                                            "ALLOWED_CHANNEL_IDS": "1,2", "BUDGET_TIMEZONE": "UTC",
                                            "VIDEO_COOLDOWN_SECONDS": "30", "MEMBER_MONTHLY_BUDGET_YEN": "2000"}))
    assert defaults.guild_daily_cap_yen == 5000 and defaults.member_monthly_cap_yen == 2000
    assert defaults.allowed_role_ids == {55} and defaults.allowed_channel_ids == {1, 2}
    assert defaults.timezone == "UTC" and defaults.cooldown_seconds == 30
    assert defaults.reroll_by == "requester" and defaults.confirm_before_spending is False


@pytest.mark.parametrize(("key", "value"), [
    ("guild_daily_cap_yen", 0), ("guild_daily_cap_yen", -5), ("guild_daily_cap_yen", True),
    ("guild_daily_cap_yen", 10**12), ("cooldown_seconds", -1), ("max_active_jobs", 101),
    ("allowed_channel_ids", [0]), ("allowed_channel_ids", list(range(1, 30))), ("timezone", "Mars/Olympus"),
    ("language", "fr"), ("reroll_by", "nobody"), ("confirm_before_spending", "yes"), ("no_such_setting", 1),
])
def test_values_out_of_bounds_are_refused(key: str, value: object) -> None:
    with pytest.raises(InvalidSetting):
        check_value(key, value)


async def test_a_change_holds_at_once_is_recorded_and_reset_returns_to_the_default(open_store: StoreOpener) -> None:
    store = await open_store()
    settings = read_settings({**ENV, "GUILD_DAILY_BUDGET_YEN": "5000"})
    rules = server_rules(store, settings)
    try:
        changes = await rules.change(10, 900, {"guild_daily_cap_yen": 3000, "cooldown_seconds": 30})
        assert [(c.key, c.old, c.new) for c in changes] == [("guild_daily_cap_yen", 5000, 3000),
                                                            ("cooldown_seconds", 0, 30)]
        server = await rules.effective(10)
        assert server.guild_daily_cap_yen == 3000 and server.from_server == {"guild_daily_cap_yen",
                                                                             "cooldown_seconds"}
        assert (await rules.effective(11)).guild_daily_cap_yen == 5000  # another server keeps the default
        assert await rules.change(10, 900, {"guild_daily_cap_yen": 3000}) == []  # nothing new
        history = await rules.store.recent_events(10, "setting")
        assert [e.details["key"] for e in history] == ["cooldown_seconds", "guild_daily_cap_yen"]
        assert history[1].user_id == 900 and history[1].details["old"] == 5000 and history[1].details["new"] == 3000

        with pytest.raises(InvalidSetting):  # all or nothing
            await rules.change(10, 900, {"guild_daily_cap_yen": 100, "timezone": "Nowhere/Else"})
        assert (await rules.effective(10)).guild_daily_cap_yen == 3000

        reset = await rules.reset(10, 900, "guild_daily_cap_yen")
        assert reset is not None and reset.new == 5000
        assert (await rules.effective(10)).guild_daily_cap_yen == 5000
        assert await rules.reset(10, 900, "guild_daily_cap_yen") is None
    finally:
        await store.close()


async def test_a_damaged_row_falls_back_to_the_default(open_store: StoreOpener) -> None:
    store = await open_store()
    rules = server_rules(store, read_settings(ENV))
    try:
        await rules.change(10, 900, {"member_daily_cap_yen": 500, "max_active_jobs": 3})
        async with store.transaction():
            await store.execute(
                "UPDATE server_settings SET value = '\"lots\"' WHERE key = 'member_daily_cap_yen'"
            )
        server = await rules.effective(10)
        assert server.member_daily_cap_yen is None and server.max_active_jobs == 3
        assert "member_daily_cap_yen" not in server.from_server
    finally:
        await store.close()


def test_every_setting_has_a_name_in_both_languages() -> None:
    from bot.frontend.i18n import CATALOGUE
    for language in CATALOGUE.values():
        assert all(f"setting.{key}" in language for key in SETTING_KEYS)


async def test_two_admins_adding_channels_at_once_both_keep_their_change(open_store: StoreOpener) -> None:
    store = await open_store()
    rules = server_rules(store, read_settings(ENV))
    try:
        def adding(channel: int) -> Callable[[frozenset[int]], list[int]]:
            return lambda current: sorted(current | {channel})

        await asyncio.gather(*(rules.edit(10, 900 + n, "allowed_channel_ids", adding(100 + n)) for n in range(5)))
        assert (await rules.effective(10)).allowed_channel_ids == {100, 101, 102, 103, 104}
        assert len(await rules.store.recent_events(10, "setting", limit=10)) == 5
    finally:
        await store.close()


async def test_two_processes_editing_one_list_at_once_both_keep_their_changes(open_store: StoreOpener) -> None:
    # Two stores on one database (on PostgreSQL, two pools): two bot processes, each with its own ServerRules.
    first, second = await open_store(), await open_store()
    settings = read_settings(ENV)
    processes = [server_rules(first, settings), server_rules(second, settings)]

    def adding(channel: int) -> Callable[[frozenset[int]], list[int]]:
        return lambda current: sorted(current | {channel})

    await asyncio.gather(*(
        processes[n % 2].edit(10, 900 + n, "allowed_channel_ids", adding(100 + n)) for n in range(20)
    ), processes[0].change(10, 1, {"cooldown_seconds": 5}), processes[1].change(10, 2, {"max_active_jobs": 4}))
    for rules in processes:
        server = await rules.effective(10)
        assert server.allowed_channel_ids == set(range(100, 120))
        assert (server.cooldown_seconds, server.max_active_jobs) == (5, 4)
    history = await processes[0].store.recent_events(10, "setting", limit=50)
    assert len(history) == 22
    # Each event's "old" is what the other process had written just before: no change was made over a stale read.
    added = sorted(len(e.details["new"]) for e in history if e.details["key"] == "allowed_channel_ids")
    assert added == list(range(1, 21))


async def test_a_request_reads_the_same_rules_together_as_one_at_a_time(open_store: StoreOpener) -> None:
    store = await open_store()
    rules = server_rules(store, read_settings(ENV))
    try:
        await rules.change(10, 900, {"max_active_jobs": 3})
        await rules.store.add_term(10, "forbidden", 900)
        await rules.store.set_member(10, 7, 900, blocked=True)
        for user_id in (7, 8):
            together = await rules.for_request(10, user_id)
            assert together.server == await rules.effective(10)
            assert together.member == await rules.member(10, user_id)
            assert together.blocklist == await rules.store.blocklist(10) == ["forbidden"]
        assert (await rules.for_request(10, 7)).member.blocked and not (await rules.for_request(10, 8)).member.blocked
        assert (await rules.for_request(11, 7)).server.max_active_jobs != 3, "another server keeps its own"
        direct = await rules.for_request(None, 7)  # a DM: no server's rules
        assert (direct.server, direct.member.blocked, direct.blocklist) == (rules.defaults, False, [])
    finally:
        await store.close()


# -- the host's ceilings ------------------------------------------------------------------------------------

#: The host of the issue's scenario: one video a day per server, one in flight, an hour between two.
STRICT_HOST = {**ENV, "GUILD_DAILY_BUDGET_YEN": "250", "MAX_ACTIVE_JOBS_PER_USER": "1",
               "VIDEO_COOLDOWN_SECONDS": "3600"}


@pytest.mark.parametrize(("values", "looser"), [
    ({"guild_daily_cap_yen": None}, {"guild_daily_cap_yen": (None, 250)}),  # "0": no cap
    ({"guild_daily_cap_yen": 251}, {"guild_daily_cap_yen": (251, 250)}),
    ({"cooldown_seconds": 0}, {"cooldown_seconds": (0, 3600)}),
    ({"cooldown_seconds": 3599}, {"cooldown_seconds": (3599, 3600)}),
    ({"max_active_jobs": None}, {"max_active_jobs": (None, 1)}),
    ({"max_active_jobs": 2}, {"max_active_jobs": (2, 1)}),
    # The issue's /settings limits server_daily:0 cooldown:0 in_flight:0: each named, nothing changed.
    ({"guild_daily_cap_yen": None, "cooldown_seconds": 0, "max_active_jobs": None, "member_daily_cap_yen": 100},
     {"guild_daily_cap_yen": (None, 250), "cooldown_seconds": (0, 3600), "max_active_jobs": (None, 1)}),
])
async def test_a_server_cannot_set_a_limit_looser_than_the_hosts(
    open_store: StoreOpener, values: dict[str, object], looser: dict[str, tuple[object, object]]
) -> None:
    store = await open_store()
    rules = server_rules(store, read_settings(STRICT_HOST))
    try:
        with pytest.raises(LooserThanHost) as refused:
            await rules.change(10, 900, values)
        assert {b.key: (b.value, b.ceiling) for b in refused.value.breaches} == looser
        server = await rules.effective(10)
        assert server.from_server == set(), "all or nothing: no change was made"
        assert (server.guild_daily_cap_yen, server.cooldown_seconds, server.max_active_jobs) == (250, 3600, 1)
        assert await rules.store.recent_events(10, "setting") == []
    finally:
        await store.close()


async def test_a_server_can_set_a_limit_stricter_than_the_hosts_or_equal(open_store: StoreOpener) -> None:
    store = await open_store()
    rules = server_rules(store, read_settings(STRICT_HOST))
    try:
        await rules.change(10, 900, {"guild_daily_cap_yen": 100, "cooldown_seconds": 7200, "max_active_jobs": 1,
                                     "member_daily_cap_yen": 50, "member_monthly_cap_yen": 10})
        server = await rules.effective(10)
        assert (server.guild_daily_cap_yen, server.cooldown_seconds, server.max_active_jobs) == (100, 7200, 1)
        # A cap the host did not set is the server's to set, or to leave off.
        assert (server.member_daily_cap_yen, server.member_monthly_cap_yen) == (50, 10)
        await rules.change(10, 900, {"member_daily_cap_yen": None})
        assert (await rules.effective(10)).member_daily_cap_yen is None
        assert rules.ceiling("guild_daily_cap_yen") == 250 and rules.ceiling("member_daily_cap_yen") is None
    finally:
        await store.close()


async def test_a_stored_value_a_later_stricter_host_undercuts_is_held_to_the_host_when_read(
    open_store: StoreOpener
) -> None:
    store = await open_store()
    try:
        # Set under a host that allowed more (or before the host's values were ceilings at all).
        lenient = server_rules(store, read_settings({**ENV, "GUILD_DAILY_BUDGET_YEN": "1000"}))
        await lenient.change(10, 900, {"guild_daily_cap_yen": 750, "cooldown_seconds": 0, "max_active_jobs": 5,
                                       "member_daily_cap_yen": 100})
        await lenient.change(11, 900, {"guild_daily_cap_yen": 200})

        strict = server_rules(store, read_settings(STRICT_HOST))
        server = await strict.effective(10)
        assert (server.guild_daily_cap_yen, server.cooldown_seconds, server.max_active_jobs) == (250, 3600, 1)
        assert server.member_daily_cap_yen == 100, "a cap the host does not set stays the server's"
        assert server.held_to_host == {"guild_daily_cap_yen", "cooldown_seconds", "max_active_jobs"}
        # What a request is checked against is the held value too.
        assert (await strict.for_request(10, 7)).server.guild_daily_cap_yen == 250
        # A stricter value of the server's own still holds.
        assert (await strict.effective(11)).guild_daily_cap_yen == 200
        # The admin setting the host's value writes it, so a later, looser host does not bring back the old one.
        assert [c.key for c in await strict.change(10, 900, {"guild_daily_cap_yen": 250})] == ["guild_daily_cap_yen"]
        assert (await lenient.effective(10)).guild_daily_cap_yen == 250
    finally:
        await store.close()
