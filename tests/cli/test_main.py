"""`python -m bot` as an operator meets it: settings errors, `--version`, and what every command refuses alike."""

import asyncio
import os
import signal
import socket
import sqlite3
import sys
import time
from importlib import metadata
from pathlib import Path

import pytest

from bot.cli import main as cli_main
from bot.cli.main import main
from bot.store.instance_lock import single_process
from bot.store.jobs import SCHEMA_VERSION, JobStore
from tests.cli.helpers import MODELS, TOKEN, base_env, closed_port, discord_at, run_bot
from tests.conftest import SIM_KEY


async def test_missing_and_invalid_settings_exit_2_with_every_problem(tmp_path: Path) -> None:
    code, _out, err = await run_bot(
        ["check"], {"VIDEO_API_KEY": "sk-should-never-print-1234", "POLL_INTERVAL_SECONDS": "often"}, tmp_path
    )
    assert code == 2
    assert "DISCORD_TOKEN is required" in err and "VIDEO_API_BASE_URL is required" in err
    assert "POLL_INTERVAL_SECONDS must be" in err
    assert "Traceback" not in err and "sk-should-never-print-1234" not in err


async def test_settings_come_from_dotenv_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("DISCORD_TOKEN=x\nVIDEO_API_KEY=k\nVIDEO_API_BASE_URL=not-a-url\n")
    code, _out, err = await run_bot(["check"], {}, tmp_path)
    assert code == 2 and "VIDEO_API_BASE_URL must be an http(s) address" in err
    # Which file the values came from: the one to fix.
    assert err.splitlines()[-1] == (f"settings come from the environment and from {tmp_path / '.env'} (the "
                                    "environment wins)")


async def test_missing_settings_say_where_env_was_looked_for_and_that_none_was_found(tmp_path: Path) -> None:
    # Started from a folder without .env (systemd without WorkingDirectory, or before copying .env.example).
    code, out, err = await run_bot(["run"], {}, tmp_path)
    assert code == 2 and out == ""
    assert err == (
        "python -m bot: invalid settings:\n"
        "  - DISCORD_TOKEN is required but not set\n"
        "  - VIDEO_API_BASE_URL is required but not set\n"
        "  - VIDEO_API_KEY is required but not set\n"
        f"no .env file at {tmp_path / '.env'}: settings come from the environment and from .env in the folder the "
        f"bot starts in. Copy .env.example to {tmp_path / '.env'} and fill it in, or start the bot from the folder "
        "that holds your .env (under systemd: WorkingDirectory=)\n"
    )


async def test_a_pasted_value_no_key_can_hold_is_refused_without_showing_it(tmp_path: Path) -> None:
    key = "ｓｋ－ｗｉｄｅ－１２３４５６７８"  # typed with a Japanese input method in full-width mode
    env = {"DISCORD_TOKEN": "token with spaces inside", "VIDEO_API_BASE_URL": "http://127.0.0.1:1",
           "VIDEO_API_KEY": key}
    code, out, err = await run_bot(["check"], env, tmp_path)
    assert code == 2 and out == ""
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert problems == [
        "  - DISCORD_TOKEN holds a space or line break inside (at character 6), which no key or token has: copy "
        "it again in one piece (the value is not shown here)",
        "  - VIDEO_API_KEY holds full-width characters (the first is character 1): type it again in half-width "
        "(ASCII) characters, or copy it again from where it was issued (the value is not shown here)",
    ]
    assert key not in err and "token with spaces" not in err and "Traceback" not in err


async def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    code, out, _err = await run_bot(["--version"], {}, tmp_path)
    assert code == 0 and out.strip() == f"video-request-bot {metadata.version('video-request-bot')}"


COMMANDS = ("run", "sync", "check", "backup", "pause", "resume", "demo", "migrate-db")


