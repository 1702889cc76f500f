import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

import bot.store.jobs
from bot.core.lifecycle import TRANSITIONS
from bot.store.jobs import (
    ACCEPTED_LATE,
    SCHEMA_VERSION,
    Admission,
    AdmissionRefused,
    DatabaseTooNew,
    IllegalTransition,
    JobNotFound,
    JobState,
    JobStore,
    Migration,
    NewJob,
    NewOffer,
    SpendCap,
    StoreUnavailable,
    load_migrations,
)
from bot.store.leases import Lease
from bot.store.servers import ServerStore
from bot.store.sqlite import SqliteDatabase, Step
from tests.conftest import Clock, StoreOpener

S = JobState
SHIPPED_MIGRATIONS = bot.store.jobs._MIGRATIONS


def new_job(user_id: int = 1, guild_id: int | None = 10, prompt: str = "a cat") -> NewJob:
    return NewJob(model="m", prompt=prompt, seed=7, user_id=user_id, guild_id=guild_id, channel_id=100)




@pytest.fixture
async def store(open_store: StoreOpener) -> JobStore:
    """A fresh store of each backend (SQLite and PostgreSQL)."""
    return await open_store()


async def put_in_state(store: JobStore, target: JobState) -> int:
    """Walk a fresh job along legal moves until it reaches `target`."""
    sent = [S.SUBMITTING, S.PENDING]
    path = {
        S.RECEIVED: [],
        S.SUBMITTING: [S.SUBMITTING],
        S.PENDING: sent,
        S.IN_PROGRESS: [*sent, S.IN_PROGRESS],
        S.COMPLETED: [*sent, S.COMPLETED],
        S.DOWNLOADED: [*sent, S.COMPLETED, S.DOWNLOADED],
        S.DELIVERED: [*sent, S.COMPLETED, S.DOWNLOADED, S.DELIVERED],
        S.UNDELIVERABLE: [*sent, S.COMPLETED, S.DOWNLOADED, S.UNDELIVERABLE],
        S.FAILED: [*sent, S.FAILED],
        S.STALLED: [*sent, S.STALLED],
        S.REJECTED: [S.REJECTED],
        S.UNKNOWN: [S.SUBMITTING, S.UNKNOWN],
        S.INTERRUPTED: [S.INTERRUPTED],
        S.CANCELLED: [S.CANCELLED],
    }[target]
    job = await store.add_submission(new_job())
    for step in path:
        job = await store.transition(job.id, step)
    assert job.state == target
    return job.id


async def test_migration_from_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "fresh.sqlite3"
    store = await JobStore.open(path)
    assert await store.schema_version() == SCHEMA_VERSION
    await store.close()
    # Opening again does not re-run migrations, and the file is in WAL mode.
    store = await JobStore.open(path)
    assert await store.schema_version() == SCHEMA_VERSION
    await store.close()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"jobs", "meta"} <= tables


def raw_schema(path: Path) -> tuple[int, set[str], list[tuple[str, str]]]:
    """user_version, the table names and the meta rows, read without the store."""
    with sqlite3.connect(path) as raw:
        version = raw.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = raw.execute("SELECT key, value FROM meta ORDER BY key").fetchall()
    return version, tables, meta


def with_migration(monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    """Pretend the bot ships one more migration."""
    extra = Migration(SCHEMA_VERSION + 1, f"{SCHEMA_VERSION + 1:04d}_test.sql", sql)
    monkeypatch.setattr(bot.store.jobs, "_MIGRATIONS", (*SHIPPED_MIGRATIONS, extra))


def test_the_shipped_migrations_are_numbered_from_one() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, SCHEMA_VERSION + 1))
    assert migrations[0].name == "0001_initial.sql" and "CREATE TABLE jobs" in migrations[0].sql


@pytest.mark.parametrize(
    ("names", "problem"),
    [
        (["0001_a.sql", "0003_c.sql"], "without gaps"),
        (["0002_b.sql"], "without gaps"),
        (["0001_a.sql", "0001_again.sql"], "without gaps"),
        (["0001_a.sql", "2_b.sql"], "is not named NNNN_name.sql"),
        ([], "no migrations found"),
    ],
)
def test_migration_files_must_be_contiguous_and_well_named(tmp_path: Path, names: list[str], problem: str) -> None:
    for name in names:
        (tmp_path / name).write_text("SELECT 1;")
    (tmp_path / "README.md").write_text("not a migration")
    with pytest.raises(ValueError, match=problem):
        load_migrations(tmp_path)


