"""`python -m bot check`: one line per part of the set-up (settings, models, database, disk, service, Discord)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import discord

from bot.app import build_client, catalogue_of, unreadable_database
from bot.cli.common import NETWORK_ERRORS, TOKEN_REFUSED, describe_connection_error, discord_login
from bot.cli.preflight import (
    database_problem,
    folder_problem,
    heartbeat_problem,
    nearest_existing,
    port_problem,
)
from bot.community import trust
from bot.config.settings import Settings
from bot.core.errors import ProtocolError, RateLimited, Rejected, ServerError, VideoServiceError
from bot.core.host import SetupError
from bot.core.retry import NO_RETRY
from bot.frontend.i18n import EN, yen
from bot.service.catalogue import Catalogue, CatalogueError
from bot.service.transport import mask_key
from bot.store.jobs import SCHEMA_VERSION, DatabaseTooNew, NotADatabase, StoreUnavailable

log = logging.getLogger("bot")

#: Below this, `check` fails the video directory: a video is a few MB, the database grows too.
MIN_FREE_BYTES = 200 * 1024 * 1024
#: The longest one check waits for an answer, whatever HTTP_TIMEOUT_SECONDS says: a host at the terminal
#: wants to know soon, and a service that has not answered in this long is worth a line of its own.
CHECK_SECONDS = 10.0
#: What the bot's own /metrics page holds, to tell a running bot on METRICS_PORT from another program.
_OWN_METRIC = b"videobot_"


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    #: The exit status this failure asks for: 2 when the bot must not run at all with this data or set-up.
    failure_code: int = 1
    #: Further lines under a failure, one problem each.
    problems: tuple[str, ...] = ()

    def line(self) -> str:
        if self.ok:
            return f"{self.name}: OK ({self.detail})"
        return "\n".join([f"{self.name}: FAILED: {self.detail}", *(f"  - {p}" for p in self.problems)])

    @classmethod
    def setup(cls, name: str, problem: SetupError) -> CheckResult:
        return cls(name, False, str(problem), failure_code=2)


def check_settings(settings: Settings) -> CheckResult:
    env_file = settings.env_file
    read = f".env {env_file.describe()}; " if env_file is not None else ""
    return CheckResult("settings", True, f"{read}service {settings.video_api_base_url}, "
                                         f"database {settings.database_shown}")


def check_database(settings: Settings) -> CheckResult:
    """The SQLite file: its folder and files writable by this user, then its schema read (read-only)."""
    name = "database"
    problem = database_problem(settings)
    if problem is not None:
        return CheckResult.setup(name, problem)
    path = settings.database_path
    if not path.exists():
        return CheckResult(name, True, f"schema {SCHEMA_VERSION} will be created at {path}")
    try:
        # Read-only: a check never migrates, and the running bot may hold the file open.
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            found = int(db.execute("PRAGMA user_version").fetchone()[0])
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        unreadable = NotADatabase.of(path, exc)
        if unreadable is not None:
            return CheckResult.setup(name, unreadable_database(settings, unreadable))
        return CheckResult(name, False, f"cannot open {path}: {exc}")
    if found > SCHEMA_VERSION:
        return CheckResult(name, False, str(DatabaseTooNew(found, SCHEMA_VERSION)), failure_code=2)
    if found < SCHEMA_VERSION:
        return CheckResult(name, True, f"schema {found}; the next start upgrades it to {SCHEMA_VERSION}")
    return CheckResult(name, True, f"schema {found}")


def _schema_result(name: str, found: int, where: str) -> CheckResult:
    if found > SCHEMA_VERSION:
        return CheckResult(name, False, str(DatabaseTooNew(found, SCHEMA_VERSION)), failure_code=2)
    if found == 0:
        return CheckResult(name, True, f"schema {SCHEMA_VERSION} will be created in {where}")
    if found < SCHEMA_VERSION:
        return CheckResult(name, True, f"schema {found}; the next start upgrades it to {SCHEMA_VERSION}")
    return CheckResult(name, True, f"schema {found}")


async def check_postgres(url: str, shown: str) -> CheckResult:
    """Connect and read the schema version: never migrates (other processes may be running on it)."""
    from bot.store.postgres import PostgresDatabase  # asyncpg is loaded only for a PostgreSQL database

    name = "database"
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            database = await PostgresDatabase.open(url, min_size=1, max_size=1)
    except TimeoutError:
        return CheckResult(name, False, f"cannot reach {shown}: no answer within {CHECK_SECONDS:.0f} s")
    except StoreUnavailable as exc:
        return CheckResult(name, False, str(exc))
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            found = await database.schema_version()
    except (StoreUnavailable, TimeoutError) as exc:
        return CheckResult(name, False, f"cannot read {shown}: {exc or 'no answer in time'}")
    finally:
        await database.close()
    return _schema_result(name, found, shown)


def check_videos(directory: Path) -> CheckResult:
    name = "videos"
    problem = folder_problem("VIDEO_STORAGE_DIR", directory)
    if problem is not None:
        return CheckResult.setup(name, problem)
    free = shutil.disk_usage(nearest_existing(directory)).free
    free_text = f"{free / 1024**3:.1f} GiB free"
    if free < MIN_FREE_BYTES:
        return CheckResult(name, False, f"{directory}: only {free // 1024**2} MiB free")
    created = "" if directory.exists() else ", will be created"
    return CheckResult(name, True, f"{directory}, {free_text}{created}")


def check_heartbeat(settings: Settings) -> CheckResult:
    problem = heartbeat_problem(settings)
    if problem is not None:
        return CheckResult.setup("heartbeat", problem)
    return CheckResult("heartbeat", True, str(settings.heartbeat_path))


async def check_metrics(settings: Settings) -> CheckResult:
    """The /metrics port is free, or served by a bot of these settings that runs now."""
    name = "metrics"
    where = f"{settings.metrics_host}:{settings.metrics_port}"
    problem = port_problem(settings)
    if problem is None:
        return CheckResult(name, True, f"{where} is free for /metrics")
    if await _serves_our_metrics(f"http://{where}/metrics"):
        return CheckResult(name, True, f"{where} serves a running bot's /metrics")
    return CheckResult.setup(name, problem)


async def _serves_our_metrics(url: str) -> bool:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            async with session.get(url) as response:
                return response.status == 200 and _OWN_METRIC in await response.read()
    except (aiohttp.ClientError, TimeoutError):
        return False


def check_models(settings: Settings) -> tuple[CheckResult, Catalogue | None]:
    """The model catalogue: MODELS_FILE read and valid (every problem named, one a line), or the built-in model."""
    name = "models"
    try:
        catalogue = catalogue_of(settings)
    except CatalogueError as exc:
        count = len(exc.problems)
        return CheckResult(name, False, f"{exc.source}: {count} problem{'s' if count != 1 else ''}",
                           failure_code=2, problems=tuple(exc.problems)), None
    default = catalogue.default
    source = str(settings.models_file) if settings.models_file is not None else "built in"
    count_text = f"{len(catalogue)} model{'s' if len(catalogue) != 1 else ''}"
    return CheckResult(name, True, f"{source}: {count_text}; default {default.id} at "
                                   f"{yen(catalogue.price_of(default.id), EN)}"), catalogue


def key_shown(key: str) -> str:
    """The key as `check` names it: its masked end, or its length when too short to show any of it."""
    masked = mask_key(key)
    return f"key {masked}" if masked != "…" else f"key of {len(key)} characters (too short to show its end)"


async def check_video_service(settings: Settings, catalogue: Catalogue | None = None) -> CheckResult:
    """The key's spend and budget; with a catalogue, also how many videos of its default model it pays for."""
    name = "video service"
    seconds = min(settings.http_timeout_seconds, CHECK_SECONDS)
    async with aiohttp.ClientSession() as session:
        client = build_client(settings, session, paced=False, read_retry=NO_RETRY, timeout_seconds=seconds)
        try:
            async with asyncio.timeout(seconds + 1):  # a bound on the whole, whatever the client does
                info = await client.key_info()
        except TimeoutError:
            return CheckResult(name, False, f"cannot reach {settings.video_api_base_url}: timed out")
        except Rejected as exc:
            if exc.status in (401, 403):
                return CheckResult(name, False, f"the key was refused (HTTP {exc.status}): {exc.reason}")
            return CheckResult(name, False, f"the service answered HTTP {exc.status}: {exc.reason}")
        except (RateLimited, ServerError, ProtocolError) as exc:
            return CheckResult(name, False, str(exc))
        except VideoServiceError as exc:
            return CheckResult(name, False, f"cannot reach {settings.video_api_base_url}: "
                                            f"{describe_connection_error(exc)}")
    key = key_shown(settings.video_api_key)
    if info.max_budget is None or info.available is None:
        return CheckResult(name, True, f"{key}; spent {yen(info.spend, EN)}, no budget limit")
    balance = f"spent {yen(info.spend, EN)} of {yen(info.max_budget, EN)}; available {yen(info.available, EN)}"
    if catalogue is None:
        return CheckResult(name, True, f"{key}; {balance}")
    price = catalogue.price_of(catalogue.default_id)
    affordable = max(0, info.available) // price
    balance += f" ({affordable} video{'s' if affordable != 1 else ''} at {yen(price, EN)})"
    if info.available < price:
        return CheckResult(name, False, f"{key}; {balance}: the budget cannot pay for one more video")
    return CheckResult(name, True, f"{key}; {balance}")


