"""`python -m bot migrate-db --to URL`: copy the SQLite history into an empty PostgreSQL database."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from bot.cli.preflight import reach_problem
from bot.config.database_url import password_of
from bot.config.settings import SettingsError, load_settings
from bot.ops.logs import setup_logging
from bot.store.copy_to_postgres import MigrateRefused, migrate_database
from bot.store.jobs import DatabaseTooNew, StoreUnavailable


def migrate_db(target_url: str, source: Path | None) -> int:
    """Copy the SQLite history (`source`, else DATABASE_PATH) into the empty PostgreSQL database at `target_url`."""
    setup_logging(logging.INFO, secrets=tuple(filter(None, [password_of(target_url)])))
    setting = "--from"
    if source is None:
        try:
            settings = load_settings()
        except SettingsError as exc:
            print(f"python -m bot migrate-db: {exc} (or name the SQLite file with --from PATH)", file=sys.stderr)
            return 2
        source, setting = settings.database_path, settings.database_setting
    problem = reach_problem(setting, source)
    if problem is not None:
        print(f"python -m bot migrate-db: {problem}", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(migrate_database(source, target_url))
    except (MigrateRefused, DatabaseTooNew, StoreUnavailable) as exc:
        print(f"python -m bot migrate-db: {exc}", file=sys.stderr)
        return 1
    for line in report.lines():
        print(line)
    return 0 if report.ok else 1
