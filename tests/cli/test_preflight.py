"""The host's own mistakes (a folder or file the bot cannot write, a port in use), as the real `python -m bot` tells
them: one line naming the setting, the path and the fix, exit status 2, no traceback; and `check` finds each first.

Root writes through permission bits, so these use what stops root too: sysfs (which takes no new files) and
read-only bind mounts in a mount namespace of the child's own (`unshare`); a test that cannot set one up is
skipped, saying so.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.common import version
from bot.cli.preflight import database_problem, folder_problem, port_problem
from bot.store.jobs import JobStore
from tests.cli.helpers import (
    TOKEN,
    Barred,
    base_env,
    closed_port,
    discord_at,
    finished,
    run_bot,
    settings_for,
)
from tests.conftest import SIM_KEY


def can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp"],
                           capture_output=True, timeout=10)
    return probe.returncode == 0


needs_read_only_mounts = pytest.mark.skipif(
    not can_mount_read_only(), reason="no mount namespace here (unshare -rm): a read-only mount cannot be made")


async def run_read_only(args: list[str], env: dict[str, str], cwd: Path, *read_only: Path) -> tuple[int, str, str]:
    """`python -m bot ARGS` with `read_only` paths bind-mounted read-only for it alone, as a read-only volume."""
    mounts = " && ".join(f"mount --bind '{p}' '{p}' && mount -o remount,bind,ro '{p}'" for p in read_only)
    script = f'{mounts} && exec "$@"'
    process = await asyncio.create_subprocess_exec(
        "unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "bot", *args,
        cwd=cwd, env={**base_env(), **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    return await finished(process)


def settings_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Settings whose Discord and service are never reached: a mistake of the host's is told before either."""
    return {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": f"http://127.0.0.1:{closed_port()}",
            "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(tmp_path / "data" / "bot.sqlite3"),
            "VIDEO_STORAGE_DIR": str(tmp_path / "data" / "videos"), "HTTP_TIMEOUT_SECONDS": "1", **extra}