#: What `check` says of each answer of the trust model's `public_bot` that lets the bot start.
_PUBLIC_BOT_SHOWN = {
    trust.PublicBot.PRIVATE: "Public Bot off",
    trust.PublicBot.LISTED: "Public Bot on; only the servers in ALLOWED_GUILD_IDS are served",
    trust.PublicBot.ACCEPTED: "Public Bot on and no ALLOWED_GUILD_IDS: ALLOW_PUBLIC_BOT_SPENDING lets any server "
                              "spend the key",
}


async def check_discord(settings: Settings) -> CheckResult:
    name = "discord"
    try:
        login = await discord_login(settings.discord_token, min(settings.http_timeout_seconds, CHECK_SECONDS))
    except discord.LoginFailure:
        return CheckResult(name, False, f"{TOKEN_REFUSED} (HTTP 401)")
    except discord.HTTPException as exc:
        return CheckResult(name, False, f"Discord answered HTTP {exc.status}")
    except NETWORK_ERRORS as exc:
        return CheckResult(name, False, f"cannot reach Discord: {describe_connection_error(exc)}")
    verdict = trust.public_bot(bot_public=login.bot_public, allowed_guild_ids=settings.allowed_guild_ids,
                               accepted=settings.allow_public_bot_spending)
    if verdict is trust.PublicBot.REFUSED:
        # The bot would not start: as for a database from a newer bot, exit 2.
        return CheckResult(name, False, trust.PUBLIC_BOT_REFUSAL, failure_code=2)
    return CheckResult(name, True, f"logged in as {login.user}; {_PUBLIC_BOT_SHOWN[verdict]}")


