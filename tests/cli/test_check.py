"""`python -m bot check`: one line per check, end to end and one cause at a time."""

import asyncio
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cli import check as check_module
from bot.cli.check import check_database, check_discord, check_video_service, check_videos
from bot.community import trust
from bot.simulator import VideoServiceSimulator
from bot.store.jobs import SCHEMA_VERSION, JobStore
from tests.cli.helpers import MODELS, TOKEN, closed_port, discord_at, run_bot, settings_for
from tests.conftest import SIM_KEY, SimulatorFactory
from tests.discord_double import DiscordDouble


async def test_check_prints_one_ok_line_per_check(
    simulator: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path
) -> None:
    await (await JobStore.open(tmp_path / "bot.sqlite3")).close()
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": SIM_KEY,
           "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=double)
    assert code == 0, out + err
    lines = out.splitlines()
    # Run where there is no .env: the settings line says where it looked (they came from the environment).
    assert lines[0] == (f"settings: OK (.env none found at {tmp_path / '.env'}; service {simulator.base_url}, "
                        f"database {tmp_path / 'bot.sqlite3'})")
    assert lines[1] == "models: OK (built in: 1 model; default provider/video-model-2.0-fast at ¥250)"
    assert lines[2] == f"database: OK (schema {SCHEMA_VERSION})"
    assert lines[3].startswith(f"videos: OK ({tmp_path / 'videos'}, ") and lines[3].endswith("will be created)")
    assert lines[4] == (f"video service: OK (key …{SIM_KEY[-4:]}; spent ¥0 of ¥10,000; available ¥10,000 "
                        "(40 videos at ¥250))")
    assert lines[5] == "discord: OK (logged in as double-bot; Public Bot off)"
    assert lines[6] == "check: OK"
    assert SIM_KEY not in out + err and TOKEN not in out + err
    # Read-only: no gateway, no sync.
    assert [r.path for r in double.requests] == ["/users/@me", "/oauth2/applications/@me"]


async def test_check_names_every_failure_and_exits_1(
    simulator: VideoServiceSimulator, token_refusing_discord: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": simulator.base_url,
           "VIDEO_API_KEY": "sk-wrong-key-000000", "DATABASE_PATH": str(tmp_path / "ok" / "bot.sqlite3"),
           "VIDEO_STORAGE_DIR": str(blocker / "videos")}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 2  # a folder the bot cannot write is the host's to fix: the bot would not start
    assert (f"videos: FAILED: VIDEO_STORAGE_DIR: {blocker} is a file, not a folder; move that file away, or set "
            "VIDEO_STORAGE_DIR to another path") in out.splitlines()
    assert "video service: FAILED: the key was refused (HTTP 401)" in out
    assert "discord: FAILED: Discord refused DISCORD_TOKEN (HTTP 401)" in out
    assert "database: OK" in out
    assert "check failed: videos, video service, discord" in err
    assert "sk-wrong-key-000000" not in out + err and "Traceback" not in out + err


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


async def test_pasted_prefixes_are_dropped_with_a_warning_and_the_check_passes(
    simulator: VideoServiceSimulator, double: DiscordDouble, tmp_path: Path
) -> None:
    # Copied with the header's scheme and the spaces around it: the bot adds the scheme itself.
    env = {"DISCORD_TOKEN": f" Bot {TOKEN} ", "VIDEO_API_BASE_URL": simulator.base_url,
           "VIDEO_API_KEY": f"Bearer {SIM_KEY}\u200b", "DATABASE_PATH": str(tmp_path / "bot.sqlite3"),
           "VIDEO_STORAGE_DIR": str(tmp_path / "videos")}
    code, out, err = await run_bot(["check"], env, tmp_path, discord=double)
    assert code == 0, out + err
    assert "video service: OK (key …" in out and "discord: OK (logged in as double-bot;" in out
    assert "VIDEO_API_KEY starts with 'Bearer', which the bot adds itself" in err
    assert "DISCORD_TOKEN starts with 'Bot', which the bot adds itself" in err
    assert SIM_KEY not in out + err and TOKEN not in out + err


async def test_a_models_file_with_several_problems_lists_each_on_its_own_line(tmp_path: Path) -> None:
    models = tmp_path / "models.toml"
    # A fault in an entry, an id used twice, and a default that is none of the ids: all in the first round.
    models.write_text(MODELS.replace("price_yen = 1200", "price_yen = 0")
                      .replace('id = "provider/video-model-2.0-pro"', 'id = "provider/video-model-2.0-fast"'),
                      encoding="utf-8")
    env = {"DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": f"http://127.0.0.1:{closed_port()}",
           "VIDEO_API_KEY": SIM_KEY, "DATABASE_PATH": str(tmp_path / "bot.sqlite3"),
           "VIDEO_STORAGE_DIR": str(tmp_path / "v"), "MODELS_FILE": str(models), "HTTP_TIMEOUT_SECONDS": "1"}
    dead = discord_at(f"http://127.0.0.1:{closed_port()}/api/v10")
    code, out, err = await run_bot(["check"], env, tmp_path, discord=dead)
    assert code == 2, out + err
    lines = out.splitlines()
    start = lines.index(f"models: FAILED: {models}: 3 problems")
    assert lines[start + 1:start + 4] == [
        "  - model 2 ('provider/video-model-2.0-fast'): price_yen must be a whole number of yen above 0",
        "  - id 'provider/video-model-2.0-fast' is used by more than one model",
        "  - default 'provider/video-model-2.0-pro' is not one of the models",
    ]


