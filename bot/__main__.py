"""`python -m bot [run|sync|check|backup PATH|migrate-db --to URL]`: start the bot, force a command sync, check the
set-up, back up, move the SQLite history to PostgreSQL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import sqlite3
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import discord
import discord.http

from bot.app import build_client, catalogue_of, create_bot, open_store
from bot.config.database_url import password_of
from bot.config.settings import Settings, SettingsError, load_settings
from bot.core.errors import ProtocolError, RateLimited, Rejected, ServerError, VideoServiceError
from bot.core.retry import NO_RETRY, RetryPolicy
from bot.core.tasks import cancel_and_wait
from bot.frontend.bot import VideoBot
from bot.frontend.i18n import EN, yen
from bot.ops.logs import setup_logging
from bot.service.catalogue import Catalogue, CatalogueError
from bot.service.transport import mask_key
from bot.store.copy_to_postgres import MigrateRefused, migrate_database
from bot.store.instance_lock import AlreadyRunning, single_process
from bot.store.jobs import SCHEMA_VERSION, DatabaseTooNew, StoreUnavailable, meta
from bot.store.leases import ShardsTaken

log = logging.getLogger("bot")

_T = TypeVar("_T")

#: Waits between attempts to reach Discord at start. Network failures are retried for ever (only
#: `delay` is used): a bot that is down should come back by itself when the network does.
# Bounded like every retry: a day of trying (a minute apart at most), then exit 1 for the supervisor.
DISCORD_START_RETRY = RetryPolicy(attempts=2_000, deadline=24 * 3600, base_delay=1.0, max_delay=60.0)
#: Failures that mean "Discord cannot be reached now", as opposed to a bad token or a bug.
NETWORK_ERRORS: tuple[type[BaseException], ...] = (
    aiohttp.ClientError,
    ConnectionError,
    socket.gaierror,
    TimeoutError,
    discord.GatewayNotFound,
    discord.DiscordServerError,
)
#: Below this, `check` fails the video directory: a video is a few MB, the database grows too.
MIN_FREE_BYTES = 200 * 1024 * 1024
_TOKEN_REFUSED = "Discord refused DISCORD_TOKEN"


def version() -> str:
    try:
        return metadata.version("video-request-bot")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def describe_connection_error(error: BaseException) -> str:
    """Why a connection failed, in the operator's words; looks through the chain of causes."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (aiohttp.ClientSSLError, ssl.SSLError)):
            return "TLS failed"
        if isinstance(current, socket.gaierror):
            return "the name did not resolve in DNS"
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, TimeoutError):  # asyncio's and aiohttp's timeouts included
            return "timed out"
        if isinstance(current, aiohttp.ClientConnectorError):
            current = current.os_error  # the socket's own error says which
            continue
        if isinstance(current, aiohttp.ServerDisconnectedError):
            return "the server closed the connection"
        current = current.__cause__ or current.__context__
    if isinstance(error, discord.HTTPException):
        return f"HTTP {error.status}"
    if isinstance(error, discord.GatewayNotFound):
        return "no gateway address"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__


async def discord_login(token: str, seconds: float) -> str:
    """Log in over HTTP only (GET /users/@me) and close: a read-only proof that the token works.

    Returns the bot's user name; raises discord.LoginFailure for a refused token.
    """
    http = discord.http.HTTPClient(asyncio.get_running_loop())
    try:
        async with asyncio.timeout(seconds):
            user = await http.static_login(token.strip())
    finally:
        await http.close()
    return user["username"]


async def until_stopped(work: Coroutine[Any, Any, _T], stopping: asyncio.Event) -> tuple[bool, _T | None]:
    """Run `work` unless `stopping` is set first (then cancel it): (finished, result)."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        return True, task.result()
    await cancel_and_wait(task)
    return False, None


async def open_database(settings: Settings) -> int:
    """Open (and migrate) the database before anything touches the network; returns its schema version."""
    store = await open_store(settings)
    try:
        return await store.schema_version()
    finally:
        await store.close()


def one_process(settings: Settings) -> contextlib.AbstractContextManager[None]:
    """SQLite serves one process: hold its file's lock. PostgreSQL serves several: nothing to hold."""
    if settings.database_url is not None:
        return contextlib.nullcontext()
    return single_process(settings.database_path)


async def run(settings: Settings) -> int:
    with one_process(settings):
        return await _run(settings)