async def check(settings: Settings) -> int:
    """One line per check, each printed as it finishes; exit 1 if any failed, 2 if the bot would refuse to start:
    a mistake in the set-up, a database from a newer bot, a bad models file, a public application with no server
    list."""
    results: list[CheckResult] = []

    def report(result: CheckResult) -> None:
        print(result.line(), flush=True)
        results.append(result)

    async def step(name: str, work: Callable[[], Awaitable[CheckResult]]) -> None:
        try:
            result = await work()
        except SetupError as exc:
            result = CheckResult.setup(name, exc)
        except Exception as exc:  # one check's surprise must not hide the checks after it
            log.debug("check %s failed unexpectedly", name, exc_info=True)
            result = CheckResult(name, False, f"unexpected {type(exc).__name__}: {exc}")
        report(result)

    catalogue: Catalogue | None = None  # the video service's line counts videos at the default model's price

    async def settings_step() -> CheckResult:
        return check_settings(settings)

    async def models_step() -> CheckResult:
        nonlocal catalogue
        result, catalogue = check_models(settings)
        return result

    url = settings.database_url
    steps: list[tuple[str, Callable[[], Awaitable[CheckResult]]]] = [
        ("settings", settings_step),
        ("models", models_step),
        ("database", (lambda: check_postgres(url, settings.database_shown)) if url is not None
         else (lambda: asyncio.to_thread(check_database, settings))),
        ("videos", lambda: asyncio.to_thread(check_videos, settings.video_storage_dir)),
    ]
    if settings.heartbeat_path is not None:
        steps.append(("heartbeat", lambda: asyncio.to_thread(check_heartbeat, settings)))
    if settings.metrics_port is not None:
        steps.append(("metrics", lambda: check_metrics(settings)))
    steps += [("video service", lambda: check_video_service(settings, catalogue)),
              ("discord", lambda: check_discord(settings))]
    for name, work in steps:
        await step(name, work)
    failures = [result for result in results if not result.ok]
    if failures:
        print(f"check failed: {', '.join(f.name for f in failures)}", file=sys.stderr)
        return max(f.failure_code for f in failures)
    print("check: OK", flush=True)
    return 0