async def test_a_migration_is_not_split_on_semicolons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_migration(monkeypatch, """
        INSERT INTO meta (key, value) VALUES ('note', 'a;b');
        CREATE TRIGGER meta_stamp AFTER INSERT ON meta WHEN NEW.key = 'x' BEGIN
            INSERT INTO meta (key, value) VALUES ('stamped', 'yes;really');
        END
    """)  # no final `;`: the loader must not glue the next statement onto it
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    await store.set_meta("x", "1")
    assert await store.schema_version() == SCHEMA_VERSION + 1
    await store.close()
    _version, _tables, meta = raw_schema(tmp_path / "jobs.sqlite3")
    assert ("note", "a;b") in meta and ("stamped", "yes;really") in meta


async def test_a_failing_migration_leaves_the_version_and_the_tables_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.sqlite3"
    store = await JobStore.open(path)
    await store.set_meta("kept", "1")
    await store.close()
    before = raw_schema(path)
    with_migration(monkeypatch, """
        CREATE TABLE extra (x INTEGER);
        INSERT INTO meta (key, value) VALUES ('half', 'done');
        ALTER TABLE jobs ADD COLUMN nonsense NOT A TYPE (;
    """)
    with pytest.raises(sqlite3.OperationalError):
        await JobStore.open(path)
    assert raw_schema(path) == before
    assert before[0] == SCHEMA_VERSION and "extra" not in before[1]
    # The next start with a fixed migration applies it cleanly.
    with_migration(monkeypatch, "CREATE TABLE extra (x INTEGER);")
    store = await JobStore.open(path)
    assert await store.schema_version() == SCHEMA_VERSION + 1
    await store.close()


async def test_a_migration_applied_meanwhile_by_another_process_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "jobs.sqlite3"
    await (await JobStore.open(path)).close()
    # This process read version 0 just before another one migrated and committed.
    real = SqliteDatabase.schema_version
    stale_reads = [0]

    async def stale_then_real(self: SqliteDatabase) -> int:
        return stale_reads.pop() if stale_reads else await real(self)

    monkeypatch.setattr(SqliteDatabase, "schema_version", stale_then_real)
    store = await JobStore.open(path)
    try:
        await store.set_meta("after", "1")  # no transaction was left open
    finally:
        await store.close()
    assert raw_schema(path)[0] == SCHEMA_VERSION