def help_text(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main([*args, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_the_top_help_lists_every_command_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys)
    for command in COMMANDS:
        [line] = [line for line in text.splitlines() if line.split()[:1] == [command]]
        assert len(line.split()) > 3, f"{command}: no description on its line"
    assert ".env" in text and "Exit status" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_each_commands_help_says_what_it_does_its_exit_status_and_where_settings_come_from(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = " ".join(help_text(capsys, command).split())  # unwrapped
    description = text.split("options:")[0].split(f"usage: python -m bot {command}")[1]
    assert len(description.split()) > 8, f"{command}: no description"
    assert "2 a mistake in the settings or the set-up" in text
    if command == "run":  # Ctrl-C stops it cleanly, as SIGTERM does
        assert "Exit status: 0 stopped by Ctrl-C or SIGTERM (a clean stop); 1 " in text and "130" not in text
    else:
        assert "Exit status: 0 done; 1 " in text and "130 interrupted (Ctrl-C)" in text
    if command != "demo":  # the demo reads no settings
        assert "Settings come from environment variables and from the file .env" in text
        # Only these name the .env they read: the others say nothing of it when they succeed.
        assert "`check` and the first line of `run`'s log name the .env read" in text


@pytest.mark.parametrize("command", ["check", "sync"])
async def test_ctrl_c_ends_any_command_quietly(command: str, silent_server: str, tmp_path: Path) -> None:
    env = {**base_env(discord_at(f"{silent_server}/api/v10")), "DISCORD_TOKEN": TOKEN,
           "VIDEO_API_BASE_URL": silent_server, "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", command, cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        # Waiting on a server that never answers: `check` for the service, `sync` for Discord's login.
        await asyncio.sleep(2.5)
        assert process.returncode is None
        process.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(process.communicate(), timeout=10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, out + err
    assert err.decode().splitlines()[-1] == "python -m bot: interrupted"
    assert b"Traceback" not in out + err and b"KeyboardInterrupt" not in err


@pytest.mark.parametrize("command", ["run", "sync", "check"])
async def test_a_database_from_a_newer_bot_is_refused_in_one_line(command: str, tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    await (await JobStore.open(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    # Discord and the service are unreachable: the database must be refused before either is tried.
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": f"http://127.0.0.1:{closed_port()}",
           "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(path), "VIDEO_STORAGE_DIR": str(tmp_path / "v")}
    dead = discord_at(f"http://127.0.0.1:{closed_port()}/api/v10")
    code, out, err = await run_bot([command], env, tmp_path, discord=dead)
    assert code == 2, out + err
    assert "Traceback" not in out + err
    expected = f"schema version {SCHEMA_VERSION + 1}, but this version of the bot knows only up to {SCHEMA_VERSION}"
    if command == "check":
        assert f"database: FAILED: the database is at {expected}" in out
    else:
        assert err.splitlines()[-1] == f"python -m bot: the database is at {expected}: it was written by a newer " \
                                       "version; run that version, or restore a backup"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1


@pytest.mark.parametrize("command", ["run", "sync", "check"])
async def test_a_bad_models_file_is_refused_naming_the_file_and_the_entry(command: str, tmp_path: Path) -> None:
    models = tmp_path / "models.toml"
    models.write_text(MODELS.replace("price_yen = 1200", "price_yen = 0"), encoding="utf-8")
    # Discord and the service are unreachable: the file must be refused before either is tried.
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": f"http://127.0.0.1:{closed_port()}",
           "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(tmp_path / "bot.sqlite3"),
           "VIDEO_STORAGE_DIR": str(tmp_path / "v"), "MODELS_FILE": str(models)}
    dead = discord_at(f"http://127.0.0.1:{closed_port()}/api/v10")
    code, out, err = await run_bot([command], env, tmp_path, discord=dead)
    assert code == 2, out + err
    assert "Traceback" not in out + err
    problem = "model 2 ('provider/video-model-2.0-pro'): price_yen must be a whole number of yen above 0"
    if command == "check":
        assert f"models: FAILED: {models}: 1 problem\n  - {problem}\n" in out
        assert "check failed: models," in err
    else:
        assert err.endswith(f"python -m bot: invalid models file {models}:\n  - {problem}\n")


@pytest.mark.parametrize("command", ["run", "sync"])
async def test_a_refused_token_exits_1_at_once(command: str, token_refusing_discord: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    code, out, err = await run_bot([command], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 1
    assert "Discord refused DISCORD_TOKEN" in err and "retrying" not in err and "Traceback" not in out + err
    assert "PyNaCl" not in err and "davey" not in err  # `sync` creates the bot before logging in


@pytest.mark.parametrize("command", ["run", "sync"])
async def test_a_second_bot_on_the_same_database_is_refused_in_one_line(command: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3")}
    with single_process(tmp_path / "bot.sqlite3"):  # as a running bot holds it
        code, _out, err = await run_bot([command], env, tmp_path)
    assert code == 2
    assert "another bot process" in err and "SQLite serves one process" in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["demo"], ["migrate-db", "--to", "postgresql://bot:pw@127.0.0.1:1/bot"]])
def test_a_file_the_demo_or_migrate_db_cannot_use_is_one_line_and_exit_2(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(*args: object) -> int:
        raise PermissionError(13, "Permission denied", "/srv/bot/somewhere")

    monkeypatch.setattr(cli_main, "demo" if command[0] == "demo" else "migrate_db", refused)
    assert main(command) == 2
    assert capsys.readouterr().err == (f"python -m bot {command[0]}: cannot use /srv/bot/somewhere (Permission "
                                       "denied); give this user access to it, or choose another path\n")


async def test_a_second_bot_with_metrics_is_told_of_the_running_bot_not_of_its_port(tmp_path: Path) -> None:
    database = tmp_path / "bot.sqlite3"
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(database), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    with socket.socket() as metrics:  # as a running bot holds both its database's lock and its /metrics port
        metrics.bind(("127.0.0.1", 0))
        metrics.listen()
        env["METRICS_PORT"] = str(metrics.getsockname()[1])
        with single_process(database):
            code, out, err = await run_bot(["run"], env, tmp_path)
    assert (code, out) == (2, "")
    assert err.splitlines()[1:] == [f"python -m bot: another bot process (process {os.getpid()}) is using {database}: "
                                    "SQLite serves one process. Stop it first; `pause`, `resume`, `backup` and "
                                    "`check` work beside a running bot"]


async def test_sync_gives_up_on_a_discord_that_never_answers(silent_server: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
           "HTTP_TIMEOUT_SECONDS": "1"}
    started = time.monotonic()
    code, out, err = await run_bot(["sync"], env, tmp_path, discord=discord_at(f"{silent_server}/api/v10"))
    assert time.monotonic() - started < 15
    assert (code, out) == (1, "")
    [line] = err.splitlines()
    assert line.endswith("ERROR    bot: cannot reach Discord (timed out); `python -m bot check` tells what is wrong")
