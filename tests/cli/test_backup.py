"""`python -m bot backup PATH`: a consistent copy of the live database."""

import asyncio
import contextlib
import os
import re
import sqlite3
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli.backup import BackupError, backup_database, stamped
from bot.store.jobs import SCHEMA_VERSION, JobState, JobStore, NewJob

REPO_ROOT = Path(__file__).resolve().parents[2]


def rows(path: Path) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT id, state, prompt, charged_yen FROM jobs ORDER BY id").fetchall()


def new_job(n: int) -> NewJob:
    return NewJob(model="m", prompt=f"prompt {n}; with 'quotes'", seed=n, user_id=n, guild_id=1, channel_id=2)


async def test_backup_while_another_connection_writes(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    store = await JobStore.open(live)
    for n in range(50):
        job = await store.add_submission(new_job(n))
        await store.transition(job.id, JobState.SUBMITTING)
        await store.mark_accepted(job.id, f"vid_{n}", 250, next_poll_at=0.0)
    writing = asyncio.Event()
    stop = asyncio.Event()

    async def writer() -> int:
        n = 50
        while not stop.is_set():
            job = await store.add_submission(new_job(n))
            await store.transition(job.id, JobState.SUBMITTING)
            await store.mark_accepted(job.id, f"vid_{n}", 250, next_poll_at=0.0)
            writing.set()
            n += 1
        return n

    task = asyncio.create_task(writer())
    await writing.wait()
    destination = tmp_path / "backups" / "copy.sqlite3"
    path, schema = await asyncio.to_thread(backup_database, live, destination)
    # The writer kept going during the copy (it has the event loop while the copy runs in a thread).
    stop.set()
    written = await task
    await store.close()

    assert (path, schema) == (destination, SCHEMA_VERSION)
    assert list(destination.parent.iterdir()) == [destination]  # no temporary file left behind
    copied = rows(destination)
    assert len(copied) >= 50
    # A consistent snapshot: exactly the rows committed up to one instant, in order. (A request takes
    # three transactions, received → submitting → pending, so the newest copied row may be mid-way.)
    assert [(i, prompt) for i, _s, prompt, _c in copied] == [(i, prompt) for i, _s, prompt, _c in rows(live)][
        : len(copied)]
    assert all(state == "pending" and charged == 250 for _id, state, _prompt, charged in copied[:50])
    assert all((state, charged) in {("received", 0), ("submitting", 0), ("pending", 250)}
               for _id, state, _prompt, charged in copied)
    assert len(rows(live)) == written
    with contextlib.closing(sqlite3.connect(destination)) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one self-contained file


async def test_backup_into_a_directory_picks_a_dated_name(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    await (await JobStore.open(live)).close()
    folder = tmp_path / "backups"
    folder.mkdir()
    path, _schema = backup_database(live, folder)
    assert path.parent == folder and path.name.startswith("bot-") and path.suffix == ".sqlite3"


async def test_two_backups_into_one_folder_in_the_same_second_are_two_files(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    await (await JobStore.open(live)).close()
    folder = tmp_path / "backups"
    folder.mkdir()
    first, _ = backup_database(live, folder)
    second, _ = backup_database(live, folder)
    assert first != second and first.parent == second.parent == folder
    assert sorted(folder.iterdir()) == sorted([first, second])


async def test_an_existing_backup_file_is_replaced_only_when_forced(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    await (await JobStore.open(live)).close()
    destination = tmp_path / "copy.sqlite3"
    destination.write_bytes(b"last week's backup")
    with pytest.raises(BackupError, match=r"exists already.*--force"):
        backup_database(live, destination)
    assert destination.read_bytes() == b"last week's backup"
    assert backup_database(live, destination, force=True) == (destination, SCHEMA_VERSION)
    assert rows(destination) == rows(live)


def test_backup_refuses_to_overwrite_the_database_or_copy_nothing(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    with pytest.raises(BackupError, match="no database"):
        backup_database(live, tmp_path / "copy.sqlite3")
    assert not live.exists()  # looking for it did not create an empty one
    sqlite3.connect(live).close()
    with pytest.raises(BackupError, match="must not overwrite"):
        backup_database(live, tmp_path / "." / "bot.sqlite3")


async def test_a_failed_backup_leaves_the_previous_one_whole(tmp_path: Path) -> None:
    good = tmp_path / "bot.sqlite3"
    store = await JobStore.open(good)
    await store.add_submission(new_job(1))
    await store.close()
    destination = tmp_path / "backups" / "latest.sqlite3"
    backup_database(good, destination)
    broken = tmp_path / "broken.sqlite3"
    broken.write_bytes(b"not a database" * 1000)
    with pytest.raises(sqlite3.DatabaseError):
        backup_database(broken, destination, force=True)
    assert rows(destination) == rows(good)
    assert list(destination.parent.iterdir()) == [destination]


async def backup_command(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "VIDEO_", "LOG_"))}
    env.update(PYTHONPATH=str(REPO_ROOT), DISCORD_TOKEN="x", VIDEO_API_BASE_URL="http://127.0.0.1:1",
               VIDEO_API_KEY="sk-any-key-0000000", DATABASE_PATH=str(tmp_path / "bot.sqlite3"))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "backup", *args, cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    return process.returncode or 0, out.decode(), err.decode()


async def test_the_backup_command_prints_the_path_and_the_schema(tmp_path: Path) -> None:
    live = tmp_path / "bot.sqlite3"
    store = await JobStore.open(live)
    await store.add_submission(new_job(1))
    await store.close()
    destination = tmp_path / "copy.sqlite3"
    code, out, err = await backup_command(tmp_path, str(destination))
    assert code == 0, err
    assert out.strip() == f"backup: {destination} (schema {SCHEMA_VERSION})"
    assert rows(destination) == rows(live)
    # Again to the same file: refused in one line, the first copy kept; with --force, replaced.
    code, out, err = await backup_command(tmp_path, str(destination))
    assert (code, out) == (2, "")
    assert err == (f"backup: {destination} exists already; name another file, a folder (for a time-stamped file), "
                   "or pass --force to replace it\n")
    code, out, err = await backup_command(tmp_path, str(destination), "--force")
    assert code == 0 and out.strip() == f"backup: {destination} (schema {SCHEMA_VERSION})", err


async def test_a_path_ending_in_a_slash_is_a_folder_made_for_a_time_stamped_backup(tmp_path: Path) -> None:
    await (await JobStore.open(tmp_path / "bot.sqlite3")).close()
    code, out, err = await backup_command(tmp_path, "newdir/")
    assert code == 0, err
    [made] = (tmp_path / "newdir").iterdir()
    assert re.fullmatch(r"bot-\d{8}-\d{6}\.sqlite3", made.name)
    assert out.strip() == f"backup: newdir/{made.name} (schema {SCHEMA_VERSION})"


def test_time_stamped_names_sort_in_the_order_they_were_made(tmp_path: Path) -> None:
    # `ls`, `sort` and `tail -n 1` find the newest by name: a second backup in the same second sorts after the
    # first, the tenth after the ninth, and the next second after them all.
    second = datetime(2026, 5, 2, 23, 54, 18, tzinfo=UTC)
    made: list[str] = []
    for now in [second] * 12 + [second + timedelta(seconds=1)]:
        path = stamped(tmp_path, Path("bot.sqlite3"), now)
        path.touch()
        made.append(path.name)
    assert made[:3] == ["bot-20260502-235418.sqlite3", "bot-20260502-235418_02.sqlite3",
                        "bot-20260502-235418_03.sqlite3"]
    assert sorted(made) == made
    assert len(set(made)) == len(made)