async def test_a_database_written_by_a_newer_bot_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "jobs.sqlite3"
    await (await JobStore.open(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(DatabaseTooNew, match=f"schema version {SCHEMA_VERSION + 1}.*up to {SCHEMA_VERSION}"):
        await JobStore.open(path)
    assert raw_schema(path)[0] == SCHEMA_VERSION + 1


async def test_write_ahead_then_accept_records_id_and_charge(store: JobStore) -> None:
    job = await store.add_submission(new_job())
    assert job.state == S.RECEIVED
    assert job.service_job_id is None and job.charged_yen == 0
    with pytest.raises(IllegalTransition):  # never accepted without the write-ahead `submitting`
        await store.mark_accepted(job.id, "vid_1", 250, next_poll_at=123.0)
    job = await store.transition(job.id, S.SUBMITTING)
    accepted = await store.mark_accepted(job.id, "vid_1", 250, next_poll_at=123.0)
    assert (accepted.state, accepted.service_job_id, accepted.charged_yen) == (S.PENDING, "vid_1", 250)
    assert accepted.next_poll_at == 123.0 and accepted.accepted_at is not None
    assert await store.ledger() == (1, 250)


async def test_jobs_read_back_share_one_string_for_their_model_and_locale(store: JobStore) -> None:
    """Thousands of jobs in flight each visited by full garbage collections: repeated values are one object."""
    for user_id in (1, 2):
        await store.add_submission(replace(new_job(user_id), model="provider/video-model", locale="ja-JP"))
    first, second = await store.jobs_in_states([S.RECEIVED])
    assert (first.model, first.locale) == ("provider/video-model", "ja-JP")
    assert first.model is second.model and first.locale is second.locale


@pytest.mark.parametrize(
    ("source", "target"),
    # Sorted: the targets are a set, and parallel test workers must collect the same order.
    [(source, target) for source, targets in TRANSITIONS.items() for target in sorted(targets)],
)
async def test_every_legal_transition(store: JobStore, source: JobState, target: JobState) -> None:
    job_id = await put_in_state(store, source)
    moved = await store.transition(job_id, target)
    assert moved.state == target


@pytest.mark.parametrize(
    ("source", "target"),
    [(source, target) for source in S for target in S if target not in TRANSITIONS[source]],
)
async def test_every_illegal_transition_raises(store: JobStore, source: JobState, target: JobState) -> None:
    job_id = await put_in_state(store, source)
    with pytest.raises(IllegalTransition):
        await store.transition(job_id, target)
    assert (await store.get(job_id)).state == source


async def test_transition_of_a_missing_job(store: JobStore) -> None:
    with pytest.raises(IllegalTransition):
        await store.transition(999, S.PENDING)
    with pytest.raises(JobNotFound):
        await store.get(999)


async def test_start_up_ends_what_the_last_run_left_half_done(open_store: StoreOpener) -> None:
    store = await open_store()
    unsent = await store.add_submission(new_job())
    sending = await store.transition((await store.add_submission(new_job())).id, S.SUBMITTING)
    done = await store.transition((await store.add_submission(new_job())).id, S.SUBMITTING)
    await store.mark_accepted(done.id, "vid_9", 250, 0.0)
    await store.close()  # the crash: nothing else happened to the first two

    store = await open_store()
    recovered = await store.recover_after_restart()
    assert sorted(job.id for job in recovered) == [unsent.id, sending.id]
    assert (await store.get(unsent.id)).state == S.INTERRUPTED
    assert (await store.get(sending.id)).state == S.UNKNOWN
    assert (await store.get(done.id)).state == S.PENDING
    # Both are owed a final message; neither can go back to being sent. Only a 202 that comes late, after all,
    # may still record the one that was on its way (see the late-202 test).
    owed = await store.untold(older_than=float("inf"), max_notice_attempts=5)
    assert sorted(job.id for job in owed) == [unsent.id, sending.id]
    for job_id in (unsent.id, sending.id):
        with pytest.raises(IllegalTransition):
            await store.transition(job_id, S.SUBMITTING)
    with pytest.raises(IllegalTransition):
        await store.transition(unsent.id, S.PENDING)
    await store.close()


async def test_a_told_request_is_no_longer_owed_and_attempts_are_capped(store: JobStore) -> None:
    first = await store.transition((await store.add_submission(new_job())).id, S.REJECTED)
    second = await store.transition((await store.add_submission(new_job())).id, S.INTERRUPTED)
    delivered_id = await put_in_state(store, S.DELIVERED)
    owed = {job.id for job in await store.untold(older_than=float("inf"), max_notice_attempts=3)}
    assert owed == {first.id, second.id}, "a delivered video is its own final message"
    await store.mark_told(first.id)
    await store.update(second.id, notice_attempts=3)
    assert await store.untold(older_than=float("inf"), max_notice_attempts=3) == []
    assert delivered_id not in owed
    # Ones changed after `older_than` are being told by someone right now.
    third = await store.transition((await store.add_submission(new_job())).id, S.REJECTED)
    assert await store.untold(older_than=third.updated_at - 1, max_notice_attempts=3) == []


async def test_a_duplicate_job_id_fails_the_second_request_charged(store: JobStore) -> None:
    first = await store.transition((await store.add_submission(new_job(user_id=1))).id, S.SUBMITTING)
    second = await store.transition((await store.add_submission(new_job(user_id=2))).id, S.SUBMITTING)
    await store.mark_accepted(first.id, "vid_same", 250, 0.0)
    twice = await store.mark_accepted(second.id, "vid_same", 250, 0.0)
    assert twice.state == S.FAILED and twice.charged_yen == 250 and twice.service_job_id is None
    assert twice.last_error is not None and "vid_same" in twice.last_error and first.reference in twice.last_error
    kept = await store.get(first.id)
    assert (kept.state, kept.service_job_id) == (S.PENDING, "vid_same")
    assert await store.ledger() == (2, 500), "both requests were charged"
    assert [job.id for job in await store.due_jobs(float("inf"), limit=10)] == [first.id], "only the first is polled"


async def test_an_unusable_job_id_is_charged_and_never_polled(store: JobStore) -> None:
    job = await store.transition((await store.add_submission(new_job())).id, S.SUBMITTING)
    failed = await store.mark_charged_unusable(job.id, 250, "'..'")
    assert (failed.state, failed.charged_yen, failed.service_job_id) == (S.FAILED, 250, None)
    # Charged today: it counts toward the day's spend like any accepted job.
    assert failed.accepted_at is not None and failed.finished_at is not None
    assert await store.ledger(since=failed.accepted_at) == (1, 250)
    assert await store.due_jobs(float("inf"), limit=10) == []
    assert await store.ledger() == (1, 250)


async def test_a_full_database_is_store_unavailable_and_records_nothing(tmp_path: Path) -> None:
    store = await JobStore.open(tmp_path / "jobs.sqlite3")
    job = await store.add_submission(new_job())
    # Freeze the file at its current size: the next write finds the database full.
    assert isinstance(store.database, SqliteDatabase)
    raw = store.database.connection
    async with raw.execute("PRAGMA page_count") as cursor:
        row = await cursor.fetchone()
    assert row is not None
    await raw.execute(f"PRAGMA max_page_count = {row[0]}")
    with pytest.raises(StoreUnavailable):
        for _ in range(50):
            await store.add_submission(new_job(prompt="x" * 2000))
    assert (await store.get(job.id)).state == S.RECEIVED
    await store.close()


async def test_concurrent_writers_do_not_lose_updates(store: JobStore) -> None:
    jobs = await asyncio.gather(*(store.add_submission(new_job(user_id=i)) for i in range(50)))
    await asyncio.gather(*(store.transition(job.id, S.SUBMITTING) for job in jobs))
    await asyncio.gather(*(store.mark_accepted(job.id, f"vid_{job.id}", 250, 0.0) for job in jobs))
    await asyncio.gather(*(store.update(job.id, next_poll_at=float(job.id)) for job in jobs))
    assert await store.ledger() == (50, 50 * 250)
    assert len({job.id for job in jobs}) == 50
    # Two racing moves out of the same state: exactly one wins.
    results = await asyncio.gather(
        store.transition(jobs[0].id, S.STALLED), store.transition(jobs[0].id, S.FAILED), return_exceptions=True
    )
    assert sum(isinstance(r, IllegalTransition) for r in results) == 1


async def test_due_jobs_and_next_poll(store: JobStore) -> None:
    a = await store.add_submission(new_job())
    b = await store.add_submission(new_job())
    c = await store.add_submission(new_job())
    await store.transition(a.id, JobState.SUBMITTING)
    await store.mark_accepted(a.id, "a", 250, next_poll_at=50.0)
    await store.transition(b.id, JobState.SUBMITTING)
    await store.mark_accepted(b.id, "b", 250, next_poll_at=10.0)
    await store.transition(c.id, JobState.SUBMITTING)
    await store.mark_accepted(c.id, "c", 250, next_poll_at=500.0)
    await store.transition(c.id, S.FAILED)
    assert await store.next_poll_at() == 10.0
    assert [job.service_job_id for job in await store.due_jobs(now=60.0, limit=10)] == ["b", "a"]
    assert [job.service_job_id for job in await store.due_jobs(now=60.0, limit=1)] == ["b"]
    assert await store.due_jobs(now=5.0, limit=10) == []


async def test_find_by_local_reference_or_service_id_within_a_server(store: JobStore) -> None:
    job = await store.add_submission(new_job(guild_id=10))
    await store.transition(job.id, JobState.SUBMITTING)
    await store.mark_accepted(job.id, "vid_abc", 250, 0.0)
    assert (await store.find(f"#{job.id}", guild_id=10)).id == job.id  # type: ignore[union-attr]
    assert (await store.find(str(job.id), guild_id=10)).id == job.id  # type: ignore[union-attr]
    assert (await store.find("vid_abc", guild_id=10)).id == job.id  # type: ignore[union-attr]
    assert await store.find("vid_abc", guild_id=11) is None
    assert await store.find("#9999", guild_id=10) is None
    # A service job id that reads like a local reference: the local reference wins, the id still finds its own.
    other = await store.add_submission(new_job(guild_id=10))
    await store.transition(other.id, JobState.SUBMITTING)
    await store.mark_accepted(other.id, str(job.id), 250, 0.0)
    assert (await store.find(str(job.id), guild_id=10)).id == job.id  # type: ignore[union-attr]
    assert (await store.find(f"#{other.id}", guild_id=10)).id == other.id  # type: ignore[union-attr]


async def test_find_asks_the_database_the_same_one_question_whatever_the_answer(
    store: JobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No existence oracle: a reference to a row of this server (someone else's, which /status then answers as not
    # found), to no row, or to another server's row costs the same one query of the same shape.
    job = await store.add_submission(new_job(guild_id=10))
    await store.transition(job.id, JobState.SUBMITTING)
    await store.mark_accepted(job.id, "vid_abc", 250, 0.0)
    elsewhere = await store.add_submission(new_job(guild_id=11))
    asked: list[str] = []
    database = store._db
    for name in ("fetch_all", "fetch_one", "fetch_many", "execute"):
        real = getattr(database, name)

        async def spy(*args: object, _real: object = real, _name: str = name) -> object:
            asked.append(f"{_name}: {args[0]}")
            return await _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(database, name, spy)
    for reference in (f"#{job.id}", "#9999", str(job.id), "9999", f"#{elsewhere.id}", "vid_abc", "vid_none",
                      "#" + "9" * 30, "\x00"):
        asked.clear()
        await store.find(reference, guild_id=10)
        assert len(asked) == 1, (reference, asked)
        if reference == f"#{job.id}":
            shape = asked[0]
        assert asked[0] == shape, reference


@pytest.mark.parametrize("reference", [
    "#" + "9" * 19, "#" + "1" * 20, "9" * 20, "#" + "1" * 5000, "1" * 100_000, "#-1", "#0x10", "#１２", "# 12",
    "\x00", "#" + "9" * 19 + "\x00",
])
async def test_a_reference_of_any_length_or_shape_is_simply_not_found(store: JobStore, reference: str) -> None:
    assert await store.find(reference, guild_id=10) is None


async def test_recent_jobs_newest_first_and_ledger_totals(store: JobStore) -> None:
    for i in range(12):
        job = await store.add_submission(new_job(user_id=1, guild_id=10, prompt=f"p{i}"))
        await store.transition(job.id, JobState.SUBMITTING)
        await store.mark_accepted(job.id, f"v{i}", 250, 0.0)
    other = await store.add_submission(new_job(user_id=2, guild_id=20))
    await store.transition(other.id, JobState.SUBMITTING)
    await store.mark_accepted(other.id, "other", 250, 0.0)
    await store.add_submission(new_job(user_id=1, guild_id=10))  # not charged yet
    recent = await store.recent_jobs(1, 10)
    assert len(recent) == 10
    assert [j.id for j in recent] == sorted((j.id for j in recent), reverse=True)
    assert await store.ledger() == (13, 13 * 250)
    assert await store.ledger(guild_id=10) == (12, 12 * 250)
    assert await store.ledger(user_id=2) == (1, 250)


async def test_meta_round_trip(store: JobStore) -> None:
    assert await store.get_meta("x") is None
    await store.set_meta("x", "1")
    await store.set_meta("x", "2")
    assert await store.get_meta("x") == "2"


async def test_update_refuses_state_and_unknown_columns(store: JobStore) -> None:
    job = await store.add_submission(new_job())
    with pytest.raises(ValueError):
        await store.update(job.id, state="pending")
    with pytest.raises(ValueError):
        await store.update(job.id, nonsense=1)


async def test_admission_cooldown_and_active_limit(open_store: StoreOpener) -> None:
    clock = Clock()
    store = await open_store(clock=clock)
    rules = Admission(cooldown_seconds=60, max_active_jobs=1)
    await store.add_submission(new_job(), rules)
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), rules)
    assert refused.value.code == "cooldown" and refused.value.retry_at == clock.now + 60
    clock.now += 61
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), rules)
    assert refused.value.code == "too_many_active"


