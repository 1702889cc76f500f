"""`python -m bot backup PATH`: a consistent copy of the live SQLite database, safe while the bot runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from bot.config.settings import Settings


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
