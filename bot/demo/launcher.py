"""`python -m bot demo`: run the real bot against local stand-ins and show a member's /video from start to end.

The video-service simulator and the Discord double run in this process, on loopback. The bot is the
unmodified `python -m bot run` in a child process; `bot_process_env` gives it its settings and points its
discord.py at the double.
The database and the videos live in a temporary directory that is removed at the end; the key and the
token are made up. Only the delivered MP4 is kept, in `out_dir`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import site
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypeVar

import bot
from bot.demo.discord_double import DiscordDouble, InteractionRecord, RecordedRequest, bot_process_env
from bot.demo.narration import Narrator
from bot.frontend.i18n import EN, yen
from bot.ops.logs import setup_logging
from bot.simulator import SimulatorConfig, VideoServiceSimulator

_T = TypeVar("_T")

DEFAULT_OUT_DIR = Path("demo-output")
#: The whole demo, start to finish; each step has a shorter limit of its own.
DEMO_SECONDS = 60.0
READY_SECONDS = 25.0
VIDEO_SECONDS = 30.0
ANSWER_SECONDS = 10.0
STOP_SECONDS = 10.0
#: Long enough for the receipt to be edited while the job runs, short enough to keep the demo brisk.
JOB_SECONDS = 4.0
BUDGET_YEN = 10_000
#: Made up: the simulator accepts only this key and the double any token. Neither is a secret.
DEMO_API_KEY = "sk-demo-not-a-real-key-7f3a"
DEMO_DISCORD_TOKEN = "demo-token-not-a-real-discord-token"
MEMBER_ID = 600_000_000_000_000_001
MEMBER_NAME = "demo-member"
#: The double names the first text channel of its guild this.
CHANNEL_NAME = "general"
PROMPT = "a paper boat drifting on a calm lake at dawn"
#: Environment variables the bot's process inherits. Nothing else does: a host's own DISCORD_TOKEN,
#: VIDEO_API_KEY or limits (GUILD_DAILY_BUDGET_YEN ...) must never reach the demo's bot.
_KEPT_ENV = frozenset({"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
                       "SYSTEMROOT"})
_POLL = 0.05
_LOG_TAIL_LINES = 20


def _ok(request: RecordedRequest) -> bool:
    """Answered, and not with an error (a call shown while still unanswered has status 0)."""
    return 0 < request.status < 400


class DemoFailed(Exception):
    """A step did not happen; the message says which, in the person's words."""


def _import_root() -> Path | None:
    """The folder `bot` was imported from, if the child would not find it by itself (a checkout)."""
    root = Path(bot.__file__).resolve().parent.parent
    installed = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return None if root in installed else root


def bot_environment(double: DiscordDouble, simulator: VideoServiceSimulator, workdir: Path) -> dict[str, str]:
    """The child's environment: a clean one, the demo's settings, and the hook that points it at the double."""
    base = {key: value for key, value in os.environ.items() if key in _KEPT_ENV or key.startswith("LC_")}
    root = _import_root()
    if root is not None:
        base["PYTHONPATH"] = str(root)
    return bot_process_env(
        double, base, token=DEMO_DISCORD_TOKEN, service_url=simulator.base_url, api_key=DEMO_API_KEY, workdir=workdir,
        # The service asks for 15 s or more between polls; the simulator does not mind, and a demo cannot wait.
        POLL_INTERVAL_SECONDS="1",
        HTTP_TIMEOUT_SECONDS="5",
        LOG_LEVEL="INFO",
        LOG_FORMAT="text",
    )


