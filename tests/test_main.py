"""`python -m bot` as an operator meets it: settings errors and the `check` command."""

import asyncio
import os
import sys
from pathlib import Path

from bot.simulator import VideoServiceSimulator
from tests.conftest import SIM_KEY

REPO_ROOT = Path(__file__).resolve().parents[1]


async def run_bot(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DISCORD_", "VIDEO_"))}
    base["PYTHONPATH"] = str(REPO_ROOT)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=cwd, env={**base, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    return process.returncode or 0, out.decode(), err.decode()


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


async def test_check_prints_the_masked_key_and_balance(simulator: VideoServiceSimulator, tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": "unused-by-check", "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": SIM_KEY}
    code, out, err = await run_bot(["check"], env, tmp_path)
    assert code == 0, err
    assert f"key: …{SIM_KEY[-4:]}" in out
    assert "spent ¥0 of ¥10,000; available ¥10,000 (40 videos at ¥250)" in out
    assert SIM_KEY not in out + err


async def test_check_fails_clearly_when_the_service_refuses_the_key(
    simulator: VideoServiceSimulator, tmp_path: Path
) -> None:
    env = {"DISCORD_TOKEN": "x", "VIDEO_API_BASE_URL": simulator.base_url, "VIDEO_API_KEY": "sk-wrong-key-000000"}
    code, _out, err = await run_bot(["check"], env, tmp_path)
    assert code == 1 and "HTTP 401" in err and "sk-wrong-key-000000" not in err


async def test_check_fails_when_the_service_is_unreachable(tmp_path: Path) -> None:
    env = {"DISCORD_TOKEN": "x", "VIDEO_API_BASE_URL": "http://127.0.0.1:9", "VIDEO_API_KEY": "sk-any-key-0000000",
           "HTTP_TIMEOUT_SECONDS": "2"}
    code, _out, err = await run_bot(["check"], env, tmp_path)
    assert code == 1 and "cannot read the key's balance" in err
