"""The run before this one on the same data folder, known for certain: a container restarted in place knows its
predecessor.

Restarted by Docker's restart policy, a container runs as PID 1 again in a new PID namespace, where its
predecessor's pid says nothing (bot/store/leases.py `owner_gone`); its data volume is the same. A process that
runs shards keeps its owner id in `.owner` in VIDEO_STORAGE_DIR under an `flock` held while it runs, which the
kernel releases when the process ends however it ends (kill -9 included). The next process that gets the lock reads
the id left there: that process has ended. It is trusted only when it was started since this machine's last boot,
so a folder on a network disk whose locks do not reach other machines proves nothing.

A live process already holding the lock (two processes sharing one folder) leaves the next one no predecessor:
it waits for heartbeats as before.
"""

from __future__ import annotations

import fcntl
import logging
from pathlib import Path
from typing import IO

from bot.store.leases import same_boot

log = logging.getLogger(__name__)

RECORD_NAME = ".owner"


class OwnerRecord:
    """This process's hold on its data folder's owner record, and the predecessor it found there."""

    def __init__(self, predecessor: str | None, handle: IO[str] | None = None) -> None:
        self.predecessor = predecessor
        self._handle = handle

    @classmethod
    def take(cls, folder: Path, owner: str) -> OwnerRecord:
        """Lock `folder`'s record and write `owner` in it; the predecessor is the owner it held, if it was free and
        that owner was started since this boot. Never raises: without a record, crashed runs are waited out."""
        path = folder / RECORD_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = path.open("a+", encoding="utf-8")
        except OSError as exc:
            log.warning("cannot keep this process's owner id in %s (%s): after a crash, the next start in a new PID "
                        "namespace waits for this one's heartbeat to go silent", path, exc.strerror or exc)
            return cls(None)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # held by a live process sharing this folder (or locks unsupported): no predecessor known
            handle.close()
            log.info("another live process keeps its owner id in %s: no predecessor of this one is known", path)
            return cls(None)
        try:
            handle.seek(0)
            recorded = handle.read().strip()
            handle.seek(0)
            handle.truncate()
            handle.write(owner)
            handle.flush()
        except (OSError, UnicodeDecodeError) as exc:
            handle.close()
            log.warning("cannot keep this process's owner id in %s (%s)", path, exc)
            return cls(None)
        return cls(recorded if recorded and same_boot(recorded) else None, handle)

    def close(self) -> None:
        """Let the lock go (the record stays: the next start reads it)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
