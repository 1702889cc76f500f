"""What a download serves: the MP4, read once, or the body a misbehaving service puts in its place
(``SimulatorConfig.download_body`` / ``download_oversize_bytes``), as blocks to stream in chunks."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from bot.simulator.config import SimulatorConfig

CHUNK_BYTES: Final = 64 * 1024
# Shared zero filler for oversized bodies, so no body is ever built in memory.
_FILLER: Final = bytes(CHUNK_BYTES)
# Box size 0 means "extends to the end of the file": the filler then looks like media data.
_MDAT_TO_EOF: Final = b"\x00\x00\x00\x00mdat"
_HTML_ERROR_PAGE: Final = (
    b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>502 Bad Gateway</h1><p>The storage backend did not answer.</p></body></html>"
)


@dataclass(frozen=True)
class DownloadPlan:
    """One download body: its type, its bytes (possibly produced lazily), the Content-Length to send
    (None: chunked) and whether to close the connection instead of ending the body."""

    content_type: str
    blocks: Iterable[bytes]
    content_length: int | None
    cut: bool = False


class VideoBodies:
    """The MP4 served for every completed job, and the bodies that may stand in for it."""

    def __init__(self, video: bytes) -> None:
        # Held in memory: downloads are streamed from it so every byte written can be counted.
        self.video = video
        self._ftyp = _ftyp_box(video)
        # Same length as the MP4, seeded so runs repeat; starts like no MP4 does.
        self._not_mp4 = b"NOT-MP4!" + random.Random(len(video)).randbytes(max(0, len(video) - 8))

    def plan(self, cfg: SimulatorConfig) -> DownloadPlan:
        """The MP4, or whatever `download_body` / `download_oversize_bytes` put in its place."""
        mode = cfg.download_body
        content_type = "video/mp4"
        blocks: Iterable[bytes] = (self.video,)
        size = len(self.video)
        if mode == "html":
            content_type, blocks, size = "text/html; charset=utf-8", (_HTML_ERROR_PAGE,), len(_HTML_ERROR_PAGE)
        elif mode == "json_error":
            error = json.dumps({"error": {"message": "video temporarily unavailable", "type": "api_error"}}).encode()
            content_type, blocks, size = "application/json; charset=utf-8", (error,), len(error)
        elif mode == "empty":
            blocks, size = (), 0
        elif mode == "truncated":
            half = self.video[: len(self.video) // 2]
            return DownloadPlan(content_type, (half,), content_length=len(self.video), cut=True)
        elif mode == "not_mp4_bytes":
            blocks, size = (self._not_mp4,), len(self._not_mp4)
        elif cfg.download_oversize_bytes is not None:
            size = cfg.download_oversize_bytes
            blocks = _oversize_blocks(self._ftyp, size)
        return DownloadPlan(content_type, blocks, content_length=size if cfg.download_send_length else None)


def _ftyp_box(video: bytes) -> bytes:
    """The file's leading ``ftyp`` box, or b"" if it does not start with one."""
    size = int.from_bytes(video[:4], "big")
    if video[4:8] == b"ftyp" and 8 <= size <= len(video):
        return video[:size]
    return b""


def _oversize_blocks(ftyp: bytes, total: int) -> Iterator[bytes]:
    """`total` bytes that start like an MP4: the real ftyp box, an mdat header, then zeros."""
    head = (ftyp + _MDAT_TO_EOF)[:total]
    yield head
    remaining = total - len(head)
    while remaining > 0:
        piece = _FILLER if remaining >= len(_FILLER) else _FILLER[:remaining]
        yield piece
        remaining -= len(piece)


def chunks(blocks: Iterable[bytes], size: int) -> Iterator[memoryview]:
    """`blocks` cut into views of at most `size` bytes, without copying."""
    for block in blocks:
        view = memoryview(block)
        for start in range(0, len(view), size):
            yield view[start : start + size]
