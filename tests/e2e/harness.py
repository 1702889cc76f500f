"""Run `python -m bot` as a real subprocess against the Discord double and the service simulator."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from bot.simulator import VideoServiceSimulator
from tests.discord_double import DiscordDouble, bot_process_env, without_bot_settings

REPO_ROOT = Path(__file__).resolve().parents[2]
BOT_TOKEN = "bot-token-for-the-double"
USER_ID = 600_000_000_000_000_001


class BotProcess:
    def __init__(
        self, workdir: Path, double: DiscordDouble, simulator: VideoServiceSimulator, api_key: str,
        **settings: str,
    ) -> None:
        self.workdir = workdir
        self.double = double
        self.simulator = simulator
        self.api_key = api_key
        self.settings = settings
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "bot.log"
        self._log_start = 0  # where this start's lines begin in the log (a restart appends)
        self.process: asyncio.subprocess.Process | None = None
        self._log_file: IO[bytes] | None = None
        self._grouped = False

    def environment(self) -> dict[str, str]:
        settings = {
            "POLL_INTERVAL_SECONDS": "0.3",
            "HTTP_TIMEOUT_SECONDS": "2",
            "LOG_LEVEL": "DEBUG",
            "VIDEO_COOLDOWN_SECONDS": "0",
            "MAX_ACTIVE_JOBS_PER_USER": "100",
            **self.settings,
        }
        return bot_process_env(
            self.double, without_bot_settings(os.environ, REPO_ROOT), token=BOT_TOKEN,
            service_url=self.simulator.base_url, api_key=self.api_key, workdir=self.workdir, **settings,
        )

    async def start(self, *args: str, within: Sequence[str] = ()) -> None:
        """`python -m bot *args`, waiting until it is ready unless `args` are given; run by the command `within`
        (`unshare …`, which does not pass signals on) in a process group of its own that `stop` signals whole."""
        self._grouped = bool(within)
        self.double.identified.clear()
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_file = self.log_path.open("ab")
        self.process = await asyncio.create_subprocess_exec(
            *within, sys.executable, "-m", "bot", *args,
            cwd=self.workdir, env=self.environment(), stdout=self._log_file, stderr=asyncio.subprocess.STDOUT,
            start_new_session=self._grouped,
        )
        if not args:
            await self.wait_ready()

    async def wait_ready(self, timeout: float = 20) -> None:
        """Until this start's on_ready: every shard of the process identified and had its GUILD_CREATEs, and
        the commands were synced before (setup_hook runs first), by this process or by shard 0's."""
        async with asyncio.timeout(timeout):
            # The worker starts on on_ready, which follows GUILD_CREATE by discord.py's guild_ready_timeout.
            while "connected as" not in self.log_since_start():
                if self.process is not None and self.process.returncode is not None:
                    raise AssertionError(f"the bot exited with {self.process.returncode}:\n{self.log()}")
                await asyncio.sleep(0.05)

    async def wait_exit(self, timeout: float = 20) -> int:
        assert self.process is not None
        async with asyncio.timeout(timeout):
            code = await self.process.wait()
        self._close_log()
        return code

    async def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.process is None:
            self._close_log()
            return 0
        if self.process.returncode is not None:
            self._close_log()
            return self.process.returncode
        if self._grouped:
            os.killpg(self.process.pid, sig)
        else:
            self.process.send_signal(sig)
        return await self.wait_exit()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_since_start(self) -> str:
        """The lines of the latest start only."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    async def slash(self, name: str, options: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        return await self.double.send_slash_command(name, options, **kwargs)


def job_rows(database: Path) -> list[dict[str, Any]]:
    """The bot's jobs as its SQLite file has them now (read-only), for checks from outside the process."""
    if not database.exists():
        return []
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=5)
    connection.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in connection.execute(
            "SELECT id, state, prompt, service_job_id, charged_yen, told_at, interaction_token,"
            " delivered_channel_id, delivered_message_id FROM jobs ORDER BY id"
        )]
    except sqlite3.OperationalError:  # the table is not there yet
        return []
    finally:
        connection.close()