class Demo:
    def __init__(self, workdir: Path, out_dir: Path, say: Callable[[str], None]) -> None:
        self.workdir = workdir
        self.out_dir = out_dir
        self.say = say
        self.simulator = VideoServiceSimulator(
            SimulatorConfig(api_key=DEMO_API_KEY, job_seconds=JOB_SECONDS, max_budget=BUDGET_YEN)
        )
        # A private application, as the set-up asks for (a public one with no server list does not start).
        self.double = DiscordDouble(bot_public=False)
        self.narrator = Narrator(self.double, say, names={MEMBER_ID: MEMBER_NAME},
                                 channel_names={self.double.channel_ids[0]: CHANNEL_NAME})
        self.log_path = workdir / "bot.log"
        self.process: asyncio.subprocess.Process | None = None
        self._log_file: IO[bytes] | None = None

    # -- the steps ---------------------------------------------------------------------------------

    async def run(self) -> Path:
        """Every step in order; returns the saved MP4. Raises DemoFailed."""
        await self.simulator.start()
        self.say(f"demo: video-service simulator on {self.simulator.base_url} "
                 f"(made-up key, budget {yen(BUDGET_YEN, EN)}, each video takes {JOB_SECONDS:.0f} s)")
        await self.double.start()
        self.double.add_member(MEMBER_ID, name=MEMBER_NAME)
        self.say(f"demo: local stand-in for Discord on {self.double.api_base.rsplit('/api', 1)[0]} "
                 f"(one server, channel #{CHANNEL_NAME}, member @{MEMBER_NAME})")
        await self.start_bot()

        video = await self.slash("video", {"prompt": PROMPT})
        await self.until("the bot to send the job to the video service", ANSWER_SECONDS,
                         lambda: self.simulator.creates_accepted > 0 or None)
        post = await self.until("the video to be posted in the channel", VIDEO_SECONDS,
                                lambda: self._video_post(video))
        await self.until("the /video reply to be updated after the post", ANSWER_SECONDS,
                         lambda: self._edited_after(video, post))
        saved = self.save(post)

        # As the receipt suggests: the throwaway database's first request is #1.
        status = await self.slash("status", {"job_id": "#1"})
        await self.until("the answer to /status", ANSWER_SECONDS, lambda: self._answered(status))
        balance = await self.slash("balance")
        await self.until("the answer to /balance", ANSWER_SECONDS, lambda: self._answered(balance))

        await self.stop_bot()
        if self.double.unknown_routes:
            self.say(f"demo: note: the stand-in had no route for {len(self.double.unknown_routes)} call(s)")
        return saved

    async def start_bot(self) -> None:
        self.say("demo: starting the bot: python -m bot run (database and videos in a temporary directory)")
        self._log_file = self.log_path.open("ab")
        env = bot_environment(self.double, self.simulator, self.workdir)
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "run",
            cwd=self.workdir, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=self._log_file,
            stderr=asyncio.subprocess.STDOUT,
        )
        heartbeat = self.workdir / "heartbeat"
        # The bot writes its heartbeat once the gateway is up and its worker runs: then it takes commands.
        await self.until("the bot to connect", READY_SECONDS, lambda: heartbeat.exists() or None)
        self.say("  bot connected to the gateway; its worker is running")

    async def slash(self, name: str, options: dict[str, object] | None = None) -> InteractionRecord:
        shown = " ".join(f'{key}:"{value}"' for key, value in (options or {}).items())
        self.say("")
        self.say(f"@{MEMBER_NAME} runs /{name} {shown}".rstrip())
        interaction = await self.double.send_slash_command(name, options, user_id=MEMBER_ID)
        self.narrator.sent(interaction)
        return interaction

    def save(self, post: RecordedRequest) -> Path:
        name, data = post.files[0]
        path = (self.out_dir / Path(name).name).resolve()  # the bare name: nothing outside out_dir
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            raise DemoFailed(f"cannot save the video to {path} ({exc.strerror or exc}): pass --out a folder "
                             "you can write, or set DEMO_OUTPUT_DIR to one") from None
        self.say("")
        self.say(f"demo: saved the posted video to {path} ({len(data):,} bytes)")
        return path

    async def stop_bot(self) -> None:
        self.say("")
        self.say("demo: stopping the bot (SIGTERM, as `docker stop` does)")
        code = await self.stop_process()
        if code != 0:
            raise DemoFailed(f"the bot did not stop cleanly: exit status {code}")
        self.say("  bot closed cleanly")

    # -- what the steps wait for (only calls the narrator has already shown count) -----------------

    def _video_post(self, video: InteractionRecord) -> RecordedRequest | None:
        channel = f"/channels/{video.channel_id}/messages"
        for request in self.narrator.shown:
            if request.method == "POST" and request.path.startswith(channel) and request.files and _ok(request):
                return request
        return None

    def _edited_after(self, interaction: InteractionRecord, after: RecordedRequest) -> bool | None:
        shown = self.narrator.shown
        later = shown[shown.index(after) + 1:]
        return any(r.method == "PATCH" and interaction.token in r.path and _ok(r) for r in later) or None

    def _answered(self, interaction: InteractionRecord) -> bool | None:
        for request in self.narrator.shown:
            if not _ok(request):
                continue
            body = request.json if isinstance(request.json, dict) else {}
            if f"/interactions/{interaction.id}/" in request.path and body.get("type") == 4:
                return True  # answered at once
            if request.method == "PATCH" and interaction.token in request.path:
                return True  # deferred, then answered by editing the reply
        return None

    async def until(self, what: str, seconds: float, probe: Callable[[], _T | None]) -> _T:
        """Narrate the bot's calls until `probe` finds something; DemoFailed on a timeout or a dead bot."""
        deadline = time.monotonic() + seconds
        while True:
            self.narrator.pump()
            found = probe()
            if found is not None:
                return found
            if self.process is not None and self.process.returncode is not None:
                raise DemoFailed(f"the bot exited (status {self.process.returncode}) while waiting for {what}")
            if time.monotonic() > deadline:
                raise DemoFailed(f"timed out after {seconds:.0f} s waiting for {what}")
            await asyncio.sleep(_POLL)

    # -- clean-up ---------------------------------------------------------------------------------------

    async def stop_process(self) -> int:
        process = self.process
        if process is None:
            return 0
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(STOP_SECONDS):
                    await process.wait()
            except TimeoutError:
                process.kill()
                await process.wait()
                raise DemoFailed(f"the bot did not stop within {STOP_SECONDS:.0f} s of SIGTERM") from None
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return process.returncode if process.returncode is not None else 0

    async def close(self) -> None:
        """Stop whatever was started, also after a failure or Ctrl-C."""
        with contextlib.suppress(DemoFailed):
            await self.stop_process()
        await self.double.stop()
        await self.simulator.stop()

    def log_tail(self) -> list[str]:
        if not self.log_path.exists():
            return []
        return self.log_path.read_text(errors="replace").splitlines()[-_LOG_TAIL_LINES:]


