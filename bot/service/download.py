"""A finished video onto this host's disk: room checked first, streamed under a size cap to a partial file beside
its name, waited for on the disk, checked as an MP4, then renamed; nothing is left behind on failure, and a
partial file a killed process left is removed later (`remove_abandoned_downloads`).
"""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

import aiohttp

from bot.core.errors import DownloadTooLarge, InsufficientStorage, ServiceUnreachable
from bot.service.mp4 import check_mp4
from bot.service.transport import CHUNK_BYTES

DISK_MARGIN_BYTES = 16 * 1024 * 1024  # room left for the database and logs after a download
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _write(out: IO[bytes], data: bytes) -> None:
    # One seam for the tests: a full disk is hard to arrange for real.
    out.write(data)


def check_free_space(directory: Path, expected: int) -> None:
    free = shutil.disk_usage(directory).free
    needed = expected + DISK_MARGIN_BYTES
    if free < needed:
        raise InsufficientStorage(
            f"{free} bytes free in the video folder; a video of up to {expected} bytes needs {needed}",
            needed=needed, free=free,
        )


#: A download on its way to its name; one a kill -9 left behind is removed by `remove_abandoned_downloads`.
PARTIAL_SUFFIX = ".part"


def remove_abandoned_downloads(directory: Path, *, unwritten_for: float, now: float) -> int:
    """Delete the partial downloads in `directory` not written for `unwritten_for` seconds (a process killed
    mid-download leaves one; a download under way writes every few milliseconds). Returns how many."""
    removed = 0
    for partial in directory.glob(f".*{PARTIAL_SUFFIX}"):
        try:
            if now - partial.stat().st_mtime >= unwritten_for:
                partial.unlink()
                removed += 1
        except FileNotFoundError:
            continue  # finished (renamed) or removed by another process meanwhile
    return removed


async def save(response: aiohttp.ClientResponse, destination: Path, announced: int | None, max_bytes: int) -> int:
    """Stream the body to a temporary file beside `destination`, check it, then give it its name."""
    fd, name = tempfile.mkstemp(dir=destination.parent, prefix=f".{destination.name}.", suffix=PARTIAL_SUFFIX)
    partial = Path(name)
    size = 0
    saved = False
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                async for chunk in response.content.iter_chunked(CHUNK_BYTES):
                    size += len(chunk)
                    if size > max_bytes:
                        response.close()  # drop the connection: the rest is never read
                        raise DownloadTooLarge(size, max_bytes, announced=False)
                    _write(out, chunk)
            except aiohttp.ClientPayloadError as exc:
                # aiohttp's own word for a body cut short: name it, with what arrived.
                shown = f"{size} of {announced}" if announced is not None else f"{size}"
                raise ServiceUnreachable(f"the video download ended early ({shown} bytes)") from exc
            if announced is not None and size != announced:
                raise ServiceUnreachable(f"the video download ended early ({size} of {announced} bytes)")
            out.flush()
            # Waiting for the disk takes milliseconds per MiB: off the event loop, with the check and the
            # rename in the same trip to a thread (each trip wakes the loop once more).
            await asyncio.to_thread(_keep, out.fileno(), partial, destination)
            saved = True
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise InsufficientStorage(f"the disk filled up while saving the video ({size} bytes written)") from exc
        raise
    finally:
        if not saved:
            partial.unlink(missing_ok=True)
    return size


def _keep(fd: int, partial: Path, destination: Path) -> None:
    """On the disk for good, an MP4, then under its name (blocking: run in a thread)."""
    os.fsync(fd)
    check_mp4(partial)
    os.replace(partial, destination)
