"""Running the real `python -m bot` in a scratch folder, as a host does, for the command-line tests."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bot.config.settings import Settings, read_settings
from tests.conftest import SIM_KEY
from tests.discord_double import subprocess_env

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bot-token-for-the-double"
#: A valid models file of two models, the dearer one the default.
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
    return await finished(process)


async def finished(process: asyncio.subprocess.Process, timeout: float = 30) -> tuple[int, str, str]:
    """Its exit status and output; killed (never left running) if it has not ended within `timeout`."""
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout=timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    return process.returncode or 0, out.decode(), err.decode()


def settings_for(tmp_path: Path, **env: str) -> Settings:
    return read_settings({
        "DISCORD_TOKEN": TOKEN, "VIDEO_API_BASE_URL": "http://127.0.0.1:1", "VIDEO_API_KEY": SIM_KEY,
        "DATABASE_PATH": str(tmp_path / "bot.sqlite3"), "VIDEO_STORAGE_DIR": str(tmp_path / "videos"),
        "HTTP_TIMEOUT_SECONDS": "5", **env,
    })