async def run_demo(out_dir: Path, say: Callable[[str], None]) -> int:
    """The demo in a throwaway directory; 0 when every step happened, 1 (with the reason on stderr) if not."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bot-demo-") as tmp:
        demo = Demo(Path(tmp), out_dir, say)
        try:
            async with asyncio.timeout(DEMO_SECONDS):
                await demo.run()
        except (DemoFailed, TimeoutError) as exc:
            reason = str(exc) if isinstance(exc, DemoFailed) else f"it took longer than {DEMO_SECONDS:.0f} s"
            tail = demo.log_tail()
            if tail:
                print("the bot's last log lines:", *(f"  {line}" for line in tail), sep="\n", file=sys.stderr)
            print(f"demo failed: {reason}", file=sys.stderr)
            return 1
        finally:
            await demo.close()
    say(f"demo: finished in {time.monotonic() - started:.1f} s; the temporary database and videos are gone")
    return 0


def main(out_dir: Path = DEFAULT_OUT_DIR) -> int:
    # Quiet: the narration is the output; the simulator's and the double's own warnings still show.
    setup_logging(logging.WARNING)
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]  # a narrow terminal encoding
    try:
        return asyncio.run(run_demo(out_dir, lambda line: print(line, flush=True)))
    except KeyboardInterrupt:
        print("demo interrupted", file=sys.stderr)
        return 130