async def test_admission_edges_a_cooldown_just_over_and_a_cap_reached_exactly(open_store: StoreOpener) -> None:
    clock = Clock()
    store = await open_store(clock=clock)
    cap = SpendCap("member_daily_cap", cap_yen=500, start=0.0, end=clock.now + 86_400, member_only=True)
    rules = Admission(cooldown_seconds=60, price_yen=250, caps=(cap,))
    await store.add_submission(new_job(), rules)
    clock.now += 59.5
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), rules)
    assert refused.value.code == "cooldown" and refused.value.retry_at == clock.now + 0.5
    clock.now += 0.5  # exactly the cooldown since the last request: let in
    await store.add_submission(new_job(), rules)  # 250 + 250 = the cap exactly: let in
    clock.now += 60
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), rules)
    assert refused.value.code == "member_daily_cap"
    assert refused.value.params == {"spent": 500, "cap": 500, "left": 0}
    assert refused.value.retry_at == cap.end
    await store.add_submission(new_job(user_id=2), rules)  # another member's own cap


async def test_a_cap_that_counts_credits_still_counts_a_credited_charge(open_store: StoreOpener) -> None:
    clock = Clock()
    store = await open_store(clock=clock)
    end = clock.now + 86_400
    servers = SpendCap("member_daily_cap", cap_yen=250, start=0.0, end=end, member_only=True)
    hosts = SpendCap("host_member_daily_cap", cap_yen=250, start=0.0, end=end, member_only=True, counts_credited=True)
    job = await store.add_submission(new_job(), Admission(price_yen=250, caps=(servers, hosts)))
    await store.transition(job.id, S.SUBMITTING)
    await store.mark_accepted(job.id, "vid_1", 250, 0.0)
    await store.transition(job.id, S.FAILED)
    await store.mark_credited(job.id, guild_id=10, by_user_id=900)
    await store.add_submission(new_job(), Admission(price_yen=250, caps=(servers,)))  # credited: not counted
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_submission(new_job(), Admission(price_yen=250, caps=(hosts,)))
    assert refused.value.code == "host_member_daily_cap" and refused.value.params["spent"] == 500


