"""`python -m bot` as an operator meets it: settings errors, `--version`, and what every command refuses alike."""

import sqlite3
from importlib import metadata
from pathlib import Path

import pytest

from bot.store.instance_lock import single_process
from bot.store.jobs import SCHEMA_VERSION, JobStore
from tests.cli.helpers import MODELS, TOKEN, closed_port, discord_at, run_bot
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


async def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    code, out, _err = await run_bot(["--version"], {}, tmp_path)
    assert code == 0 and out.strip() == f"video-request-bot {metadata.version('video-request-bot')}"



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
        assert err.strip() == f"python -m bot: the database is at {expected}: it was written by a newer version; " \
                              "run that version, or restore a backup"
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
        assert f"models: FAILED: {models}: {problem}" in out
        assert "check failed: models," in err
    else:
        assert err.strip() == f"python -m bot: invalid models file {models}:\n  - {problem}"



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
