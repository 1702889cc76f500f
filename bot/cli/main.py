"""The command line: `python -m bot [command]`, one module of bot/cli per command."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import textwrap
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bot.cli.backup import backup
from bot.cli.check import check
from bot.cli.common import version
from bot.cli.demo import DEFAULT_OUT_ENV, default_out_dir, demo
from bot.cli.migrate_db import migrate_db
from bot.cli.pause import pause
from bot.cli.run import run, startup_line
from bot.cli.sync import sync
from bot.community.trust import PublicBotRefused
from bot.config.settings import Settings, SettingsError, load_settings
from bot.core.host import SetupError
from bot.ops.logs import hold_logs, setup_logging
from bot.service.catalogue import CatalogueError
from bot.store.instance_lock import AlreadyRunning
from bot.store.jobs import DatabaseTooNew, StoreUnavailable
from bot.store.leases import ShardsTaken

log = logging.getLogger("bot")

PROG = "python -m bot"
#: Exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130

SETTINGS = (
    "Settings come from environment variables and from the file .env in the folder the command starts in "
    "(environment variables win); .env.example lists them, docs/configuration.md explains them. "
    "`check` and the first line of `run`'s log name the .env read, and a settings error names it, or where one "
    "was looked for."
)
EXIT_CODES = "Exit status: 0 {done}; 1 {failure}; 2 a mistake in the settings or the set-up, named in one line{ctrl_c}."
#: What Ctrl-C ends a command with: `run` stops cleanly on it, as on SIGTERM; the others are interrupted.
_INTERRUPTED = "; 130 interrupted (Ctrl-C)"


def exit_codes(command: str | None, failure: str) -> str:
    if command == "run":
        return EXIT_CODES.format(done="stopped by Ctrl-C or SIGTERM (a clean stop)", failure=failure, ctrl_c="")
    if command is None:  # the top help, for every command
        return EXIT_CODES.format(done="done", failure=failure,
                                 ctrl_c=f"{_INTERRUPTED}, except `run`, which stops cleanly on it (0)")
    return EXIT_CODES.format(done="done", failure=failure, ctrl_c=_INTERRUPTED)

#: Each command: its one line for the top help, what its own --help says, and what exit status 1 means for it.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("run the bot until stopped (the default)",
            "Run the bot: connect to Discord, answer its commands, and post the videos. Stops cleanly on Ctrl-C "
            "or SIGTERM (docker stop). While Discord cannot be reached it retries, one line per attempt.",
            "Discord refused the token, or stayed unreachable for a day"),
    "sync": ("register the slash commands with Discord now, then exit",
             "Log in, register the slash commands with Discord (globally, or in DISCORD_GUILD_ID only), and exit. "
             "`run` does this by itself when the commands changed; use this after changing DISCORD_GUILD_ID or "
             "the models. Not beside a running bot on the same SQLite database.",
             "Discord refused the token or cannot be reached"),
    "check": ("check the settings, folders, database, video service and Discord; changes nothing",
              "Check the set-up, one line per part as it finishes: the settings and the .env read, the models, "
              "the database, the folders and port the bot writes or listens on, the video service (the key, the "
              "budget) and Discord (the token). Each check gives up after about 10 seconds. Changes nothing; "
              "safe beside a running bot.",
              "a check failed"),
    "backup": ("copy the SQLite database to a file or folder, also while the bot runs",
               "Copy the SQLite database with SQLite's online backup, safe while the bot runs. PATH is a file, or "
               "a folder (an existing one, or one ending in /, created if missing) that gets a file stamped with "
               "the time in UTC, whose names sort oldest first. An existing file is never replaced without "
               "--force. For PostgreSQL use pg_dump.",
               "the copy failed"),
    "pause": ("stop spending (/video, Re-roll, Confirm, Generate) in every server until `resume`",
              "Stop all spending in every server (/video, Re-roll, Confirm, Generate) until `resume`, kept in the "
              "database: a running bot obeys at once, and the pause outlives restarts. Requests already accepted "
              "go on; reading, settings, Delete and Cancel stay open.",
              "the database cannot be reached"),
    "resume": ("end the pause: spending works again in every server",
               "End the pause that `pause` set: spending works again in every server at once, without a restart.",
               "the database cannot be reached"),
    "demo": ("watch the bot serve a /video against local stand-ins: no account, no key, no cost",
             "Run the real bot against local stand-ins for Discord and the video service and narrate one "
             "member's /video, /status and /balance; saves the video it posted. Needs no settings, account or "
             f"key, and ignores .env. The folder for the video: --out, else ${DEFAULT_OUT_ENV}, else "
             "./demo-output.",
             "a step of the demo did not happen (the reason and the bot's last log lines are printed)"),
    "migrate-db": ("copy the SQLite history into an empty PostgreSQL database",
                   "Copy the whole SQLite history (every request, the ledger, the servers' settings) into an "
                   "empty PostgreSQL database, then check the copy. Stop the bot first. Its password is never "
                   "printed.",
                   "the copy was refused (the target is not empty) or failed"),
}


def _command_list() -> str:
    width = max(map(len, COMMANDS))
    return "\n".join(f"  {name:<{width}}  {line}" for name, (line, _, _) in COMMANDS.items())


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def _wrapped(text: str) -> str:
    return "\n\n".join(textwrap.fill(part, 100) for part in text.split("\n\n"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, formatter_class=_formatter,
        description="The video-request bot for Discord, and the tools to look after it.\n\ncommands:\n"
                    + _command_list(),
        epilog=_wrapped(f"`{PROG} COMMAND --help` tells more of each.\n\n{SETTINGS}\n\n"
                        + exit_codes(None, "a failure the command names")),
    )
    parser.add_argument("--version", action="version", version=f"video-request-bot {version()}")
    commands = parser.add_subparsers(dest="command", metavar="command", help="one of the commands above (default: run)")
    made: dict[str, argparse.ArgumentParser] = {}
    for name, (_line, description, failure) in COMMANDS.items():
        made[name] = commands.add_parser(
            name, formatter_class=_formatter, description=_wrapped(description),
            epilog=_wrapped(("" if name == "demo" else SETTINGS + "\n\n") + exit_codes(name, failure)),
        )
    # A str, not a Path: Path drops the trailing slash that says "a folder".
    made["backup"].add_argument("path", metavar="PATH",
                                help="the backup file, or a folder for a time-stamped one")
    made["backup"].add_argument("--force", action="store_true", help="replace PATH if it is an existing file")
    made["demo"].add_argument("--out", type=Path, default=None, metavar="DIR",
                              help=f"where to save the demo's video (default: {default_out_dir()})")
    made["migrate-db"].add_argument(
        "--to", required=True, metavar="postgresql://USER:PASSWORD@HOST:PORT/DATABASE",
        help="the empty PostgreSQL database (its password is never printed)")
    made["migrate-db"].add_argument("--from", dest="source", type=Path, metavar="PATH",
                                    help="the SQLite file (default: DATABASE_PATH); the bot must be stopped")
    return parser


def _runner(args: argparse.Namespace) -> Callable[[Settings], Coroutine[Any, Any, int]]:
    command = args.command or "run"
    if command == "backup":
        return lambda settings: backup(settings, args.path, force=args.force)
    if command in ("pause", "resume"):
        return lambda settings: pause(settings, on=command == "pause")
    runners: dict[str, Callable[[Settings], Coroutine[Any, Any, int]]] = {"run": run, "sync": sync, "check": check}
    return runners[command]


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C is how a person stops a command: one line, no traceback.
        print(f"{PROG}: interrupted", file=sys.stderr)
        return INTERRUPTED


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("demo", "migrate-db"):  # neither reads the bot's settings: the demo has its own
        try:
            if args.command == "demo":
                return demo(args.out)
            return migrate_db(args.to, args.source)
        except OSError as exc:
            if exc.filename is None:
                raise
            # A file or folder the command's own checks did not foresee: still one line, naming it.
            print(f"{PROG} {args.command}: {_cannot_use(exc)}; give this user access to it, or choose another path",
                  file=sys.stderr)
            return 2
    # Until the settings name the log's level and format, records are held, then written in that format.
    held = hold_logs(logging.INFO)
    try:
        settings = load_settings()
    except SettingsError as exc:
        setup_logging(logging.INFO)
        held.replay()
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    setup_logging(settings.log_level, settings.log_format,
                  secrets=(settings.video_api_key, settings.discord_token, *settings.database_secrets))
    if (args.command or "run") == "run":
        log.info("%s", startup_line(settings))  # the log's first line says what runs, with what
    held.replay()
    try:
        return asyncio.run(_runner(args)(settings))
    except (SetupError, DatabaseTooNew, CatalogueError, AlreadyRunning, ShardsTaken, PublicBotRefused) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except StoreUnavailable as exc:  # PostgreSQL unreachable: the message shows its address without the password
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.filename is None:
            raise
        # A file or folder of the host's that no check above foresaw: still one line, naming it.
        print(f"{PROG}: {_cannot_use(exc)}; `{PROG} check` tells what else is wrong", file=sys.stderr)
        return 2


def _cannot_use(error: OSError) -> str:
    return f"cannot use {error.filename} ({error.strerror or type(error).__name__})"