async def test_discord_check_names_a_refused_token(
    tmp_path: Path, token_refusing_discord: str, route_base: Any
) -> None:
    route_base(token_refusing_discord)
    result = await check_discord(settings_for(tmp_path))
    assert not result.ok and result.line() == "discord: FAILED: Discord refused DISCORD_TOKEN (HTTP 401)"


@pytest.mark.parametrize(("bot_public", "env", "ok", "shown"), [
    (False, {}, True, "discord: OK (logged in as double-bot; Public Bot off)"),
    (True, {"ALLOWED_GUILD_IDS": "1,2"}, True,
     "discord: OK (logged in as double-bot; Public Bot on; only the servers in ALLOWED_GUILD_IDS are served)"),
    (True, {"ALLOW_PUBLIC_BOT_SPENDING": "true"}, True,
     "discord: OK (logged in as double-bot; Public Bot on and no ALLOWED_GUILD_IDS: ALLOW_PUBLIC_BOT_SPENDING lets any "
     "server spend the key)"),
    (True, {}, False, f"discord: FAILED: {trust.PUBLIC_BOT_REFUSAL}"),
])
async def test_discord_check_says_who_can_put_the_application_to_work(
    tmp_path: Path, double: DiscordDouble, route_base: Any, bot_public: bool, env: dict[str, str], ok: bool,
    shown: str,
) -> None:
    double.bot_public = bot_public
    route_base(double.api_base)
    result = await check_discord(settings_for(tmp_path, **env))
    assert (result.ok, result.line()) == (ok, shown)
    assert ok or result.failure_code == 2  # the bot would not start


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


async def test_the_service_check_gives_up_on_its_own_shorter_timeout(
    tmp_path: Path, silent_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HTTP_TIMEOUT_SECONDS is the bot's patience (30 s by default); a check answers sooner, whatever it says.
    monkeypatch.setattr(check_module, "CHECK_SECONDS", 0.5, raising=False)
    settings = settings_for(tmp_path, VIDEO_API_BASE_URL=silent_server, HTTP_TIMEOUT_SECONDS="30")
    async with asyncio.timeout(5):
        result = await check_video_service(settings)
    assert result.line() == f"video service: FAILED: cannot reach {silent_server}: timed out"


async def test_a_short_key_is_named_by_its_length_not_a_bare_ellipsis(
    tmp_path: Path, start_simulator: SimulatorFactory
) -> None:
    service = await start_simulator(api_key="sk-short", max_budget=10_000)
    settings = settings_for(tmp_path, VIDEO_API_BASE_URL=service.base_url, VIDEO_API_KEY="sk-short")
    result = await check_video_service(settings)
    assert result.ok and result.detail.startswith("key of 8 characters (too short to show its end); spent ¥0")
    assert "sk-short" not in result.detail


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


def test_an_unwritable_directory_fails_the_database_and_the_video_checks(unwritable_dir: Path, tmp_path: Path) -> None:
    settings = settings_for(tmp_path, DATABASE_PATH=str(unwritable_dir / "bot.sqlite3"))
    database = check_database(settings)
    assert not database.ok and database.failure_code == 2
    assert database.detail.startswith(f"DATABASE_PATH: cannot write in the folder {unwritable_dir} (permission denied")
    videos = check_videos(unwritable_dir / "videos")
    assert not videos.ok and videos.detail.startswith(f"VIDEO_STORAGE_DIR: cannot write in the folder {unwritable_dir}")


def test_a_file_that_is_not_a_database_fails_the_check(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    path.write_bytes(b"this is not SQLite" * 100)
    result = check_database(settings_for(tmp_path))
    assert not result.ok and result.failure_code == 2  # the bot would not start on it: the host's to fix
    assert result.detail == f"DATABASE_PATH: {path} is not a SQLite database; point DATABASE_PATH at the bot's " \
                            "database, or restore a backup"


async def test_an_older_database_is_reported_as_upgradeable(tmp_path: Path) -> None:
    path = tmp_path / "bot.sqlite3"
    await (await JobStore.open(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 0")
    result = check_database(settings_for(tmp_path))
    assert result.ok and result.detail == f"schema 0; the next start upgrades it to {SCHEMA_VERSION}"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == 0  # a check never migrates


async def test_a_check_that_fails_unexpectedly_is_its_own_failed_line_and_the_rest_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route_base: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(directory: Path) -> check_module.CheckResult:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(check_module, "check_videos", broken)
    route_base(f"http://127.0.0.1:{closed_port()}/api/v10")
    code = await check_module.check(settings_for(tmp_path, VIDEO_API_BASE_URL=f"http://127.0.0.1:{closed_port()}"))
    out, err = capsys.readouterr()
    assert code == 1
    assert [line.split(": ")[0] for line in out.splitlines()] == ["settings", "models", "database", "videos",
                                                                  "video service", "discord"]
    assert "videos: FAILED: unexpected OSError: [Errno 5] Input/output error" in out.splitlines()
    assert err == "check failed: videos, video service, discord\n"
