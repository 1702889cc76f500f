"""One bot process per SQLite file: the second is refused; a lock dies with its process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from bot.core.host import SetupError
from bot.store.instance_lock import AlreadyRunning, lock_path, single_process


def test_a_second_holder_is_refused_and_the_lock_frees_when_released(tmp_path: Path) -> None:
    database = tmp_path / "data" / "bot.sqlite3"
    with single_process(database):
        with pytest.raises(AlreadyRunning) as refused, single_process(database):
            pass
        assert str(database) in str(refused.value) and "SQLite serves one process" in str(refused.value)
    with single_process(database):  # free again
        pass


async def test_a_killed_holder_leaves_no_lock_behind(tmp_path: Path) -> None:
    database = tmp_path / "bot.sqlite3"
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sys, time; from pathlib import Path; from bot.store.instance_lock import single_process\n"
        f"with single_process(Path({str(database)!r})):\n    print('held', flush=True); time.sleep(60)",
        stdout=asyncio.subprocess.PIPE,
    )
    assert holder.stdout is not None
    assert (await holder.stdout.readline()).strip() == b"held"
    with pytest.raises(AlreadyRunning) as refused, single_process(database):
        pass
    assert f"process {holder.pid}" in str(refused.value)
    holder.kill()
    await holder.wait()
    with single_process(database):
        assert lock_path(database).exists()


def test_a_lock_the_bot_cannot_open_is_the_hosts_mistake_in_one_line(tmp_path: Path) -> None:
    database = tmp_path / "bot.sqlite3"
    lock_path(database).mkdir()  # anything in the lock file's way; root-owned leftovers of a `sudo` run alike
    with pytest.raises(SetupError) as refused, single_process(database):
        pass
    assert str(refused.value) == f"DATABASE_PATH: {lock_path(database)} is a folder, not a file; set DATABASE_PATH " \
                                 "to a file's path"


def test_the_lock_names_the_setting_the_database_came_from(tmp_path: Path) -> None:
    # DATABASE_URL=sqlite:///… names the file: the line must send the host to that setting, not DATABASE_PATH.
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(SetupError) as refused, single_process(blocker / "bot.sqlite3", setting="DATABASE_URL"):
        pass
    assert str(refused.value) == f"DATABASE_URL: {blocker} is a file, not a folder; move that file away, or set " \
                                 "DATABASE_URL to another path"