async def test_admission_is_race_free(store: JobStore) -> None:
    rules = Admission(max_active_jobs=1)
    results = await asyncio.gather(*(store.add_submission(new_job(), rules) for _ in range(5)),
                                   return_exceptions=True)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, AdmissionRefused) for r in results if isinstance(r, BaseException))


async def test_a_waiting_jobs_place_in_line_counts_the_waiting_jobs_before_it(store: JobStore) -> None:
    first, second, third = [(await store.add_submission(new_job(user_id=n))).id for n in (1, 2, 3)]
    await store.transition(first, S.SUBMITTING)
    assert [await store.queue_position(job) for job in (first, second, third)] == [1, 2, 3]
    await store.transition(first, S.PENDING)
    await store.transition(first, S.IN_PROGRESS)  # generating: no longer in line
    await store.transition(second, S.CANCELLED)
    assert [await store.queue_position(job) for job in (first, second, third)] == [None, None, 1]
    assert await store.queue_position(999) is None


async def test_each_process_refreshes_only_the_receipts_of_the_jobs_it_holds(open_store: StoreOpener) -> None:
    store = await open_store()
    mine, theirs = Lease("mine", seconds=30), Lease("theirs", seconds=30)
    now = store.now()
    held = {}
    for lease in (mine, theirs):
        job = await store.add_submission(
            NewJob(model="m", prompt="p", seed=None, user_id=1, guild_id=10, channel_id=100,
                   interaction_token="t", interaction_expires_at=now + 900), lease=lease)
        await store.transition(job.id, S.SUBMITTING)
        await store.mark_accepted(job.id, f"vid_{lease.owner}", 250, next_poll_at=now)
        await store.update(job.id, reply_message_id=1)
        held[lease.owner] = job.id
    async def due(owner: str | None) -> list[int]:
        return [j.id for j in await store.receipts_to_refresh(now=now + 1, older_than=now + 1, limit=10, owner=owner)]

    assert await due("mine") == [held["mine"]] and await due("theirs") == [held["theirs"]]
    assert len(await due(None)) == 2  # one process alone: every receipt


