"""`python -m bot` as an operator meets it: settings errors, `--version`, `check`, and a start without Discord."""

import asyncio
import json
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import discord.http
import pytest
from aiohttp import web

from bot.__main__ import check_database, check_discord, check_video_service, check_videos
from bot.config.settings import Settings, read_settings
from bot.simulator import VideoServiceSimulator
from bot.store.instance_lock import single_process
from bot.store.jobs import SCHEMA_VERSION, JobStore
from bot.store.jobs.meta import HOST_PAUSE
from tests.conftest import SIM_KEY
from tests.discord_double import DiscordDouble, subprocess_env

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bot-token-for-the-double"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env(double: Any = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "VIDEO_", "LOG_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess_env(double, env) if double is not None else env


def discord_at(api_base: str) -> SimpleNamespace:
    """What `subprocess_env` needs to point a child's discord.py at `api_base` (any server, or none)."""
    return SimpleNamespace(api_base=api_base, gateway_url=api_base.replace("http", "ws", 1) + "/gateway")


async def run_bot(
    args: list[str], env: dict[str, str], cwd: Path, *, discord: Any = None
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=cwd, env={**base_env(discord), **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    return process.returncode or 0, out.decode(), err.decode()


@pytest.fixture
async def double() -> AsyncIterator[DiscordDouble]:
    async with DiscordDouble() as d:
        yield d


@pytest.fixture
async def token_refusing_discord() -> AsyncIterator[str]:
    """A Discord API that answers 401 to every login, as Discord does for a revoked token."""

    async def refuse(request: web.Request) -> web.Response:
        return web.json_response({"message": "401: Unauthorized", "code": 0}, status=401)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    yield f"http://{host}:{port}/api/v10"
    await runner.cleanup()


@pytest.fixture
def route_base(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Point this process's discord.py at another API base for one test."""

    def point(api_base: str) -> None:
        monkeypatch.setattr(discord.http.Route, "BASE", api_base)

    yield point


def settings_for(tmp_path: Path, **env: str) -> Settings:
    return read_settings({
        "DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
        "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
        "HTTP_TIMEOUT_SECONDS": "5", **env,
    })


# -- settings and --version --------------------------------------------------------------------------


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


# -- check, end to end ------------------------------------------------------------------------------


async def test_check_prints_one_ok_line_per_check(
    simulator: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path
) -> None:
    await (await JobStore.open(tmp_path / "bot.sqlite3")).close()
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=double)
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("settings: OK")
    assert lines[1] == "models: OK (built in: 1 model; default provider/video-model-2.0-fast at ¥250)"
    assert lines[2] == f"database: OK (schema {SCHEMA_VERSION})"
    assert lines[3].startswith(f"videos: OK ({tmp_path / 'videos'}, ") and lines[3].endswith("will be created)")
    assert lines[4] == (f"video service: OK (key …{SIM_KEY[-4:]}; spent ¥0 of ¥10,000; available ¥10,000 "
                        "(40 videos at ¥250))")
    assert lines[5] == "discord: OK (logged in as double-bot)"
    assert lines[6] == "check: OK"
    assert SIM_KEY not in out + err and TOKEN not in out + err
    assert [r.path for r in double.requests] == ["/users/@me"]  # read-only: no gateway, no sync


async def test_check_names_every_failure_and_exits_1(
    simulator: VideoServiceSimulator, token_refusing_discord: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": simulator.base_url,
           "VIDEO_API_KEY": "sk-wrong-key-000000", "DATABASE_PATH": str(tmp_path / "ok" / "bot.sqlite3"),
           "VIDEO_STORAGE_DIR": str(blocker / "videos")}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 1
    assert f"videos: FAILED: cannot write VIDEO_STORAGE_DIR: {blocker} is not a directory" in out
    assert "video service: FAILED: the key was refused (HTTP 401)" in out
    assert "discord: FAILED: Discord refused DISCORD_TOKEN (HTTP 401)" in out
    assert "database: OK" in out
    assert "check failed: videos, video service, discord" in err
    assert "sk-wrong-key-000000" not in out + err and "Traceback" not in out + err


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


MODELS = """
default = "provider/video-model-2.0-pro"
[[models]]
id = "provider/video-model-2.0-fast"
create_path = "/gateway/videos/create"
price_yen = 250
[[models]]
id = "provider/video-model-2.0-pro"
create_path = "/gateway/videos/create-pro"
price_yen = 1200
"""


async def test_check_reads_the_models_file_and_counts_videos_at_the_default_models_price(
    simulator: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path
) -> None:
    models = tmp_path / "models.toml"
    models.write_text(MODELS, encoding="utf-8")
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
           "MODELS_FILE": str(models)}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=double)
    assert code == 0, out + err
    assert f"models: OK ({models}: 2 models; default provider/video-model-2.0-pro at ¥1,200)" in out
    assert "available ¥10,000 (8 videos at ¥1,200)" in out


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


# -- check, one cause at a time ---------------------------------------------------------------------


async def test_discord_check_names_a_refused_token(
    tmp_path: Path, token_refusing_discord: str, route_base: Any
) -> None:
    route_base(token_refusing_discord)
    result = await check_discord(settings_for(tmp_path))
    assert not result.ok and result.line() == "discord: FAILED: Discord refused DISCORD_TOKEN (HTTP 401)"