def startup(database: Path) -> str:
    return (f"INFO     bot: video-request-bot {version()} starting: database {database} (SQLite); video service "
            "http://127.0.0.1:")


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder this user cannot write in, and the end of the line that says so."""
    if os.geteuid() == 0:
        if not Path("/sys").is_dir():
            pytest.skip("root, and no /sys: no folder root cannot write in")
        # The bot would create /sys/bot-data; root may not create anything in sysfs.
        yield Path("/sys/bot-data"), "cannot write in the folder /sys (permission denied, even for root); set " \
                                     "DATABASE_PATH to another place"
        return
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)  # as a folder a `sudo` run created is to everyone else
    uid = os.getuid()
    yield locked, (f"cannot write in the folder {locked} (permission denied for user {uid}); give that user write "
                   f"access (sudo chown -R {uid} {locked}), or set DATABASE_PATH to a place it can write")
    locked.chmod(0o755)


@pytest.mark.parametrize("command", ["run", "sync", "pause"])
async def test_a_database_folder_the_bot_cannot_write_is_one_line_and_exit_2(
    command: str, unwritable: tuple[Path, str], tmp_path: Path
) -> None:
    folder, said = unwritable
    env = settings_env(tmp_path, DATABASE_PATH=str(folder / "bot.sqlite3"))
    code, out, err = await run_bot([command], env, tmp_path)
    assert code == 2 and out == ""
    lines = err.splitlines()
    if command == "run":
        assert startup(folder / "bot.sqlite3") in lines.pop(0)
    assert lines == [f"python -m bot: DATABASE_PATH: {said}"]


@needs_read_only_mounts
async def test_a_read_only_data_folder_is_one_line_and_check_finds_it_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    await (await JobStore.open(data / "bot.sqlite3")).close()
    env = settings_env(tmp_path)
    line = f"DATABASE_PATH: {data} is on a read-only file system; mount it read-write, or set DATABASE_PATH to a " \
           "writable place"
    code, out, err = await run_read_only(["run"], env, tmp_path, data)
    assert code == 2 and out == ""
    [start, refused] = err.splitlines()
    assert startup(data / "bot.sqlite3") in start
    assert refused == f"python -m bot: {line}"
    code, out, err = await run_read_only(["check"], env, tmp_path, data)
    assert code == 2 and "Traceback" not in out + err
    assert f"database: FAILED: {line}" in out.splitlines()


@needs_read_only_mounts
@pytest.mark.parametrize("command", ["check", "run"])
async def test_a_database_file_the_bot_cannot_write_fails_check_and_start_naming_the_file(
    command: str, tmp_path: Path
) -> None:
    # The folder is writable, the file is not (restored from a read-only copy, or left to root by `sudo`).
    database = tmp_path / "data" / "bot.sqlite3"
    database.parent.mkdir()
    await (await JobStore.open(database)).close()
    code, out, err = await run_read_only([command], settings_env(tmp_path), tmp_path, database)
    assert code == 2 and "Traceback" not in out + err
    line = f"DATABASE_PATH: {database} is on a read-only file system; mount it read-write, or set DATABASE_PATH " \
           "to a writable place"
    if command == "check":
        assert f"database: FAILED: {line}" in out.splitlines()  # not "OK (schema …)"
    else:
        assert out == "" and err.splitlines()[1:] == [f"python -m bot: {line}"]


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


async def test_a_metrics_port_in_use_is_one_line_and_check_finds_it_first(port_in_use: int, tmp_path: Path) -> None:
    env = settings_env(tmp_path, METRICS_PORT=str(port_in_use))
    line = f"METRICS_PORT: port {port_in_use} on 127.0.0.1 is already in use; stop the program that uses it, or " \
           "set METRICS_PORT to a free port"
    code, out, err = await run_bot(["run"], env, tmp_path)
    assert code == 2 and out == ""
    assert err.splitlines()[1:] == [f"python -m bot: {line}"]
    code, out, err = await run_bot(["check"], env, tmp_path)
    assert code == 2 and f"metrics: FAILED: {line}" in out.splitlines() and "Traceback" not in out + err


async def test_a_dotenv_the_bot_cannot_read_is_one_line_and_exit_2(barred: Barred, tmp_path: Path) -> None:
    # Written by another user with a private mode (an editor run with sudo, a copy from another account).
    env_file = tmp_path / ".env"
    env_file.write_text("DISCORD_TOKEN=x\n")
    barred.bar(env_file)
    if barred.as_root:
        fix = "give the bot's user read access to it, or start the bot from a folder whose .env it can read"
    else:
        uid = os.getuid()
        fix = f"give user {uid} read access to it, keeping it private (sudo chown {uid} {env_file} && sudo chmod " \
              f"600 {env_file})"
    for command in ("run", "check"):
        code, out, err = await barred.run([command], {}, tmp_path)
        assert (code, out) == (2, ""), err
        assert err == f"python -m bot: cannot read {env_file} ({barred.denied()}); {fix}\n"


async def test_a_dotenv_not_in_utf8_names_the_line_and_the_fix(tmp_path: Path) -> None:
    # Saved by an editor in the system's Japanese encoding, with a comment in Japanese on its second line.
    (tmp_path / ".env").write_bytes("DISCORD_TOKEN=x\n# 動画ボットの設定\nVIDEO_API_KEY=k\n".encode("shift_jis"))
    for command in ("check", "sync"):
        code, out, err = await run_bot([command], {}, tmp_path)
        assert (code, out) == (2, ""), err
        assert err == f"python -m bot: cannot read {tmp_path / '.env'}: line 2 is not UTF-8 text; save the file as " \
                      "UTF-8\n"


@pytest.fixture
def locked(barred: Barred, tmp_path: Path) -> Path:
    """A folder of another user's, mode 0700 (a home folder): the bot's user may not look into it."""
    folder = tmp_path / "locked"
    (folder / "data").mkdir(parents=True)
    barred.bar(folder)
    return folder


async def test_a_folder_the_bot_cannot_look_into_is_named_by_check_which_goes_on(
    barred: Barred, locked: Path, tmp_path: Path
) -> None:
    env = settings_env(tmp_path, DATABASE_PATH=str(locked / "data" / "bot.sqlite3"),
                       VIDEO_STORAGE_DIR=str(locked / "videos"))
    code, out, err = await barred.run(["check"], env, tmp_path, discord=discord_at(
        f"http://127.0.0.1:{closed_port()}/api/v10"))
    assert code == 2 and "Traceback" not in out + err
    lines = out.splitlines()
    assert lines[2:4] == [f"database: FAILED: {barred.cannot_look_into('DATABASE_PATH', locked)}",
                          f"videos: FAILED: {barred.cannot_look_into('VIDEO_STORAGE_DIR', locked)}"]
    # The other checks still ran, and the summary came.
    assert [line.split(":")[0] for line in lines] == ["settings", "models", "database", "videos", "video service",
                                                      "discord"]
    assert err == "check failed: database, videos, video service, discord\n"


@pytest.mark.parametrize("command", ["run", "demo", "migrate-db"])
async def test_a_path_in_a_folder_the_bot_cannot_look_into_is_one_line_and_exit_2(
    command: str, barred: Barred, locked: Path, tmp_path: Path
) -> None:
    database = locked / "data" / "bot.sqlite3"
    args, setting, env = {
        "run": (["run"], "DATABASE_PATH", settings_env(tmp_path, DATABASE_PATH=str(database))),
        "demo": (["demo", "--out", str(locked / "demo-output")], "--out", {}),
        "migrate-db": (["migrate-db", "--from", str(database), "--to", "postgresql://bot:pw@127.0.0.1:1/bot"],
                       "--from", {}),
    }[command]
    code, out, err = await barred.run(args, env, tmp_path)
    assert (code, out) == (2, ""), err
    lines = err.splitlines()
    if command == "run":
        assert startup(database) in lines.pop(0)
    prog = "python -m bot" if command == "run" else f"python -m bot {command}"
    assert lines == [f"{prog}: {barred.cannot_look_into(setting, locked)}"]


@pytest.mark.parametrize("command", ["run", "sync", "pause", "backup", "check"])
async def test_a_database_path_naming_a_file_that_is_not_sqlite_is_one_line_and_exit_2(
    command: str, tmp_path: Path
) -> None:
    # A typo that names the models file, a notes file, an encrypted copy: no traceback, the file and the fix.
    wrong = tmp_path / "notes.txt"
    wrong.write_text("the bot's database lives in data/\n" * 20)
    env = settings_env(tmp_path, DATABASE_PATH=str(wrong))
    args = ["backup", str(tmp_path / "backups") + "/"] if command == "backup" else [command]
    code, out, err = await run_bot(args, env, tmp_path, discord=discord_at(f"http://127.0.0.1:{closed_port()}/api/v10"))
    line = f"DATABASE_PATH: {wrong} is not a SQLite database; point DATABASE_PATH at the bot's database, or " \
           "restore a backup"
    assert code == 2 and "Traceback" not in out + err
    if command == "check":
        assert f"database: FAILED: {line}" in out.splitlines()
        return
    lines = err.splitlines()
    if command == "run":
        assert startup(wrong) in lines.pop(0)
    assert (out, lines) == ("", [f"python -m bot: {line}"])
    assert wrong.read_text() == "the bot's database lives in data/\n" * 20  # nothing written to it


@pytest.mark.parametrize("command", ["pause", "check"])
async def test_a_damaged_database_is_one_line_and_exit_2(command: str, tmp_path: Path) -> None:
    database = tmp_path / "data" / "bot.sqlite3"
    database.parent.mkdir()
    await (await JobStore.open(database)).close()
    with database.open("r+b") as file:  # the first page's b-tree, past the 100-byte header: a torn write
        file.seek(100)
        file.write(b"\xff" * 10)
    env = settings_env(tmp_path)
    code, out, err = await run_bot([command], env, tmp_path, discord=discord_at(f"http://127.0.0.1:{closed_port()}/api/v10"))
    line = f"DATABASE_PATH: {database} is damaged (database disk image is malformed); restore a backup, or point " \
           "DATABASE_PATH at the bot's database"
    assert code == 2 and "Traceback" not in out + err
    if command == "check":
        assert f"database: FAILED: {line}" in out.splitlines()
    else:
        assert (out, err) == ("", f"python -m bot: {line}\n")


# -- the checks themselves -------------------------------------------------------------------------------


def test_a_path_under_a_file_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")
    problem = folder_problem("VIDEO_STORAGE_DIR", blocker / "videos")
    assert str(problem) == f"VIDEO_STORAGE_DIR: {blocker} is a file, not a folder; move that file away, or set " \
                           "VIDEO_STORAGE_DIR to another path"


def test_a_lock_file_left_as_a_folder_is_named(tmp_path: Path) -> None:
    (tmp_path / "bot.sqlite3.lock").mkdir()
    problem = database_problem(settings_for(tmp_path))
    assert str(problem) == f"DATABASE_PATH: {tmp_path / 'bot.sqlite3.lock'} is a folder, not a file; set " \
                           "DATABASE_PATH to a file's path"


def test_a_free_port_and_no_port_are_no_problem(tmp_path: Path) -> None:
    assert port_problem(settings_for(tmp_path)) is None
    assert port_problem(settings_for(tmp_path, METRICS_PORT=str(closed_port()))) is None


def test_a_database_url_of_sqlite_is_named_as_the_setting_it_came_from(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("")
    settings = settings_for(tmp_path, DATABASE_URL=f"sqlite:///{blocker / 'bot.sqlite3'}")
    assert str(database_problem(settings)).startswith(f"DATABASE_URL: {blocker} is a file, not a folder")
