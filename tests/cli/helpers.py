"""Running the real `python -m bot` in a scratch folder, as a host does, for the command-line tests."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
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


#: The user that owns what `bar` hides from root (nobody): a user root's own namespace has no map for.
_OTHER_UID = 65534


def can_be_barred_as_root() -> bool:
    """In a user namespace of its own (`unshare -r`), root is refused files of a user the namespace cannot map."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-r", "true"], capture_output=True, timeout=10)
    return probe.returncode == 0


class Barred:
    """Paths the bot's user may not open, and `python -m bot` run as that user.

    A non-root user is barred by the mode alone (0). Root reads through permission bits, so as root a path is
    handed to another user with a private mode, and the bot runs as root of a user namespace of its own
    (`unshare -r`), whose root has no power over files of users it cannot map: as a host's bot user meets a
    folder or file of another user's.
    """

    def __init__(self) -> None:
        self.as_root = os.geteuid() == 0
        self.barred: list[Path] = []

    def bar(self, path: Path) -> Path:
        if self.as_root:
            os.chown(path, _OTHER_UID, _OTHER_UID)
            path.chmod(0o700 if path.is_dir() else 0o600)
        else:
            path.chmod(0)
        self.barred.append(path)
        return path

    def denied(self) -> str:
        """How the bot names the refusal: its user is root inside the namespace."""
        return "permission denied, even for root" if self.as_root else f"permission denied for user {os.getuid()}"

    def cannot_look_into(self, setting: str, folder: Path) -> str:
        """The line naming a folder on the way that the bot's user may not open."""
        if self.as_root:
            return f"{setting}: cannot look into the folder {folder} (permission denied, even for root); set " \
                   f"{setting} to another place"
        return (f"{setting}: cannot look into the folder {folder} (permission denied for user {os.getuid()}); let "
                f"that user open it (its x permission; what is inside can stay private), or set {setting} to "
                "another place")

    async def run(
        self, args: list[str], env: dict[str, str], cwd: Path, *, discord: Any = None
    ) -> tuple[int, str, str]:
        prefix = ["unshare", "-r"] if self.as_root else []
        process = await asyncio.create_subprocess_exec(
            *prefix, sys.executable, "-m", "bot", *args, cwd=cwd, env={**base_env(discord), **env},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        return await finished(process)

    def release(self) -> None:
        for path in self.barred:
            if not self.as_root:
                path.chmod(0o700)  # so that pytest can remove it
