"""One bot process per SQLite database: a second one on the same file is refused with a clear message.

SQLite serves one process here: two bots on one file would both recover, poll and post the same jobs.
The lock is an `flock` on a file beside the database, which the kernel releases when the process ends
however it ends (kill -9 included), so a crash never leaves the next start locked out.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from bot.core.errors import BotError
from bot.core.host import cannot_write


class AlreadyRunning(BotError):
    def __init__(self, database: Path, holder: str) -> None:
        self.database = database
        self.holder = holder
        who = f" (process {holder})" if holder else ""
        super().__init__(
            f"another bot process{who} is using {database}: SQLite serves one process. Stop it first; "
            "`pause`, `resume`, `backup` and `check` work beside a running bot"
        )


def lock_path(database: Path) -> Path:
    return database.with_name(database.name + ".lock")


@contextlib.contextmanager
def single_process(database: Path, *, setting: str = "DATABASE_PATH") -> Iterator[None]:
    """Hold the database's process lock for the duration; raises AlreadyRunning if another process holds it.

    `setting`: where the database's path came from (DATABASE_URL=sqlite:///… too), named in a SetupError.
    """
    path = lock_path(database)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a+", encoding="utf-8")
    except OSError as exc:
        # A folder or lock file left to root by a `sudo` run, a read-only mount: the host's to fix.
        try:
            folder = not path.parent.is_dir() or not path.exists()
        except OSError:  # not even its folder can be looked at
            folder = True
        raise cannot_write(setting, path.parent if folder else path, exc, folder=folder) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise AlreadyRunning(database, handle.read().strip()[:20]) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
