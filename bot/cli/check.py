"""`python -m bot check`: one line per part of the set-up (settings, models, database, disk, service, Discord)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import discord

from bot.app import build_client, catalogue_of
from bot.cli.common import NETWORK_ERRORS, TOKEN_REFUSED, describe_connection_error, discord_login
from bot.community import trust
from bot.config.settings import Settings
from bot.core.errors import ProtocolError, RateLimited, Rejected, ServerError, VideoServiceError
from bot.core.retry import NO_RETRY
from bot.frontend.i18n import EN, yen
from bot.service.catalogue import Catalogue, CatalogueError
from bot.service.transport import mask_key
from bot.store.jobs import SCHEMA_VERSION, DatabaseTooNew, StoreUnavailable

#: Below this, `check` fails the video directory: a video is a few MB, the database grows too.
MIN_FREE_BYTES = 200 * 1024 * 1024


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    #: The exit status this failure asks for: 2 when the bot must not run at all with this data.
    failure_code: int = 1

    def line(self) -> str:
        return f"{self.name}: OK ({self.detail})" if self.ok else f"{self.name}: FAILED: {self.detail}"


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def directory_problem(directory: Path) -> str | None:
    """Why the bot could not create files in `directory` (made if missing), or None."""
    existing = _nearest_existing(directory)
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        # Really write: permission bits, read-only mounts and quotas all show up here.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"{existing} is not writable ({exc.strerror or exc})"
    return None


def check_database(path: Path) -> CheckResult:
    name = "database"
    problem = directory_problem(path.parent)
    if problem is not None:
        return CheckResult(name, False, f"cannot write the database's directory: {problem}")
    if not path.exists():
        return CheckResult(name, True, f"schema {SCHEMA_VERSION} will be created at {path}")
    try:
        # Read-only: a check never migrates, and the running bot may hold the file open.
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            found = int(db.execute("PRAGMA user_version").fetchone()[0])
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
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
        database = await PostgresDatabase.open(url, min_size=1, max_size=1)
    except StoreUnavailable as exc:
        return CheckResult(name, False, str(exc))
    try:
        found = await database.schema_version()
    except StoreUnavailable as exc:
        return CheckResult(name, False, f"cannot read {shown}: {exc}")
    finally:
        await database.close()
    return _schema_result(name, found, shown)


def check_videos(directory: Path) -> CheckResult:
    name = "videos"
    problem = directory_problem(directory)
    if problem is not None:
        return CheckResult(name, False, f"cannot write VIDEO_STORAGE_DIR: {problem}")
    free = shutil.disk_usage(_nearest_existing(directory)).free
    free_text = f"{free / 1024**3:.1f} GiB free"
    if free < MIN_FREE_BYTES:
        return CheckResult(name, False, f"{directory}: only {free // 1024**2} MiB free")
    created = "" if directory.exists() else ", will be created"
    return CheckResult(name, True, f"{directory}, {free_text}{created}")


def check_models(settings: Settings) -> tuple[CheckResult, Catalogue | None]:
    """The model catalogue: MODELS_FILE read and valid (every problem named), or the built-in model."""
    name = "models"
    try:
        catalogue = catalogue_of(settings)
    except CatalogueError as exc:
        return CheckResult(name, False, f"{exc.source}: " + "; ".join(exc.problems), failure_code=2), None
    default = catalogue.default
    source = str(settings.models_file) if settings.models_file is not None else "built in"
    count = f"{len(catalogue)} model{'s' if len(catalogue) != 1 else ''}"
    return CheckResult(name, True, f"{source}: {count}; default {default.id} at "
                                   f"{yen(catalogue.price_of(default.id), EN)}"), catalogue


async def check_video_service(settings: Settings, catalogue: Catalogue | None = None) -> CheckResult:
    """The key's spend and budget; with a catalogue, also how many videos of its default model it pays for."""
    name = "video service"
    async with aiohttp.ClientSession() as session:
        client = build_client(settings, session, paced=False, read_retry=NO_RETRY)
        try:
            info = await client.key_info()
        except Rejected as exc:
            if exc.status in (401, 403):
                return CheckResult(name, False, f"the key was refused (HTTP {exc.status}): {exc.reason}")
            return CheckResult(name, False, f"the service answered HTTP {exc.status}: {exc.reason}")
        except (RateLimited, ServerError, ProtocolError) as exc:
            return CheckResult(name, False, str(exc))
        except VideoServiceError as exc:
            return CheckResult(name, False, f"cannot reach {settings.video_api_base_url}: "
                                            f"{describe_connection_error(exc)}")
    key = f"key {mask_key(settings.video_api_key)}"
    if info.max_budget is None or info.available is None:
        return CheckResult(name, True, f"{key}; spent {yen(info.spend, EN)}, no budget limit")
    balance = f"spent {yen(info.spend, EN)} of {yen(info.max_budget, EN)}; available {yen(info.available, EN)}"
    if catalogue is None:
        return CheckResult(name, True, f"{key}; {balance}")
    price = catalogue.price_of(catalogue.default_id)
    balance += f" ({max(0, info.available) // price} videos at {yen(price, EN)})"
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
        login = await discord_login(settings.discord_token, settings.http_timeout_seconds)
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
    """One line per check; exit 1 if any failed (2 if the bot would refuse to start: a database from a newer bot, a
    bad models file, a public application with no server list)."""
    print(f"settings: OK (service {settings.video_api_base_url}, database {settings.database_shown})", flush=True)
    models, catalogue = check_models(settings)
    print(models.line(), flush=True)
    url = settings.database_url
    steps: list[Callable[[], Awaitable[CheckResult]]] = [
        (lambda: check_postgres(url, settings.database_shown)) if url is not None
        else (lambda: asyncio.to_thread(check_database, settings.database_path)),
        lambda: asyncio.to_thread(check_videos, settings.video_storage_dir),
        lambda: check_video_service(settings, catalogue),
        lambda: check_discord(settings),
    ]
    failures: list[CheckResult] = [] if models.ok else [models]
    for step in steps:
        result = await step()
        print(result.line(), flush=True)
        if not result.ok:
            failures.append(result)
    if failures:
        print(f"check failed: {', '.join(f.name for f in failures)}", file=sys.stderr)
        return max(f.failure_code for f in failures)
    print("check: OK")
    return 0