async def test_the_longest_running_live_process_leads_the_shared_chores(open_store: StoreOpener) -> None:
    clock = Clock(1_000.0)
    store = await open_store(clock=clock)
    first, second = Lease("first", seconds=30), Lease("second", seconds=30)
    assert await store.leads_chores(second)  # no live heartbeat at all: whoever asks leads
    await store.renew_leases(first)
    clock.now += 1
    await store.renew_leases(second)
    assert await store.leads_chores(first) and not await store.leads_chores(second)
    clock.now += 31  # the first stopped renewing a lease ago
    await store.renew_leases(second)
    assert await store.leads_chores(second) and not await store.leads_chores(first)


async def test_recording_a_202_twice_changes_nothing(store: JobStore) -> None:
    """A retry after a commit whose answer was lost (a dropped connection) finds it recorded: still pending."""
    job = await store.add_submission(new_job())
    await store.transition(job.id, S.SUBMITTING)
    first = await store.mark_accepted(job.id, "vid_once", 250, next_poll_at=5.0)
    again = await store.mark_accepted(job.id, "vid_once", 250, next_poll_at=9.0)
    assert (again.state, again.charged_yen, again.next_poll_at) == (S.PENDING, 250, 5.0)
    assert again == await store.get(job.id) and first.state == S.PENDING
    assert (await store.ledger()) == (1, 250), "charged once"