async def _run(settings: Settings) -> int:
    await open_database(settings)  # a database from a newer bot stops us here, not after logging in
    catalogue = catalogue_of(settings)  # and so does a bad models file
    stopping = asyncio.Event()
    bots: list[VideoBot] = []  # the bot of the current attempt
    closing: set[asyncio.Task[None]] = set()

    def stop(signame: str) -> None:
        # `docker stop` sends SIGTERM: close cleanly, in order, instead of dying mid-write.
        log.info("%s received; shutting down", signame)
        stopping.set()
        for bot in bots:
            task = asyncio.create_task(bot.close())
            closing.add(task)
            task.add_done_callback(closing.discard)

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig.name)
    attempt = 0
    started = time.monotonic()
    while not stopping.is_set():
        try:
            # HTTP login first: one clear line while Discord is unreachable, and no bot to tear down.
            finished, _ = await until_stopped(discord_login(settings.discord_token, settings.http_timeout_seconds),
                                              stopping)
            if not finished or stopping.is_set():
                break
            # commands.Bot cannot start again after close(): a fresh one for every attempt.
            bot = create_bot(settings, catalogue)
            bots[:] = [bot]
            async with bot:
                await bot.start(settings.discord_token)
            break  # start() returns once the bot was closed
        except discord.LoginFailure:
            log.error("%s: check it in the developer portal", _TOKEN_REFUSED)
            return 1
        except NETWORK_ERRORS as exc:
            if stopping.is_set():
                break
            attempt += 1
            delay = DISCORD_START_RETRY.delay(attempt)
            if not DISCORD_START_RETRY.allows(attempt, time.monotonic() - started, delay):
                log.error("cannot reach Discord (%s); gave up after %d attempts", describe_connection_error(exc),
                          attempt)
                return 1
            log.warning("cannot reach Discord (%s); retrying in %.0f s", describe_connection_error(exc), delay)
            await until_stopped(asyncio.sleep(delay), stopping)
        except Exception:
            if stopping.is_set():
                log.debug("start interrupted by shutdown", exc_info=True)  # close() cut it short
                break
            raise
    await asyncio.gather(*closing)
    return 0


async def sync(settings: Settings) -> int:
    # Syncing starts the bot's set-up, which recovers half-done requests: never beside a running bot.
    with one_process(settings):
        return await _sync(settings)


async def _sync(settings: Settings) -> int:
    await open_database(settings)
    bot = create_bot(settings, catalogue_of(settings), force_sync=True)
    async with bot:
        try:
            await bot.login(settings.discord_token)  # setup_hook runs here and syncs
        except discord.LoginFailure:
            log.error("%s: check it in the developer portal", _TOKEN_REFUSED)
            return 1
        except NETWORK_ERRORS as exc:
            log.error("cannot reach Discord (%s)", describe_connection_error(exc))
            return 1
    return 0


# -- check ---------------------------------------------------------------------------------------


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


async def check_discord(settings: Settings) -> CheckResult:
    name = "discord"
    try:
        user = await discord_login(settings.discord_token, settings.http_timeout_seconds)
    except discord.LoginFailure:
        return CheckResult(name, False, f"{_TOKEN_REFUSED} (HTTP 401)")
    except discord.HTTPException as exc:
        return CheckResult(name, False, f"Discord answered HTTP {exc.status}")
    except NETWORK_ERRORS as exc:
        return CheckResult(name, False, f"cannot reach Discord: {describe_connection_error(exc)}")
    return CheckResult(name, True, f"logged in as {user}")


async def check(settings: Settings) -> int:
    """One line per check; exit 1 if any failed (2 if the database is from a newer bot)."""
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


# -- backup --------------------------------------------------------------------------------------


class BackupError(Exception):
    pass


