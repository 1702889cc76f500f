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

from bot.app import unreadable_database
from bot.config.settings import Settings
from bot.store.jobs import NotADatabase


class BackupError(Exception):
    pass


class BackupExists(BackupError):
    """The named file is there already: a backup never replaces one unless told to (--force)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path} exists already; name another file, a folder (for a time-stamped file), or pass "
                         "--force to replace it")


def names_a_folder(destination: Path | str) -> bool:
    """A folder that exists, or a path written with a trailing slash (a folder to create)."""
    text = str(destination)
    return text.endswith(("/", os.sep)) or Path(text).is_dir()


#: Backups of one second after the first: `_02` to `_99`. Two digits and `_` (after `.` in every byte order) keep
#: the names' order the order they were made in, so `ls | tail -n 1` is the newest.
_MAX_IN_ONE_SECOND = 99


def stamped(folder: Path, source: Path, now: datetime) -> Path:
    """A name in `folder` stamped with `now` (UTC) that no file has yet: `bot-20260502-090000.sqlite3`, then
    `bot-20260502-090000_02.sqlite3` for a second backup in the same second."""
    stamp = now.astimezone(UTC).strftime("%Y%m%d-%H%M%S")
    candidate = folder / f"{source.stem}-{stamp}{source.suffix}"
    number = 1
    while candidate.exists():
        number += 1
        if number > _MAX_IN_ONE_SECOND:
            raise BackupError(f"{folder} has {_MAX_IN_ONE_SECOND} backups of this second already; try again")
        candidate = folder / f"{source.stem}-{stamp}_{number:02d}{source.suffix}"
    return candidate


def backup_database(source: Path, destination: Path | str, *, force: bool = False) -> tuple[Path, int]:
    """Copy `source` with SQLite's online backup API (safe while the bot writes); returns (path, schema).

    `destination` may be a folder: an existing one, or a path ending in `/` (created); a time-stamped file is
    made in it. An existing file is replaced only with `force`. The copy is written under a temporary name in
    the same folder and then linked or renamed into place, so a half-written backup never has the final name.
    """
    if not source.is_file():
        raise BackupError(f"no database at {source}")
    if names_a_folder(destination):
        folder = Path(destination)
        folder.mkdir(parents=True, exist_ok=True)
        destination = stamped(folder, source, datetime.now(UTC))
    destination = Path(destination)
    if destination.resolve() == source.resolve():
        raise BackupError("the backup must not overwrite the database itself")
    if destination.exists() and not force:
        raise BackupExists(destination)
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
        if force:
            os.replace(partial, destination)
        else:
            try:
                os.link(partial, destination)  # never replaces a file that appeared meanwhile
            except FileExistsError:
                raise BackupExists(destination) from None
            except OSError:  # a file system without hard links: look, then rename
                if destination.exists():
                    raise BackupExists(destination) from None
                os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)
    return destination, schema


async def backup(settings: Settings, destination: Path | str, *, force: bool = False) -> int:
    if settings.database_url is not None:
        print(f"backup: the database is PostgreSQL ({settings.database_shown}): back it up with pg_dump",
              file=sys.stderr)
        return 1
    try:
        path, schema = await asyncio.to_thread(backup_database, settings.database_path, destination, force=force)
    except BackupExists as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        unreadable = NotADatabase.of(settings.database_path, exc)
        if unreadable is not None:
            raise unreadable_database(settings, unreadable) from None  # one line, exit status 2
        print(f"backup failed: {exc}", file=sys.stderr)
        return 1
    except (BackupError, OSError) as exc:
        print(f"backup failed: {exc}", file=sys.stderr)
        return 1
    print(f"backup: {path} (schema {schema})")
    return 0