async def test_a_late_202_on_a_request_given_up_as_unknown_is_recorded_and_taken_back(store: JobStore) -> None:
    """Its process stalled past its lease; another took the request over and ended it unknown (told). The 202
    that then arrives is charged in the ledger, and the process that got it polls the job."""
    stalled, survivor = Lease("stalled", seconds=30), Lease("survivor", seconds=30)
    job = await store.add_submission(new_job(), lease=stalled)
    await store.transition(job.id, S.SUBMITTING, owner=stalled.owner)
    store_clock_now = store.now()
    await store.transition(job.id, S.UNKNOWN, last_error="the bot stopped while the request was being sent",
                           told_at=store_clock_now)
    await store.update(job.id, lease_owner=survivor.owner)  # as a claim would leave it, before the telling

    late = await store.mark_accepted(job.id, "vid_late", 250, next_poll_at=1.0, lease=stalled)
    assert (late.state, late.charged_yen, late.service_job_id) == (S.PENDING, 250, "vid_late")
    assert late.lease_owner == stalled.owner, "the process that got the 202 polls it"
    assert late.last_error == ACCEPTED_LATE, "marked, so its requester is told the video comes after all"
    assert await store.ledger() == (1, 250)
    on_time = await store.add_submission(new_job())
    await store.transition(on_time.id, S.SUBMITTING)
    assert (await store.mark_accepted(on_time.id, "vid_on_time", 250, next_poll_at=1.0)).last_error is None


async def test_a_202_whose_answer_cannot_be_read_is_charged_failed_and_counted(store: JobStore) -> None:
    job = await store.add_submission(new_job())
    await store.transition(job.id, S.SUBMITTING)
    failed = await store.mark_charged_unreadable(job.id, 250)
    assert (failed.state, failed.charged_yen, failed.service_job_id) == (S.FAILED, 250, None)
    assert failed.accepted_at is not None and failed.accepted_at == failed.finished_at
    assert "UTC" in (failed.last_error or "")
    assert await store.ledger() == (1, 250)
    assert [usage.id for usage in await store.usage_jobs(10, 0, failed.accepted_at + 1)] == [job.id]


# -- one-trip writes (Database.write_steps) and SQLite's BEGIN sent with the first statement ---------------


async def test_write_steps_commit_together_or_stop_at_a_step_without_a_row(store: JobStore) -> None:
    db = store.database
    results = await db.write_steps([
        Step("INSERT INTO meta (key, value) VALUES ('a', '1') RETURNING key"),
        Step("UPDATE meta SET value = '2' WHERE key = 'a' RETURNING value", needs_row=True),
    ])
    assert results is not None and [[tuple(row) for row in rows] for rows in results] == [[("a",)], [("2",)]]

    stopped = await db.write_steps([
        Step("INSERT INTO meta (key, value) VALUES ('b', '1')"),
        Step("UPDATE meta SET value = '3' WHERE key = 'nowhere' RETURNING value", needs_row=True),
        Step("INSERT INTO meta (key, value) VALUES ('c', '1')"),
    ])
    assert stopped is None
    assert await store.meta_with_prefix("") == {"a": "2"}, "the steps before the stop were rolled back"


async def test_a_refused_audited_move_writes_no_event(store: JobStore) -> None:
    job_id = await put_in_state(store, S.DELIVERED)
    before = await store.fetch_all("SELECT id FROM events")
    with pytest.raises(IllegalTransition):
        await store.transition(job_id, S.FAILED)  # `failed` is audited: its event goes with the move or not at all
    assert await store.fetch_all("SELECT id FROM events") == before
    assert (await store.get(job_id)).state == S.DELIVERED