@pytest.mark.parametrize(
    ("host", "cause"),
    [("127.0.0.1:{port}", "connection refused"), ("nonexistent.invalid", "the name did not resolve in DNS")],
)
async def test_discord_check_names_why_discord_is_unreachable(
    tmp_path: Path, route_base: Any, host: str, cause: str
) -> None:
    route_base(f"http://{host.format(port=closed_port())}/api/v10")
    result = await check_discord(settings_for(tmp_path))
    assert result.line() == f"discord: FAILED: cannot reach Discord: {cause}"


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """Accepts connections and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    for writer in held:
        writer.close()
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize(
    ("where", "cause"),
    [
        ("refused", "connection refused"),
        ("dns", "the name did not resolve in DNS"),
        ("tls", "TLS failed"),
        ("silent", "timed out"),
        ("wrong-key", "the key was refused (HTTP 401)"),
    ],
)
async def test_service_check_names_the_cause(
    tmp_path: Path, simulator: VideoServiceSimulator, silent_server: str, where: str, cause: str
) -> None:
    url, key = {
        "refused": (f"http://127.0.0.1:{closed_port()}", SIM_KEY),
        "dns": ("https://nonexistent.invalid", SIM_KEY),  # a remote host: https (plain http is a settings error)
        "tls": (simulator.base_url.replace("http://", "https://"), SIM_KEY),  # TLS to a plain-HTTP port
        "silent": (silent_server, SIM_KEY),
        "wrong-key": (simulator.base_url, "sk-wrong-key-000000"),
    }[where]
    settings = settings_for(tmp_path, VIDEO_API_BASE_URL=url, VIDEO_API_KEY=key, HTTP_TIMEOUT_SECONDS="0.5")
    result = await check_video_service(settings)
    assert not result.ok
    assert cause in result.detail
    assert "sk-wrong-key-000000" not in result.detail


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        yield locked
        locked.chmod(0o755)
    elif Path("/sys").is_dir():
        yield Path("/sys")  # root may write anywhere but here: sysfs takes no new files
    else:
        pytest.skip("no directory that root cannot write to")


def test_an_unwritable_directory_fails_the_database_and_the_video_checks(unwritable_dir: Path) -> None:
    database = check_database(unwritable_dir / "bot.sqlite3")
    assert not database.ok and f"{unwritable_dir} is not writable" in database.detail
    videos = check_videos(unwritable_dir / "videos")
    assert not videos.ok and f"{unwritable_dir} is not writable" in videos.detail


def test_a_file_that_is_not_a_database_fails_the_check(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    path.write_bytes(b"this is not SQLite" * 100)
    result = check_database(path)
    assert not result.ok and "cannot open" in result.detail and "not a database" in result.detail


async def test_an_older_database_is_reported_as_upgradeable(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    await (await JobStore.open(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 0")
    result = check_database(path)
    assert result.ok and result.detail == f"schema 0; the next start upgrades it to {SCHEMA_VERSION}"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0  # a check never migrates


# -- start without Discord ----------------------------------------------------------------------------


async def test_an_unreachable_discord_is_retried_in_one_line_each_until_sigterm(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    env = {
        **base_env(discord_at(f"http://127.0.0.1:{closed_port()}/api/v10")),
        "DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": SIM_KEY,
        "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
    }
    log_path = tmp_path / "bot.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", cwd=tmp_path, env=env, stdout=log_file, stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(30):
                while log_path.read_text().count("cannot reach Discord") < 2:
                    assert process.returncode is None, log_path.read_text()
                    await asyncio.sleep(0.1)
            process.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(process.wait(), timeout=20)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    output = log_path.read_text()
    assert code == 0, output
    retries = [line for line in output.splitlines() if "cannot reach Discord" in line]
    assert retries[0].endswith("cannot reach Discord (connection refused); retrying in 1 s")
    assert retries[1].endswith("cannot reach Discord (connection refused); retrying in 2 s")
    assert "Traceback" not in output
    assert "\x1b[" not in output  # a file is not a terminal: no colour codes
    assert "PyNaCl" not in output and "davey" not in output


@pytest.mark.parametrize("command", ["run", "sync"])
async def test_a_refused_token_exits_1_at_once(command: str, token_refusing_discord: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    code, out, err = await run_bot([command], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 1
    assert "Discord refused DISCORD_TOKEN" in err and "retrying" not in err and "Traceback" not in out + err
    assert "PyNaCl" not in err and "davey" not in err  # `sync` creates the bot before logging in


async def test_log_format_json_makes_every_log_line_a_json_object(token_refusing_discord: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "LOG_FORMAT": "json"}
    code, _out, err = await run_bot(["run"], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 1
    entries = [json.loads(line) for line in err.splitlines()]
    assert {"level": "ERROR", "logger": "bot"}.items() <= entries[-1].items()
    assert entries[-1]["message"].startswith("Discord refused DISCORD_TOKEN")


# -- the host's pause ---------------------------------------------------------------------------------


async def test_pause_and_resume_are_kept_in_the_database_for_the_running_bot(tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3")}
    code, out, _err = await run_bot(["pause"], env, tmp_path)
    assert code == 0 and "paused in every server" in out
    store = await JobStore.open(tmp_path / "bot.sqlite3")
    try:
        assert await store.get_meta(HOST_PAUSE) is not None
        code, out, _err = await run_bot(["resume"], env, tmp_path)
        assert code == 0 and "open again" in out
        assert await store.get_meta(HOST_PAUSE) is None
    finally:
        await store.close()


@pytest.mark.parametrize("command", ["run", "sync"])
async def test_a_second_bot_on_the_same_database_is_refused_in_one_line(command: str, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3")}
    with single_process(tmp_path / "bot.sqlite3"):  # as a running bot holds it
        code, _out, err = await run_bot([command], env, tmp_path)
    assert code == 2
    assert "another bot process" in err and "SQLite serves one process" in err and "Traceback" not in err
