"""`python -m bot run`: a start without Discord, and the log format from the settings."""

import asyncio
import json
import signal
import sys
from pathlib import Path

from bot.cli.common import version
from bot.simulator import VideoServiceSimulator
from tests.cli.helpers import TOKEN, base_env, closed_port, discord_at, run_bot
from tests.conftest import SIM_KEY


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
    lines = output.splitlines()
    # The first line says what runs, with what; no .env here, and it says where it looked.
    assert lines[0].endswith(
        f"INFO     bot: video-request-bot {version()} starting: database {tmp_path / 'bot.sqlite3'} (SQLite); "
        f"video service {simulator.base_url}; .env none found at {tmp_path / '.env'}; automatic sharding "
        "(Discord's recommended count), every shard in this process")
    retries = [line for line in lines if "cannot reach Discord" in line]
    hint = "`python -m bot check` tells what is wrong"
    assert retries[0].endswith(f"cannot reach Discord (connection refused); retrying in 1 s; {hint}")
    assert retries[1].endswith(f"cannot reach Discord (connection refused); retrying in 2 s; {hint}")
    assert "Traceback" not in output
    assert "\x1b[" not in output  # a file is not a terminal: no colour codes
    assert "PyNaCl" not in output and "davey" not in output


async def test_log_format_json_makes_every_log_line_a_json_object(token_refusing_discord: str, tmp_path: Path) -> None:
    # Warnings found while the settings are read (a poll interval for tests, a pasted "Bearer ") come before the
    # settings name the format: they are JSON too.
    env = {"DISCORD_TOKEN": "revoked-token", "VIDEO_API_BASE_URL": "http://127.0.0.1:1",
           "VIDEO_API_KEY": f"Bearer {SIM_KEY}", "DATABASE_PATH": str(tmp_path / "bot.sqlite3"),
           "LOG_FORMAT": "json", "POLL_INTERVAL_SECONDS": "1"}
    code, _out, err = await run_bot(["run"], env, tmp_path, discord=discord_at(token_refusing_discord))
    assert code == 1
    entries = [json.loads(line) for line in err.splitlines()]
    assert entries[0]["level"] == "INFO" and " starting: database " in entries[0]["message"]
    warnings = [entry["message"] for entry in entries if entry["level"] == "WARNING"]
    assert any(message.startswith("POLL_INTERVAL_SECONDS=1.0 is below") for message in warnings)
    assert any(message.startswith("VIDEO_API_KEY starts with 'Bearer'") for message in warnings)
    assert {"level": "ERROR", "logger": "bot"}.items() <= entries[-1].items()
    assert entries[-1]["message"].startswith("Discord refused DISCORD_TOKEN")



async def test_ctrl_c_stops_the_bot_cleanly_with_exit_status_0(tmp_path: Path) -> None:
    # As its --help says: Ctrl-C is a clean stop, like SIGTERM, not an interruption (130).
    env = {
        **base_env(discord_at(f"http://127.0.0.1:{closed_port()}/api/v10")),
        "DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
        "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
    }
    log_path = tmp_path / "bot.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", cwd=tmp_path, env=env, stdout=log_file, stderr=asyncio.subprocess.STDOUT,
        )
        try:
            async with asyncio.timeout(30):
                while "cannot reach Discord" not in log_path.read_text():
                    assert process.returncode is None, log_path.read_text()
                    await asyncio.sleep(0.1)
            process.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(process.wait(), timeout=20)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    output = log_path.read_text()
    assert code == 0, output
    assert output.splitlines()[-1].endswith("INFO     bot: SIGINT received; shutting down")
    assert "Traceback" not in output and "interrupted" not in output