async def test_a_repeated_202_on_the_one_trip_path_changes_nothing(store: JobStore) -> None:
    job_id = await put_in_state(store, S.SUBMITTING)
    first = await store.mark_accepted(job_id, "vid_9", 250, next_poll_at=10.0)
    again = await store.mark_accepted(job_id, "vid_9", 250, next_poll_at=99.0)
    assert again == first and again.state == S.PENDING
    events = await store.fetch_all("SELECT kind FROM events WHERE job_id = ?", (job_id,))
    assert [row[0] for row in events] == ["accepted"], "one charge, one event"


async def test_a_charged_failure_recorded_again_changes_nothing_and_keeps_the_time_given(store: JobStore) -> None:
    unreadable, unusable = await put_in_state(store, S.SUBMITTING), await put_in_state(store, S.SUBMITTING)
    first = await store.mark_charged_unreadable(unreadable, 250, at=1_700_000_000.0)
    assert first.accepted_at == 1_700_000_000.0 and "2023-11-14 22:13:20 UTC" in (first.last_error or "")
    # A retry after a commit whose answer was lost: the same row, one charge, one event.
    assert await store.mark_charged_unreadable(first.id, 250, at=1_700_000_009.0) == first
    again = await store.mark_charged_unusable(unusable, 250, "..")
    assert await store.mark_charged_unusable(unusable, 250, "..") == again
    assert await store.ledger() == (2, 500)
    events = await store.fetch_all("SELECT job_id FROM events WHERE kind = 'failed'")
    assert sorted(row[0] for row in events) == [unreadable, unusable]
    with pytest.raises(IllegalTransition):  # a request refused (nothing charged) is not recorded as charged
        await store.mark_charged_unusable(await put_in_state(store, S.REJECTED), 250, "..")


async def test_events_are_read_a_share_per_server_passed_over_and_pruned_on_both_backends(
    open_store: StoreOpener,
) -> None:
    clock = Clock(1_000.0)
    servers = ServerStore(await open_store(clock=clock))
    for user in range(6):
        await servers.add_event(10, "refused", user_id=user)
    await servers.add_event(11, "setting", user_id=9, details={"key": "language"})
    await servers.add_event(12, "refused", user_id=8)

    shares = await servers.unposted_by_server(per_server=2, servers=2)
    assert list(shares) == [10, 11]  # waiting longest first; server 12 waits for the next round
    assert [event.user_id for event in shares[10]] == [0, 1]

    assert await servers.pass_over_events(10, written_until=clock.now) == 6
    assert list(await servers.unposted_by_server(per_server=2, servers=5)) == [11, 12]
    # A server whose share is still being posted is left out, and its place goes to the next server.
    assert list(await servers.unposted_by_server(per_server=2, servers=1, excluding={11})) == [12]
    await servers.mark_posted([event.id for share in shares.values() for event in share if event.guild_id == 11])
    clock.now += 100
    # Posted before 1,050: server 10's six lines; server 11's one settings change is its history, kept.
    assert await servers.prune_events(posted_before=1_050, keep_settings=1, batch=4) == 6
    assert len(await servers.recent_events(11, "setting")) == 1
    assert list(await servers.unposted_by_server(per_server=2, servers=5)) == [12]


async def test_open_offers_are_bounded_per_member_and_closed_ones_pruned_on_both_backends(
    open_store: StoreOpener,
) -> None:
    clock = Clock(1_000.0)
    store = await open_store(clock=clock)

    def offer(user_id: int = 1) -> NewOffer:
        return NewOffer(kind="confirm", user_id=user_id, guild_id=10, channel_id=1, locale="en-US",
                        expires_at=clock.now + 60, prompt="a fox")

    first = await store.add_offer(offer(), max_open=2)
    await store.add_offer(offer(), max_open=2)
    with pytest.raises(AdmissionRefused) as refused:
        await store.add_offer(offer(), max_open=2)
    assert (refused.value.code, refused.value.retry_at, refused.value.params) == (
        "too_many_offers", 1_060.0, {"open": 2, "limit": 2})
    await store.add_offer(offer(user_id=2), max_open=2)
    assert await store.use_offer(first.id, "cancelled")
    clock.now += 30
    third = await store.add_offer(offer(), max_open=2)  # one slot freed by the cancel

    clock.now += 120  # all of them closed since: the first cancelled at 1,000, the others expired at 1,060 and 1,090
    assert await store.prune_offers(closed_before=1_061.0) == 3
    assert await store.get_offer(first.id) is None and await store.get_offer(third.id) is not None
    assert await store.prune_offers(closed_before=clock.now) == 1