def backup_database(source: Path, destination: Path) -> tuple[Path, int]:
    """Copy `source` with SQLite's online backup API (safe while the bot writes); returns (path, schema).

    `destination` may be a directory (a dated name is chosen in it). The copy is written under a
    temporary name in the same directory and renamed, so a half-written backup never has the final name.
    """
    if not source.is_file():
        raise BackupError(f"no database at {source}")
    if destination.is_dir():
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        destination = destination / f"{source.stem}-{stamp}{source.suffix}"
    if destination.resolve() == source.resolve():
        raise BackupError("the backup must not overwrite the database itself")
    destination.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=".partial")
    os.close(fd)
    partial = Path(name)
    try:
        with contextlib.closing(sqlite3.connect(source, timeout=30)) as live, \
                contextlib.closing(sqlite3.connect(partial)) as copy:
            # All pages in one step: one consistent snapshot; WAL lets the bot keep writing meanwhile.
            live.backup(copy)
            # A backup is one self-contained file: no -wal or -shm appear beside it when it is opened.
            copy.execute("PRAGMA journal_mode=DELETE")
            schema = int(copy.execute("PRAGMA user_version").fetchone()[0])
            verdict = copy.execute("PRAGMA quick_check").fetchone()[0]
            if verdict != "ok":
                raise BackupError(f"the copy failed SQLite's quick_check: {verdict}")
        with partial.open("rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
    return destination, schema


async def backup(settings: Settings, destination: Path) -> int:
    if settings.database_url is not None:
        print(f"backup: the database is PostgreSQL ({settings.database_shown}): back it up with pg_dump",
              file=sys.stderr)
        return 1
    try:
        path, schema = await asyncio.to_thread(backup_database, settings.database_path, destination)
    except (BackupError, sqlite3.Error, OSError) as exc:
        print(f"backup failed: {exc}", file=sys.stderr)
        return 1
    print(f"backup: {path} (schema {schema})")
    return 0


async def pause(settings: Settings, *, on: bool) -> int:
    """The host's pause of /video in every server, kept in the database: the running bot obeys it at once."""
    store = await open_store(settings)
    try:
        if on:
            await store.set_meta(meta.HOST_PAUSE, str(time.time()))
        else:
            await store.delete_meta(meta.HOST_PAUSE)
    finally:
        await store.close()
    print("/video is paused in every server" if on else "/video is open again")
    return 0


# -- migrate-db ----------------------------------------------------------------------------------


def migrate_db(target_url: str, source: Path | None) -> int:
    """Copy the SQLite history (`source`, else DATABASE_PATH) into the empty PostgreSQL database at `target_url`."""
    setup_logging(logging.INFO, secrets=tuple(filter(None, [password_of(target_url)])))
    if source is None:
        try:
            source = load_settings().database_path
        except SettingsError as exc:
            print(f"python -m bot migrate-db: {exc} (or name the SQLite file with --from PATH)", file=sys.stderr)
            return 2
    try:
        report = asyncio.run(migrate_database(source, target_url))
    except (MigrateRefused, DatabaseTooNew, StoreUnavailable) as exc:
        print(f"python -m bot migrate-db: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1


# -- entry point ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"video-request-bot {version()}")
    commands = parser.add_subparsers(dest="command", metavar="command")
    commands.add_parser("run", help="run the bot (the default)")
    commands.add_parser("sync", help="force a slash-command sync")
    commands.add_parser("check", help="check the settings, the database, the disk, the video service and Discord")
    backup_parser = commands.add_parser("backup", help="copy the database while the bot may be running")
    backup_parser.add_argument("path", type=Path, help="the backup file, or a directory to put a dated one in")
    commands.add_parser("pause", help="refuse /video in every server until `resume` (no restart needed)")
    commands.add_parser("resume", help="end a pause of /video")
    demo_parser = commands.add_parser("demo", help="see the bot work against local stand-ins: no account, no key")
    demo_parser.add_argument("--out", type=Path, default=Path("demo-output"), metavar="DIR",
                             help="where to save the demo's video (default: %(default)s)")
    migrate_parser = commands.add_parser(
        "migrate-db", help="copy the SQLite database's whole history into an empty PostgreSQL database")
    migrate_parser.add_argument("--to", required=True, metavar="postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
                                help="the empty PostgreSQL database (its password is never printed)")
    migrate_parser.add_argument("--from", dest="source", type=Path, metavar="PATH",
                                help="the SQLite file (default: DATABASE_PATH); the bot must be stopped")
    args = parser.parse_args(argv)
    if args.command == "demo":
        # Imported here only: the normal start-up never loads the demo or its Discord stand-in.
        from bot.demo.launcher import main as demo_main

        return demo_main(args.out)
    if args.command == "migrate-db":
        return migrate_db(args.to, args.source)
    setup_logging(logging.INFO)  # until the settings say otherwise
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format,
                  secrets=(settings.video_api_key, settings.discord_token, *settings.database_secrets))
    command = args.command or "run"
    try:
        if command == "backup":
            return asyncio.run(backup(settings, args.path))
        if command in ("pause", "resume"):
            return asyncio.run(pause(settings, on=command == "pause"))
        runners = {"run": run, "sync": sync, "check": check}
        return asyncio.run(runners[command](settings))
    except (DatabaseTooNew, CatalogueError, AlreadyRunning, ShardsTaken) as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:  # PostgreSQL unreachable: the message shows its address without the password
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
