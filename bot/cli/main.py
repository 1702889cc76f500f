"""`python -m bot [run|sync|check|backup PATH|migrate-db --to URL]`: start the bot, force a command sync, check the
set-up, back up, move the SQLite history to PostgreSQL."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from bot.cli.backup import backup
from bot.cli.check import check
from bot.cli.common import version
from bot.cli.demo import demo
from bot.cli.migrate_db import migrate_db
from bot.cli.pause import pause
from bot.cli.run import run
from bot.cli.sync import sync
from bot.community.trust import PublicBotRefused
from bot.config.settings import SettingsError, load_settings
from bot.ops.logs import setup_logging
from bot.service.catalogue import CatalogueError
from bot.store.instance_lock import AlreadyRunning
from bot.store.jobs import DatabaseTooNew, StoreUnavailable
from bot.store.leases import ShardsTaken


def build_parser() -> argparse.ArgumentParser:
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        return demo(args.out)
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
    except (DatabaseTooNew, CatalogueError, AlreadyRunning, ShardsTaken, PublicBotRefused) as exc:
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:  # PostgreSQL unreachable: the message shows its address without the password
        print(f"python -m bot: {exc}", file=sys.stderr)
        return 1
