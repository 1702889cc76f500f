"""The PostgreSQL backend: the SQL translator, the two migration lists, migrating and admitting across processes.

The store's behaviour itself is tested against both backends in tests/store/test_jobs.py and its neighbours.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

import bot.store.jobs
from bot.app import open_store
from bot.cli.backup import backup
from bot.cli.check import check_postgres
from bot.cli.common import one_process
from bot.cli.pause import pause
from bot.config.database_url import password_of, redacted
from bot.config.settings import Settings, read_settings
from bot.store.instance_lock import AlreadyRunning
from bot.store.jobs import (
    SCHEMA_VERSION,
    Admission,
    AdmissionRefused,
    DatabaseTooNew,
    JobState,
    JobStore,
    Migration,
    NewJob,
    SpendCap,
    StoreUnavailable,
    load_migrations,
)
from bot.store.jobs.meta import HOST_PAUSE
from bot.store.postgres import PostgresDatabase, translate
from bot.store.sqlite import SqliteDatabase
from tests.store import postgres_server as harness
from tests.store.postgres_server import PG_BIN_VARIABLE, PostgresServer

S = JobState


@pytest.mark.parametrize(
    ("sqlite", "postgresql"),
    [
        ("SELECT * FROM jobs WHERE id = ? AND state IN (?, ?)",
         "SELECT * FROM jobs WHERE id = $1 AND state IN ($2, $3)"),
        ("SELECT 1 FROM jobs WHERE guild_id IS ? AND user_id = ?",
         "SELECT 1 FROM jobs WHERE guild_id IS NOT DISTINCT FROM $1 AND user_id = $2"),
        ("SELECT 1 WHERE a is  not\n? AND b IS NULL AND c IS NOT NULL",
         "SELECT 1 WHERE a IS DISTINCT FROM $1 AND b IS NULL AND c IS NOT NULL"),
        # Literals, quoted names and comments are copied as they are, question marks and all.
        ("SELECT 'is ? it''s ?', \"odd ? name\" FROM t WHERE x = ? -- why?\n AND y = ? /* or ? */",
         "SELECT 'is ? it''s ?', \"odd ? name\" FROM t WHERE x = $1 -- why?\n AND y = $2 /* or ? */"),
        # `this_is ?` is not `IS ?`; names that merely contain json_object stay.
        ("UPDATE t SET this_is = ?, my_json_object = ?", "UPDATE t SET this_is = $1, my_json_object = $2"),
        ("SELECT json_object('state', state, 'yen', (charged_yen + ?)) FROM jobs",
         "SELECT json_build_object('state', state, 'yen', (charged_yen + $1))::text FROM jobs"),
        # A json_object inside another stays json, so it nests as an object (as in SQLite).
        ("SELECT JSON_OBJECT('a', json_object('b', ?))",
         "SELECT json_build_object('a', json_build_object('b', $1))::text"),
    ],
)
def test_the_translator_speaks_postgresql_and_leaves_literals_alone(sqlite: str, postgresql: str) -> None:
    assert translate(sqlite) == postgresql


def test_the_translation_of_a_statement_is_made_once() -> None:
    sql = "SELECT * FROM meta WHERE key = ? AND value IS ? -- cached"
    translate(sql)
    hits = translate.cache_info().hits
    assert translate(sql) == "SELECT * FROM meta WHERE key = $1 AND value IS NOT DISTINCT FROM $2 -- cached"
    assert translate.cache_info().hits == hits + 1


def test_both_dialects_have_the_same_migrations() -> None:
    sqlite = load_migrations()
    postgresql = bot.store.jobs._POSTGRES_MIGRATIONS
    assert [(m.version, m.name) for m in postgresql] == [(m.version, m.name) for m in sqlite]
    assert len(sqlite) == SCHEMA_VERSION


def test_a_password_in_the_query_is_redacted_and_known_as_a_secret() -> None:
    url = "postgresql://bot@db.example:5432/videos?sslmode=require&password=s3cret"
    assert redacted(url) == "postgresql://bot@db.example:5432/videos?sslmode=require&password=***"
    assert password_of(url) == "s3cret"
    assert "s3cret" not in redacted("postgresql://bot:p1@db/videos?password=s3cret")


def test_a_password_is_redacted_from_an_address() -> None:
    assert redacted("postgresql://bot:s3cret@db.example:5432/videos") == "postgresql://bot:***@db.example:5432/videos"
    assert redacted("postgresql://bot@db.example/videos") == "postgresql://bot@db.example/videos"


async def raw_version(url: str) -> list[int]:
    connection = await asyncpg.connect(url)
    try:
        return [row[0] for row in await connection.fetch("SELECT version FROM schema_version")]
    finally:
        await connection.close()


async def test_an_empty_database_is_migrated_once(postgres_url: str) -> None:
    store = await JobStore.open_url(postgres_url)
    assert await store.schema_version() == SCHEMA_VERSION
    await store.close()
    store = await JobStore.open_url(postgres_url)
    assert await store.schema_version() == SCHEMA_VERSION
    await store.close()
    assert await raw_version(postgres_url) == [SCHEMA_VERSION]


async def test_processes_starting_at_once_apply_each_migration_once(postgres_url: str) -> None:
    stores = await asyncio.gather(*(JobStore.open_url(postgres_url) for _ in range(4)))
    try:
        assert [await store.schema_version() for store in stores] == [SCHEMA_VERSION] * 4
        job = await stores[0].add_submission(NewJob(model="m", prompt="p", seed=None, user_id=1, guild_id=2,
                                                    channel_id=3))
        assert (await stores[3].get(job.id)).state == S.RECEIVED
    finally:
        for store in stores:
            await store.close()
    assert await raw_version(postgres_url) == [SCHEMA_VERSION]


async def test_a_database_written_by_a_newer_bot_is_refused(postgres_url: str) -> None:
    await (await JobStore.open_url(postgres_url)).close()
    connection = await asyncpg.connect(postgres_url)
    try:
        await connection.execute("UPDATE schema_version SET version = $1", SCHEMA_VERSION + 1)
    finally:
        await connection.close()
    with pytest.raises(DatabaseTooNew, match=f"schema version {SCHEMA_VERSION + 1}.*up to {SCHEMA_VERSION}"):
        await JobStore.open_url(postgres_url)
    assert await raw_version(postgres_url) == [SCHEMA_VERSION + 1]


async def test_a_failing_migration_leaves_the_version_and_the_tables_as_before(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await (await JobStore.open_url(postgres_url)).close()
    broken = Migration(SCHEMA_VERSION + 1, f"{SCHEMA_VERSION + 1:04d}_test.sql",
                       "CREATE TABLE extra (x INTEGER); INSERT INTO meta (key, value) VALUES ('half', 'done'); "
                       "ALTER TABLE jobs ADD COLUMN nonsense NOT A TYPE (;")
    monkeypatch.setattr(bot.store.jobs, "_POSTGRES_MIGRATIONS", (*bot.store.jobs._POSTGRES_MIGRATIONS, broken))
    with pytest.raises(asyncpg.PostgresSyntaxError):
        await JobStore.open_url(postgres_url)
    connection = await asyncpg.connect(postgres_url)
    try:
        assert await connection.fetchval("SELECT to_regclass('extra')") is None
        assert await connection.fetchval("SELECT COUNT(*) FROM meta") == 0
    finally:
        await connection.close()
    assert await raw_version(postgres_url) == [SCHEMA_VERSION]


async def test_discord_snowflakes_fit(postgres_store_url: str) -> None:
    store = await JobStore.open_url(postgres_store_url)
    try:
        snowflake = 1_234_567_890_123_456_789  # past 32 bits, as every Discord id is
        job = await store.add_submission(NewJob(model="m", prompt="p", seed=2**40, user_id=snowflake,
                                                guild_id=snowflake + 1, channel_id=snowflake + 2))
        again = await store.get(job.id)
        assert (again.user_id, again.guild_id, again.channel_id, again.seed) == (
            snowflake, snowflake + 1, snowflake + 2, 2**40)
        assert [j.id for j in await store.recent_jobs(snowflake, snowflake + 1)] == [job.id]
    finally:
        await store.close()


async def test_two_processes_admitting_at_once_stay_within_the_limits(postgres_store_url: str) -> None:
    # Two stores with their own pools: two bot processes on one database.
    first = await JobStore.open_url(postgres_store_url)
    second = await JobStore.open_url(postgres_store_url)
    try:
        cap = SpendCap("guild_daily_cap", cap_yen=1000, start=0.0, end=float(2**40))
        in_flight = Admission(max_active_jobs=3, price_yen=250)
        capped = Admission(caps=(cap,), price_yen=250)

        async def ask(store: JobStore, user_id: int, admission: Admission, guild_id: int = 7) -> bool:
            new = NewJob(model="m", prompt="p", seed=None, user_id=user_id, guild_id=guild_id, channel_id=1,
                         price_yen=250)
            try:
                await store.add_submission(new, admission)
            except AdmissionRefused:
                return False
            return True

        # One member, at most 3 in flight: 20 requests from both processes at once.
        admitted = await asyncio.gather(*(ask(store, 1, in_flight) for _ in range(10) for store in (first, second)))
        assert sum(admitted) == 3
        # Many members of another server, 1,000 yen a day: 4 videos at 250, whoever asks and wherever.
        admitted = await asyncio.gather(
            *(ask(store, 100 + n, capped, guild_id=8) for n in range(10) for store in (first, second))
        )
        assert sum(admitted) == 4
    finally:
        await first.close()
        await second.close()


async def test_an_unreachable_database_is_store_unavailable_and_its_password_is_never_shown(
    postgres_server: PostgresServer,
) -> None:
    url = f"postgresql://bot:hunter2-secret@127.0.0.1:{postgres_server.port}/no_such_database"
    with pytest.raises(StoreUnavailable) as failed:
        await JobStore.open_url(url)
    assert "hunter2-secret" not in str(failed.value)
    assert "postgresql://bot:***@127.0.0.1" in str(failed.value)


async def test_not_a_database_address_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError) as refused:
        await JobStore.open_url("mysql://root:hunter2-secret@db/videos")
    assert "hunter2-secret" not in str(refused.value)


# -- the operator's commands on a PostgreSQL database ---------------------------------------------------------


def postgres_settings(url: str) -> Settings:
    return read_settings({"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k",
                          "DATABASE_URL": url})


async def test_pause_and_resume_go_through_the_store(
    postgres_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = postgres_settings(postgres_store_url)
    store = await open_store(settings)
    try:
        assert await pause(settings, on=True) == 0
        assert await store.get_meta(HOST_PAUSE) is not None  # the running bot (another process) sees it at once
        assert await pause(settings, on=False) == 0
        assert await store.get_meta(HOST_PAUSE) is None
    finally:
        await store.close()
    assert "paused in every server" in capsys.readouterr().out


async def test_backup_points_to_pg_dump(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings = postgres_settings("postgresql://bot:hunter2-secret@127.0.0.1:1/videos")
    assert await backup(settings, tmp_path) == 1
    err = capsys.readouterr().err
    assert "pg_dump" in err and "hunter2-secret" not in err and "postgresql://bot:***@127.0.0.1:1/videos" in err
    assert list(tmp_path.iterdir()) == []


async def test_check_reads_the_schema_without_migrating(postgres_url: str, postgres_server: PostgresServer) -> None:
    assert (await check_postgres(postgres_url, "shown")).line() == (
        f"database: OK (schema {SCHEMA_VERSION} will be created in shown)")
    assert await raw_version_or_none(postgres_url) is None  # a check never migrates
    await (await JobStore.open_url(postgres_url)).close()
    assert (await check_postgres(postgres_url, "shown")).line() == f"database: OK (schema {SCHEMA_VERSION})"
    unreachable = f"postgresql://bot:hunter2-secret@127.0.0.1:{postgres_server.port}/no_such_database"
    failed = await check_postgres(unreachable, redacted(unreachable))
    assert not failed.ok and "hunter2-secret" not in failed.line()


async def raw_version_or_none(url: str) -> object:
    connection = await asyncpg.connect(url)
    try:
        return await connection.fetchval("SELECT to_regclass('schema_version')")
    finally:
        await connection.close()


def test_postgresql_lets_several_processes_run(tmp_path: Path) -> None:
    settings = postgres_settings("postgresql://bot@127.0.0.1:1/videos")
    with one_process(settings), one_process(settings):
        pass  # no lock file: PostgreSQL serves several processes
    assert not list(tmp_path.iterdir())
    sqlite = read_settings({"DISCORD_TOKEN": "t", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": "k",
                            "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.sqlite3'}"})
    with one_process(sqlite), pytest.raises(AlreadyRunning), one_process(sqlite):
        pass


def test_the_harness_prefers_the_systems_binaries_then_the_wheels(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(PG_BIN_VARIABLE, raising=False)
    monkeypatch.setattr(harness, "system_binaries", lambda: None)
    assert harness.find_binaries() == harness.pgserver_binaries()  # a machine without PostgreSQL
    monkeypatch.setenv(PG_BIN_VARIABLE, "pgserver")
    assert harness.find_binaries() == harness.pgserver_binaries()
    monkeypatch.setenv(PG_BIN_VARIABLE, str(tmp_path))
    with pytest.raises(harness.PostgresUnavailable, match="no initdb and postgres"):
        harness.find_binaries()  # fails loudly: these tests are never skipped


async def _sqlite_schema(db: SqliteDatabase) -> dict[str, object]:
    tables = [row[0] for row in await db.fetch_all(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    indexes = {row[0] for row in await db.fetch_all(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%'")}
    columns = {table: sorted(row[1] for row in await db.fetch_all(f"PRAGMA table_info({table})")) for table in tables}
    return {"columns": columns, "indexes": indexes}


async def _postgres_schema(db: PostgresDatabase) -> dict[str, object]:
    rows = await db.fetch_all(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
        " AND table_name <> 'schema_version'")
    columns: dict[str, list[str]] = {}
    for row in rows:
        columns.setdefault(row[0], []).append(row[1])
    # Indexes made by CREATE INDEX (not those of a primary key or a UNIQUE constraint, which SQLite names itself).
    indexes = {row[0] for row in await db.fetch_all(
        "SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname NOT IN"
        " (SELECT conname FROM pg_constraint)")}
    return {"columns": {table: sorted(names) for table, names in sorted(columns.items())}, "indexes": indexes}


async def test_each_migration_makes_the_same_tables_columns_and_indexes_on_both(
    postgres_url: str, tmp_path: Path
) -> None:
    """Not only the same names: after every step, both schemas hold the same tables, columns and indexes."""
    sqlite = await SqliteDatabase.open(tmp_path / "schema.sqlite3")
    postgres = await PostgresDatabase.open(postgres_url)
    try:
        for version in range(1, SCHEMA_VERSION + 1):
            await sqlite.migrate(load_migrations()[:version])
            await postgres.migrate(bot.store.jobs._POSTGRES_MIGRATIONS[:version])
            assert await _postgres_schema(postgres) == await _sqlite_schema(sqlite), f"after migration {version}"
    finally:
        await sqlite.close()
        await postgres.close()
