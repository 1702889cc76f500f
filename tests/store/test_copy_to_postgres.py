"""`python -m bot migrate-db`: a SQLite database's whole history copied into PostgreSQL (a real server)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo

import asyncpg
import pytest

import bot.store.copy_to_postgres
from bot.cli.main import main
from bot.community.server_rules import ServerRules, ServerSettings
from bot.community.usage import build_report
from bot.config.database_url import redacted
from bot.jobs.durations import DurationModel
from bot.store.copy_to_postgres import MigrateRefused, migrate_database
from bot.store.instance_lock import single_process
from bot.store.jobs import SCHEMA_VERSION, DatabaseTooNew, JobState, JobStore, NewJob, NewOffer
from bot.store.leases import Lease
from bot.store.servers import ServerStore
from tests.conftest import Clock

S = JobState
#: Discord ids are below 2^63 and well past 2^53 (where a double stops holding every integer).
BIG = 2**63 - 1
GUILD = 1_234_567_890_123_456_789
OTHER_GUILD = 987_654_321_987_654_321
NOW = 1_700_000_000.0


async def fill(path: Path) -> dict[str, Any]:
    """A SQLite database with some of everything: jobs in several states, events, settings, blocklists,
    members, offers, learned durations, Japanese text, NULLs and ids past 2^53."""
    clock = Clock(NOW)
    store = await JobStore.open(path, clock=clock)
    rules = ServerRules(ServerStore(store), ServerSettings())
    try:
        def new(user: int, guild: int | None, prompt: str, seed: int | None = None) -> NewJob:
            return NewJob(model="video-1", prompt=prompt, seed=seed, user_id=user, guild_id=guild,
                          channel_id=BIG - 1, locale="ja", price_yen=150)

        delivered = await store.add_submission(new(BIG, GUILD, "夕焼けの海辺を歩く猫", seed=2**62))
        await store.transition(delivered.id, S.SUBMITTING)
        await store.mark_accepted(delivered.id, "svc-1", 150, NOW + 20)
        await store.transition(delivered.id, S.IN_PROGRESS)
        await store.transition(delivered.id, S.COMPLETED)
        await store.transition(delivered.id, S.DOWNLOADED, file_path="data/videos/1.mp4")
        await store.transition(delivered.id, S.DELIVERED, delivered_channel_id=BIG - 2, delivered_message_id=BIG - 3,
                               finished_at=NOW + 60)
        clock.now += 1
        failed = await store.add_submission(new(BIG - 10, GUILD, "雨の東京"))
        await store.transition(failed.id, S.SUBMITTING)
        await store.mark_accepted(failed.id, "svc-2", 300, NOW + 20)
        await store.transition(failed.id, S.FAILED, last_error="エラー: 生成に失敗しました", finished_at=NOW + 30)
        await store.mark_credited(failed.id, guild_id=GUILD, by_user_id=BIG - 4)
        clock.now += 1
        unknown = await store.add_submission(new(BIG, GUILD, "prompt"))
        await store.transition(unknown.id, S.SUBMITTING)
        await store.transition(unknown.id, S.UNKNOWN, last_error="no answer")
        pending = await store.add_submission(new(42, OTHER_GUILD, "a fox"))
        await store.transition(pending.id, S.SUBMITTING)
        await store.mark_accepted(pending.id, "svc-3", 150, NOW + 40)
        await store.add_submission(new(43, None, "a DM request, no server"))  # guild NULL, still received
        await store.add_offer(NewOffer(kind="reroll", user_id=BIG, guild_id=GUILD, channel_id=BIG - 1, locale="ja",
                                       expires_at=NOW + 60, model="video-1", source_job_id=delivered.id))
        await store.add_offer(NewOffer(kind="confirm", user_id=42, guild_id=None, channel_id=5, locale="en-US",
                                       expires_at=NOW + 60, prompt="確認してから", seed=None))
        await rules.change(GUILD, BIG - 4, {"allowed_channel_ids": [BIG - 1, 10], "member_daily_cap_yen": 1000,
                                            "language": "ja", "log_channel_id": BIG - 5})
        await rules.change(OTHER_GUILD, 7, {"timezone": "Europe/Paris"})
        await rules.reset(OTHER_GUILD, 7, "timezone")
        await rules.store.add_term(GUILD, "禁止語", BIG - 4)
        await rules.store.set_member(GUILD, BIG - 10, BIG - 4, blocked=True, reset_quota=True)
        durations = DurationModel.for_interval(20.0)
        for seconds in (30.0, 45.5, 61.25):
            durations.record("video-1", seconds)
        await durations.save(store)
        await store.set_meta("paused", "1699999999.5")
        await store.renew_leases(Lease("host:1:stopped", seconds=30))  # the SQLite process's last heartbeat
        counts = {table: await count(store, table) for table in TABLES}
        return {"counts": counts, "ledger": await store.ledger(), "jobs": [delivered.id, failed.id, unknown.id,
                                                                           pending.id]}
    finally:
        await store.close()


TABLES = ("jobs", "meta", "server_settings", "blocklist", "members", "events", "offers", "processes")


async def count(store: JobStore, table: str) -> int:
    row = await store.fetch_one(f"SELECT COUNT(*) FROM {table}")
    assert row is not None
    return int(row[0])


async def every_row(store: JobStore, table: str) -> list[tuple[Any, ...]]:
    rows = await store.fetch_all(f"SELECT * FROM {table}")
    return sorted((tuple(row) for row in rows), key=repr)


async def test_the_whole_history_is_copied_and_reads_the_same(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "bot.sqlite3"
    filled = await fill(source)
    assert all(filled["counts"][table] > 0 for table in TABLES)  # the check below compares something everywhere
    before = source.read_bytes()

    report = await migrate_database(source, postgres_url, batch_rows=2)  # several batches per table
    assert report.ok and report.committed, report.lines()
    assert {t.name: t.target_rows for t in report.tables} == filled["counts"]  # discovered, not a fixed list
    assert report.source_ledger == report.target_ledger == filled["ledger"] == (3, 600)
    assert source.read_bytes() == before  # read only

    old = await JobStore.open(source)
    new = await JobStore.open_url(postgres_url)
    try:
        for table in TABLES:
            assert await every_row(new, table) == await every_row(old, table), table
        for job_id in filled["jobs"]:
            assert await new.get(job_id) == await old.get(job_id)
        assert (await new.get(filled["jobs"][0])).user_id == BIG
        assert (await new.get(filled["jobs"][0])).prompt == "夕焼けの海辺を歩く猫"
        assert await new.ledger(guild_id=GUILD) == await old.ledger(guild_id=GUILD) == (2, 450)
        zone = ZoneInfo("Asia/Tokyo")
        reports = [build_report(await store.usage_jobs(GUILD, 0, 2 * NOW), "this_month", 0, 2 * NOW, zone)
                   for store in (old, new)]
        assert reports[0] == reports[1] and (reports[1].totals.spent_yen, reports[1].totals.credited_yen) == (450, 300)
        new_rules, old_rules = (ServerRules(ServerStore(s), ServerSettings()) for s in (new, old))
        for guild in (GUILD, OTHER_GUILD):
            assert await new_rules.effective(guild) == await old_rules.effective(guild)
            assert (await new_rules.effective(guild)).from_server == (await old_rules.effective(guild)).from_server
        assert (await new_rules.effective(GUILD)).allowed_channel_ids == {BIG - 1, 10}
        assert await new_rules.store.recent_events(GUILD, "setting", 50) == await old_rules.store.recent_events(
            GUILD, "setting", 50)
        assert (await new_rules.member(GUILD, BIG - 10)).blocked
        assert await new.get_offer(2) == await old.get_offer(2)
        learned, relearned = DurationModel.for_interval(20.0), DurationModel.for_interval(20.0)
        await learned.load(old)
        await relearned.load(new)
        assert relearned.dumps() == learned.dumps() != {}

        # New rows on PostgreSQL get ids past the copied ones.
        job = await new.add_submission(NewJob(model="video-1", prompt="次", seed=None, user_id=1, guild_id=GUILD,
                                              channel_id=2))
        assert job.id == max(filled["jobs"]) + 2  # the DM request was the last copied one
        offer = await new.add_offer(NewOffer(kind="confirm", user_id=1, guild_id=GUILD, channel_id=2, locale="ja",
                                             expires_at=NOW))
        assert offer.id == 3
        await new_rules.store.add_event(GUILD, "budget_low")
        newest = (await new_rules.store.recent_events(GUILD, "budget_low", 1))[0]
        assert newest.id == filled["counts"]["events"] + 1
    finally:
        await old.close()
        await new.close()


async def test_ids_sqlite_handed_out_are_not_reused_even_when_their_rows_are_gone(
    tmp_path: Path, postgres_url: str
) -> None:
    source = tmp_path / "bot.sqlite3"
    filled = await fill(source)
    with sqlite3.connect(source) as db:  # an event row deleted by hand: AUTOINCREMENT never reuses its id
        last = db.execute("SELECT MAX(id) FROM events").fetchone()[0]
        db.execute("DELETE FROM events WHERE id = ?", (last,))
    assert (await migrate_database(source, postgres_url)).ok
    store = await JobStore.open_url(postgres_url)
    try:
        await ServerStore(store).add_event(GUILD, "budget_low")
        newest = (await ServerStore(store).recent_events(GUILD, "budget_low", 1))[0]
        assert newest.id == filled["counts"]["events"] + 1
    finally:
        await store.close()


async def test_a_target_with_rows_is_refused_and_left_as_it_was(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "bot.sqlite3"
    await fill(source)
    store = await JobStore.open_url(postgres_url)
    try:
        await store.set_meta("a bot ran here", "yes")  # one row in one table is enough
    finally:
        await store.close()
    with pytest.raises(MigrateRefused, match=r"already holds rows \(in meta\)"):
        await migrate_database(source, postgres_url)
    store = await JobStore.open_url(postgres_url)
    try:
        assert [await count(store, table) for table in TABLES] == [0, 1, 0, 0, 0, 0, 0, 0]
    finally:
        await store.close()
    # And a database migrated once already is not migrated twice.
    await (await JobStore.open_url(postgres_url)).close()


async def test_migrating_twice_is_refused_and_the_first_copy_stays(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "bot.sqlite3"
    filled = await fill(source)
    assert (await migrate_database(source, postgres_url)).ok
    with pytest.raises(MigrateRefused, match="already holds rows"):
        await migrate_database(source, postgres_url)
    store = await JobStore.open_url(postgres_url)
    try:
        assert {table: await count(store, table) for table in TABLES} == filled["counts"]
    finally:
        await store.close()


async def test_a_copy_that_differs_is_rolled_back_and_reported(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "bot.sqlite3"
    await fill(source)
    real = bot.store.copy_to_postgres._insert

    async def lossy(database: Any, insert: str, rows: list[list[Any]]) -> None:
        lost = 2  # the failed, charged job: its rows and its yen go missing
        await real(database, insert, [row for row in rows if row[0] != lost] if '"jobs"' in insert else rows)

    monkeypatch.setattr(bot.store.copy_to_postgres, "_insert", lossy)
    report = await migrate_database(source, postgres_url)
    assert not report.ok and not report.committed
    assert report.source_ledger != report.target_ledger
    assert "MISMATCH" in "\n".join(report.lines()) and "rolled back" in report.lines()[-1]
    store = await JobStore.open_url(postgres_url)
    try:
        assert [await count(store, table) for table in TABLES] == [0] * len(TABLES)
    finally:
        await store.close()


async def test_a_running_bot_an_old_schema_and_a_missing_file_are_refused(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "bot.sqlite3"
    await fill(source)
    with single_process(source), pytest.raises(MigrateRefused, match=r"the bot is running on .*stop it"):
        await migrate_database(source, postgres_url)
    with pytest.raises(MigrateRefused, match=r"no SQLite database at .*nowhere\.sqlite3"):
        await migrate_database(tmp_path / "nowhere.sqlite3", postgres_url)
    with sqlite3.connect(source) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    with pytest.raises(MigrateRefused, match="start this version of the bot once on it"):
        await migrate_database(source, postgres_url)
    with sqlite3.connect(source) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(DatabaseTooNew):
        await migrate_database(source, postgres_url)
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database " * 100)
    with pytest.raises(MigrateRefused, match="not a SQLite database"):
        await migrate_database(not_sqlite, postgres_url)
    store = await JobStore.open_url(postgres_url)
    try:
        assert [await count(store, table) for table in TABLES] == [0] * len(TABLES)  # nothing copied by any
    finally:
        await store.close()


def with_password(url: str, password: str) -> str:
    parts = urlsplit(url)  # the test server trusts loopback: any password is let in, and must never be shown
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


async def test_the_command_line_prints_a_summary_and_never_the_password(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "bot.sqlite3"
    await fill(source)
    url = with_password(postgres_url, "hunter2-secret")
    wrong = await asyncio.to_thread(main, ["migrate-db", "--to", url, "--from", str(tmp_path / "typo.sqlite3")])
    failed = capsys.readouterr()
    assert wrong == 1 and "no SQLite database at" in failed.err and "typo.sqlite3" in failed.err
    assert await asyncio.to_thread(main, ["migrate-db", "--to", url, "--from", str(source)]) == 0
    done = capsys.readouterr()
    assert "jobs" in done.out and "5 rows in SQLite" in done.out and "¥600" in done.out and "OK" in done.out
    assert redacted(url) in done.out
    again = await asyncio.to_thread(main, ["migrate-db", "--to", url, "--from", str(source)])
    refused = capsys.readouterr()
    assert again == 1 and "already holds rows" in refused.err
    unreachable = with_password(postgres_url.rsplit("/", 1)[0] + "/no_such_database", "hunter2-secret")
    assert await asyncio.to_thread(main, ["migrate-db", "--to", unreachable, "--from", str(source)]) == 1
    gone = capsys.readouterr()
    for output in (failed, done, refused, gone):
        assert "hunter2-secret" not in output.out + output.err


async def test_tens_of_thousands_of_rows_are_copied(tmp_path: Path, postgres_url: str) -> None:
    source = tmp_path / "bot.sqlite3"
    await fill(source)
    with sqlite3.connect(source) as db:  # 20,000 more jobs, written directly: the store's way takes minutes
        db.executemany(
            "INSERT INTO jobs (state, model, prompt, user_id, guild_id, channel_id, created_at, updated_at, "
            "charged_yen, accepted_at) VALUES ('delivered', 'video-1', ?, ?, ?, 1, ?, ?, 150, ?)",
            [(f"猫 {n}", BIG - n, GUILD, NOW + n, NOW + n, NOW + n) for n in range(20_000)],
        )
    report = await migrate_database(source, postgres_url)
    assert report.ok and report.target_ledger == (20_003, 600 + 20_000 * 150)
    connection = await asyncpg.connect(postgres_url)
    try:
        assert await connection.fetchval("SELECT COUNT(*) FROM jobs WHERE user_id > $1", 2**53) == 20_003
    finally:
        await connection.close()
